//! backflow's own applier (`NativeClaim`): server-side apply of what a commit's folders declare.
//!
//! Field manager `backflow-applier`, forced; every object it applies carries the ownership
//! label `backflow.dev/applier: <namespace>.<claim>` and an inventory entry, and only objects
//! with both are ever pruned. Only objects Git changed since the last applied commit (or that
//! are missing live) are written whole, and only when the live side does not hold them yet; the
//! rest at most get the label (a merge patch touching no other field), so an apply never
//! reverts a live edit to an object Git did not change, and nothing is rewritten for nothing.
//! CRDs go first, then Namespaces, then the rest. One object that fails is reported and the
//! others are applied. A file that cannot be read is skipped and reported: what it declared
//! before is neither written nor pruned, and everything else is (a new file that cannot be read
//! may declare anything, so it holds every prune). The blast-radius rules of [`crate::guard`]
//! apply: backflow's own configuration is never a Git input, and a mass prune waits for a
//! person.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt;

use backflow_api::config::InventoryEntry;
use backflow_api::config::NativeClaim;
use backflow_api::{AppliedBy, GroupResource, ObjectKey};
use backflow_board::{ApplyWindows, Pruned};
use backflow_decision::CommitId;
use backflow_decision::object_write::{
    self, LiveOwner, ObjectWrite, OperationKind, Prune, RemovedLive, RemovedObject,
};
use backflow_git::WorkerHandle;
use backflow_manifest::{
    DeclarationCache, DeclarationProblem, Declared, DeclaredObject, Identity,
    declared_objects_cached, declared_objects_within, object_path, sops_object_path,
};

use crate::guard::{CONFIRM_PRUNE, Protection, PruneGuard, PruneHold, confirms, protection};
use crate::live_reads::{LIST_FROM, LiveReads, Wanted};
pub use crate::phases::ApplyPhases;
use crate::phases::Stopwatch;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, Preconditions,
};
use kube::discovery::{ApiCapabilities, Scope};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "backflow-applier";

/// Writes one apply has in flight at once within a tier: the store commits concurrent writes
/// together (group commit), where one at a time each waits for a durable commit of its own.
const WRITES_IN_FLIGHT: usize = 32;
use backflow_api::APPLIER_LABEL;

/// What one apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Objects written.
    pub applied: usize,
    /// Objects whose declared fields already held (not written).
    pub unchanged: usize,
    /// Objects another applier owns (Flux, Argo CD, another claim): never written.
    pub foreign: Vec<String>,
    /// Objects Git changed (or removed, of those the applier owns) that were edited live after
    /// the flush (or in its second), or while the apply was reading them: left as they are for
    /// now. Ask again with them in [`ApplyRequest::retry`]: either the edit
    /// reached Git meanwhile (and wins), or Git's change is applied then.
    pub deferred: Vec<Identity>,
    /// Objects whose live edit the mirror could not write into Git (a file blocked it): left
    /// as they are, neither written nor pruned. Ask again once their edit reached Git.
    pub spared: Vec<SparedObject>,
    /// Objects deleted because the commit no longer declares them.
    pub pruned: usize,
    /// What could not be applied (or the folder not read at all), one line each.
    pub failures: Vec<String>,
    /// Files that could not be read, one line each: skipped, everything else was applied.
    pub unreadable: Vec<String>,
    /// Changes a push made to objects out of its reach (backflow's own configuration, system
    /// namespaces): not applied, one line each.
    pub refused: Vec<String>,
    /// A prune held back for a person to confirm (everything else was applied).
    pub prune_held: Option<PruneHold>,
    /// Secrets Git holds in plain text, one line each: applied (as Flux would), and moved to
    /// an encrypted file by backflow's next write of them.
    pub plaintext: Vec<String>,
    /// What the applier owns after this apply.
    pub inventory: Vec<InventoryEntry>,
    /// Where the apply's time went.
    pub phases: ApplyPhases,
}

impl ApplyReport {
    /// Counts what was done to `object`; says whether the applier owns it now.
    fn count(&mut self, object: &DeclaredObject, write: Write) -> bool {
        match write {
            Write::Apply | Write::Stamp => self.applied += 1,
            Write::None => self.unchanged += 1,
            Write::Absent | Write::Protected => return false,
            Write::Refused(why) => {
                let id = &object.identity;
                self.refused.push(format!(
                    "{}: {} {} is {why}; it changes only through the API",
                    object.path,
                    id.kind,
                    if id.namespace.is_empty() {
                        id.name.clone()
                    } else {
                        format!("{}/{}", id.namespace, id.name)
                    }
                ));
                return false;
            }
            Write::Foreign => {
                self.foreign.push(object.path.clone());
                return false;
            }
            Write::Deferred => self.deferred.push(object.identity.clone()),
            Write::Spared(key) => self.spared.push(SparedObject {
                identity: object.identity.clone(),
                key,
            }),
        }
        true
    }
}

/// An object an apply left alone because its live edit is not in Git yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparedObject {
    /// As the folder declares it.
    pub identity: Identity,
    /// As the live side serves it.
    pub key: ObjectKey,
}

/// An applier backflow holds: carries out one operation (applies `commit`), starting from the
/// inventory of the last one. Flux and Argo CD drivers implement it too.
pub trait Applier: Send + Sync {
    /// Applies `request.commit`; the report says what happened, failures included.
    fn apply(
        &self,
        request: ApplyRequest,
    ) -> Pin<Box<dyn Future<Output = ApplyReport> + Send + '_>>;

    /// Keeps the applier held between applies (a Flux Kustomization a person resumed is
    /// suspended again). Answers how it was found, for the hand-back: `Some(suspended)` for an
    /// applier backflow holds by switching it off. backflow's own applier needs nothing.
    fn hold(&self) -> Pin<Box<dyn Future<Output = Result<Option<bool>, String>> + Send + '_>> {
        Box::pin(async { Ok(None) })
    }

    /// Gives the applier back as it was before backflow held it (`suspended`: as `hold` first
    /// found it); `inventory`: what the claim's applies stamped.
    fn release(
        &self,
        suspended: bool,
        inventory: Vec<InventoryEntry>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        let _ = (suspended, inventory);
        Box::pin(async { Ok(()) })
    }
}

/// One operation, as the applier is asked to carry it out.
#[derive(Debug, Clone)]
pub struct ApplyRequest {
    /// The commit to apply (the tip a flush produced).
    pub commit: CommitId,
    /// The commit the last successful operation applied.
    pub since: Option<CommitId>,
    /// The commit of the operation asked before this one, when it is not `since`: it may have
    /// written some of its objects (cut short, failed, interrupted by a restart), so an object
    /// it declared otherwise than this commit is changed too, whatever `since` says — as the
    /// mirror reads the live side (`LiveHeld::applying`): else, after a force-push past that
    /// commit, Git and the live side could stay apart with nothing left to apply.
    pub tried: Option<CommitId>,
    /// When the flush before this apply was asked for: a live edit made since is not in the
    /// commit, and is never overwritten (it reaches Git, and the API side wins).
    pub flushed_at: SystemTime,
    /// What the last operation applied.
    pub inventory: Vec<InventoryEntry>,
    /// Objects an earlier apply deferred: considered changed whatever `since` says.
    pub retry: BTreeSet<Identity>,
    /// A catch-up only (adopt, converge): stamp what is live and declared, create, rewrite and
    /// prune nothing. Git's changes reach the live side as foreign commits (a converge whose tip
    /// is past the last applied commit, or meets the branch for the first time, carries that
    /// reason too), and an object missing live may be a delete the mirror has not published
    /// yet: re-creating it would undo an acknowledged delete.
    pub stamp_only: bool,
    /// An operation a restart found in flight: an applier that runs on its own (Flux, Argo CD)
    /// follows the request it finds it working on rather than asking again.
    pub follow: bool,
    /// Where the applier says what it deletes before deleting it.
    pub prunes: PruneNotice,
    /// Live objects whose edit the mirror could not write into Git: never written or pruned
    /// (backflow's own applier; the edit is published once the file that blocked it is fixed).
    pub spare: BTreeSet<ObjectKey>,
}

