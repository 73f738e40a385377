//! The branch workers: one per (repository URL, branch), started when a `GitTarget` first needs it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::config::GitProvider;
use backflow_git::GitMetrics;
use backflow_git::{
    BranchNotice, BranchWorker, Identity, MessageTemplates, RemoteSpec, WorkerConfig, WorkerHandle,
};
use tokio::sync::{broadcast, mpsc};

use crate::credentials::Access;
use crate::error::MirrorError;
use crate::metrics::TargetLabels;
use backflow_api::ObjectKey;
use backflow_board::{Board, BranchKey, RunningWorkers};
use backflow_manifest::{EncryptionMap, FolderOwner, KindMap, PlacementMap, YamlPlanner};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// The worker settings a `GitProvider` asks for; `refresh_interval` is the default of
/// `spec.refreshInterval`.
pub fn worker_config(
    provider: &GitProvider,
    branch: &str,
    seed: u64,
    refresh_interval: Duration,
) -> Result<WorkerConfig, MirrorError> {
    let mut cfg = WorkerConfig::new(branch);
    cfg.seed = seed;
    cfg.timing.refresh_interval = refresh_interval;
    let duration = |field: &'static str, v: &Option<String>| {
        v.as_deref()
            .map(|s| {
                humantime::parse_duration(s).map_err(|source| MirrorError::Duration {
                    field,
                    value: s.to_string(),
                    source,
                })
            })
            .transpose()
    };
    if let Some(d) = duration("refreshInterval", &provider.spec.refresh_interval)? {
        if d.is_zero() {
            return Err(MirrorError::ZeroRefresh);
        }
        cfg.timing.refresh_interval = d;
    }
    if let Some(push) = &provider.spec.push {
        if let Some(d) = duration("commitWindow", &push.commit_window)? {
            cfg.timing.window = d;
        }
        if let Some(d) = duration("maxWindowAge", &push.max_window_age)? {
            cfg.timing.max_window_age = d;
        }
        if let Some(d) = duration("cooldown", &push.cooldown)? {
            cfg.timing.push_cooldown = d;
        }
    }
    if let Some(commit) = &provider.spec.commit {
        if let Some(p) = &commit.committer {
            if p.name.trim().is_empty() || p.email.trim().is_empty() {
                return Err(MirrorError::Committer);
            }
            cfg.committer = Identity::new(p.name.clone(), p.email.clone());
        }
        if let Some(template) = &commit.author_email {
            if !template.contains("{user}") || template.contains(['<', '>', '\n']) {
                return Err(MirrorError::AuthorEmail(template.clone()));
            }
            cfg.author_email.clone_from(template);
        }
        if let Some(m) = &commit.message {
            let defaults = MessageTemplates::default();
            cfg.messages = MessageTemplates {
                single: m.event_template.clone().unwrap_or(defaults.single),
                group: m.group_template.clone().unwrap_or(defaults.group),
                resync: m.reconcile_template.clone().unwrap_or(defaults.resync),
            };
        }
    }
    Ok(cfg)
}

/// What a worker is configured with, compared to tell when a provider or its Secret changed.
/// The jitter seed is left out: it is drawn anew at every reconcile.
#[derive(PartialEq)]
struct Settings {
    worker: WorkerConfig,
    remote: RemoteSpec,
    secret_version: Option<String>,
}

impl Settings {
    fn of(cfg: &WorkerConfig, remote: &RemoteSpec, secret_version: Option<String>) -> Self {
        Self {
            worker: WorkerConfig {
                seed: 0,
                ..cfg.clone()
            },
            remote: remote.clone(),
            secret_version,
        }
    }
}

/// What the branch workers count: Git's metrics, and the fields their planners kept from the
/// live side over Git's.
#[derive(Clone)]
pub struct WorkerMetrics {
    /// Commits, pushes, fetches.
    pub git: GitMetrics,
    /// `backflow_mirror_merge_overrides_total`.
    pub merge_overrides: Family<TargetLabels, Counter>,
}

