//! Kubernetes Events on a claim: what `kubectl describe` and `kubectl get events` show a person
//! about what a push could not do (a prune held, a change refused, a file unreadable).

use k8s_openapi::api::core::v1::Event;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use super::plan::ClaimKey;

/// Whether an Event reports something to look at or something done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something done.
    Normal,
    /// Something a person should look at.
    Warning,
}

/// Records an Event about the claim `key` (best effort: a failure is logged, never fatal).
pub async fn emit(
    client: &Client,
    key: &ClaimKey,
    kind: EventType,
    reason: &str,
    message: &str,
    now: &str,
) {
    let api = Api::<Event>::namespaced(client.clone(), &key.namespace);
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{}.", key.name), "namespace": key.namespace},
        "involvedObject": {
            "apiVersion": "backflow.dev/v1alpha1",
            "kind": key.kind,
            "name": key.name,
            "namespace": key.namespace,
        },
        "reason": reason,
        "message": message,
        "type": match kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
        "source": {"component": "backflow"},
        "reportingComponent": "backflow",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let created = match serde_json::from_value::<Event>(event) {
        Ok(event) => api.create(&PostParams::default(), &event).await.map(|_| ()),
        Err(e) => {
            tracing::warn!(claim = %key.name, error = %e, "cannot build an event");
            return;
        }
    };
    if let Err(e) = created {
        tracing::warn!(claim = %format!("{}/{}", key.namespace, key.name), %reason, error = %e, "cannot record an event");
    }
}
