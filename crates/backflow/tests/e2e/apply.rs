//! Git → live end to end, with `serve`'s default `NativeClaim`: real `git` pushes
//! into `origin.git` (announced by its hook), real kubectl reads of what was applied.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::secrets::{sops_bin, sops_encrypt_in_place};

/// The default claim's status.
pub(crate) fn claim(w: &World) -> Value {
    w.get_json(&["nativeclaim", "default", "-n", "backflow-system"])["status"].clone()
}

/// Waits until the claim's last operation succeeded applying `commit` or a commit built on it
/// (the flush before an apply publishes what the mirror has pending on top of a push).
pub(crate) fn wait_applied(w: &World, commit: &str) -> Value {
    wait_for(
        &format!("an operation applying {commit} to succeed"),
        || format!("{:#}", claim(w)),
        || {
            let op = claim(w)["operation"].clone();
            let applied = op["commit"].as_str().unwrap_or_default();
            let contains = applied == commit || w.is_ancestor(commit, applied);
            (contains && op["phase"] == "Succeeded").then_some(op)
        },
    )
}

/// Records in the default claim's status operation `id` applying `commit` as `Running`, as a
/// process that dies in the middle of it leaves it.
pub(crate) fn record_running_operation(w: &World, id: u64, commit: &str) {
    let status = format!(
        r#"{{"status":{{"operation":{{"id":{id},"commit":"{commit}","reasons":["ForeignCommit"],"phase":"Running"}}}}}}"#
    );
    patch_default_claim(w, &["--subresource=status"], &status);
}

/// A merge patch of the default `NativeClaim` (`extra`: more kubectl flags).
fn patch_default_claim(w: &World, extra: &[&str], patch: &str) {
    let mut args = vec!["patch", "nativeclaim", "default", "-n", "backflow-system"];
    args.extend_from_slice(extra);
    args.extend(["--type=merge", "-p", patch]);
    w.kubectl(&args);
}

/// Waits for the claim to have applied something, and for the mirror to settle.
pub(crate) fn wait_acting(w: &World) {
    w.wait_settled();
    wait_for(
        "the default claim's first operation",
        || format!("{:#}", claim(w)),
        || (claim(w)["operation"]["phase"] == "Succeeded").then_some(()),
    );
}

/// Waits until a claim's latest operation (`operation` reads it) has succeeded, `held` holds,
/// and it is still that operation once the mirror settled: the first operation may be
/// followed at once by a catch-up (stamping what it created), and a test that stops a held
/// applier's controller must not leave one of those behind it, never to end.
pub(crate) fn wait_operations_quiet(
    w: &World,
    operation: impl Fn(&World) -> Value,
    held: impl Fn(&World) -> bool,
) {
    wait_for(
        "the claim's operations to end with its applier held",
        || format!("{:#}", operation(w)),
        || {
            let before = operation(w);
            if !(held(w) && before["phase"] == "Succeeded") {
                return None;
            }
            w.wait_settled();
            (operation(w) == before).then_some(())
        },
    );
}

/// Makes the default folder (every namespace) mirror one way: an object two coordinated folders
/// hold would have two appliers fighting over it.
pub(crate) fn one_way_default(w: &World) {
    w.patch_target("default", r#"{"spec":{"applierClaimRef":null}}"#);
    wait_for(
        "the default folder to be one-way",
        || format!("{:?}", w.target_condition("default", "ApplierClaimReady")),
        || {
            w.target_condition("default", "ApplierClaimReady")
                .is_none()
                .then_some(())
        },
    );
}

/// Waits until a claim's latest operation (`status` reads the claim's status), holding
/// `commit`, is in `phase`; returns it. `detail` says more when it does not happen.
pub(crate) fn wait_claim_operation(
    w: &World,
    status: impl Fn() -> Value,
    detail: impl Fn() -> String,
    commit: &str,
    phase: &str,
) -> Value {
    wait_for(
        &format!("the claim's operation for {commit} to be {phase}"),
        || format!("{:#}\n{}", status(), detail()),
        || {
            let op = status()["operation"].clone();
            let holds = w.is_ancestor(commit, op["commit"].as_str().unwrap_or_default());
            (op["phase"] == phase && holds).then_some(op)
        },
    )
}

pub(crate) fn cm_value(w: &World, name: &str, key: &str) -> Option<String> {
    let out = w.kubectl_run(&["get", "configmap", name, "-o", "json"]);
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    v["data"][key].as_str().map(str::to_string)
}

/// Ended apply operations (a whole number).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a counter is a small non-negative whole number"
)]
/// Waits for a live `ConfigMap` to hold `value`: an object created in the flush's second is
/// deferred once (managedFields times have second precision) and applied 1.5 s later.
fn wait_value(w: &World, name: &str, key: &str, value: &str) {
    wait_for(
        &format!("configmap {name} to hold {key}={value}"),
        || format!("{:?}", cm_value(w, name, key)),
        || (cm_value(w, name, key).as_deref() == Some(value)).then_some(()),
    );
}

pub(crate) fn operations(w: &World) -> u64 {
    metric_sum(&w.metrics(), "backflow_apply_operations_total", &[]).round() as u64
}

