//! A model remote and a model shell for the core (feature `testing`): commits are maps from path
//! to content, the branch is a pointer, and faults are switches a test flips. The core's own
//! tests and the deterministic simulator drive the real [`BranchCore`] through it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use backflow_api::{GroupResource, ObjectKey};

use crate::{
    Attribution, Baseline, BranchCore, BuiltChain, BuiltWrite, ChangedBy, CommitId, CoreConfig,
    DurableTips, Effect, Event, FetchedTip, Held, Input, Intent, IntentSeq, IoFailure, LiveHeld,
    Moment, ObjectState, Origin, PendingWrite, PlanError, PushAnswer, RefusedIntent, Slot, Tip,
    baseline_since, merge_object,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

/// A file tree.
pub type Files = BTreeMap<String, String>;

/// One commit of the model.
#[derive(Debug, Clone)]
pub struct ModelCommit {
    /// Its parent.
    pub parent: Option<CommitId>,
    /// Its tree.
    pub files: Files,
    /// Who wrote it: "backflow" or a foreign pusher's name.
    pub by: String,
    /// The `Changed-by:` names of the intents it changed the tree for, as backflow's commit
    /// message names them (a manager's attribution).
    pub changed_by: BTreeSet<String>,
}

/// The remote, and the cache the shell writes commits into before pushing them (one object
/// store, as a bare cache plus a remote that shares its objects would be).
#[derive(Debug, Default)]
pub struct ModelRemote {
    /// Every commit written, pushed or not.
    pub commits: BTreeMap<CommitId, ModelCommit>,
    /// Where the branch points (`None`: no branch).
    pub tip: Option<CommitId>,
    /// Every tip the branch pointed at, in order, with whether a force-push set it.
    pub tips: Vec<(Option<CommitId>, bool)>,
    next: u64,
}

impl ModelRemote {
    fn new_id(&mut self) -> CommitId {
        self.next += 1;
        let mut bytes = [0u8; 20];
        bytes[12..].copy_from_slice(&self.next.to_be_bytes());
        CommitId::from_bytes(bytes)
    }

    /// Writes a commit (without moving the branch).
    pub fn write_commit(&mut self, parent: Option<CommitId>, files: Files, by: &str) -> CommitId {
        let id = self.new_id();
        self.commits.insert(
            id,
            ModelCommit {
                parent,
                files,
                by: by.to_string(),
                changed_by: BTreeSet::new(),
            },
        );
        id
    }

    /// The tree of `commit` (empty for none).
    #[must_use]
    pub fn files(&self, commit: Option<CommitId>) -> Files {
        commit
            .and_then(|c| self.commits.get(&c))
            .map(|c| c.files.clone())
            .unwrap_or_default()
    }

    /// The tree at the tip.
    #[must_use]
    pub fn tip_files(&self) -> Files {
        self.files(self.tip)
    }

    /// Whether `tip` is `commit` or descends from it.
    #[must_use]
    pub fn contains(&self, tip: Option<CommitId>, commit: CommitId) -> bool {
        let mut at = tip;
        while let Some(c) = at {
            if c == commit {
                return true;
            }
            at = self.commits.get(&c).and_then(|m| m.parent);
        }
        false
    }

    /// Commits from the tip back to the root.
    #[must_use]
    pub fn history(&self) -> Vec<CommitId> {
        let mut out = Vec::new();
        let mut at = self.tip;
        while let Some(c) = at {
            out.push(c);
            at = self.commits.get(&c).and_then(|m| m.parent);
        }
        out
    }

    fn move_tip(&mut self, tip: Option<CommitId>, forced: bool) {
        self.tip = tip;
        self.tips.push((tip, forced));
    }

    /// Somebody else pushes a commit setting `path` (or removing it) on top of the tip.
    pub fn foreign_push(&mut self, path: &str, content: Option<&str>) -> CommitId {
        let mut files = self.tip_files();
        match content {
            Some(c) => files.insert(path.to_string(), c.to_string()),
            None => files.remove(path),
        };
        let id = self.write_commit(self.tip, files, "foreign");
        self.move_tip(Some(id), false);
        id
    }

    /// Somebody force-pushes the branch to `tip` (`None` deletes it).
    pub fn force_push(&mut self, tip: Option<CommitId>) {
        self.move_tip(tip, true);
    }

    /// A tip that was not force-pushed and does not descend from the tip before it, if any:
    /// a push that dropped commits.
    #[must_use]
    pub fn dropped_by_a_push(&self) -> Option<String> {
        let mut previous: Option<CommitId> = None;
        for (tip, forced) in &self.tips {
            if !forced
                && let Some(prev) = previous
                && !self.contains(*tip, prev)
            {
                return Some(format!("a push dropped {prev}: tips {:?}", self.tips));
            }
            previous = *tip;
        }
        None
    }

    /// Every tip that was not force-pushed descends from the tip before it.
    ///
    /// # Panics
    /// When one does not: the assertion a test makes.
    pub fn assert_never_forced_by_backflow(&self) {
        if let Some(dropped) = self.dropped_by_a_push() {
            panic!("{dropped}");
        }
    }
}

/// Switches that make the next I/O step misbehave.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// The next fetch fails.
    pub fail_fetch: u32,
    /// The next push fails without reaching the remote.
    pub fail_push: u32,
    /// The next push lands but its answer is lost.
    pub lose_answer: u32,
    /// The next push is refused by a hook although the branch did not move.
    pub hook_refuses: u32,
    /// Before the next push reaches the remote, somebody else pushes this file.
    pub race: Option<(String, String)>,
    /// The next build fails.
    pub fail_build: u32,
    /// Right after the next push lands, somebody else pushes this file on top of it.
    pub after_landing: Option<(String, String)>,
}

