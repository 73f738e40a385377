//! Argo CD's application controller, held (`ArgoCDClaim`): one apply is one sync of the
//! `Application`, requested through its `operation` field, with automated sync off between
//! applies.
//!
//! The contract followed (Argo CD's documented behaviour): writing a complete top-level
//! `operation` (`sync.revision` always explicit, `initiatedBy`, an `info` entry correlating it)
//! makes the controller sync, copy the request into `status.operationState` and clear
//! `operation` when the phase completes. An apply is done when that state is ours (its `info`
//! holds our correlation id), its phase is `Succeeded` and `syncResult.revision` is the commit;
//! `Failed` or `Error` fails it. `operation` is never written while a sync is `Running`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::config::InventoryEntry;
use backflow_decision::held_status::HeldOutcome;
use backflow_decision::held_status::argo::{self, Driven};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::held::Held;
use crate::native::{Applier, ApplyReport, ApplyRequest};

/// `argoproj.io/v1alpha1` `Application`.
#[must_use]
pub fn applications() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Application"),
        "applications",
    )
}

/// `argoproj.io/v1alpha1` `ApplicationSet`.
#[must_use]
pub fn application_sets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "ApplicationSet"),
        "applicationsets",
    )
}

/// The field backflow holds on an Application.
const AUTOMATED: &str = "/spec/syncPolicy/automated";

/// Whether `ApplicationSet` `set` sets `spec.syncPolicy.automated` of its Application `app` back
/// to its template: it does unless it never updates the Applications it created
/// (`syncPolicy.applicationsSync` `create-only` or `create-delete`) or ignores differences in
/// that field for `app` (`ignoreApplicationDifferences`, by JSON pointer or jq path, to the field
/// or a parent of it).
fn application_set_owns_automated(set: &Value, app: &str) -> bool {
    let never_updates = matches!(
        set["spec"]["syncPolicy"]["applicationsSync"].as_str(),
        Some("create-only" | "create-delete")
    );
    let covers = |pointer: &str| {
        let pointer = pointer.trim_end_matches('/');
        AUTOMATED == pointer || AUTOMATED.starts_with(&format!("{pointer}/"))
    };
    let ignored = set["spec"]["ignoreApplicationDifferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| {
            rule["name"]
                .as_str()
                .is_none_or(|n| n.is_empty() || n == app)
        })
        .any(|rule| {
            let pointers = rule["jsonPointers"].as_array().into_iter().flatten();
            let jq = rule["jqPathExpressions"].as_array().into_iter().flatten();
            pointers.filter_map(Value::as_str).any(covers)
                || jq
                    .filter_map(Value::as_str)
                    .any(|path| covers(&path.replace('.', "/")))
        });
    !(never_updates || ignored)
}

/// The `repoURL` and `targetRevision` of each of `app`'s sources: `spec.sources` when it lists
/// any (a multi-source Application), else `spec.source`.
fn sources(app: &Value) -> Vec<(String, String)> {
    let read = |s: &Value| {
        (
            s["repoURL"].as_str().unwrap_or_default().to_string(),
            s["targetRevision"].as_str().unwrap_or("HEAD").to_string(),
        )
    };
    match app["spec"]["sources"].as_array() {
        Some(list) if !list.is_empty() => list.iter().map(read).collect(),
        _ => vec![read(&app["spec"]["source"])],
    }
}

/// A held Application.
pub struct ArgoApplier {
    held: Held,
}

