//! The resource a held applier is driven through, kept by its controller's documented contract:
//! Flux's `Kustomization` (resumed with `reconcile.fluxcd.io/requestedAt` for a request,
//! suspended again after it; its status names the revisions applied at a generation) or Argo
//! CD's `Application` (an `operation` written, copied into `status.operationState` and run).
//! backflow's side reads it only through the drivers' own rules
//! (`backflow_decision::held_status`): whether a request ended and how, and which request a
//! restart finds in flight.

use backflow_decision::held_status::HeldOutcome;
use backflow_decision::held_status::argo::{self, Driven};
use backflow_decision::held_status::flux;
use serde_json::{Value, json};

/// Which controller's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contract {
    Flux,
    Argo,
}

/// A held applier's `Kustomization` or `Application`, as its controller and backflow's driver
/// leave it.
#[derive(Debug, Clone)]
pub(crate) struct HeldResource {
    contract: Contract,
    /// The object without its metadata (what the drivers read as `DynamicObject::data`).
    object: Value,
    /// `metadata.generation`: every change of `spec` makes a new one.
    generation: i64,
    /// Flux's `reconcile.fluxcd.io/requestedAt` annotation.
    requested_at: Option<String>,
}

impl HeldResource {
    /// The resource of the applier that writes as `manager`, held (suspended, or with no
    /// automated sync) and never asked anything.
    pub(crate) fn of(manager: &str) -> Self {
        let contract = if manager.starts_with("argocd") {
            Contract::Argo
        } else {
            Contract::Flux
        };
        let object = match contract {
            Contract::Flux => json!({"spec": {"suspend": true}, "status": {}}),
            Contract::Argo => json!({"spec": {"source": {}}, "status": {}}),
        };
        Self {
            contract,
            object,
            generation: 1,
            requested_at: None,
        }
    }

    fn set_suspend(&mut self, suspend: bool) {
        if self.object["spec"]["suspend"] != suspend {
            self.object["spec"]["suspend"] = json!(suspend);
            self.generation += 1;
        }
    }

    /// backflow's driver asks for `commit`, marked `token`: Flux's Kustomization is annotated
    /// and resumed; Argo CD's Application gets the `operation`.
    pub(crate) fn request(&mut self, commit: &str, token: &str) {
        match self.contract {
            Contract::Flux => {
                self.requested_at = Some(token.to_string());
                self.set_suspend(false);
            }
            Contract::Argo => {
                self.object["operation"] = argo::operation(&Driven::Single, commit, token);
            }
        }
    }

    /// The controller finished the request it runs: `commit` applied, or failed at it. Argo
    /// CD's copies the `operation` into `status.operationState` and clears it (taken up and
    /// completed at once: the world's applier writes in one step).
    pub(crate) fn finished(&mut self, commit: &str, applied: bool) {
        if let Some(operation) = self
            .object
            .as_object_mut()
            .and_then(|o| o.remove("operation"))
        {
            self.object["status"]["operationState"] = json!({"operation": operation});
        }
        match self.contract {
            Contract::Flux => {
                let revision = format!("main@sha1:{commit}");
                let status = &mut self.object["status"];
                status["observedGeneration"] = json!(self.generation);
                status["lastHandledReconcileAt"] = json!(self.requested_at);
                status["lastAttemptedRevision"] = json!(revision);
                let ready = if applied {
                    status["lastAppliedRevision"] = json!(revision);
                    json!({"type": "Ready", "status": "True"})
                } else {
                    json!({"type": "Ready", "status": "False", "message": "kustomize build failed"})
                };
                status["conditions"] = json!([ready]);
            }
            Contract::Argo => {
                let state = &mut self.object["status"]["operationState"];
                state["phase"] = json!(if applied { "Succeeded" } else { "Failed" });
                state["syncResult"] = json!({"revision": commit});
                if !applied {
                    state["message"] = json!("one or more objects failed to apply");
                }
            }
        }
    }

    /// backflow's driver holds the applier again once it heard the outcome (Flux's
    /// Kustomization suspended; Argo CD's automated sync was never switched on).
    pub(crate) fn hold(&mut self) {
        if self.contract == Contract::Flux {
            self.set_suspend(true);
        }
    }

    /// What the status says of the request `token` for `commit`, by the driver's rule.
    pub(crate) fn outcome(&self, commit: &str, token: &str) -> Option<HeldOutcome> {
        match self.contract {
            Contract::Flux => flux::outcome(&self.object, Some(self.generation), commit, token),
            Contract::Argo => argo::outcome(&self.object, &Driven::Single, commit, token),
        }
    }

    /// The request of an operation for `commit` a restart finds in flight, by the driver's
    /// rule: followed when `Some`, asked again when `None`.
    pub(crate) fn in_flight(&self, commit: &str) -> Option<String> {
        match self.contract {
            Contract::Flux => flux::request_in_flight(
                self.requested_at.as_deref(),
                &self.object,
                Some(self.generation),
                commit,
            ),
            Contract::Argo => argo::request_in_flight(&self.object, &Driven::Single, commit),
        }
    }
}