/// The mirror's apply windows of the claim's targets, told of every object the applier is about
/// to delete: the delete's watch event is then known as the apply's own (kept out of Git) rather
/// than somebody's delete (which, judged on a newer tip, could remove a file a push brought
/// back). Flux and Argo CD prune on their own; their deletes are mirrored.
#[derive(Debug, Clone, Default)]
pub struct PruneNotice {
    windows: Option<ApplyWindows>,
    targets: Vec<(String, String)>,
}

impl PruneNotice {
    /// Notices to `windows` for `targets` (namespace, name of each `GitTarget`).
    #[must_use]
    pub fn new(windows: ApplyWindows, targets: Vec<(String, String)>) -> Self {
        Self {
            windows: Some(windows),
            targets,
        }
    }

    fn note(&self, object: &Pruned) {
        if let Some(windows) = &self.windows {
            windows.note_prune(&self.targets, object);
        }
    }
}

/// What the prunes of one operation share: the types resolved so far, where deletes are
/// announced, the flush's second (an object edited since is left) and the report.
struct Pruning<'a> {
    kinds: &'a mut Kinds,
    notice: &'a PruneNotice,
    cutoff: u64,
    /// Live objects whose edit is not in Git yet: never pruned.
    spare: &'a BTreeSet<ObjectKey>,
    report: &'a mut ApplyReport,
}

/// What one prune did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PruneOutcome {
    /// Deleted.
    Deleted,
    /// Not there, or not this applier's: nothing to own any more.
    Gone,
    /// Edited after the flush (or while it was read): left, and still owned. The edit reaches
    /// Git and wins.
    Kept,
    /// Its live edit is not in Git yet (a file blocked it): left, and still owned.
    Spared,
}

/// Deletes `live` as it was judged (its uid and resourceVersion as preconditions), announcing it
/// to the mirror first. An edit since (409) keeps it; somebody else's delete (404) is gone.
async fn delete_judged(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    live: &DynamicObject,
    notice: &PruneNotice,
) -> Result<PruneOutcome, String> {
    let name = live.name_any();
    let key = ObjectKey::new(
        GroupResource::new(resource.group.clone(), resource.plural.clone()),
        live.namespace().unwrap_or_default(),
        name.clone(),
    );
    notice.note(&Pruned {
        key,
        uid: live.uid().unwrap_or_default(),
    });
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: live.resource_version(),
            uid: live.uid(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(PruneOutcome::Deleted),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(PruneOutcome::Kept),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(PruneOutcome::Gone),
        Err(e) => Err(backflow_board::explain(&e)),
    }
}

/// The live object `name` (`None`: not there) as JSON.
async fn read_one(api: &Api<DynamicObject>, name: &str) -> Result<Option<Value>, String> {
    let live = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading {name}: {}", backflow_board::explain(&e)))?;
    Ok(live.map(|l| serde_json::to_value(&l).unwrap_or(Value::Null)))
}

/// Carries out `prune` of `live` (read as it was judged).
async fn carry_out(
    prune: Prune,
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    live: Option<&DynamicObject>,
    pruning: &Pruning<'_>,
) -> Result<PruneOutcome, String> {
    match (prune, live) {
        (Prune::Delete, Some(live)) => delete_judged(api, resource, live, pruning.notice).await,
        (Prune::Kept, _) => Ok(PruneOutcome::Kept),
        (Prune::Spared, _) => Ok(PruneOutcome::Spared),
        (Prune::Gone | Prune::Delete, _) => Ok(PruneOutcome::Gone),
    }
}

/// What [`NativeApplier::prune`] looks at for one operation.
struct Gone<'a> {
    /// The last applied commit.
    since: Option<CommitId>,
    /// The commit applied now.
    commit: CommitId,
    /// What it declares.
    declared: &'a BTreeSet<Identity>,
    /// The inventory of the last operation, by id.
    owned: &'a BTreeSet<String>,
    /// What its unreadable files declared: never pruned.
    unreadable: &'a Unreadable,
}

/// What a commit's unreadable files declare, as far as it can be known.
#[derive(Debug, Default)]
struct Unreadable {
    /// Objects they declare (a document that names its object but cannot be decrypted), or
    /// declared when the last applied commit could read them.
    objects: Objects,
    /// An unreadable file the last applied commit did not declare anything in: it may declare
    /// anything, so nothing is pruned.
    new_file: Option<String>,
}

impl Unreadable {
    /// What `problems` declare, by `by_path`: the objects each file held as far as is known.
    fn of(problems: &[DeclarationProblem], by_path: &BTreeMap<String, Vec<Identity>>) -> Self {
        let mut out = Self::default();
        for problem in problems {
            if let Some(identity) = &problem.identity {
                out.objects.insert(identity.clone());
            }
            let known = by_path.get(problem.path.as_str());
            for identity in known.into_iter().flatten() {
                out.objects.insert(identity.clone());
            }
            if known.is_none() && problem.identity.is_none() && out.new_file.is_none() {
                out.new_file = Some(problem.path.clone());
            }
        }
        out
    }

    /// Whether `identity` (as an inventory names it: its namespace resolved) may be declared by
    /// an unreadable file.
    fn declares(&self, identity: &Identity) -> bool {
        self.objects.has_applied(identity)
    }
}

/// A set of objects, looked up across the two ways they are named: as a document names its
/// object (the namespace may be left out) and as an inventory names it (the namespace as
/// applied). Lookups are by key, not by scanning: a wipe compares every removed object with
/// every owned one.
#[derive(Debug, Default)]
struct Objects {
    exact: BTreeSet<Identity>,
    /// Group, kind and name of every member.
    by_name: BTreeSet<(String, String, String)>,
    /// The same, of members named without a namespace.
    unnamespaced: BTreeSet<(String, String, String)>,
}

fn by_name(identity: &Identity) -> (String, String, String) {
    (
        identity.group.clone(),
        identity.kind.clone(),
        identity.name.clone(),
    )
}

impl Objects {
    fn insert(&mut self, identity: Identity) {
        self.by_name.insert(by_name(&identity));
        if identity.namespace.is_empty() {
            self.unnamespaced.insert(by_name(&identity));
        }
        self.exact.insert(identity);
    }

    /// Of members named as documents name them: whether one is `applied`.
    fn has_applied(&self, applied: &Identity) -> bool {
        self.exact.contains(applied) || self.unnamespaced.contains(&by_name(applied))
    }

    /// Of members named as an inventory names them: whether one is `declared`.
    fn has_declared(&self, declared: &Identity) -> bool {
        if declared.namespace.is_empty() {
            self.by_name.contains(&by_name(declared))
        } else {
            self.exact.contains(declared)
        }
    }
}

impl FromIterator<Identity> for Objects {
    fn from_iter<I: IntoIterator<Item = Identity>>(iter: I) -> Self {
        let mut out = Self::default();
        for identity in iter {
            out.insert(identity);
        }
        out
    }
}

