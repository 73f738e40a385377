//! A list answer, written from the stored objects' JSON wherever an object is served as stored.
//!
//! A list of a hundred thousand objects built as one `Value` would parse every object into the
//! heap at once (about 4.5 KiB for a 1 KiB `ConfigMap`); written from the stored JSON, it costs
//! the answer's bytes and nothing else.

use serde_json::{Value, json};

use crate::engine::at_version;
use crate::registry::ResourceType;
use crate::store::StoredObject;

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
    /// The list as JSON, each item's bytes copied in.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let items: usize = self
            .items
            .iter()
            .map(|i| match i {
                Served::Stored(o) => o.len() + 1,
                Served::Converted(_) => 1024,
            })
            .sum();
        let mut out = Vec::with_capacity(items + 256);
        let head =
            json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata});
        // `{"apiVersion":…,"metadata":{…}}` with its closing brace replaced by the items.
        let _ = serde_json::to_writer(&mut out, &head);
        out.pop();
        out.extend_from_slice(b",\"items\":[");
        for (n, item) in self.items.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            item.write_json(&mut out);
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// The list as one `Value` (what a Table is built from).
    #[must_use]
    pub fn into_value(self) -> Value {
        let items: Vec<Value> = self.items.into_iter().map(Served::into_value).collect();
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata, "items": items})
    }
}
