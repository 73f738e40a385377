//! The `post-receive` hook `backflow serve` installs in the bare repository it creates, so a
//! `git push` to it is noticed at once: for every ref the push updated, the hook has the
//! `backflow push-notice` command post a signed generic-hmac delivery to the receiver.

use std::path::Path;

use serde_json::json;

/// One line of a `post-receive` hook's input: `<old> <new> <ref>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    /// The ref's tip before the push (all zeros: created).
    pub before: String,
    /// The ref's tip after the push (all zeros: deleted).
    pub after: String,
    /// The full ref name.
    pub name: String,
}

impl RefUpdate {
    /// Reads one input line; `None` for a line that is not three fields.
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let update = Self {
            before: fields.next()?.to_string(),
            after: fields.next()?.to_string(),
            name: fields.next()?.to_string(),
        };
        fields.next().is_none().then_some(update)
    }

    /// The delivery body for this update of `repository` (a URL the provider would use).
    #[must_use]
    pub fn body(&self, repository: &str) -> Vec<u8> {
        json!({
            "ref": self.name,
            "before": self.before,
            "after": self.after,
            "repository": {"clone_url": repository},
        })
        .to_string()
        .into_bytes()
    }
}

/// The hook script: runs `backflow push-notice` and never fails the push, whatever happens
/// (backflow stopped, binary moved).
#[must_use]
pub fn post_receive_script(
    backflow: &Path,
    url: &str,
    token_file: &Path,
    repository: &str,
) -> String {
    format!(
        "#!/bin/sh\n\
         # Installed by `backflow serve` (rewritten on every start): tells backflow's receiver\n\
         # that somebody pushed, so it reads the branch at once. Never fails the push.\n\
         {} push-notice --url {} --token-file {} --repository {} || true\n\
         exit 0\n",
        quoted(&backflow.to_string_lossy()),
        quoted(url),
        quoted(&token_file.to_string_lossy()),
        quoted(repository),
    )
}

/// A webhook secret made of `random` bytes, as hex (safe in headers, files and Secrets).
#[must_use]
pub fn token_from(random: &[u8]) -> String {
    super::path::hex(random)
}

/// `s` as one single-quoted shell word.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_lines_parse_and_become_push_bodies() {
        let line = format!("{} {} refs/heads/main", "0".repeat(40), "a".repeat(40));
        let update = RefUpdate::parse(&line).unwrap();
        assert_eq!(update.name, "refs/heads/main");
        let body: serde_json::Value =
            serde_json::from_slice(&update.body("file:///r.git")).unwrap();
        assert_eq!(body["after"], "a".repeat(40));
        assert_eq!(body["repository"]["clone_url"], "file:///r.git");
        assert_eq!(RefUpdate::parse("only two"), None);
        assert_eq!(RefUpdate::parse("a b c d"), None);
    }

    #[test]
    fn the_script_quotes_every_argument() {
        let script = post_receive_script(
            Path::new("/opt/back flow/backflow"),
            "http://127.0.0.1:9292/git-push/ab",
            Path::new("/data/it's/receiver-token"),
            "file:///data/origin.git",
        );
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(
            script.contains("'/opt/back flow/backflow' push-notice"),
            "{script}"
        );
        assert!(
            script.contains(r"'/data/it'\''s/receiver-token'"),
            "{script}"
        );
        assert!(script.contains("|| true\nexit 0\n"));
    }
}
