//! What a held applier's own status says of backflow's request: Flux's `Kustomization` and
//! Argo CD's `Application`, each by its documented contract. The drivers in `backflow-apply`
//! read the live objects through these; the simulator's held appliers keep model objects by
//! the same contracts and are read through them too.

use serde_json::{Value, json};

/// How a request ended, as the applier's status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldOutcome {
    /// The commit (or, for Flux, what the source fetched after the flush for our request) was
    /// applied.
    Applied,
    /// The applier failed at it, with its message.
    Failed(String),
}

/// Flux's kustomize-controller: `reconcile.fluxcd.io/requestedAt` on the `Kustomization` makes
/// it reconcile; `spec.suspend: true` stops every reconcile. An apply is done when `Ready=True`
/// at the Kustomization's current generation (resuming it moved the generation, so a reconcile
/// ran since) with `status.lastAppliedRevision` ending in `@sha1:<the commit>`, or equal to the
/// revision attempted by the reconcile our request started. `status.lastHandledReconcileAt`
/// alone proves nothing: a suspended Kustomization copies it too without applying anything. It
/// failed when `Ready` is `False` at the current generation for that attempt.
pub mod flux {
    use super::{HeldOutcome, Value};

    /// The annotation Flux reconciles on.
    pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

    /// What a Kustomization's status (`ks`: the object without its metadata; `generation`: its
    /// `metadata.generation`) says about applying `commit` after the request `token`: `None`
    /// while undecided.
    #[must_use]
    pub fn outcome(
        ks: &Value,
        generation: Option<i64>,
        commit: &str,
        token: &str,
    ) -> Option<HeldOutcome> {
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
            Some("True") if applied => Some(HeldOutcome::Applied),
            Some("False") if ours || of_commit("lastAttemptedRevision") => {
                let message = ready["message"].as_str().unwrap_or("Ready=False");
                Some(HeldOutcome::Failed(message.to_string()))
            }
            _ => None,
        }
    }

    /// The request of an operation found in flight at start that the Kustomization still
    /// carries (`requested_at`: its annotation): its token while it is resumed (Flux is at it),
    /// or when it already applied `commit` for it. `None`: ask again (it was suspended before
    /// applying, or never asked).
    #[must_use]
    pub fn request_in_flight(
        requested_at: Option<&str>,
        ks: &Value,
        generation: Option<i64>,
        commit: &str,
    ) -> Option<String> {
        let token = requested_at?;
        let resumed = ks["spec"]["suspend"] != true;
        let applied = outcome(ks, generation, commit, token) == Some(HeldOutcome::Applied);
        (resumed || applied).then(|| token.to_string())
    }
}

/// Argo CD's application controller: writing a complete top-level `operation`
/// (`sync.revision` always explicit, `initiatedBy`, an `info` entry correlating it) makes the
/// controller sync, copy the request into `status.operationState` and clear `operation` when
/// the phase completes. An apply is done when that state is ours (its `info` holds our
/// correlation id), its phase is `Succeeded` and `syncResult.revision` is the commit; `Failed`
/// or `Error` fails it.
pub mod argo {
    use super::{HeldOutcome, Value, json};

    /// The `info` entry that marks an operation as backflow's, with its correlation id.
    pub const CORRELATION: &str = "backflow-operation";

