//! Runs a [`BranchWorker`] on its own thread and hands out an async [`WorkerHandle`].
//!
//! libgit2 calls block and a repository cannot be shared between threads, so the worker owns a
//! dedicated OS thread rather than a tokio task; the handle's methods are async and cheap.
//! This is the edge where real time is read (through the worker's [`Clock`]) and slept on.
//! Commands that queue up while a push is in flight are all taken before the next poll, so a
//! burst of intents goes out in one push even with a zero window (still one commit each).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::task::{Context, Poll};
use std::time::Duration;

use backflow_api::Clock;
use backflow_branch::{CommitId, Divergence, ForeignCommit, Intent, PlanError, Waiters};
use tokio::sync::{broadcast, oneshot};

use crate::error::RepoError;
use crate::health::{RemoteHealth, RemoteProblem};
use crate::history::FolderHistory;
use crate::remote::RemoteSpec;
use crate::tip_order::TipOrder;
use crate::worker::{BranchWorker, FolderFile, WorkerConfig, WorkerEvent};

/// What happened to the branch that its worker's owner must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchNotice {
    /// Somebody else pushed.
    Foreign(ForeignCommit),
    /// The branch lost backflow's last push: resubmit every target of the branch, then call
    /// [`WorkerHandle::recovered`]. Publication waits for it.
    Diverged(Divergence),
}

/// Why a submitted intent will never be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The planner refused it (it cannot be placed safely).
    #[error("refused: {0}")]
    Refused(PlanError),
    /// The worker stopped before it was published.
    #[error("the branch worker stopped before the write was published")]
    WorkerStopped,
}

/// The worker is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the branch worker has stopped")]
pub struct WorkerStopped;

/// Shutting down did not publish everything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownError {
    /// Writes were still pending when the shutdown timeout ran out (the remote was unreachable).
    #[error("{pending} writes were still unpublished when shutdown gave up")]
    StillPending {
        /// How many decided writes were left.
        pending: usize,
    },
    /// The worker had already stopped.
    #[error(transparent)]
    Stopped(#[from] WorkerStopped),
}

/// Resolves with the remote tip that contains a submitted intent, once it is pushed
/// (`None` only if the branch does not exist, which means the intent changed nothing).
///
/// An intent replaced by a later one for the same object in the same window resolves with the
/// commit that holds the later value.
#[derive(Debug)]
pub struct Pushed {
    rx: oneshot::Receiver<Result<Option<CommitId>, WriteError>>,
}

impl Pushed {
    /// Waits on the calling thread (not inside an async runtime).
    pub fn blocking_wait(self) -> Result<Option<CommitId>, WriteError> {
        self.rx
            .blocking_recv()
            .unwrap_or(Err(WriteError::WorkerStopped))
    }
}

impl Future for Pushed {
    type Output = Result<Option<CommitId>, WriteError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(WriteError::WorkerStopped)))
    }
}

type TipReply = oneshot::Sender<Result<Option<CommitId>, WriteError>>;

enum Command {
    Submit(Intent, TipReply),
    Resync(String, Vec<Intent>, TipReply),
    Flush(oneshot::Sender<Option<CommitId>>),
    CommitRequest(String, oneshot::Sender<Option<CommitId>>),
    RemoteMoved,
    Hurry,
    ResyncComplete(String),
    Recovered,
    Reconfigure(Box<(WorkerConfig, RemoteSpec)>),
    ReadFolder(
        CommitId,
        String,
        oneshot::Sender<Result<Vec<FolderFile>, RepoError>>,
    ),
    ReadGone(
        Option<CommitId>,
        CommitId,
        String,
        oneshot::Sender<Result<Vec<FolderFile>, RepoError>>,
    ),
    ReadHistory(
        CommitId,
        String,
        usize,
        oneshot::Sender<Result<FolderHistory, RepoError>>,
    ),
    Shutdown(oneshot::Sender<Result<Option<CommitId>, ShutdownError>>),
}

