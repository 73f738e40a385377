//! Intents ("this object should now read X in target T") and the pending writes they are
//! decided into.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use backflow_api::CommitAuthors;
use backflow_api::{GroupResource, ObjectKey};

use crate::commit::CommitId;
use crate::planner::Held;

/// The state an object should have in Git.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectState {
    /// The object exists and reads as this (already sanitized) value.
    Present(Arc<ObjectJson>),
    /// The object is gone.
    Absent,
    /// A resync sweep: every object of one type in one namespace scope that the target holds
    /// and that is not in [`SweepScope::keep`] is gone (prune mode `Always`).
    Sweep(Arc<SweepScope>),
    /// The target's folder exists: when it holds no file yet, its bootstrap files (README,
    /// ignore file, `.sops.yaml` with encryption) are written even with no object to write.
    /// An applier cannot apply a folder that does not exist (Argo CD retries a missing path,
    /// Flux fails it), so a coordinated folder is bootstrapped by its resync.
    Bootstrap,
}

/// An object's desired state, held as compact JSON text until a planner reads it.
///
/// Intents wait in the window and stay until their commit is pushed (a refused push is replayed
/// from them), so a snapshot of a hundred thousand objects holds a hundred thousand of them at
/// once: as parsed `serde_json::Value`s they took about twice the memory of their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectJson(Box<str>);

impl ObjectJson {
    /// `value` as compact JSON.
    #[must_use]
    pub fn new(value: &serde_json::Value) -> Self {
        Self(backflow_api::compact::json_exact(value))
    }

    /// The value, parsed again.
    #[must_use]
    pub fn value(&self) -> serde_json::Value {
        // The text is what `new` wrote from a value: it always parses.
        serde_json::from_str(&self.0).unwrap_or(serde_json::Value::Null)
    }

    /// The JSON text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a sweep may remove: objects of `resource` in exactly the scope a resync gathered.
///
/// A sweep must never reach beyond the scope it gathered: a per-namespace snapshot says nothing
/// about other namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepScope {
    /// The resource type swept.
    pub resource: GroupResource,
    /// The namespace swept; `None` for every namespace (or a cluster-scoped type).
    pub namespace: Option<String>,
    /// The objects present in the snapshot, which stay, as `(namespace, name)` (namespace `""`
    /// for cluster-scoped objects). The namespace matters: a sweep of every namespace must not
    /// keep a document alive because an object of the same name exists in another namespace.
    pub keep: BTreeSet<(String, String)>,
    /// When set, only these objects may go: the ones the commit the live side last held held
    /// ([`Baseline::Commit`], resolved by the shell). `None`: every object not kept.
    pub removable: Option<BTreeSet<(String, String)>>,
}

impl SweepScope {
    /// Whether the object `namespace`/`name` (namespace `""` when cluster-scoped) stays.
    #[must_use]
    pub fn keeps(&self, namespace: &str, name: &str) -> bool {
        let id = (namespace.to_string(), name.to_string());
        self.keep.contains(&id) || self.removable.as_ref().is_some_and(|r| !r.contains(&id))
    }
}

/// Who made the change an intent records, as far as backflow can tell.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangedBy {
    /// A user the API server authenticated: the author of the commit.
    User(Arc<str>),
    /// The newest field manager, when no request user is known (a real cluster's watch does
    /// not say who wrote): named in a `Changed-by:` trailer.
    Manager(Arc<str>),
}

/// Who made an intent's change, and how its target's commits name users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// Who made the change.
    pub by: ChangedBy,
    /// Whether each user's changes get commits of their own (the target's
    /// `spec.commitAuthors`).
    pub commits: CommitAuthors,
}

