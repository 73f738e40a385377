//! The configuration kinds (group `backflow.dev`, version `v1alpha1`), applied with kubectl like
//! any other Kubernetes object.
//!
//! Every kind reports `status.observedGeneration` and kstatus conditions (`Ready`, `Reconciling`,
//! `Stalled`, plus the kind's own) whose reasons say what to do.

mod branch;
mod claim;
mod commit_request;
pub mod condition;
mod provider;
mod receiver;
mod target;
mod watch_rule;

pub use branch::{GitBranch, GitBranchSpec, GitBranchStatus};
pub use claim::{
    ApplierClaimReference, ArgoCDClaim, ArgoCDClaimSpec, ClaimStatus, FirstContact,
    FirstContactReport, FluxClaim, FluxClaimSpec, HandBack, InventoryEntry, InventoryStore,
    NativeClaim, NativeClaimSpec, ObjectReference, OperationStatus, PruneHeldStatus,
    claim_resource,
};
pub use commit_request::{CommitRequest, CommitRequestSpec, CommitRequestStatus};
pub use condition::{Condition, ConditionStatus};
pub use provider::{
    AllowCrossNamespace, CommitMessages, CommitPolicy, GitProvider, GitProviderSpec,
    GitProviderStatus, Person, PushPolicy, SecretReference,
};
pub use receiver::{
    DeliveryRecord, GitReceiver, GitReceiverSpec, GitReceiverStatus, RECENT_DELIVERIES,
    ReceiverType,
};
pub use target::{
    AgeEncryption, CommitAuthors, Encryption, Exclude, GitTarget, GitTargetSpec, GitTargetStatus,
    OnRefusal, Placement, Prune, PruneMode, StreamSummary,
};
pub use watch_rule::{
    ClusterTargetReference, ClusterWatchRule, ClusterWatchRuleSpec, ResourceRule, WatchRule,
    WatchRuleSpec, WatchRuleStatus,
};

use kube::CustomResourceExt;

/// The API group of every configuration kind.
pub const GROUP: &str = "backflow.dev";
/// The version every configuration kind is served at.
pub const VERSION: &str = "v1alpha1";

/// A reference to an object of the same namespace by name.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct LocalReference {
    /// The object's name.
    pub name: String,
}

/// The `CustomResourceDefinitions` of every configuration kind, generated from the Rust types.
#[must_use]
pub fn crds() -> Vec<serde_json::Value> {
    [
        GitProvider::crd(),
        GitTarget::crd(),
        WatchRule::crd(),
        ClusterWatchRule::crd(),
        CommitRequest::crd(),
        GitBranch::crd(),
        GitReceiver::crd(),
        NativeClaim::crd(),
        FluxClaim::crd(),
        ArgoCDClaim::crd(),
    ]
    .into_iter()
    .filter_map(|c| serde_json::to_value(c).ok())
    .collect()
}
