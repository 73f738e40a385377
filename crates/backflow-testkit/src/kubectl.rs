//! The kubectl binaries the tests run: every supported version, each bundled as
//! `kubectl.1.NN` beside the resolved real path of the `kubectl` on `PATH`.

use std::path::{Path, PathBuf};

/// The kubectl versions covered.
pub const VERSIONS: [&str; 7] = ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"];

/// The directory of the resolved `kubectl` on `PATH`, where the versioned binaries live.
///
/// # Panics
/// When there is no kubectl on `PATH`: the tests that need one fail rather than skip.
#[must_use]
pub fn dir() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("no kubectl on PATH: the kubectl tests need one");
    let real = std::fs::canonicalize(&found)
        .unwrap_or_else(|e| panic!("cannot resolve {}: {e}", found.display()));
    real.parent().map_or_else(
        || panic!("{} has no parent directory", real.display()),
        Path::to_path_buf,
    )
}

/// The bundled binary of `version`. Every one of [`VERSIONS`] must be installed: a missing one
/// fails the test rather than skipping what users of that version would hit.
///
/// # Panics
/// When that version is not installed.
#[must_use]
pub fn binary(version: &str) -> PathBuf {
    let bin = dir().join(format!("kubectl.{version}"));
    assert!(
        bin.is_file(),
        "kubectl {version} is not installed ({} is missing); the suite runs every one of {VERSIONS:?}",
        bin.display()
    );
    bin
}