/// How one object is brought in line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Write {
    /// Nothing to do.
    None,
    /// Only the ownership label is missing: a merge patch adds it, no other field is touched.
    Stamp,
    /// Server-side apply of the whole declared object.
    Apply,
    /// Git changed it, but it was edited live after the flush: left alone.
    Deferred,
    /// Missing live during a catch-up: not re-created (the delete may not be published yet).
    Absent,
    /// Another applier owns it: two appliers applying one object fight, so it is left alone.
    Foreign,
    /// Its live edit is not in Git yet (a file blocked it): left as it is, still owned.
    Spared(ObjectKey),
    /// Out of a push's reach, and the live side holds what Git declares: nothing to do, and not
    /// owned (never pruned).
    Protected,
    /// Out of a push's reach, and Git declares something else: refused, reported.
    Refused(Protection),
}

/// What an apply read from Git.
struct GitSide {
    /// What the commit applied declares.
    declared: Declared,
    /// What the last applied commit declared, by identity.
    before: BTreeMap<Identity, DeclaredObject>,
    /// What the commit of the operation asked before declared, when it is neither.
    before_tried: BTreeMap<Identity, DeclaredObject>,
    /// Whether the commit's folders could be read at all.
    folder_read: bool,
}

/// What an apply judges each object by besides its content.
#[derive(Clone, Copy)]
struct Judging<'a> {
    /// The flush's second: an object edited then or later is left to the next apply.
    cutoff: u64,
    /// Objects whose live edit is not in Git yet (a file blocked it): left as they are.
    spare: &'a BTreeSet<ObjectKey>,
}

/// The folders of one claim on one branch, and how to read and decrypt them.
pub struct NativeApplier {
    /// What reads and writes the objects: backflow's own client, or one acting as the claim's
    /// service account.
    client: Client,
    /// backflow's own client, which reads the claim.
    own: Client,
    /// `<namespace>.<claim>`: the ownership label's value.
    owner: String,
    /// The same, as the owner of what this applier applies.
    applied_by: AppliedBy,
    worker: WorkerHandle,
    folders: Vec<String>,
    identities: Vec<backflow_sops::Identity>,
    /// The claim's namespace and name, where a held prune's confirmation is read.
    claim: (String, String),
    prune_guard: PruneGuard,
    /// What each file declared when last read: most files are the same push after push.
    declarations: std::sync::Mutex<DeclarationCache>,
    /// The kinds the last successful apply resolved (see [`NativeApplier::kinds_known`]).
    kinds: std::sync::Mutex<Kinds>,
}

impl std::fmt::Debug for NativeApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeApplier")
            .field("owner", &self.owner)
            .field("folders", &self.folders)
            .finish_non_exhaustive()
    }
}

