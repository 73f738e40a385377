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
use backflow_decision::held_status::HeldOutcome;
use backflow_decision::held_status::flux::{self, REQUESTED_AT};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::held::Held;
use crate::native::{Applier, ApplyReport, ApplyRequest};

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
        let requested_at = ks.annotations().get(REQUESTED_AT).map(String::as_str);
        let token = flux::request_in_flight(requested_at, &ks.data, ks.metadata.generation, commit);
        tracing::info!(kustomization = %self.held.shown(), followed = ?token, "an operation found in flight at start");
        token
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

/// What a Kustomization's status says about applying `commit` after the request `token`, with
/// the inventory of a reconcile that applied it: `None` while undecided.
fn outcome(
    ks: &Value,
    generation: Option<i64>,
    commit: &str,
    token: &str,
) -> Option<Result<Vec<InventoryEntry>, String>> {
    flux::outcome(ks, generation, commit, token).map(|outcome| match outcome {
        HeldOutcome::Applied => Ok(inventory(&ks["status"])),
        HeldOutcome::Failed(message) => Err(message),
    })
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
    fn a_reconcile_that_applied_the_commit_reports_its_inventory() {
        let sha = "0123456789012345678901234567890123456789";
        let rev = format!("main@sha1:{sha}");
        let ks = json!({"status": {"observedGeneration": 2,
            "lastAppliedRevision": rev, "lastAttemptedRevision": rev,
            "conditions": [{"type": "Ready", "status": "True"}],
            "inventory": {"entries": [{"id": "default_a__ConfigMap", "v": "v1"}]}}});
        let applied = outcome(&ks, Some(2), sha, "token").expect("decided");
        assert_eq!(applied.expect("applied")[0].id, "default_a__ConfigMap");
        assert_eq!(outcome(&ks, Some(3), sha, "token"), None);
    }
}
