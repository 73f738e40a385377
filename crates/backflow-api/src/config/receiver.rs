//! `GitReceiver`: a push-webhook endpoint. A Git host's delivery to it wakes every branch worker
//! whose repository and branch the delivery names, so a foreign push is seen within a second.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SecretReference;
use super::condition::Condition;

/// How a Git host signs its deliveries, and so how they are verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReceiverType {
    /// `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>` (SHA-1 alone is refused).
    #[default]
    #[serde(rename = "github")]
    GitHub,
    /// `X-Gitlab-Token` equal to the token.
    #[serde(rename = "gitlab")]
    GitLab,
    /// Gitea, Forgejo and Gogs: `X-Gitea-Signature` (or `X-Forgejo-Signature`,
    /// `X-Gogs-Signature`), bare hex HMAC-SHA256 of the body.
    #[serde(rename = "gitea")]
    Gitea,
    /// A relay of your own: `X-Signature: sha256=<hex>` or `sha512=<hex>` HMAC of the body.
    #[serde(rename = "generic-hmac")]
    GenericHmac,
}

impl ReceiverType {
    /// The name used in the spec and in metrics.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitHub => "github",
            Self::GitLab => "gitlab",
            Self::Gitea => "gitea",
            Self::GenericHmac => "generic-hmac",
        }
    }
}

/// A push-webhook endpoint for one webhook secret.
#[derive(
    CustomResource, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema,
)]
#[kube(
    group = "backflow.dev",
    version = "v1alpha1",
    kind = "GitReceiver",
    namespaced,
    status = "GitReceiverStatus",
    shortname = "grcv",
    category = "backflow",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Path","type":"string","jsonPath":".status.webhookPath","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GitReceiverSpec {
    /// How deliveries are signed: `github`, `gitlab`, `gitea` or `generic-hmac`.
    #[serde(rename = "type")]
    pub type_: ReceiverType,
    /// A Secret in the same namespace whose key `token` holds the webhook secret (the key a Flux
    /// `Receiver` Secret uses). The webhook path is derived from it: rotating it moves the path.
    pub secret_ref: SecretReference,
    /// Refuse deliveries (503) without forgetting the path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
}

/// What backflow serves for a `GitReceiver`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitReceiverStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (reasons `Succeeded`, `TokenNotFound`, `Suspended`), `Reconciling`, `Stalled`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `/git-push/` + hex SHA-256 of token ‖ name ‖ namespace: register
    /// `https://<your route><webhookPath>` at the Git host. Absent while the token is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// What became of the newest deliveries (at most [`RECENT_DELIVERIES`]), newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_deliveries: Vec<DeliveryRecord>,
}

/// How many deliveries a `GitReceiver`'s status keeps.
pub const RECENT_DELIVERIES: usize = 10;

/// One delivery to a `GitReceiver`, as its status keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    /// When it came (RFC 3339).
    pub at: String,
    /// What became of it: `accepted`, `duplicate`, `no matching branch`, `ignored`, `ping`,
    /// `refused`, `dropped`.
    pub outcome: String,
    /// What it named, or why it was refused.
    pub detail: String,
}