/// Ended apply operations asked for a foreign commit.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a counter is a small non-negative whole number"
)]
/// Asserts that the commit `op` applied was applied by exactly one operation for a foreign
/// commit since `before` ([`foreign_operations`]). The status shows only the latest operation,
/// and under load a repair that applies nothing can follow the foreign apply at once (the
/// apply's watch echo seen after its window closed), so `op` is that one or the no-op repair.
fn assert_applied_as_foreign(w: &World, op: &Value, before: u64) {
    wait_for(
        "the foreign commit's operation to be counted",
        || w.metrics(),
        || (foreign_operations(w) > before).then_some(()),
    );
    assert_eq!(foreign_operations(w) - before, 1, "{op:#}");
    let no_op_repair = op["reasons"] == serde_json::json!(["Repair"])
        && op["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("applied 0,"));
    assert!(
        op["reasons"] == serde_json::json!(["ForeignCommit"]) || no_op_repair,
        "{op:#}"
    );
}

fn foreign_operations(w: &World) -> u64 {
    metric_sum(
        &w.metrics(),
        "backflow_apply_operations_total",
        &["reason=\"ForeignCommit\""],
    )
    .round() as u64
}

/// Waits until the mirror has had nothing in flight for 1.5 s.
fn wait_idle(w: &World) {
    let mut since = Instant::now();
    wait_for(
        "the mirror to be idle",
        || w.metrics(),
        || {
            if metric_sum(&w.metrics(), "backflow_mirror_in_flight", &[]) > 0.0 {
                since = Instant::now();
            }
            (since.elapsed() >= Duration::from_millis(1500)).then_some(())
        },
    );
}

/// Nothing more happens for `quiet`, once what is already on its way (an apply deferred to an
/// edit of the flush's second is looked at again 1.5 s later) has ended: no commit, no apply.
pub(crate) fn assert_quiescent(w: &World, quiet: Duration) {
    let mut last = (operations(w), w.tip());
    let mut since = Instant::now();
    wait_for(
        "applies to settle",
        || format!("{} operations, tip {:?}", operations(w), w.tip()),
        || {
            let now = (operations(w), w.tip());
            if now != last {
                last = now;
                since = Instant::now();
            }
            (since.elapsed() >= Duration::from_secs(3)).then_some(())
        },
    );
    let (tip, ops) = (w.tip(), operations(w));
    let until = Instant::now() + quiet;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(w.tip(), tip, "a quiescent system makes no commit");
        assert!(operations(w) <= ops, "a quiescent system asks for no apply");
    }
}

#[test]
fn a_push_reaches_the_api_and_a_deleted_file_prunes_only_what_the_applier_owns() {
    let w = World::start(&[]);
    w.apply(&configmap("default", "demo", &[("greeting", "hello")]));
    w.apply(&configmap("default", "handmade", &[("keep", "me")]));
    wait_acting(&w);
    let path = "live/default/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    w.wait_file("live/default/configmaps/handmade.yaml", |_| true);
    // The live creates were adopted: stamped with the owner label, in the inventory.
    wait_for(
        "the live creates to be adopted",
        || format!("{:#}", claim(&w)["inventory"]),
        || {
            let inventory = claim(&w)["inventory"].to_string();
            (inventory.contains("default_demo__ConfigMap")
                && inventory.contains("default_handmade__ConfigMap"))
            .then_some(())
        },
    );

    let before = foreign_operations(&w);
    let clone = w.clone_origin("bob");
    let file = clone.join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("hello", "from-git")).unwrap();
    let bob = w.commit_all_and_push(&clone, "bob edits demo");
    let op = wait_applied(&w, &bob);
    assert_applied_as_foreign(&w, &op, before);
    wait_value(&w, "demo", "greeting", "from-git");
    let live = w.get_json(&["configmap", "demo"]);
    assert_eq!(
        live["metadata"]["labels"]["backflow.dev/applier"],
        "backflow-system.default"
    );
    assert!(
        !w.show(path).unwrap().contains("backflow.dev/applier"),
        "the ownership label never reaches Git"
    );

    // The apply's own watch echo is recognised inside its window and not mirrored, so a push
    // right after it is never undone by its replay.
    assert!(
        metric_sum(
            &w.metrics(),
            "backflow_apply_echoes_total",
            &["outcome=\"not_mirrored\""]
        ) >= 1.0,
        "{}",
        w.metrics()
    );

    // A hand-removed stamp means "not the applier's any more": its file's deletion leaves it.
    w.kubectl(&["label", "configmap", "handmade", "backflow.dev/applier-"]);
    std::fs::remove_file(clone.join(path)).unwrap();
    std::fs::remove_file(clone.join("live/default/configmaps/handmade.yaml")).unwrap();
    let deleted = w.commit_all_and_push(&clone, "bob deletes both");
    let op = wait_applied(&w, &deleted);
    assert!(
        op["message"].as_str().unwrap().contains("pruned 1"),
        "{op:#}"
    );
    assert!(
        w.kubectl_run(&["get", "configmap", "demo"]).code != Some(0),
        "applied, then deleted in Git: pruned"
    );
    assert_eq!(
        cm_value(&w, "handmade", "keep").as_deref(),
        Some("me"),
        "never touches what it does not own"
    );
    assert_eq!(
        w.tip().as_deref(),
        Some(deleted.as_str()),
        "applying made no commit"
    );
    assert_quiescent(&w, Duration::from_secs(10));

    // The target reports whether its claim can act; a target naming a missing claim says so.
    let condition = |name: &str| w.target_condition(name, "ApplierClaimReady");
    let ready = condition("default").expect("ApplierClaimReady on the default target");
    assert_eq!(ready.state(), ("True", "Claimed"));
    w.apply(
        r#"apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: orphan, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: orphan
  applierClaimRef: {kind: NativeClaim, name: nobody}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {name: orphan, namespace: backflow-system}
spec: {targetRef: {name: orphan}, rules: [{apiGroups: [""], resources: [configmaps], sourceNamespace: orphans}]}
"#,
    );
    let missing = wait_for(
        "the orphan target to report its missing claim",
        || format!("{:?}", condition("orphan")),
        || condition("orphan"),
    );
    assert_eq!(missing.state(), ("False", "ClaimNotFound"), "{missing:?}");
}

/// Before each apply's flush, every watch stream of the claim's targets lists its scope and
/// decides what its watch has not delivered yet: the applier never writes over an edit that
/// only a watch event still on its way remembers (were the process to die before that event
/// arrived, the edit would be lost; found by the simulator).
#[test]
fn every_apply_flushes_after_the_claims_streams_caught_up() {
    let w = World::start(&[]);
    w.apply(&configmap("default", "demo", &[("greeting", "hello")]));
    wait_acting(&w);
    let path = "live/default/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    let catch_ups = |w: &World| metric_sum(&w.metrics(), "backflow_mirror_catch_ups_total", &[]);
    let before = catch_ups(&w);
    assert!(before >= 1.0, "the first apply's flush caught up: {before}");
    let clone = w.clone_origin("bob");
    let file = clone.join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("hello", "from-git")).unwrap();
    let bob = w.commit_all_and_push(&clone, "bob edits demo");
    wait_applied(&w, &bob);
    wait_value(&w, "demo", "greeting", "from-git");
    assert!(
        catch_ups(&w) > before,
        "the push's apply caught up too: {} after {before}",
        catch_ups(&w)
    );
    // Settled streams answer by their objects' versions alone, without reading them whole.
    let by_versions = metric_sum(
        &w.metrics(),
        "backflow_mirror_catch_ups_total",
        &["read=\"versions\""],
    );
    assert!(by_versions >= 1.0, "{}", w.metrics());
}

