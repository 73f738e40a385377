//! Keeps the endpoint's table in step with the `GitReceiver` objects and their Secrets, and
//! reports each receiver's path and readiness in its status.
//!
//! Level-triggered: any change to a `GitReceiver` or a Secret (or a 30 s tick) recomputes the
//! whole table, so a rotated token moves the path at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::config::condition::{NotReady, cond, set_condition, summary};
use backflow_api::config::{ConditionStatus, DeliveryRecord, GitReceiver, GitReceiverStatus};
use backflow_board::watch_changes;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::deliveries::{DeliveryLog, merged};
use super::endpoint::{ReceiverEntry, ReceiverTable};
use super::path::webhook_path;

/// The key of the webhook secret in a receiver's Secret (Flux's key).
pub const TOKEN_KEY: &str = "token";

/// Why a receiver serves no path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenProblem {
    /// The Secret does not exist.
    #[error("Secret {0} not found; create it with the webhook secret under the key `token`")]
    SecretMissing(String),
    /// The Secret has no `token` key, or it is empty.
    #[error("Secret {0} has no non-empty key `token`; put the webhook secret there")]
    KeyMissing(String),
    /// The Secret could not be read.
    #[error("cannot read Secret {secret}: {message}")]
    Unreadable {
        /// `namespace/name`.
        secret: String,
        /// The API's answer.
        message: String,
    },
}

/// The receiver's token as its Secret holds it.
async fn token(client: &Client, receiver: &GitReceiver) -> Result<Vec<u8>, TokenProblem> {
    let ns = receiver.namespace().unwrap_or_default();
    let name = &receiver.spec.secret_ref.name;
    let shown = format!("{ns}/{name}");
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get_opt(name)
        .await
        .map_err(|e| TokenProblem::Unreadable {
            secret: shown.clone(),
            message: e.to_string(),
        })?
        .ok_or_else(|| TokenProblem::SecretMissing(shown.clone()))?;
    let value = secret
        .data
        .and_then(|mut d| d.remove(TOKEN_KEY))
        .map(|b| b.0)
        .or_else(|| {
            secret
                .string_data
                .and_then(|mut d| d.remove(TOKEN_KEY))
                .map(String::into_bytes)
        })
        .filter(|t| !t.is_empty());
    value.ok_or(TokenProblem::KeyMissing(shown))
}

/// The status of a receiver: its path when it has a token, and its newest deliveries (`new`
/// ones, oldest first, added to those its status kept).
fn status(
    receiver: &GitReceiver,
    outcome: &Result<String, TokenProblem>,
    now: &str,
    new: &[DeliveryRecord],
) -> GitReceiverStatus {
    let kept = receiver
        .status
        .as_ref()
        .map(|s| s.recent_deliveries.as_slice())
        .unwrap_or_default();
    let recent_deliveries = merged(kept, new);
    let generation = receiver.metadata.generation;
    let mut conditions = receiver
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    match outcome {
        Ok(_) if receiver.spec.suspend => {
            set_condition(
                &mut conditions,
                cond(
                    "Ready",
                    ConditionStatus::False,
                    "Suspended",
                    "spec.suspend is true: deliveries are answered 503",
                    now,
                    generation,
                ),
            );
            conditions.retain(|c| c.type_ != "Reconciling" && c.type_ != "Stalled");
        }
        Ok(_) => summary(&mut conditions, Ok(()), now, generation),
        Err(problem) => summary(
            &mut conditions,
            Err(NotReady::stalled("TokenNotFound", problem.to_string())),
            now,
            generation,
        ),
    }
    GitReceiverStatus {
        observed_generation: generation,
        conditions,
        webhook_path: outcome.as_ref().ok().cloned(),
        recent_deliveries,
    }
}

/// The control loop of the receivers.
pub struct ReceiverController {
    client: Client,
    table: Arc<ReceiverTable>,
    clock: Arc<dyn Clock>,
    /// The last status written per receiver, without times, so an unchanged one is not rewritten.
    written: BTreeMap<String, serde_json::Value>,
    /// Deliveries to write into the receivers' status.
    deliveries: Arc<DeliveryLog>,
}

impl ReceiverController {
    /// A controller filling `table` from `client`'s API.
    pub fn new(client: Client, table: Arc<ReceiverTable>, clock: Arc<dyn Clock>) -> Self {
        let deliveries = Arc::new(DeliveryLog::new(clock.clone()));
        Self {
            client,
            table,
            clock,
            written: BTreeMap::new(),
            deliveries,
        }
    }

    /// Keeps the deliveries `deliveries` is told of in the receivers' status.
    #[must_use]
    pub fn with_deliveries(mut self, deliveries: Arc<DeliveryLog>) -> Self {
        self.deliveries = deliveries;
        self
    }