/// Every running branch worker.
pub struct Workers {
    data_dir: PathBuf,
    refresh_interval: Duration,
    shutdown_grace: Duration,
    board: Arc<Board>,
    clock: Arc<dyn Clock>,
    metrics: WorkerMetrics,
    kinds: KindMap,
    /// The running workers' handles, shared with the appliers through the board's registry.
    running: Arc<RunningWorkers>,
    /// The settings each running worker was last given.
    settings: Mutex<BTreeMap<BranchKey, Settings>>,
    encryption: Mutex<BTreeMap<(String, String), EncryptionMap>>,
    placement: Mutex<BTreeMap<(String, String), PlacementMap>>,
    diverged: mpsc::UnboundedSender<BranchKey>,
    diverged_rx: Mutex<Option<mpsc::UnboundedReceiver<BranchKey>>>,
    /// This backflow as folders' owner files name it (see [`FolderOwner`]).
    owner: Option<FolderOwner>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("data_dir", &self.data_dir)
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// A registry keeping its caches under `data_dir`, reporting remote tips on `board`; a
    /// worker's shutdown pushes what is pending for at most `shutdown_grace`.
    pub fn new(
        data_dir: PathBuf,
        refresh_interval: Duration,
        shutdown_grace: Duration,
        board: Arc<Board>,
        clock: Arc<dyn Clock>,
        metrics: WorkerMetrics,
        kinds: KindMap,
    ) -> Self {
        let (diverged, diverged_rx) = mpsc::unbounded_channel();
        Self {
            data_dir,
            refresh_interval,
            shutdown_grace,
            board,
            clock,
            metrics,
            kinds,
            running: Arc::default(),
            settings: Mutex::new(BTreeMap::new()),
            encryption: Mutex::new(BTreeMap::new()),
            placement: Mutex::new(BTreeMap::new()),
            diverged,
            diverged_rx: Mutex::new(Some(diverged_rx)),
            owner: None,
        }
    }

    /// Workers that write only folders `owner` holds or nobody does.
    #[must_use]
    pub fn with_owner(mut self, owner: Option<FolderOwner>) -> Self {
        self.owner = owner;
        self
    }

    /// This backflow as folders' owner files name it, if it claims folders.
    pub fn owner(&self) -> Option<FolderOwner> {
        self.owner.clone()
    }