#[test]
fn a_pending_edit_and_a_foreign_push_land_together_and_only_the_push_is_applied() {
    let w = World::start(&["--commit-window", "4s"]);
    w.apply(&configmap("default", "alice", &[("v", "1")]));
    w.apply(&configmap("default", "bob", &[("v", "1")]));
    wait_acting(&w);
    w.wait_file("live/default/configmaps/bob.yaml", |_| true);
    w.wait_file("live/default/configmaps/alice.yaml", |_| true);
    wait_for("nothing pending", String::new, || {
        (metric_sum(&w.metrics(), "backflow_mirror_in_flight", &[]) == 0.0).then_some(())
    });
    // The applier's adopt of the objects just created (it stamps them) must be over too: an
    // apply still to come, flushed before W, would revert W and be followed by a repair.
    let adopted = w.tip().expect("the commit holding alice and bob");
    wait_applied(&w, &adopted);
    let before = foreign_operations(&w);
    let clone = w.clone_origin("bob");

    // Alice's edit W waits in the open commit window; Bob pushes F meanwhile. (Pushed before the
    // mirror has W, F's flush would not hold it: W would be applied away and repaired.)
    edit_and_wait_submitted(&w, "default", || {
        w.kubectl(&[
            "patch",
            "configmap",
            "alice",
            "-p",
            r#"{"data":{"v":"alice-2"}}"#,
        ]);
    });
    // managedFields times have second precision: an edit in the flush's own second cannot be
    // told older than the flush, so the applier defers its object and retries (a `Repair`
    // operation). Pushed in the next second, W is provably in the flush.
    let into_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_millis();
    std::thread::sleep(Duration::from_millis(u64::from(1050 - into_second)));
    let file = clone.join("live/default/configmaps/bob.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("\"1\"", "bob-2").replace("v: 1", "v: bob-2"),
    )
    .unwrap();
    let f = w.commit_all_and_push(&clone, "bob's change");

    // The applier is asked once, for F + W: Bob's change lands, Alice's edit stays.
    let op = wait_applied(&w, &f);
    let tip = w.tip().unwrap();
    assert_eq!(op["commit"], tip.as_str(), "the tip the flush produced");
    assert_ne!(op["commit"], f.as_str(), "never F on its own");
    assert!(
        w.git(&["merge-base", "--is-ancestor", &f, &tip]).is_empty(),
        "F is in the applied commit"
    );
    assert!(
        w.show("live/default/configmaps/alice.yaml")
            .unwrap()
            .contains("alice-2"),
        "W too"
    );
    assert_applied_as_foreign(&w, &op, before);
    wait_value(&w, "bob", "v", "bob-2");
    assert_eq!(
        cm_value(&w, "alice", "v").as_deref(),
        Some("alice-2"),
        "the pending edit is never reverted"
    );
    assert_eq!(
        foreign_operations(&w) - before,
        1,
        "asked once for the foreign commit, never for F on its own"
    );
    assert_quiescent(&w, Duration::from_secs(3));
}

