//! The Python clients the tests drive the server with (the official `kubernetes` client, `kr8s`,
//! `kopf`): `scripts/test.sh` installs them from `PyPI` into `target/test-deps/python`;
//! `BACKFLOW_TEST_PYTHON` names another directory holding them.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The packages the tests need, by the directory each installs.
const PACKAGES: &[&str] = &["kubernetes", "kr8s", "kopf"];

/// The directory holding the packages. Panics, saying how to install them, when one is
/// missing: a test that needs them fails rather than skips.
#[must_use]
pub fn dir() -> PathBuf {
    let dir = std::env::var_os("BACKFLOW_TEST_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/python"),
        PathBuf::from,
    );
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| !dir.join(p).is_dir())
        .collect();
    assert!(
        missing.is_empty(),
        "the Python packages {missing:?} are not in {}: run ./scripts/test.sh (it installs them), \
         or set BACKFLOW_TEST_PYTHON",
        dir.display()
    );
    dir
}

/// A `python3` command running `script` with the packages importable and `args` after it; the
/// caller adds what else it needs (a working directory, a timeout) and spawns it.
///
/// # Panics
/// When a package is missing (see [`dir`]).
#[must_use]
pub fn command(script: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script])
        .args(args)
        .env("PYTHONPATH", dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null());
    cmd
}

/// Runs `script` to its end (see [`command`]).
///
/// # Panics
/// When python3 cannot be started.
#[must_use]
pub fn run(script: &str, args: &[&str]) -> Output {
    command(script, args)
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed by this test: {e}"))
}