    /// Runs until `stop` flips to true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let (tx, mut rx) = mpsc::channel::<()>(16);
        let triggers = [
            tokio::spawn(watch_changes(
                Api::<GitReceiver>::all(self.client.clone()),
                tx.clone(),
            )),
            // Metadata only: Secrets' contents are read for the receivers that name them.
            tokio::spawn(watch_changes(
                Api::<PartialObjectMeta<Secret>>::all(self.client.clone()),
                tx,
            )),
        ];
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                Some(()) = rx.recv() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    while rx.try_recv().is_ok() {}
                }
                () = self.deliveries.news.notified() => {
                    // Deliveries come in bursts (a push to several branches): one write.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                _ = tick.tick() => {}
            }
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "listing GitReceivers failed; retrying on the next change or tick");
            }
        }
        for t in triggers {
            t.abort();
        }
    }

    /// Recomputes the table and writes every receiver's status.
    pub async fn reconcile(&mut self) -> Result<(), kube::Error> {
        let receivers = Api::<GitReceiver>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let now = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        let mut new = self.deliveries.take();
        let mut table = BTreeMap::new();
        let mut statuses = Vec::new();
        for r in &receivers {
            let ns = r.namespace().unwrap_or_default();
            let name = r.name_any();
            let outcome = token(&self.client, r).await.map(|token| {
                let path = webhook_path(&token, &name, &ns);
                table.insert(
                    path.clone(),
                    ReceiverEntry {
                        namespace: ns.clone(),
                        name: name.clone(),
                        kind: r.spec.type_,
                        token: token.into(),
                        suspended: r.spec.suspend,
                    },
                );
                path
            });
            if let Err(problem) = &outcome {
                tracing::debug!(receiver = %format!("{ns}/{name}"), %problem, "GitReceiver serves no path");
            }
            let delivered = new.remove(&format!("{ns}/{name}")).unwrap_or_default();
            statuses.push((ns, name, status(r, &outcome, &now, &delivered), delivered));
        }
        self.table.replace(table);
        for (ns, name, st, delivered) in statuses {
            if !self.write_status(&ns, &name, &st).await && !delivered.is_empty() {
                self.deliveries.put_back(&format!("{ns}/{name}"), delivered);
            }
        }
        Ok(())
    }

    /// Writes `st` unless it is what was written last; whether it is there now.
    async fn write_status(&mut self, ns: &str, name: &str, st: &GitReceiverStatus) -> bool {
        let id = format!("{ns}/{name}");
        let mut comparable = st.clone();
        for c in &mut comparable.conditions {
            c.last_transition_time.clear();
        }
        let comparable = serde_json::to_value(&comparable).unwrap_or_default();
        if self.written.get(&id) == Some(&comparable) {
            return true;
        }
        let mut value = serde_json::to_value(st).unwrap_or_default();
        if st.webhook_path.is_none() {
            // A merge patch keeps a field it does not name: clear the old path explicitly.
            value["webhookPath"] = serde_json::Value::Null;
        }
        let api = Api::<GitReceiver>::namespaced(self.client.clone(), ns);
        match api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": value})),
            )
            .await
        {
            Ok(_) => {
                self.written.insert(id, comparable);
                true
            }
            Err(e) => {
                tracing::debug!(receiver = %id, error = %e, "GitReceiver status update failed; retrying later");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use backflow_api::config::{GitReceiverSpec, ReceiverType, SecretReference};

    use super::*;

    fn receiver(suspend: bool) -> GitReceiver {
        let mut r = GitReceiver::new(
            "hook",
            GitReceiverSpec {
                type_: ReceiverType::GitHub,
                secret_ref: SecretReference { name: "s".into() },
                suspend,
            },
        );
        r.metadata.generation = Some(3);
        r
    }

    fn ready(st: &GitReceiverStatus) -> (ConditionStatus, String) {
        let c = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        (c.status, c.reason.clone())
    }

    #[test]
    fn the_path_is_published_only_with_a_token_and_suspension_is_not_readiness() {
        let ok = status(&receiver(false), &Ok("/git-push/ab".into()), "t", &[]);
        assert_eq!(ok.webhook_path.as_deref(), Some("/git-push/ab"));
        assert_eq!(ready(&ok), (ConditionStatus::True, "Succeeded".into()));
        assert_eq!(ok.observed_generation, Some(3));
        let missing = status(
            &receiver(false),
            &Err(TokenProblem::KeyMissing("ns/s".into())),
            "t",
            &[],
        );
        assert_eq!(missing.webhook_path, None);
        assert_eq!(
            ready(&missing),
            (ConditionStatus::False, "TokenNotFound".into())
        );
        assert!(missing.conditions.iter().any(|c| c.type_ == "Stalled"));
        let suspended = status(&receiver(true), &Ok("/git-push/ab".into()), "t", &[]);
        assert_eq!(suspended.webhook_path.as_deref(), Some("/git-push/ab"));
        assert_eq!(
            ready(&suspended),
            (ConditionStatus::False, "Suspended".into())
        );
    }
}
