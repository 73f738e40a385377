//! `FluxClaim` end to end, against a contract simulator of Flux's kustomize-controller (no Flux
//! runs here): it acts on the API as the real controller does — on each reconcile of a
//! Kustomization that is not suspended (its generation moved, or `requestedAt` changed) it reads
//! the `GitRepository`'s branch, applies the path with field manager `kustomize-controller` and
//! Flux's owner labels, prunes by inventory, and writes the status Flux writes. Suspended, it
//! applies nothing, but copies `requestedAt` into `lastHandledReconcileAt` (Flux's trap: handled
//! is not applied).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};

use backflow_apply::flux::{git_repositories, kustomizations};

use crate::apply::{assert_quiescent, one_way_default, wait_acting, wait_claim_operation};
use crate::common::*;

const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// Flux's two kinds, schemaless, with a status subresource.
fn flux_crds() -> String {
    let crd = |group: &str, plural: &str, singular: &str, kind: &str| {
        format!(
            r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"
        )
    };
    format!(
        "{}---\n{}",
        crd(
            "kustomize.toolkit.fluxcd.io",
            "kustomizations",
            "kustomization",
            "Kustomization"
        ),
        crd(
            "source.toolkit.fluxcd.io",
            "gitrepositories",
            "gitrepository",
            "GitRepository"
        )
    )
}

/// A simulated controller: `reconcile` run every 100 ms on its own thread against the API the
/// kubeconfig names, until dropped.
pub(crate) struct SimulatedController {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimulatedController {
    pub(crate) fn start<F, Fut>(kubeconfig: &Path, reconcile: F) -> Self
    where
        F: Fn(Client) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, kubeconfig) = (stop.clone(), kubeconfig.to_path_buf());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = client(&kubeconfig).await;
                while !flag.load(Ordering::Relaxed) {
                    reconcile(client.clone()).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SimulatedController {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) async fn client(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

pub(crate) async fn reconcile_all(client: &Client) {
    reconcile_fetched(client, &Fetched::default()).await;
}

/// A revision the source fetched earlier, applied by the next reconcile that applies anything
/// (then the branch's tip again): source-controller fetched it before backflow restarted, and
/// kustomize-controller applies that artifact after.
#[derive(Clone, Default)]
pub(crate) struct Fetched(Arc<std::sync::Mutex<Option<String>>>);

impl Fetched {
    fn take(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

async fn reconcile_fetched(client: &Client, fetched: &Fetched) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kustomizations());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    for ks in list.items {
        let requested = ks.annotations().get(REQUESTED_AT).cloned();
        let status = &ks.data["status"];
        let handled = status["lastHandledReconcileAt"]
            .as_str()
            .map(str::to_string);
        let generation = ks.metadata.generation;
        let due = requested != handled || status["observedGeneration"].as_i64() != generation;
        if !due {
            continue;
        }
        let ns = ks.namespace().unwrap_or_default();
        let ns_api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &kustomizations());
        if ks.data["spec"]["suspend"] == true {
            // Suspended: nothing is applied, yet the request is marked handled.
            let status = json!({"status": {"lastHandledReconcileAt": requested}});
            let _ = ns_api
                .patch_status(
                    &ks.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await;
            continue;
        }
        let status = apply_kustomization(client, &ks, &ns, fetched.take()).await;
        let mut status = status;
        status["observedGeneration"] = json!(generation);
        status["lastHandledReconcileAt"] = json!(requested);
        let _ = ns_api
            .patch_status(
                &ks.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await;
    }
}

/// One reconcile: the source's revision, the path's objects applied with Flux's manager and
/// labels, the previous inventory pruned; the status Flux writes.
async fn apply_kustomization(
    client: &Client,
    ks: &DynamicObject,
    ns: &str,
    fetched: Option<String>,
) -> Value {
    let source = &ks.data["spec"]["sourceRef"];
    let repos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &git_repositories());
    let Ok(repo) = repos.get(source["name"].as_str().unwrap_or_default()).await else {
        return failed("", "GitRepository not found");
    };
    let url = repo.data["spec"]["url"].as_str().unwrap_or_default();
    let branch = repo.data["spec"]["ref"]["branch"]
        .as_str()
        .unwrap_or("main");
    let git_dir = PathBuf::from(url.trim_start_matches("file://"));
    let sha = fetched
        .unwrap_or_else(|| git_out(&git_dir, &["rev-parse", &format!("refs/heads/{branch}")]));
    let revision = format!("{branch}@sha1:{}", sha.trim());
    let path = ks.data["spec"]["path"].as_str().unwrap_or(".");
    let stamp = |object: &mut Value| {
        let labels = object["metadata"]
            .as_object_mut()
            .map(|m| m.entry("labels").or_insert_with(|| json!({})));
        if let Some(labels) = labels {
            labels["kustomize.toolkit.fluxcd.io/name"] = json!(ks.name_any());
            labels["kustomize.toolkit.fluxcd.io/namespace"] = json!(ks.namespace());
        }
    };
    let entries = match apply_tree(
        client,
        &git_dir,
        sha.trim(),
        path,
        "kustomize-controller",
        stamp,
    )
    .await
    {
        Ok(entries) => entries,
        Err(e) => return failed(&revision, &e),
    };
    prune(client, ks, &entries).await;
    json!({
        "lastAttemptedRevision": revision,
        "lastAppliedRevision": revision,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "message": format!("Applied revision: {revision}")}],
        "inventory": {"entries": entries},
    })
}

fn failed(revision: &str, message: &str) -> Value {
    json!({"lastAttemptedRevision": revision,
           "conditions": [{"type": "Ready", "status": "False", "reason": "ReconciliationFailed", "message": message}]})
}

pub(crate) fn git_out(git_dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The API of an object's kind (discovered, as Flux resolves it), in its namespace.
async fn api_of(
    client: &Client,
    api_version: &str,
    kind: &str,
    ns: &str,
) -> Result<(Api<DynamicObject>, ApiResource), String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("{kind}: {e}"))?;
    let api = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => Api::namespaced_with(client.clone(), ns, &resource),
    };
    Ok((api, resource))
}