/// "This object should now read X in target T", or "this object is gone".
///
/// An intent carries the whole object, never a diff: on a refused push it is planned again onto
/// whatever the new tip holds, so the API side's value wins for this object and nothing else is
/// touched.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    /// The `GitTarget` (folder) the object belongs to.
    pub target: String,
    /// The object's identity.
    pub key: ObjectKey,
    /// Its desired state.
    pub state: ObjectState,
    /// Who made the change, when known.
    pub attribution: Option<Attribution>,
    /// Whether it is an edit, or an applier's write of what Git held.
    pub origin: Origin,
    /// What the live side held before this change, when the caller knows it: the planner then
    /// lays only what the change did onto what Git holds, field by field (a push that changed
    /// other fields of the object since keeps them). `None`: the whole object is written (a
    /// create, a folder no applier coordinates, where the live side is the truth).
    pub baseline: Option<Baseline>,
}

/// What the live side held before an intent's change.
#[derive(Debug, Clone, PartialEq)]
pub enum Baseline {
    /// The object read as this (sanitized) value; for a sweep, nothing is known.
    Value(Arc<ObjectJson>),
    /// The live side held what a commit holds (the last commit applied to it in full), and
    /// perhaps part of a later one: the shell reads the object there ([`crate::Planner::held`])
    /// before planning. A sweep removes only documents the first commit held: a file added in
    /// Git since is Git's change, not a live removal.
    Commit(LiveHeld),
    /// What the commit the live side held (a [`Baseline::Commit`], resolved by the shell) held
    /// of the object: merged as a [`Baseline::Value`], and a document Git removed since stays
    /// removed when the object still reads as this (Git's change, made while backflow was down).
    Held(Arc<ObjectJson>),
}

/// The commits the live side held, which a snapshot's objects are read against
/// ([`Baseline::Commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LiveHeld {
    /// The last commit the live side held in full (the claim's in-step commit).
    pub in_step: CommitId,
    /// The commit an operation applied since, which may have reached the live side in part
    /// (cut short, failed, or objects left to newer edits): an object that reads as this commit
    /// holds it was written by the applier, not changed live.
    pub applying: Option<CommitId>,
    /// The branch's tip the worker knew when the snapshot was submitted (the core sets it):
    /// on a branch rewritten past `in_step`, a document that tip held and Git lacks now was
    /// removed after the list — a removal that stands; one it lacked was dropped by the
    /// rewrite, and the live side's is written back.
    pub listed_on: Option<CommitId>,
}

impl From<CommitId> for LiveHeld {
    fn from(in_step: CommitId) -> Self {
        Self {
            in_step,
            applying: None,
            listed_on: None,
        }
    }
}

impl Baseline {
    /// The value, once known.
    #[must_use]
    pub fn value(&self) -> Option<&ObjectJson> {
        match self {
            Baseline::Value(v) | Baseline::Held(v) => Some(v),
            Baseline::Commit(_) => None,
        }
    }

    /// Whether a document Git removed since stays removed when the object reads as this.
    #[must_use]
    pub fn keeps_git_removal(&self) -> bool {
        matches!(self, Baseline::Held(_))
    }
}

/// Where an intent's change comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// An edit through the API (or a snapshot of the live side): dropped as "unchanged" only
    /// when Git, read after it was decided, already reads like it.
    #[default]
    Edit,
    /// An applier's own write seen outside any apply window (a `late` echo): what Git held when
    /// it applied. Dropped for good at its first build when Git reads like it, however old the
    /// tip the worker knows, or when `of` reads like it: the tip the worker knew when it was
    /// submitted (the commit the applier was given, or newer), so a push the worker reads
    /// between the submit and the build is never overwritten by it.
    Echo {
        /// The commit it is judged against besides the build's base; the core fills it in at
        /// submit when the caller leaves it `None`.
        of: Option<CommitId>,
    },
}

impl Intent {
    /// The object should read `value`.
    pub fn put(target: impl Into<String>, key: ObjectKey, value: serde_json::Value) -> Self {
        Self {
            target: target.into(),
            key,
            state: ObjectState::Present(Arc::new(ObjectJson::new(&value))),
            attribution: None,
            origin: Origin::Edit,
            baseline: None,
        }
    }

