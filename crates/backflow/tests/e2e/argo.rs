//! `ArgoCDClaim` end to end, against a contract simulator of Argo CD's application controller
//! (no Argo CD runs here): it acts on the API as the real controller does — a requested
//! `operation` is copied into `status.operationState` (`Running`), the revision it names is
//! synced (the path applied with field manager `argocd-controller` and the
//! `argocd.argoproj.io/tracking-id` annotation, what it applied before and no longer holds
//! pruned), the state ends `Succeeded` with `syncResult.revision`, and `operation` is cleared.
//! With automated sync on it syncs the branch's tip by itself whenever it moves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use backflow_apply::argo::applications;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::apply::{assert_quiescent, one_way_default, wait_acting, wait_claim_operation};
use crate::common::*;
use crate::flux::{SimulatedController, apply_tree, git_out, prune_entries};

pub(crate) async fn reconcile_all(client: &Client) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &applications());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    for app in list.items {
        if let Some(revisions) = app.data["operation"]["sync"]["revisions"].as_array() {
            let revisions: Vec<String> = revisions
                .iter()
                .map(|r| r.as_str().unwrap_or_default().to_string())
                .collect();
            sync_sources(client, &app, &revisions).await;
            continue;
        }
        let git_dir = PathBuf::from(
            app.data["spec"]["source"]["repoURL"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches("file://"),
        );
        let automated = &app.data["spec"]["syncPolicy"]["automated"];
        let requested = app.data["operation"]["sync"]["revision"]
            .as_str()
            .map(str::to_string);
        let revision = match requested {
            Some(r) => r,
            None if automated.is_object() && automated["enabled"] != false => {
                let branch = app.data["spec"]["source"]["targetRevision"]
                    .as_str()
                    .unwrap_or("main");
                let tip = git_out(&git_dir, &["rev-parse", &format!("refs/heads/{branch}")]);
                let tip = tip.trim().to_string();
                if app.data["status"]["sync"]["revision"] == tip.as_str() {
                    continue;
                }
                tip
            }
            None => continue,
        };
        sync(client, &app, &git_dir, &revision).await;
    }
}

/// One sync of a multi-source Application at `revisions` (one per `spec.sources` entry, in
/// order): each Git source with a `path` applied at its revision, the others (a Helm chart, a
/// `ref` for values) taken as they are; `syncResult.revisions` in the same order.
async fn sync_sources(client: &Client, app: &DynamicObject, revisions: &[String]) {
    let ns = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &applications());
    let operation = app.data["operation"].clone();
    let running =
        json!({"status": {"operationState": {"operation": operation, "phase": "Running"}}});
    let _ = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&running))
        .await;
    let sources = app.data["spec"]["sources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut entries = Vec::new();
    let mut failure = None;
    for (source, revision) in sources.iter().zip(revisions) {
        let (Some(url), Some(path)) = (source["repoURL"].as_str(), source["path"].as_str()) else {
            continue;
        };
        let Some(git_dir) = url.strip_prefix("file://") else {
            continue;
        };
        let stamp = |object: &mut Value| {
            let annotations = object["metadata"]
                .as_object_mut()
                .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
            if let Some(annotations) = annotations {
                annotations["argocd.argoproj.io/tracking-id"] = json!(format!("{name}:multi"));
            }
        };
        match apply_tree(
            client,
            Path::new(git_dir),
            revision,
            path,
            "argocd-controller",
            stamp,
        )
        .await
        {
            Ok(applied) => entries.extend(applied),
            Err(e) => failure = Some(e),
        }
    }
    let state = match failure {
        None => {
            json!({"operation": operation, "phase": "Succeeded", "message": "successfully synced",
                       "syncResult": {"revisions": revisions}})
        }
        Some(e) => json!({"operation": operation, "phase": "Failed", "message": e}),
    };
    let done = json!({"operation": null, "status": {"operationState": state, "entries": entries}});
    let _ = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&done))
        .await;
}

