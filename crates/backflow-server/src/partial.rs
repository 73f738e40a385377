//! `PartialObjectMetadata`: objects as their metadata alone, which clients ask for with
//! `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (client-go's
//! metadata informers, kube-rs's `list_metadata` and `metadata_watcher`, kubectl's
//! garbage-collecting paths), as kube-apiserver answers it.

use serde_json::{Value, json};

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

/// A list's items as a `PartialObjectMetadataList` with the list's `metadata`.
#[must_use]
pub fn list(metadata: Value, items: impl IntoIterator<Item = Value>) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "items": items.into_iter().map(|o| object(&o)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let l = list(json!({"resourceVersion": "9"}), [cm]);
        assert_eq!(l["kind"], "PartialObjectMetadataList");
        assert_eq!(l["items"][0]["metadata"]["name"], "a");
        assert!(l["items"][0].get("data").is_none());
    }
}
