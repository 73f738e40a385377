//! Flux's kustomize-controller, held (`FluxClaim`): one apply is one reconcile of the
//! `Kustomization`, resumed for it and suspended again.
//!
//! The contract followed (Flux's documented behaviour): `reconcile.fluxcd.io/requestedAt` on the
//! `GitRepository` makes it fetch the branch, and on the `Kustomization` makes it reconcile;
//! `spec.suspend: true` stops every reconcile, drift correction and prune. An apply is done when
//! `Ready=True` at the Kustomization's current generation (resuming it moved the generation, so
//! a reconcile ran since) with `status.lastAppliedRevision` ending in `@sha1:<the commit>`, or
//! equal to the revision attempted by the reconcile our request started (the source fetched
//! after the flush: the commit or a descendant). `status.lastHandledReconcileAt` alone proves
//! nothing: a suspended Kustomization copies it too without applying anything. It failed when
//! `Ready` is `False` at the current generation for that attempt.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::config::InventoryEntry;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::held::Held;
use crate::native::{Applier, ApplyReport, ApplyRequest};

/// The annotation Flux reconciles on.
const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// `kustomize.toolkit.fluxcd.io/v1` `Kustomization`.
#[must_use]
pub fn kustomizations() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    )
}

/// `source.toolkit.fluxcd.io/v1` `GitRepository`.
#[must_use]
pub fn git_repositories() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
    )
}

/// A held Kustomization.
pub struct FluxApplier {
    held: Held,
}

