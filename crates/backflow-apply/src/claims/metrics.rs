//! The appliers' Prometheus metrics (prefix `backflow_apply_`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::native::ApplyPhases;

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

/// Labels of one phase of an apply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PhaseLabels {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// `read`, `declare`, `live_reads`, `writes`, `prune` ([`ApplyPhases`]).
    pub phase: String,
}

type LatencyFamily = Family<ClaimLabels, Histogram, fn() -> Histogram>;
type PhaseFamily = Family<PhaseLabels, Histogram, fn() -> Histogram>;

fn phase_histogram() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

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
    /// Where each apply's time went, phase by phase.
    pub phases: PhaseFamily,
}

impl Default for ApplyMetrics {
    fn default() -> Self {
        Self {
            operations: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            objects: Family::default(),
            phases: Family::new_with_constructor(phase_histogram as fn() -> Histogram),
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
        r.register(
            "phase_seconds",
            "Time each apply of backflow's own applier spent reading Git, declaring, reading \
             live objects, writing and pruning",
            m.phases.clone(),
        );
        m
    }

    /// Observes where one apply's time went (an applier that does not measure its phases,
    /// Flux's or Argo CD's, reports none).
    pub fn phases(&self, claim: &str, phases: &ApplyPhases) {
        if *phases == ApplyPhases::default() {
            return;
        }
        for (phase, took) in phases.labelled() {
            self.phases
                .get_or_create(&PhaseLabels {
                    claim: claim.to_string(),
                    phase: phase.to_string(),
                })
                .observe(took.as_secs_f64());
        }
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
