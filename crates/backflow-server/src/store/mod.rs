//! The durable object store: redb on disk, an in-memory read model, and a bounded event log.
//!
//! Writes go through one writer thread that groups whatever is queued into one redb transaction
//! (group commit) and answers each write only after that transaction is durable. Reads never touch
//! the disk: the read model is updated after each commit, before any write in it is answered, so
//! a client always reads its own acknowledged writes.

pub mod at_rest;
mod event_log;
mod stored_object;
mod write_record;
mod write_tx;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock, mpsc};
use std::thread;

use backflow_api::{GroupResource, ObjectKey, WriteRecord};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::oneshot;

pub use event_log::{EventLog, EventType, WatchEvent};
pub use stored_object::StoredObject;
pub use write_tx::WriteTx;

use crate::error::{ApiError, ApiResult};
use at_rest::AtRestKey;

const OBJECTS: TableDefinition<(&str, &str, &str, &str), &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RESOURCE_VERSION: &str = "resourceVersion";

/// Failures opening or reading the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened or created.
    #[error("cannot open the store at {path}: {source}")]
    Open {
        /// The file or directory concerned.
        path: String,
        /// The underlying error.
        source: Box<redb::DatabaseError>,
    },
    /// The file is damaged: a page does not verify, it is cut short, or reading it failed in a
    /// way only a damaged file causes. It is refused as it is, never repaired by going back to
    /// an earlier commit (which could lose acknowledged writes).
    #[error(
        "the store {path} is damaged ({detail}); it was not opened and nothing in it was changed. \
         To recover, move the file aside (mv {path} {path}.damaged), then either \
         put back a copy of store.redb from a backup, or start from Git: backflow serve \
         --initialize applies what the branch holds into the new, empty store"
    )]
    Damaged {
        /// The file.
        path: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Reading the stored objects at start-up failed.
    #[error("cannot read the store at {path}: {message}")]
    Load {
        /// The file or directory concerned.
        path: String,
        /// What went wrong, for a person.
        message: String,
    },
    /// A stored object is not valid JSON.
    #[error("stored object {key} is corrupt: {source}")]
    Corrupt {
        /// Key of the stored object.
        key: String,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// The writer thread could not be started.
    #[error("cannot start the store writer: {0}")]
    Writer(std::io::Error),
    /// Secrets are sealed in the store but its key is not there.
    #[error(
        "the store holds encrypted Secrets ({key} first) but its key {path} is missing: restore store.key from the backup made with store.redb; without it the Secrets cannot be read, and the server does not start rather than serve them unreadable"
    )]
    KeyMissing {
        /// The first sealed object found.
        key: String,
        /// Where the key was looked for.
        path: String,
    },
    /// The at-rest key could not be used.
    #[error(transparent)]
    AtRest(#[from] at_rest::AtRestError),
}

/// The committed state: every object (serialized, see [`StoredObject`]), and the
/// resourceVersion of the last commit.
///
/// Objects are kept per type, each under one text `namespace NUL name` (see [`ScopedName`]):
/// a whole [`ObjectKey`] per object (four strings, three of them allocated) cost as much again
/// as the map's room, a sixth of a 1 KiB object.
#[derive(Debug, Default)]
pub struct State {
    objects: BTreeMap<GroupResource, BTreeMap<ScopedName, StoredObject>>,
    resource_version: u64,
}

/// An object's namespace and name as one text, `namespace NUL name`: ordered as the pair is
/// (neither holds a NUL, so a namespace sorts before every longer one it begins), and the
/// namespace's objects are the range from `namespace NUL` to `namespace SOH`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ScopedName(Box<str>);

impl ScopedName {
    fn of(key: &ObjectKey) -> Self {
        Self::new(&key.namespace, &key.name)
    }

    fn new(namespace: &str, name: &str) -> Self {
        let mut text = String::with_capacity(namespace.len() + 1 + name.len());
        text.push_str(namespace);
        text.push('\0');
        text.push_str(name);
        Self(text.into_boxed_str())
    }