#[test]
fn an_invalid_push_fails_backs_off_and_recovers_when_fixed() {
    let w = World::start(&[]);
    wait_acting(&w);
    let clone = w.clone_origin("bob");
    std::fs::create_dir_all(clone.join("live/default/widgets")).unwrap();
    std::fs::write(
        clone.join("live/default/widgets/w.yaml"),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n",
    )
    .unwrap();
    std::fs::write(
        clone.join("live/default/ok.yaml"),
        configmap("default", "ok", &[("a", "1")]),
    )
    .unwrap();
    let bad = w.commit_all_and_push(&clone, "a manifest of a type nobody serves");
    let failed = wait_for(
        "the apply to fail",
        || format!("{:#}", claim(&w)),
        || {
            let s = claim(&w);
            (s["operation"]["commit"] == bad.as_str() && s["operation"]["phase"] == "Failed")
                .then_some(s)
        },
    );
    assert!(
        failed["operation"]["message"]
            .as_str()
            .unwrap()
            .contains("Widget"),
        "{failed:#}"
    );
    let ready = failed["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("ApplyFailed"))
    );
    assert_eq!(
        cm_value(&w, "ok", "a").as_deref(),
        Some("1"),
        "one bad object does not stop the others"
    );
    // Retried after the backoff (2 s, then 4 s …), still failing.
    wait_for(
        "a retry after the backoff",
        || w.metrics(),
        || {
            (metric_sum(
                &w.metrics(),
                "backflow_apply_operations_total",
                &["outcome=\"failed\""],
            ) >= 2.0)
                .then_some(())
        },
    );
    // `kubectl describe` shows it: one Warning on the claim, counted at each retry.
    let failures = wait_for(
        "the failure as an Event counted twice",
        || w.kubectl(&["get", "events", "-n", "backflow-system", "-o", "json"]),
        || {
            let list = w.get_json(&["events", "-n", "backflow-system"]);
            let failed: Vec<Value> = list["items"]
                .as_array()?
                .iter()
                .filter(|e| {
                    e["reason"] == "ApplyFailed" && e["involvedObject"]["kind"] == "NativeClaim"
                })
                .cloned()
                .collect();
            failed
                .iter()
                .any(|e| e["series"]["count"].as_i64() >= Some(2))
                .then_some(failed)
        },
    );
    assert_eq!(
        failures.len(),
        1,
        "a repeat is counted, not written again: {failures:#?}"
    );
    assert_eq!(failures[0]["type"], "Warning");
    // Written as client-go's events recorder writes: on the claim's uid, so `kubectl describe`
    // lists it with its count.
    let uid =
        w.get_json(&["nativeclaim", "default", "-n", "backflow-system"])["metadata"]["uid"].clone();
    assert_eq!(failures[0]["involvedObject"]["uid"], uid, "{failures:#?}");
    let v1 = w.get_json(&[
        "events.v1.events.k8s.io",
        failures[0]["metadata"]["name"].as_str().unwrap_or_default(),
        "-n",
        "backflow-system",
    ]);
    assert_eq!(v1["reportingController"], "backflow", "{v1}");
    assert_eq!(v1["action"], "Apply", "{v1}");
    let described = w.kubectl(&[
        "describe",
        "nativeclaim",
        "default",
        "-n",
        "backflow-system",
    ]);
    assert!(
        described
            .lines()
            .any(|l| l.contains("Warning") && l.contains("ApplyFailed") && l.contains("(x")),
        "{described}"
    );
    assert!(
        failures[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Widget"),
        "{failures:#?}"
    );
    std::fs::remove_file(clone.join("live/default/widgets/w.yaml")).unwrap();
    let fixed = w.commit_all_and_push(&clone, "remove the widget");
    wait_applied(&w, &fixed);
    let ready = claim(&w)["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "True");
}

#[test]
fn an_operation_found_in_flight_after_kill_9_ends_interrupted_and_is_decided_again() {
    let mut w = World::start(&[]);
    w.apply(&configmap("default", "demo", &[("a", "1")]));
    wait_acting(&w);
    w.wait_file("live/default/configmaps/demo.yaml", |_| true);
    let tip = w.tip().unwrap();
    // The process dies with an operation recorded and not ended.
    record_running_operation(&w, 90, &tip);
    w.crash_and_restart(&[]);
    // backflow's own applier ran in the process that died: the operation ended with it, and is
    // not applied again before the new process's snapshot (a live edit made after its flush
    // may never have reached Git). It is decided again, from the tip as it is then.
    let op = wait_for(
        "operation 90 to end interrupted",
        || format!("{:#}", claim(&w)),
        || {
            let op = claim(&w)["operation"].clone();
            (op["id"] == 90 && op["phase"] == "Failed").then_some(op)
        },
    );
    assert!(
        op["message"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{op:#}"
    );
    wait_for(
        "the claim to apply again after its backoff",
        || format!("{:#}", claim(&w)),
        || {
            let op = claim(&w)["operation"].clone();
            (op["id"].as_u64() > Some(90) && op["phase"] == "Succeeded").then_some(())
        },
    );
    // Numbering goes on after it.
    let clone = w.clone_origin("bob");
    std::fs::write(
        clone.join("live/default/more.yaml"),
        configmap("default", "more", &[("b", "2")]),
    )
    .unwrap();
    let next = w.commit_all_and_push(&clone, "more");
    let op = wait_applied(&w, &next);
    assert!(op["id"].as_u64().unwrap() > 90, "{op:#}");
}

/// A claim no target names any more lets go of what it stamped: the ownership label is removed,
/// so whoever coordinates the folder next does not take the objects for another applier's.
#[test]
fn a_claim_no_longer_named_removes_its_ownership_labels() {
    let w = World::start(&[]);
    w.apply(&configmap("default", "demo", &[("greeting", "hello")]));
    wait_acting(&w);
    let label = |w: &World| {
        w.get_json(&["configmap", "demo"])["metadata"]["labels"]["backflow.dev/applier"].clone()
    };
    wait_for(
        "the live create to be adopted",
        || format!("{:?}", label(&w)),
        || (label(&w) == "backflow-system.default").then_some(()),
    );
    w.patch_target("default", r#"{"spec":{"applierClaimRef":null}}"#);
    wait_for(
        "the ownership label to be removed",
        || format!("{:?}", label(&w)),
        || label(&w).is_null().then_some(()),
    );
    assert_eq!(
        w.get_json(&["configmap", "demo"])["data"]["greeting"],
        "hello"
    );
}

#[test]
fn a_sops_encrypted_secret_pushed_to_git_arrives_decrypted() {
    let w = World::start(&[]);
    wait_acting(&w);
    assert!(sops_bin().is_file());
    let clone = w.clone_origin("bob");
    let dir = clone.join("live/default/secrets");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("api.sops.yaml"),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\n  namespace: default\nstringData:\n  token: pushed-in-git-4471\n",
    )
    .unwrap();
    // The folder's .sops.yaml names the server's recipient; a person encrypts with sops.
    sops_encrypt_in_place(&w, &clone.join("live"), "default/secrets/api.sops.yaml");
    let text = std::fs::read_to_string(dir.join("api.sops.yaml")).unwrap();
    assert!(!text.contains("pushed-in-git-4471"), "encrypted in Git");
    let pushed = w.commit_all_and_push(&clone, "a secret");
    wait_applied(&w, &pushed);
    let secret = w.get_json(&["secret", "api"]);
    let value = secret["data"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(b64_decode(&value), "pushed-in-git-4471", "{secret:#}");
}

fn b64_decode(text: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap(),
    )
    .unwrap()
}

/// Adopting live creates stamps them and touches no other field: edits made right after a
/// create, while adopting applies run, are never reverted (only objects Git changed since the
/// last applied commit are ever written whole).
#[test]
fn edits_racing_adopting_applies_are_never_reverted() {
    let w = World::start(&[]);
    wait_acting(&w);
    for i in 0..8 {
        let name = format!("race-{i}");
        w.apply(&configmap("default", &name, &[("count", "0")]));
        for n in 1..=3 {
            let patch = format!(r#"{{"data":{{"count":"{n}"}}}}"#);
            w.kubectl(&["patch", "configmap", &name, "-p", &patch]);
        }
    }
    wait_idle(&w);
    wait_for(
        "every create adopted",
        || format!("{:#}", claim(&w)["inventory"]),
        || {
            let inventory = claim(&w)["inventory"].to_string();
            (0..8)
                .all(|i| inventory.contains(&format!("default_race-{i}__ConfigMap")))
                .then_some(())
        },
    );
    wait_idle(&w);
    for i in 0..8 {
        let name = format!("race-{i}");
        assert_eq!(
            cm_value(&w, &name, "count").as_deref(),
            Some("3"),
            "{name} live"
        );
        let file = w
            .show(&format!("live/default/configmaps/{name}.yaml"))
            .unwrap();
        assert!(file.contains("count: \"3\""), "{name} in Git:\n{file}");
    }
}

/// Nothing is applied before every collection of every target the claim covers has a settled
/// snapshot: a target whose rule names a type not served yet holds its claim back, whatever is
/// pushed meanwhile; once the type is served and its snapshot published, the push is applied.
#[test]
fn nothing_is_applied_before_the_claims_targets_have_their_snapshots() {
    let w = World::start(&[]);
    wait_acting(&w);
    w.apply(
        r#"apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {name: gated, namespace: backflow-system}
spec: {}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: gated, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: gated
  applierClaimRef: {kind: NativeClaim, name: gated}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {name: gated, namespace: backflow-system}
spec: {targetRef: {name: gated}, rules: [{apiGroups: [example.com], resources: [gadgets], sourceNamespace: "*"}]}
"#,
    );
    let gated = || w.get_json(&["nativeclaim", "gated", "-n", "backflow-system"])["status"].clone();
    let clone = w.clone_origin("bob");
    std::fs::create_dir_all(clone.join("gated/default")).unwrap();
    std::fs::write(
        clone.join("gated/default/gated.yaml"),
        configmap("default", "gated", &[("from", "git")]),
    )
    .unwrap();
    // The mirror keeps committing the configuration just applied: rebase as a person would.
    let pushed = w.commit_all_and_push_rebasing(&clone, "a manifest in the gated folder");
    // The default claim acts on that push (so it was seen); the gated one asks nothing.
    wait_applied(&w, &pushed);
    std::thread::sleep(Duration::from_secs(2));
    assert!(gated()["operation"].is_null(), "{:#}", gated());
    assert!(
        w.kubectl_run(&["get", "configmap", "gated"]).code != Some(0),
        "not applied"
    );

    // The type becomes served; the target's snapshot is published; the push is applied.
    w.apply(&schemaless_crd(
        "example.com",
        "gadgets",
        "gadget",
        "Gadget",
    ));
    wait_for(
        "the gated claim to apply the push",
        || format!("{:#}", gated()),
        || (gated()["operation"]["phase"] == "Succeeded").then_some(()),
    );
    wait_value(&w, "gated", "from", "git");
}

/// Sets the default `NativeClaim`'s `spec.suspend`: while true it asks nothing.
pub(crate) fn suspend_default_claim(w: &World, suspend: bool) {
    let patch = format!(r#"{{"spec":{{"suspend":{suspend}}}}}"#);
    patch_default_claim(w, &[], &patch);
}

/// Found by the simulator (`Variant::WithDeletes`, seed 36): an object created through the API
/// is in Git but not yet adopted (stamped) by the folder's applier when a push removes its file.
/// The adoption and the push are then one operation, at a commit that no longer declares the
/// object: it was never stamped, and only stamped objects were pruned, so Git lost it and the
/// live side kept it for good. Here the claim is suspended to hold the adoption back.
#[test]
fn a_removal_pushed_before_an_api_created_object_is_adopted_still_reaches_the_live_side() {
    let w = World::start(&[]);
    wait_acting(&w);
    suspend_default_claim(&w, true);
    w.apply(&configmap("default", "made-live", &[("k", "v")]));
    let path = "live/default/configmaps/made-live.yaml";
    w.wait_file(path, |t| t.contains("made-live"));
    let clone = w.clone_origin("carol");
    std::fs::remove_file(clone.join(path)).unwrap();
    let removal = w.commit_all_and_push_rebasing(&clone, "carol removes made-live");
    suspend_default_claim(&w, false);
    wait_applied(&w, &removal);
    wait_for(
        "the removal to reach the live side",
        || {
            w.kubectl_run(&["get", "configmap", "made-live", "-o", "yaml"])
                .stdout
        },
        || (w.kubectl_run(&["get", "configmap", "made-live"]).code != Some(0)).then_some(()),
    );
    assert_eq!(w.show(path), None, "Git keeps the removal");
}

/// Creates `ConfigMap` `name` with `v` through the API, waiting for its push (a long commit
/// window would hold it otherwise), and waits until the default claim owns it.
pub(crate) fn create_adopted(w: &World, name: &str, v: &str) {
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"v":"{v}"}}}}"#
    );
    let created = http(
        w.addr(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("X-Backflow-Wait", "pushed;timeout=60s"),
        ],
        &body,
    );
    assert_eq!(created.status, 201, "{created:?}");
    let id = format!("default_{name}__ConfigMap");
    wait_for(
        &format!("{name} to be adopted"),
        || format!("{:#}", claim(w)["inventory"]),
        || {
            claim(w)["inventory"]
                .to_string()
                .contains(&id)
                .then_some(())
        },
    );
}

pub(crate) fn live_absent(w: &World, name: &str) -> bool {
    w.kubectl_run(&["get", "configmap", name]).code != Some(0)
}

/// The applier's own delete (a prune) is the apply landing, not somebody's delete. Mirrored
/// as a delete, it was judged on the tip the worker read next and removed the file again when
/// a push had brought it back meanwhile. The long commit window keeps the prune's delete
/// waiting until that push is seen.
#[test]
fn a_file_pushed_back_right_after_its_removal_was_applied_stays() {
    let w = World::start(&["--commit-window", "5m"]);
    wait_acting(&w);
    create_adopted(&w, "back", "one");
    let path = "live/default/configmaps/back.yaml";
    let clone = w.clone_origin("dave");
    let text = std::fs::read_to_string(clone.join(path)).expect("the file");
    std::fs::remove_file(clone.join(path)).expect("remove");
    let removal = w.commit_all_and_push(&clone, "dave removes back");
    wait_applied(&w, &removal);
    wait_for("the removal to reach the live side", String::new, || {
        live_absent(&w, "back").then_some(())
    });
    std::fs::write(clone.join(path), text.replace("one", "two")).expect("write");
    let back = w.commit_all_and_push_rebasing(&clone, "dave brings back back");
    wait_applied(&w, &back);
    wait_value(&w, "back", "v", "two");
    assert_quiescent(&w, Duration::from_secs(2));
    let text = w.show(path).expect("Git keeps the file pushed back");
    assert!(text.contains("two"), "{text}");
    assert_eq!(cm_value(&w, "back", "v").as_deref(), Some("two"));
}

/// `git revert` of the commit backflow made for a live delete brings the object back. The
/// revert declares the object exactly as the last applied commit did (backflow's own commit
/// is not applied), so the object was judged unchanged since the last apply and, missing live,
/// not re-created: Git and the live side stayed apart for good.
#[test]
fn reverting_the_commit_of_a_live_delete_brings_the_object_back() {
    let w = World::start(&[]);
    wait_acting(&w);
    let path = "live/default/configmaps/undo.yaml";
    let clone = w.clone_origin("erin");
    std::fs::create_dir_all(clone.join("live/default/configmaps")).expect("folder");
    let file = configmap("default", "undo", &[("greeting", "hello")]);
    std::fs::write(clone.join(path), file).expect("write");
    let pushed = w.commit_all_and_push_rebasing(&clone, "erin adds undo");
    wait_applied(&w, &pushed);
    wait_value(&w, "undo", "greeting", "hello");
    w.kubectl(&["delete", "configmap", "undo"]);
    wait_for("the delete to reach Git", String::new, || {
        w.show(path).is_none().then_some(())
    });
    w.wait_settled();
    w.git_in(Some(&clone), &["pull", "-q", "--rebase", "origin", "main"]);
    let removal = w.git_in(Some(&clone), &["log", "-1", "--format=%H", "--", path]);
    w.git_in(Some(&clone), &["revert", "--no-edit", removal.trim()]);
    w.git_in(Some(&clone), &["push", "-q", "origin", "HEAD:main"]);
    let revert = w.git_in(Some(&clone), &["rev-parse", "HEAD"]);
    wait_applied(&w, revert.trim());
    wait_value(&w, "undo", "greeting", "hello");
    assert_quiescent(&w, Duration::from_secs(2));
    assert!(w.show(path).is_some(), "Git keeps the reverted file");
}

/// Somebody force-pushes the branch back to a commit backflow made, undoing a push that was
/// applied since: the live side follows. The move was taken for backflow's own push (the
/// commit is its own) and never applied, leaving the live side at the undone push for good.
#[test]
fn a_force_push_back_to_a_commit_of_backflows_is_applied() {
    let w = World::start(&[]);
    wait_acting(&w);
    create_adopted(&w, "rollback", "live");
    let path = "live/default/configmaps/rollback.yaml";
    w.wait_file(path, |t| t.contains("live"));
    w.wait_settled();
    let own = w.tip().expect("backflow's commit");
    let clone = w.clone_origin("frank");
    let text = std::fs::read_to_string(clone.join(path)).expect("the file");
    std::fs::write(clone.join(path), text.replace("live", "pushed")).expect("write");
    let pushed = w.commit_all_and_push_rebasing(&clone, "frank changes rollback");
    wait_applied(&w, &pushed);
    wait_value(&w, "rollback", "v", "pushed");
    force_push(&w, &clone, &own);
    wait_applied(&w, &own);
    wait_value(&w, "rollback", "v", "live");
    assert_quiescent(&w, Duration::from_secs(2));
    assert_eq!(
        w.tip().as_deref(),
        Some(own.as_str()),
        "nothing committed over it"
    );
}

/// The process dies while an operation applying backflow's commit of a live edit is recorded
/// in flight, and while it is down somebody force-pushes the branch back past that commit: Git
/// no longer holds the edit, and the object reads as that operation's commit held it (taken
/// as written by the applier: Git's older value stands). The next apply must then bring the
/// live side to the branch — it compared with the last applied commit alone, where the object
/// had not changed, wrote nothing, and Git and the live side stayed apart for good (found by
/// the simulator, default seed 21826). It now also looks at what the operation asked before
/// declared.
#[test]
fn a_force_push_past_an_interrupted_apply_brings_the_live_side_to_the_branch() {
    let mut w = World::start(&[]);
    wait_acting(&w);
    create_adopted(&w, "partial", "one");
    let path = "live/default/configmaps/partial.yaml";
    w.wait_file(path, |t| t.contains("one"));
    w.wait_settled();
    let held = w.tip().expect("a tip");
    wait_applied(&w, &held);
    w.kubectl(&[
        "patch",
        "configmap",
        "partial",
        "--type=merge",
        "-p",
        r#"{"data":{"v":"two"}}"#,
    ]);
    w.wait_file(path, |t| t.contains("two"));
    w.wait_settled();
    let edit = w.tip().expect("backflow's commit of the edit");
    // The process dies while applying the edit's commit: the live side was last in step with
    // the commit before it.
    let status = format!(
        r#"{{"status":{{"lastAppliedCommit":"{held}","inStepCommit":"{held}","operation":{{"id":90,"commit":"{edit}","reasons":["ForeignCommit"],"phase":"Running"}}}}}}"#
    );
    patch_default_claim(&w, &["--subresource=status"], &status);
    w.crash();
    let clone = w.clone_origin("hana");
    force_push(&w, &clone, &held);
    w.restart(&[]);
    wait_value(&w, "partial", "v", "one");
    assert_quiescent(&w, Duration::from_secs(2));
    let file = w.show(path).expect("the file");
    assert!(
        file.contains("one"),
        "Git holds what the live side holds:\n{file}"
    );
}

/// Somebody force-pushes the branch to `commit` from their clone.
fn force_push(w: &World, clone: &std::path::Path, commit: &str) {
    let refspec = format!("{commit}:refs/heads/main");
    w.git_in(Some(clone), &["push", "-q", "--force", "origin", &refspec]);
}

/// The branch deleted: the worker rebuilds it from the live state, and the claim then applies
/// the rebuilt tip, so its status names a commit on the branch as what the live side holds
/// (before, it kept naming the deleted branch's last commit; and an apply still running when
/// the branch went could leave the live side at that lost commit, as the simulator found).
#[test]
fn a_deleted_branch_is_rebuilt_and_its_new_tip_applied() {
    let w = World::start(&[]);
    wait_acting(&w);
    create_adopted(&w, "kept", "one");
    w.wait_file("live/default/configmaps/kept.yaml", |t| t.contains("one"));
    w.wait_settled();
    let before = w.tip().expect("a tip");
    wait_applied(&w, &before);
    w.git(&["config", "receive.denyDeleteCurrent", "ignore"]);
    let clone = w.clone_origin("gina");
    w.git_in(Some(&clone), &["push", "-q", "origin", "--delete", "main"]);
    let rebuilt = wait_for(
        "the deleted branch to be rebuilt from the live state",
        || format!("{:?}", w.tip()),
        || w.tip().filter(|t| *t != before),
    );
    let op = wait_applied(&w, &rebuilt);
    assert_eq!(op["commit"], rebuilt.as_str(), "{op:#}");
    wait_for(
        "the claim to say the live side holds the rebuilt tip",
        || format!("{:#}", claim(&w)),
        || (claim(&w)["lastAppliedCommit"] == rebuilt.as_str()).then_some(()),
    );
    assert_eq!(cm_value(&w, "kept", "v").as_deref(), Some("one"));
    assert!(
        w.show("live/default/configmaps/kept.yaml")
            .is_some_and(|t| t.contains("one")),
        "the rebuilt branch holds the live object"
    );
}

/// Runs the apply of the foreign commit `push` makes with its flush held (the remote's branch
/// is locked, so the flush's push fails and is retried), and `during` while it is held: what
/// `during` does is decided after the flush's mark. Returns the foreign commit.
fn hold_an_apply(w: &World, push: impl FnOnce() -> String, during: impl FnOnce()) -> String {
    // An edit waiting in the window, so the flush before the apply has something to push.
    let before = w.events("submitted");
    let patch = r#"{"data":{"v":"beta"}}"#;
    w.kubectl(&["patch", "configmap", "other", "--type=merge", "-p", patch]);
    w.wait_events("submitted", before, 1.0);
    // The push is seen while the claim is suspended: its apply waits.
    suspend_default_claim(w, true);
    let commit = push();
    let failed = w.lock_branch();
    suspend_default_claim(w, false);
    w.wait_push_failed(failed);
    during();
    w.unlock_branch();
    wait_applied(w, &commit);
    assert_quiescent(w, Duration::from_secs(2));
    assert_eq!(cm_value(w, "other", "v").as_deref(), Some("beta"));
    commit
}

/// A person deletes an object while an apply of a commit that changed it is on its way: the
/// applier re-creates the object, which collides with the delete seen in the window; the
/// delete stays in Git and the Repair removes the object again.
#[test]
fn an_object_deleted_during_an_apply_that_recreates_it_is_deleted_again() {
    let w = World::start(&["--commit-window", "5m"]);
    wait_acting(&w);
    create_adopted(&w, "gone", "alpha");
    create_adopted(&w, "other", "alpha");
    // Objects created live once the claim acts are adopted, and it says so.
    wait_for("an Adopted Event on the claim", String::new, || {
        claim_events_with(&w, "Adopted").then_some(())
    });
    let path = "live/default/configmaps/gone.yaml";
    hold_an_apply(
        &w,
        || w.push_edit(path, "alpha", "gamma"),
        || {
            w.kubectl(&["delete", "configmap", "gone"]);
        },
    );
    assert!(
        live_absent(&w, "gone"),
        "the delete is not reverted: {:?}",
        cm_value(&w, "gone", "v")
    );
    assert_eq!(w.show(path), None, "Git holds the delete");
    // Both told as Events: the applier's write over the delete, on the object; the Repair, on
    // the claim.
    let reasons = |namespace: &str| {
        let list = w.get_json(&["events", "-n", namespace]);
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let text = |f: &str| {
                    e.pointer(f)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (
                    text("/reason"),
                    text("/involvedObject/kind"),
                    text("/involvedObject/name"),
                )
            })
            .collect::<Vec<_>>()
    };
    wait_for(
        "the Events of the collision and its Repair",
        || format!("{:?} {:?}", reasons("default"), reasons("backflow-system")),
        || {
            let on_object = reasons("default").contains(&(
                "ApplierOverwroteEdit".into(),
                "ConfigMap".into(),
                "gone".into(),
            ));
            let on_claim = reasons("backflow-system").contains(&(
                "Repaired".into(),
                "NativeClaim".into(),
                "default".into(),
            ));
            (on_object && on_claim).then_some(())
        },
    );
    // And in the object's story: the delete, the push, the applier's write over the delete
    // and the repair, newest first.
    let story = crate::face::history_json(&w, "configmap/gone");
    let kinds: Vec<&str> = story["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {story:#}"))
    };
    assert!(at("Repaired") < at("Pushed"), "{story:#}");
    assert!(
        story["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "LiveWrite"
                && e["summary"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("deleted")))),
        "the person's delete: {story:#}"
    );
}