impl FluxApplier {
    /// The applier of Kustomization `namespace/name`, whose source must fetch `url` `branch`.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        source: (&str, &str),
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            held: Held::new(client, "Kustomization", (namespace, name), source, clock),
        }
    }

    /// Whether the Kustomization's `GitRepository` fetches the repository and branch the
    /// targets write.
    async fn check_source(&self, ks: &DynamicObject) -> Result<(), String> {
        let source = &ks.data["spec"]["sourceRef"];
        let name = source["name"].as_str().unwrap_or_default();
        let ns = source["namespace"].as_str().unwrap_or(&self.held.namespace);
        let repo = self
            .held
            .api(&git_repositories(), ns)
            .get_opt(name)
            .await
            .map_err(|e| {
                format!(
                    "reading GitRepository {ns}/{name}: {}",
                    backflow_board::explain(&e)
                )
            })?
            .ok_or_else(|| {
                format!(
                    "GitRepository {ns}/{name} of {} does not exist",
                    self.held.shown()
                )
            })?;
        let url = repo.data["spec"]["url"].as_str().unwrap_or_default();
        let branch = repo.data["spec"]["ref"]["branch"]
            .as_str()
            .unwrap_or("master");
        self.held
            .check_source(&format!("GitRepository {ns}/{name}"), url, branch)
    }

    async fn run(&self, request: ApplyRequest) -> ApplyReport {
        let mut report = ApplyReport::default();
        let commit = request.commit.to_string();
        let followed = if request.follow {
            self.request_in_flight(&commit).await
        } else {
            None
        };
        let token = if let Some(token) = followed {
            token
        } else {
            let token = self.held.token();
            if let Err(e) = self.resume(&token).await {
                report.failures.push(e);
                return report;
            }
            token
        };
        let outcome = self.wait(&commit, &token).await;
        // Held again whatever happened: nothing of Flux's applies between backflow's requests.
        if let Err(e) = self.suspend().await {
            report.failures.push(e);
        }
        match outcome {
            Ok(inventory) => {
                report.applied = inventory.len();
                report.inventory = inventory;
            }
            Err(e) => report.failures.push(e),
        }
        report
    }

    /// The request of an operation found in flight at start that the Kustomization still
    /// carries: its token while it is resumed (Flux is at it), or when it already applied
    /// `commit` for it. `None`: ask again (it was suspended before applying, or never asked).
    async fn request_in_flight(&self, commit: &str) -> Option<String> {
        let ks = self
            .held
            .api(&kustomizations(), &self.held.namespace)
            .get_opt(&self.held.name)
            .await
            .ok()??;
        let token = ks.annotations().get(REQUESTED_AT)?.clone();
        let resumed = ks.data["spec"]["suspend"] != true;
        let applied = matches!(
            outcome(&ks.data, ks.metadata.generation, commit, &token),
            Some(Ok(_))
        );
        tracing::info!(kustomization = %self.held.shown(), %token, resumed, applied, "an operation found in flight at start");
        (resumed || applied).then_some(token)
    }

    /// Asks the source to fetch and the Kustomization to reconcile, resumed for it.
    async fn resume(&self, token: &str) -> Result<(), String> {
        let ks_api = self.held.api(&kustomizations(), &self.held.namespace);
        let ks = ks_api
            .get_opt(&self.held.name)
            .await
            .map_err(|e| self.held.failed("reading", &e))?
            .ok_or_else(|| format!("{} does not exist", self.held.shown()))?;
        let source = &ks.data["spec"]["sourceRef"];
        let source_name = source["name"].as_str().unwrap_or_default();
        let source_ns = source["namespace"].as_str().unwrap_or(&self.held.namespace);
        let annotate = json!({"metadata": {"annotations": {REQUESTED_AT: token}}});
        self.held
            .api(&git_repositories(), source_ns)
            .patch(source_name, &Held::params(), &Patch::Merge(&annotate))
            .await
            .map_err(|e| {
                format!(
                    "asking GitRepository {source_ns}/{source_name} to fetch: {}",
                    backflow_board::explain(&e)
                )
            })?;
        let resume =
            json!({"metadata": {"annotations": {REQUESTED_AT: token}}, "spec": {"suspend": false}});
        ks_api
            .patch(&self.held.name, &Held::params(), &Patch::Merge(&resume))
            .await
            .map_err(|e| self.held.failed("resuming", &e))?;
        Ok(())
    }

    /// Suspends the Kustomization if it is not; answers whether it was. A Kustomization that
    /// another Kustomization applies from Git is refused: its parent would resume it again
    /// (its `spec.suspend` is Git's, not backflow's to hold).
    async fn hold_suspended(&self) -> Result<Option<bool>, String> {
        let ks = self
            .held
            .api(&kustomizations(), &self.held.namespace)
            .get_opt(&self.held.name)
            .await
            .map_err(|e| self.held.failed("reading", &e))?
            .ok_or_else(|| format!("{} does not exist", self.held.shown()))?;
        self.check_source(&ks).await?;
        if let Some(parent) = ks.labels().get("kustomize.toolkit.fluxcd.io/name") {
            return Err(format!(
                "{} is applied by Kustomization {parent}, which owns its spec.suspend: hold the parent, or make it ignore /spec/suspend",
                self.held.shown()
            ));
        }
        let suspended = ks.data["spec"]["suspend"] == true;
        if !suspended {
            tracing::info!(kustomization = %self.held.shown(), "resumed outside backflow: suspended again");
            self.suspend().await?;
        }
        Ok(Some(suspended))
    }

    async fn set_suspend(&self, suspended: bool) -> Result<(), String> {
        let patch = json!({"spec": {"suspend": suspended}});
        self.held
            .api(&kustomizations(), &self.held.namespace)
            .patch(&self.held.name, &Held::params(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "setting {} suspend={suspended}: {}",
                    self.held.shown(),
                    backflow_board::explain(&e)
                )
            })
    }

    async fn suspend(&self) -> Result<(), String> {
        self.set_suspend(true).await
    }

    /// Follows the Kustomization until it applied `commit` (its inventory) or failed at it. No
    /// timer ends the wait: Flux may still be at it, and asking again meanwhile would apply
    /// twice; the decision reports the operation `Unresolved` after 5 minutes and goes on
    /// following it, and a hand-back ends it.
    async fn wait(&self, commit: &str, token: &str) -> Result<Vec<InventoryEntry>, String> {
        let api = self.held.api(&kustomizations(), &self.held.namespace);
        loop {
            if let Some(ks) = api.get_opt(&self.held.name).await.ok().flatten()
                && let Some(outcome) = outcome(&ks.data, ks.metadata.generation, commit, token)
            {
                return outcome.map_err(|m| format!("{}: {m}", self.held.shown()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What a Kustomization's status says about applying `commit` after the request `token`:
/// `None` while undecided.
fn outcome(
    ks: &Value,
    generation: Option<i64>,
    commit: &str,
    token: &str,
) -> Option<Result<Vec<InventoryEntry>, String>> {
    let status = &ks["status"];
    if status["observedGeneration"].as_i64() != generation {
        return None;
    }
    let text = |field: &str| status[field].as_str().unwrap_or_default();
    let of_commit = |field: &str| text(field).ends_with(&format!("@sha1:{commit}"));
    // The reconcile our request started, at the revision its source fetched after the flush.
    let ours = text("lastHandledReconcileAt") == token;
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))?;
    let applied = of_commit("lastAppliedRevision")
        || (ours
            && !text("lastAppliedRevision").is_empty()
            && text("lastAppliedRevision") == text("lastAttemptedRevision"));
    match ready["status"].as_str() {
        Some("True") if applied => Some(Ok(inventory(status))),
        Some("False") if ours || of_commit("lastAttemptedRevision") => Some(Err(ready["message"]
            .as_str()
            .unwrap_or("Ready=False")
            .to_string())),
        _ => None,
    }
}

fn inventory(status: &Value) -> Vec<InventoryEntry> {
    status["inventory"]["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some(InventoryEntry {
                id: e["id"].as_str()?.to_string(),
                v: e["v"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

impl Applier for FluxApplier {
    fn apply(
        &self,
        request: ApplyRequest,
    ) -> Pin<Box<dyn Future<Output = ApplyReport> + Send + '_>> {
        Box::pin(self.run(request))
    }

    fn hold(&self) -> Pin<Box<dyn Future<Output = Result<Option<bool>, String>> + Send + '_>> {
        Box::pin(self.hold_suspended())
    }

    fn release(
        &self,
        suspended: bool,
        _inventory: Vec<InventoryEntry>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(self.set_suspend(suspended))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_means_applied_at_the_current_generation_never_handled() {
        let sha = "0123456789012345678901234567890123456789";
        let ks = |observed: i64, ready: &str, applied: &str, attempted: &str| {
            json!({"status": {"observedGeneration": observed,
                "lastAppliedRevision": applied, "lastAttemptedRevision": attempted,
                "lastHandledReconcileAt": "token",
                "conditions": [{"type": "Ready", "status": ready, "message": "kustomize build failed"}],
                "inventory": {"entries": [{"id": "default_a__ConfigMap", "v": "v1"}]}}})
        };
        let rev = format!("main@sha1:{sha}");
        let decide = |ks: &Value, token: &str| outcome(ks, Some(2), sha, token);
        let applied = decide(&ks(2, "True", &rev, &rev), "other").expect("decided");
        assert_eq!(applied.expect("applied").len(), 1);
        // An older generation's status, or another revision of another request, decides nothing.
        assert!(decide(&ks(1, "True", &rev, &rev), "token").is_none());
        let later = "main@sha1:descendant";
        assert!(decide(&ks(2, "True", later, later), "other").is_none());
        // The reconcile our request started applied what its source fetched after the flush.
        assert!(decide(&ks(2, "True", later, later), "token").is_some());
        // Handled is not applied: a suspended Kustomization copies the token and applies nothing.
        assert!(decide(&ks(2, "Unknown", "", ""), "token").is_none());
        let failed = decide(&ks(2, "False", "main@sha1:old", &rev), "other").expect("decided");
        assert_eq!(failed.expect_err("failed"), "kustomize build failed");
    }
}