    /// The first text past every object of `namespace`.
    fn past(namespace: &str) -> Self {
        Self(format!("{namespace}\u{1}").into_boxed_str())
    }

    fn parts(&self) -> (&str, &str) {
        self.0.split_once('\0').unwrap_or(("", &self.0))
    }
}

/// A listed object's identity, borrowed from the read model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    /// The object's type.
    pub resource: &'a GroupResource,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl KeyRef<'_> {
    /// The owned key.
    #[must_use]
    pub fn to_key(self) -> ObjectKey {
        ObjectKey::new(self.resource.clone(), self.namespace, self.name)
    }
}

impl State {
    /// The resourceVersion of the last committed write.
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// One object.
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<&StoredObject> {
        self.objects.get(&key.resource)?.get(&ScopedName::of(key))
    }

    fn insert(&mut self, key: ObjectKey, object: StoredObject) {
        let name = ScopedName::of(&key);
        self.objects
            .entry(key.resource)
            .or_default()
            .insert(name, object);
    }

    fn remove(&mut self, key: &ObjectKey) {
        if let Some(objects) = self.objects.get_mut(&key.resource) {
            objects.remove(&ScopedName::of(key));
            if objects.is_empty() {
                self.objects.remove(&key.resource);
            }
        }
    }

    /// The objects of one type, in one namespace or (with `None`) all, ordered by namespace and name.
    pub fn list<'a>(
        &'a self,
        resource: &'a GroupResource,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (KeyRef<'a>, &'a StoredObject)> + 'a {
        self.list_after(resource, namespace, None)
    }

    /// [`State::list`] from just after `after` (a page's last object), without walking the
    /// objects before it.
    pub fn list_after<'a>(
        &'a self,
        resource: &'a GroupResource,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (KeyRef<'a>, &'a StoredObject)> + use<'a> {
        use std::ops::Bound;
        let first = namespace.map_or(Bound::Unbounded, |ns| {
            Bound::Included(ScopedName::new(ns, ""))
        });
        // A bounded range needs no comparison per object, so counting what follows a page
        // stays cheap at a million objects.
        let end = namespace.map_or(Bound::Unbounded, |ns| Bound::Excluded(ScopedName::past(ns)));
        // `None`: the listing starts past every object of the type.
        let start = match after {
            Some(key) if key.resource < *resource => Some(first),
            Some(key) if key.resource > *resource => None,
            Some(key) => {
                let after = ScopedName::of(key);
                Some(match &first {
                    Bound::Included(first) if after < *first => Bound::Included(first.clone()),
                    _ => Bound::Excluded(after),
                })
            }
            None => Some(first),
        };
        let before_the_end = |start: &Bound<ScopedName>| match (start, &end) {
            (Bound::Excluded(s) | Bound::Included(s), Bound::Excluded(e)) => s < e,
            _ => true,
        };
        let range = match (start, self.objects.get(resource)) {
            (Some(start), Some(objects)) if before_the_end(&start) => {
                Some(objects.range((start, end)))
            }
            _ => None,
        };
        range.into_iter().flatten().map(move |(name, object)| {
            let (namespace, name) = name.parts();
            let key = KeyRef {
                resource,
                namespace,
                name,
            };
            (key, object)
        })
    }
}

