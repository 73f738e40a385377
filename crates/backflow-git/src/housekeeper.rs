//! Roll-ups on a thread of their own, so the branch worker goes on with the next commit.
//!
//! A busy worker spent about a third of its thread rolling small packs up (the cache's, and a
//! `file://` remote's), and every write that arrived meanwhile waited for it. The
//! [`Housekeeper`] takes those roll-ups to a second thread: the worker says which repository
//! is due, and at a later look learns that packs went away, so it opens its handle again.
//!
//! Rolling up beside the worker is safe because a roll-up writes its new pack before it
//! removes the packs it merged, so every object is in some pack at every moment (libgit2 looks
//! again when a pack it listed is gone), and a build's pack that is rolled up before its push
//! could link it into the remote is written there again instead (`pack::copy_commits`): the
//! same guarantees as two processes sharing a repository.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use git2::Repository;

use crate::pack::roll_up_small_packs;

/// Which of the worker's repositories a roll-up is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Store {
    /// The local cache, where builds write their packs.
    Cache,
    /// A `file://` remote, where pushes leave theirs.
    Remote,
}

/// Where one repository's roll-up stands.
#[derive(Debug, Default)]
struct RollUpState {
    /// Asked for and not finished: asking again adds nothing.
    queued: AtomicBool,
    /// Packs were removed since the worker last looked: its handle lists packs that are gone.
    rolled: AtomicBool,
}

/// One roll-up to do.
#[derive(Debug)]
struct Job {
    path: PathBuf,
    store: Store,
    state: Arc<RollUpState>,
}

/// The worker's side of its roll-up thread. Dropping it lets the thread finish the roll-up in
/// hand and end.
#[derive(Debug)]
pub(crate) struct Housekeeper {
    jobs: mpsc::Sender<Job>,
    cache: Arc<RollUpState>,
    remote: Arc<RollUpState>,
}

impl Housekeeper {
    /// Starts the roll-up thread of `branch`'s worker; `None` when no thread can be started
    /// (the worker then rolls up on its own thread, as before).
    pub(crate) fn spawn(branch: &str) -> Option<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name(format!("backflow-roll:{branch}"))
            .spawn(move || {
                for job in queue {
                    roll_up(&job);
                }
            });
        match spawned {
            Ok(_) => Some(Self {
                jobs,
                cache: Arc::default(),
                remote: Arc::default(),
            }),
            Err(e) => {
                tracing::warn!(branch, error = %e, "cannot start the roll-up thread; the branch worker rolls packs up itself");
                None
            }
        }
    }

    fn state(&self, store: Store) -> &Arc<RollUpState> {
        match store {
            Store::Cache => &self.cache,
            Store::Remote => &self.remote,
        }
    }

    /// Asks for a roll-up of `store`, at `path`, unless one is queued or running. Returns
    /// whether the thread took it (`false`: it is gone, and the caller rolls up itself).
    pub(crate) fn roll_up(&self, store: Store, path: PathBuf) -> bool {
        let state = self.state(store);
        if state.queued.swap(true, Ordering::AcqRel) {
            return true;
        }
        let job = Job {
            path,
            store,
            state: state.clone(),
        };
        if self.jobs.send(job).is_err() {
            state.queued.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// Whether a roll-up removed packs of `store` since the last call.
    pub(crate) fn take_rolled(&self, store: Store) -> bool {
        self.state(store).rolled.swap(false, Ordering::AcqRel)
    }

    /// Whether a roll-up of `store` is queued or running.
    pub(crate) fn busy(&self, store: Store) -> bool {
        self.state(store).queued.load(Ordering::Acquire)
    }

    /// Waits until no roll-up is queued or running (a thread that died runs none).
    pub(crate) fn wait_idle(&self) {
        while self.busy(Store::Cache) || self.busy(Store::Remote) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Marks a job no longer queued when it ends, however it ends: a roll-up that panicked leaves
/// the thread gone (the worker's next request finds out and rolls up itself), never a job that
/// looks queued for ever.
struct Finished<'a>(&'a RollUpState);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.queued.store(false, Ordering::Release);
    }
}

