//! `WatchRule` and `ClusterWatchRule`: which live objects a `GitTarget` mirrors.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LocalReference;
use super::condition::Condition;

/// One rule: the resources it selects (rules of a `WatchRule` are `ORed`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    /// API groups (`""` for core, `*` for all); omitted = every served group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Versions; omitted = each group's preferred version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
    /// Plural resources, or `*`; subresources (`a/b`) are not allowed.
    pub resources: Vec<String>,
    /// For a `WatchRule`: the namespace to watch (default: the rule's own; `*`: every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_namespace: Option<String>,
}

/// Namespaced resources mirrored into a `GitTarget` of the same namespace.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "WatchRule",
    namespaced,
    status = "WatchRuleStatus",
    shortname = "wr",
    category = "backflow",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WatchRuleSpec {
    /// The `GitTarget` (same namespace).
    pub target_ref: LocalReference,
    /// The rules, `ORed`.
    pub rules: Vec<ResourceRule>,
}

/// What backflow observed of a `WatchRule` or `ClusterWatchRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchRuleStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `ResourcesResolved` (reasons `Resolved`, `UnresolvedResources`), `GitTargetReady`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The resources the rules resolved to (`group/version/resource`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<String>,
}

/// A `GitTarget` in any namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterTargetReference {
    /// The `GitTarget`'s name.
    pub name: String,
    /// The `GitTarget`'s namespace.
    pub namespace: String,
}

/// Cluster-scoped resources mirrored into a `GitTarget`.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "ClusterWatchRule",
    status = "WatchRuleStatus",
    shortname = "cwr",
    category = "backflow",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWatchRuleSpec {
    /// The `GitTarget`.
    pub target_ref: ClusterTargetReference,
    /// The rules, `ORed` (`sourceNamespace` is ignored).
    pub rules: Vec<ResourceRule>,
}