type Completion = Box<dyn FnOnce(ApiResult<()>) + Send>;
type Job = Box<dyn FnOnce(&mut WriteTx<'_>) -> Completion + Send>;

/// The store: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Store {
    state: Arc<RwLock<State>>,
    log: Arc<EventLog>,
    authors: Arc<WriteRecord>,
    health: StoreHealth,
    /// The writer's queue; `None` once [`Store::close`] has run.
    jobs: Arc<RwLock<Option<mpsc::Sender<Job>>>>,
    /// The writer thread, until [`Store::close`] has waited for it.
    writer: Arc<Mutex<Option<thread::JoinHandle<()>>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// redb's page cache. Reads are served from the read model, never from redb (it is read once,
/// at start), so the cache only has to hold the B-tree's upper pages for writes; redb's own
/// default (1 GiB) would keep a second copy of every object in memory.
const PAGE_CACHE_BYTES: usize = 32 * 1024 * 1024;

fn storage_key(key: &ObjectKey) -> (&str, &str, &str, &str) {
    (
        &key.resource.group,
        &key.resource.resource,
        &key.namespace,
        &key.name,
    )
}

impl Store {
    /// Opens (or creates) the store file and loads every object into the read model, with
    /// Secrets stored in plaintext (tests and embedding; `serve` seals them, see
    /// [`Store::open_sealed`]).
    ///
    /// `history` bounds the event log a watch can resume from.
    pub fn open(path: &Path, history: usize) -> Result<Self, StoreError> {
        Self::open_sealed(path, history, None)
    }

    /// [`Store::open`], with Secrets sealed at rest by the key at `key_path`: created when the
    /// store holds no sealed value yet, and then every Secret still stored in plaintext (by an
    /// older backflow) is sealed at once. A store with sealed values and no key is refused.
    pub fn open_sealed(
        path: &Path,
        history: usize,
        key_path: Option<&Path>,
    ) -> Result<Self, StoreError> {
        let sealer = match key_path {
            Some(p) => AtRestKey::load(p, false)?,
            None => None,
        };
        let shown = path.display().to_string();
        let damaged = |detail: String| StoreError::Damaged {
            path: shown.clone(),
            detail,
        };
        // A damaged file may make redb panic rather than answer (debug builds assert on what no
        // file redb wrote holds): every panic of the open and the load is a damaged file.
        let (db, state, plaintext_secrets, authors) = without_panics(|| {
            let db = open_database(path)?;
            let load = |m: String| StoreError::Load {
                path: shown.clone(),
                message: m,
            };
            let (state, plaintext) = load_state(&db, sealer.as_ref(), key_path, &load)?;
            let authors = write_record::load(&db).map_err(&load)?;
            Ok::<_, StoreError>((db, state, plaintext, authors))
        })
        .map_err(|panic| damaged(format!("reading it failed: {panic}")))??;
        let load = |m: String| StoreError::Load {
            path: shown.clone(),
            message: m,
        };
        let sealer = match (sealer, key_path) {
            (None, Some(p)) => AtRestKey::load(p, true)?,
            (sealer, _) => sealer,
        };
        if let Some(at_rest) = &sealer {
            seal_plaintext(&db, &state, at_rest, &plaintext_secrets).map_err(&load)?;
        }
        let log = Arc::new(EventLog::new(history, state.resource_version));
        let state = Arc::new(RwLock::new(state));
        let (jobs, rx) = mpsc::channel::<Job>();
        let health = StoreHealth::default();
        let writer = Writer {
            db: Some(db),
            at_rest: sealer.map(Arc::new),
            path: path.to_path_buf(),
            state: state.clone(),
            log: log.clone(),
            authors: authors.clone(),
            health: health.clone(),
        };
        let writer = thread::Builder::new()
            .name("backflow-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(StoreError::Writer)?;
        Ok(Self {
            state,
            log,
            authors,
            health,
            jobs: Arc::new(RwLock::new(Some(jobs))),
            writer: Arc::new(Mutex::new(Some(writer))),
        })
    }

    /// Runs `op` against the latest state inside the next group commit and answers once the
    /// commit holding its changes is durable. An `Err` from `op` discards its changes.
    pub async fn write<T, F>(&self, op: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> ApiResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<ApiResult<T>>();
        let job: Job = Box::new(move |wtx: &mut WriteTx<'_>| {
            let result = wtx.run_op(op);
            Box::new(move |committed: ApiResult<()>| {
                let answer = match (committed, result) {
                    (Err(e), Ok(_)) => Err(e),
                    (_, r) => r,
                };
                let _ = tx.send(answer);
            })
        });
        let sent = self
            .jobs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            return Err(ApiError::ServiceUnavailable(
                "the store is shut down".into(),
            ));
        }
        rx.await
            .map_err(|_| ApiError::Internal("the store writer stopped before answering".into()))?
    }

    /// Reads the committed state.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let guard = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&guard)
    }

    /// The record of recent writes (who, what, when), for the mirror's commit authorship and
    /// `backflow history`; durable, bounded to [`WriteRecord::CAPACITY`] writes.
    #[must_use]
    pub fn authors(&self) -> &Arc<WriteRecord> {
        &self.authors
    }

    /// Whether the store can commit (the last commit's error, while commits fail).
    #[must_use]
    pub fn health(&self) -> &StoreHealth {
        &self.health
    }

    /// The event log watches read from.
    #[must_use]
    pub fn events(&self) -> &Arc<EventLog> {
        &self.log
    }

    /// Commits the writes already queued, stops the writer and waits until it has released the
    /// database file, so the same file can be opened again (a restart in the same process).
    /// Later writes, through any clone, fail with 503; reads keep answering from memory.
    pub async fn close(&self) {
        // Dropping the only sender ends the writer's loop once the queue is drained.
        self.jobs.write().unwrap_or_else(|e| e.into_inner()).take();
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            let joined = tokio::task::spawn_blocking(move || writer.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!("the store writer panicked while stopping");
            }
        }
    }
}