/// A person edits an object the applier owns while an apply of a commit that removes it is on
/// its way: the edit wins. The object is never deleted (its uid stays), and its file comes back
/// with the edit.
#[test]
fn an_object_edited_during_an_apply_that_removes_it_is_kept() {
    let w = World::start(&["--commit-window", "5m"]);
    wait_acting(&w);
    create_adopted(&w, "kept", "alpha");
    create_adopted(&w, "other", "alpha");
    let uid = w.get_json(&["configmap", "kept"])["metadata"]["uid"].clone();
    let path = "live/default/configmaps/kept.yaml";
    let collisions = || metric_sum(&w.metrics(), "backflow_apply_window_collisions_total", &[]);
    let before = collisions();
    hold_an_apply(
        &w,
        || {
            let clone = w.clone_origin("frank");
            std::fs::remove_file(clone.join(path)).expect("remove");
            w.commit_all_and_push_rebasing(&clone, "frank removes kept")
        },
        || {
            let patch = r#"{"data":{"v":"delta"}}"#;
            w.kubectl(&["patch", "configmap", "kept", "--type=merge", "-p", patch]);
        },
    );
    let live = w.get_json(&["configmap", "kept"]);
    assert_eq!(live["metadata"]["uid"], uid, "never deleted: {live:#}");
    assert_eq!(live["data"]["v"], "delta");
    let text = w.show(path).expect("the edit brings the file back");
    assert!(text.contains("delta"), "{text}");
    assert!(collisions() <= before, "nothing to repair");
}

