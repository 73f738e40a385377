//! The shell: reads and writes the Lease through the Kubernetes API as the election asks, and
//! runs it until the process stops.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use backflow_board::explain;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::election::{
    Election, ElectionConfig, ElectionEffect, ElectionInput, Leadership, LeaseRecord, WriteFailure,
};

/// Where the Lease is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseName {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for LeaseName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why the Lease could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The API answered with an error, or could not be reached.
    #[error("Lease {lease}: {}", explain(.source))]
    Api {
        /// The Lease.
        lease: LeaseName,
        /// What the API said.
        source: kube::Error,
    },
    /// No answer in time.
    #[error("Lease {lease}: no answer within {}s", .after.as_secs())]
    Timeout {
        /// The Lease.
        lease: LeaseName,
        /// How long it waited.
        after: Duration,
    },
}

/// How long one read or write of the Lease may take at most; never more than half the renew
/// deadline, so a leader whose API hangs notices it lost in time.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);

/// One candidate, contending for the Lease through `client`.
pub struct LeaseElector {
    api: Api<Lease>,
    lease: LeaseName,
    config: ElectionConfig,
    request_timeout: Duration,
}

impl std::fmt::Debug for LeaseElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseElector")
            .field("lease", &self.lease)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LeaseElector {
    /// A candidate for `lease` as `config` says.
    #[must_use]
    pub fn new(client: Client, lease: LeaseName, config: ElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &lease.namespace),
            lease,
            request_timeout: REQUEST_TIMEOUT.min(config.renew_deadline / 2),
            config,
        }
    }

    /// Runs the election until `stop` turns true, then releases the Lease if it holds it. The
    /// returned receiver says where this candidate stands; the task ends once released.
    #[must_use]
    pub fn spawn(
        self,
        stop: watch::Receiver<bool>,
    ) -> (watch::Receiver<Leadership>, JoinHandle<()>) {
        let (tx, rx) = watch::channel(Leadership::Following { holder: None });
        let task = tokio::spawn(self.run(stop, tx));
        (rx, task)
    }

    async fn run(self, mut stop: watch::Receiver<bool>, tx: watch::Sender<Leadership>) {
        let mut election = Election::new(self.config.clone(), Instant::now());
        let mut inputs = VecDeque::from([ElectionInput::Tick]);
        let mut wake = Instant::now();
        let mut stopping = false;
        loop {
            let input = match inputs.pop_front() {
                Some(input) => input,
                None if stopping => ElectionInput::Tick,
                None => tokio::select! {
                    () = tokio::time::sleep_until(wake.into()) => ElectionInput::Tick,
                    changed = stop.changed() => {
                        stopping = changed.is_err() || *stop.borrow();
                        if stopping { ElectionInput::Stop } else { ElectionInput::Tick }
                    }
                },
            };
            for effect in election.step(input, Instant::now(), SystemTime::now()) {
                match effect {
                    ElectionEffect::Read => {
                        inputs.push_back(ElectionInput::Read(self.read().await));
                    }
                    ElectionEffect::Create(record) => {
                        inputs.push_back(ElectionInput::Written(self.create(&record).await));
                    }
                    ElectionEffect::Update { record, version } => {
                        let written = self.update(&record, version).await;
                        inputs.push_back(ElectionInput::Written(written));
                    }
                    ElectionEffect::Became(leadership) => {
                        self.log(&leadership);
                        tx.send_replace(leadership);
                    }
                    ElectionEffect::WakeAt(at) => wake = at,
                    ElectionEffect::Stopped => {
                        tracing::info!(lease = %self.lease, identity = %self.config.identity, "left the election");
                        return;
                    }
                }
            }
        }
    }

    fn log(&self, leadership: &Leadership) {
        let (lease, identity) = (&self.lease, &self.config.identity);
        match leadership {
            Leadership::Leading => {
                tracing::info!(%lease, %identity, "leading: this replica holds the Lease");
            }
            Leadership::Following { holder } => {
                tracing::info!(%lease, %identity, holder = holder.as_deref().unwrap_or("nobody"), "standing by: another replica holds the Lease");
            }
            Leadership::Lost(why) => tracing::error!(%lease, %identity, %why, "lost the Lease"),
        }
    }

    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.request_timeout, request).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(source)) => Err(LeaseError::Api {
                lease: self.lease.clone(),
                source,
            }),
            Err(_) => Err(LeaseError::Timeout {
                lease: self.lease.clone(),
                after: self.request_timeout,
            }),
        }
    }

    async fn read(&self) -> Result<Option<(LeaseRecord, String)>, String> {
        match self.bounded(self.api.get_opt(&self.lease.name)).await {
            Ok(found) => Ok(found.map(|lease| {
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                (record_of(&lease), version)
            })),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the Lease; trying again");
                Err(e.to_string())
            }
        }
    }

    async fn create(&self, record: &LeaseRecord) -> Result<(LeaseRecord, String), WriteFailure> {
        let lease = self.lease_of(record, None);
        let created = self
            .bounded(self.api.create(&PostParams::default(), &lease))
            .await;
        self.written(created)
    }

    async fn update(
        &self,
        record: &LeaseRecord,
        version: String,
    ) -> Result<(LeaseRecord, String), WriteFailure> {
        let lease = self.lease_of(record, Some(version));
        let replaced = self
            .bounded(
                self.api
                    .replace(&self.lease.name, &PostParams::default(), &lease),
            )
            .await;
        self.written(replaced)
    }

    fn written(
        &self,
        answer: Result<Lease, LeaseError>,
    ) -> Result<(LeaseRecord, String), WriteFailure> {
        match answer {
            Ok(lease) => {
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                Ok((record_of(&lease), version))
            }
            Err(LeaseError::Api {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 409 => Err(WriteFailure::Conflict),
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the Lease; trying again");
                Err(WriteFailure::Other(e.to_string()))
            }
        }
    }

    fn lease_of(&self, record: &LeaseRecord, version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.lease.name.clone()),
                namespace: Some(self.lease.namespace.clone()),
                resource_version: version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: record.holder.clone(),
                lease_duration_seconds: Some(
                    i32::try_from(record.lease_duration.as_secs()).unwrap_or(i32::MAX),
                ),
                acquire_time: record.acquire_time.and_then(micro_time),
                renew_time: record.renew_time.and_then(micro_time),
                lease_transitions: Some(record.transitions),
                ..LeaseSpec::default()
            }),
        }
    }
}

fn micro_time(at: SystemTime) -> Option<MicroTime> {
    Timestamp::try_from(at).ok().map(MicroTime)
}

/// What a Lease says; a missing field reads as client-go reads it (no holder, zero).
fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
    LeaseRecord {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        lease_duration: Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
        acquire_time: spec.acquire_time.map(|t| SystemTime::from(t.0)),
        renew_time: spec.renew_time.map(|t| SystemTime::from(t.0)),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}