    /// [`Intent::put`] of a value already written as JSON (shared with whoever else holds it:
    /// the mirror keeps the same value as the baseline of the object's next change).
    pub fn put_json(
        target: impl Into<String>,
        key: ObjectKey,
        object: impl Into<Arc<ObjectJson>>,
    ) -> Self {
        Self {
            target: target.into(),
            key,
            state: ObjectState::Present(object.into()),
            attribution: None,
            origin: Origin::Edit,
            baseline: None,
        }
    }

    /// The object is gone.
    pub fn delete(target: impl Into<String>, key: ObjectKey) -> Self {
        Self {
            target: target.into(),
            key,
            state: ObjectState::Absent,
            attribution: None,
            origin: Origin::Edit,
            baseline: None,
        }
    }

    /// The same intent, as an applier's write of what Git held ([`Origin::Echo`]).
    ///
    /// ```
    /// # use backflow_branch::{Intent, Origin};
    /// # use backflow_api::{GroupResource, ObjectKey};
    /// let key = ObjectKey::new(GroupResource::new("", "configmaps"), "default", "a");
    /// let echo = Intent::delete("live", key).echo();
    /// assert_eq!(echo.origin, Origin::Echo { of: None });
    /// ```
    #[must_use]
    pub fn echo(mut self) -> Self {
        self.origin = Origin::Echo { of: None };
        self
    }

    /// The same intent, as a change of `before` (see [`Intent::baseline`]).
    #[must_use]
    pub fn edit_of(mut self, before: Arc<ObjectJson>) -> Self {
        self.baseline = Some(Baseline::Value(before));
        self
    }

    /// The same intent, as a change of what the live side held: a commit in full, perhaps
    /// part of another (see [`Baseline::Commit`]).
    #[must_use]
    pub fn since(mut self, held: impl Into<LiveHeld>) -> Self {
        self.baseline = Some(Baseline::Commit(held.into()));
        self
    }

    /// The same intent with its [`Baseline::Commit`] replaced by what that commit `held`: the
    /// object's value, or for a sweep the objects it may remove. An object the commit did not
    /// hold is written whole.
    #[must_use]
    pub fn with_held(&self, held: Held) -> Self {
        let mut out = self.clone();
        if !matches!(self.baseline, Some(Baseline::Commit(_))) {
            return out;
        }
        out.baseline = None;
        match (held, &mut out.state) {
            (Held::Object(Some(value)), ObjectState::Present(_)) => {
                out.baseline = Some(Baseline::Held(Arc::new(ObjectJson::new(&value))));
            }
            (Held::Objects(held), ObjectState::Sweep(_)) => return out.removing_only(held),
            _ => {}
        }
        out
    }

    /// A sweep that removes only the objects in `removable` ([`SweepScope::removable`]); any
    /// other intent as it is.
    #[must_use]
    pub fn removing_only(mut self, removable: BTreeSet<(String, String)>) -> Self {
        if let ObjectState::Sweep(scope) = &self.state {
            let mut scope = SweepScope::clone(scope);
            scope.removable = Some(removable);
            self.state = ObjectState::Sweep(Arc::new(scope));
        }
        self
    }

    /// The same intent, attributed to whoever `attribution` names.
    #[must_use]
    pub fn attributed(mut self, attribution: Option<Attribution>) -> Self {
        self.attribution = attribution;
        self
    }

    /// The user whose changes get a commit of their own: an authenticated user whose target
    /// keeps authors apart. Intents with the same answer (or none) may share a commit.
    #[must_use]
    pub fn separate_author(&self) -> Option<&Arc<str>> {
        match &self.attribution {
            Some(Attribution {
                by: ChangedBy::User(user),
                commits: CommitAuthors::PerAuthor,
            }) => Some(user),
            _ => None,
        }
    }

