//! Applier claims: `NativeClaim`, backflow's own applier, which applies the folders of the
//! `GitTargets` that name it (`GitTarget.spec.applierClaimRef`) when backflow decides.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

/// The applier claim a `GitTarget` names (same namespace): its folder is then coordinated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplierClaimReference {
    /// `NativeClaim`, `FluxClaim` or `ArgoCDClaim`.
    pub kind: String,
    /// The claim's name.
    pub name: String,
}

/// backflow's own applier: server-side apply of the folders of the `GitTargets` naming it,
/// asked only after a flush, so an apply never reverts an edit that is not in Git yet.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "NativeClaim",
    namespaced,
    status = "ClaimStatus",
    shortname = "nc",
    category = "backflow",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.operation.phase"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.lastAppliedCommit"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NativeClaimSpec {
    /// Ask nothing while true (reasons stay pending).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// The share (percent) of the objects the claim applied that one apply may prune without
    /// a person's confirmation, once it prunes more than five; a prune of all of them is
    /// always held. Default 25; 100 holds only a prune of everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub prune_limit_percent: Option<u8>,
    /// What the claim's first contact with its branch does with an object both sides hold
    /// with different content: `LiveWins` (default) publishes the live object over the file,
    /// `GitWins` applies the file over the live object. Either way what only one side holds is
    /// given to the other. Read when backflow starts.
    #[serde(default, skip_serializing_if = "FirstContact::is_live_wins")]
    pub first_contact: FirstContact,
    /// The service account, in the claim's namespace, whose rights the applier applies and
    /// prunes with (Kubernetes impersonation, as Flux's `spec.serviceAccountName`): an object
    /// its RBAC does not allow is refused, reported, and the others go on. Unset: backflow's
    /// own rights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Flux's kustomize-controller, held: backflow owns the `Kustomization`'s `spec.suspend` and
/// resumes it for one reconcile of the commit it decided, after a flush.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "FluxClaim",
    namespaced,
    status = "ClaimStatus",
    shortname = "fc",
    category = "backflow",
    printcolumn = r#"{"name":"Kustomization","type":"string","jsonPath":".spec.kustomizationRef.name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.operation.phase"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.lastAppliedCommit"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FluxClaimSpec {
    /// The `kustomize.toolkit.fluxcd.io/v1` Kustomization held (its namespace defaults to the
    /// claim's; another namespace is not held).
    pub kustomization_ref: ObjectReference,
    /// Ask nothing while true (reasons stay pending).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// What the claim's first contact with its branch does with an object both sides hold
    /// with different content: `LiveWins` (default) publishes the live object over the file,
    /// `GitWins` applies the file over the live object. Either way what only one side holds is
    /// given to the other. Read when backflow starts.
    #[serde(default, skip_serializing_if = "FirstContact::is_live_wins")]
    pub first_contact: FirstContact,
}

/// Argo CD's application controller, held: backflow owns the `Application`'s automated sync
/// (`spec.syncPolicy.automated.enabled: false`) and requests one sync of the commit it decided,
/// after a flush.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "ArgoCDClaim",
    namespaced,
    status = "ClaimStatus",
    shortname = "ac",
    category = "backflow",
    printcolumn = r#"{"name":"Application","type":"string","jsonPath":".spec.applicationRef.name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.operation.phase"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.lastAppliedCommit"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ArgoCDClaimSpec {
    /// The `argoproj.io/v1alpha1` Application held (its namespace defaults to the claim's;
    /// another namespace is not held).
    pub application_ref: ObjectReference,
    /// Ask nothing while true (reasons stay pending).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// What the claim's first contact with its branch does with an object both sides hold
    /// with different content: `LiveWins` (default) publishes the live object over the file,
    /// `GitWins` applies the file over the live object. Either way what only one side holds is
    /// given to the other. Read when backflow starts.
    #[serde(default, skip_serializing_if = "FirstContact::is_live_wins")]
    pub first_contact: FirstContact,
}

/// The API resource of the claim kind `kind` names (`NativeClaim`, `FluxClaim`,
/// `ArgoCDClaim`, as `spec.applierClaimRef.kind` spells them); any other name reads as
/// `NativeClaim`.
#[must_use]
pub fn claim_resource(kind: &str) -> kube::core::ApiResource {
    use kube::core::ApiResource;
    match kind {
        "FluxClaim" => ApiResource::erase::<FluxClaim>(&()),
        "ArgoCDClaim" => ApiResource::erase::<ArgoCDClaim>(&()),
        _ => ApiResource::erase::<NativeClaim>(&()),
    }
}