/// One sync of `revision`, as the controller runs it and reports it.
async fn sync(client: &Client, app: &DynamicObject, git_dir: &Path, revision: &str) {
    let ns = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &applications());
    let operation = if app.data["operation"].is_null() {
        json!({"sync": {"revision": revision}, "initiatedBy": {"automated": true}})
    } else {
        app.data["operation"].clone()
    };
    let running =
        json!({"status": {"operationState": {"operation": operation, "phase": "Running"}}});
    let _ = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&running))
        .await;
    let path = app.data["spec"]["source"]["path"].as_str().unwrap_or(".");
    let stamp = |object: &mut Value| {
        let group_kind = format!(
            "{}/{}",
            object["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'))
                .map_or("", |(g, _)| g),
            object["kind"].as_str().unwrap_or_default()
        );
        let target = format!(
            "{}/{}",
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        let annotations = object["metadata"]
            .as_object_mut()
            .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
        if let Some(annotations) = annotations {
            annotations["argocd.argoproj.io/tracking-id"] =
                json!(format!("{name}:{group_kind}:{target}"));
        }
    };
    let outcome = apply_tree(client, git_dir, revision, path, "argocd-controller", stamp).await;
    let state = match &outcome {
        Ok(entries) => {
            let previous = app.data["status"]["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            prune_entries(client, &previous, entries).await;
            json!({"operation": operation, "phase": "Succeeded", "message": "successfully synced",
                   "syncResult": {"revision": revision}})
        }
        Err(e) => json!({"operation": operation, "phase": "Failed", "message": e}),
    };
    let mut status = json!({"operationState": state});
    if let Ok(entries) = &outcome {
        status["sync"] = json!({"status": "Synced", "revision": revision});
        status["entries"] = json!(entries);
    }
    let done = json!({"operation": null, "status": status});
    let _ = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&done))
        .await;
}

fn application(w: &World) -> Value {
    w.get_json(&["applications.argoproj.io", "shop", "-n", "backflow-system"])
}

fn argo_claim(w: &World) -> Value {
    w.get_json(&["argocdclaim", "argo", "-n", "backflow-system"])["status"].clone()
}

/// The default folder one-way, `ConfigMap` `shop/demo`, Argo CD's Application kind, Application
/// `shop` (automated sync on, path `shop`) held by `ArgoCDClaim` `argo`, and `GitTarget` `shop`
/// writing the shop's `ConfigMaps` to `shop/`, coordinated by the claim.
pub(crate) fn hold_an_application(w: &World) {
    hold_an_application_with(w, "", |url| {
        format!("source: {{repoURL: '{url}', targetRevision: main, path: shop}}")
    });
}