/// The `Changed-by:` name an intent's commit carries (a manager's attribution).
fn changed_by_name(intent: &Intent) -> Option<String> {
    match &intent.attribution {
        Some(Attribution {
            by: ChangedBy::Manager(name),
            ..
        }) => Some(name.to_string()),
        _ => None,
    }
}

/// Where a model file for an intent lives.
#[must_use]
pub fn path_of(intent: &Intent) -> String {
    format!(
        "{}/{}/{}/{}",
        intent.target, intent.key.namespace, intent.key.resource.resource, intent.key.name
    )
}

/// The key of `ConfigMap` `web/<name>`, the model's objects.
#[must_use]
pub fn key(name: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
}

/// "`name` now reads `value`" in target `apps`: a one-value object, or (`value` a JSON
/// object's text, as [`text_of`] writes it) an object of several fields.
#[must_use]
pub fn put(name: &str, value: &str) -> Intent {
    Intent::put("apps", key(name), value_of(value))
}

/// A model file's content as the object it holds: a JSON object's text is that object, any
/// other text one value.
#[must_use]
pub fn value_of(text: &str) -> serde_json::Value {
    if text.starts_with('{')
        && let Ok(value @ serde_json::Value::Object(_)) = serde_json::from_str(text)
    {
        return value;
    }
    serde_json::Value::String(text.to_string())
}

/// The model file's content for `value`: a one-value object's value, or an object's JSON text
/// with its fields in order — one text per object, whatever order a merge left them in.
#[must_use]
pub fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(fields) => {
            let sorted: BTreeMap<&String, &serde_json::Value> = fields.iter().collect();
            let ordered: serde_json::Map<String, serde_json::Value> = sorted
                .into_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            serde_json::Value::Object(ordered).to_string()
        }
        other => other.to_string(),
    }
}

/// The model file of object `name` in target `apps`.
#[must_use]
pub fn file(name: &str) -> String {
    format!("apps/web/configmaps/{name}")
}

/// The namespace and name of the model file `path` (`target/namespace/resource/name`) when it
/// is an object of `scope`'s type and namespace.
fn in_scope<'p>(
    path: &'p str,
    target: &str,
    scope: &crate::SweepScope,
) -> Option<(&'p str, &'p str)> {
    let rest = path.strip_prefix(target)?.strip_prefix('/')?;
    let mut parts = rest.splitn(3, '/');
    let (namespace, resource, name) = (parts.next()?, parts.next()?, parts.next()?);
    (resource == scope.resource.resource
        && scope.namespace.as_deref().is_none_or(|ns| ns == namespace))
    .then_some((namespace, name))
}