/// Reads every stored object into a read model (opening sealed Secrets with `sealer`), and
/// names the Secrets still stored in plaintext. The tables are created on a first start.
/// Opens (or creates) the database file with every page's checksum verified, so a file damaged
/// outside redb is refused as [`StoreError::Damaged`] rather than trusted. A file whose last
/// commit does not verify is refused too: redb would go back to the commit before it, and the
/// writes acknowledged since would be gone.
fn open_database(path: &Path) -> Result<Database, StoreError> {
    let shown = path.display().to_string();
    let mut builder = Database::builder();
    builder
        .set_cache_size(PAGE_CACHE_BYTES)
        .set_check_integrity_on_open(true)
        .set_repair_callback(|session| {
            // Past the first step only when the last commit does not verify (redb's repair
            // reports 0.3 before it falls back to the commit before).
            if session.progress() > 0.0 && session.progress() < 0.5 {
                session.abort();
            }
        });
    builder.create(path).map_err(|e| match e {
        redb::DatabaseError::RepairAborted => StoreError::Damaged {
            path: shown.clone(),
            detail: "its last commit does not verify".into(),
        },
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
            StoreError::Damaged {
                path: shown.clone(),
                detail,
            }
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
            ) =>
        {
            StoreError::Damaged {
                path: shown.clone(),
                detail: io.to_string(),
            }
        }
        other => StoreError::Open {
            path: shown.clone(),
            source: Box::new(other),
        },
    })
}

/// Runs `f`, answering a panic inside it as its message, with the panic hook quiet meanwhile
/// (start-up reports the damaged file once, as an error, not as a crash).
fn without_panics<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "redb stopped on what it read".into())
    })
}