/// [`hold_an_application`], with `metadata` added to the Application's metadata (`, key: value`)
/// and its sources as `sources` writes them for the repository at `url`.
fn hold_an_application_with(w: &World, metadata: &str, sources: impl Fn(&str) -> String) {
    // The default folder mirrors one way here: the shop's objects belong to the Application.
    one_way_default(w);
    w.kubectl(&["create", "namespace", "shop"]);
    w.apply(&configmap("shop", "demo", &[("greeting", "hello")]));
    // Argo CD's own CRDs are schemaless too.
    w.apply(&schemaless_crd_at(
        "argoproj.io",
        "v1alpha1",
        "applications",
        "application",
        "Application",
    ));
    w.wait_established(&["applications.argoproj.io"]);
    let sources = sources(&w.provider_url());
    // An Application with automated sync on, as a cluster runs it; the claim holds it.
    w.apply(&format!(
        r"apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: shop, namespace: backflow-system{metadata}}}
spec:
  {sources}
  destination: {{namespace: shop}}
  syncPolicy: {{automated: {{prune: true}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: ArgoCDClaim
metadata: {{name: argo, namespace: backflow-system}}
spec: {{applicationRef: {{name: shop}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: shop, namespace: backflow-system}}
spec:
  providerRef: {{name: default}}
  branch: main
  path: shop
  applierClaimRef: {{kind: ArgoCDClaim, name: argo}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: shop, namespace: backflow-system}}
spec: {{targetRef: {{name: shop}}, rules: [{{apiGroups: [''], resources: [configmaps], sourceNamespace: shop}}]}}
"
    ));
}

#[test]
fn a_push_is_synced_by_the_held_application_with_automated_sync_off() {
    let w = World::start(&[]);
    wait_acting(&w);
    hold_an_application(&w);
    // The simulated application controller.
    let _argo = simulated_argo(&w);
    let path = "shop/shop/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_for(
        "automated sync to be switched off and recorded for the hand-back",
        || format!("{:#}\n{:#}", argo_claim(&w), application(&w)["spec"]),
        || {
            (application(&w)["spec"]["syncPolicy"]["automated"]["enabled"] == false
                && argo_claim(&w)["handBack"]["suspend"] == false)
                .then_some(())
        },
    );
    let bob = w.push_edit(path, "hello", "from-argo");
    let op = wait_for(
        "the ArgoCDClaim's sync of Bob's push to succeed",
        || format!("{:#}\n{:#}", argo_claim(&w), application(&w)["status"]),
        || {
            let op = argo_claim(&w)["operation"].clone();
            let holds_bob = w.is_ancestor(&bob, op["commit"].as_str().unwrap_or_default());
            (op["phase"] == "Succeeded" && holds_bob).then_some(op)
        },
    );
    let app = application(&w);
    let state = &app["status"]["operationState"];
    assert_eq!(state["syncResult"]["revision"], op["commit"], "{state:#}");
    assert_eq!(state["operation"]["initiatedBy"]["username"], "backflow");
    assert!(
        app["operation"].is_null(),
        "the controller cleared the request"
    );
    let live = w.get_json(&["configmap", "demo", "-n", "shop"]);
    assert_eq!(live["data"]["greeting"], "from-argo");
    assert!(
        live["metadata"]["annotations"]["argocd.argoproj.io/tracking-id"]
            .as_str()
            .is_some_and(|t| t.starts_with("shop:")),
        "{live:#}"
    );
    let in_git = w.show(path).unwrap();
    assert!(
        in_git.contains("from-argo") && !in_git.contains("tracking-id"),
        "Argo CD's tracking id never reaches Git:\n{in_git}"
    );
    // A live edit of an object the Application applied is mirrored: the folder's own applier.
    w.kubectl(&[
        "patch",
        "configmap",
        "demo",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"greeting":"live-edit"}}"#,
    ]);
    w.wait_file(path, |t| t.contains("live-edit"));
    assert_quiescent(&w, Duration::from_secs(10));
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "live-edit",
        "automated sync stayed off: nothing synced the edit away"
    );
    // Deleting the claim hands automated sync back as it was found: on.
    w.kubectl(&["delete", "argocdclaim", "argo", "-n", "backflow-system"]);
    wait_for(
        "automated sync to be handed back",
        || format!("{:#}", application(&w)["spec"]),
        || (application(&w)["spec"]["syncPolicy"]["automated"]["enabled"] == true).then_some(()),
    );
}

/// Waits until the `ArgoCDClaim`'s latest operation, holding `commit`, is in `phase`; returns it.
fn wait_operation(w: &World, commit: &str, phase: &str) -> Value {
    let detail = || format!("{:#}", application(w)["status"]);
    wait_claim_operation(w, || argo_claim(w), detail, commit, phase)
}

