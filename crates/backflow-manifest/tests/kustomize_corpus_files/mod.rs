//! The kustomize corpus (`tests/kustomize/`), read into memory as a repository's files.

use std::path::{Path, PathBuf};

use backflow_manifest::kustomize::Files;

/// The corpus's folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kustomize")
}

/// Every file of the corpus, by path from its root.
pub fn corpus() -> Files {
    let root = root();
    let mut files = Files::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the corpus reads") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path
                    .strip_prefix(&root)
                    .expect("under the root")
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, std::fs::read(&path).expect("a file reads"));
            }
        }
    }
    files
}
