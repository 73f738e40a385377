//! `backflow status` against a running `serve`: every target, branch and claim, what needs a
//! person, and the exit code a script acts on (0 all fine, 1 something needs a person, 2 the API
//! could not be read).

use std::process::Command;

use serde_json::Value;

use crate::apply::{claim, wait_applied};
use crate::common::*;
use crate::push_guard::started_with;

fn status(w: &World, args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
    cmd.arg("status")
        .arg("--kubeconfig")
        .arg(w.dirs.data.join("kubeconfig"))
        .args(args)
        .env("HOME", &w.dirs.home);
    run_bounded("backflow status", cmd)
}

/// At rest everything is fine (exit 0); a pushed file the applier cannot read needs a person
/// (exit 1, the file named, in text and in JSON); an API that cannot be reached is exit 2.
#[test]
fn status_lists_targets_branches_and_claims_and_exits_on_what_needs_a_person() {
    let w = started_with(&["a"]);
    let fine = wait_for(
        "status to find nothing that needs a person",
        || format!("{:#}", claim(&w)),
        || {
            let out = status(&w, &[]);
            (out.code == Some(0)).then_some(out)
        },
    );
    for expected in [
        "TARGET",
        "BRANCH",
        "NativeClaim backflow-system/default",
        "Nothing needs a person.",
    ] {
        assert!(fine.stdout.contains(expected), "{expected:?}:\n{fine}");
    }

    let clone = w.clone_origin("bob");
    let a = "live/default/configmaps/a.yaml";
    std::fs::write(clone.join(a), "apiVersion: v1\nkind: ConfigMap\ndata: [\n").expect("break a");
    let push = w.commit_all_and_push(&clone, "bob breaks a");
    wait_applied(&w, &push);
    let troubled = status(&w, &[]);
    assert_eq!(troubled.code, Some(1), "{troubled}");
    assert!(troubled.stdout.contains("NEEDS A PERSON"), "{troubled}");
    assert!(
        troubled
            .stdout
            .lines()
            .any(|l| l.contains("NativeClaim backflow-system/default") && l.contains(a)),
        "the claim and the file named:\n{troubled}"
    );

    let json = status(&w, &["-o", "json"]);
    assert_eq!(json.code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json.stdout).expect("a JSON report");
    assert!(report["needsAPerson"].to_string().contains(a), "{report:#}");
    let claims = report["claims"].as_array().expect("claims");
    assert!(
        claims
            .iter()
            .any(|c| c["name"] == "default" && c["kind"] == "NativeClaim"),
        "{report:#}"
    );
    let tip = report["branches"][0]["tip"]
        .as_str()
        .expect("the branch's tip");
    let now = w.tip().expect("the remote's tip");
    assert!(
        w.is_ancestor(&push, tip) && w.is_ancestor(tip, &now),
        "the tip backflow last saw, at or after the push: {report:#}"
    );

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
    let nowhere = w.dirs.work.join("nowhere.kubeconfig");
    std::fs::write(&nowhere, "not: a kubeconfig: [").expect("write a broken kubeconfig");
    cmd.args(["status", "--kubeconfig"]).arg(&nowhere);
    let broken = run_bounded("backflow status", cmd);
    assert_eq!(broken.code, Some(2), "{broken}");
    assert!(broken.stderr.contains("nowhere.kubeconfig"), "{broken}");
}
