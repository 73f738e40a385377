//! node and the npm packages the tests run: `scripts/test.sh` installs them into
//! `target/test-deps/node`; `BACKFLOW_TEST_NODE` names another directory holding their
//! `node_modules`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The npm packages the tests need.
const PACKAGES: &[&str] = &[
    "@octokit/webhooks-methods",
    "@octokit/webhooks-examples",
    "@kubernetes/client-node",
    "playwright-core",
];

/// The directory whose `node_modules` holds the packages. Panics, saying how to install them,
/// when one is missing: a test that needs them fails rather than skips.
#[must_use]
pub fn dir() -> PathBuf {
    let dir = std::env::var_os("BACKFLOW_TEST_NODE").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/node"),
        PathBuf::from,
    );
    let missing: Vec<&str> = PACKAGES
        .iter()
        .copied()
        .filter(|p| !dir.join("node_modules").join(p).is_dir())
        .collect();
    assert!(
        missing.is_empty(),
        "the npm packages {missing:?} are not in {}: run ./scripts/test.sh (it installs them), \
         or set BACKFLOW_TEST_NODE",
        dir.display()
    );
    dir
}

/// Runs `script` as an ES module in [`dir`] (so its imports resolve there) with `args`.
///
/// # Panics
/// When node cannot be started.
#[must_use]
pub fn run_module(script: &str, args: &[&str]) -> Output {
    Command::new("node")
        .args(["--input-type=module", "-e", script, "--"])
        .args(args)
        .current_dir(dir())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("node is needed by this test: {e}"))
}