    /// The branches that lost backflow's commits (a force-push, a deleted branch), as their
    /// workers report them: every target on such a branch must be resynced. Handed out once,
    /// to the controller.
    pub fn take_divergences(&self) -> Option<mpsc::UnboundedReceiver<BranchKey>> {
        self.diverged_rx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The per-folder encryptors of (url, branch)'s planner, shared with it: the controller
    /// fills it from each `GitTarget`'s `spec.encryption`. Keyed per branch so that two
    /// repositories with the same folder name never share an encryptor.
    pub fn encryption(&self, url: &str, branch: &str) -> EncryptionMap {
        self.encryption
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((url.to_string(), branch.to_string()))
            .or_default()
            .clone()
    }

    /// The per-folder placement rules of (url, branch)'s planner, shared with it: the controller
    /// fills it from each `GitTarget`'s `spec.placement`.
    pub fn placement(&self, url: &str, branch: &str) -> PlacementMap {
        self.placement
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((url.to_string(), branch.to_string()))
            .or_default()
            .clone()
    }

    /// `(by_type, default, canonical)` placements of every branch so far.
    pub fn placement_totals(&self) -> (u64, u64, u64) {
        let maps = self
            .placement
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        maps.values()
            .map(|m| m.counts().snapshot())
            .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    }

    /// The worker of (url, branch), started with the provider's settings if not running yet;
    /// a running worker whose provider settings or credentials changed gets the new ones.
    pub fn get_or_start(
        &self,
        provider: &GitProvider,
        branch: &str,
        access: Access,
    ) -> Result<WorkerHandle, MirrorError> {
        let key = (provider.spec.url.clone(), branch.to_string());
        // Held while a worker starts: two reconciles never start one branch twice.
        let mut running = self
            .settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cfg = worker_config(provider, branch, rand::random(), self.refresh_interval)?;
        let remote = RemoteSpec {
            credentials: access.credentials,
            ca_file: access.ca_file,
            ..RemoteSpec::new(provider.spec.url.clone())
        };
        if let (Some(last), Some(handle)) =
            (running.get_mut(&key), self.running.get(&key.0, branch))
        {
            let settings = Settings::of(&cfg, &remote, access.secret_version);
            if *last != settings {
                tracing::info!(url = %provider.spec.url, branch, "provider settings or credentials changed: the branch worker takes them now");
                handle.reconfigure(cfg, remote);
                *last = settings;
            }
            return Ok(handle);
        }
        let settings = Settings::of(&cfg, &remote, access.secret_version);
        // Data keys and IVs come from this generator: seeded from the OS, never from the
        // worker's (non-secret) jitter seed.
        let mut planner = YamlPlanner::new(self.kinds.clone())
            .with_encryption(
                self.encryption(&provider.spec.url, branch),
                self.clock.clone(),
                StdRng::from_os_rng(),
            )
            .with_placement(self.placement(&provider.spec.url, branch))
            .with_merge_report(Arc::new(BranchOverrides {
                branch: key.clone(),
                board: self.board.clone(),
                merge_overrides: self.metrics.merge_overrides.clone(),
            }));
        if let Some(owner) = &self.owner {
            planner = planner.with_owner(owner.clone());
        }
        let metrics = self.metrics.git.for_branch(&provider.spec.url, branch);
        let worker = BranchWorker::open(
            &self.data_dir,
            &remote,
            cfg,
            Box::new(planner),
            self.clock.clone(),
            metrics,
        )
        .map_err(|source| MirrorError::Cache {
            url: provider.spec.url.clone(),
            source,
        })?;
        let (handle, notices) =
            backflow_git::spawn_with_notices(worker, self.clock.clone(), self.shutdown_grace);
        tokio::spawn(forward_notices(
            notices,
            handle.clone(),
            key.clone(),
            self.diverged.clone(),
            self.board.clone(),
        ));
        tracing::info!(url = %provider.spec.url, branch, "branch worker started");
        self.running.insert(key.clone(), handle.clone());
        running.insert(key, settings);
        Ok(handle)
    }

    /// Where credential files (SSH keys, `known_hosts`, CA certificates) are written.
    #[must_use]
    pub fn credentials_dir(&self) -> PathBuf {
        self.data_dir.join("credentials")
    }

    /// Why the last publication to `url` failed (any of its branches), while it keeps failing.
    #[must_use]
    pub fn remote_problem(&self, url: &str) -> Option<backflow_git::RemoteProblem> {
        self.running.remote_problem(url)
    }

    /// The status board the workers report remote tips on.
    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
    }

    /// The running workers' handles, for the board's registry.
    pub fn running(&self) -> Arc<RunningWorkers> {
        self.running.clone()
    }

    /// The worker of (url, branch), if running.
    pub fn get(&self, url: &str, branch: &str) -> Option<WorkerHandle> {
        self.running.get(url, branch)
    }

    /// Flushes and stops every worker.
    pub async fn shutdown(&self) {
        self.settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        let handles = self.running.take_all();
        // Together: the grace bounds the whole stop, not each branch in turn.
        let stops = handles.into_iter().map(|((url, branch), h)| async move {
            match h.shutdown().await {
                Ok(tip) => {
                    tracing::info!(%url, %branch, tip = ?tip.map(|t| t.to_string()), "branch worker stopped");
                }
                Err(e) => {
                    tracing::warn!(%url, %branch, error = %e, "branch worker stopped with writes unpublished; the next start's resync publishes them");
                }
            }
        });
        futures::future::join_all(stops).await;
    }
}

