//! Kubernetes Events on a claim: what `kubectl describe` and `kubectl get events` show a person
//! about what a push could not do (a prune held, a change refused, a file unreadable) and what
//! an apply did (failed, confirmed). Recorded through the board's recorder, so a repeat within
//! ten minutes is counted on the first Event.

use backflow_board::{BranchRegistry, EventType, Note, Regarding};

use super::plan::ClaimKey;

/// Records an Event about the claim `key` in the background (best effort).
pub fn emit(
    registry: &BranchRegistry,
    key: &ClaimKey,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    registry.record(Note {
        regarding: Regarding {
            api_version: "backflow.dev/v1alpha1".into(),
            kind: key.kind.clone(),
            namespace: Some(key.namespace.clone()),
            name: key.name.clone(),
        },
        kind,
        reason: reason.into(),
        // What the claim was doing when it happened.
        action: match reason {
            "PruneHeld" | "PruneConfirmed" => "Prune",
            "FilesUnreadable" | "PlaintextSecret" => "Read",
            _ => "Apply",
        }
        .into(),
        message: message.into(),
    });
}
