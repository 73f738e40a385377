//! One object edited on both sides at once: a live edit and a push that changed other fields of
//! it both survive, in Git and live (the three-way replay); a field both changed keeps the live
//! value, visibly.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::apply::{claim, wait_acting};
use crate::common::*;

pub(crate) const PATH: &str = "live/default/configmaps/conf.yaml";

/// The data of `ConfigMap` `default/name` live.
fn live_data(w: &World, name: &str) -> Value {
    w.get_json(&["configmap", name])["data"].clone()
}

/// Creates `ConfigMap` `default/conf` with `a=1`, `b=1`, waits until it is in Git, adopted and
/// a second old, and clones the remote as a person.
pub(crate) fn a_configmap_and_a_clone(w: &World) -> PathBuf {
    w.kubectl(&[
        "create",
        "configmap",
        "conf",
        "--from-literal=a=1",
        "--from-literal=b=1",
    ]);
    w.wait_file(PATH, |t| t.contains("b: \"1\""));
    w.wait_settled();
    // managedFields times have whole seconds: an edit in the second the applier adopted the
    // object cannot be told from the applier's own write (docs/apply.md), and a person's edit
    // does not come that fast.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    w.clone_origin("person")
}

/// Changes `from` to `to` in the clone's copy of the file and commits it (not pushed yet).
pub(crate) fn commit_in(w: &World, clone: &Path, from: &str, to: &str) {
    let file = clone.join(PATH);
    let text = std::fs::read_to_string(&file).expect("the file");
    std::fs::write(&file, text.replace(from, to)).expect("write");
    w.git_in(Some(clone), &["commit", "-q", "-am", "a person's edit"]);
}

/// Patches `a` live to `live`, waits until the mirror handed it in (the 3 s window holds it),
/// then pushes the clone's commit; returns the file once Git holds the live value.
pub(crate) fn patch_then_push(w: &World, clone: &Path) -> String {
    edit_and_wait_submitted(w, "default", || {
        w.kubectl(&[
            "patch",
            "configmap",
            "conf",
            "-p",
            r#"{"data":{"a":"live"}}"#,
        ]);
    });
    w.git_in(Some(clone), &["push", "-q", "origin", "HEAD:main"]);
    w.wait_file(PATH, |t| t.contains("a: live") || t.contains("a: \"live\""))
}

pub(crate) fn wait_live_data(w: &World, want: &Value) {
    wait_for(
        &format!("{want} live"),
        || format!("{}", live_data(w, "conf")),
        || (live_data(w, "conf") == *want).then_some(()),
    );
}

/// Issue case 1: `b` changed in a push, `a` patched live while the commit window was open. The
/// live edit's commit is replayed on top of the push field by field: Git ends with both, and
/// the apply that follows carries `b` to the live side.
#[test]
fn a_push_and_a_live_edit_to_other_fields_of_one_object_both_survive() {
    // A window long enough that the push lands while the live edit waits in it.
    let w = World::start(&["--commit-window", "3s"]);
    wait_acting(&w);
    let clone = a_configmap_and_a_clone(&w);
    commit_in(&w, &clone, "b: \"1\"", "b: git");
    let text = patch_then_push(&w, &clone);
    assert!(
        text.contains("b: git"),
        "the push's field is kept in Git:\n{text}"
    );
    wait_live_data(&w, &json!({"a": "live", "b": "git"}));
    w.wait_settled();
    let text = w.show(PATH).expect("the file");
    assert!(
        text.contains("b: git") && text.contains("live"),
        "Git keeps both once settled:\n{text}"
    );
}

/// A field both sides changed keeps the live value, and the override is visible: on the
/// folder's `GitTarget` status and in `backflow_mirror_merge_overrides_total`.
#[test]
fn a_field_changed_on_both_sides_keeps_the_live_value_and_says_so() {
    let w = World::start(&["--commit-window", "3s"]);
    wait_acting(&w);
    let clone = a_configmap_and_a_clone(&w);
    commit_in(&w, &clone, "a: \"1\"", "a: git");
    let text = patch_then_push(&w, &clone);
    assert!(!text.contains("git"), "{text}");
    let target =
        || w.get_json(&["gittarget", "default", "-n", "backflow-system"])["status"].clone();
    let status = wait_for(
        "the override on the target's status",
        || format!("{:#}", target()),
        || {
            let st = target();
            (st["mergeOverrides"] == 1).then_some(st)
        },
    );
    let last = status["lastMergeOverride"].as_str().unwrap_or_default();
    assert!(
        last.contains("configmaps/default/conf") && last.contains("data.a"),
        "{last}"
    );
    let counted = metric_sum(
        &w.metrics(),
        "backflow_mirror_merge_overrides_total",
        &["target=\"backflow-system/default\""],
    );
    assert!(
        (counted - 1.0).abs() < f64::EPSILON,
        "counted once, however often the write is planned: {counted}"
    );
    wait_live_data(&w, &json!({"a": "live", "b": "1"}));
    // And on the claim that applied the commit.
    let on_claim = wait_for(
        "the override on the claim's status",
        || format!("{:#}", claim(&w)),
        || {
            let st = claim(&w);
            (st["mergeOverrides"] == 1).then_some(st)
        },
    );
    assert_eq!(on_claim["lastMergeOverride"], status["lastMergeOverride"]);
    // And as a Warning on the target, naming the object and the field.
    let event = wait_for(
        "the override as an Event",
        || w.kubectl(&["get", "events", "-n", "backflow-system"]),
        || {
            let list = w.get_json(&["events", "-n", "backflow-system"]);
            list["items"]
                .as_array()?
                .iter()
                .find(|e| e["reason"] == "LiveValueKept")
                .cloned()
        },
    );
    assert_eq!(event["involvedObject"]["kind"], "GitTarget");
    assert_eq!(event["type"], "Warning");
    let message = event["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("conf") && message.contains("data.a"),
        "{message}"
    );
}