/// Runs one roll-up on a handle of its own; a failure leaves more packs than needed, nothing
/// else, and is logged.
fn roll_up(job: &Job) {
    let _finished = Finished(&job.state);
    let rolled = Repository::open_bare(&job.path)
        .map_err(crate::error::StoreError::from)
        .and_then(|repo| roll_up_small_packs(&repo));
    match rolled {
        Ok(true) => job.state.rolled.store(true, Ordering::Release),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(path = %job.path.display(), store = ?job.store, error = %e, "cannot roll the small packs up");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use git2::{ObjectType, Oid};

    use super::*;
    use crate::pack::{TIER_WIDTH, pack_count, write_pack};

    /// A bare repository holding one full tier of small packs, and the blobs they hold.
    fn full_tier() -> (tempfile::TempDir, Vec<Oid>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path().join("r.git")).expect("init");
        let odb = repo.odb().expect("odb");
        let mut all = Vec::new();
        for pack in 0..TIER_WIDTH {
            let ids: Vec<Oid> = (0..4)
                .map(|n| {
                    odb.write(
                        ObjectType::Blob,
                        format!("pack {pack}, blob {n}\n").as_bytes(),
                    )
                    .expect("blob")
                })
                .collect();
            write_pack(&odb, &ids, &repo.path().join("objects")).expect("pack");
            all.extend(ids);
        }
        for entry in std::fs::read_dir(repo.path().join("objects"))
            .expect("objects")
            .flatten()
        {
            if entry.file_name().len() == 2 {
                std::fs::remove_dir_all(entry.path()).expect("remove loose");
            }
        }
        (dir, all)
    }

    fn wait_idle_for(keeper: &Housekeeper, store: Store) {
        let hang = Instant::now() + Duration::from_secs(30);
        while keeper.busy(store) {
            assert!(Instant::now() < hang, "the roll-up never finished");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The roll-up thread merges a full tier, says so once, and a handle opened before it
    /// still finds every object (in the pack that replaced the ones it listed).
    #[test]
    fn a_roll_up_on_its_own_thread_is_reported_and_loses_nothing() {
        let (dir, blobs) = full_tier();
        let path = dir.path().join("r.git");
        let before = Repository::open_bare(&path).expect("open");
        for id in &blobs {
            before.find_blob(*id).expect("readable before");
        }
        assert_eq!(pack_count(&path), TIER_WIDTH);

        let keeper = Housekeeper::spawn("main").expect("a thread");
        assert!(keeper.roll_up(Store::Remote, path.clone()));
        // Asked again while queued or running: taken, and nothing more is done.
        assert!(keeper.roll_up(Store::Remote, path.clone()));
        wait_idle_for(&keeper, Store::Remote);
        assert_eq!(pack_count(&path), 1, "the tier became one pack");
        assert!(
            !keeper.take_rolled(Store::Cache),
            "only the remote was rolled"
        );
        assert!(keeper.take_rolled(Store::Remote), "the roll-up is reported");
        assert!(!keeper.take_rolled(Store::Remote), "once");
        for id in &blobs {
            let blob = before.find_blob(*id).expect("an old handle finds it again");
            assert!(blob.content().starts_with(b"pack "));
        }

        // Nothing left to roll up: done, and nothing reported.
        assert!(keeper.roll_up(Store::Remote, path.clone()));
        wait_idle_for(&keeper, Store::Remote);
        assert!(!keeper.take_rolled(Store::Remote));
        assert_eq!(pack_count(&path), 1);
    }

    /// A repository that cannot be opened is logged and reported as nothing rolled up; the
    /// thread goes on with the next job.
    #[test]
    fn a_failed_roll_up_changes_nothing_and_the_thread_goes_on() {
        let keeper = Housekeeper::spawn("main").expect("a thread");
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(keeper.roll_up(Store::Cache, dir.path().join("missing.git")));
        wait_idle_for(&keeper, Store::Cache);
        assert!(!keeper.take_rolled(Store::Cache));

        let (tier, _) = full_tier();
        assert!(keeper.roll_up(Store::Cache, tier.path().join("r.git")));
        wait_idle_for(&keeper, Store::Cache);
        assert!(keeper.take_rolled(Store::Cache));
    }
}