/// The contract simulator made to fail and to crash. A sync that fails (the push holds an object
/// the API refuses) is reported on the claim with automated sync kept off, and the next push is
/// synced; a controller that dies before it picks up the requested `operation` leaves the apply
/// in flight (nothing is reported done that was not synced), and when it comes back it runs the
/// operation the claim was still following.
#[test]
fn a_failed_sync_is_reported_and_a_controller_back_from_a_crash_runs_the_operation() {
    let w = World::start(&[]);
    wait_acting(&w);
    hold_an_application(&w);
    let start_argo = || simulated_argo(&w);
    let argo = start_argo();
    let path = "shop/shop/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_for(
        "automated sync to be switched off",
        || format!("{:#}", application(&w)["spec"]),
        || (application(&w)["spec"]["syncPolicy"]["automated"]["enabled"] == false).then_some(()),
    );

    // Failing: an object whose name the API refuses.
    let clone = w.clone_origin("person");
    std::fs::write(
        clone.join("shop/shop/configmaps/bad.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n  namespace: shop\ndata:\n  k: v\n",
    )
    .unwrap();
    let bad = w.commit_all_and_push_rebasing(&clone, "an object the API refuses");
    let failed = wait_operation(&w, &bad, "Failed");
    assert!(
        failed.to_string().contains("Not_A_Name"),
        "the failure names what Argo CD could not sync: {failed:#}"
    );
    assert_eq!(
        application(&w)["spec"]["syncPolicy"]["automated"]["enabled"],
        false,
        "still held after the failure"
    );

    // Fixed by the next push: synced.
    std::fs::remove_file(clone.join("shop/shop/configmaps/bad.yaml")).unwrap();
    let fix = w.commit_all_and_push_rebasing(&clone, "drop the bad object");
    wait_operation(&w, &fix, "Succeeded");

    // Crashing: the controller is gone when backflow requests the sync of a push.
    drop(argo);
    let edit = w.push_edit(path, "hello", "after-the-crash");
    wait_for(
        "the Application to carry the requested operation",
        || format!("{:#}", application(&w)["operation"]),
        || {
            let revision = application(&w)["operation"]["sync"]["revision"].clone();
            w.is_ancestor(&edit, revision.as_str().unwrap_or_default())
                .then_some(())
        },
    );
    // Nothing synced it, and nothing says it was.
    std::thread::sleep(Duration::from_secs(3));
    let op = argo_claim(&w)["operation"].clone();
    assert_ne!(op["phase"], "Succeeded", "{op:#}");
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "hello"
    );
    // Back: it runs the requested operation, and the claim finishes it.
    let _argo = start_argo();
    wait_operation(&w, &edit, "Succeeded");
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "after-the-crash"
    );
}

/// An Application an `ApplicationSet` generated is not held while the set would switch automated
/// sync back on (the two would fight): the claim says so (`ApplierNotHeld`) and what to change,
/// and the Application is left as it is; once the set ignores the field, the claim holds it.
#[test]
fn an_application_whose_application_set_owns_automated_is_reported_not_fought() {
    let w = World::start(&[]);
    wait_acting(&w);
    w.apply(&schemaless_crd_at(
        "argoproj.io",
        "v1alpha1",
        "applicationsets",
        "applicationset",
        "ApplicationSet",
    ));
    w.wait_established(&["applicationsets.argoproj.io"]);
    w.apply(
        r"apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: shops, namespace: backflow-system}
spec:
  generators: [{list: {elements: [{name: shop}]}}]
  template:
    metadata: {name: '{{name}}'}
    spec: {syncPolicy: {automated: {prune: true}}}
",
    );
    let uid = w.kubectl(&[
        "get",
        "applicationsets.argoproj.io",
        "shops",
        "-n",
        "backflow-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    hold_an_application_with(
        &w,
        &format!(
            ", ownerReferences: [{{apiVersion: argoproj.io/v1alpha1, kind: ApplicationSet, name: shops, uid: '{uid}', controller: true}}]"
        ),
        |url| format!("source: {{repoURL: '{url}', targetRevision: main, path: shop}}"),
    );
    let refused = wait_for(
        "the claim to report the ApplicationSet",
        || format!("{:#}", argo_claim(&w)),
        || {
            let conditions = argo_claim(&w)["conditions"].clone();
            conditions
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["reason"] == "ApplierNotHeld" && c["status"] == "False")
                .cloned()
        },
    );
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ApplicationSet backflow-system/shops")
            && message.contains("ignoreApplicationDifferences"),
        "{refused:#}"
    );
    assert_ne!(
        application(&w)["spec"]["syncPolicy"]["automated"]["enabled"],
        false,
        "not fought: automated sync left on"
    );
    // The set ignores the field from now on: the claim holds the Application.
    w.kubectl(&[
        "patch",
        "applicationsets.argoproj.io",
        "shops",
        "-n",
        "backflow-system",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"ignoreApplicationDifferences":[{"jsonPointers":["/spec/syncPolicy/automated"]}]}}"#,
    ]);
    wait_for(
        "the Application to be held once the set ignores automated",
        || format!("{:#}\n{:#}", application(&w)["spec"], argo_claim(&w)),
        || {
            let held = application(&w)["spec"]["syncPolicy"]["automated"]["enabled"] == false;
            let reported = argo_claim(&w)["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["reason"] == "ApplierNotHeld");
            (held && !reported).then_some(())
        },
    );
}