/// The objects of `path` at commit `sha` of the bare repository `git_dir`, each `stamp`ed and
/// server-side applied by `manager`, forced, as Flux and Argo CD apply them. Answers each
/// object's inventory entry (`{id: <ns>_<name>_<group>_<kind>, v}`).
pub(crate) async fn apply_tree(
    client: &Client,
    git_dir: &Path,
    sha: &str,
    path: &str,
    manager: &str,
    stamp: impl Fn(&mut Value),
) -> Result<Vec<Value>, String> {
    let path = path.trim_start_matches("./");
    let mut entries = Vec::new();
    for file in git_out(git_dir, &["ls-tree", "-r", "--name-only", sha, path]).lines() {
        if !file.ends_with(".yaml") || file.ends_with(".sops.yaml") {
            continue;
        }
        let text = git_out(git_dir, &["show", &format!("{sha}:{file}")]);
        for doc in text.split("\n---") {
            let Ok(mut object) = yaml_serde::from_str::<Value>(doc) else {
                continue;
            };
            if object.get("kind").is_none() {
                continue;
            }
            stamp(&mut object);
            entries.push(apply_object(client, &object, manager).await?);
        }
    }
    Ok(entries)
}

async fn apply_object(client: &Client, object: &Value, manager: &str) -> Result<Value, String> {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1").to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let (api, resource) = api_of(client, &api_version, &kind, &ns).await?;
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    api.patch(
        &name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| format!("{name}: {e}"))?;
    Ok(json!({"id": format!("{ns}_{name}_{}_{kind}", resource.group), "v": api_version}))
}

