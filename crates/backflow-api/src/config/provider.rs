//! `GitProvider`: a Git repository, its credentials and its commit policy.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

/// A Secret in the same namespace holding credentials: `username`/`password` (HTTP basic or a
/// token as password), or `identity` (SSH private key) with `known_hosts`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretReference {
    /// The Secret's name.
    pub name: String,
}

/// Commit window and push pacing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushPolicy {
    /// Rolling silence that closes a commit window (`1s` default; `0s` = one commit per change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_window: Option<String>,
    /// The longest a window stays open under a steady stream of changes (`10s` default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_window_age: Option<String>,
    /// Minimum time between pushes; commits made meanwhile go out together (`0s` default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<String>,
}

/// A name and email for commits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Person {
    /// Display name.
    pub name: String,
    /// Email address.
    pub email: String,
}

/// Commit message templates. Placeholders: `{verb}` (`update` or `delete`), `{object}`,
/// `{target}`, `{count}`, `{targets}` and `{objects}` (one line per object).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitMessages {
    /// A commit holding one change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_template: Option<String>,
    /// A commit holding several changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_template: Option<String>,
    /// A resync (initial snapshot, sweep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_template: Option<String>,
}

/// Who commits and how messages read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommitPolicy {
    /// Committer of backflow's commits, and their author when no user is known (a resync, an
    /// anonymous write); default `backflow <backflow@localhost>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committer: Option<Person>,
    /// The email of a commit's author, when the author is the user who made the change:
    /// `{user}` stands for the user name (characters an email cannot hold become `-`).
    /// Default `{user}@users.backflow.local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_email: Option<String>,
    /// Message templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<CommitMessages>,
}

/// A Git repository backflow writes to.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "GitProvider",
    namespaced,
    status = "GitProviderStatus",
    shortname = "gp",
    category = "backflow",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GitProviderSpec {
    /// The repository URL: `file://…`, `https://…` or `ssh://…`.
    pub url: String,
    /// Credentials, if the remote needs them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    /// Branch patterns (globs) `GitTargets` may write; default `["*"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_branches: Vec<String>,
    /// Commit window and push pacing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushPolicy>,
    /// Committer and messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitPolicy>,
    /// How often the branch workers of this repository read the remote's tip when no push
    /// webhook told them it moved (e.g. `10m`); default the `--git-refresh-interval` flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval: Option<String>,
    /// What the provider's owner delegates beyond its namespace (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_cross_namespace: Option<AllowCrossNamespace>,
}

/// Delegations beyond the provider's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AllowCrossNamespace {
    /// An applier claim named by this provider's `GitTargets` may hold a Flux `Kustomization` or
    /// an Argo CD Application in another namespace (such as `flux-system` or `argocd`) whose
    /// source is this provider's repository. Nothing proves that namespace is the claim's: the
    /// provider's owner vouches for it.
    #[serde(default)]
    pub appliers: bool,
}

/// What backflow observed of a `GitProvider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitProviderStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (reasons `Succeeded`, `SecretNotFound`, `InvalidConfig`), `Reconciling`, `Stalled`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
