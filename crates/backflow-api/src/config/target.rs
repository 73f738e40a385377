//! `GitTarget`: one folder of one branch that backflow keeps equal to the live objects.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::LocalReference;
use super::condition::Condition;
pub use crate::authors::CommitAuthors;

/// What happens to documents whose objects are gone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PruneMode {
    /// Never remove documents (an archive or audit trail).
    Never,
    /// Remove a document when its object's delete is seen (the default). Deletes made while
    /// backflow was not watching are kept.
    #[default]
    OnEvent,
    /// Also remove, after each initial snapshot, documents of the watched scope whose objects no
    /// longer exist.
    Always,
}

/// Deletion policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Prune {
    /// `Never`, `OnEvent` (default) or `Always`.
    #[serde(default)]
    pub mode: PruneMode,
}

/// Where new objects go (objects that already have a document stay where they are).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Per type (`v1/configmaps`, `apps/v1/deployments`): a path template with `{name}`,
    /// `{namespace}`, `{namespaceOrCluster}`, `{resource}`, `{group}`, `{kind}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_type: BTreeMap<String, String>,
    /// The template for every other type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// How sensitive objects (Secrets) are encrypted before they reach Git.
///
/// Without it, a `GitTarget` never mirrors Secrets: there is no plaintext fallback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Encryption {
    /// SOPS files encrypted with age: only `data` and `stringData` are encrypted, metadata stays
    /// readable, and `sops -d` with one of the recipients' identities decrypts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age: Option<AgeEncryption>,
    /// More types whose objects are written only encrypted, like Secrets: plural resources,
    /// with their group for grouped types (`credentials.example.com`, or `configmaps` for core).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_resources: Vec<String>,
}

/// The age recipients Secrets are encrypted to. Every file is encrypted to the union of
/// `recipients` and the recipients of the identities in `secretRef`; at least one is needed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgeEncryption {
    /// Public age recipients (`age1…`), e.g. one per person or machine that may decrypt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<String>,
    /// A Secret in the `GitTarget`'s namespace whose keys ending in `.agekey` each hold age
    /// identities (`AGE-SECRET-KEY-1…`, one per line, as `age-keygen` writes them). Their
    /// recipients are added to `recipients`, and backflow uses the identities to keep the data
    /// key of unchanged files across restarts. The identities never reach Git or logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalReference>,
    /// When `secretRef` names a Secret that does not exist, create it with a new identity under
    /// the key `identity.agekey`. The private key stays in that Secret only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generate_when_missing: bool,
}

/// A folder of a branch that mirrors live objects.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "GitTarget",
    namespaced,
    status = "GitTargetStatus",
    shortname = "gt",
    category = "backflow",
    printcolumn = r#"{"name":"Branch","type":"string","jsonPath":".spec.branch"}"#,
    printcolumn = r#"{"name":"Path","type":"string","jsonPath":".spec.path"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Last Commit","type":"string","jsonPath":".status.lastCommit"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GitTargetSpec {
    /// The `GitProvider` (same namespace) whose repository holds the folder.
    pub provider_ref: LocalReference,
    /// The branch; must match the provider's `allowedBranches`.
    pub branch: String,
    /// The folder inside the repository (`.` for the root); no leading or trailing `/`.
    pub path: String,
    /// Deletion policy.
    #[serde(default)]
    pub prune: Prune,
    /// Where new objects go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// How Secrets are encrypted; without it, Secrets are not mirrored into this folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
    /// The applier claim (same namespace) that applies this folder to the live side when
    /// backflow asks: the folder is then coordinated (Git → live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applier_claim_ref: Option<super::ApplierClaimReference>,
    /// What to do with a live edit the folder refuses (it cannot be placed safely): `Ignore`
    /// (default) reports it; `Reapply` also asks the folder's applier to apply Git over it.
    #[serde(default, skip_serializing_if = "OnRefusal::is_ignore")]
    pub on_refusal: OnRefusal,
    /// Changes that are not mirrored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Exclude>,
    /// How commits name the users who changed the folder's objects: `PerAuthor` (default)
    /// gives each user's changes of a commit window a commit of its own, authored by them;
    /// `CoAuthored` keeps one commit per window, authored by the first user, with a
    /// `Co-authored-by:` trailer for each other.
    #[serde(default, skip_serializing_if = "CommitAuthors::is_per_author")]
    pub commit_authors: CommitAuthors,
}

/// What to do with a refused live edit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnRefusal {
    /// Report the refusal (`Ready=False`, reason `WriteRefused`); recovery is left to a person
    /// or a later apply.
    #[default]
    Ignore,
    /// Also ask the folder's applier to apply the tip after a flush, which reverts the refused
    /// edit on the live side (only an edit to a document the folder holds, never a delete).
    /// Needs `spec.applierClaimRef`. The refusal clears after a resync of its scope.
    Reapply,
}

impl OnRefusal {
    #[allow(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's skip_serializing_if hands a reference"
    )]
    fn is_ignore(&self) -> bool {
        *self == Self::Ignore
    }
}

/// Changes a folder does not mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Exclude {
    /// Field managers whose changes are not mirrored: a write whose newest field managers
    /// (status aside) are all in this list. A write another manager shares is mirrored whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_managers: Vec<String>,
    /// Users whose changes are not mirrored (writes and deletes they make through backflow's
    /// API server, which knows the user; a real cluster's watch does not say who wrote, so
    /// there this list matches nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
}

/// Watch streams of a target, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StreamSummary {
    /// Streams planned.
    pub total: u32,
    /// Streams whose initial snapshot is published and that follow live changes.
    pub ready: u32,
    /// Streams still replaying their initial snapshot.
    pub replaying: u32,
    /// Streams that cannot watch (and why is in the conditions).
    pub blocked: u32,
}

/// What backflow observed of a `GitTarget`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitTargetStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`, `Validated`, `StreamsRunning`, `GitPathAccepted`,
    /// `EncryptionConfigured`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The last commit pushed that holds a change of this target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_commit: Option<String>,
    /// When that push happened (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_push_time: Option<String>,
    /// Watch streams, counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamSummary>,
    /// Fields changed both live and in Git where the live value was kept over Git's (the
    /// three-way replay), counted since backflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_overrides: Option<u64>,
    /// The last of them: the object and its fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_merge_override: Option<String>,
}