impl NativeApplier {
    /// The applier of claim `namespace/name`, applying `folders` of the branch `worker` writes,
    /// decrypting SOPS files with `identities`.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        worker: WorkerHandle,
        folders: Vec<String>,
        identities: Vec<backflow_sops::Identity>,
    ) -> Self {
        Self {
            own: client.clone(),
            client,
            owner: format!("{namespace}.{name}"),
            applied_by: AppliedBy::claim(namespace, name),
            worker,
            folders,
            identities,
            claim: (namespace.to_string(), name.to_string()),
            prune_guard: PruneGuard::default(),
            declarations: std::sync::Mutex::default(),
            kinds: std::sync::Mutex::default(),
        }
    }

    /// The same, reading and writing the objects through `acting` (a client acting as the
    /// claim's service account) while the claim itself is read with backflow's own client.
    #[must_use]
    pub fn acting_through(mut self, acting: Client) -> Self {
        self.client = acting;
        self
    }

    /// The same, holding prunes by `guard` rather than the default.
    #[must_use]
    pub fn with_prune_guard(mut self, guard: PruneGuard) -> Self {
        self.prune_guard = guard;
        self
    }

    /// The commit the claim's confirmation annotation names, if any.
    async fn confirmation(&self) -> Option<String> {
        let api = Api::<NativeClaim>::namespaced(self.own.clone(), &self.claim.0);
        let claim = api.get_opt(&self.claim.1).await.ok().flatten()?;
        claim.annotations().get(CONFIRM_PRUNE).cloned()
    }

    /// Every file of the claim's folders at `commit`, and what their kustomize layouts build
    /// from outside them (a base elsewhere in the repository), as Flux reads the whole
    /// repository. Only the folders' own files declare objects
    /// ([`declared_objects_within`]).
    async fn files(&self, commit: CommitId) -> Result<Vec<(String, Vec<u8>)>, String> {
        let mut files = Vec::new();
        for folder in &self.folders {
            files.extend(self.read(commit, folder).await?);
        }
        let mut read: Vec<String> = self.folders.clone();
        // A base may name another base: follow, a few layers deep at most.
        for _ in 0..8 {
            let wanted = backflow_manifest::kustomize::outside_paths(&files, &read);
            if wanted.is_empty() {
                break;
            }
            for path in wanted {
                // What cannot be read leaves the layout unbuilt, reported as such.
                let found = self.read(commit, &path).await.unwrap_or_default();
                if found.is_empty() {
                    // A file, not a folder: read its folder and keep it alone.
                    let parent = path.rsplit_once('/').map_or("", |(d, _)| d);
                    let parent = self.read(commit, parent).await.unwrap_or_default();
                    files.extend(parent.into_iter().filter(|(p, _)| *p == path));
                } else {
                    files.extend(found);
                }
                read.push(path);
            }
        }
        Ok(files)
    }

    /// The files under `folder` at `commit`.
    async fn read(&self, commit: CommitId, folder: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
        match self.worker.read_folder(commit, folder.to_string()).await {
            Ok(Ok(read)) => Ok(read.into_iter().map(|f| (f.path, f.content)).collect()),
            Ok(Err(e)) => Err(format!("cannot read {folder} at {commit}: {e}")),
            Err(e) => Err(format!("cannot read {folder}: {e}")),
        }
    }

    /// The files of the folders at `commit` (none without one, or when they cannot be read).
    async fn files_at(&self, commit: Option<CommitId>) -> Vec<(String, Vec<u8>)> {
        match commit {
            Some(commit) => self.files(commit).await.unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// What `files` declare, by identity: objects Git did not change since the last applied
    /// commit are only stamped, never written, so an apply reverts nothing it was not asked to
    /// change.
    fn by_identity(&self, files: &[(String, Vec<u8>)]) -> BTreeMap<Identity, DeclaredObject> {
        if files.is_empty() {
            return BTreeMap::new();
        }
        self.declared(files)
            .objects
            .into_iter()
            .map(|o| (o.identity.clone(), o))
            .collect()
    }

    /// What `files` declare, parsing only what the applier's cache has not read before.
    fn declared(&self, files: &[(String, Vec<u8>)]) -> Declared {
        let mut cache = self
            .declarations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        declared_objects_cached(files, &self.folders, &self.identities, &mut cache)
    }

    /// Which objects each file held, as far as is known: the files of the last applied commit,
    /// and the place backflow writes each object the claim owns (an object the API created and
    /// the claim adopted has its file there, though no applied commit read it yet).
    async fn known_paths(
        &self,
        before: &BTreeMap<Identity, DeclaredObject>,
        owned: &[InventoryEntry],
        kinds: &mut Kinds,
    ) -> BTreeMap<String, Vec<Identity>> {
        let mut by_path: BTreeMap<String, Vec<Identity>> = BTreeMap::new();
        for (identity, object) in before {
            by_path
                .entry(object.path.clone())
                .or_default()
                .push(identity.clone());
        }
        for entry in owned {
            let Some(identity) = entry_identity(&entry.id) else {
                continue;
            };
            let version = entry.v.rsplit('/').next().unwrap_or("v1");
            let gvk = GroupVersionKind::gvk(&identity.group, version, &identity.kind);
            let Ok((resource, caps)) = kinds.resolve(&self.client, &gvk).await else {
                continue;
            };
            let namespace = match caps.scope {
                Scope::Namespaced => identity.namespace.clone(),
                Scope::Cluster => String::new(),
            };
            let key = ObjectKey::new(
                GroupResource::new(resource.group.clone(), resource.plural.clone()),
                namespace,
                identity.name.clone(),
            );
            for folder in &self.folders {
                for path in [object_path(folder, &key), sops_object_path(folder, &key)]
                    .into_iter()
                    .flatten()
                {
                    by_path.entry(path).or_default().push(identity.clone());
                }
            }
        }
        by_path
    }

    async fn run(&self, request: ApplyRequest) -> ApplyReport {
        let ApplyRequest {
            commit,
            since,
            tried,
            flushed_at,
            inventory: previous,
            retry,
            stamp_only,
            follow: _,
            prunes,
            spare,
        } = request;
        let cutoff = flushed_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut report = ApplyReport::default();
        let GitSide {
            declared,
            before,
            before_tried,
            folder_read,
        } = self.read_git(commit, since, tried, &mut report).await;
        let mut clock = Stopwatch::start();
        let mut kinds = self.kinds_known(&declared, &before);
        let unreadable = self
            .unreadable(&declared, &before, &previous, &mut kinds, &mut report)
            .await;
        report.phases.declare += clock.lap();
        let declared_ids = identities(&declared.objects);
        report.plaintext = plaintext_secrets(&declared.objects);
        // What Git says of each object; `apply_one` adds what the live side shows.
        let facts = |object: &DeclaredObject| object_write::DeclaredObject {
            git_changed: object_write::git_changed(
                &object.value,
                before.get(&object.identity).map(|o| &o.value),
                before_tried.get(&object.identity).map(|o| &o.value),
            ),
            retried: retry.contains(&object.identity),
            operation: OperationKind::of(stamp_only),
            spared: false,
            live: None,
        };
        let judging = Judging {
            cutoff,
            spare: &spare,
        };
        let judged = to_judge(declared.objects, stamp_only, &facts);
        let mut inventory = self
            .apply_all(judged, facts, judging, &mut kinds, &mut report)
            .await;
        if folder_read && !stamp_only && unreadable.new_file.is_none() {
            let owned: BTreeSet<String> = previous.iter().map(|e| e.id.clone()).collect();
            let gone = Gone {
                since,
                commit,
                declared: &declared_ids,
                owned: &owned,
                unreadable: &unreadable,
            };
            let mut pruning = Pruning {
                kinds: &mut kinds,
                notice: &prunes,
                cutoff,
                spare: &spare,
                report: &mut report,
            };
            let mut clock = Stopwatch::start();
            self.prune(&gone, &previous, &mut inventory, &mut pruning)
                .await;
            report.phases.prune = clock.lap();
        } else {
            keep_owning(&mut report, &unreadable, previous, &mut inventory);
        }
        inventory.sort();
        report.inventory = inventory;
        self.keep_kinds(kinds, &report);
        report
    }

    /// Keeps the kinds an apply resolved for the next, when it had no failure.
    fn keep_kinds(&self, mut kinds: Kinds, report: &ApplyReport) {
        if report.failures.is_empty() {
            kinds.missing.clear();
            *self.lock_kinds() = kinds;
        }
    }

    /// What the folders declare at `commit`, and at the last applied commit (`since`) and the
    /// one asked before (`tried`, when it is neither); the read and the parse timed in `report`.
    async fn read_git(
        &self,
        commit: CommitId,
        since: Option<CommitId>,
        tried: Option<CommitId>,
        report: &mut ApplyReport,
    ) -> GitSide {
        let mut clock = Stopwatch::start();
        let files = self.files(commit).await.unwrap_or_else(|e| {
            report.failures.push(e);
            Vec::new()
        });
        let folder_read = report.failures.is_empty();
        let tried = tried.filter(|t| Some(*t) != since && *t != commit);
        let (files_before, files_tried) = (self.files_at(since).await, self.files_at(tried).await);
        report.phases.read = clock.lap();
        let side = GitSide {
            declared: self.declared(&files),
            before: self.by_identity(&files_before),
            before_tried: self.by_identity(&files_tried),
            folder_read,
        };
        // What this apply did not read (an older commit's files) is not read again soon.
        self.declarations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .sweep();
        report.phases.declare = clock.lap();
        side
    }

    /// The kinds the last apply resolved, when it succeeded and Git changed no CRD since the
    /// last applied commit (`before`; a CRD applied may change what a kind is); none otherwise.
    /// A kind deleted meanwhile makes a write fail, and an apply that failed keeps nothing for
    /// the next.
    fn kinds_known(
        &self,
        declared: &Declared,
        before: &BTreeMap<Identity, DeclaredObject>,
    ) -> Kinds {
        let known = std::mem::take(&mut *self.lock_kinds());
        if crds_unchanged(&declared.objects, before) {
            known
        } else {
            Kinds::default()
        }
    }

    fn lock_kinds(&self) -> std::sync::MutexGuard<'_, Kinds> {
        self.kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The files of the commit that cannot be read, reported in `report`, and which objects
    /// they declared as far as is known (those stay owned and unpruned).
    async fn unreadable(
        &self,
        declared: &Declared,
        before: &BTreeMap<Identity, DeclaredObject>,
        previous: &[InventoryEntry],
        kinds: &mut Kinds,
        report: &mut ApplyReport,
    ) -> Unreadable {
        report.unreadable = declared
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.path, p.reason))
            .collect();
        if declared.problems.is_empty() {
            return Unreadable::default();
        }
        let by_path = self.known_paths(before, previous, kinds).await;
        Unreadable::of(&declared.problems, &by_path)
    }

    /// Brings each of `objects` in line (CRDs first, then Namespaces, then the rest; within
    /// each tier up to [`WRITES_IN_FLIGHT`] at once), counting it in `report`; returns what the
    /// applier owns of them afterwards.
    async fn apply_all(
        &self,
        objects: Vec<DeclaredObject>,
        facts: impl Fn(&DeclaredObject) -> object_write::DeclaredObject,
        judging: Judging<'_>,
        kinds: &mut Kinds,
        report: &mut ApplyReport,
    ) -> Vec<InventoryEntry> {
        let mut clock = Stopwatch::start();
        let mut applied = BTreeMap::new();
        let reads = self.read_many(&objects, kinds).await;
        report.phases.live_reads = clock.lap();
        for tier in tiers(objects) {
            // A tier's kinds are looked up before its writes start: a CRD of the tier before
            // is served by now.
            for object in &tier {
                let api_version = object.value["apiVersion"].as_str().unwrap_or_default();
                let _ = kinds
                    .resolve(&self.client, &gvk(api_version, &object.identity.kind))
                    .await;
            }
            let known: &Kinds = kinds;
            // Made first, then driven: a stream's own closure would have to be general over
            // the borrow's lifetime, which the future it makes is not.
            let writes: Vec<_> = tier
                .iter()
                .map(|object| self.apply_one(object, facts(object), judging, known, &reads))
                .collect();
            let results: Vec<_> = futures::stream::iter(writes)
                .buffered(WRITES_IN_FLIGHT)
                .collect()
                .await;
            for (object, result) in tier.iter().zip(results) {
                match result {
                    Ok((entry, write)) => {
                        if report.count(object, write) {
                            applied.insert(entry.id.clone(), entry);
                        }
                    }
                    Err(e) => report.failures.push(format!("{}: {e}", object.path)),
                }
            }
        }
        report.phases.writes = clock.lap();
        applied.into_values().collect()
    }

    /// Prunes what left the folders since the last applied commit, and what the last
    /// operation's inventory (`previous`) holds that this one did not apply — unless that is
    /// more than the claim's guard lets one apply delete unconfirmed: then nothing is pruned,
    /// the hold is reported and every owned object stays owned.
    async fn prune(
        &self,
        gone: &Gone<'_>,
        previous: &[InventoryEntry],
        inventory: &mut Vec<InventoryEntry>,
        pruning: &mut Pruning<'_>,
    ) {
        let owned_ids: Objects = previous
            .iter()
            .filter_map(|e| entry_identity(&e.id))
            .collect();
        // What the inventory holds is pruned as such, below.
        let left: Vec<DeclaredObject> = self
            .gone_objects(gone, pruning)
            .await
            .into_iter()
            .filter(|o| !owned_ids.has_declared(&o.identity))
            .collect();
        let current: BTreeSet<String> = inventory.iter().map(|e| e.id.clone()).collect();
        let mut stale = Vec::new();
        let mut owned = 0;
        for entry in previous {
            let Some(identity) = entry_identity(&entry.id) else {
                continue;
            };
            // Owned by an older backflow that applied its own configuration: let go, untouched.
            if protection(&identity, &identity.namespace).is_some() {
                continue;
            }
            owned += 1;
            if current.contains(&entry.id) {
                continue;
            }
            if gone.unreadable.declares(&identity) {
                inventory.push(entry.clone());
            } else {
                stale.push(entry);
            }
        }
        let mut count = stale.len() + left.len();
        if self.prune_guard.holds(count, owned + left.len()) {
            // Counted again, of what would really go: an entry relabelled by hand is left.
            let mut ours = 0;
            for entry in &stale {
                ours += usize::from(self.still_ours(entry, pruning.kinds).await);
            }
            count = ours + left.len();
        }
        if self.prune_guard.holds(count, owned + left.len())
            && !self.confirmed(gone, &stale, &left).await
        {
            pruning.report.prune_held = Some(PruneHold {
                commit: gone.commit,
                pruning: count,
                owned: owned + left.len(),
            });
            inventory.extend(stale.into_iter().cloned());
            return;
        }
        for object in &left {
            match self.remove_gone(object, gone, pruning).await {
                Ok(PruneOutcome::Deleted) => pruning.report.pruned += 1,
                // An edit since the flush reaches Git and declares the object again.
                Ok(PruneOutcome::Gone | PruneOutcome::Kept | PruneOutcome::Spared) => {}
                Err(e) => {
                    let failure = format!("prune {}: {e}", object.path);
                    pruning.report.failures.push(failure);
                }
            }
        }
        self.prune_stale(&stale, inventory, pruning).await;
    }

    /// Whether the live object `entry` names still carries this claim's label (a prune would
    /// delete it); a read that fails counts as yes.
    async fn still_ours(&self, entry: &InventoryEntry, kinds: &mut Kinds) -> bool {
        let Some(identity) = entry_identity(&entry.id) else {
            return false;
        };
        let version = entry.v.rsplit('/').next().unwrap_or("v1");
        let gvk = GroupVersionKind::gvk(&identity.group, version, &identity.kind);
        let Ok((resource, _)) = kinds.resolve(&self.client, &gvk).await else {
            return false;
        };
        let api = api_for(&self.client, &resource, &identity.namespace);
        match api.get_opt(&identity.name).await {
            Ok(Some(live)) => live.labels().get(APPLIER_LABEL) == Some(&self.owner),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Whether the claim's annotation confirms this prune: it names the commit applied, or a
    /// commit after the last applied one whose prune covered this one's (the flush before the
    /// confirmed apply may have published live edits on top of the commit a person confirmed).
    async fn confirmed(
        &self,
        gone: &Gone<'_>,
        stale: &[&InventoryEntry],
        left: &[DeclaredObject],
    ) -> bool {
        let value = self.confirmation().await;
        if confirms(value.as_deref(), &gone.commit) {
            return true;
        }
        let Some(named) =
            value.and_then(|v| v.trim().to_ascii_lowercase().parse::<CommitId>().ok())
        else {
            return false;
        };
        let order = |c: Option<CommitId>| c.and_then(|c| self.worker.tip_order(c));
        let newer = match (order(Some(named)), order(gone.since)) {
            (Some(named), Some(since)) => named > since,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !newer {
            return false;
        }
        let Ok(files) = self.files(named).await else {
            return false;
        };
        let kept: Objects = declared_objects_within(&files, &self.folders, &self.identities)
            .objects
            .into_iter()
            .map(|o| o.identity)
            .collect();
        stale
            .iter()
            .filter_map(|e| entry_identity(&e.id))
            .all(|i| !kept.has_applied(&i))
            && left.iter().all(|o| !kept.has_applied(&o.identity))
    }

    /// Prunes the entries of the last operation's inventory this one did not apply (`stale`);
    /// an entry that could not be pruned, or was edited after the flush, stays in `inventory`.
    async fn prune_stale(
        &self,
        stale: &[&InventoryEntry],
        inventory: &mut Vec<InventoryEntry>,
        pruning: &mut Pruning<'_>,
    ) {
        for &stale in stale {
            match self.prune_one(stale, pruning).await {
                Ok(PruneOutcome::Deleted) => pruning.report.pruned += 1,
                Ok(PruneOutcome::Gone) => {}
                Ok(PruneOutcome::Spared) => inventory.push(stale.clone()),
                Ok(PruneOutcome::Kept) => {
                    // Looked at again after the retry's flush, like a deferred write.
                    if let Some(identity) = entry_identity(&stale.id) {
                        pruning.report.deferred.push(identity);
                    }
                    inventory.push(stale.clone());
                }
                Err(e) => {
                    pruning
                        .report
                        .failures
                        .push(format!("prune {}: {e}", stale.id));
                    inventory.push(stale.clone());
                }
            }
        }
    }

    /// The live objects of each type the folders declare at least [`LIST_FROM`] objects of,
    /// read with one paged list per type.
    async fn read_many(&self, objects: &[DeclaredObject], kinds: &mut Kinds) -> LiveReads {
        let mut by_type: BTreeMap<(&str, &str), Vec<&DeclaredObject>> = BTreeMap::new();
        for object in objects {
            let api_version = object.value["apiVersion"].as_str().unwrap_or_default();
            by_type
                .entry((api_version, object.identity.kind.as_str()))
                .or_default()
                .push(object);
        }
        let mut reads = LiveReads::default();
        for ((api_version, kind), declared) in by_type {
            if declared.len() < LIST_FROM {
                continue;
            }
            // A kind whose CRD this apply creates is not served yet: read one by one.
            let Ok((resource, caps)) = kinds.resolve(&self.client, &gvk(api_version, kind)).await
            else {
                continue;
            };
            let wanted: Wanted = declared
                .iter()
                .map(|o| (applied_namespace(o, &caps), o.identity.name.clone()))
                .collect();
            reads.list(&self.client, &resource, &wanted).await;
        }
        reads
    }

    /// Brings one object in line: a whole apply when Git changed it (or it is missing) and the
    /// live side does not hold it yet, a stamp when only the label is missing; says whether it
    /// wrote. The live object is taken from `reads` when its type was listed.
    async fn apply_one(
        &self,
        object: &DeclaredObject,
        facts: object_write::DeclaredObject,
        judging: Judging<'_>,
        kinds: &Kinds,
        reads: &LiveReads,
    ) -> Result<(InventoryEntry, Write), String> {
        let api_version = object.value["apiVersion"].as_str().unwrap_or_default();
        let (resource, caps) = kinds.known(&gvk(api_version, &object.identity.kind))?;
        let namespace = applied_namespace(object, &caps);
        let key = ObjectKey::new(
            GroupResource::new(resource.group.clone(), resource.plural.clone()),
            namespace.clone(),
            object.identity.name.clone(),
        );
        let api = api_for(&self.client, &resource, &namespace);
        // What Git declares (in the namespace it is applied to), and the same with the label:
        // whether the live object holds the content is judged without the label.
        let mut content = object.value.clone();
        stamp(&mut content, None, &namespace);
        let mut desired = content.clone();
        stamp(&mut desired, Some(&self.owner), &namespace);
        let entry = InventoryEntry {
            id: format!(
                "{namespace}_{}_{}_{}",
                object.identity.name, object.identity.group, object.identity.kind
            ),
            v: api_version.to_string(),
        };
        let live = match reads.get(&resource, &namespace, &object.identity.name) {
            Some(listed) => Some(listed),
            None => read_one(&api, &object.identity.name).await?,
        };
        if let Some(why) = protection(&object.identity, &namespace) {
            // Reported for as long as Git says otherwise, not only by the apply of the push.
            let holds = live.as_ref().is_some_and(|l| holds(&content, l));
            let write = if holds {
                Write::Protected
            } else {
                Write::Refused(why)
            };
            return Ok((entry, write));
        }
        let facts = object_write::DeclaredObject {
            spared: judging.spare.contains(&key),
            live: live
                .as_ref()
                .map(|live| self.live_facts(live, &content, judging.cutoff)),
            ..facts
        };
        let write = match facts.write() {
            ObjectWrite::Nothing => Write::None,
            ObjectWrite::Stamp => Write::Stamp,
            ObjectWrite::Apply => {
                if let Some(live) = &live {
                    // Applied only over the version judged: an edit landing meanwhile is kept.
                    desired["metadata"]["resourceVersion"] =
                        live["metadata"]["resourceVersion"].clone();
                }
                Write::Apply
            }
            ObjectWrite::Deferred => Write::Deferred,
            ObjectWrite::LeftAbsent => Write::Absent,
            ObjectWrite::Foreign => Write::Foreign,
            ObjectWrite::Spared => Write::Spared(key),
        };
        let write = self.write(&api, object, write, &desired).await?;
        Ok((entry, write))
    }

    /// What `live` shows against `content` (what Git declares, without the label) for the
    /// object rule.
    fn live_facts(&self, live: &Value, content: &Value, cutoff: u64) -> object_write::LiveObject {
        let owner = if AppliedBy::excludes(Some(&self.applied_by), owned_by(live).as_ref()) {
            LiveOwner::Foreign
        } else if live["metadata"]["labels"][APPLIER_LABEL] == self.owner.as_str() {
            LiveOwner::Stamped
        } else {
            LiveOwner::Unstamped
        };
        object_write::LiveObject {
            holds: holds(content, live),
            edited_since_flush: edited_since(live, cutoff),
            owner,
        }
    }

    /// Carries out `write` of `object` (`desired`: with the label, and for a whole apply the
    /// resourceVersion it was judged at); says what was done in the end.
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        object: &DeclaredObject,
        write: Write,
        desired: &Value,
    ) -> Result<Write, String> {
        let name = &object.identity.name;
        let failed = |e: kube::Error| {
            let why = backflow_board::explain(&e);
            format!("applying {} {name}: {why}", object.identity.kind)
        };
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match write {
            Write::None
            | Write::Deferred
            | Write::Spared(_)
            | Write::Absent
            | Write::Foreign
            | Write::Protected
            | Write::Refused(_) => Ok(write),
            Write::Stamp => {
                let patch =
                    serde_json::json!({"metadata": {"labels": {APPLIER_LABEL: self.owner}}});
                api.patch(name, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(failed)?;
                Ok(write)
            }
            Write::Apply => {
                let applied = api
                    .patch(
                        name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(desired),
                    )
                    .await;
                match applied {
                    // Edited between the read and the write: the edit reaches Git and wins.
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(Write::Deferred),
                    other => other.map(|_| write).map_err(failed),
                }
            }
        }
    }

    /// The objects whose files went away since the last applied commit and that the commit
    /// does not declare elsewhere, to remove live if this applier never stamped them: an
    /// object created through the API, published into the folder and removed by a push before
    /// it was adopted is the folder's all the same, and its removal must reach the live side
    /// (the adoption, merged into this operation at a commit that no longer declares it, never
    /// stamped it). Out of reach: backflow's own configuration, and what an unreadable file
    /// declared. Before a first applied commit (only catch-ups so far), the branch's recent
    /// history is looked at (see `backflow_git::GONE_WALK`).
    async fn gone_objects(
        &self,
        gone: &Gone<'_>,
        pruning: &mut Pruning<'_>,
    ) -> Vec<DeclaredObject> {
        let mut files = Vec::new();
        for folder in &self.folders {
            match self
                .worker
                .read_gone(gone.since, gone.commit, folder.clone())
                .await
            {
                Ok(Ok(read)) => files.extend(read.into_iter().map(|f| (f.path, f.content))),
                Ok(Err(e)) => {
                    let failure = format!("cannot read what left {folder}: {e}");
                    pruning.report.failures.push(failure);
                    return Vec::new();
                }
                Err(e) => {
                    let failure = format!("cannot read what left {folder}: {e}");
                    pruning.report.failures.push(failure);
                    return Vec::new();
                }
            }
        }
        let mut left = Vec::new();
        let mut kept = Vec::new();
        for object in declared_objects_within(&files, &self.folders, &self.identities).objects {
            if gone.declared.contains(&object.identity)
                || gone.unreadable.declares(&object.identity)
            {
                continue;
            }
            match protection(&object.identity, &object.identity.namespace) {
                Some(_) => kept.push(object.path),
                None => left.push(object),
            }
        }
        if let Some(first) = kept.first() {
            let more = match kept.len() - 1 {
                0 => String::new(),
                n => format!(" and {n} more files"),
            };
            pruning.report.refused.push(format!(
                "{first}{more}: removed in Git, but they hold backflow's own configuration or system namespaces, which stay"
            ));
        }
        left
    }

    /// [`NativeApplier::gone_objects`]: removes one; says whether it was deleted.
    async fn remove_gone(
        &self,
        object: &DeclaredObject,
        gone: &Gone<'_>,
        pruning: &mut Pruning<'_>,
    ) -> Result<PruneOutcome, String> {
        let api_version = object.value["apiVersion"].as_str().unwrap_or_default();
        let Ok((resource, caps)) = pruning
            .kinds
            .resolve(&self.client, &gvk(api_version, &object.identity.kind))
            .await
        else {
            return Ok(PruneOutcome::Gone);
        };
        let namespace = match caps.scope {
            Scope::Namespaced if object.identity.namespace.is_empty() => "default".to_string(),
            Scope::Namespaced => object.identity.namespace.clone(),
            Scope::Cluster => String::new(),
        };
        let id = format!(
            "{namespace}_{}_{}_{}",
            object.identity.name, object.identity.group, object.identity.kind
        );
        if gone.owned.contains(&id) {
            return Ok(PruneOutcome::Gone);
        }
        let api = api_for(&self.client, &resource, &namespace);
        let live = api
            .get_opt(&object.identity.name)
            .await
            .map_err(|e| backflow_board::explain(&e))?;
        // A file gone before its object was ever applied: no other claim's label on it.
        let ours = |value: &Value| {
            let label = value["metadata"]["labels"][APPLIER_LABEL].as_str();
            label.is_none_or(|l| l == self.owner)
                && !AppliedBy::excludes(Some(&self.applied_by), owned_by(value).as_ref())
        };
        let removed = self.removed(false, live.as_ref(), ours, pruning.cutoff);
        carry_out(removed.prune(), &api, &resource, live.as_ref(), pruning).await
    }

    /// What an apply knows of an object the commit no longer declares (`ours`: whether the
    /// live object is this applier's to remove).
    fn removed(
        &self,
        spared: bool,
        live: Option<&DynamicObject>,
        ours: impl Fn(&Value) -> bool,
        cutoff: u64,
    ) -> RemovedObject {
        let live = live.map(|live| {
            let value = serde_json::to_value(live).unwrap_or(Value::Null);
            RemovedLive {
                ours: ours(&value),
                edited_since_flush: edited_since(&value, cutoff),
            }
        });
        RemovedObject { spared, live }
    }

    /// Removes the ownership label from what the claim stamped (and still carries it): a claim
    /// that lets go leaves the objects to whoever coordinates the folder next, which would
    /// otherwise take them for another applier's.
    async fn unstamp(&self, inventory: Vec<InventoryEntry>) -> Result<(), String> {
        let mut kinds = Kinds::default();
        let mut failures = Vec::new();
        for entry in &inventory {
            let Some((namespace, name, group, kind)) = parse_id(&entry.id) else {
                continue;
            };
            let version = entry.v.rsplit('/').next().unwrap_or("v1");
            let Ok((resource, _)) = kinds
                .resolve(&self.client, &GroupVersionKind::gvk(group, version, kind))
                .await
            else {
                continue;
            };
            let api = api_for(&self.client, &resource, namespace);
            let ours = api
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .is_some_and(|live| live.labels().get(APPLIER_LABEL) == Some(&self.owner));
            if !ours {
                continue;
            }
            let patch = serde_json::json!({"metadata": {"labels": {APPLIER_LABEL: null}}});
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            if let Err(e) = api.patch(name, &params, &Patch::Merge(&patch)).await {
                failures.push(format!("{}: {e}", entry.id));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "could not remove the ownership label from {}",
                failures.join("; ")
            ))
        }
    }

    /// Deletes an object the applier owned and the commit no longer declares, if it still
    /// carries this claim's label and nobody edited it since the flush.
    async fn prune_one(
        &self,
        entry: &InventoryEntry,
        pruning: &mut Pruning<'_>,
    ) -> Result<PruneOutcome, String> {
        let Some((namespace, name, group, kind)) = parse_id(&entry.id) else {
            return Ok(PruneOutcome::Gone);
        };
        let version = entry.v.rsplit('/').next().unwrap_or("v1");
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let Ok((resource, _)) = pruning.kinds.resolve(&self.client, &gvk).await else {
            // The type is gone (its CRD deleted): so are its objects.
            return Ok(PruneOutcome::Gone);
        };
        let key = ObjectKey::new(
            GroupResource::new(resource.group.clone(), resource.plural.clone()),
            namespace.to_string(),
            name.to_string(),
        );
        let spared = pruning.spare.contains(&key);
        let api = api_for(&self.client, &resource, namespace);
        // A spared object is left whatever the live side shows: not even read.
        let live = if spared {
            None
        } else {
            api.get_opt(name)
                .await
                .map_err(|e| backflow_board::explain(&e))?
        };
        // Not ours any more (relabelled by hand, or another claim took it): untouched.
        let ours =
            |value: &Value| value["metadata"]["labels"][APPLIER_LABEL] == self.owner.as_str();
        let removed = self.removed(spared, live.as_ref(), ours, pruning.cutoff);
        carry_out(removed.prune(), &api, &resource, live.as_ref(), pruning).await
    }
}

impl Applier for NativeApplier {
    fn apply(
        &self,
        request: ApplyRequest,
    ) -> Pin<Box<dyn Future<Output = ApplyReport> + Send + '_>> {
        Box::pin(self.run(request))
    }

    fn release(
        &self,
        _suspended: bool,
        inventory: Vec<InventoryEntry>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(self.unstamp(inventory))
    }
}

