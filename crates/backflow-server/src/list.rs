//! A list answer, written from the stored objects' JSON wherever an object is served as stored.
//!
//! A list of a hundred thousand objects built as one `Value` would parse every object into the
//! heap at once (about 4.5 KiB for a 1 KiB `ConfigMap`); written from the stored JSON, it costs
//! the answer's bytes and nothing else.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::engine::at_version;
use crate::registry::ResourceType;
use crate::store::StoredObject;

/// About how many bytes each chunk of a list answer holds.
const CHUNK_BYTES: usize = 64 * 1024;

/// One item of a list (or one watch event's object).
#[derive(Debug, Clone)]
pub enum Served {
    /// Served as stored: its JSON is copied, never parsed.
    Stored(StoredObject),
    /// Relabelled or converted for the requested version.
    Converted(Value),
}

impl Served {
    /// `obj` as a client of `t` reads it: as stored when it already carries `t`'s apiVersion
    /// and kind and `t` converts nothing; parsed and brought to `t` otherwise.
    #[must_use]
    pub fn as_type(obj: &StoredObject, t: &ResourceType) -> Self {
        if !crate::convert::converts(t) && obj.is_typed(&t.api_version(), &t.kind) {
            Self::Stored(obj.clone())
        } else {
            Self::Converted(at_version(&obj.value(), t))
        }
    }

    /// Appends its JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Self::Stored(o) => out.extend_from_slice(o.json()),
            // Serializing a `Value` into memory cannot fail.
            Self::Converted(v) => {
                let _ = serde_json::to_writer(out, v);
            }
        }
    }

    /// The object, parsed.
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Stored(o) => o.value(),
            Self::Converted(v) => v,
        }
    }
}

/// A list of one type: `apiVersion`, `kind`, `metadata` and the items.
#[derive(Debug, Clone)]
pub struct ObjectList {
    /// The list's apiVersion (the type's).
    pub api_version: String,
    /// The list kind (`ConfigMapList`).
    pub kind: String,
    /// `resourceVersion`, and `continue` / `remainingItemCount` for a page.
    pub metadata: Value,
    /// The objects, in order.
    pub items: Vec<Served>,
}

impl ObjectList {
    /// The list as JSON in chunks of about 64 KiB, each written when the client reads it: a
    /// list of a million objects never exists whole in memory.
    #[must_use]
    pub fn into_json_chunks(self) -> JsonChunks {
        let head =
            json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata});
        // `{"apiVersion":…,"metadata":{…}}` with its closing brace replaced by the items.
        let mut start = Vec::with_capacity(CHUNK_BYTES);
        let _ = serde_json::to_writer(&mut start, &head);
        start.pop();
        start.extend_from_slice(b",\"items\":[");
        JsonChunks {
            start: Some(start),
            items: self.items.into_iter(),
            written: 0,
            done: false,
        }
    }

    /// The list as one `Value` (what a Table is built from).
    #[must_use]
    pub fn into_value(self) -> Value {
        let items: Vec<Value> = self.items.into_iter().map(Served::into_value).collect();
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata, "items": items})
    }
}
/// The chunks of a list answer (see [`ObjectList::into_json_chunks`]).
#[derive(Debug)]
pub struct JsonChunks {
    /// The list's head, until the first chunk is written.
    start: Option<Vec<u8>>,
    items: std::vec::IntoIter<Served>,
    /// Items written so far.
    written: usize,
    done: bool,
}

impl Iterator for JsonChunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = self
            .start
            .take()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES));
        while out.len() < CHUNK_BYTES {
            let Some(item) = self.items.next() else {
                out.extend_from_slice(b"]}");
                self.done = true;
                break;
            };
            if self.written > 0 {
                out.push(b',');
            }
            item.write_json(&mut out);
            self.written += 1;
        }
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_in_chunks_is_the_list() {
        let data = "x".repeat(1000);
        let objects: Vec<Value> = (0..300)
            .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}, "data": {"k": data}}))
            .collect();
        for n in [0, 1, 300] {
            let list = ObjectList {
                api_version: "v1".into(),
                kind: "ConfigMapList".into(),
                metadata: json!({"resourceVersion": "7"}),
                items: objects[..n]
                    .iter()
                    .enumerate()
                    .map(|(i, o)| {
                        // Both kinds of item, in turn.
                        if i % 2 == 0 {
                            Served::Stored(StoredObject::new(o))
                        } else {
                            Served::Converted(o.clone())
                        }
                    })
                    .collect(),
            };
            let chunks: Vec<Bytes> = list.clone().into_json_chunks().collect();
            let (last, full) = chunks.split_last().expect("at least one chunk");
            assert!(
                full.iter()
                    .all(|c| (CHUNK_BYTES..CHUNK_BYTES + 2048).contains(&c.len())),
                "chunks near their size"
            );
            assert!(last.len() < CHUNK_BYTES + 2048);
            assert_eq!(chunks.len() > 1, n == 300, "{n} objects");
            let whole: Vec<u8> = chunks.concat();
            let parsed: Value = serde_json::from_slice(&whole).expect("one JSON document");
            assert_eq!(parsed, list.into_value());
        }
    }
}
