//! The mirror's Prometheus metrics (prefix `backflow_mirror_`), on a registry handed in.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels naming a `GitTarget`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TargetLabels {
    /// `namespace/name`.
    pub target: String,
}

/// Labels of a catch-up.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CatchUpLabels {
    /// `namespace/name` of the `GitTarget`.
    pub target: String,
    /// `versions`: the objects' resourceVersions alone answered it (each was decided at that
    /// version already); `objects`: the few that were not were read one by one and decided;
    /// `whole`: the scope was read whole and decided.
    pub read: &'static str,
}

/// Labels of a handled watch event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EventLabels {
    /// `namespace/name` of the target.
    pub target: String,
    /// `submitted` (an intent went to the branch worker), `unchanged` (sanitized content equal),
    /// `kept` (a delete kept by prune mode `Never`), `excluded` (a write by
    /// `spec.exclude.fieldManagers` alone).
    pub outcome: String,
}

/// Labels of a placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PlacementLabels {
    /// `byType`, `default` (a `spec.placement` template) or `canonical` (the default layout).
    pub source: String,
}

/// Every metric of the mirror.
#[derive(Debug, Clone, Default)]
pub struct MirrorMetrics {
    /// Watch events handled.
    pub events: Family<EventLabels, Counter>,
    /// Resyncs (initial snapshots) submitted.
    pub resyncs: Family<TargetLabels, Counter>,
    /// Documents removed by sweeps (prune mode `Always`) requested.
    pub sweeps: Family<TargetLabels, Counter>,
    /// Writes refused by the planner (cannot be placed safely).
    pub refusals: Family<TargetLabels, Counter>,
    /// Watch streams running.
    pub streams: Gauge,
    /// Intents submitted whose publication has not resolved yet (the queue depth).
    pub in_flight: Gauge,
    /// New files placed, by the rule that placed them.
    pub placements: Family<PlacementLabels, Counter>,
    /// Writes that are an applier's alone: `not_mirrored` (an apply landing inside its window)
    /// or `late` (no window open: mirrored as an edit).
    pub apply_echoes: Family<EchoLabels, Counter>,
    /// Applier writes withheld from Git because they landed over a newer live edit.
    pub apply_collisions: Family<TargetLabels, Counter>,
    /// Objects another applier owns, kept out of a coordinated folder (each counted once).
    pub ownership_conflicts: Family<TargetLabels, Counter>,
    /// Live edits laid onto a push that changed the same field: the live value was kept.
    pub merge_overrides: Family<TargetLabels, Counter>,
    /// Catch-ups: a stream listed its scope to decide what its watch had not delivered yet
    /// (before an apply's flush, before a `CommitRequest`), by how much it read.
    pub catch_ups: Family<CatchUpLabels, Counter>,
}

/// Labels of an applier's write seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EchoLabels {
    /// `not_mirrored` or `late`.
    pub outcome: String,
}

impl MirrorMetrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("backflow_mirror");
        r.register(
            "events",
            "Watch events handled, by outcome",
            m.events.clone(),
        );
        r.register(
            "resyncs",
            "Initial snapshots submitted as resyncs",
            m.resyncs.clone(),
        );
        r.register(
            "sweeps",
            "Sweeps of documents whose objects are gone (prune mode Always)",
            m.sweeps.clone(),
        );
        r.register(
            "refusals",
            "Writes refused because they cannot be placed safely",
            m.refusals.clone(),
        );
        r.register("streams", "Watch streams running", m.streams.clone());
        r.register(
            "in_flight",
            "Submitted writes not yet published",
            m.in_flight.clone(),
        );
        r.register(
            "catch_ups",
            "Catch-ups: lists of a stream's scope deciding what its watch had not delivered yet, before an apply's flush or a CommitRequest; read=versions when the resourceVersions alone answered, objects when the few undecided were read one by one, whole when the scope was read whole",
            m.catch_ups.clone(),
        );
        r.register(
            "merge_overrides",
            "Fields changed both live and in Git where the live value was kept over Git's (three-way replay)",
            m.merge_overrides.clone(),
        );
        r.register(
            "placements",
            "New files placed, by the rule that placed them",
            m.placements.clone(),
        );
        let apply = registry.sub_registry_with_prefix("backflow_apply");
        apply.register(
            "echoes",
            "Writes by the applier alone seen by the mirror: not_mirrored inside an apply window, late outside one",
            m.apply_echoes.clone(),
        );
        apply.register(
            "window_collisions",
            "Applier writes over a newer live edit, withheld from Git (a Repair applies the edit back)",
            m.apply_collisions.clone(),
        );
        apply.register(
            "ownership_conflicts",
            "Objects another applier owns, neither mirrored into nor swept from a coordinated folder",
            m.ownership_conflicts.clone(),
        );
        m
    }
}
