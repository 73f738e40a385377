//! `PartialObjectMetadata`: objects as their metadata alone, which clients ask for with
//! `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (client-go's
//! metadata informers, kube-rs's `list_metadata` and `metadata_watcher`, kubectl's
//! garbage-collecting paths), as kube-apiserver answers it.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::list::Served;

/// Whether the first type an `Accept` header names asks for objects as metadata only.
#[must_use]
pub fn wanted(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=PartialObjectMetadata") && first.contains("g=meta.k8s.io")
    })
}

/// One object as `PartialObjectMetadata`.
#[must_use]
pub fn object(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A list's items as a `PartialObjectMetadataList` with the list's `metadata`, as JSON text.
#[must_use]
pub fn list(metadata: &Value, items: &[Served]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":"#,
    );
    // Serializing a `Value` into memory cannot fail.
    let _ = serde_json::to_writer(&mut out, metadata);
    out.extend_from_slice(br#","items":["#);
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_object(item, &mut out);
    }
    out.extend_from_slice(b"]}");
    out
}

/// The `metadata` of an object's JSON text, borrowed as text.
#[derive(Deserialize)]
struct MetadataText<'a> {
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

/// Appends `item` as `PartialObjectMetadata`: a stored object's metadata is copied from its
/// text, never parsed into values (a metadata informer lists every object of its type).
fn write_object(item: &Served, out: &mut Vec<u8>) {
    if let Served::Stored(stored) = item
        && let Ok(MetadataText {
            metadata: Some(metadata),
        }) = serde_json::from_slice(stored.json())
    {
        out.extend_from_slice(
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
        );
        out.extend_from_slice(metadata.get().as_bytes());
        out.push(b'}');
        return;
    }
    let partial = match item {
        Served::Stored(stored) => object(&stored.value()),
        Served::Converted(value) => object(value),
    };
    let _ = serde_json::to_writer(out, &partial);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredObject;

    #[test]
    fn only_the_first_accepted_type_counts() {
        assert!(wanted(
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(wanted(
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
        ));
        assert!(!wanted(
            "application/json, application/json;as=PartialObjectMetadata;g=meta.k8s.io"
        ));
        assert!(!wanted("application/json;as=Table;g=meta.k8s.io;v=v1"));
    }

    #[test]
    fn an_object_keeps_its_metadata_and_nothing_else() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7"}, "data": {"secret": "x"}});
        assert_eq!(
            object(&cm),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "a", "resourceVersion": "7"}})
        );
        let items = [
            Served::Stored(StoredObject::new(&cm)),
            Served::Converted(cm.clone()),
        ];
        let l: Value =
            serde_json::from_slice(&list(&json!({"resourceVersion": "9"}), &items)).expect("JSON");
        assert_eq!(l["kind"], "PartialObjectMetadataList");
        assert_eq!(l["metadata"]["resourceVersion"], "9");
        for item in l["items"].as_array().expect("items") {
            assert_eq!(
                *item,
                object(&cm),
                "stored or converted, the same metadata alone"
            );
        }
        assert_eq!(l["items"].as_array().map(Vec::len), Some(2));
    }
}
