//! The apply window end to end (`serve` defaults, the default folder coordinated by its
//! `NativeClaim`): a coordinated folder exists before it holds anything, objects another applier
//! owns stay out of it, and an edit that an apply writes over is kept in Git and repaired.

use std::fmt::Write as _;
use std::time::Duration;

use crate::apply::{assert_quiescent, claim, wait_acting, wait_applied};
use crate::common::*;

fn metric(w: &World, name: &str, labels: &[&str]) -> f64 {
    metric_sum(&w.metrics(), name, labels)
}

/// A counter, as the whole number it is.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a counter is a small non-negative whole number"
)]
fn count(w: &World, name: &str, labels: &[&str]) -> u64 {
    metric(w, name, labels).round() as u64
}

/// A target `name` writing configmaps of namespace `namespace` to the folder `name`,
/// coordinated by the default claim when `claimed`.
fn target(name: &str, namespace: &str, claimed: bool) -> String {
    let claim = if claimed {
        "\n  applierClaimRef: {kind: NativeClaim, name: default}"
    } else {
        ""
    };
    format!(
        r#"apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: {name}, namespace: backflow-system}}
spec:
  providerRef: {{name: default}}
  branch: main
  path: {name}{claim}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: {name}, namespace: backflow-system}}
spec: {{targetRef: {{name: {name}}}, rules: [{{apiGroups: [""], resources: [configmaps], sourceNamespace: {namespace}}}]}}
"#
    )
}

#[test]
fn a_coordinated_folder_exists_before_it_holds_anything() {
    let w = World::start(&[]);
    wait_acting(&w);
    w.kubectl(&["create", "namespace", "quiet"]);
    w.apply(&target("oneway", "quiet", false));
    w.apply(&target("apps", "quiet", true));
    w.wait_target_ready("apps");
    w.wait_target_ready("oneway");
    for file in ["apps/README.md", "apps/.gittargetignore"] {
        w.wait_present(file);
    }
    w.wait_settled();
    assert!(
        !w.files().iter().any(|f| f.starts_with("oneway/")),
        "a folder no claim coordinates gets its files with its first object:\n{}",
        w.describe_remote()
    );
    // Bootstrapped once: a later resync of a folder that exists commits nothing, and a README a
    // person removed stays removed.
    let clone = w.clone_origin("bob");
    std::fs::remove_file(clone.join("apps/README.md")).unwrap();
    let removed = w.commit_all_and_push(&clone, "bob removes the README");
    wait_applied(&w, &removed);
    w.patch_target("apps", r#"{"spec":{"prune":{"mode":"Always"}}}"#);
    w.wait_target_ready("apps");
    w.wait_settled();
    assert_quiescent(&w, Duration::from_secs(10));
    assert!(
        w.show("apps/README.md").is_none(),
        "{}",
        w.describe_remote()
    );
    assert!(w.show("apps/.gittargetignore").is_some());
}

/// A `ConfigMap` in `default` carrying labels and annotations, as another applier leaves it.
fn stamped_configmap(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> String {
    let mut s = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"
    );
    for (field, pairs) in [("labels", labels), ("annotations", annotations)] {
        if !pairs.is_empty() {
            writeln!(s, "  {field}:").unwrap();
            for (k, v) in pairs {
                writeln!(s, "    {k}: \"{v}\"").unwrap();
            }
        }
    }
    s.push_str("data:\n  owner: \"theirs\"\n");
    s
}

#[test]
fn objects_another_applier_owns_are_neither_mirrored_nor_swept_nor_applied() {
    let w = World::start(&[]);
    wait_acting(&w);
    // A one-way folder mirrors everything: what it is for.
    w.apply(&target("oneway", "default", false));
    w.wait_target_ready("oneway");
    w.apply(&stamped_configmap(
        "flux-owned",
        &[
            ("kustomize.toolkit.fluxcd.io/name", "apps"),
            ("kustomize.toolkit.fluxcd.io/namespace", "flux-system"),
            ("kustomize.toolkit.fluxcd.io/reconcile", "disabled"),
        ],
        &[("kustomize.toolkit.fluxcd.io/checksum", "abc")],
    ));
    w.apply(&stamped_configmap(
        "argo-owned",
        &[],
        &[(
            "argocd.argoproj.io/tracking-id",
            "guestbook:/ConfigMap:default/argo-owned",
        )],
    ));
    w.apply(&configmap("default", "mine", &[("owner", "us")]));
    w.wait_present("live/default/configmaps/mine.yaml");
    let flux = w.wait_present("oneway/default/configmaps/flux-owned.yaml");
    w.wait_present("oneway/default/configmaps/argo-owned.yaml");
    assert!(
        flux.contains("kustomize.toolkit.fluxcd.io/reconcile")
            && !flux.contains("kustomize.toolkit.fluxcd.io/name")
            && !flux.contains("kustomize.toolkit.fluxcd.io/namespace")
            && !flux.contains("checksum"),
        "Flux's bookkeeping is stripped, its user-intent keys kept:\n{flux}"
    );
    w.wait_settled();
    for name in ["flux-owned", "argo-owned"] {
        assert!(
            w.show(&format!("live/default/configmaps/{name}.yaml"))
                .is_none(),
            "{name} is not mirrored into the coordinated folder:\n{}",
            w.describe_remote()
        );
    }
    let conflicts = |w: &World| {
        count(
            w,
            "backflow_apply_ownership_conflicts_total",
            &["target=\"backflow-system/default\""],
        )
    };
    assert_eq!(conflicts(&w), 2, "{}", w.metrics());

    // A live edit of an owned object is not mirrored either, and counts no new conflict.
    w.kubectl(&[
        "patch",
        "configmap",
        "flux-owned",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"owner":"flux-edit"}}"#,
    ]);
    w.wait_file("oneway/default/configmaps/flux-owned.yaml", |t| {
        t.contains("flux-edit")
    });
    w.wait_settled();
    assert!(w.show("live/default/configmaps/flux-owned.yaml").is_none());
    assert_eq!(conflicts(&w), 2);

    // A document somebody pushed for an owned object is neither applied nor swept.
    let clone = w.clone_origin("bob");
    let doc = clone.join("live/default/configmaps/argo-owned.yaml");
    std::fs::create_dir_all(doc.parent().unwrap()).unwrap();
    std::fs::write(
        &doc,
        configmap("default", "argo-owned", &[("owner", "from-git")]),
    )
    .unwrap();
    let pushed = w.commit_all_and_push(&clone, "bob declares argo-owned");
    let op = wait_applied(&w, &pushed);
    assert!(
        op["message"]
            .as_str()
            .unwrap_or_default()
            .contains("owned by another applier 1"),
        "{op:#}"
    );
    let live = w.get_json(&["configmap", "argo-owned"]);
    assert_eq!(
        live["data"]["owner"], "theirs",
        "never applied over Argo CD"
    );
    assert!(live["metadata"]["labels"]["backflow.dev/applier"].is_null());
    w.patch_target("default", r#"{"spec":{"prune":{"mode":"Always"}}}"#);
    w.wait_target_ready("default");
    w.wait_settled();
    assert_quiescent(&w, Duration::from_secs(10));
    assert!(
        w.show("live/default/configmaps/argo-owned.yaml").is_some(),
        "a resync under prune mode Always keeps another applier's document:\n{}",
        w.describe_remote()
    );
    assert!(w.show("live/default/configmaps/flux-owned.yaml").is_none());
    assert!(
        !claim(&w)["inventory"].to_string().contains("argo-owned"),
        "{:#}",
        claim(&w)
    );
}