/// The kinds one apply resolved through discovery (so it asks once per kind), and why the
/// others could not be.
#[derive(Default)]
struct Kinds {
    found: BTreeMap<String, (ApiResource, ApiCapabilities)>,
    /// Looked up again on the next `resolve`: a CRD this apply creates serves its kind later.
    missing: BTreeMap<String, String>,
}

impl Kinds {
    async fn resolve(
        &mut self,
        client: &Client,
        gvk: &GroupVersionKind,
    ) -> Result<(ApiResource, ApiCapabilities), String> {
        let key = Self::key(gvk);
        if let Some(found) = self.found.get(&key) {
            return Ok(found.clone());
        }
        match kube::discovery::pinned_kind(client, gvk).await {
            Ok(found) => {
                self.missing.remove(&key);
                self.found.insert(key, found.clone());
                Ok(found)
            }
            Err(e) => {
                let why = format!("the API serves no {key}: {e}");
                self.missing.insert(key, why.clone());
                Err(why)
            }
        }
    }

    /// What the last `resolve` of `gvk` found.
    fn known(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, ApiCapabilities), String> {
        let key = Self::key(gvk);
        match (self.found.get(&key), self.missing.get(&key)) {
            (Some(found), _) => Ok(found.clone()),
            (None, Some(why)) => Err(why.clone()),
            (None, None) => Err(format!("the kind {key} was not looked up")),
        }
    }