fn load_state(
    db: &Database,
    sealer: Option<&AtRestKey>,
    key_path: Option<&Path>,
    load: &impl Fn(String) -> StoreError,
) -> Result<(State, Vec<ObjectKey>), StoreError> {
    let mut state = State::default();
    {
        let w = db.begin_write().map_err(|e| load(e.to_string()))?;
        w.open_table(OBJECTS).map_err(|e| load(e.to_string()))?;
        w.open_table(META).map_err(|e| load(e.to_string()))?;
        w.commit().map_err(|e| load(e.to_string()))?;
    }
    let r = db.begin_read().map_err(|e| load(e.to_string()))?;
    let meta = r.open_table(META).map_err(|e| load(e.to_string()))?;
    state.resource_version = meta
        .get(RESOURCE_VERSION)
        .map_err(|e| load(e.to_string()))?
        .map_or(0, |g| g.value());
    let objects = r.open_table(OBJECTS).map_err(|e| load(e.to_string()))?;
    let mut plaintext_secrets = Vec::new();
    for item in objects.iter().map_err(|e| load(e.to_string()))? {
        let (k, v) = item.map_err(|e| load(e.to_string()))?;
        let (group, resource, namespace, name) = k.value();
        let key = ObjectKey::new(GroupResource::new(group, resource), namespace, name);
        let opened;
        let bytes = if at_rest::is_sealed(v.value()) {
            let Some(at_rest) = sealer else {
                return Err(StoreError::KeyMissing {
                    key: key.to_string(),
                    path: key_path
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                });
            };
            opened = at_rest.open(&key, v.value())?;
            opened.as_slice()
        } else {
            if at_rest::is_sensitive(&key) {
                plaintext_secrets.push(key.clone());
            }
            v.value()
        };
        let obj = StoredObject::from_json(bytes).map_err(|e| StoreError::Corrupt {
            key: key.to_string(),
            source: e,
        })?;
        state.insert(key, obj);
    }
    Ok((state, plaintext_secrets))
}

/// Seals the Secrets `keys` names, which an older backflow stored in plaintext, in one commit.
fn seal_plaintext(
    db: &Database,
    state: &State,
    at_rest: &AtRestKey,
    keys: &[ObjectKey],
) -> Result<(), String> {
    if keys.is_empty() {
        return Ok(());
    }
    let w = db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut objects = w.open_table(OBJECTS).map_err(|e| e.to_string())?;
        for key in keys {
            let Some(value) = state.get(key) else {
                continue;
            };
            let sealed = at_rest.seal(key, value.json()).map_err(|e| e.to_string())?;
            objects
                .insert(storage_key(key), sealed.as_slice())
                .map_err(|e| e.to_string())?;
        }
    }
    w.commit().map_err(|e| e.to_string())?;
    tracing::info!(
        secrets = keys.len(),
        "sealed the Secrets an older backflow stored in plaintext"
    );
    Ok(())
}

struct Writer {
    /// `None` after a failed commit: redb refuses every later transaction once an I/O error
    /// happened, so the next batch opens the file again (which repairs it if needed).
    db: Option<Database>,
    /// Seals Secrets before they are written, when the store encrypts at rest.
    at_rest: Option<Arc<AtRestKey>>,
    path: std::path::PathBuf,
    state: Arc<RwLock<State>>,
    log: Arc<EventLog>,
    authors: Arc<WriteRecord>,
    health: StoreHealth,
}

/// Why the store cannot commit now (the last commit failed), shared with `/readyz`.
#[derive(Debug, Clone, Default)]
pub struct StoreHealth(Arc<Mutex<Option<String>>>);