async fn prune(client: &Client, ks: &DynamicObject, kept: &[Value]) {
    let previous = ks.data["status"]["inventory"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    prune_entries(client, &previous, kept).await;
}

/// Deletes the objects of `previous` (inventory entries) that are not `kept`.
pub(crate) async fn prune_entries(client: &Client, previous: &[Value], kept: &[Value]) {
    for entry in previous.iter().filter(|e| !kept.contains(e)) {
        let id = entry["id"].as_str().unwrap_or_default();
        let parts: Vec<&str> = id.splitn(4, '_').collect();
        if let [ns, name, _group, kind] = parts[..] {
            let api_version = entry["v"].as_str().unwrap_or("v1");
            if let Ok((api, _)) = api_of(client, api_version, kind, ns).await {
                let _ = api.delete(name, &DeleteParams::default()).await;
            }
        }
    }
}

/// Flux's kinds, and a held Kustomization: `GitRepository` `repo` fetching the default
/// provider's repository at `branch`, Kustomization `apps` (path `./apps`, not suspended), the
/// `FluxClaim` `flux` holding it, and `GitTarget` `apps` writing the shop's `ConfigMaps` to `apps/`,
/// coordinated by the claim.
pub(crate) fn hold_a_kustomization(w: &World, branch: &str) {
    w.apply(&flux_crds());
    w.wait_established(&[
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "gitrepositories.source.toolkit.fluxcd.io",
    ]);
    // The applier reads what the GitTarget writes: the default provider's repository.
    let url = w.provider_url();
    w.apply(&format!(
        r"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {{name: repo, namespace: backflow-system}}
spec: {{url: '{url}', ref: {{branch: {branch}}}, interval: 10m}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: backflow-system}}
spec: {{sourceRef: {{kind: GitRepository, name: repo}}, path: ./apps, prune: true, interval: 10m}}
---
apiVersion: backflow.dev/v1alpha1
kind: FluxClaim
metadata: {{name: flux, namespace: backflow-system}}
spec: {{kustomizationRef: {{name: apps}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: apps, namespace: backflow-system}}
spec:
  providerRef: {{name: default}}
  branch: main
  path: apps
  applierClaimRef: {{kind: FluxClaim, name: flux}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: apps, namespace: backflow-system}}
spec: {{targetRef: {{name: apps}}, rules: [{{apiGroups: [''], resources: [configmaps], sourceNamespace: shop}}]}}
"
    ));
}

fn kustomization(w: &World) -> Value {
    w.get_json(&[
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "apps",
        "-n",
        "backflow-system",
    ])
}

fn flux_claim(w: &World) -> Value {
    w.get_json(&["fluxclaim", "flux", "-n", "backflow-system"])["status"].clone()
}

