//! `GitBranch`: what backflow knows of one branch it writes (one per provider and branch).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LocalReference;
use super::condition::Condition;

/// A branch backflow writes; created by backflow for every branch a `GitTarget` names.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "GitBranch",
    namespaced,
    status = "GitBranchStatus",
    shortname = "gb",
    category = "backflow",
    printcolumn = r#"{"name":"Branch","type":"string","jsonPath":".spec.branch"}"#,
    printcolumn = r#"{"name":"Tip","type":"string","jsonPath":".status.tip"}"#,
    printcolumn = r#"{"name":"Pending","type":"integer","jsonPath":".status.pendingWrites"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GitBranchSpec {
    /// The `GitProvider` (same namespace).
    pub provider_ref: LocalReference,
    /// The branch name.
    pub branch: String,
}

/// The branch as backflow last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitBranchStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The remote tip after backflow's last push or fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tip: Option<String>,
    /// When backflow last pushed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_push_time: Option<String>,
    /// Writes decided but not yet on the remote.
    #[serde(default)]
    pub pending_writes: u32,
    /// When a push webhook last named this branch (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_push_notice_at: Option<String>,
}