/// The handle of a running branch worker. Cloneable; the worker shuts down (flushing what is
/// pending) when [`WorkerHandle::shutdown`] is called or the last handle is dropped.
#[derive(Debug, Clone)]
pub struct WorkerHandle {
    tx: mpsc::Sender<Command>,
    notices: broadcast::Sender<BranchNotice>,
    health: RemoteHealth,
    tips: TipOrder,
}

impl WorkerHandle {
    /// Submits an intent. The returned future resolves once a push containing it succeeded
    /// (`X-Backflow-Wait: pushed`); dropping it does not withdraw the intent.
    #[must_use]
    pub fn submit(&self, intent: Intent) -> Pushed {
        let (tx, rx) = oneshot::channel();
        // A send error drops `tx`, so the future resolves to WorkerStopped.
        let _ = self.tx.send(Command::Submit(intent, tx));
        Pushed { rx }
    }

    /// Submits a resync of `target` as one commit of its own; resolves when it is pushed.
    pub fn submit_resync(&self, target: impl Into<String>, intents: Vec<Intent>) -> Pushed {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Resync(target.into(), intents, tx));
        Pushed { rx }
    }

    /// Closes the open window, takes the flush mark, publishes everything up to it (ignoring
    /// the cooldown) and returns the resulting remote tip.
    pub async fn flush(&self) -> Result<Option<CommitId>, WorkerStopped> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Flush(tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)
    }

    /// An explicit save: closes the window with `message`, publishes at once and returns the
    /// pushed tip.
    pub async fn commit_request(
        &self,
        message: impl Into<String>,
    ) -> Result<Option<CommitId>, WorkerStopped> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::CommitRequest(message.into(), tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)
    }

    /// A hint that the branch moved (push webhook): the worker reads the remote at once.
    pub fn notify_remote_moved(&self) {
        let _ = self.tx.send(Command::RemoteMoved);
    }

    /// Every file under `folder` of `commit` (see [`BranchWorker::read_folder`]), read on the
    /// worker's thread, which owns the repository.
    pub async fn read_folder(
        &self,
        commit: CommitId,
        folder: impl Into<String>,
    ) -> Result<Result<Vec<FolderFile>, RepoError>, WorkerStopped> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::ReadFolder(commit, folder.into(), tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)
    }

    /// The files under `folder` that went away before `commit` (see
    /// [`BranchWorker::read_gone`]), read on the worker's thread.
    pub async fn read_gone(
        &self,
        since: Option<CommitId>,
        commit: CommitId,
        folder: impl Into<String>,
    ) -> Result<Result<Vec<FolderFile>, RepoError>, WorkerStopped> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::ReadGone(since, commit, folder.into(), tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)
    }

    /// Every target of the branch was resubmitted after a [`BranchNotice::Diverged`]:
    /// publication goes on.
    pub fn recovered(&self) {
        let _ = self.tx.send(Command::Recovered);
    }

    /// The number the worker gave `tip` when it pushed or found it on the remote: of two tips
    /// reported in any order, the larger number is the newer. `None` for a tip it never
    /// learned, or one older than the last 256 it did.
    #[must_use]
    pub fn tip_order(&self, tip: CommitId) -> Option<u64> {
        self.tips.of(tip)
    }

    /// Someone waits for what was submitted so far (`X-Backflow-Wait: pushed`): the commit
    /// window closes at the next opportunity, and what collects while a push is in flight goes
    /// out together in the next commit.
    pub fn hurry(&self) {
        let _ = self.tx.send(Command::Hurry);
    }

    /// The commits on `commit`'s first-parent line that changed files under `folder`, newest
    /// first, at most `limit` (see [`BranchWorker::read_history`]), read on the worker's thread.
    pub async fn read_history(
        &self,
        commit: CommitId,
        folder: impl Into<String>,
        limit: usize,
    ) -> Result<Result<FolderHistory, RepoError>, WorkerStopped> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::ReadHistory(commit, folder.into(), limit, tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)
    }

    /// Every stream of `target` has handed in its snapshot: its resync goes out without waiting
    /// for the silence that gathers a target's snapshots into one commit.
    pub fn resync_complete(&self, target: &str) {
        let _ = self.tx.send(Command::ResyncComplete(target.to_string()));
    }

    /// Why the worker's last publication cycle failed, until its remote answers again.
    #[must_use]
    pub fn remote_problem(&self) -> Option<RemoteProblem> {
        self.health.problem()
    }

    /// New settings (see [`BranchWorker::reconfigure`]), in force from the worker's next step.
    pub fn reconfigure(&self, cfg: WorkerConfig, remote: RemoteSpec) {
        let _ = self.tx.send(Command::Reconfigure(Box::new((cfg, remote))));
    }

    /// Foreign commits and divergences seen from now on. A slow subscriber that falls behind
    /// gets `RecvError::Lagged` and should look at the remote itself.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<BranchNotice> {
        self.notices.subscribe()
    }

    /// Flushes, pushes what is pending (retrying until the shutdown timeout) and stops.
    pub async fn shutdown(&self) -> Result<Option<CommitId>, ShutdownError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Shutdown(tx))
            .map_err(|_| WorkerStopped)?;
        rx.await.map_err(|_| WorkerStopped)?
    }
}

