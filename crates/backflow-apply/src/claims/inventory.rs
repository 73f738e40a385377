//! A claim's inventory: in its status while small, in `ConfigMaps` beside it once large.
//!
//! One object's size is bounded (3 MiB in the embedded server, 1.5 MiB in a cluster's etcd by
//! default), and the inventory of a claim applying a hundred thousand objects takes megabytes.
//! Up to [`INLINE_MAX`] entries live in `status.inventory`; beyond, in `ConfigMaps`
//! `<claim>-inventory-<n>` of the claim's namespace, each under [`CHUNK_BYTES`], labelled
//! `backflow.dev/record-of` so no folder mirrors them, and `status.inventoryStore` says how many
//! there are and how many entries they hold. The chunks are written before the status that names
//! them, and a restart that cannot read them all says so and prunes nothing it does not know.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use backflow_api::RECORD_LABEL;
use backflow_api::config::{InventoryEntry, InventoryStore};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::plan::ClaimKey;

/// The most entries kept in the claim's status itself: few enough that `kubectl describe` of a
/// claim stays a page (it printed every entry, over 900 lines for 200 objects); beyond, the
/// status says how many and where.
pub const INLINE_MAX: usize = 50;

/// The most bytes of entries one `ConfigMap` holds (a `ConfigMap` holds at most 1 MiB).
const CHUNK_BYTES: usize = 512 * 1024;

/// Where a status keeps the inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredInventory {
    /// The entries, when few enough to be in the status.
    pub inline: Vec<InventoryEntry>,
    /// Where they are otherwise.
    pub store: Option<InventoryStore>,
}

/// Why the inventory could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The API refused or failed.
    #[error("{what}: {}", backflow_board::explain(.source))]
    Api {
        /// What was being done.
        what: String,
        /// The API's answer.
        source: kube::Error,
    },
    /// The stored chunks do not hold what the status says.
    #[error("the inventory in {what} is incomplete: {found} entries of {expected}")]
    Incomplete {
        /// Where it was read.
        what: String,
        /// Entries read.
        found: u64,
        /// Entries the status names.
        expected: u64,
    },
}

/// A fingerprint of `entries`, to write them only when they changed.
#[must_use]
pub fn digest(entries: &[InventoryEntry]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for entry in entries {
        (&entry.id, &entry.v).hash(&mut hasher);
    }
    hasher.finish()
}

/// The `ConfigMap` holding chunk `n` of `key`'s inventory.
fn chunk_name(key: &ClaimKey, n: usize) -> String {
    format!("{}-inventory-{n}", key.name)
}

/// The entries as lines `<id> <apiVersion>`, cut into chunks of at most [`CHUNK_BYTES`].
fn chunks(entries: &[InventoryEntry]) -> Vec<String> {
    let mut out = vec![String::new()];
    for entry in entries {
        let line = format!("{} {}\n", entry.id, entry.v);
        if out
            .last()
            .is_some_and(|c| !c.is_empty() && c.len() + line.len() > CHUNK_BYTES)
        {
            out.push(String::new());
        }
        if let Some(chunk) = out.last_mut() {
            chunk.push_str(&line);
        }
    }
    out
}

fn parse(text: &str) -> impl Iterator<Item = InventoryEntry> + '_ {
    text.lines().filter_map(|line| {
        let (id, v) = line.split_once(' ')?;
        Some(InventoryEntry {
            id: id.to_string(),
            v: v.to_string(),
        })
    })
}

/// Writes `entries` where they fit: returned inline when few, else into chunk `ConfigMaps`
/// (and the chunks a larger inventory left are deleted).
pub async fn save(
    client: &Client,
    key: &ClaimKey,
    entries: Vec<InventoryEntry>,
) -> Result<StoredInventory, InventoryError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
    let owner = format!("{}.{}", key.namespace, key.name);
    let written = if entries.len() <= INLINE_MAX {
        0
    } else {
        let parts = chunks(&entries);
        for (n, text) in parts.iter().enumerate() {
            let name = chunk_name(key, n);
            let body = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": key.namespace, "labels": {RECORD_LABEL: owner}},
                "data": {"entries": text},
            });
            let params = PatchParams::apply("backflow-inventory").force();
            api.patch(&name, &params, &Patch::Apply(&body))
                .await
                .map_err(|source| InventoryError::Api {
                    what: format!("writing ConfigMap {}/{name}", key.namespace),
                    source,
                })?;
        }
        parts.len()
    };
    remove_beyond(&api, key, &owner, written).await?;
    Ok(if written == 0 {
        StoredInventory {
            inline: entries,
            store: None,
        }
    } else {
        StoredInventory {
            inline: Vec::new(),
            store: Some(InventoryStore {
                config_maps: u32::try_from(written).unwrap_or(u32::MAX),
                entries: entries.len() as u64,
            }),
        }
    })
}

/// Deletes the chunks of `key`'s inventory numbered `from` and up.
async fn remove_beyond(
    api: &Api<ConfigMap>,
    key: &ClaimKey,
    owner: &str,
    from: usize,
) -> Result<(), InventoryError> {
    let listed = api
        .list_metadata(&ListParams::default().labels(&format!("{RECORD_LABEL}={owner}")))
        .await
        .map_err(|source| InventoryError::Api {
            what: format!("listing the inventory ConfigMaps of {owner}"),
            source,
        })?;
    let keep: BTreeSet<String> = (0..from).map(|n| chunk_name(key, n)).collect();
    for cm in listed.items {
        let Some(name) = cm.metadata.name else {
            continue;
        };
        if keep.contains(&name) {
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(InventoryError::Api {
                    what: format!("deleting ConfigMap {}/{name}", key.namespace),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Reads the inventory `store` says `key`'s chunks hold.
pub async fn load(
    client: &Client,
    key: &ClaimKey,
    store: &InventoryStore,
) -> Result<Vec<InventoryEntry>, InventoryError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
    let mut entries = Vec::new();
    for n in 0..store.config_maps as usize {
        let name = chunk_name(key, n);
        let cm = api.get(&name).await.map_err(|source| InventoryError::Api {
            what: format!("reading ConfigMap {}/{name}", key.namespace),
            source,
        })?;
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("entries"))
            .map_or("", String::as_str);
        entries.extend(parse(text));
    }
    if entries.len() as u64 != store.entries {
        return Err(InventoryError::Incomplete {
            what: format!("the ConfigMaps {}-inventory-*", key.name),
            found: entries.len() as u64,
            expected: store.entries,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_every_entry_once_and_stay_under_the_limit() {
        let entries: Vec<InventoryEntry> = (0..40_000)
            .map(|i| InventoryEntry {
                id: format!("team_object-{i}__ConfigMap"),
                v: "v1".into(),
            })
            .collect();
        let parts = chunks(&entries);
        assert!(parts.len() > 1, "{}", parts.len());
        assert!(parts.iter().all(|c| c.len() <= CHUNK_BYTES));
        let back: Vec<InventoryEntry> = parts.iter().flat_map(|c| parse(c)).collect();
        assert_eq!(back, entries);
        assert_eq!(chunks(&[]), vec![String::new()]);
        assert_ne!(digest(&entries), digest(&entries[1..]));
    }
}