/// Passes a worker's divergences on to the controller, and the foreign tips it saw to the board.
async fn forward_notices(
    mut notices: broadcast::Receiver<BranchNotice>,
    worker: WorkerHandle,
    branch: BranchKey,
    to: mpsc::UnboundedSender<BranchKey>,
    board: Arc<Board>,
) {
    loop {
        match notices.recv().await {
            Ok(BranchNotice::Diverged(_)) => {
                if to.send(branch.clone()).is_err() {
                    return;
                }
            }
            Ok(BranchNotice::Foreign(commit)) => {
                tracing::info!(url = %branch.0, branch = %branch.1, tip = %commit.tip, "somebody else pushed");
                let order = worker.tip_order(commit.tip).unwrap_or(0);
                board.remote_tip(&branch, commit.tip.to_string(), order);
                let retried = board.retry_refused(&branch);
                if retried > 0 {
                    tracing::info!(url = %branch.0, branch = %branch.1, targets = retried, "trying refused writes again on the new tip");
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// A branch's report of fields kept from the live side over Git's (the three-way replay): on
/// the folder's `GitTarget` status and in `backflow_mirror_merge_overrides_total`.
struct BranchOverrides {
    branch: BranchKey,
    board: Arc<Board>,
    merge_overrides: Family<TargetLabels, Counter>,
}

impl backflow_manifest::MergeReport for BranchOverrides {
    fn overridden(&self, folder: &str, object: &ObjectKey, fields: &[String]) {
        if let Some((namespace, name)) =
            self.board
                .merge_override(&self.branch, folder, object, fields)
        {
            self.board.record(backflow_board::Note {
                regarding: backflow_board::Regarding {
                    api_version: "backflow.dev/v1alpha1".into(),
                    kind: "GitTarget".into(),
                    namespace: Some(namespace.clone()),
                    name: name.clone(),
                },
                kind: backflow_board::EventType::Warning,
                reason: "LiveValueKept".into(),
                action: "Merge".into(),
                message: format!(
                    "{object}: {} changed both live and in Git; the live value was kept",
                    fields.join(", ")
                ),
            });
            self.merge_overrides
                .get_or_create(&TargetLabels {
                    target: format!("{namespace}/{name}"),
                })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use backflow_api::config::GitProvider;
    use serde_json::json;

    use super::*;

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    fn provider(spec: serde_json::Value) -> GitProvider {
        serde_json::from_value(json!({
            "apiVersion": "backflow.dev/v1alpha1",
            "kind": "GitProvider",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": spec,
        }))
        .expect("a GitProvider")
    }

    #[test]
    fn provider_settings_that_do_not_parse_name_the_field() {
        let bad = provider(json!({"url": "file:///r.git", "push": {"maxWindowAge": "soon"}}));
        let err = worker_config(&bad, "main", 0, TEN_MINUTES).expect_err("refused");
        assert!(matches!(
            &err,
            MirrorError::Duration { field: "maxWindowAge", value, .. } if value == "soon"
        ));
        assert!(
            err.to_string()
                .starts_with("spec.push.maxWindowAge \"soon\" is not a duration"),
            "{err}"
        );
        let nameless = provider(json!({
            "url": "file:///r.git",
            "commit": {"committer": {"name": " ", "email": "a@b"}},
        }));
        assert!(matches!(
            worker_config(&nameless, "main", 0, TEN_MINUTES),
            Err(MirrorError::Committer)
        ));
        let good = provider(json!({"url": "file:///r.git", "push": {"commitWindow": "250ms"}}));
        let cfg = worker_config(&good, "main", 0, TEN_MINUTES).expect("valid");
        assert_eq!(cfg.timing.window, Duration::from_millis(250));
        assert_eq!(
            cfg.timing.refresh_interval, TEN_MINUTES,
            "the flag's default"
        );
        let hourly = provider(json!({"url": "file:///r.git", "refreshInterval": "1h"}));
        let cfg = worker_config(&hourly, "main", 0, TEN_MINUTES).expect("valid");
        assert_eq!(cfg.timing.refresh_interval, Duration::from_secs(3600));
        let never = provider(json!({"url": "file:///r.git", "refreshInterval": "0s"}));
        assert!(matches!(
            worker_config(&never, "main", 0, TEN_MINUTES),
            Err(MirrorError::ZeroRefresh)
        ));
    }
}