    /// A sweep of `scope` in `target`. Its key names the type and namespace (`""` for every
    /// namespace) with an empty name, so it occupies its own slot: a later sweep of the same
    /// scope replaces it, and object intents are not collapsed into it.
    pub fn sweep(target: impl Into<String>, scope: SweepScope) -> Self {
        let key = ObjectKey::new(
            scope.resource.clone(),
            scope.namespace.clone().unwrap_or_default(),
            "",
        );
        Self {
            target: target.into(),
            key,
            state: ObjectState::Sweep(Arc::new(scope)),
            attribution: None,
            origin: Origin::Edit,
            baseline: None,
        }
    }

    /// The folder `target` exists (see [`ObjectState::Bootstrap`]). Its key names no resource
    /// and no object, so it occupies a slot of its own per target.
    pub fn bootstrap(target: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            key: ObjectKey::new(GroupResource::new("", ""), "", ""),
            state: ObjectState::Bootstrap,
            attribution: None,
            origin: Origin::Edit,
            baseline: None,
        }
    }

    /// The slot this intent occupies: one object in one target. Last write wins per slot.
    #[must_use]
    pub fn slot(&self) -> Slot {
        (self.target.clone(), self.key.clone())
    }
}

/// One object in one target.
pub type Slot = (String, ObjectKey);

/// The position of an intent in the order the worker received it. Strictly increasing, starting
/// at 1; `IntentSeq(0)` means "nothing".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct IntentSeq(pub u64);

/// The last intent decided when a flush was asked for: the flush completes once every intent up
/// to and including it is published. Intents decided later do not delay it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlushMark(pub IntentSeq);

/// Why a write exists, which picks its commit message shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteKind {
    /// Events collected by a commit window (one event or a group).
    Window,
    /// A resync (initial snapshot or sweep) of one target.
    Resync {
        /// The target resynced.
        target: String,
    },
    /// An explicit save (`CommitRequest`) with the caller's message.
    Save {
        /// The commit message, used as is.
        message: String,
    },
}

/// A decided write: the intents a closed window (or a resync, or a save) holds, retained until a
/// push that contains it succeeds.
#[derive(Debug, Clone)]
pub struct PendingWrite {
    /// The highest intent sequence number this write covers.
    pub through: IntentSeq,
    /// The intents, one per slot (last write wins), in slot order.
    pub intents: BTreeMap<Slot, (IntentSeq, Intent)>,
    /// What shape its commit message takes.
    pub kind: WriteKind,
    /// Whether the intents that changed nothing were already dropped. That happens the first time
    /// the write is planned against a tip read from the remote after the write was decided
    /// (Git already read like them after the edits); on a replay a kept intent is written
    /// again even if the foreign commit changed it, because the API side wins.
    screened: bool,
}

impl PendingWrite {
    /// A write holding `intents` (already last-write-wins per slot).
    #[must_use]
    pub fn new(
        intents: BTreeMap<Slot, (IntentSeq, Intent)>,
        kind: WriteKind,
        through: IntentSeq,
    ) -> Self {
        Self {
            through,
            intents,
            kind,
            screened: false,
        }
    }
}

impl PendingWrite {
    /// Whether the intents that changed nothing were already dropped (see the field's notes):
    /// the shell screens a write only the first time it builds it.
    #[must_use]
    pub fn is_screened(&self) -> bool {
        self.screened
    }

    /// Drops the intents the build dropped or the planner refused, and records that the write
    /// was screened.
    pub(crate) fn settle_build(&mut self, removed: impl IntoIterator<Item = Slot>) {
        for slot in removed {
            self.intents.remove(&slot);
        }
        self.screened = true;
    }

    /// Whether the intent of `slot` is an applier's echo.
    pub(crate) fn is_echo(&self, slot: &Slot) -> bool {
        self.intents
            .get(slot)
            .is_some_and(|(_, i)| matches!(i.origin, Origin::Echo { .. }))
    }

    /// Drops the intents the planner refused (and the echoes Git already reads like); the write
    /// stays unscreened (the tip it was planned on was not read since it was decided).
    pub(crate) fn refuse(&mut self, refused: impl IntoIterator<Item = Slot>) {
        for slot in refused {
            self.intents.remove(&slot);
        }
    }
}