/// A Deployment, a Service and a custom resource pushed as people write them (no defaulted
/// field) are applied, the live objects get kube-apiserver's defaults (the custom resource its
/// CRD schema's), and the mirror leaves Git as pushed: no commit writes the defaults back.
#[test]
fn objects_pushed_without_defaults_are_applied_and_git_keeps_them_as_written() {
    let w = World::start(&[]);
    w.apply(GADGET_CRD);
    w.wait_established(&["gadgets.example.com"]);
    wait_acting(&w);
    let clone = w.clone_origin("bob");
    let gadget_path = "live/default/example.com/gadgets/g1.yaml";
    let gadget = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: default\nspec:\n  color: blue\n";
    let deployment_path = "live/default/apps/deployments/api.yaml";
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: default\nspec:\n  selector:\n    matchLabels:\n      app: api\n  template:\n    metadata:\n      labels:\n        app: api\n    spec:\n      containers:\n      - name: api\n        image: api:1.0\n        ports:\n        - containerPort: 8080\n";
    let service_path = "live/default/services/api.yaml";
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: api\n  namespace: default\nspec:\n  selector:\n    app: api\n  ports:\n  - port: 80\n";
    for (path, text) in [
        (deployment_path, deployment),
        (service_path, service),
        (gadget_path, gadget),
    ] {
        let file = clone.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("folder");
        std::fs::write(&file, text).expect("written");
    }
    let pushed = w.commit_all_and_push(&clone, "bob adds the api");
    wait_applied(&w, &pushed);
    let live = w.get_json(&["deployment", "api"]);
    assert_eq!(live["spec"]["progressDeadlineSeconds"], 600, "{live:#}");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let live = w.get_json(&["service", "api"]);
    assert_eq!(live["spec"]["type"], "ClusterIP", "{live:#}");
    assert_eq!(live["spec"]["ports"][0]["targetPort"], 80);
    let live = w.get_json(&["gadget", "g1"]);
    assert_eq!(
        live["spec"],
        serde_json::json!({"color": "blue", "size": 1, "tuning": {"mode": "auto"}}),
        "the CRD schema's defaults"
    );
    assert_quiescent(&w, Duration::from_secs(5));
    assert_eq!(
        w.tip().as_deref(),
        Some(pushed.as_str()),
        "no commit after the apply"
    );
    assert_eq!(w.show(deployment_path).as_deref(), Some(deployment));
    assert_eq!(w.show(service_path).as_deref(), Some(service));
    assert_eq!(w.show(gadget_path).as_deref(), Some(gadget));

    // A Gadget made through the API lands in Git without its defaults.
    w.apply("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g2, namespace: default}\nspec: {color: red, size: 3}\n");
    let text = w.wait_present("live/default/example.com/gadgets/g2.yaml");
    assert!(
        text.contains("size: 3") && !text.contains("tuning"),
        "{text}"
    );
}