#[test]
fn an_edit_an_apply_writes_over_is_kept_in_git_and_repaired() {
    let w = World::start(&[]);
    w.apply(&configmap("default", "contested", &[("v", "original")]));
    wait_acting(&w);
    let path = "live/default/configmaps/contested.yaml";
    w.wait_file(path, |t| t.contains("original"));
    let before = |w: &World| {
        (
            count(
                w,
                "backflow_apply_echoes_total",
                &["outcome=\"not_mirrored\""],
            ),
            count(w, "backflow_apply_objects_total", &["result=\"applied\""]),
        )
    };
    // The start-up applies (converge, adopt) and their echoes are over before counting.
    assert_quiescent(&w, Duration::from_secs(2));
    let (echoes, applied) = before(&w);

    // A push large enough that its apply is still running while the test edits.
    let clone = w.clone_origin("bob");
    let dir = clone.join("live/default/configmaps");
    for i in 0..1500 {
        std::fs::write(
            dir.join(format!("bulk-{i:04}.yaml")),
            configmap("default", &format!("bulk-{i:04}"), &[("n", &i.to_string())]),
        )
        .unwrap();
    }
    let bulk = w.commit_all_and_push(&clone, "bob adds 1500 configmaps");
    wait_for(
        "the bulk apply to be running",
        || format!("{:#}", claim(&w)["operation"]),
        || {
            let op = claim(&w)["operation"].clone();
            let foreign = op["reasons"].to_string().contains("ForeignCommit");
            (op["phase"] == "Running" && foreign).then_some(())
        },
    );
    // Alice edits during the apply; then the apply's write lands over her edit. The native
    // applier never writes over a version it did not judge (its write carries the
    // resourceVersion it read), so the write is made here as a slower applier makes it: under
    // the applier's field manager, forced.
    w.kubectl(&[
        "patch",
        "configmap",
        "contested",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"v":"alice"}}"#,
    ]);
    let over = configmap("default", "contested", &[("v", "original")]);
    let manifest = clone.with_file_name("over.yaml");
    std::fs::write(&manifest, over).unwrap();
    w.apply_as_applier(&manifest);
    let repaired = wait_for(
        "the Repair to restore Alice's edit",
        || {
            format!(
                "{:#}\n{:?}",
                claim(&w)["operation"],
                w.get_json(&["configmap", "contested"])["data"]
            )
        },
        || {
            let ops = metric(
                &w,
                "backflow_apply_operations_total",
                &["reason=\"Repair\"", "outcome=\"succeeded\""],
            );
            let live = w.get_json(&["configmap", "contested"]);
            (ops >= 1.0 && live["data"]["v"] == "alice").then_some(live)
        },
    );
    assert_eq!(repaired["data"]["v"], "alice");
    assert!(w.show(path).unwrap().contains("alice"), "Git kept the edit");
    assert_eq!(
        count(&w, "backflow_apply_window_collisions_total", &[]),
        1,
        "{}",
        w.metrics()
    );
    assert_quiescent(&w, Duration::from_secs(10));
    assert!(w.show(path).unwrap().contains("alice"), "and still does");
    assert_eq!(
        w.get_json(&["configmap", "contested"])["data"]["v"],
        "alice"
    );
    // The apply's own writes committed nothing: each of the 1,500 objects the bulk apply
    // created was recognised as the apply landing, exactly once. The Repair's write restores
    // what Git already holds, so the mirror finds it unchanged rather than an echo.
    let (echoes_now, applied_now) = before(&w);
    assert!(applied_now - applied > 1500, "{}", w.metrics());
    assert_eq!(echoes_now - echoes, 1500, "{}", w.metrics());
    let log = w.git(&["log", "--format=%s", &format!("{bulk}..main")]);
    assert!(
        !log.contains("bulk-"),
        "no applied object was committed back:\n{log}"
    );
}

