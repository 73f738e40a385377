//! Prometheus metrics of the publication engine, registered on a registry handed in.
//!
//! Every series is labelled with the remote (without credentials) and the branch, so many
//! workers share one set of families.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn build_duration_histogram() -> Histogram {
    // 0.1 ms .. ~1.6 s: one small write is a fraction of a millisecond, a snapshot of a
    // hundred thousand objects seconds (above the last bucket: counted in +Inf).
    Histogram::new(exponential_buckets(0.000_1, 2.0, 15))
}

fn push_duration_histogram() -> Histogram {
    // 5 ms .. ~40 s: a local push is milliseconds, a remote one over a slow link seconds.
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// The metric families, registered once per registry and shared by every worker.
#[derive(Debug, Clone)]
pub struct GitMetrics {
    commits: Family<Labels, Counter>,
    pushes: Family<Labels, Counter>,
    push_duration: HistogramFamily,
    build_duration: HistogramFamily,
    replays: Family<Labels, Counter>,
    pending_writes: Family<Labels, Gauge>,
    foreign_commits: Family<Labels, Counter>,
    remote_reads: Family<Labels, Counter>,
}

impl GitMetrics {
    /// Registers the families (prefixed `backflow_git_`) on `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            commits: Family::default(),
            pushes: Family::default(),
            push_duration: Family::new_with_constructor(
                push_duration_histogram as fn() -> Histogram,
            ),
            build_duration: Family::new_with_constructor(
                build_duration_histogram as fn() -> Histogram,
            ),
            replays: Family::default(),
            pending_writes: Family::default(),
            foreign_commits: Family::default(),
            remote_reads: Family::default(),
        };
        let reg = registry.sub_registry_with_prefix("backflow_git");
        reg.register(
            "commits",
            "Commits written by branch workers",
            m.commits.clone(),
        );
        reg.register(
            "pushes",
            "Pushes by result (accepted, rejected, error)",
            m.pushes.clone(),
        );
        reg.register(
            "push_duration_seconds",
            "Duration of push attempts",
            m.push_duration.clone(),
        );
        reg.register(
            "build_duration_seconds",
            "Duration of building commits from decided writes (planning the files, writing blobs, trees and commits)",
            m.build_duration.clone(),
        );
        reg.register(
            "replays",
            "Pending writes re-planned onto a new tip after a refused push",
            m.replays.clone(),
        );
        reg.register(
            "pending_writes",
            "Decided writes not yet contained in a successful push",
            m.pending_writes.clone(),
        );
        reg.register(
            "foreign_commits",
            "Remote tips seen that this process did not push",
            m.foreign_commits.clone(),
        );
        reg.register(
            "remote_reads",
            "Reads of the remote's tip (at start, on a refresh, a push notice, before publishing)",
            m.remote_reads.clone(),
        );
        m
    }

    /// The handles of one worker.
    #[must_use]
    pub fn for_branch(&self, remote: &str, branch: &str) -> BranchMetrics {
        BranchMetrics {
            families: Some(self.clone()),
            labels: vec![
                ("remote".to_string(), crate::repo::strip_credentials(remote)),
                ("branch".to_string(), branch.to_string()),
            ],
        }
    }
}

/// The metrics of one branch worker; a no-op when built with [`BranchMetrics::disabled`].
#[derive(Debug, Clone, Default)]
pub struct BranchMetrics {
    families: Option<GitMetrics>,
    labels: Labels,
}

impl BranchMetrics {
    /// Metrics that record nothing (tests, benchmarks).
    #[must_use]
    pub fn disabled() -> Self {
        Self::default()
    }

    fn with(&self, key: &str, value: &str) -> Labels {
        let mut l = self.labels.clone();
        l.push((key.to_string(), value.to_string()));
        l
    }

    pub(crate) fn commit(&self) {
        if let Some(f) = &self.families {
            f.commits.get_or_create(&self.labels).inc();
        }
    }

    pub(crate) fn push(&self, result: &str, seconds: f64) {
        if let Some(f) = &self.families {
            f.pushes.get_or_create(&self.with("result", result)).inc();
            f.push_duration.get_or_create(&self.labels).observe(seconds);
        }
    }

    pub(crate) fn build(&self, seconds: f64) {
        if let Some(f) = &self.families {
            f.build_duration
                .get_or_create(&self.labels)
                .observe(seconds);
        }
    }

    pub(crate) fn replay(&self) {
        if let Some(f) = &self.families {
            f.replays.get_or_create(&self.labels).inc();
        }
    }

    pub(crate) fn pending(&self, n: usize) {
        if let Some(f) = &self.families {
            f.pending_writes
                .get_or_create(&self.labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    pub(crate) fn remote_read(&self) {
        if let Some(f) = &self.families {
            f.remote_reads.get_or_create(&self.labels).inc();
        }
    }

    pub(crate) fn foreign(&self) {
        if let Some(f) = &self.families {
            f.foreign_commits.get_or_create(&self.labels).inc();
        }
    }
}
