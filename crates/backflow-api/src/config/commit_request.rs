//! `CommitRequest`: "save now" — close the target's commit window with this message and report
//! the pushed commit.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LocalReference;
use super::condition::Condition;

/// A one-shot save of a `GitTarget`'s pending changes.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "CommitRequest",
    namespaced,
    status = "CommitRequestStatus",
    shortname = "cr",
    category = "backflow",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"SHA","type":"string","jsonPath":".status.sha"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CommitRequestSpec {
    /// The `GitTarget` (same namespace) whose branch is saved.
    pub target_ref: LocalReference,
    /// The commit message, used as is; default `Save requested by CommitRequest <name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The outcome of a `CommitRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitRequestStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (reasons `Committed`, `NothingToCommit`, `TargetNotFound`, `PushFailed`), `Pushed`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The branch written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The remote tip after the save: the commit that holds every change made before the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
}