#[test]
fn a_push_is_applied_by_the_held_kustomization_and_it_is_suspended_again() {
    let w = World::start(&[]);
    wait_acting(&w);
    // The default folder (every namespace) mirrors one way here: two coordinated folders holding
    // one object would be two appliers fighting over it, and each excludes the other's.
    one_way_default(&w);
    w.kubectl(&["create", "namespace", "shop"]);
    w.apply(&configmap("shop", "demo", &[("greeting", "hello")]));
    hold_a_kustomization(&w, "main");
    // The simulated kustomize-controller.
    let _flux = simulated_flux(&w);
    let path = "apps/shop/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_for(
        "the target to name the FluxClaim",
        || format!("{:?}", w.target_condition("apps", "ApplierClaimReady")),
        || {
            w.target_condition("apps", "ApplierClaimReady")
                .filter(|c| c.status == "True" && c.message.contains("FluxClaim"))
        },
    );
    // Held: suspended between applies, and how it was found is kept for the hand-back.
    wait_for(
        "the Kustomization to be held",
        || format!("{:#}", flux_claim(&w)),
        || {
            (kustomization(&w)["spec"]["suspend"] == true
                && flux_claim(&w)["handBack"]["suspend"] == false)
                .then_some(())
        },
    );
    let bob = w.push_edit(path, "hello", "from-flux");
    let op = wait_for(
        "the FluxClaim's operation for Bob's push to succeed",
        || format!("{:#}\n{:#}", flux_claim(&w), kustomization(&w)["status"]),
        || {
            let op = flux_claim(&w)["operation"].clone();
            let holds_bob = w.is_ancestor(&bob, op["commit"].as_str().unwrap_or_default());
            (op["phase"] == "Succeeded" && holds_bob).then_some(op)
        },
    );
    let ks = kustomization(&w);
    assert!(
        ks["status"]["lastAppliedRevision"]
            .as_str()
            .is_some_and(|r| r.contains("@sha1:")),
        "{:#}",
        ks["status"]
    );
    assert_eq!(
        ks["spec"]["suspend"], true,
        "held again after the apply: {op:#}"
    );
    let live = w.get_json(&["configmap", "demo", "-n", "shop"]);
    assert_eq!(live["data"]["greeting"], "from-flux");
    assert_eq!(
        live["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"],
        "apps"
    );
    let in_git = w.show(path).unwrap();
    assert!(
        in_git.contains("from-flux") && !in_git.contains("kustomize.toolkit.fluxcd.io"),
        "Flux's labels never reach Git:\n{in_git}"
    );
    // A live edit of a Flux-applied object is mirrored: the folder's own applier owns it.
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
    assert_eq!(kustomization(&w)["spec"]["suspend"], true);
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "live-edit"
    );

    // A person's `flux resume` is undone: the Kustomization is held again.
    let resume = r#"{"spec":{"suspend":false}}"#;
    w.kubectl(&[
        "patch",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "apps",
        "-n",
        "backflow-system",
        "--type",
        "merge",
        "-p",
        resume,
    ]);
    wait_for(
        "a resumed Kustomization to be suspended again",
        || format!("{:#}", kustomization(&w)["spec"]),
        || (kustomization(&w)["spec"]["suspend"] == true).then_some(()),
    );
    // Deleting the claim hands the Kustomization back as it was found: not suspended.
    w.kubectl(&["delete", "fluxclaim", "flux", "-n", "backflow-system"]);
    wait_for(
        "the Kustomization to be handed back",
        || format!("{:#}", kustomization(&w)["spec"]),
        || (kustomization(&w)["spec"]["suspend"] == false).then_some(()),
    );
}

#[test]
fn a_kustomization_fetching_another_branch_is_reported_and_not_held() {
    let w = World::start(&["--no-receiver"]);
    wait_acting(&w);
    hold_a_kustomization(&w, "release");
    let condition = wait_for(
        "the claim to say its Kustomization is not held",
        || format!("{:#}", flux_claim(&w)),
        || {
            flux_claim(&w)["conditions"]
                .as_array()
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c["type"] == "ApplierClaimReady")
                        .cloned()
                })
                .filter(|c| c["reason"] == "ApplierNotHeld")
        },
    );
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("branch release") && message.contains("branch main"),
        "{message}"
    );
    assert!(
        kustomization(&w)["spec"]["suspend"].is_null(),
        "a Kustomization backflow cannot hold is left as it is"
    );
    assert!(
        flux_claim(&w)["operation"].is_null(),
        "nothing is asked of it"
    );
}