impl StoreHealth {
    /// The error of the last commit, while commits fail.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        self.lock().clone()
    }

    fn set(&self, problem: Option<String>) {
        *self.lock() = problem;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How many queued writes one commit takes at most, so one batch cannot delay answers for long.
const MAX_BATCH: usize = 512;

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            let mut jobs = vec![first];
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            self.commit_batch(jobs);
        }
    }

    fn commit_batch(&mut self, jobs: Vec<Job>) {
        let (parts, completions) = {
            let state = self
                .state
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut tx = WriteTx::new(&state);
            let completions: Vec<Completion> = jobs.into_iter().map(|job| job(&mut tx)).collect();
            let parts = tx.into_parts();
            (parts, completions)
        };
        let write_tx::BatchParts {
            changes,
            events,
            authored,
        } = parts;
        if changes.is_empty() {
            for c in completions {
                c(Ok(()));
            }
            return;
        }
        let last_rv = events.last().map_or(0, |e| e.resource_version);
        let writes = write_record::of_batch(&events, &authored);
        if let Err(e) = self.persist(&changes, last_rv, &writes) {
            tracing::error!(error = %e, "store commit failed; the writes in this batch were not acknowledged");
            self.health.set(Some(e.clone()));
            // A database that saw an I/O error refuses every later transaction: drop it, and
            // open the file again for the next batch.
            self.db = None;
            for c in completions {
                c(Err(ApiError::Internal(format!(
                    "the store could not commit the write: {e}"
                ))));
            }
            return;
        }
        {
            let mut state = self
                .state
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (key, value) in changes {
                match value {
                    Some(v) => state.insert(key, v),
                    None => state.remove(&key),
                }
            }
            state.resource_version = last_rv;
        }
        // Before the watch events go out, so a watcher that reads the user finds it.
        for write in writes {
            self.authors.record(write);
        }
        self.log.append(events);
        for c in completions {
            c(Ok(()));
        }
    }

    fn persist(
        &mut self,
        changes: &BTreeMap<ObjectKey, Option<StoredObject>>,
        rv: u64,
        writes: &[backflow_api::RecordedWrite],
    ) -> Result<(), String> {
        if self.db.is_none() {
            let db = Database::builder()
                .set_cache_size(PAGE_CACHE_BYTES)
                .create(&self.path)
                .map_err(|e| {
                    format!(
                        "reopening {} after a failed commit: {e}",
                        self.path.display()
                    )
                })?;
            tracing::info!(path = %self.path.display(), "store reopened after a failed commit");
            self.db = Some(db);
        }
        let db = self.db.as_ref().ok_or("the store is not open")?;
        let w = db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut objects = w.open_table(OBJECTS).map_err(|e| e.to_string())?;
            for (key, value) in changes {
                match value {
                    Some(v) => {
                        let sealed;
                        let bytes =
                            match self.at_rest.as_ref().filter(|_| at_rest::is_sensitive(key)) {
                                Some(at_rest) => {
                                    sealed =
                                        at_rest.seal(key, v.json()).map_err(|e| e.to_string())?;
                                    sealed.as_slice()
                                }
                                None => v.json().as_ref(),
                            };
                        objects
                            .insert(storage_key(key), bytes)
                            .map_err(|e| e.to_string())?;
                    }
                    None => {
                        objects
                            .remove(storage_key(key))
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
            let mut meta = w.open_table(META).map_err(|e| e.to_string())?;
            meta.insert(RESOURCE_VERSION, rv)
                .map_err(|e| e.to_string())?;
        }
        write_record::persist(&w, writes)?;
        w.commit().map_err(|e| e.to_string())?;
        self.health.set(None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn put(store: &Store, key: ObjectKey, object: serde_json::Value) {
        store
            .write(move |tx| {
                tx.put(key, object);
                Ok(())
            })
            .await
            .expect("write");
    }

    #[tokio::test]
    async fn the_read_model_and_the_watch_history_hold_one_copy_of_each_object() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("store.redb"), 100).expect("open");
        let key = ObjectKey::new(GroupResource::new("", "configmaps"), "default", "big");
        for i in 0..3 {
            let object = serde_json::json!({"metadata": {"name": "big"}, "data": {"k": i}});
            put(&store, key.clone(), object).await;
        }
        let current = store.read(|s| s.get(&key).cloned()).expect("stored");
        let events = store.events().since(0).expect("history");
        assert_eq!(events.len(), 3);
        let last = events.last().expect("an event");
        let same = |a: &StoredObject, b: &StoredObject| a.json().as_ptr() == b.json().as_ptr();
        // Counted, not timed: the newest event's object is the read model's, not a copy, and
        // each event's previous object is the event before's.
        assert!(
            same(&current, &last.object),
            "one copy of the current object"
        );
        for pair in events.windows(2) {
            let previous = pair[1].previous.as_ref().expect("a previous version");
            assert!(
                same(previous, &pair[0].object),
                "one copy of each older version"
            );
        }
        // Held as its JSON, nothing more.
        assert_eq!(
            current.json().as_ref(),
            serde_json::to_vec(&current.value()).expect("json")
        );
    }

    #[tokio::test]
    async fn the_record_of_writes_names_who_wrote_what_and_survives_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.redb");
        let store = Store::open(&path, 100).expect("open");
        let key = write_record::configmap("demo");
        let object = serde_json::json!({"metadata": {"name": "demo"}});
        let (k, o) = (key.clone(), object.clone());
        store
            .write(move |tx| {
                tx.act_as(Some("alice".into()));
                tx.managed_by("kubectl-edit");
                tx.put(k, o);
                Ok(())
            })
            .await
            .expect("write");
        put(&store, key.clone(), object).await;
        let (k, event) = (key.clone(), write_record::event("e"));
        store
            .write(move |tx| {
                tx.delete(&k);
                tx.put(event, serde_json::json!({"metadata": {"name": "e"}}));
                Ok(())
            })
            .await
            .expect("write");
        store.close().await;
        let store = Store::open(&path, 100).expect("reopen");
        let writes = store.authors().writes_of(&key);
        let told: Vec<(u64, Option<&str>, backflow_api::WriteVerb)> = writes
            .iter()
            .map(|w| (w.resource_version, w.user.as_deref(), w.verb))
            .collect();
        use backflow_api::WriteVerb::{Create, Delete, Update};
        assert_eq!(
            told,
            [
                (1, Some("alice"), Create),
                (2, None, Update),
                (3, None, Delete)
            ]
        );
        assert_eq!(store.authors().user_of(&key, 1).as_deref(), Some("alice"));
        assert_eq!(writes[0].manager.as_deref(), Some("kubectl-edit"));
        assert_eq!(writes[1].manager, None);
        assert!(
            store.authors().after(0, 100).iter().all(|w| w.key == key),
            "the Event is not recorded"
        );
    }

    #[test]
    fn the_read_model_finds_lists_and_forgets_by_type_namespace_and_name() {
        let nodes = GroupResource::new("", "nodes");
        let cms = GroupResource::new("", "configmaps");
        let object =
            |name: &str| StoredObject::new(&serde_json::json!({"metadata": {"name": name}}));
        let mut state = State::default();
        state.insert(ObjectKey::new(nodes.clone(), "", "n1"), object("n1"));
        state.insert(ObjectKey::new(cms.clone(), "a", "n1"), object("a/n1"));
        state.insert(ObjectKey::new(cms.clone(), "", "n1"), object("cluster n1"));
        let listed = |state: &State, gr: &GroupResource, ns: Option<&str>| {
            state
                .list(gr, ns)
                .map(|(k, _)| k.to_key())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            listed(&state, &nodes, None),
            [ObjectKey::new(nodes.clone(), "", "n1")]
        );
        assert_eq!(
            listed(&state, &cms, None),
            [
                ObjectKey::new(cms.clone(), "", "n1"),
                ObjectKey::new(cms.clone(), "a", "n1")
            ]
        );
        assert_eq!(listed(&state, &cms, Some("")).len(), 1);
        let got = state.get(&ObjectKey::new(cms.clone(), "a", "n1"));
        assert_eq!(got.map(StoredObject::value), Some(object("a/n1").value()));
        assert!(state.get(&ObjectKey::new(cms.clone(), "", "a")).is_none());
        state.remove(&ObjectKey::new(nodes.clone(), "", "n1"));
        assert!(listed(&state, &nodes, None).is_empty());
        assert!(
            !state.objects.contains_key(&nodes),
            "an emptied type is dropped"
        );
        state.remove(&ObjectKey::new(nodes.clone(), "", "gone"));
        assert_eq!(listed(&state, &cms, None).len(), 2);
    }

    #[tokio::test]
    async fn a_listing_keeps_to_its_scope_from_any_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("store.redb"), 100).expect("open");
        let cms = GroupResource::new("", "configmaps");
        let keys = [
            ObjectKey::new(GroupResource::new("", "configmap"), "a", "x"),
            ObjectKey::new(cms.clone(), "a", "x"),
            ObjectKey::new(cms.clone(), "a", "y"),
            ObjectKey::new(cms.clone(), "ab", "x"),
            ObjectKey::new(cms.clone(), "b", "x"),
            ObjectKey::new(GroupResource::new("", "configmapsx"), "a", "x"),
            ObjectKey::new(GroupResource::new("apps", "configmaps"), "a", "x"),
        ];
        for key in keys.clone() {
            let object = serde_json::json!({"metadata": {"name": key.name.clone()}});
            put(&store, key, object).await;
        }
        let names = |ns: Option<&str>, after: Option<&ObjectKey>| {
            store.read(|s| {
                s.list_after(&cms, ns, after)
                    .map(|(k, _)| format!("{}/{}", k.namespace, k.name))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(names(None, None), ["a/x", "a/y", "ab/x", "b/x"]);
        assert_eq!(names(Some("a"), None), ["a/x", "a/y"]);
        assert_eq!(names(Some("a"), Some(&keys[1])), ["a/y"]);
        assert_eq!(names(Some("a"), Some(&keys[2])), Vec::<String>::new());
        assert_eq!(names(None, Some(&keys[2])), ["ab/x", "b/x"]);
        // A start outside the scope: before it lists all, after it none.
        assert_eq!(names(Some("ab"), Some(&keys[0])), ["ab/x"]);
        assert_eq!(names(Some("a"), Some(&keys[4])), Vec::<String>::new());
        assert_eq!(names(None, Some(&keys[6])), Vec::<String>::new());
    }

    #[tokio::test]
    async fn the_read_model_holds_each_object_as_its_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("store.redb"), 100).expect("open");
        let data = "x".repeat(1024);
        for i in 0..200 {
            let key = ObjectKey::new(
                GroupResource::new("", "configmaps"),
                "default",
                format!("c{i}"),
            );
            let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i}"), "namespace": "default", "labels": {"app": "a"}},
                "data": {"k": data}});
            put(&store, key, object).await;
        }
        // Counted, not timed: 1 KiB of data and its metadata take under 1.2 KiB each (a parsed
        // `Value` of the same object takes about four times that).
        let (count, bytes) = store.read(|s| {
            s.list(&GroupResource::new("", "configmaps"), None)
                .fold((0, 0), |(n, b), (_, o)| (n + 1, b + o.len()))
        });
        assert_eq!(count, 200);
        assert!(bytes <= 200 * 1200, "{bytes} bytes for 200 objects");
    }

    #[tokio::test]
    async fn secrets_an_older_store_kept_in_plaintext_are_sealed_when_a_key_comes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.redb");
        let key_path = dir.path().join("store.key");
        let secret = ObjectKey::new(GroupResource::new("", "secrets"), "default", "db");
        let plain = Store::open(&path, 10).expect("open without a key");
        let object = serde_json::json!({"metadata": {"name": "db"}, "data": {"k": "djE="}});
        put(&plain, secret.clone(), object).await;
        plain.close().await;
        drop(plain);

        let sealed = Store::open_sealed(&path, 10, Some(&key_path)).expect("open with a key");
        assert!(sealed.read(|s| s.get(&secret).is_some()), "still there");
        sealed.close().await;
        drop(sealed);
        // Sealed now: opening without the key is refused rather than serving ciphertext.
        let err = Store::open_sealed(&path, 10, Some(&dir.path().join("elsewhere.key")))
            .expect_err("sealed");
        assert!(matches!(err, StoreError::KeyMissing { .. }), "{err}");
        let reopened = Store::open_sealed(&path, 10, Some(&key_path)).expect("with the key");
        assert!(reopened.read(|s| s.get(&secret).is_some()));
    }
}
