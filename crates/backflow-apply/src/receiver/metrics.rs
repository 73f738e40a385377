//! The receiver's Prometheus metrics (prefix `backflow_receiver_`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// How a delivery ended. Every delivery is counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Verified, and woke at least one branch worker.
    Accepted,
    /// Verified, but every branch it names was already told about this push (a redelivery).
    Duplicate,
    /// Verified, but no branch worker writes the repository and branch it names.
    NoMatch,
    /// Verified, and not a branch push (ping, tag, another event).
    Ignored,
    /// The signature or token did not verify (answered 404).
    BadSignature,
    /// No `GitReceiver` has the path (answered 404).
    UnknownPath,
    /// The body is over the cap (answered 413).
    TooLarge,
    /// Verified, but the body is not a push backflow can read (answered 400).
    Malformed,
    /// The receiver is suspended, or the queue is full (answered 503).
    Unavailable,
    /// Not a POST (answered 405).
    BadMethod,
}

impl Outcome {
    /// The `outcome` label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::NoMatch => "no_match",
            Self::Ignored => "ignored",
            Self::BadSignature => "bad_signature",
            Self::UnknownPath => "unknown_path",
            Self::TooLarge => "too_large",
            Self::Malformed => "malformed",
            Self::Unavailable => "unavailable",
            Self::BadMethod => "bad_method",
        }
    }
}

/// Labels of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DeliveryLabels {
    /// The receiver's `spec.type`, or `unknown` when the path matched none.
    pub r#type: String,
    /// How it ended.
    pub outcome: String,
}

/// Every metric of the receiver.
#[derive(Debug, Clone, Default)]
pub struct ReceiverMetrics {
    /// Deliveries, by receiver type and outcome.
    pub deliveries: Family<DeliveryLabels, Counter>,
}

impl ReceiverMetrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("backflow_receiver");
        r.register(
            "deliveries",
            "Push webhook deliveries, by receiver type and outcome",
            m.deliveries.clone(),
        );
        m
    }

    /// How many deliveries to receivers of `type_` ended with `outcome` so far.
    #[must_use]
    pub fn total(&self, type_: &str, outcome: Outcome) -> u64 {
        self.deliveries
            .get_or_create(&DeliveryLabels {
                r#type: type_.to_string(),
                outcome: outcome.as_str().to_string(),
            })
            .get()
    }

    /// Counts one delivery.
    pub fn count(&self, type_: &str, outcome: Outcome) {
        self.deliveries
            .get_or_create(&DeliveryLabels {
                r#type: type_.to_string(),
                outcome: outcome.as_str().to_string(),
            })
            .inc();
    }
}