/// Whether the model file `path` is one `scope` removes.
fn swept(path: &str, target: &str, scope: &crate::SweepScope) -> bool {
    in_scope(path, target, scope).is_some_and(|(namespace, name)| !scope.keeps(namespace, name))
}

/// The model planner's refusal of `intent`: names starting with `bad`.
fn refusal(slot: &Slot, seq: IntentSeq, intent: &Intent) -> Option<RefusedIntent> {
    intent.key.name.starts_with("bad").then(|| RefusedIntent {
        slot: slot.clone(),
        seq,
        error: PlanError::new("names starting with bad are refused"),
    })
}

/// The bootstrap file of a folder the model writes when the folder holds no file.
#[must_use]
pub fn bootstrap_file(target: &str) -> String {
    format!("{target}/README")
}

/// Writes `target`'s bootstrap file into `files` when the folder holds none; whether it did.
fn bootstrap(files: &mut Files, target: &str) -> bool {
    let prefix = format!("{target}/");
    if files.keys().any(|p| p.starts_with(&prefix)) {
        return false;
    }
    files.insert(bootstrap_file(target), "bootstrapped".into());
    true
}

/// What `intent` makes of a file that reads `current`, as the git shell's planner makes it: with
/// a baseline, the live change from it laid onto the file field by field (the real
/// [`merge_object`]; for a one-value object: the file as it is when the object reads as its
/// baseline, else the intent's value); a file Git removed is written back, unless the object
/// reads as its baseline and that is what the commit the live side held held
/// ([`Baseline::keeps_git_removal`]).
fn merged(intent: &Intent, current: Option<&String>) -> Option<String> {
    let ours = render(intent);
    let (Some(baseline), ObjectState::Present(value)) = (&intent.baseline, &intent.state) else {
        return ours;
    };
    let Some(base) = baseline.value() else {
        return ours;
    };
    let (base, value) = (base.value(), value.value());
    match current {
        Some(current) => Some(text_of(
            &merge_object(&base, &value, &value_of(current)).value,
        )),
        None if base == value && baseline.keeps_git_removal() => None,
        None => ours,
    }
}

fn render(intent: &Intent) -> Option<String> {
    match &intent.state {
        ObjectState::Present(v) => Some(text_of(&v.value())),
        ObjectState::Absent | ObjectState::Sweep(_) | ObjectState::Bootstrap => None,
    }
}

/// One write planned by the model shell: the build's answer for it, the files it makes, and
/// the `Changed-by:` names its commit carries.
struct PlannedWrite {
    built: BuiltWrite,
    files: Files,
    changed_by: BTreeSet<String>,
}

/// The error a fault produces.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub &'static str);

/// Runs the core's effects against the model. Names starting with `bad` are refused by the
/// model planner.
pub struct Shell {
    /// The core under test.
    pub core: BranchCore,
    /// The remote it publishes to.
    pub remote: ModelRemote,
    /// What the core persisted (kept across a restart).
    pub durable: DurableTips,
    /// Faults armed for the next I/O.
    pub faults: Faults,
    /// The model's time.
    pub now: Moment,
    /// When the core asked to be woken.
    pub wake: Moment,
    /// The core's randomness (seeded).
    pub rng: StdRng,
    /// Events the core emitted, not taken yet.
    pub events: Vec<Event>,
    /// Every effect run, for traces and crash points.
    pub effects: Vec<String>,
    /// Commits written by builds (pushed or not).
    pub built: Vec<CommitId>,
    /// How a write is planned again onto a tip that moved.
    pub replay: Replay,
    /// Per pending write (by its last intent), the tree its first build started from: what a
    /// textual replay diffs against.
    first_bases: BTreeMap<IntentSeq, Files>,
    /// When set, a fetch, build or push waits for [`Shell::answer`] instead of being answered
    /// at once, so whoever drives the shell can act while it is in flight (and the answer is
    /// computed against the remote as it is then).
    pub deferred_io: bool,
    /// The fetch, build or push waiting for its answer (with `deferred_io`).
    pub in_flight: Option<Effect>,
    /// As the git shell's journal: deletes submitted and not yet published, kept through a
    /// restart (the live store keeps no trace of a deleted object) and submitted again.
    pub journal: BTreeMap<IntentSeq, Intent>,
    /// The journal's deletes this process submitted again: judged against backflow's last push
    /// as the worker knows it when it builds, as the git shell judges them.
    pub resubmitted: BTreeSet<IntentSeq>,
    /// What this process's core was answered, counted by the shell: what its stats must say.
    pub answered: Answered,
}

