//! The appliers' Prometheus metrics (prefix `backflow_apply_`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of an ended operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OperationLabels {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `ForeignCommit`, `CatchUp`, `Refusal`, `Repair` (an operation with several counts once
    /// for each).
    pub reason: String,
    /// `succeeded` or `failed`.
    pub outcome: String,
}

/// Labels of objects handled by applies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ObjectLabels {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `applied`, `unchanged`, `pruned`, `failed`, `owned_elsewhere` (another applier owns it).
    pub result: String,
}

/// Labels naming a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ClaimLabels {
    /// `namespace/name`.
    pub claim: String,
}

type LatencyFamily = Family<ClaimLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 5 ms .. ~80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Every metric of the appliers.
#[derive(Debug, Clone)]
pub struct ApplyMetrics {
    /// Ended operations.
    pub operations: Family<OperationLabels, Counter>,
    /// From request to success.
    pub latency: LatencyFamily,
    /// Objects handled.
    pub objects: Family<ObjectLabels, Counter>,
}

impl Default for ApplyMetrics {
    fn default() -> Self {
        Self {
            operations: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            objects: Family::default(),
        }
    }
}

impl ApplyMetrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("backflow_apply");
        r.register(
            "operations",
            "Apply operations ended, by claim, reason and outcome",
            m.operations.clone(),
        );
        r.register(
            "latency_seconds",
            "From an operation's request to its success",
            m.latency.clone(),
        );
        r.register(
            "objects",
            "Objects handled by applies, by claim and result",
            m.objects.clone(),
        );
        m
    }

    /// Counts `n` objects with `result`.
    pub fn objects(&self, claim: &str, result: &str, n: usize) {
        if n > 0 {
            self.objects
                .get_or_create(&ObjectLabels {
                    claim: claim.to_string(),
                    result: result.to_string(),
                })
                .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }
}
