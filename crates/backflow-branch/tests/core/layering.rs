//! The pure crates link no Git library and no Kubernetes client: the core must run under a
//! simulator, and the YAML planner must plan against any tree view. The decision cores build
//! without the Kubernetes types at all (`backflow-api` without its `kinds` feature).

use std::process::Command;

/// The names of every crate `manifest` depends on (normal and build edges).
fn dependencies(manifest: &str) -> Vec<String> {
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
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn assert_pure(crate_dir: &str, name: &str, also: &[&str]) {
    let manifest = format!("{}/../{crate_dir}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
    let names = dependencies(&manifest);
    assert!(names.iter().any(|n| n == name), "{names:?}");
    let always = ["git2", "libgit2-sys", "kube-client", "hyper", "tokio"];
    for forbidden in always.iter().chain(also) {
        assert!(
            !names.iter().any(|n| n == forbidden),
            "{name} must not depend on {forbidden}: {names:?}"
        );
    }
}

/// What a decision core must not even compile.
const KUBERNETES_TYPES: &[&str] = &["k8s-openapi", "kube", "kube-core", "schemars"];

#[test]
fn the_core_depends_on_no_git_library_and_no_kubernetes_client() {
    assert_pure("backflow-branch", "backflow-branch", KUBERNETES_TYPES);
}

#[test]
fn the_apply_decision_depends_on_no_git_library_and_no_kubernetes_types() {
    assert_pure("backflow-decision", "backflow-decision", KUBERNETES_TYPES);
}

#[test]
fn the_yaml_planner_depends_on_no_git_library() {
    assert_pure("backflow-manifest", "backflow-manifest", &[]);
}

/// The two directions meet only on the board: Git → live (`backflow-apply`) does not build on
/// live → Git (`backflow-mirror`), nor the other way round.
#[test]
fn the_directions_meet_only_on_the_board() {
    for (crate_dir, other) in [
        ("backflow-apply", "backflow-mirror"),
        ("backflow-mirror", "backflow-apply"),
    ] {
        let manifest = format!("{}/../{crate_dir}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
        let names = dependencies(&manifest);
        assert!(names.iter().any(|n| n == "backflow-board"), "{names:?}");
        assert!(
            !names.iter().any(|n| n == other),
            "{crate_dir} must not depend on {other}: {names:?}"
        );
    }
}
