//! The generated CRDs are ones the embedded server (and a real cluster) accepts.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use backflow_api::config::{GROUP, VERSION, crds};
use serde_json::Value;

#[test]
fn every_kind_has_a_structural_crd_in_the_group() {
    let crds = crds();
    let kinds: Vec<&str> = crds
        .iter()
        .filter_map(|c| c.pointer("/spec/names/kind").and_then(Value::as_str))
        .collect();
    assert_eq!(
        kinds,
        [
            "GitProvider",
            "GitTarget",
            "WatchRule",
            "ClusterWatchRule",
            "CommitRequest",
            "GitBranch",
            "GitReceiver",
            "NativeClaim",
            "FluxClaim",
            "ArgoCDClaim"
        ]
    );
    for crd in &crds {
        assert_eq!(
            crd.pointer("/spec/group").and_then(Value::as_str),
            Some(GROUP)
        );
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], VERSION);
        assert_eq!(version["storage"], true);
        assert!(
            version.pointer("/subresources/status").is_some(),
            "{} lacks the status subresource",
            crd["metadata"]["name"]
        );
        let schema = version.pointer("/schema/openAPIV3Schema").expect("schema");
        assert_eq!(schema["type"], "object");
        assert!(schema.pointer("/properties/spec/properties").is_some());
    }
}