/// The answers a shell gave its core, counted as the core's [`crate::WorkerStats`] counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answered {
    /// Commits the builds answered wrote.
    pub commits: u64,
    /// Pushes answered accepted.
    pub pushes_accepted: u64,
    /// Pushes answered refused.
    pub pushes_rejected: u64,
    /// Pushes whose answer was an error.
    pub push_errors: u64,
}

impl Answered {
    /// Counts `input` as the core takes it in `phase` (an answer in another phase is ignored).
    fn count(&mut self, input: &Input, phase: &crate::Phase) {
        match (input, phase) {
            (Input::Pushed(answer), crate::Phase::Pushing { .. }) => match answer {
                PushAnswer::Accepted => self.pushes_accepted += 1,
                PushAnswer::Rejected { .. } => self.pushes_rejected += 1,
                PushAnswer::Lost(_) => self.push_errors += 1,
            },
            (Input::Built(Ok(built)), crate::Phase::Building { count, .. }) => {
                let written = built.writes.iter().take(*count);
                self.commits += written.filter(|w| w.commit.is_some()).count() as u64;
            }
            _ => {}
        }
    }
}

/// How a refused write is planned again onto the new tip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Replay {
    /// From the retained intent: the API side's value wins for its object (backflow).
    #[default]
    FromIntent,
    /// Broken on purpose, as a rebase of the commit's textual diff: a file the foreign commit
    /// also changed does not apply, and that change is dropped.
    FromTextualDiff,
}

impl Shell {
    /// A core with `cfg` over an empty remote.
    #[must_use]
    pub fn new(cfg: CoreConfig) -> Self {
        Self::with(cfg, ModelRemote::default(), DurableTips::default())
    }

    /// A core with `cfg` over `remote`, started from `durable`.
    #[must_use]
    pub fn with(cfg: CoreConfig, remote: ModelRemote, durable: DurableTips) -> Self {
        let now = Moment(Duration::from_secs(1_000));
        Self {
            core: BranchCore::new(cfg, durable, now),
            remote,
            durable,
            faults: Faults::default(),
            now,
            wake: now,
            rng: StdRng::seed_from_u64(7),
            events: Vec::new(),
            effects: Vec::new(),
            built: Vec::new(),
            replay: Replay::FromIntent,
            first_bases: BTreeMap::new(),
            deferred_io: false,
            in_flight: None,
            journal: BTreeMap::new(),
            resubmitted: BTreeSet::new(),
            answered: Answered::default(),
        }
    }

    /// A restart: the core's memory is lost; the remote and the durable tips are kept.
    #[must_use]
    pub fn restart(self, cfg: CoreConfig) -> Self {
        let mut next = Self::with(cfg, self.remote, self.durable);
        next.now = self.now;
        next.core = BranchCore::new(next.core.config().clone(), next.durable, next.now);
        next.replay = self.replay;
        // An I/O in flight dies with the process (a push it made never landed).
        next.deferred_io = self.deferred_io;
        // The journal's deletes are submitted again, first.
        for intent in self.journal.into_values() {
            next.submit(intent);
            let seq = next.core.last_seq();
            next.resubmitted.insert(seq);
        }
        next
    }

