//! Reading and writing claims of every kind: one API per kind, one status shape for all.

use backflow_api::config::{
    ArgoCDClaim, ClaimStatus, FluxClaim, HandBack, NativeClaim, claim_resource,
};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::plan::{ClaimKey, ClaimObject};

/// A claim as listed: what planning reads, and its status and generation.
#[derive(Debug, Clone)]
pub struct ListedClaim {
    /// What planning reads.
    pub object: ClaimObject,
    /// Its status as stored.
    pub status: Option<ClaimStatus>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
}

/// Every claim of every kind.
pub async fn list_claims(client: &Client) -> Result<Vec<ListedClaim>, kube::Error> {
    let lp = ListParams::default();
    let (native_api, flux_api, argo_api) = (
        Api::<NativeClaim>::all(client.clone()),
        Api::<FluxClaim>::all(client.clone()),
        Api::<ArgoCDClaim>::all(client.clone()),
    );
    let (natives, fluxes, argos) =
        tokio::try_join!(native_api.list(&lp), flux_api.list(&lp), argo_api.list(&lp))?;
    let natives = natives.items.into_iter().map(|c| ListedClaim {
        object: ClaimObject::native(&c),
        generation: c.metadata.generation,
        status: c.status,
    });
    let fluxes = fluxes.items.into_iter().map(|c| ListedClaim {
        object: ClaimObject::flux(&c),
        generation: c.metadata.generation,
        status: c.status,
    });
    let argos = argos.items.into_iter().map(|c| ListedClaim {
        object: ClaimObject::argo(&c),
        generation: c.metadata.generation,
        status: c.status,
    });
    Ok(natives.chain(fluxes).chain(argos).collect())
}

/// The API of `key`'s kind in its namespace.
fn api(client: &Client, key: &ClaimKey) -> Api<DynamicObject> {
    let resource = claim_resource(&key.kind);
    Api::namespaced_with(client.clone(), &key.namespace, &resource)
}

/// The claim's status and generation (`Ok(None)`: the claim does not exist).
pub async fn read(
    client: &Client,
    key: &ClaimKey,
) -> Result<Option<(ClaimStatus, Option<i64>)>, kube::Error> {
    let Some(found) = api(client, key).get_opt(&key.name).await? else {
        return Ok(None);
    };
    let status = found
        .data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    Ok(Some((status, found.metadata.generation)))
}

/// Fields of a claim's status that describe the last operation only: a status without them
/// removes them (a merge patch keeps what it does not name).
const PER_OPERATION: [&str; 7] = [
    "inventory",
    "inventoryStore",
    "failures",
    "pruneHeld",
    "refusedChanges",
    "unreadableFiles",
    "plaintextSecrets",
];

/// Writes `status` into the claim (a merge patch of the status subresource).
pub async fn write_status(
    client: &Client,
    key: &ClaimKey,
    status: &ClaimStatus,
) -> Result<(), kube::Error> {
    let mut status = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    if let Some(fields) = status.as_object_mut() {
        for field in PER_OPERATION {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
    }
    let patch = Patch::Merge(json!({"status": status}));
    api(client, key)
        .patch_status(&key.name, &PatchParams::default(), &patch)
        .await
        .map(|_| ())
}

/// Replaces the claim's conditions, touching nothing else of its status.
pub async fn write_conditions(
    client: &Client,
    key: &ClaimKey,
    conditions: &[backflow_api::config::Condition],
) -> Result<(), kube::Error> {
    let patch = Patch::Merge(json!({"status": {"conditions": conditions}}));
    api(client, key)
        .patch_status(&key.name, &PatchParams::default(), &patch)
        .await
        .map(|_| ())
}

/// Records how the claim found the applier it holds (`status.handBack`), touching nothing else.
pub async fn write_hand_back(
    client: &Client,
    key: &ClaimKey,
    hand_back: &HandBack,
) -> Result<(), kube::Error> {
    let patch = Patch::Merge(json!({"status": {"handBack": hand_back}}));
    api(client, key)
        .patch_status(&key.name, &PatchParams::default(), &patch)
        .await
        .map(|_| ())
}