    fn key(gvk: &GroupVersionKind) -> String {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((group, version)) => GroupVersionKind::gvk(group, version, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
}

/// The namespace `object` is applied in: its own, `default` for a namespaced object that names
/// none, none for a cluster-scoped one.
fn applied_namespace(object: &DeclaredObject, caps: &ApiCapabilities) -> String {
    match caps.scope {
        Scope::Namespaced if object.identity.namespace.is_empty() => "default".to_string(),
        Scope::Namespaced => object.identity.namespace.clone(),
        Scope::Cluster => String::new(),
    }
}

fn api_for(client: &Client, resource: &ApiResource, namespace: &str) -> Api<DynamicObject> {
    if namespace.is_empty() {
        Api::all_with(client.clone(), resource)
    } else {
        Api::namespaced_with(client.clone(), namespace, resource)
    }
}

/// The objects an operation judges: all of them, or for a catch-up only what Git changed since
/// the last applied commit (or an earlier apply left) — the rest was judged then, and what the
/// applier owned of it stays owned (`keep_owning`). Backflow's own commits change a few files.
fn to_judge(
    objects: Vec<DeclaredObject>,
    stamp_only: bool,
    facts: &impl Fn(&DeclaredObject) -> object_write::DeclaredObject,
) -> Vec<DeclaredObject> {
    if !stamp_only {
        return objects;
    }
    objects
        .into_iter()
        .filter(|o| {
            let f = facts(o);
            f.git_changed || f.retried
        })
        .collect()
}

/// The identities of `objects`.
fn identities(objects: &[DeclaredObject]) -> BTreeSet<Identity> {
    objects.iter().map(|o| o.identity.clone()).collect()
}

fn is_crd(identity: &Identity) -> bool {
    identity.group == "apiextensions.k8s.io" && identity.kind == "CustomResourceDefinition"
}

/// Whether `declared` holds the same CRDs as `before`, each with the same content.
fn crds_unchanged(
    declared: &[DeclaredObject],
    before: &BTreeMap<Identity, DeclaredObject>,
) -> bool {
    let crds = declared.iter().filter(|o| is_crd(&o.identity));
    crds.clone()
        .all(|o| before.get(&o.identity).is_some_and(|b| b.value == o.value))
        && crds.count() == before.keys().filter(|i| is_crd(i)).count()
}

/// The objects in the tiers they are applied in, one tier after the other: CRDs (the rest may
/// be of their kinds), then Namespaces, then the rest, each in the folder's order.
fn tiers(objects: Vec<DeclaredObject>) -> Vec<Vec<DeclaredObject>> {
    let mut tiers: [Vec<DeclaredObject>; 3] = Default::default();
    for object in objects {
        let tier = match (
            object.identity.group.as_str(),
            object.identity.kind.as_str(),
        ) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => 0,
            ("", "Namespace") => 1,
            _ => 2,
        };
        tiers[tier].push(object);
    }
    tiers.into_iter().filter(|t| !t.is_empty()).collect()
}

/// Sets the namespace the object is applied in and, with `owner`, the ownership label.
fn stamp(object: &mut Value, owner: Option<&str>, namespace: &str) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if !namespace.is_empty() {
        meta.insert("namespace".into(), Value::String(namespace.to_string()));
    }
    let Some(owner) = owner else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(APPLIER_LABEL.into(), Value::String(owner.to_string()));
    }
}