/// A CRD and an object of its kind pushed in one commit are both applied (the CRD's tier goes
/// first, whatever the files' order); a later push changing the CRD (a new default) and adding
/// another object applies it with the CRD's new schema, and a push that only changes an object
/// of the kind is applied too.
#[test]
fn a_crd_and_objects_of_its_kind_pushed_together_are_applied_in_order() {
    let w = World::start(&[]);
    wait_acting(&w);
    let clone = w.clone_origin("bob");
    let crd_path = "live/apiextensions.k8s.io/customresourcedefinitions/gadgets.example.com.yaml";
    let write = |path: &str, text: &str| {
        let file = clone.join(path);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("folder");
        std::fs::write(&file, text).expect("written");
    };
    let gadget = |name: &str, color: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  color: {color}\n"
        )
    };
    // Its file sorts after the CRD's folder, which is applied first anyway.
    write(
        "live/default/example.com/gadgets/g1.yaml",
        &gadget("g1", "blue"),
    );
    write(crd_path, GADGET_CRD);
    let pushed = w.commit_all_and_push(&clone, "bob adds gadgets");
    wait_applied(&w, &pushed);
    let live = w.get_json(&["gadget", "g1"]);
    assert_eq!(live["spec"]["size"], 1, "{live:#}");

    write(crd_path, &GADGET_CRD.replace("default: 1", "default: 2"));
    write(
        "live/default/example.com/gadgets/g2.yaml",
        &gadget("g2", "red"),
    );
    let pushed = w.commit_all_and_push(&clone, "bob changes the default size");
    wait_applied(&w, &pushed);
    let live = w.get_json(&["gadget", "g2"]);
    assert_eq!(live["spec"]["size"], 2, "the CRD's new default: {live:#}");

    write(
        "live/default/example.com/gadgets/g2.yaml",
        &gadget("g2", "green"),
    );
    let pushed = w.commit_all_and_push(&clone, "bob paints g2");
    wait_applied(&w, &pushed);
    let live = w.get_json(&["gadget", "g2"]);
    assert_eq!(live["spec"]["color"], "green", "{live:#}");
}

