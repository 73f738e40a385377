//! `backflow history`, `backflow why` and `backflow diff` against a running `serve`: one
//! object's story both ways (a live edit, the commit that carried it, a push, its apply, a
//! field both sides changed), each field's last writer, and what differs between the live side
//! and the folder — with the exit codes a script acts on and a Secret's value never shown.

use std::process::Command;

use serde_json::{Value, json};

use crate::apply::{suspend_default_claim, wait_acting};
use crate::both_sides::{
    PATH, a_configmap_and_a_clone, commit_in, patch_then_push, wait_live_data,
};
use crate::common::*;

fn verb(w: &World, args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(w.dirs.data.join("kubeconfig"))
        .env("HOME", &w.dirs.home);
    run_bounded(&format!("backflow {}", args.join(" ")), cmd)
}

/// `backflow history OBJECT -o json` of `w`'s server.
pub(crate) fn history_json(w: &World, object: &str) -> Value {
    json_of(&verb(w, &["history", object, "-o", "json"]))
}

fn json_of(out: &Out) -> Value {
    assert_eq!(out.code, Some(0), "{out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("JSON ({e}):\n{out}"))
}

/// The entries of a story as (kind, who, commit).
fn entries(story: &Value) -> Vec<(String, String, String)> {
    let text = |e: &Value, f: &str| e[f].as_str().unwrap_or_default().to_string();
    story["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (text(e, "kind"), text(e, "who"), text(e, "commit")))
        .collect()
}

/// A live edit and a push of the same field (the live value kept), then a push of another
/// field applied: `history` tells each step with who and which commit, `why` names the push's
/// author for the applied field, `diff` finds nothing at rest and the pushed change while the
/// claim is suspended; bad names are exit code 2 with what to do.
#[test]
fn history_why_and_diff_tell_a_live_edit_a_push_its_apply_and_an_override() {
    let w = World::start(&["--commit-window", "3s"]);
    wait_acting(&w);
    let clone = a_configmap_and_a_clone(&w);
    commit_in(&w, &clone, "a: \"1\"", "a: git");
    patch_then_push(&w, &clone);
    wait_live_data(&w, &json!({"a": "live", "b": "1"}));
    let bob = w.push_edit(PATH, "b: \"1\"", "b: bob");
    wait_live_data(&w, &json!({"a": "live", "b": "bob"}));
    w.wait_settled();

    let story = wait_for(
        "the story to hold the push, its apply and the override",
        || verb(&w, &["history", "configmap/conf", "-o", "json"]).to_string(),
        || {
            let story = json_of(&verb(&w, &["history", "configmap/conf", "-o", "json"]));
            let told = entries(&story);
            let has = |kind: &str| told.iter().any(|(k, _, _)| k == kind);
            let applied_bob = told.iter().any(|(k, _, c)| k == "Applied" && *c == bob);
            (has("LiveValueKept") && applied_bob).then_some(story)
        },
    );
    let told = entries(&story);
    let position = |kind: &str, commit: Option<&str>| {
        told.iter()
            .position(|(k, _, c)| k == kind && commit.is_none_or(|want| c == want))
            .unwrap_or_else(|| panic!("no {kind} entry in {told:#?}"))
    };
    let pushed = position("Pushed", Some(&bob));
    assert!(told[pushed].1.contains('<'), "the push's author: {told:#?}");
    assert!(
        position("Applied", Some(&bob)) < pushed,
        "newest first, the apply after the push: {told:#?}"
    );
    let patched = told
        .iter()
        .position(|(k, who, _)| k == "LiveWrite" && who == "kubectl-patch")
        .unwrap_or_else(|| panic!("the live patch by its field manager: {told:#?}"));
    assert!(
        position("Committed", None) < patched,
        "the live edit was committed after it was made: {told:#?}"
    );
    assert!(position("LiveWrite", None) > pushed, "{told:#?}");
    let text = verb(&w, &["history", "cm/conf"]);
    assert_eq!(text.code, Some(0), "{text}");
    assert!(
        text.stdout.starts_with("ConfigMap default/conf\nTIME"),
        "{text}"
    );
    assert!(text.stdout.contains(&bob[..12]), "{text}");

    let why = json_of(&verb(&w, &["why", "configmap/conf", "-o", "json"]));
    let data = why["fields"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["field"] == "data"))
        .unwrap_or_else(|| panic!("data's writer: {why:#}"));
    assert_eq!(data["commit"], bob.as_str(), "{why:#}");
    assert!(
        data["how"]
            .as_str()
            .unwrap_or_default()
            .contains("applied by backflow-applier"),
        "{why:#}"
    );

    let rest = verb(&w, &["diff"]);
    assert_eq!(rest.code, Some(0), "nothing differs at rest:\n{rest}");
    assert!(rest.stdout.contains("agree"), "{rest}");
    suspend_default_claim(&w, true);
    let later = w.push_edit(PATH, "b: bob", "b: later");
    let differs = wait_for(
        "diff to see the push the suspended claim did not apply",
        || verb(&w, &["diff"]).to_string(),
        || {
            let out = verb(&w, &["diff", "backflow-system/default"]);
            (out.code == Some(1) && out.stdout.contains(&later[..12])).then_some(out)
        },
    );
    assert!(
        differs
            .stdout
            .contains("# ConfigMap default/conf (differs, live/default/configmaps/conf.yaml)")
            && differs.stdout.contains("-  b: bob\n+  b: later\n"),
        "{differs}"
    );
    let json = verb(&w, &["diff", "-o", "json"]);
    assert_eq!(json.code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(report[0]["objects"][0]["state"], "Differs", "{report:#}");

    for (args, says) in [
        (&["history", "nokind/conf"][..], "no such kind"),
        (&["history", "conf"][..], "KIND/NAME"),
        (&["why", "configmap/nothing"][..], "not live"),
        (
            &["diff", "nowhere/none"][..],
            "GitTarget nowhere/none not found",
        ),
        (&["diff", "no-slash"][..], "NAMESPACE/NAME"),
    ] {
        let out = verb(&w, args);
        assert_eq!(out.code, Some(2), "{out}");
        assert!(out.stderr.contains(says), "{says:?}:\n{out}");
    }
}

/// The values `a_secret_created_and_patched` gives Secret `default/s`, and their base64: none
/// may be shown.
pub(crate) const SECRET_VALUES: [&str; 4] = [
    "s3cr3t-value",
    "n3w-s3cr3t",
    "czNjcjN0LXZhbHVl",
    "bjN3LXMzY3IzdA==",
];

/// A server whose Secret `default/s` was created live, mirrored (encrypted), then patched live.
pub(crate) fn a_secret_created_and_patched() -> World {
    let w = World::start(&[]);
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=password=s3cr3t-value",
    ]);
    w.wait_present("live/default/secrets/s.sops.yaml");
    w.kubectl(&[
        "patch",
        "secret",
        "s",
        "-p",
        r#"{"stringData":{"password":"n3w-s3cr3t"}}"#,
    ]);
    w.wait_settled();
    w
}

/// A Secret's value reaches none of the answers: its story holds no document, `why` names its
/// fields only, and `diff` hides each value.
#[test]
fn a_secrets_value_is_never_shown_by_history_why_or_diff() {
    let w = a_secret_created_and_patched();
    for args in [
        &["history", "secret/s", "-o", "json"][..],
        &["history", "secret/s"][..],
        &["why", "secret/s", "-o", "json"][..],
        &["diff", "-o", "json"][..],
    ] {
        let out = verb(&w, args);
        assert!(matches!(out.code, Some(0 | 1)), "{out}");
        for value in SECRET_VALUES {
            assert!(
                !out.stdout.contains(value),
                "{value} shown by {args:?}:\n{out}"
            );
        }
    }
    let story = json_of(&verb(&w, &["history", "secret/s", "-o", "json"]));
    assert!(
        entries(&story).iter().any(|(k, _, _)| k == "Committed"),
        "the Secret's commits are in its story: {story:#}"
    );
}
