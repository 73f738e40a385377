//! The core links no Git library and no Kubernetes client: it must run under a simulator.

use std::process::Command;

#[test]
fn the_core_depends_on_no_git_library_and_no_kubernetes_client() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--edges",
            "normal,build",
            "--prefix",
            "none",
            "--manifest-path",
            manifest,
        ])
        .output()
        .expect("cargo runs");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tree.contains("backflow-branch"), "{tree}");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for forbidden in ["git2", "libgit2-sys", "kube-client", "hyper", "tokio"] {
        assert!(
            !names.contains(&forbidden),
            "backflow-branch must not depend on {forbidden}:\n{tree}"
        );
    }
}