/// A catch-up (the operation that adopts an object created through the API once backflow
/// published it) looks only at what Git changed since the last applied commit — the new
/// object's file — not at every object of the folder, and stamps the create.
#[test]
fn a_catch_up_judges_only_what_git_changed_and_adopts_the_create() {
    let w = World::start(&[]);
    wait_acting(&w);
    let clone = w.clone_origin("bob");
    let folder = clone.join("live/default/configmaps");
    std::fs::create_dir_all(&folder).expect("folder");
    for i in 0..30 {
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n  namespace: default\ndata:\n  v: '0'\n"
        );
        std::fs::write(folder.join(format!("c{i}.yaml")), text).expect("written");
    }
    let pushed = w.commit_all_and_push(&clone, "bob adds 30 ConfigMaps");
    wait_applied(&w, &pushed);
    w.wait_settled();
    w.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c99, namespace: default}\ndata: {v: '9'}\n");
    let stamped = || {
        w.get_json(&["configmap", "c99"])["metadata"]["labels"]["backflow.dev/applier"]
            == "backflow-system.default"
    };
    wait_for(
        "the create to be adopted (stamped)",
        || format!("{:#}", claim(&w)),
        || stamped().then_some(()),
    );
    let op = wait_for(
        "the adopting operation to end",
        || format!("{:#}", claim(&w)),
        || {
            let op = claim(&w)["operation"].clone();
            (op["phase"] == "Succeeded" && op["reasons"] == serde_json::json!(["CatchUp"]))
                .then_some(op)
        },
    );
    let message = op["message"].as_str().unwrap_or_default();
    let unchanged: usize = message
        .split("unchanged ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    let files = w.files().len();
    assert!(
        message.starts_with("applied 1,") && unchanged == 0 && files > 50,
        "only what Git changed is judged, not the folder's {files} files: {op:#}"
    );
}

/// A custom kind whose schema defaults fields, at two depths.
const GADGET_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer, default: 1}
              tuning:
                type: object
                default: {}
                properties:
                  mode: {type: string, default: auto}
";

/// Whether the default claim has an Event with `reason`.
fn claim_events_with(w: &World, reason: &str) -> bool {
    let list = w.get_json(&["events", "-n", "backflow-system"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["reason"] == reason && e["involvedObject"]["kind"] == "NativeClaim")
}