#[test]
fn a_refused_edit_is_reverted_with_reapply_and_ready_returns_after_a_covering_resync() {
    let w = World::start(&["--commit-window", "0s"]);
    w.apply(&configmap("default", "anchored", &[("color", "blue")]));
    wait_acting(&w);
    let path = "live/default/configmaps/anchored.yaml";
    w.wait_present(path);
    w.patch_target("default", r#"{"spec":{"onRefusal":"Reapply"}}"#);
    w.wait_target_ready("default");
    w.wait_settled();
    // A person shares labels through a YAML anchor, which backflow never edits in place.
    let clone = w.clone_origin("bob");
    let anchored = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchored\n  namespace: default\n  labels: &shared\n    app: shop\n  annotations: *shared\ndata:\n  color: blue\n";
    std::fs::write(clone.join(path), anchored).unwrap();
    let pushed = w.commit_all_and_push(&clone, "Share labels through an anchor");
    wait_applied(&w, &pushed);
    w.wait_target_ready("default");
    let resyncs = metric(&w, "backflow_mirror_resyncs_total", &[]);

    // Alice's edit cannot be placed: it is refused, and Reapply applies Git over it.
    w.kubectl(&[
        "patch",
        "configmap",
        "anchored",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"color":"red"}}"#,
    ]);
    wait_for(
        "the refused edit to be reverted",
        || format!("{:?}", w.get_json(&["configmap", "anchored"])["data"]),
        || (w.get_json(&["configmap", "anchored"])["data"]["color"] == "blue").then_some(()),
    );
    // Both told as Events: the refusal on the object, the Reapply on the claim.
    let reasons = |namespace: &str, kind: &str| -> Vec<String> {
        w.get_json(&["events", "-n", namespace])["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["involvedObject"]["kind"] == kind)
            .filter_map(|e| e["reason"].as_str().map(str::to_string))
            .collect()
    };
    wait_for(
        "the refusal and the Reapply as Events",
        || {
            format!(
                "{:?} {:?}",
                reasons("default", "ConfigMap"),
                reasons("backflow-system", "NativeClaim")
            )
        },
        || {
            (reasons("default", "ConfigMap").contains(&"WriteRefused".to_string())
                && reasons("backflow-system", "NativeClaim").contains(&"Reapplied".to_string()))
            .then_some(())
        },
    );
    let described = w.kubectl(&["describe", "configmap", "anchored"]);
    assert!(
        described.contains("WriteRefused") && described.contains("onRefusal: Reapply"),
        "{described}"
    );
    wait_for(
        "the target Ready again after the covering resync",
        || format!("{:?}", w.target_condition("default", "Ready")),
        || {
            let ready = w.target_condition("default", "Ready")?;
            let resynced = metric(&w, "backflow_mirror_resyncs_total", &[]) > resyncs;
            (ready.status == "True" && resynced).then_some(())
        },
    );
    assert!(
        metric(
            &w,
            "backflow_apply_operations_total",
            &["reason=\"Refusal\"", "outcome=\"succeeded\""]
        ) >= 1.0,
        "{}",
        w.metrics()
    );
    assert_eq!(w.show(path).as_deref(), Some(anchored), "Git is untouched");
    assert_quiescent(&w, Duration::from_secs(10));
    assert_eq!(
        w.get_json(&["configmap", "anchored"])["data"]["color"],
        "blue"
    );
}