    /// Which of an Application's sources backflow drives.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Driven {
        /// `spec.source`: the sync names one `revision`.
        Single,
        /// `spec.sources[index]`: the sync names one revision per source (`revisions`), the
        /// others at their own `targetRevision`.
        Multi {
            /// Its position in `spec.sources`.
            index: usize,
            /// Every source's `targetRevision` (`HEAD` when unset).
            revisions: Vec<String>,
        },
    }

    /// The `operation` that asks for a sync of `commit` for the driven source, marked `token`.
    #[must_use]
    pub fn operation(driven: &Driven, commit: &str, token: &str) -> Value {
        json!({
            "sync": sync_request(driven, commit),
            "initiatedBy": {"username": "backflow"},
            "info": [{"name": CORRELATION, "value": token}],
        })
    }

    /// The sync request of `commit` for the driven source.
    #[must_use]
    pub fn sync_request(driven: &Driven, commit: &str) -> Value {
        match driven {
            Driven::Single => json!({"revision": commit, "prune": true}),
            Driven::Multi { index, revisions } => {
                let mut revisions = revisions.clone();
                if let Some(r) = revisions.get_mut(*index) {
                    *r = commit.to_string();
                }
                json!({"revisions": revisions, "prune": true})
            }
        }
    }

    /// The revision a finished sync applied to the driven source.
    fn synced_revision<'a>(driven: &Driven, state: &'a Value) -> &'a Value {
        match driven {
            Driven::Single => &state["syncResult"]["revision"],
            Driven::Multi { index, .. } => &state["syncResult"]["revisions"][*index],
        }
    }

    /// The correlation id of an `operation` (or `operationState.operation`), when backflow's.
    fn token_of(operation: &Value) -> Option<String> {
        let info = operation["info"].as_array()?;
        let ours = info.iter().find(|i| i["name"] == CORRELATION)?;
        ours["value"].as_str().map(str::to_string)
    }

    /// What an Application's status says about our sync of `commit` (correlated by `token`):
    /// `None` while undecided.
    #[must_use]
    pub fn outcome(app: &Value, driven: &Driven, commit: &str, token: &str) -> Option<HeldOutcome> {
        let state = &app["status"]["operationState"];
        if token_of(&state["operation"]).as_deref() != Some(token) {
            return None;
        }
        let synced = synced_revision(driven, state);
        match state["phase"].as_str() {
            Some("Succeeded") if synced == commit => Some(HeldOutcome::Applied),
            Some("Succeeded") => Some(HeldOutcome::Failed(format!(
                "synced {synced} instead of {commit}"
            ))),
            Some("Failed" | "Error") => {
                let message = state["message"].as_str().unwrap_or("the sync failed");
                Some(HeldOutcome::Failed(message.to_string()))
            }
            _ => None,
        }
    }

    /// The request of an operation found in flight at start: its token while the request is
    /// not picked up yet, or while the sync it started runs or when it synced `commit`. `None`:
    /// ask again.
    #[must_use]
    pub fn request_in_flight(app: &Value, driven: &Driven, commit: &str) -> Option<String> {
        if let Some(token) = token_of(&app["operation"]) {
            return Some(token);
        }
        let state = &app["status"]["operationState"];
        let token = token_of(&state["operation"])?;
        let running = state["phase"] == "Running";
        let applied = outcome(app, driven, commit, &token) == Some(HeldOutcome::Applied);
        (running || applied).then_some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::argo::{CORRELATION, Driven};
    use super::*;

    #[test]
    fn flux_is_done_when_applied_at_the_current_generation_never_only_handled() {
        let sha = "0123456789012345678901234567890123456789";
        let ks = |observed: i64, ready: &str, applied: &str, attempted: &str| {
            json!({"spec": {"suspend": true}, "status": {"observedGeneration": observed,
                "lastAppliedRevision": applied, "lastAttemptedRevision": attempted,
                "lastHandledReconcileAt": "token",
                "conditions": [{"type": "Ready", "status": ready, "message": "kustomize build failed"}]}})
        };
        let rev = format!("main@sha1:{sha}");
        let decide = |ks: &Value, token: &str| flux::outcome(ks, Some(2), sha, token);
        assert_eq!(
            decide(&ks(2, "True", &rev, &rev), "other"),
            Some(HeldOutcome::Applied)
        );
        // An older generation's status, or another revision of another request, decides nothing.
        assert_eq!(decide(&ks(1, "True", &rev, &rev), "token"), None);
        let later = "main@sha1:descendant";
        assert_eq!(decide(&ks(2, "True", later, later), "other"), None);
        // The reconcile our request started applied what its source fetched after the flush.
        assert_eq!(
            decide(&ks(2, "True", later, later), "token"),
            Some(HeldOutcome::Applied)
        );
        // Handled is not applied: a suspended Kustomization copies the token and applies nothing.
        assert_eq!(decide(&ks(2, "Unknown", "", ""), "token"), None);
        assert_eq!(
            decide(&ks(2, "False", "main@sha1:old", &rev), "other"),
            Some(HeldOutcome::Failed("kustomize build failed".into()))
        );
        assert_eq!(
            decide(&ks(2, "False", "main@sha1:old", "main@sha1:old"), "other"),
            None,
            "another request's failure at another revision is not ours"
        );
        // Found in flight: followed when it applied the commit or is resumed, else asked again.
        let in_flight = |ks: &Value| flux::request_in_flight(Some("token"), ks, Some(2), sha);
        assert_eq!(
            in_flight(&ks(2, "True", &rev, &rev)).as_deref(),
            Some("token")
        );
        assert_eq!(
            in_flight(&ks(2, "Unknown", "", "")),
            None,
            "suspended, nothing applied"
        );
        let mut resumed = ks(2, "Unknown", "", "");
        resumed["spec"]["suspend"] = json!(false);
        assert_eq!(in_flight(&resumed).as_deref(), Some("token"));
        assert_eq!(
            flux::request_in_flight(None, &resumed, Some(2), sha),
            None,
            "never asked"
        );
    }

    #[test]
    fn argo_is_done_when_our_operation_succeeded_at_the_commit() {
        let app = |token: &str, phase: &str, revision: &str| {
            json!({"status": {"operationState": {
                "operation": {"info": [{"name": CORRELATION, "value": token}]},
                "phase": phase, "message": "one or more objects failed to apply",
                "syncResult": {"revision": revision}}}})
        };
        let decide = |app: &Value| argo::outcome(app, &Driven::Single, "abc", "t");
        assert_eq!(
            decide(&app("t", "Succeeded", "abc")),
            Some(HeldOutcome::Applied)
        );
        assert_eq!(decide(&app("t", "Running", "")), None);
        assert_eq!(
            decide(&app("other", "Succeeded", "abc")),
            None,
            "another request's state is not ours"
        );
        assert!(matches!(
            decide(&app("t", "Succeeded", "old")),
            Some(HeldOutcome::Failed(_))
        ));
        assert_eq!(
            decide(&app("t", "Failed", "")),
            Some(HeldOutcome::Failed(
                "one or more objects failed to apply".into()
            ))
        );
        // Found in flight: a request not picked up, a running sync, or one that synced the commit.
        let in_flight = |app: &Value| argo::request_in_flight(app, &Driven::Single, "abc");
        assert_eq!(in_flight(&app("t", "Running", "")).as_deref(), Some("t"));
        assert_eq!(
            in_flight(&app("t", "Succeeded", "abc")).as_deref(),
            Some("t")
        );
        assert_eq!(in_flight(&app("t", "Failed", "")), None);
        let requested = json!({"operation": argo::operation(&Driven::Single, "abc", "u")});
        assert_eq!(in_flight(&requested).as_deref(), Some("u"));
    }

    /// A multi-source Application: the request names one revision per source, the driven one at
    /// the commit and the others at their own; done when the driven source synced the commit.
    #[test]
    fn a_multi_source_sync_names_every_revision_and_checks_the_driven_one() {
        let driven = Driven::Multi {
            index: 1,
            revisions: vec!["1.2.3".into(), "main".into(), "HEAD".into()],
        };
        assert_eq!(
            argo::sync_request(&driven, "abc"),
            json!({"revisions": ["1.2.3", "abc", "HEAD"], "prune": true})
        );
        let state = |revisions: Value| {
            json!({"status": {"operationState": {
                "operation": {"info": [{"name": CORRELATION, "value": "t"}]},
                "phase": "Succeeded", "syncResult": {"revisions": revisions}}}})
        };
        assert_eq!(
            argo::outcome(&state(json!(["1.2.3", "abc", "f00"])), &driven, "abc", "t"),
            Some(HeldOutcome::Applied)
        );
        assert!(
            matches!(
                argo::outcome(&state(json!(["abc", "old", "f00"])), &driven, "abc", "t"),
                Some(HeldOutcome::Failed(_))
            ),
            "another source at the commit is not the driven one"
        );
    }
}