/// The applier that owns a live object, from its stamps.
fn owned_by(live: &Value) -> Option<AppliedBy> {
    let map = |field: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(live["metadata"][field].clone()).ok()
    };
    AppliedBy::of(map("labels").as_ref(), map("annotations").as_ref())
}

/// Whether a field manager other than the applier wrote the object (not its status) at or after
/// `cutoff` (Unix seconds; managedFields times have second precision, so the same second counts
/// as after).
fn edited_since(live: &Value, cutoff: u64) -> bool {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["manager"] != FIELD_MANAGER)
        // A controller reporting status edits nothing Git holds.
        .filter(|entry| entry["subresource"] != "status")
        .filter_map(|entry| entry["time"].as_str())
        .filter_map(|t| humantime::parse_rfc3339(t).ok())
        .filter_map(|t| t.duration_since(UNIX_EPOCH).ok())
        .any(|t| t.as_secs() >= cutoff)
}

/// Whether every field `desired` declares holds the same value in `live`.
fn holds(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d
            .iter()
            .all(|(k, v)| l.get(k).is_some_and(|lv| holds(v, lv))),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(dv, lv)| holds(dv, lv))
        }
        (d, l) => d == l,
    }
}

/// One line for each Secret `objects` holds in plain text.
fn plaintext_secrets(objects: &[DeclaredObject]) -> Vec<String> {
    objects
        .iter()
        .filter(|o| !o.encrypted && o.identity.group.is_empty() && o.identity.kind == "Secret")
        .map(|o| {
            format!(
                "{}: Secret {}/{} is in Git in plain text: applied; rotate its values (backflow's next write of it moves it to an encrypted file)",
                o.path, o.identity.namespace, o.identity.name
            )
        })
        .collect()
}