#[test]
fn a_kustomization_in_flux_system_is_held_only_once_the_provider_delegates_it() {
    let w = World::start(&["--no-receiver"]);
    wait_acting(&w);
    w.apply(&flux_crds());
    w.wait_established(&[
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "gitrepositories.source.toolkit.fluxcd.io",
    ]);
    w.kubectl(&["create", "namespace", "flux-system"]);
    let url = w.provider_url();
    w.apply(&format!(
        r"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {{name: repo, namespace: flux-system}}
spec: {{url: '{url}', ref: {{branch: main}}, interval: 10m}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: apps, namespace: flux-system}}
spec: {{sourceRef: {{kind: GitRepository, name: repo}}, path: ./apps, prune: true, interval: 10m}}
---
apiVersion: backflow.dev/v1alpha1
kind: FluxClaim
metadata: {{name: flux, namespace: backflow-system}}
spec: {{kustomizationRef: {{name: apps, namespace: flux-system}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: apps, namespace: backflow-system}}
spec: {{providerRef: {{name: default}}, branch: main, path: apps, applierClaimRef: {{kind: FluxClaim, name: flux}}}}
"
    ));
    let reason = |w: &World| {
        flux_claim(w)["conditions"]
            .as_array()
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "ApplierClaimReady")
                    .cloned()
            })
            .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
    };
    let held = |w: &World| {
        w.get_json(&[
            "kustomizations.kustomize.toolkit.fluxcd.io",
            "apps",
            "-n",
            "flux-system",
        ])["spec"]["suspend"]
            .clone()
    };
    wait_for(
        "the claim to refuse an applier outside its namespace",
        || format!("{:#}", flux_claim(&w)),
        || (reason(&w).as_deref() == Some("CrossNamespaceNotAllowed")).then_some(()),
    );
    assert!(held(&w).is_null(), "not delegated: left as it is");
    w.patch_provider(
        "default",
        r#"{"spec":{"allowCrossNamespace":{"appliers":true}}}"#,
    );
    wait_for(
        "the delegated Kustomization to be held",
        || format!("{:#} {}", flux_claim(&w), held(&w)),
        || (held(&w) == true).then_some(()),
    );
    wait_for(
        "the claim's condition to drop the refusal",
        || format!("{:#}", flux_claim(&w)),
        || (reason(&w).as_deref() != Some("CrossNamespaceNotAllowed")).then_some(()),
    );
}

/// Waits until the `FluxClaim`'s latest operation, holding `commit`, is in `phase`; returns it.
fn wait_operation(w: &World, commit: &str, phase: &str) -> Value {
    let detail = || format!("{:#}", kustomization(w)["status"]);
    wait_claim_operation(w, || flux_claim(w), detail, commit, phase)
}

/// The contract simulator made to fail and to crash. A reconcile that fails (the push holds an
/// object the API refuses) is reported on the claim, the Kustomization is held again, and the
/// next push is applied; a controller that dies after backflow resumed the Kustomization leaves
/// the apply in flight (nothing is reported done that was not applied), and when it comes back
/// it finishes the apply the claim was still following.
#[test]
fn a_failed_reconcile_is_reported_and_a_controller_back_from_a_crash_finishes_the_apply() {
    let w = World::start(&[]);
    wait_acting(&w);
    one_way_default(&w);
    w.kubectl(&["create", "namespace", "shop"]);
    w.apply(&configmap("shop", "demo", &[("greeting", "hello")]));
    hold_a_kustomization(&w, "main");
    let start_flux = || simulated_flux(&w);
    let flux = start_flux();
    let path = "apps/shop/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_for(
        "the Kustomization to be held",
        || format!("{:#}", flux_claim(&w)),
        || (kustomization(&w)["spec"]["suspend"] == true).then_some(()),
    );

    // Failing: an object whose name the API refuses.
    let clone = w.clone_origin("person");
    std::fs::write(
        clone.join("apps/shop/configmaps/bad.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Name\n  namespace: shop\ndata:\n  k: v\n",
    )
    .unwrap();
    let bad = w.commit_all_and_push_rebasing(&clone, "an object the API refuses");
    let failed = wait_operation(&w, &bad, "Failed");
    assert!(
        failed.to_string().contains("Not_A_Name"),
        "the failure names what Flux could not apply: {failed:#}"
    );
    wait_for(
        "the Kustomization to be held again after the failure",
        || format!("{:#}", kustomization(&w)["spec"]),
        || (kustomization(&w)["spec"]["suspend"] == true).then_some(()),
    );

    // Fixed by the next push: applied.
    std::fs::remove_file(clone.join("apps/shop/configmaps/bad.yaml")).unwrap();
    let fix = w.commit_all_and_push_rebasing(&clone, "drop the bad object");
    wait_operation(&w, &fix, "Succeeded");

    // Crashing: the controller is gone when backflow resumes the Kustomization for a push.
    drop(flux);
    let edit = w.push_edit(path, "hello", "after-the-crash");
    wait_for(
        "the Kustomization to be resumed for the push",
        || format!("{:#}\n{:#}", flux_claim(&w), kustomization(&w)["spec"]),
        || {
            let op = flux_claim(&w)["operation"].clone();
            (kustomization(&w)["spec"]["suspend"] == false
                && w.is_ancestor(&edit, op["commit"].as_str().unwrap_or_default()))
            .then_some(())
        },
    );
    // Nothing applied it, and nothing says it was.
    std::thread::sleep(Duration::from_secs(3));
    let op = flux_claim(&w)["operation"].clone();
    assert_ne!(op["phase"], "Succeeded", "{op:#}");
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "hello"
    );
    // Back: it reconciles what it was asked, and the claim finishes the operation.
    let _flux = start_flux();
    wait_operation(&w, &edit, "Succeeded");
    assert_eq!(
        w.get_json(&["configmap", "demo", "-n", "shop"])["data"]["greeting"],
        "after-the-crash"
    );
    wait_for(
        "the Kustomization to be held again",
        || format!("{:#}", kustomization(&w)["spec"]),
        || (kustomization(&w)["spec"]["suspend"] == true).then_some(()),
    );
}

