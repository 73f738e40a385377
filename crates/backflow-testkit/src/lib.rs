//! What every test suite of the workspace shares.
//!
//! - [`git`]: the `git` program, hermetic: none of the machine's or the user's configuration,
//!   no prompts, a fixed identity and locale, so a test reads the same everywhere.
//! - [`HttpServer`]: a smart-HTTP Git server (`git http-backend`) on loopback.
//! - [`node`]: node and the npm packages the tests run.
//! - [`octokit`]: GitHub's own webhook signer and example payloads (npm), run by node.
//! - [`kubectl`]: the bundled kubectl binaries of every supported version.
//! - [`browser`]: a real headless Chromium driven by `playwright-core`, for the web view.

pub mod browser;
mod http;
pub mod kubectl;
pub mod node;
pub mod octokit;
pub mod proxy;
pub mod python;
pub mod ssh;

pub use http::{HttpAuth, HttpServer};

use std::path::Path;
use std::process::{Command, Stdio};

/// The identity of commits a test makes with [`git`] (a person, as opposed to backflow).
pub const PERSON: (&str, &str) = ("A Person", "person@example.com");

/// `git` run in `dir` with no system or global configuration, no terminal prompts, the `C`
/// locale, no inherited repository (`GIT_DIR`, `GIT_WORK_TREE`), and [`PERSON`] as author and
/// committer. Callers may set more environment (a `HOME`, another identity) on the result.
pub fn git(dir: impl AsRef<Path>) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", PERSON.0)
        .env("GIT_AUTHOR_EMAIL", PERSON.1)
        .env("GIT_COMMITTER_NAME", PERSON.0)
        .env("GIT_COMMITTER_EMAIL", PERSON.1)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null());
    cmd
}

/// Runs `git args` in `dir` and returns its standard output.
///
/// # Panics
///
/// When git cannot run or fails; the message holds its standard error.
pub fn git_out(dir: impl AsRef<Path>, args: &[&str]) -> String {
    let out = git(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `git args` in `dir` and says whether it succeeded.
///
/// # Panics
///
/// When git cannot run at all.
pub fn git_ok(dir: impl AsRef<Path>, args: &[&str]) -> bool {
    git(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"))
        .status
        .success()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_carry_the_fixed_identity_whatever_the_machine_says() {
        let dir = std::env::temp_dir().join(format!("backflow-testkit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        git_out(&dir, &["init", "-q", "-b", "main"]);
        let out = git(&dir)
            .env("GIT_DIR", "/nonexistent")
            .env_remove("GIT_DIR")
            .args(["commit", "-q", "--allow-empty", "-m", "first"])
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            git_out(&dir, &["log", "-1", "--format=%an <%ae>"]).trim(),
            "A Person <person@example.com>"
        );
        assert!(!git_ok(&dir, &["rev-parse", "--verify", "nothing"]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