    /// One step with `input`; runs the effects, answering I/O, until nothing is in flight.
    /// Stops early (returning false) once `budget` effects have run: a crash there.
    pub fn step_budget(&mut self, input: Input, budget: &mut Option<usize>) -> bool {
        let mut next = Some(input);
        while let Some(input) = next.take() {
            let delete = match &input {
                Input::Submit(intent) if matches!(intent.state, ObjectState::Absent) => {
                    Some(intent.clone())
                }
                _ => None,
            };
            // As the git shell's journal: a later write of an object supersedes its deletes.
            let written: Vec<&Intent> = match &input {
                Input::Submit(intent) => vec![intent],
                Input::Resync { intents, .. } => intents.iter().collect(),
                _ => Vec::new(),
            };
            for intent in written {
                if let ObjectState::Present(_) = intent.state {
                    self.journal
                        .retain(|_, d| !(d.target == intent.target && d.key == intent.key));
                }
            }
            self.answered.count(&input, self.core.phase());
            let effects = self.core.step(input, self.now, &mut self.rng);
            if let Some(delete) = delete {
                self.journal.insert(self.core.last_seq(), delete);
            }
            for effect in effects {
                if let Some(left) = budget {
                    if *left == 0 {
                        return false;
                    }
                    *left -= 1;
                }
                self.effects.push(format!("{effect:?}"));
                let io = matches!(
                    effect,
                    Effect::Fetch { .. } | Effect::Build { .. } | Effect::Push { .. }
                );
                if io && self.deferred_io {
                    self.in_flight = Some(effect);
                } else if let Some(answer) = self.run(effect) {
                    next = Some(answer);
                }
            }
        }
        true
    }

    /// Answers the fetch, build or push in flight (with `deferred_io`), against the remote as
    /// it is now, and runs what the core does next; says whether there was one.
    pub fn answer(&mut self) -> bool {
        let Some(effect) = self.in_flight.take() else {
            return false;
        };
        if let Some(answer) = self.run(effect) {
            self.step(answer);
        }
        true
    }

    /// Carries out the I/O in flight without answering it: the process dies right after (a
    /// push lands, and nobody hears it did). Says whether there was one.
    pub fn run_unanswered(&mut self) -> bool {
        let Some(effect) = self.in_flight.take() else {
            return false;
        };
        self.run(effect);
        true
    }

    /// One step with `input`, run to the end.
    pub fn step(&mut self, input: Input) {
        self.step_budget(input, &mut None);
    }

    /// Submits `intent`.
    pub fn submit(&mut self, intent: Intent) {
        self.step(Input::Submit(intent));
    }

    /// Time passed.
    pub fn tick(&mut self) {
        self.step(Input::Tick);
    }

    /// Moves time to the next wake-up and ticks.
    pub fn tick_at_wake(&mut self) {
        self.now = self.now.max(self.wake);
        self.tick();
    }

    /// Ticks at every wake-up until nothing is unpublished and nothing is in flight.
    ///
    /// # Panics
    /// When it does not settle in 200 wake-ups (a livelock).
    pub fn settle(&mut self) {
        for _ in 0..200 {
            if !self.answer() {
                self.tick_at_wake();
            }
            if self.in_flight.is_none()
                && !self.core.has_unpublished()
                && matches!(self.core.phase(), crate::Phase::Idle)
            {
                return;
            }
        }
        panic!(
            "did not settle: {:?}\n{}",
            self.core.phase(),
            self.effects.join("\n")
        );
    }

