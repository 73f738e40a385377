//! A damaged store file is refused with a message that names it and says how to recover — never
//! a panic, never served silently short: every 4 KiB block of a small store zeroed in turn, and
//! the file cut at several lengths, each start either serves every acknowledged object as it
//! was acknowledged or refuses.

#![allow(
    clippy::redundant_closure_for_method_calls,
    reason = "the store's State and StoredObject cannot be named outside the crate"
)]

use std::collections::BTreeMap;
use std::path::Path;

use backflow_api::{GroupResource, ObjectKey};
use backflow_server::Store;
use serde_json::{Value, json};

const BLOCK: usize = 4096;

/// What a start of the store at `path` did.
enum Start {
    /// Every acknowledged object served as acknowledged.
    Served,
    /// Refused with the damaged-store message.
    Refused,
}

/// A store with objects written over several commits (overwrites and deletes leave freed pages
/// behind); what it acknowledged, by key.
async fn build(path: &Path) -> (BTreeMap<ObjectKey, Value>, u64) {
    let store = Store::open(path, 100).unwrap();
    let mut acknowledged = BTreeMap::new();
    for round in 0..4 {
        let objects: Vec<(ObjectKey, Value)> = (0..12)
            .map(|i| {
                let key = ObjectKey::new(
                    GroupResource::new("", "configmaps"),
                    "default",
                    format!("cm-{i}"),
                );
                // Some values span pages.
                let payload = "x".repeat(if i % 4 == 0 { 6000 } else { 40 + i * round });
                let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
                    "data": {"round": round.to_string(), "payload": payload}});
                (key, value)
            })
            .collect();
        let written: Vec<(ObjectKey, Value)> = store
            .write(move |tx| {
                let mut out = Vec::new();
                for (key, value) in objects {
                    if round == 3 && key.name.ends_with('7') {
                        tx.delete(&key);
                        continue;
                    }
                    let stored = tx.put(key.clone(), value);
                    out.push((key, stored));
                }
                Ok(out)
            })
            .await
            .unwrap();
        if round == 3 {
            acknowledged.retain(|k: &ObjectKey, _| !k.name.ends_with('7'));
        }
        acknowledged.extend(written);
    }
    let rv = store.read(|state| state.resource_version());
    store.close().await;
    (acknowledged, rv)
}

/// Starts the store at `path` and judges what it did.
async fn start(path: &Path, acknowledged: &BTreeMap<ObjectKey, Value>, rv: u64) -> Start {
    match Store::open(path, 100) {
        Ok(store) => {
            let served = store.read(|state| {
                acknowledged
                    .iter()
                    .filter(|(key, value)| {
                        state.get(key).map(|o| o.value()).as_ref() != Some(*value)
                    })
                    .map(|(key, _)| key.to_string())
                    .collect::<Vec<_>>()
            });
            assert!(served.is_empty(), "served without {served:?}");
            assert_eq!(store.read(|state| state.resource_version()), rv);
            store.close().await;
            Start::Served
        }
        Err(e) => {
            let message = e.to_string();
            let shown = path.display().to_string();
            assert!(
                message.contains(&format!("the store {shown} is damaged"))
                    && message.contains("nothing in it was changed")
                    && message.contains("--initialize"),
                "{message}"
            );
            Start::Refused
        }
    }
}

#[tokio::test]
async fn every_damaged_block_and_every_cut_is_served_whole_or_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("store.redb");
    let (acknowledged, rv) = build(&original).await;
    let bytes = std::fs::read(&original).unwrap();
    let blocks = bytes.len().div_ceil(BLOCK);
    assert!(blocks >= 8, "a store of {} bytes", bytes.len());
    let (mut served, mut refused) = (0, 0);
    let mut tally = |start: Start| match start {
        Start::Served => served += 1,
        Start::Refused => refused += 1,
    };
    for block in 0..blocks {
        let mut damaged = bytes.clone();
        let end = ((block + 1) * BLOCK).min(damaged.len());
        damaged[block * BLOCK..end].fill(0);
        let path = dir.path().join(format!("zeroed-{block}.redb"));
        std::fs::write(&path, &damaged).unwrap();
        let outcome = start(&path, &acknowledged, rv).await;
        if matches!(outcome, Start::Refused) {
            assert!(
                std::fs::read(&path).unwrap() == damaged,
                "block {block}: a refused file was changed"
            );
        }
        tally(outcome);
        std::fs::remove_file(&path).unwrap();
    }
    for cut in [BLOCK, bytes.len() / 2, bytes.len() - BLOCK, bytes.len() - 1] {
        let path = dir.path().join(format!("cut-{cut}.redb"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        tally(start(&path, &acknowledged, rv).await);
    }
    eprintln!("{blocks} blocks: {served} served, {refused} refused");
    // The damage was seen (the first block holds the header), and undamaged space was served.
    assert!(
        refused > 0 && served > 0,
        "{served} served, {refused} refused"
    );
}