/// A multi-source Application (a chart from elsewhere, its values and manifests from the
/// repository the targets write): the claim drives the source the targets write, and each sync
/// names every source's revision, the driven one at the commit.
#[test]
fn a_multi_source_application_is_synced_at_the_commit_for_the_source_the_targets_write() {
    let w = World::start(&[]);
    wait_acting(&w);
    hold_an_application_with(&w, "", |url| {
        format!(
            "sources:\n  - {{repoURL: 'https://charts.example.com', chart: web, targetRevision: 1.2.3}}\n  - {{repoURL: '{url}', targetRevision: main, path: shop}}"
        )
    });
    let _argo = simulated_argo(&w);
    let path = "shop/shop/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_for(
        "automated sync to be switched off",
        || format!("{:#}\n{:#}", argo_claim(&w), application(&w)["spec"]),
        || (application(&w)["spec"]["syncPolicy"]["automated"]["enabled"] == false).then_some(()),
    );
    let bob = w.push_edit(path, "hello", "from-argo");
    let op = wait_for(
        "the ArgoCDClaim's sync of Bob's push to succeed",
        || format!("{:#}\n{:#}", argo_claim(&w), application(&w)["status"]),
        || {
            let op = argo_claim(&w)["operation"].clone();
            let holds_bob = w.is_ancestor(&bob, op["commit"].as_str().unwrap_or_default());
            (op["phase"] == "Succeeded" && holds_bob).then_some(op)
        },
    );
    let state = application(&w)["status"]["operationState"].clone();
    assert_eq!(
        state["operation"]["sync"]["revisions"],
        json!(["1.2.3", op["commit"]]),
        "every source's revision, the driven one at the commit: {state:#}"
    );
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "from-argo"
    );
}

/// backflow killed while its requested sync waits for the application controller: the
/// restarted process follows the `operation` the Application carries (once its snapshot is
/// published) rather than writing a new one, and ends the claim's operation when Argo CD has
/// synced it.
#[test]
fn a_sync_requested_before_a_crash_is_followed_and_not_requested_again() {
    let mut w = World::start(&[]);
    wait_acting(&w);
    hold_an_application(&w);
    let argo = simulated_argo(&w);
    w.wait_file("shop/shop/configmaps/demo.yaml", |t| t.contains("hello"));
    crate::apply::wait_operations_quiet(
        &w,
        |w| argo_claim(w)["operation"].clone(),
        |w| application(w)["spec"]["syncPolicy"]["automated"]["enabled"] == false,
    );
    drop(argo);
    let push = w.push_new_configmap("shop", "shop", "fresh", "in-flight");
    let requested = wait_for(
        "the Application to carry the requested operation",
        || format!("{:#}", application(&w)["operation"]),
        || {
            let operation = application(&w)["operation"].clone();
            let revision = operation["sync"]["revision"].as_str().unwrap_or_default();
            w.is_ancestor(&push, revision).then_some(operation)
        },
    );
    w.crash_and_restart(&[]);
    w.wait_settled();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        application(&w)["operation"],
        requested,
        "the sync request was written again"
    );
    let _argo = simulated_argo(&w);
    wait_operation(&w, &push, "Succeeded");
    assert_eq!(
        w.get_json(&["configmap", "fresh", "-n", "shop"])["data"]["greeting"],
        "in-flight"
    );
}

/// The contract simulator of Argo CD's application controller, acting on `w`'s API until dropped.
pub(crate) fn simulated_argo(w: &World) -> SimulatedController {
    SimulatedController::start(&w.dirs.data.join("kubeconfig"), |client| async move {
        reconcile_all(&client).await;
    })
}
