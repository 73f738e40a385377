//! The store's durable record of who wrote what and when ([`WriteRecord`]): each batch's writes
//! are kept in the same redb transaction as the objects, bounded to the last
//! [`WriteRecord::CAPACITY`] writes, and loaded again when the store opens.

use std::sync::Arc;
use std::time::SystemTime;

use backflow_api::{ObjectKey, RecordedWrite, WriteRecord, WriteVerb};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};

use super::event_log::{EventType, WatchEvent};
use super::write_tx::Authored;

/// resourceVersion → the write, as JSON.
const WRITES: TableDefinition<u64, &[u8]> = TableDefinition::new("writes");

/// Kinds whose writes say nothing about an object's story and would crowd out those that do:
/// Events (backflow writes them about every object), Leases (renewed every few seconds).
fn recorded(key: &ObjectKey) -> bool {
    !matches!(
        (key.resource.group.as_str(), key.resource.resource.as_str()),
        ("" | "events.k8s.io", "events") | ("coordination.k8s.io", "leases")
    )
}

/// The writes of one batch, in resourceVersion order, with the users who made them.
pub(super) fn of_batch(events: &[WatchEvent], authored: &[Authored]) -> Vec<RecordedWrite> {
    let at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    events
        .iter()
        .filter(|e| recorded(&e.key))
        .map(|e| {
            // Both in resourceVersion order (each change takes the next one).
            let by = authored
                .binary_search_by_key(&e.resource_version, |a| a.resource_version)
                .ok()
                .map(|at| &authored[at]);
            (e, by)
        })
        .map(|(e, by)| RecordedWrite {
            key: e.key.clone(),
            resource_version: e.resource_version,
            user: by.and_then(|a| a.user.clone()),
            manager: by.and_then(|a| a.manager.clone()),
            verb: match e.event_type {
                EventType::Added => WriteVerb::Create,
                EventType::Modified => WriteVerb::Update,
                EventType::Deleted => WriteVerb::Delete,
            },
            at: at.clone(),
        })
        .collect()
}

/// Adds `writes` to the durable record inside `w`, forgetting the oldest beyond the capacity.
pub(super) fn persist(w: &WriteTransaction, writes: &[RecordedWrite]) -> Result<(), String> {
    let mut table = w.open_table(WRITES).map_err(|e| e.to_string())?;
    for write in writes {
        let bytes = serde_json::to_vec(write).map_err(|e| e.to_string())?;
        table
            .insert(write.resource_version, bytes.as_slice())
            .map_err(|e| e.to_string())?;
    }
    let len = table.len().map_err(|e| e.to_string())?;
    let over = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .saturating_sub(WriteRecord::CAPACITY);
    for _ in 0..over {
        table.pop_first().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The durable record, loaded into memory. A write the record cannot read (a newer backflow's
/// format) is skipped: the record is a convenience, never a reason not to start.
pub(super) fn load(db: &Database) -> Result<Arc<WriteRecord>, String> {
    {
        let w = db.begin_write().map_err(|e| e.to_string())?;
        w.open_table(WRITES).map_err(|e| e.to_string())?;
        w.commit().map_err(|e| e.to_string())?;
    }
    let record = WriteRecord::default();
    let r = redb::ReadableDatabase::begin_read(db).map_err(|e| e.to_string())?;
    let table = r.open_table(WRITES).map_err(|e| e.to_string())?;
    for item in table.iter().map_err(|e| e.to_string())? {
        let (_, bytes) = item.map_err(|e| e.to_string())?;
        match serde_json::from_slice::<RecordedWrite>(bytes.value()) {
            Ok(write) => record.record(write),
            Err(e) => tracing::warn!(error = %e, "a recorded write could not be read; skipped"),
        }
    }
    Ok(Arc::new(record))
}

/// An object key for tests.
#[cfg(test)]
pub(super) fn configmap(name: &str) -> ObjectKey {
    ObjectKey::new(
        backflow_api::GroupResource::new("", "configmaps"),
        "default",
        name,
    )
}

/// An Event's key, for tests.
#[cfg(test)]
pub(super) fn event(name: &str) -> ObjectKey {
    ObjectKey::new(
        backflow_api::GroupResource::new("events.k8s.io", "events"),
        "default",
        name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_leases_are_not_recorded() {
        assert!(recorded(&configmap("a")));
        let event = super::event("e");
        let core_event = ObjectKey::new(
            backflow_api::GroupResource::new("", "events"),
            "default",
            "e",
        );
        let lease = ObjectKey::new(
            backflow_api::GroupResource::new("coordination.k8s.io", "leases"),
            "x",
            "l",
        );
        assert!(!recorded(&event) && !recorded(&core_event) && !recorded(&lease));
    }
}
