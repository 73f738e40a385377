//! The Git publication engine: many writers, one branch, nothing lost, nothing forced.
//!
//! - `repo.rs`: the local bare cache per remote; trees and commits built with no worktree.
//! - `pack.rs`: objects written and copied as packs, and small packs rolled up;
//!   `housekeeper.rs` rolls them up on a thread beside the branch worker's.
//! - `remote/`: ref advertisement, fetch and compare-and-swap push, behind [`GitRemote`], with
//!   `file://` ([`FileRemote`]), smart HTTP(S) ([`Libgit2Remote`]) and the `git` program
//!   ([`CliRemote`], SSH) transports.
//! - `tree.rs`: [`Overlay`], the planner's view of a tree in the cache (the planner seam itself,
//!   `Planner` and `TreeView`, is in `backflow-branch`, free of Git).
//! - `message.rs`: commit message templates.
//! - `history.rs`: what a folder's history holds, for people: the commits that changed it, with
//!   their authors and the files before and after.
//! - `worker.rs`: the branch worker's shell. Every decision is made by the pure core
//!   ([`backflow_branch::BranchCore`]); the shell runs its effects (fetch, build, push, keep
//!   the tips it must remember) against the cache and the remote. `driver.rs` runs it on a
//!   thread behind an async [`WorkerHandle`].
//! - `metrics.rs`: Prometheus metrics on a registry handed in.
//!
//! # Running a worker
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use backflow_api::{GroupResource, ObjectKey, SystemClock};
//! use backflow_branch::{FilePerObjectPlanner, Intent}; // a planner for examples and tests
//! use backflow_git::{BranchMetrics, BranchWorker, RemoteSpec, WorkerConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = Arc::new(SystemClock);
//! let mut cfg = WorkerConfig::new("main");
//! cfg.seed = rand::random();
//! let worker = BranchWorker::open(
//!     std::path::Path::new("/var/lib/backflow"),
//!     &RemoteSpec::new("https://git.example.com/platform/config.git"),
//!     cfg,
//!     Box::new(FilePerObjectPlanner),
//!     clock.clone(),
//!     BranchMetrics::disabled(),
//! )?;
//! let handle = backflow_git::spawn(worker, clock, Duration::from_secs(30));
//! let key = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "settings");
//! let pushed = handle.submit(Intent::put("apps", key, serde_json::json!({"data": {"a": "1"}})));
//! let tip = pushed.await?; // the pushed commit containing the intent
//! let applied_tip = handle.flush().await?; // flush, then apply
//! handle.shutdown().await?;
//! # let _ = (tip, applied_tip);
//! # Ok(()) }
//! ```
//!
//! # Driving it synchronously (tests, simulation, benchmarks)
//!
//! Build a [`BranchWorker`] with a [`backflow_api::ManualClock`] (or the system clock), then
//! call [`BranchWorker::submit`], [`BranchWorker::flush`] and [`BranchWorker::poll`] yourself
//! and read [`BranchWorker::take_events`]. With `window = Duration::ZERO` every submitted intent
//! is decided at once, and the next `poll` commits and pushes it: `submit` + `poll` in a loop is
//! one commit and one compare-and-swap push per intent, which is what the `git` benchmark
//! measures ([`BranchWorker::stats`] counts them).

#![deny(missing_docs)]

mod driver;
mod error;
mod health;
mod history;
mod housekeeper;
mod journal;
mod message;
mod metrics;
mod pack;
mod remote;
mod repo;
mod tip_order;
mod tree;
mod worker;

pub use driver::{
    BranchNotice, Pushed, ShutdownError, WorkerHandle, WorkerStopped, WriteError, spawn,
    spawn_with_notices,
};
pub use error::{RepoError, StoreError};
pub use health::{RemoteHealth, RemoteProblem};
pub use history::{ChangedFile, FolderChange, FolderHistory, HISTORY_WALK};
pub use message::{CommitPeople, DEFAULT_AUTHOR_EMAIL, MessageTemplates};
pub use metrics::{BranchMetrics, GitMetrics};
pub use remote::{
    CliRemote, Credentials, ExpectedTip, FileRemote, GitRemote, Libgit2Remote, PushOutcome,
    RemoteError, RemoteErrorKind, RemoteSpec, TransportChoice, open_remote,
};
pub use repo::{Identity, LocalRepo, OBJECT_CACHE_BYTES, set_object_cache_limit};
pub use tree::Overlay;
pub use worker::{BranchWorker, FolderFile, WorkerConfig, WorkerEvent};