/// Starts `worker` on its own thread. `shutdown_timeout` bounds how long a shutdown keeps
/// retrying an unreachable remote.
pub fn spawn(
    worker: BranchWorker,
    clock: Arc<dyn Clock>,
    shutdown_timeout: Duration,
) -> WorkerHandle {
    spawn_with_notices(worker, clock, shutdown_timeout).0
}

/// [`spawn`], with a subscription to the worker's [`BranchNotice`]s taken before its thread
/// starts, so not even the notices of its first look at the remote (a push made while backflow
/// was stopped, a branch deleted meanwhile) are missed.
pub fn spawn_with_notices(
    worker: BranchWorker,
    clock: Arc<dyn Clock>,
    shutdown_timeout: Duration,
) -> (WorkerHandle, broadcast::Receiver<BranchNotice>) {
    let (tx, rx) = mpsc::channel();
    let (notices, first_subscriber) = broadcast::channel(64);
    let name = format!("backflow-git:{}", worker.config().branch);
    let health = worker.health();
    let tips = TipOrder::default();
    let mut driver = Driver {
        worker,
        clock,
        shutdown_timeout,
        tips: tips.clone(),
        notices: notices.clone(),
        waiters: Waiters::default(),
    };
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || driver.run(rx));
    if let Err(e) = spawned {
        // Every call on the handle then reports WorkerStopped.
        tracing::error!(error = %e, "could not start the branch worker thread");
    }
    (
        WorkerHandle {
            tx,
            notices,
            health,
            tips,
        },
        first_subscriber,
    )
}

struct Driver {
    worker: BranchWorker,
    clock: Arc<dyn Clock>,
    shutdown_timeout: Duration,
    /// Numbered before anyone hears of a tip, so a report made after an answer finds it.
    tips: TipOrder,
    notices: broadcast::Sender<BranchNotice>,
    /// Who waits for what (which of them an event answers is the core's rule).
    waiters: Waiters<Reply>,
}

/// A reply waiting on the worker: a write's (the tip that published it, or why not) or a
/// flush's (the tip).
enum Reply {
    Write(TipReply),
    Flush(oneshot::Sender<Option<CommitId>>),
}

impl Driver {
    fn run(&mut self, rx: mpsc::Receiver<Command>) {
        loop {
            let timeout = self.worker.poll_for();
            self.dispatch();
            // After the answers: writes arriving meanwhile queue for the next commit, and what
            // fell due meanwhile is done (the next round) before waiting.
            if self.worker.maintain() {
                continue;
            }
            let first = if timeout.is_zero() {
                match rx.try_recv() {
                    Ok(cmd) => Some(cmd),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return self.shutdown(None),
                }
            } else {
                match rx.recv_timeout(timeout) {
                    Ok(cmd) => Some(cmd),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return self.shutdown(None),
                }
            };
            let Some(cmd) = first else { continue };
            if let Some(reply) = self.handle(cmd) {
                return self.shutdown(Some(reply));
            }
            // Take everything already queued before polling, so it shares the next push.
            while let Ok(cmd) = rx.try_recv() {
                if let Some(reply) = self.handle(cmd) {
                    return self.shutdown(Some(reply));
                }
            }
        }
    }