    /// Moves time on by `by`.
    pub fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
    }

    /// Takes the events emitted so far.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn run(&mut self, effect: Effect) -> Option<Input> {
        match effect {
            Effect::Fetch { check } => Some(Input::Fetched(self.fetch(&check))),
            Effect::Build {
                parent,
                from,
                count,
            } => Some(Input::Built(self.build(parent, from, count))),
            Effect::Push { head, expected } => Some(Input::Pushed(self.push(head, expected))),
            Effect::Persist(tips) => {
                self.durable = tips;
                None
            }
            Effect::Emit(event) => {
                match &event {
                    Event::Published { through, .. } => self.journal.retain(|seq, _| seq > through),
                    Event::Refused { seq, .. } => {
                        self.journal.remove(seq);
                    }
                    _ => {}
                }
                self.events.push(event);
                None
            }
            Effect::WakeAt(at) => {
                self.wake = at;
                None
            }
        }
    }

    fn fetch(&mut self, check: &BTreeSet<CommitId>) -> Result<FetchedTip, IoFailure> {
        if self.faults.fail_fetch > 0 {
            self.faults.fail_fetch -= 1;
            return Err(IoFailure::new(ModelError("the remote is unreachable")));
        }
        let tip = self.remote.tip;
        Ok(FetchedTip {
            tip: Tip::from_remote(tip),
            contains: check
                .iter()
                .copied()
                .filter(|c| self.remote.contains(tip, *c))
                .collect(),
        })
    }

    fn build(
        &mut self,
        parent: Option<CommitId>,
        from: usize,
        count: usize,
    ) -> Result<BuiltChain, IoFailure> {
        if self.faults.fail_build > 0 {
            self.faults.fail_build -= 1;
            return Err(IoFailure::new(ModelError("the disk is full")));
        }
        let mut parent = parent;
        let mut files = self.remote.files(parent);
        let mut chain = BuiltChain::default();
        let pending = self.core.pending_writes();
        self.first_bases
            .retain(|through, _| pending.iter().any(|w| w.through == *through));
        let writes: Vec<_> = pending[from..from + count].to_vec();
        for write in writes {
            let first_base = self
                .first_bases
                .entry(write.through)
                .or_insert_with(|| files.clone())
                .clone();
            let planned = self.plan_write(&write, parent, &files, &first_base);
            let mut built = planned.built;
            if planned.files != files {
                let id = self.write_commit(parent, planned.files.clone(), planned.changed_by);
                built.commit = Some(id);
                parent = Some(id);
                files = planned.files;
            }
            chain.writes.push(built);
        }
        Ok(chain)
    }

    /// Plans `write` on `files` (the tree of `parent`), as the git shell plans a write: what it
    /// refuses, what it drops as unchanged, the files it makes and who changed them.
    /// `first_base`: the files the write was first built on (for [`Replay::FromTextualDiff`]).
    fn plan_write(
        &self,
        write: &PendingWrite,
        parent: Option<CommitId>,
        files: &Files,
        first_base: &Files,
    ) -> PlannedWrite {
        let mut built = BuiltWrite::default();
        let mut next = files.clone();
        let mut changed_by = BTreeSet::new();
        for (slot, (seq, intent)) in &write.intents {
            let resolved = self.with_baseline(intent, parent);
            let intent = &resolved;
            if let Some(refused) = refusal(slot, *seq, intent) {
                built.refused.push(refused);
                continue;
            }
            let named = changed_by_name(intent);
            // A sweep, or a bootstrap (as the manifest planner: a folder with no file gets
            // its bootstrap file). As the git shell: one that changes nothing is unchanged,
            // judged on a tip that must be confirmed current before it counts (a push made
            // since may have added a file a sweep removes).
            let folder_changed = match &intent.state {
                ObjectState::Sweep(scope) => Some(sweep(&mut next, &intent.target, scope)),
                ObjectState::Bootstrap => Some(bootstrap(&mut next, &intent.target)),
                ObjectState::Present(_) | ObjectState::Absent => None,
            };
            if let Some(changed) = folder_changed {
                if changed {
                    changed_by.extend(named);
                } else if !write.is_screened() {
                    built.unchanged.push(slot.clone());
                }
                continue;
            }
            let path = path_of(intent);
            let content = merged(intent, next.get(&path));
            if self.replay == Replay::FromTextualDiff && first_base.get(&path) != files.get(&path) {
                // The patch does not apply: the foreign commit changed this file too.
                continue;
            }
            let echo_held = self.echo_held(intent, &path, content.as_ref())
                || self.resubmitted_held(*seq, &path, content.as_ref());
            if !write.is_screened() && (next.get(&path) == content.as_ref() || echo_held) {
                built.unchanged.push(slot.clone());
                continue;
            }
            changed_by.extend(named);
            match content {
                Some(c) => next.insert(path, c),
                None => next.remove(&path),
            };
        }
        PlannedWrite {
            built,
            files: next,
            changed_by,
        }
    }

    /// Writes backflow's commit of `files` on `parent`, naming who changed what in it.
    fn write_commit(
        &mut self,
        parent: Option<CommitId>,
        files: Files,
        changed_by: BTreeSet<String>,
    ) -> CommitId {
        let id = self.remote.write_commit(parent, files, "backflow");
        if let Some(commit) = self.remote.commits.get_mut(&id) {
            commit.changed_by = changed_by;
        }
        self.built.push(id);
        id
    }

    /// As the git shell: an intent whose baseline is a commit reads what that commit held of
    /// its object — or what backflow's last push after it held, when the object reads as that
    /// — and a sweep's removes only what the commit held.
    fn with_baseline(&self, intent: &Intent, parent: Option<CommitId>) -> Intent {
        let Some(Baseline::Commit(LiveHeld {
            in_step,
            applying,
            listed_on,
        })) = intent.baseline
        else {
            return intent.clone();
        };
        let commit = in_step;
        let files = self.remote.files(Some(commit));
        // As the git shell: backflow's last push came after that commit when it descends from
        // it, or when the branch was rewritten past it.
        let on_branch = self.remote.contains(parent, commit);
        let pushed = self
            .core
            .durable()
            .pushed
            .filter(|p| *p != commit && (!on_branch || self.remote.contains(Some(*p), commit)));
        if let ObjectState::Sweep(scope) = &intent.state {
            let held = files
                .keys()
                .filter_map(|path| in_scope(path, &intent.target, scope))
                .map(|(namespace, name)| (namespace.to_string(), name.to_string()))
                .collect();
            return intent.with_held(Held::Objects(held));
        }
        let path = path_of(intent);
        // An object that reads as the operation applied since held it, or as backflow's last
        // push did, did not change live since either.
        let ours = render(intent);
        // As the git shell: only an object that does not read as the in-step commit holds it
        // is read against later commits — the operation's, backflow's last push, then the
        // branch's first parents since the in-step commit (at most 64).
        // (All objects, on a branch rewritten past it: one that reads as a later commit the
        // branch holds keeps Git's removal since.)
        let changed = ours.is_none() || files.get(&path) != ours.as_ref() || !on_branch;
        // As the git shell: on a branch rewritten past it, the branch's commits since the
        // rewrite (after the last one it shares with the commit read).
        let shared = if on_branch {
            Some(commit)
        } else {
            self.shared_with(parent, commit)
        };
        let walk = match shared.filter(|_| changed) {
            Some(shared) => self.first_parents_since(parent, shared),
            None => Vec::new(),
        };
        let later: Vec<CommitId> = [applying, pushed]
            .into_iter()
            .flatten()
            .chain(walk)
            .filter(|c| changed && *c != commit)
            .collect();
        let whole = later.iter().find_map(|c| {
            let value = self.remote.files(Some(*c)).get(&path).cloned()?;
            (ours.as_ref() == Some(&value)).then_some((value, *c))
        });
        let (held, on_branch) = match whole {
            Some((value, c)) => (Some(value_of(&value)), self.remote.contains(parent, c)),
            None => (self.fields_since(intent, &files, &later, parent), on_branch),
        };
        let mut resolved = intent.with_held(Held::Object(held));
        // As the git shell: on a branch rewritten past the commit read, what Git lacks is
        // written back (a relist's baseline), not a removal that stands — unless the branch
        // held the document at the last commit it shares with the commit read, or when the
        // live side was listed: then Git removed it after the rewrite, and the removal stands.
        let held_there = |c: CommitId| self.remote.files(Some(c)).contains_key(&path);
        let removed_since = listed_on.is_some_and(held_there) || shared.is_some_and(held_there);
        if !on_branch && !removed_since {
            resolved.baseline = match resolved.baseline {
                Some(Baseline::Held(v)) => Some(Baseline::Value(v)),
                other => other,
            };
        }
        resolved
    }

    /// As the git shell: what the commit read (`files`) held of `intent`'s object, with each
    /// field a later commit on the branch held as the live side holds it now taken as
    /// unchanged since ([`baseline_since`]).
    fn fields_since(
        &self,
        intent: &Intent,
        files: &Files,
        later: &[CommitId],
        parent: Option<CommitId>,
    ) -> Option<serde_json::Value> {
        let path = path_of(intent);
        let held = files.get(&path).map(|t| value_of(t));
        let ObjectState::Present(live) = &intent.state else {
            return held;
        };
        let later: Vec<serde_json::Value> = (later.iter())
            .filter(|c| self.remote.contains(parent, **c))
            .filter_map(|c| self.remote.files(Some(*c)).get(&path).map(|t| value_of(t)))
            .collect();
        let later: Vec<&serde_json::Value> = later.iter().collect();
        baseline_since(held.as_ref(), &later, &live.value())
    }

    /// As the git shell: the newest commit of `parent`'s first-parent history that `commit`
    /// descends from (their merge base, on a linear history).
    fn shared_with(&self, parent: Option<CommitId>, commit: CommitId) -> Option<CommitId> {
        let mut at = parent;
        while let Some(c) = at {
            if self.remote.contains(Some(commit), c) {
                return Some(c);
            }
            at = self.remote.commits.get(&c).and_then(|m| m.parent);
        }
        None
    }

    /// As the git shell: the commits on `parent`'s first-parent history after `commit`, newest
    /// first, at most 64.
    fn first_parents_since(&self, parent: Option<CommitId>, commit: CommitId) -> Vec<CommitId> {
        let mut out = Vec::new();
        let mut at = parent;
        while let Some(c) = at.filter(|c| *c != commit && out.len() < 64) {
            out.push(c);
            at = self.remote.commits.get(&c).and_then(|m| m.parent);
        }
        out
    }

    /// As the git shell: a delete the journal kept and this process submitted again is held
    /// when backflow's last push, as the worker knows it now, reads like it.
    fn resubmitted_held(&self, seq: IntentSeq, path: &str, content: Option<&String>) -> bool {
        self.resubmitted.contains(&seq)
            && (self.core.durable().pushed)
                .is_some_and(|p| self.remote.files(Some(p)).get(path) == content)
    }

    /// As the git shell: an echo is also judged against the commit it repeats.
    fn echo_held(&self, intent: &Intent, path: &str, content: Option<&String>) -> bool {
        match intent.origin {
            Origin::Echo { of: Some(of) } => self.remote.files(Some(of)).get(path) == content,
            _ => false,
        }
    }

    fn push(&mut self, head: CommitId, expected: Tip) -> PushAnswer {
        if self.faults.fail_push > 0 {
            self.faults.fail_push -= 1;
            return PushAnswer::Lost(IoFailure::new(ModelError("connection reset")));
        }
        if let Some((path, content)) = self.faults.race.take() {
            self.remote.foreign_push(&path, Some(&content));
        }
        if self.faults.hook_refuses > 0 {
            self.faults.hook_refuses -= 1;
            return PushAnswer::Rejected {
                reason: "pre-receive hook declined".into(),
            };
        }
        if Tip::from_remote(self.remote.tip) != expected {
            return PushAnswer::Rejected {
                reason: "stale info".into(),
            };
        }
        self.remote.move_tip(Some(head), false);
        if let Some((path, content)) = self.faults.after_landing.take() {
            self.remote.foreign_push(&path, Some(&content));
        }
        if self.faults.lose_answer > 0 {
            self.faults.lose_answer -= 1;
            return PushAnswer::Lost(IoFailure::new(ModelError("the answer was lost")));
        }
        PushAnswer::Accepted
    }
}

/// A resync's sweep of `files`: the folder's files of the type (and namespace) that the
/// snapshot did not hold go. Says whether any went.
fn sweep(files: &mut Files, target: &str, scope: &crate::SweepScope) -> bool {
    let before = files.len();
    files.retain(|path, _| !swept(path, target, scope));
    files.len() != before
}

/// How many commits on the remote's history touched `path` (set it to a new value).
#[must_use]
pub fn commits_touching(remote: &ModelRemote, path: &str) -> usize {
    let history = remote.history();
    history
        .iter()
        .filter(|c| {
            let commit = &remote.commits[*c];
            let before = remote.files(commit.parent);
            before.get(path) != commit.files.get(path)
        })
        .count()
}