/// The rule for an object both sides hold with different content when a claim first meets its
/// branch (no operation recorded yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FirstContact {
    /// The live object is published over the file (capture a cluster into a repository).
    #[default]
    LiveWins,
    /// The file is applied over the live object (restore a cluster from its repository).
    GitWins,
}

impl FirstContact {
    /// Whether this is the default, `LiveWins`.
    #[must_use]
    pub fn is_live_wins(&self) -> bool {
        *self == Self::LiveWins
    }

    /// The rule's name, as the spec spells it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::LiveWins => "LiveWins",
            Self::GitWins => "GitWins",
        }
    }
}

/// What a claim's first contact with its branch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FirstContactReport {
    /// The rule followed.
    pub rule: FirstContact,
    /// When (RFC 3339).
    pub at: String,
    /// What it means, for a person.
    pub message: String,
}

/// A prune held back for a person to confirm: the commit would delete more of what the claim
/// applied than one apply may without a confirmation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PruneHeldStatus {
    /// The commit whose apply would have pruned.
    pub commit: String,
    /// How many objects it would delete.
    pub pruning: u64,
    /// Of how many the claim applied.
    pub owned: u64,
}

/// Where a large inventory is kept: `ConfigMaps` `<claim>-inventory-<n>` of the claim's
/// namespace, labelled `backflow.dev/record-of`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryStore {
    /// How many `ConfigMaps` (numbered from 0).
    pub config_maps: u32,
    /// How many entries they hold.
    pub entries: u64,
}

/// An object by name, in a namespace (the referring object's when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectReference {
    /// Its name.
    pub name: String,
    /// Its namespace; the referring object's when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// What a claim gives back when it lets go of an applier it held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandBack {
    /// Whether the applier was off on its own before backflow held it: a Kustomization's
    /// `spec.suspend`, an Application without automated sync.
    #[serde(default)]
    pub suspend: bool,
}

/// One apply, recorded before the applier is asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationStatus {
    /// Increasing per claim.
    pub id: u64,
    /// The commit applied (the tip a flush produced).
    pub commit: String,
    /// `ForeignCommit`, `CatchUp`, `Refusal`, `Repair`.
    pub reasons: Vec<String>,
    /// `Requested`, `Running`, `Succeeded`, `Failed`, `Unresolved`.
    pub phase: String,
    /// What happened, for a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When it was requested (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// An object an applier applied: `<namespace>_<name>_<group>_<kind>` (Flux's form), and its
/// API version.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct InventoryEntry {
    /// `<namespace>_<name>_<group>_<kind>` (empty namespace for cluster-scoped objects, empty
    /// group for the core group).
    pub id: String,
    /// The API version it was applied with.
    pub v: String,
}

/// What an applier claim reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `ApplierClaimReady`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The last operation (in flight or ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<OperationStatus>,
    /// The commit the last successful operation applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_commit: Option<String>,
    /// The newest commit the live side is known to have held in full: the commit of the last
    /// operation that succeeded, including one that only caught up with backflow's own commits.
    /// After a restart the mirror publishes the live side as changes of what this commit holds,
    /// so what Git gained since (a push while backflow was stopped, an apply cut short) is
    /// applied rather than written over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_step_commit: Option<String>,
    /// What the claim's first contact with its branch did, once it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_contact: Option<FirstContactReport>,
    /// Fields changed both live and in Git in its targets' folders where the live value was
    /// kept over Git's (the three-way replay), counted since backflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_overrides: Option<u64>,
    /// The last of them: the object and its fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_merge_override: Option<String>,
    /// A prune held back until the annotation `backflow.dev/confirm-prune` names its commit (or
    /// a later commit restores the files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_held: Option<PruneHeldStatus>,
    /// Changes the last applied commit made to objects a push may not change (backflow's own
    /// configuration, system namespaces): not applied, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_changes: Vec<String>,
    /// Files of the claim's folders that could not be read at the last applied commit: skipped,
    /// one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_files: Vec<String>,
    /// Secrets the last applied commit holds in plain text (applied; backflow's next write of
    /// each moves it to an encrypted file), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plaintext_secrets: Vec<String>,
    /// Where the inventory is kept when it is too large for the status (`inventory` is empty
    /// then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_store: Option<InventoryStore>,
    /// What the applier applied and may prune: only these objects are ever deleted by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryEntry>,
    /// Objects the last operation could not apply, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    /// What is given back when the claim lets go of the applier it holds (Flux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_back: Option<HandBack>,
}