/// The claim's Kustomization resumed for `edit` (pushed after the controller died): the
/// operation holding it is in flight. Returns that operation.
fn wait_resumed_for(w: &World, edit: &str) -> Value {
    wait_for(
        "the Kustomization to be resumed for the push",
        || format!("{:#}\n{:#}", flux_claim(w), kustomization(w)["spec"]),
        || {
            let op = flux_claim(w)["operation"].clone();
            (kustomization(w)["spec"]["suspend"] == false
                && w.is_ancestor(edit, op["commit"].as_str().unwrap_or_default()))
            .then_some(op)
        },
    )
}

/// A held Kustomization applied once by the contract simulator, which is then stopped; a push
/// adding `ConfigMap` `shop/fresh` made after that is in flight (resumed, nobody applying it).
/// Returns the push.
fn an_apply_in_flight(w: &World) -> String {
    let path = "apps/shop/configmaps/demo.yaml";
    wait_acting(w);
    one_way_default(w);
    w.kubectl(&["create", "namespace", "shop"]);
    w.apply(&configmap("shop", "demo", &[("greeting", "hello")]));
    hold_a_kustomization(w, "main");
    let flux = simulated_flux(w);
    w.wait_file(path, |t| t.contains("hello"));
    crate::apply::wait_operations_quiet(
        w,
        |w| flux_claim(w)["operation"].clone(),
        |w| kustomization(w)["spec"]["suspend"] == true,
    );
    drop(flux);
    let push = w.push_new_configmap("apps", "shop", "fresh", "in-flight");
    wait_resumed_for(w, &push);
    push
}

fn fresh_greeting(w: &World) -> Option<String> {
    let out = w.kubectl_run(&["get", "configmap", "fresh", "-n", "shop", "-o", "json"]);
    let cm: Value = serde_json::from_str(&out.stdout).ok()?;
    cm["data"]["greeting"].as_str().map(str::to_string)
}

/// backflow killed while Flux works on its request: the restarted process follows the request
/// Flux carries (once its snapshot is published), never asks again, and ends the operation
/// when Flux has applied it.
#[test]
fn an_operation_in_flight_at_a_crash_is_followed_and_not_asked_again() {
    let mut w = World::start(&[]);
    let push = an_apply_in_flight(&w);
    let asked = kustomization(&w)["metadata"]["annotations"][REQUESTED_AT].clone();
    w.crash_and_restart(&[]);
    w.wait_settled();
    std::thread::sleep(Duration::from_secs(3));
    let ks = kustomization(&w);
    assert_eq!(
        ks["metadata"]["annotations"][REQUESTED_AT], asked,
        "the request in flight was asked again: {ks:#}"
    );
    assert_eq!(ks["spec"]["suspend"], false, "left as Flux runs it: {ks:#}");
    let _flux = simulated_flux(&w);
    wait_operation(&w, &push, "Succeeded");
    assert_eq!(fresh_greeting(&w).as_deref(), Some("in-flight"));
    wait_for(
        "the Kustomization to be held again",
        || format!("{:#}", kustomization(&w)["spec"]),
        || (kustomization(&w)["spec"]["suspend"] == true).then_some(()),
    );
}

