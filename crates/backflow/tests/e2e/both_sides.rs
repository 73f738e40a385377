//! One object edited on both sides at once: a live edit and a push that changed other fields of
//! it both survive, in Git and live (the three-way replay).

use serde_json::Value;

use crate::apply::wait_acting;
use crate::common::*;

/// The data of `ConfigMap` `default/name` live.
fn live_data(w: &World, name: &str) -> Value {
    w.get_json(&["configmap", name])["data"].clone()
}

/// Issue case 1: `b` changed in a push, `a` patched live while the commit window was open. The
/// live edit's commit is replayed on top of the push field by field: Git ends with both, and
/// the apply that follows carries `b` to the live side.
#[test]
fn a_push_and_a_live_edit_to_other_fields_of_one_object_both_survive() {
    // A window long enough that the push lands while the live edit waits in it.
    let w = World::start(&["--commit-window", "3s"]);
    wait_acting(&w);
    w.kubectl(&[
        "create",
        "configmap",
        "conf",
        "--from-literal=a=1",
        "--from-literal=b=1",
    ]);
    let path = "live/default/configmaps/conf.yaml";
    w.wait_file(path, |t| t.contains("b: \"1\""));
    w.wait_settled();
    // managedFields times have whole seconds: an edit in the second the applier adopted the
    // object cannot be told from the applier's own write (docs/apply.md), and a person's edit
    // does not come that fast.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let clone = w.clone_origin("person");
    let file = clone.join(path);
    let text = std::fs::read_to_string(&file).expect("the file");
    std::fs::write(&file, text.replace("b: \"1\"", "b: git")).expect("write");
    w.git_in(Some(&clone), &["commit", "-q", "-am", "b is git's"]);
    edit_and_wait_submitted(&w, "default", || {
        w.kubectl(&[
            "patch",
            "configmap",
            "conf",
            "-p",
            r#"{"data":{"a":"live"}}"#,
        ]);
    });
    w.git_in(Some(&clone), &["push", "-q", "origin", "HEAD:main"]);

    let text = w.wait_file(path, |t| t.contains("a: live") || t.contains("a: \"live\""));
    assert!(
        text.contains("b: git"),
        "the push's field is kept in Git:\n{text}"
    );
    wait_for(
        "both fields live",
        || format!("{}", live_data(&w, "conf")),
        || (live_data(&w, "conf") == serde_json::json!({"a": "live", "b": "git"})).then_some(()),
    );
    w.wait_settled();
    let text = w.show(path).expect("the file");
    assert!(
        text.contains("b: git") && text.contains("live"),
        "Git keeps both once settled:\n{text}"
    );
}