impl ArgoApplier {
    /// The applier of Application `namespace/name`, which must sync `url` `branch`.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        source: (&str, &str),
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            held: Held::new(client, "Application", (namespace, name), source, clock),
        }
    }

    fn api(&self) -> Api<DynamicObject> {
        self.held.api(&applications(), &self.held.namespace)
    }

    async fn get(&self) -> Result<DynamicObject, String> {
        self.api()
            .get_opt(&self.held.name)
            .await
            .map_err(|e| self.held.failed("reading", &e))?
            .ok_or_else(|| format!("{} does not exist", self.held.shown()))
    }

    /// Which source of `app` the targets write: the one whose repository and branch they are
    /// (any of several, for a multi-source Application); refused when none is.
    fn driven(&self, app: &Value) -> Result<Driven, String> {
        let sources = sources(app);
        let multi = app["spec"]["sources"]
            .as_array()
            .is_some_and(|l| !l.is_empty());
        if let (false, [(url, branch)]) = (multi, sources.as_slice()) {
            self.held.check_source(&self.held.shown(), url, branch)?;
            return Ok(Driven::Single);
        }
        let mut refusals = Vec::new();
        for (index, (url, branch)) in sources.iter().enumerate() {
            match self.held.check_source(
                &format!("{} source {index}", self.held.shown()),
                url,
                branch,
            ) {
                Ok(()) => {
                    return Ok(Driven::Multi {
                        index,
                        revisions: sources.iter().map(|(_, b)| b.clone()).collect(),
                    });
                }
                Err(e) => refusals.push(e),
            }
        }
        Err(refusals.join("; "))
    }

    async fn run(&self, request: ApplyRequest) -> ApplyReport {
        let mut report = ApplyReport::default();
        let commit = request.commit.to_string();
        let outcome = match self
            .get()
            .await
            .and_then(|app| Ok((self.driven(&app.data)?, app)))
        {
            Ok((driven, app)) => self.sync(&driven, &app.data, &commit, request.follow).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(inventory) => {
                report.applied = inventory.len();
                report.inventory = inventory;
            }
            Err(e) => report.failures.push(e),
        }
        report
    }

    /// One sync of `commit`: the request found in flight followed (`follow`, when the
    /// Application still carries it), or a new one asked for; then followed to its end.
    async fn sync(
        &self,
        driven: &Driven,
        app: &Value,
        commit: &str,
        follow: bool,
    ) -> Result<Vec<InventoryEntry>, String> {
        let followed = follow
            .then(|| self.request_in_flight(app, driven, commit))
            .flatten();
        if let Some(token) = followed {
            return self.wait(driven, commit, &token).await;
        }
        let token = self.held.token();
        self.request_sync(driven, commit, &token).await?;
        self.wait(driven, commit, &token).await
    }

    /// The correlation of an operation found in flight at start that the Application still
    /// carries: backflow's request not taken up yet, or its sync running or done at `commit`.
    /// `None`: ask again (it never reached Argo CD, or ended without applying `commit`).
    fn request_in_flight(&self, app: &Value, driven: &Driven, commit: &str) -> Option<String> {
        let token = argo::request_in_flight(app, driven, commit);
        tracing::info!(application = %self.held.shown(), followed = ?token, "an operation found in flight at start");
        token
    }

    /// Writes the sync request, once no sync is running (however long that takes: a request
    /// written meanwhile would be lost).
    async fn request_sync(&self, driven: &Driven, commit: &str, token: &str) -> Result<(), String> {
        while self.get().await?.data["status"]["operationState"]["phase"] == "Running" {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let operation = json!({"operation": argo::operation(driven, commit, token)});
        self.api()
            .patch(&self.held.name, &Held::params(), &Patch::Merge(&operation))
            .await
            .map(|_| ())
            .map_err(|e| self.held.failed("requesting a sync of", &e))
    }

    async fn wait(
        &self,
        driven: &Driven,
        commit: &str,
        token: &str,
    ) -> Result<Vec<InventoryEntry>, String> {
        // No timer ends the wait (see the Flux applier's): a hand-back does.
        loop {
            if let Some(outcome) = outcome(&self.get().await?.data, driven, commit, token) {
                return outcome.map_err(|m| format!("{}: {m}", self.held.shown()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Turns automated sync off if it is on; answers whether it was off. An Application that
    /// syncs another repository or branch than the targets write is refused.
    async fn hold_off(&self) -> Result<Option<bool>, String> {
        let app = self.get().await?;
        self.driven(&app.data)?;
        self.check_application_set(&app).await?;
        let automated = &app.data["spec"]["syncPolicy"]["automated"];
        // `automated` present with `enabled` unset counts as enabled.
        let on = automated.is_object() && automated["enabled"] != false;
        if on {
            tracing::info!(application = %self.held.shown(), "automated sync was on: switched off");
            self.set_automated(false).await?;
        }
        Ok(Some(!on))
    }

    /// An Application an `ApplicationSet` generated is held only when the set leaves its
    /// `automated` alone: otherwise the set switches automated sync back on after every hold,
    /// and the two would fight. Refused, it is reported with what to change.
    async fn check_application_set(&self, app: &DynamicObject) -> Result<(), String> {
        let owners = app.metadata.owner_references.iter().flatten();
        let Some(owner) = owners
            .into_iter()
            .find(|o| o.kind == "ApplicationSet" && o.api_version.starts_with("argoproj.io/"))
        else {
            return Ok(());
        };
        let shown = format!("ApplicationSet {}/{}", self.held.namespace, owner.name);
        let set = self
            .held
            .api(&application_sets(), &self.held.namespace)
            .get_opt(&owner.name)
            .await
            .map_err(|e| {
                format!(
                    "{} is generated by {shown}, which cannot be read: {e}",
                    self.held.shown()
                )
            })?
            .ok_or_else(|| {
                format!(
                    "{} is generated by {shown}, which does not exist",
                    self.held.shown()
                )
            })?;
        if application_set_owns_automated(&set.data, &self.held.name) {
            return Err(format!(
                "{} is generated by {shown}, which sets spec.syncPolicy.automated back: add ignoreApplicationDifferences [{{jsonPointers: [{AUTOMATED}]}}] to it, or hold its Applications through their template",
                self.held.shown()
            ));
        }
        Ok(())
    }

    async fn set_automated(&self, enabled: bool) -> Result<(), String> {
        let patch = json!({"spec": {"syncPolicy": {"automated": {"enabled": enabled}}}});
        self.api()
            .patch(&self.held.name, &Held::params(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "setting {} automated sync {enabled}: {e}",
                    self.held.shown()
                )
            })
    }
}

/// What an Application's status says about our sync of `commit` (correlated by `token`), with
/// the inventory of a sync that applied it: `None` while undecided.
fn outcome(
    app: &Value,
    driven: &Driven,
    commit: &str,
    token: &str,
) -> Option<Result<Vec<InventoryEntry>, String>> {
    argo::outcome(app, driven, commit, token).map(|outcome| match outcome {
        HeldOutcome::Applied => Ok(inventory(&app["status"])),
        HeldOutcome::Failed(message) => Err(message),
    })
}

fn inventory(status: &Value) -> Vec<InventoryEntry> {
    status["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |f: &str| r[f].as_str().unwrap_or_default().to_string();
            InventoryEntry {
                id: format!(
                    "{}_{}_{}_{}",
                    text("namespace"),
                    text("name"),
                    text("group"),
                    text("kind")
                ),
                v: text("version"),
            }
        })
        .collect()
}

impl Applier for ArgoApplier {
    fn apply(
        &self,
        request: ApplyRequest,
    ) -> Pin<Box<dyn Future<Output = ApplyReport> + Send + '_>> {
        Box::pin(self.run(request))
    }

    fn hold(&self) -> Pin<Box<dyn Future<Output = Result<Option<bool>, String>> + Send + '_>> {
        Box::pin(self.hold_off())
    }

    fn release(
        &self,
        suspended: bool,
        _inventory: Vec<InventoryEntry>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(self.set_automated(!suspended))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_application_set_owns_automated_unless_it_ignores_it_or_never_updates() {
        let set = |spec: Value| json!({"spec": spec});
        assert!(application_set_owns_automated(&set(json!({})), "shop"));
        for spec in [
            json!({"syncPolicy": {"applicationsSync": "create-only"}}),
            json!({"ignoreApplicationDifferences": [{"jsonPointers": ["/spec/syncPolicy/automated"]}]}),
            json!({"ignoreApplicationDifferences": [{"jsonPointers": ["/spec/syncPolicy"]}]}),
            json!({"ignoreApplicationDifferences": [{"name": "shop", "jqPathExpressions": [".spec.syncPolicy.automated"]}]}),
        ] {
            assert!(
                !application_set_owns_automated(&set(spec.clone()), "shop"),
                "{spec}"
            );
        }
        for spec in [
            json!({"syncPolicy": {"applicationsSync": "sync"}}),
            json!({"ignoreApplicationDifferences": [{"name": "other", "jsonPointers": ["/spec/syncPolicy/automated"]}]}),
            json!({"ignoreApplicationDifferences": [{"jsonPointers": ["/spec/syncPolicy/automatedX", "/spec/source"]}]}),
        ] {
            assert!(
                application_set_owns_automated(&set(spec.clone()), "shop"),
                "{spec}"
            );
        }
    }

    /// A multi-source Application's sources, each at its own revision (`HEAD` when unset).
    #[test]
    fn the_sources_of_an_application_are_listed_with_their_revisions() {
        let app = json!({"spec": {"sources": [
            {"repoURL": "https://charts.example.com", "targetRevision": "1.2.3", "chart": "web"},
            {"repoURL": "file:///srv/git/config.git", "targetRevision": "main", "ref": "values"},
            {"repoURL": "https://example.com/other.git"}
        ]}});
        let listed = sources(&app);
        assert_eq!(listed[1].1, "main");
        assert_eq!(listed[2].1, "HEAD");
        assert_eq!(
            sources(&json!({"spec": {"source": {"repoURL": "u"}}})),
            [("u".to_string(), "HEAD".to_string())]
        );
    }

    #[test]
    fn a_sync_that_applied_the_commit_reports_the_resources_it_synced() {
        let app = json!({"status": {"operationState": {
            "operation": {"info": [{"name": argo::CORRELATION, "value": "t"}]},
            "phase": "Succeeded", "syncResult": {"revision": "abc"}},
            "resources": [{"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "demo"}]}});
        let done = outcome(&app, &Driven::Single, "abc", "t").expect("decided");
        assert_eq!(done.expect("synced")[0].id, "shop_demo__ConfigMap");
        assert_eq!(
            outcome(&app, &Driven::Single, "def", "t").expect("decided"),
            Err("synced \"abc\" instead of def".to_string())
        );
    }
}