/// An apply that prunes nothing (the folder, or a new file of it, could not be read: what it
/// declares is unknown) keeps owning all it owned (`previous`), and says why.
fn keep_owning(
    report: &mut ApplyReport,
    unreadable: &Unreadable,
    previous: Vec<InventoryEntry>,
    inventory: &mut Vec<InventoryEntry>,
) {
    if let Some(path) = &unreadable.new_file {
        report.unreadable.push(format!(
            "{path}: nothing is pruned until it can be read (it may declare what left the other files)"
        ));
    }
    let kept: BTreeSet<String> = inventory.iter().map(|e| e.id.clone()).collect();
    inventory.extend(previous.into_iter().filter(|p| !kept.contains(&p.id)));
}

/// The object an inventory entry names (its namespace as applied).
fn entry_identity(id: &str) -> Option<Identity> {
    let (namespace, name, group, kind) = parse_id(id)?;
    Some(Identity {
        group: group.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// `<namespace>_<name>_<group>_<kind>` → its parts (names never hold `_`; namespaces and kinds
/// neither; a group may not hold one either).
fn parse_id(id: &str) -> Option<(&str, &str, &str, &str)> {
    let mut parts = id.splitn(4, '_');
    Some((parts.next()?, parts.next()?, parts.next()?, parts.next()?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn declared_fields_hold_when_the_live_object_has_them_and_more() {
        let desired = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        let live = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}, "resourceVersion": "9"},
                          "data": {"k": "v"}, "status": {}});
        assert!(holds(&desired, &live));
        let changed = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "w"}});
        assert!(!holds(&changed, &live));
        assert!(!holds(
            &json!({"list": [1, 2]}),
            &json!({"list": [1, 2, 3]})
        ));
    }

    #[test]
    fn inventory_ids_round_trip_and_crds_come_first() {
        assert_eq!(
            parse_id("team_web_apps_Deployment"),
            Some(("team", "web", "apps", "Deployment"))
        );
        assert_eq!(
            parse_id("_team__Namespace"),
            Some(("", "team", "", "Namespace"))
        );
        let object = |group: &str, kind: &str| DeclaredObject {
            identity: backflow_manifest::Identity {
                group: group.into(),
                kind: kind.into(),
                namespace: String::new(),
                name: "n".into(),
            },
            value: Value::Null,
            path: String::new(),
            encrypted: false,
        };
        let kinds: Vec<Vec<String>> = tiers(vec![
            object("", "ConfigMap"),
            object("", "Namespace"),
            object("", "Secret"),
            object("apiextensions.k8s.io", "CustomResourceDefinition"),
        ])
        .into_iter()
        .map(|tier| tier.into_iter().map(|o| o.identity.kind).collect())
        .collect();
        assert_eq!(
            kinds,
            [
                vec!["CustomResourceDefinition"],
                vec!["Namespace"],
                vec!["ConfigMap", "Secret"]
            ]
        );
        let only_rest = tiers(vec![object("", "ConfigMap")]);
        assert_eq!(only_rest.len(), 1, "empty tiers are left out");
    }

    /// The kinds one apply resolved serve the next only while Git changes no CRD.
    #[test]
    fn kinds_are_kept_only_while_no_crd_changes() {
        let object = |kind: &str, name: &str, v: &str| DeclaredObject {
            identity: backflow_manifest::Identity {
                group: if kind == "CustomResourceDefinition" {
                    "apiextensions.k8s.io".into()
                } else {
                    String::new()
                },
                kind: kind.into(),
                namespace: String::new(),
                name: name.into(),
            },
            value: serde_json::json!({ "v": v }),
            path: String::new(),
            encrypted: false,
        };
        let by_id = |objects: &[DeclaredObject]| -> BTreeMap<Identity, DeclaredObject> {
            objects
                .iter()
                .map(|o| (o.identity.clone(), o.clone()))
                .collect()
        };
        let crd = object("CustomResourceDefinition", "a", "1");
        let cm = object("ConfigMap", "c", "1");
        let before = by_id(&[crd.clone(), cm.clone()]);
        let cm_changed = object("ConfigMap", "c", "2");
        assert!(crds_unchanged(&[crd.clone(), cm_changed], &before));
        assert!(!crds_unchanged(
            &[object("CustomResourceDefinition", "a", "2"), cm.clone()],
            &before
        ));
        assert!(
            !crds_unchanged(std::slice::from_ref(&cm), &before),
            "one removed"
        );
        assert!(
            !crds_unchanged(
                &[crd.clone(), object("CustomResourceDefinition", "b", "1")],
                &before
            ),
            "one added"
        );
        assert!(crds_unchanged(&[cm], &by_id(&[])));
    }
}