    /// Handles one command; returns the reply channel when it is a shutdown.
    fn handle(
        &mut self,
        cmd: Command,
    ) -> Option<oneshot::Sender<Result<Option<CommitId>, ShutdownError>>> {
        match cmd {
            Command::Submit(intent, reply) => {
                let seq = self.worker.submit(intent);
                self.waiters.intent(seq, Reply::Write(reply));
            }
            Command::Resync(target, intents, reply) => {
                let count = intents.len() as u64;
                let seq = self.worker.submit_resync(target, intents);
                self.waiters.resync(seq, count, Reply::Write(reply));
            }
            Command::Flush(reply) => {
                let mark = self.worker.flush();
                self.waiters.flush(mark.0, Reply::Flush(reply));
            }
            Command::CommitRequest(message, reply) => {
                let mark = self.worker.commit_request(message);
                self.waiters.flush(mark.0, Reply::Flush(reply));
            }
            Command::RemoteMoved => self.worker.notify_remote_moved(),
            Command::Hurry => self.worker.hurry(),
            Command::ResyncComplete(target) => self.worker.resync_complete(target),
            Command::Recovered => self.worker.recovered(),
            Command::Reconfigure(settings) => {
                let (cfg, remote) = *settings;
                self.worker.reconfigure(cfg, &remote);
            }
            Command::ReadGone(since, commit, folder, reply) => {
                let _ = reply.send(self.worker.read_gone(since, commit, &folder));
            }
            Command::ReadFolder(commit, folder, reply) => {
                let _ = reply.send(self.worker.read_folder(commit, &folder));
            }
            Command::ReadHistory(commit, folder, limit, reply) => {
                let _ = reply.send(self.worker.read_history(commit, &folder, limit));
            }
            Command::Shutdown(reply) => return Some(reply),
        }
        None
    }

    fn dispatch(&mut self) {
        for event in self.worker.take_events() {
            match event {
                WorkerEvent::Published { through, tip } => {
                    if let Some(tip) = tip {
                        self.tips.learn(tip);
                    }
                    let answered = self.waiters.published(through);
                    for reply in answered.writes.into_iter().chain(answered.flushes) {
                        match reply {
                            Reply::Write(reply) => {
                                let _ = reply.send(Ok(tip));
                            }
                            Reply::Flush(reply) => {
                                let _ = reply.send(tip);
                            }
                        }
                    }
                }
                WorkerEvent::Refused { seq, error, .. } => {
                    // An intent of a resync answers the resync's reply, which waits at its last.
                    for reply in self.waiters.refused(seq) {
                        if let Reply::Write(reply) = reply {
                            let _ = reply.send(Err(WriteError::Refused(error.clone())));
                        }
                    }
                }
                // No subscriber is fine.
                WorkerEvent::Foreign(commit) => {
                    self.tips.learn(commit.tip);
                    let _ = self.notices.send(BranchNotice::Foreign(commit));
                }
                WorkerEvent::Diverged(divergence) => {
                    let _ = self.notices.send(BranchNotice::Diverged(divergence));
                }
                WorkerEvent::Failed { .. } => {}
            }
        }
    }

    fn shutdown(
        &mut self,
        reply: Option<oneshot::Sender<Result<Option<CommitId>, ShutdownError>>>,
    ) {
        self.worker.flush();
        let deadline = self.clock.monotonic() + self.shutdown_timeout;
        let result = loop {
            let wait = self.worker.poll_for();
            self.dispatch();
            if !self.worker.has_unpublished() {
                break Ok(self.worker.remote_tip().commit());
            }
            let now = self.clock.monotonic();
            if now >= deadline {
                break Err(ShutdownError::StillPending {
                    pending: self.worker.pending_writes().len(),
                });
            }
            let nap = wait.min(deadline.saturating_sub(now));
            std::thread::sleep(nap.max(Duration::from_millis(1)));
        };
        if let Err(e) = &result {
            tracing::error!(branch = %self.worker.config().branch, error = %e, "shutdown left writes unpublished");
        }
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }
}