/// backflow killed while Flux works on its request, after a live edit made past that apply's
/// flush reached Git; the restarted process cannot push (the branch is locked), so its
/// snapshot is not published, and Flux applies the artifact its source fetched before the
/// edit, over the edit. The restarted process judges that write in the operation's window,
/// opened as it started (a write judged in no window would be mirrored as Flux's echo, over the
/// edit), and the catch-up after the operation applies back the edit Git holds: it ends live
/// and in Git.
#[test]
fn an_edit_flux_writes_over_after_a_restart_is_applied_back() {
    let mut w = World::start(&[]);
    let push = an_apply_in_flight(&w);
    let path = "apps/shop/configmaps/demo.yaml";
    let asked = flux_claim(&w)["operation"]["commit"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    w.apply(&configmap("shop", "demo", &[("greeting", "edited-live")]));
    w.wait_file(path, |t| t.contains("edited-live"));
    w.lock_branch();
    w.crash_and_restart(&[]);
    w.wait_lists_read();
    let fetched = Fetched(Arc::new(std::sync::Mutex::new(Some(asked))));
    let _flux = SimulatedController::start(&w.dirs.data.join("kubeconfig"), move |client| {
        let fetched = fetched.clone();
        async move { reconcile_fetched(&client, &fetched).await }
    });
    wait_for(
        "Flux to write the artifact it fetched over the edit",
        || format!("{:#}", kustomization(&w)["status"]),
        || {
            let live = w.get_json(&["configmap", "demo", "-n", "shop"]);
            (live["data"]["greeting"] == "hello").then_some(())
        },
    );
    // The mirror sees the write before the branch opens again.
    std::thread::sleep(Duration::from_secs(1));
    w.unlock_branch();
    wait_operation(&w, &push, "Succeeded");
    wait_for(
        "the edit Flux wrote over to be applied back",
        || format!("{:#}\n{}", flux_claim(&w), w.describe_remote()),
        || {
            let live = w.get_json(&["configmap", "demo", "-n", "shop"]);
            (live["data"]["greeting"] == "edited-live").then_some(())
        },
    );
    w.wait_settled();
    assert!(
        w.show(path).is_some_and(|t| t.contains("edited-live")),
        "Git keeps the edit: {:?}",
        w.show(path)
    );
    assert_eq!(fresh_greeting(&w).as_deref(), Some("in-flight"));
}

/// A claim deleted while its apply is in flight hands the Kustomization back as it was found
/// (resumed), and the apply it had asked for does not suspend it afterwards.
#[test]
fn a_claim_deleted_during_an_apply_leaves_the_kustomization_as_it_was_found() {
    let w = World::start(&[]);
    let push = an_apply_in_flight(&w);
    w.kubectl(&["delete", "fluxclaim", "flux", "-n", "backflow-system"]);
    wait_for(
        "the target to say its claim is gone",
        || format!("{:?}", w.target_condition("apps", "ApplierClaimReady")),
        || {
            w.target_condition("apps", "ApplierClaimReady")
                .filter(|c| c.reason == "ClaimNotFound")
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let _flux = simulated_flux(&w);
    wait_for(
        "Flux to apply the push on its own",
        || format!("{:#}", kustomization(&w)["status"]),
        || (fresh_greeting(&w).as_deref() == Some("in-flight")).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(2));
    let ks = kustomization(&w);
    assert_eq!(
        ks["spec"]["suspend"], false,
        "suspended after the hand-back ({push}): {ks:#}"
    );
}

/// The contract simulator of kustomize-controller, acting on `w`'s API until dropped.
pub(crate) fn simulated_flux(w: &World) -> SimulatedController {
    SimulatedController::start(&w.dirs.data.join("kubeconfig"), |client| async move {
        reconcile_all(&client).await;
    })
}
