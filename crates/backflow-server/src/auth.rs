//! Who a request is: bearer tokens and the users they stand for.
//!
//! Two sources, as kube-apiserver has them: the server's own token (the one its kubeconfig
//! carries, user `admin`), and a static token file (`--token-auth-file`) in kube-apiserver's
//! format, one user per line: `token,user,uid,"group1,group2"`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// The user the server's own token (its kubeconfig's) stands for.
pub const ADMIN_USER: &str = "admin";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name, as commits and logs show it.
    pub name: Arc<str>,
    /// A stable identifier.
    pub uid: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// Backflow itself, as its own requests of its embedded server are audited: in
    /// `system:masters`, as kube-apiserver's own loopback client is.
    #[must_use]
    pub fn backflow() -> Self {
        Self {
            name: "system:backflow".into(),
            uid: String::new(),
            groups: vec![crate::rbac::MASTERS.into()],
        }
    }
}

/// The user a verified client certificate names, attached to each request of its connection.
#[derive(Debug, Clone)]
pub(crate) struct CertificateUser(pub(crate) UserInfo);

/// A line of a token file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line is not `token,user,uid[,"groups"]`.
    #[error("{path}:{line}: {problem}; each line is token,user,uid[,\"group1,group2\"]")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The file names no user.
    #[error("the token file {path} names no user")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// The tokens the server accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Vec<(String, UserInfo)>,
}

impl Tokens {
    /// Accepts `token` as the server's own user, [`ADMIN_USER`] (group `system:masters`).
    pub fn add_admin(&mut self, token: &str) {
        self.entries.push((
            token.to_string(),
            UserInfo {
                name: ADMIN_USER.into(),
                uid: ADMIN_USER.into(),
                groups: vec!["system:masters".into()],
            },
        ));
    }

    /// Reads a token file in kube-apiserver's format. Blank lines and lines starting with `#`
    /// are skipped; a token named twice is refused (kube-apiserver keeps the last with a
    /// warning, which hides a mistake).
    pub fn read_file(&mut self, path: &Path) -> Result<(), TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let before = self.entries.len();
        for (index, line) in text.lines().enumerate() {
            let bad = |problem: String| TokenFileError::Line {
                path: path.to_path_buf(),
                line: index + 1,
                problem,
            };
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fields = csv_fields(trimmed).map_err(bad)?;
            let [token, user, uid, rest @ ..] = fields.as_slice() else {
                return Err(bad(format!(
                    "{} columns, at least 3 are needed",
                    fields.len()
                )));
            };
            if token.is_empty() || user.is_empty() {
                return Err(bad("the token and the user must not be empty".into()));
            }
            if self.entries.iter().any(|(t, _)| t == token) {
                return Err(bad("this token is already given to another line".into()));
            }
            let groups = rest.first().map_or_else(Vec::new, |g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            });
            self.entries.push((
                token.clone(),
                UserInfo {
                    name: user.as_str().into(),
                    uid: uid.clone(),
                    groups,
                },
            ));
        }
        if self.entries.len() == before {
            return Err(TokenFileError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Whether no token is accepted (authentication is off).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The user `given` stands for. Every token is compared in constant time, so the answer's
    /// timing says nothing about which token came close.
    #[must_use]
    pub fn user(&self, given: &str) -> Option<&UserInfo> {
        let mut found = None;
        for (token, user) in &self.entries {
            if bool::from(token.as_bytes().ct_eq(given.as_bytes())) {
                found = Some(user);
            }
        }
        found
    }
}

/// The fields of one CSV record: commas separate, a field in double quotes may hold commas,
/// and `""` inside quotes is one quote.
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '"' if at_start => quoted = true,
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            '"' if quoted => quoted = false,
            ',' if !quoted => {
                fields.push(std::mem::take(&mut field));
                at_start = true;
                continue;
            }
            ' ' if at_start => continue,
            c => field.push(c),
        }
        at_start = false;
    }
    if quoted {
        return Err("a quoted field is not closed".into());
    }
    fields.push(field);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Result<Tokens, TokenFileError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, text).expect("write");
        let mut tokens = Tokens::default();
        tokens.read_file(&path).map(|()| tokens)
    }

    #[test]
    fn kube_apiserver_token_file_lines_name_their_users() {
        let t = tokens(
            "# team\nt-alice,alice,1001,\"dev,ops\"\n\nt-bob,bob,1002\nt-carol, carol,1003,ops\n",
        )
        .expect("valid");
        let alice = t.user("t-alice").expect("alice");
        assert_eq!(&*alice.name, "alice");
        assert_eq!(alice.uid, "1001");
        assert_eq!(alice.groups, vec!["dev", "ops"]);
        assert_eq!(&*t.user("t-bob").expect("bob").name, "bob");
        assert!(t.user("t-bob").expect("bob").groups.is_empty());
        assert_eq!(&*t.user("t-carol").expect("carol").name, "carol");
        assert_eq!(t.user("t-mallory"), None);
        assert_eq!(t.user(""), None);
    }

    #[test]
    fn a_bad_line_is_named_with_its_number() {
        for (text, line, needle) in [
            ("a,alice,1\nb,bob\n", 2, "2 columns"),
            ("a,alice,1\na,bob,2\n", 2, "already given"),
            (",alice,1\n", 1, "must not be empty"),
            ("a,alice,1,\"dev\n", 1, "not closed"),
        ] {
            let err = tokens(text).expect_err(text).to_string();
            assert!(err.contains(&format!(":{line}: ")), "{err}");
            assert!(err.contains(needle), "{err}");
        }
        assert!(
            tokens("# nobody\n")
                .expect_err("empty")
                .to_string()
                .contains("names no user")
        );
    }
}
