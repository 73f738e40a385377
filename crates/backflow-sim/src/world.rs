//! The simulated system: the real branch-worker core over a model remote, the real apply
//! decision, and models of the live store, the mirror's routing, the applier, the people on
//! both sides and time. One [`World::step`] is one scheduled action, run to its end.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::CommitAuthors;
use backflow_branch::model::{self, Shell};
use backflow_branch::{
    Attribution, ChangedBy, ClaimStart, CoreConfig, Effect, Event, FirstContactRule, Input, Intent,
    IntentSeq, Moment, ObjectJson, Phase, SeenValues, SnapshotBaseline, SweepScope, Waiters,
};
use backflow_decision::{
    ApplierConfig, ApplierCore, ApplyEffect, ApplyEvent, ApplyInput, ApplyPhase, AsKept, CommitId,
    Deferrals, Hold, LeftOff, Mirrored, Operation, OperationId, OperationPhase, Reason, Verdict,
    WindowEdits, WindowHistory, WithheldWrite, Writers, as_git_keeps,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::check::Violation;
use crate::expected::{EditsInGit, Expected};
pub(crate) use crate::live::{
    ABSENT, HELD_MANAGERS, LiveObject, ONE_VALUE, Pruned, TWO_FIELDS, WatchEvent, Writer, absent,
    same, with_field,
};
use crate::oracle::{Ledger, OperationLog};
use crate::pace::{ApplyPace, COOLDOWNS, Held, MAX_WINDOW_AGES, Pace};

/// The objects of the simulated folder.
pub(crate) const NAMES: [&str; 3] = ["a", "b", "c"];

/// How long a stalled applier takes: past the 5 minutes after which the apply decision reports
/// an operation `Unresolved` (and keeps following it).
const STALL: Duration = Duration::from_secs(360);

/// How long a held applier takes at least: resumed, it fetches its source and reconciles (Flux's
/// source- and kustomize-controller; seconds in practice). So two of its applies never write in
/// one second, which managedFields' second precision could not tell apart.
const RECONCILE: Duration = Duration::from_secs(1);

/// Which system is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// backflow as designed.
    Correct,
    /// Broken on purpose: an apply is asked for the tip as it is, without flushing first.
    ApplyWithoutFlush,
    /// Broken on purpose: the apply's own writes are mirrored back like any edit.
    MirrorTheApply,
    /// Broken on purpose: a refused push is replayed from the commit's textual diff instead of
    /// the retained intent, so an API edit to a file a foreign commit also changed is dropped.
    ReplayTextualDiff,
    /// backflow as designed, with deletes on both sides: people delete objects through the API
    /// and pushes remove files.
    WithDeletes,
    /// backflow holding a Flux-like applier, with deletes on both sides: it applies the whole
    /// commit asked, over edits made after the flush too (the mirror's window judges those),
    /// prunes what it applied before and Git no longer holds, and goes on through backflow's
    /// restarts (a restart follows its operation).
    HeldApplier,
    /// backflow as designed, with deletes on both sides and objects of two fields: a person's
    /// edit and a push each change one field, so an edit and a push of one object meet in the
    /// field-level replay (the real three-way merge) and in the oracle, field by field.
    TwoFields,
}

mod applier;
mod held;
mod script;

use held::HeldResource;

pub use script::{Action, IoFault};

/// How the world's actions come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schedule {
    /// Drawn from the seed, faults included.
    Drawn,
    /// Named by a script ([`World::act`]); nothing else happens.
    Scripted,
}

/// The simulated system. See the module documentation.
pub struct World {
    variant: Variant,
    /// The fields of the world's objects ([`ONE_VALUE`], or [`TWO_FIELDS`]).
    fields: &'static [&'static str],
    /// The field the next write changes, named by a script (else drawn).
    next_field: Option<&'static str>,
    rng: StdRng,
    pub(crate) branch: Shell,
    applier: ApplierCore,
    apply_wake: Option<Moment>,
    apply_inputs: VecDeque<ApplyInput>,
    pub(crate) live: BTreeMap<String, LiveObject>,
    watch: VecDeque<WatchEvent>,
    /// The operation the applier is carrying out.
    asked: Option<Operation>,
    /// The `Kustomization` or `Application` a held applier is driven through, by its
    /// controller's contract: what a restart reads to follow an operation it finds in flight.
    held_resource: HeldResource,
    /// The mark (`requestedAt`, the operation's correlation id) of the request the held
    /// applier carries out.
    request: Option<String>,
    /// Until when the applier is stalled on it (past the decision's 5 minutes before it reports
    /// the operation `Unresolved`), when it is.
    stalled_until: Option<Moment>,
    /// The field manager a held applier writes as (Flux's, or Argo CD's by either apply).
    held_manager: &'static str,
    /// Until when a held applier reconciles the operation it was asked (it writes no sooner).
    reconciles_until: Option<Moment>,
    /// The applier's own watch events not delivered yet.
    echoes_queued: usize,
    /// The apply windows (the real bookkeeping the claims and the mirror share): each open from
    /// its flush until its apply ended plus the grace, and what the applier pruned in it.
    windows: WindowHistory<Pruned>,
    /// The mirror's judgement of what it sees against them (the real one): people's edits whose
    /// events reached it while a window was open were decided after that flush, so the apply's
    /// commit does not hold them.
    window_edits: WindowEdits<String>,
    /// Per object, who the last event the mirror judged showed wrote it (the real stream's
    /// `Seen::writers`).
    writers_seen: BTreeMap<String, Writers>,
    /// Per object, the value the mirror last submitted (the real stream's `Seen::value`): what
    /// Git keeps when the applier's next write is withheld. Dies with the streams.
    mirrored: BTreeMap<String, String>,
    /// Objects whose applier's write was withheld (a collision) and what Git keeps of each
    /// (the board's `Withheld`): outlives the streams, dies with the process.
    withheld: BTreeMap<String, WithheldWrite<String>>,
    /// Objects an applier wrote over a person's edit (a held applier's collision, or landing
    /// where the edit came through a list; backflow's own re-creating what a person deleted): a
    /// restart or a new list before the edit's repair may lose it (a known gap).
    applied_over_edit: BTreeSet<String>,
    /// The receipt of a snapshot submitted and not published yet.
    snapshot_unpublished: Option<IntentSeq>,
    /// While a whole snapshot (the live side taken as the truth) is not published, what each
    /// object could end with before it: a process that dies first never made it the truth.
    before_whole: BTreeMap<String, Expected>,
    /// When the last flush was asked for, and the last intent it covers.
    flushed_at: Moment,
    flush_mark: IntentSeq,
    /// A flush waiting for its answer, answered by the branch's `Published` event by the rule
    /// the worker's driver follows in production (`Waiters`).
    flushes: Waiters<()>,
    last_applied: Option<CommitId>,
    /// Objects the last apply left to a newer live edit, and when they are looked at again
    /// (the native applier's 1.5 s retry).
    deferred: Deferrals<String>,
    retry_at: Option<Moment>,
    pub(crate) expected: BTreeMap<String, Expected>,
    /// The commit of the native operation asked last (the claim's `status.operation` after a
    /// restart), and the one asked before the current operation when it is not the last
    /// applied: what the native applier looks at besides the last applied commit.
    tried: Option<CommitId>,
    tried_before: Option<CommitId>,
    /// The mirror's initial list is under way: the decision started, no snapshot is submitted
    /// yet, and people's edits meanwhile reach it through the list (no watch event).
    listing: bool,
    /// While the list is under way, what each object absent live when it started may end
    /// with: a create and a delete before the list reads it leave it absent, as if neither
    /// happened (the list sees neither).
    absent_at_list: BTreeMap<String, Expected>,
    /// The streams' lists are submitted and the claim has not heard so yet.
    gate_opening: bool,
    /// The world stopped: no more edits, pushes or faults.
    quiescing: bool,
    /// The claim's status as the apply decision recorded it (what a restart reads back).
    recorded: Option<Operation>,
    recorded_applied: Option<CommitId>,
    /// The claim's `status.inStepCommit`: the commit of its last operation that succeeded
    /// with nothing left to a newer edit (catch-ups included), as the claims' runner keeps it.
    recorded_in_step: Option<CommitId>,
    /// What the list under way reads its objects against: the mirror's own rule
    /// ([`SnapshotBaseline`]) over what the folder's claim said when the streams started.
    list_baseline: SnapshotBaseline,
    /// An operation a restart found in flight: followed, not newly asked.
    followed: Option<OperationId>,
    pub(crate) asks: usize,
    counter: u64,
    trace: Vec<String>,
    /// A violation found inside an effect (the flush-before-apply check runs at the ask).
    pub(crate) found: Option<Violation>,
    /// What this process submitted and flushed, for the outside oracle.
    ledger: Ledger,
    /// The operations asked and recorded, in every process, for the outside oracle.
    operations: OperationLog,
    /// What the worker was seen doing when, against the timing it promises.
    pace: Pace,
    /// Whether the schedule is drawn or scripted (nothing drawn: no fault, stall or failed
    /// apply unless an action names it).
    schedule: Schedule,
    /// The cooldown hold last written to the trace.
    cooling_logged: Option<Held>,
    /// How deep the world is in steps inside which nothing is pumped (the streams catching up
    /// inside a flush): what they set off is pumped once the outer step is done.
    pump_held: u32,
    /// The foreign commits the worker of this process reported (what its stats must say).
    foreign_seen: u64,
    /// What the world saw of this process's apply decision, against the backoff it promises.
    apply_pace: ApplyPace,
}

impl World {
    /// The world of `seed`: the folder holds `a`, `b`, `c` = `v0` live, and the mirror starts by
    /// publishing that snapshot.
    #[must_use]
    pub fn new(seed: u64, variant: Variant) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        // The provider's timing: a push cooldown, a short longest window, or the defaults.
        let config = CoreConfig {
            push_cooldown: COOLDOWNS[rng.random_range(0..COOLDOWNS.len())],
            max_window_age: MAX_WINDOW_AGES[rng.random_range(0..MAX_WINDOW_AGES.len())],
            ..CoreConfig::default()
        };
        let fields = if variant == Variant::TwoFields {
            TWO_FIELDS
        } else {
            ONE_VALUE
        };
        let mut world = Self {
            variant,
            fields,
            next_field: None,
            rng,
            branch: Shell::new(config),
            applier: ApplierCore::new(ApplierConfig::default()),
            apply_wake: None,
            apply_inputs: VecDeque::new(),
            live: BTreeMap::new(),
            watch: VecDeque::new(),
            asked: None,
            held_resource: HeldResource::of(HELD_MANAGERS[0]),
            request: None,
            stalled_until: None,
            reconciles_until: None,
            held_manager: HELD_MANAGERS[0],
            echoes_queued: 0,
            windows: WindowHistory::default(),
            window_edits: WindowEdits::default(),
            writers_seen: BTreeMap::new(),
            mirrored: BTreeMap::new(),
            withheld: BTreeMap::new(),
            applied_over_edit: BTreeSet::new(),
            snapshot_unpublished: None,
            before_whole: BTreeMap::new(),
            flushed_at: Moment(Duration::ZERO),
            flush_mark: IntentSeq(0),
            flushes: Waiters::default(),
            last_applied: None,
            deferred: Deferrals::default(),
            retry_at: None,
            expected: BTreeMap::new(),
            tried: None,
            tried_before: None,
            listing: false,
            absent_at_list: BTreeMap::new(),
            gate_opening: false,
            quiescing: false,
            recorded: None,
            recorded_applied: None,
            recorded_in_step: None,
            list_baseline: SnapshotBaseline::Whole,
            followed: None,
            asks: 0,
            counter: 0,
            trace: Vec::new(),
            found: None,
            ledger: Ledger::new(fields),
            operations: OperationLog::default(),
            pace: Pace::default(),
            cooling_logged: None,
            pump_held: 0,
            foreign_seen: 0,
            apply_pace: ApplyPace::default(),
            schedule: Schedule::Drawn,
        };
        world.set_up();
        world
    }

    /// What the variant draws or switches, then the start: a held applier's controller, the
    /// model shell's replay; fetches, builds and pushes answered at a step of their own.
    fn set_up(&mut self) {
        if self.variant == Variant::HeldApplier {
            // Flux's or Argo CD's, whose managedFields name it differently.
            self.held_manager = HELD_MANAGERS[self.rng.random_range(0..HELD_MANAGERS.len())];
            self.held_resource = HeldResource::of(self.held_manager);
        }
        if self.variant == Variant::ReplayTextualDiff {
            self.branch.replay = model::Replay::FromTextualDiff;
        }
        // The world acts while I/O is in flight.
        self.branch.deferred_io = true;
        self.start();
    }

    fn start(&mut self) {
        let now = self.branch.now;
        let v0 = with_field(ABSENT, self.fields, self.fields[0], "v0");
        for name in NAMES {
            let uid = self.uid();
            let object = LiveObject::written(None, v0.clone(), Writer::Person, now, uid);
            self.live.insert(name.to_string(), object);
            self.expected
                .insert(name.to_string(), Expected::new(&v0, self.fields));
        }
        self.log("start: a, b, c = v0 live".into());
        self.snapshot(ApplyInput::Restored {
            last_applied: None,
            in_flight: None,
            last_operation: None,
            status_read: true,
        });
    }

    /// The apply decision starts from `restored`, held until the mirror's snapshot is
    /// published; the mirror starts listing the live objects (the list returns at a later step,
    /// [`World::list`]).
    fn snapshot(&mut self, restored: ApplyInput) {
        self.list_baseline = self.claim_start();
        self.applier_input(restored);
        self.applier_input(ApplyInput::Gate(Some(Hold::Snapshots(
            "the initial snapshot is not published".into(),
        ))));
        self.applier_input(ApplyInput::Reason(Reason::CatchUpConverge));
        self.listing = true;
        self.absent_at_list = (self.expected.iter())
            .filter(|(name, _)| absent(&self.live[*name].value))
            .map(|(name, e)| (name.clone(), e.clone()))
            .collect();
        self.gate_opening = false;
        self.log("the mirror starts listing the live objects".into());
        self.pump();
    }

    /// What the streams read from the folder's claim as they start (the mirror's `claim_start`
    /// reads the same fields of its status), and the list's baseline by the mirror's own rule.
    fn claim_start(&self) -> SnapshotBaseline {
        let since = self.recorded_in_step.or(self.recorded_applied);
        let start = ClaimStart {
            since,
            applying: (self.recorded.as_ref())
                .map(|op| op.commit)
                .filter(|c| Some(*c) != since),
            first_contact: (self.recorded.is_none() && since.is_none())
                .then_some(FirstContactRule::LiveWins),
        };
        // The world's lists are each the first since its streams started: nothing was seen.
        SnapshotBaseline::of(true, SeenValues::new(), Some(start))
    }

    /// The mirror's list returns: it publishes the live state as a resync.
    fn list(&mut self) {
        self.listing = false;
        self.publish_live_state(self.list_baseline.clone());
    }

    /// The mirror publishes the live state as a resync (its initial list, or a resync of every
    /// target after the branch lost backflow's commits), read against `baseline`.
    fn publish_live_state(&mut self, baseline: SnapshotBaseline) {
        let tag = self.fresh("snapshot-");
        let listed = self.listed_as_git_keeps();
        let mut intents: Vec<Intent> = Vec::new();
        let mut keep = BTreeSet::new();
        for (name, value) in &listed {
            let live = !absent(&self.live[name].value);
            if live || !absent(value) {
                keep.insert(("web".to_string(), name.clone()));
            }
            // A withheld write's edit is read against the claim's commits like any object:
            // one a commit since holds was published, and what Git gained after it stands.
            if !absent(value) {
                intents.push(changed_by(
                    baseline.of_object(model::put(name, value)),
                    &tag,
                ));
            } else if live {
                intents.push(changed_by(Intent::delete("apps", model::key(name)), &tag));
            }
        }
        // Files of objects the snapshot does not hold go (prune: Always).
        let sweep = Intent::sweep(
            "apps",
            SweepScope {
                resource: model::key("a").resource,
                namespace: Some("web".into()),
                keep,
                removable: None,
            },
        );
        intents.push(changed_by(baseline.of_sweep(sweep), &tag));
        // As the stream of a coordinated folder: it exists before it is applied, even empty.
        intents.push(changed_by(Intent::bootstrap("apps"), &tag));
        // As the real stream: each listed object's next event is judged against its writers.
        self.writers_seen = self
            .live
            .iter()
            .filter(|(_, o)| !absent(&o.value))
            .map(|(name, o)| (name.clone(), o.event(name).writes.writers()))
            .collect();
        self.mirrored = listed.clone();
        self.log("the mirror publishes the live objects as a resync".into());
        self.branch.step(Input::Resync {
            target: "apps".into(),
            intents,
        });
        let (receipt, now) = (self.branch.core.last_seq(), self.branch.now);
        self.pace.resynced(receipt, now, self.branch.core.config());
        self.snapshot_unpublished = Some(receipt);
        self.expect_snapshot(&listed, &tag);
        // As the board: the stream streams once its list is submitted, and the claim hears
        // so at a later step (the coordinator is woken, then steps the claim); an apply's
        // flush publishes the list before anything is asked.
        self.log("the snapshot is submitted: the streams stream".into());
        self.gate_opening = true;
        self.pump();
    }

    /// What a list reads, as the real stream lists it: an object whose live state is an
    /// applier's write the mirror withheld (the board's `Withheld`) is listed as the edit Git
    /// keeps.
    fn listed_as_git_keeps(&self) -> BTreeMap<String, String> {
        let listed: Vec<(&String, u64)> = (self.live.iter())
            .filter(|(_, o)| !absent(&o.value))
            .map(|(name, o)| (name, o.version))
            .collect();
        let read = as_git_keeps(listed.iter().copied(), self.withheld.clone());
        // What the list lacks is as absent as it is live, unless it is an edit an applier
        // pruned.
        let mut as_kept: BTreeMap<String, String> = (self.live.iter())
            .map(|(name, o)| (name.clone(), o.value.clone()))
            .collect();
        for ((name, _), reads) in listed.into_iter().zip(read.listed) {
            let value = match reads {
                AsKept::Listed => self.live[name].value.clone(),
                AsKept::Edit(edit) => edit,
                AsKept::Deleted => ABSENT.to_string(),
            };
            as_kept.insert(name.clone(), value);
        }
        as_kept.extend(read.unlisted);
        as_kept
    }

    /// Whether `name`'s live state is an applier's write the mirror withheld.
    fn is_withheld(&self, name: &str) -> bool {
        (self.withheld.get(name)).is_some_and(|w| w.version == self.live[name].version)
    }

    /// The oracle takes the snapshot `listed` (named `tag` in its commits). It reads the claim
    /// itself, not how the list was read: once an operation succeeded, the live side held a
    /// commit in full, and a snapshot only carries what changed since — the edits people made,
    /// which it already holds; the live side is the truth only at first contact, or when no
    /// operation ever succeeded.
    fn expect_snapshot(&mut self, listed: &BTreeMap<String, String>, tag: &str) {
        let baselined = self.recorded_in_step.or(self.recorded_applied).is_some();
        // At first contact what only Git holds is created live: the list's absence is no edit.
        let first_contact = self.recorded.is_none() && !baselined;
        let values = (listed.iter())
            .filter(|(_, v)| !(first_contact && absent(v)))
            .map(|(name, v)| (name, v.as_str()));
        self.ledger.snapshot(values, baselined, &self.branch.remote);
        let in_git = self.branch.remote.tip_files();
        for (name, e) in &mut self.expected {
            let value = &listed[name];
            if first_contact && absent(value) {
                if let Some(in_git) = in_git.get(&model::file(name)) {
                    e.also(in_git);
                }
            } else if !baselined {
                self.before_whole.insert(name.clone(), e.clone());
                e.person_edits(value, None);
            }
            e.submitted(value, tag);
        }
    }

    /// The process is killed and started again: memory is lost (pending writes, queued watch
    /// events, the decision's state, an apply being carried out); the live store, the remote,
    /// what the worker persisted and the claim's status are kept.
    fn crash(&mut self) {
        let pushing = matches!(self.branch.in_flight, Some(Effect::Push { .. }));
        let lands = pushing && !self.quiescing && self.rng.random_range(0..2) == 0;
        if !self.held() && self.rng.random_range(0..2) == 0 {
            // backflow's own applier dies part-way through its writes.
            let written = self.rng.random_range(1..=NAMES.len());
            self.cut_short(written);
        }
        self.restart(lands);
    }

    /// [`World::crash`], killed between a push in flight landing and its answer (`lands`) or
    /// with the I/O in flight dying unanswered.
    fn restart(&mut self, lands: bool) {
        if lands && self.branch.run_unanswered() {
            self.log("the push lands; the process dies before it hears so".into());
        }
        self.log("--- the process is killed and starts again ---".into());
        self.expect_after_a_restart();
        self.pace.restarted();
        // The provider's settings are what they were last set to.
        let config = self.branch.core.config().clone();
        let shell = std::mem::replace(&mut self.branch, Shell::new(config.clone()));
        self.branch = shell.restart(config);
        self.journal_resubmitted();
        self.foreign_seen = 0;
        self.apply_pace = ApplyPace::default();
        self.applier = ApplierCore::new(ApplierConfig::default());
        self.apply_wake = None;
        self.apply_inputs.clear();
        self.flushes = Waiters::default();
        self.watch.clear();
        if !self.held() {
            // backflow's own applier dies with the process.
            self.asked = None;
            self.stalled_until = None;
            self.last_applied = self.recorded_applied;
        }
        self.echoes_queued = 0;
        self.windows = WindowHistory::default();
        self.window_edits = WindowEdits::default();
        self.writers_seen.clear();
        self.mirrored.clear();
        self.known_gaps_of_a_restart();
        self.deferred = Deferrals::default();
        self.retry_at = None;
        let in_flight = self
            .recorded
            .as_ref()
            .filter(|op| op.phase.in_flight())
            .map(|op| (op.id, op.commit, op.reasons.clone(), op.phase));
        self.followed = in_flight.as_ref().map(|(id, ..)| *id);
        if self.held() && in_flight.is_some() {
            // As the claim's restore: the held applier may write any time now, and the
            // operation's flush was in the process that died.
            self.flushed_at = self.branch.now;
            self.windows.open(self.flushed_at.0.as_nanos());
            self.log("the operation found in flight opens its window at start".into());
        }
        let last_operation = self.recorded.as_ref().map(|op| op.id);
        self.tried = self.recorded.as_ref().map(|op| op.commit);
        self.tried_before = None;
        self.snapshot(ApplyInput::Restored {
            last_applied: self.recorded_applied,
            in_flight,
            last_operation,
            status_read: true,
        });
    }

    /// What may end where after the process died, for the oracle: this process submitted
    /// nothing yet; a whole snapshot the process died before publishing never made the live side
    /// the truth (what each object could end with before it still holds); a person's delete whose
    /// event died is known to nobody.
    fn expect_after_a_restart(&mut self) {
        self.ledger.restarted();
        self.snapshot_unpublished = None;
        for (name, before) in std::mem::take(&mut self.before_whole) {
            if let Some(e) = self.expected.get_mut(&name) {
                e.also_from(&before);
            }
        }
        for e in self.expected.values_mut() {
            e.unseen();
        }
    }

    /// The known gaps a restart opens (docs/simulation.md, "Known gaps the oracle accepts"),
    /// as the board's withheld writes die with the process: an applier's write over an edit,
    /// withheld and to be repaired, is listed as the write (a collision is not journaled, unlike
    /// a delete), and so is a held applier's write over an edit the mirror never judged; an
    /// object the live side lacks and Git created again may be swept again.
    fn known_gaps_of_a_restart(&mut self) {
        let withheld = std::mem::take(&mut self.withheld);
        let in_git = self.branch.remote.tip_files();
        for name in NAMES {
            if absent(&self.live[name].value) && in_git.contains_key(&model::file(name)) {
                let swept = self.fresh("-swept");
                if let Some(e) = self.expected.get_mut(name) {
                    e.also(&swept);
                }
            }
            let object = &self.live[name];
            let collided = withheld
                .get(name)
                .is_some_and(|w| w.version == object.version);
            let applied_over = self.applied_over_edit.contains(name) && object.by.is_applier();
            if let Some(e) = self.expected.get_mut(name)
                && (collided || applied_over)
            {
                e.lost_in_a_list();
            }
        }
    }

    /// The streams list again (a divergence): an applier's write over a person's edit that a
    /// list reads may stand, as it does after a restart (see [`World::restart`]) — unless the
    /// mirror judged it a collision: the board keeps that beyond the streams.
    fn lost_to_applier(&mut self) {
        for name in &self.applied_over_edit {
            let withheld = self.is_withheld(name);
            let object = &self.live[name];
            if let Some(e) = self.expected.get_mut(name)
                && object.by.is_applier()
                && !withheld
            {
                e.lost_in_a_list();
            }
        }
    }

    /// The new process submitted the journal's deletes again (the live store keeps no trace of
    /// a deleted object). Each is the person's delete the oracle already holds: on its way, or
    /// in Git already when the push carrying it landed with its answer lost — then the worker
    /// drops it (judged against its last push once its first fetch found that push), so it is
    /// owed to no flush, and a push made since wins.
    fn journal_resubmitted(&mut self) {
        let now = self.branch.now;
        let deletes: Vec<(IntentSeq, String)> = (self.branch.journal.iter())
            .map(|(seq, d)| (*seq, d.key.name.clone()))
            .collect();
        for (seq, name) in deletes {
            let value = self.fresh("-j");
            self.log(format!("the journal's delete of {name} is submitted again"));
            self.ledger
                .submitted(&name, &value, None, true, &self.branch.remote);
            self.pace.submitted(seq, now);
        }
    }

    /// The foreign commits this process's worker reported.
    pub(crate) fn foreign_seen(&self) -> u64 {
        self.foreign_seen
    }

    /// Every step and effect so far.
    #[must_use]
    pub fn trace(&self) -> &[String] {
        &self.trace
    }

    /// Every commit the branch pointed at, oldest first: who wrote it, what it changed for
    /// whom, and its objects — the other half of a failure's story.
    #[must_use]
    pub fn branch_history(&self) -> String {
        let remote = &self.branch.remote;
        let mut out = Vec::new();
        for (tip, forced) in &remote.tips {
            let Some(commit) = tip.and_then(|t| remote.commits.get(&t).map(|c| (t, c))) else {
                out.push(format!(
                    "(no branch){}",
                    if *forced { " forced" } else { "" }
                ));
                continue;
            };
            let (id, c) = commit;
            let objects: Vec<String> = (NAMES.iter())
                .map(|n| {
                    let file = c.files.get(&model::file(n));
                    format!("{n} = {}", file.map_or(ABSENT, String::as_str))
                })
                .collect();
            out.push(format!(
                "{id} by {}{} {:?}: {}",
                c.by,
                if *forced { " (forced)" } else { "" },
                c.changed_by,
                objects.join(", ")
            ));
        }
        out.join("\n")
    }

    fn log(&mut self, line: String) {
        let at = self.branch.now.0.as_millis();
        self.trace.push(format!("{at:>8} ms  {line}"));
    }

    /// A new object's uid.
    fn uid(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    /// The claim hears the streams stream: its gate opens.
    fn open_gate(&mut self) {
        self.gate_opening = false;
        self.log("the claim hears the snapshots are read: the gate opens".into());
        self.applier_input(ApplyInput::Gate(None));
        self.pump();
    }

    /// One scheduled action, run to its end.
    pub fn step(&mut self) {
        if self.listing && self.rng.random_range(0..4) == 0 {
            return self.list();
        }
        if self.gate_opening && self.rng.random_range(0..3) == 0 {
            return self.open_gate();
        }
        if self.branch.in_flight.is_some() && self.rng.random_range(0..3) == 0 {
            return self.io_answers();
        }
        match self.rng.random_range(0..100) {
            0..30 => self.person_edits(),
            30..45 => self.foreign_push(),
            45..75 => self.deliver(),
            75..82 => self.webhook(),
            82..90 if self.asked.is_some() => self.finish_apply(),
            90..92 => self.crash(),
            92..94 => self.reconfigure(),
            94..95 => self.force_push(),
            _ => self.tick(),
        }
    }

    /// Whether people delete objects and pushes remove files.
    fn deletes(&self) -> bool {
        matches!(
            self.variant,
            Variant::WithDeletes | Variant::HeldApplier | Variant::TwoFields
        )
    }

    /// Whether backflow holds a Flux-like applier rather than running its own.
    fn held(&self) -> bool {
        self.variant == Variant::HeldApplier
    }

    /// A person edits an object through the API.
    fn person_edits(&mut self) {
        let name = NAMES[self.rng.random_range(0..NAMES.len())].to_string();
        let deletes = self.deletes() && self.rng.random_range(0..5) == 0;
        if deletes && absent(&self.live[&name].value) {
            // Nothing to delete (the API answers 404).
            return self.tick();
        }
        self.person_writes(name, deletes);
    }

    /// Which field a write changes: the one value, or one of two drawn (only then is the draw
    /// made, so a one-value world's schedule is what it was before fields).
    fn draw_field(&mut self) -> &'static str {
        if let Some(field) = self.next_field.take() {
            return field;
        }
        match self.fields {
            [one] => one,
            fields => fields[self.rng.random_range(0..fields.len())],
        }
    }

    /// A person sets `name` to a new value, or (`deletes`) deletes it, through the API.
    fn person_writes(&mut self, name: String, deletes: bool) {
        let before = self.live[&name].value.clone();
        let value = if deletes {
            self.fresh("-p")
        } else {
            let field = self.draw_field();
            let to = self.fresh("p");
            with_field(&before, self.fields, field, &to)
        };
        if deletes {
            self.log(format!("a person deletes {name} through the API"));
        } else {
            self.log(format!("a person sets {name} = {value} through the API"));
        }
        let at = self.branch.now;
        let uid = self.uid();
        let previous = self.live.get(&name);
        let object = LiveObject::written(previous, value.clone(), Writer::Person, at, uid);
        if !self.listing {
            self.watch.push_back(object.event(&name));
        }
        self.live.insert(name.clone(), object);
        self.applied_over_edit.remove(&name);
        if deletes
            && self.listing
            && let Some(before) = self.absent_at_list.get(&name)
        {
            // Absent when the list started, absent when it reads it: nothing to see.
            self.expected.insert(name, before.clone());
        } else if let Some(e) = self.expected.get_mut(&name) {
            // A delete the list reads, of an object whose create never reached Git (it died with
            // the process): against the in-step commit, which lacks it, nothing changed, and
            // what Git created meanwhile may stand (a known gap).
            let unseen_create = deletes
                && self.listing
                && matches!(self.list_baseline, SnapshotBaseline::Applied(_))
                && !e.edit_in_git(&self.branch.remote);
            e.person_edits(&value, Some(&before));
            if unseen_create {
                e.lost_in_a_list();
            }
        }
    }

    /// Somebody else pushes a change of one object to the branch.
    fn foreign_push(&mut self) {
        let name = NAMES[self.rng.random_range(0..NAMES.len())].to_string();
        let removal = self.deletes() && self.rng.random_range(0..5) == 0;
        self.git_writes(name, removal);
    }

    /// Somebody pushes a change of `name`, or (`removal`) the removal of its file.
    fn git_writes(&mut self, name: String, removal: bool) {
        let file = model::file(&name);
        let previous = self.branch.remote.tip_files().get(&file).cloned();
        let value = if removal {
            self.log(format!(
                "somebody pushes the removal of {name} to the branch"
            ));
            self.branch.remote.foreign_push(&file, None);
            self.fresh("-g")
        } else {
            let field = self.draw_field();
            let to = self.fresh("g");
            let before = previous.as_deref().unwrap_or(ABSENT);
            let value = with_field(before, self.fields, field, &to);
            self.log(format!("somebody pushes {name} = {value} to the branch"));
            self.branch
                .remote
                .foreign_push(&model::file(&name), Some(&value));
            value
        };
        // A snapshot listed before this push and published after it may sweep away a file the
        // push created for an object the live side lacks (a known gap).
        let swept =
            (!removal && absent(&self.live[&name].value) && self.snapshot_unpublished.is_some())
                .then(|| self.fresh("-swept"));
        let remote = &self.branch.remote;
        let before = self.absent_at_list.get_mut(&name);
        let previous = previous.as_deref().unwrap_or(ABSENT);
        for e in self.expected.get_mut(&name).into_iter().chain(before) {
            e.foreign_push(&value, Some(previous), remote);
            if let Some(swept) = &swept {
                e.also(swept);
            }
        }
    }

    /// Somebody force-pushes the branch back to one of its older commits: for each object a
    /// Git-side change to what that commit holds. When it drops
    /// backflow's commits, the worker says so and the mirror publishes the live state again.
    fn force_push(&mut self) {
        let history = self.branch.remote.history();
        if history.len() < 2 {
            return self.tick();
        }
        let deleted = self.deletes() && self.rng.random_range(0..4) == 0;
        let to = (!deleted).then(|| history[self.rng.random_range(1..history.len())]);
        self.rewrite_branch(to);
    }

    /// Somebody force-pushes the branch to `to`, or (`None`) deletes it.
    pub(crate) fn rewrite_branch(&mut self, to: Option<CommitId>) {
        match to {
            Some(commit) => self.log(format!("somebody force-pushes the branch back to {commit}")),
            None => self.log("somebody deletes the branch".into()),
        }
        let files = self.branch.remote.files(to);
        let in_git: BTreeMap<String, EditsInGit> = self
            .expected
            .iter()
            .map(|(name, e)| (name.clone(), e.edits_in_git(&self.branch.remote)))
            .collect();
        self.branch.remote.force_push(to);
        for name in NAMES {
            let value = files
                .get(&model::file(name))
                .cloned()
                .unwrap_or_else(|| self.fresh("-g"));
            let remote = &self.branch.remote;
            // The resync after a divergence writes back what the branch lost of the live side,
            // whoever wrote it.
            let live = &self.live[name].value;
            let written_back = (!absent(live) && absent(&value)).then(|| live.clone());
            let before = self.absent_at_list.get_mut(name);
            for e in self.expected.get_mut(name).into_iter().chain(before) {
                e.force_pushed(&value, &in_git[name], remote);
                if let Some(written_back) = &written_back {
                    e.also(written_back);
                }
            }
        }
    }

    /// The provider's settings change while the worker runs: the commit window flips between
    /// the default and zero (one commit per change).
    fn reconfigure(&mut self) {
        let mut cfg = self.branch.core.config().clone();
        if self.rng.random_range(0..3) == 0 {
            cfg.push_cooldown = COOLDOWNS[self.rng.random_range(0..COOLDOWNS.len())];
            self.log(format!(
                "the provider's push cooldown becomes {:?}",
                cfg.push_cooldown
            ));
        } else {
            cfg.window = if cfg.window.is_zero() {
                CoreConfig::default().window
            } else {
                std::time::Duration::ZERO
            };
            self.log(format!(
                "the provider's commit window becomes {:?}",
                cfg.window
            ));
        }
        self.branch.step(Input::Reconfigure(cfg.clone()));
        self.pace.reconfigured(self.branch.now, &cfg);
        self.pump();
    }

    /// The fetch, build or push in flight is answered, against the remote as it is now; one
    /// answer in six is a fault: the fetch or build fails, or the push does not reach the
    /// remote, lands with its answer lost, or is refused by a hook.
    fn io_answers(&mut self) {
        let (fetch, build) = match &self.branch.in_flight {
            None => return,
            Some(effect) => (
                matches!(effect, Effect::Fetch { .. }),
                matches!(effect, Effect::Build { .. }),
            ),
        };
        // Once the world stops, the remote stops failing too.
        let faulty =
            !self.quiescing && self.schedule == Schedule::Drawn && self.rng.random_range(0..6) == 0;
        let fault = match (faulty, fetch || build) {
            (false, _) => None,
            (true, true) => Some(IoFault::Fails),
            (true, false) => Some(match self.rng.random_range(0..3) {
                0 => IoFault::Fails,
                1 => IoFault::AnswerLost,
                _ => IoFault::HookRefuses,
            }),
        };
        self.answer_io(fault);
    }

    /// The fetch, build or push in flight is answered, against the remote as it is now, or
    /// fails by `fault`: a fetch or build fails; a push never reaches the remote, lands with
    /// its answer lost, or is refused by a hook (for a fetch or a build, any fault fails it).
    fn answer_io(&mut self, fault: Option<IoFault>) {
        let (fetch, build) = match &self.branch.in_flight {
            None => return,
            Some(effect) => (
                matches!(effect, Effect::Fetch { .. }),
                matches!(effect, Effect::Build { .. }),
            ),
        };
        let faulty = fault.is_some();
        let faults = &mut self.branch.faults;
        let what = match (fault, fetch, build) {
            (None, true, _) => "the fetch is answered",
            (None, _, true) => "the build is answered",
            (None, ..) => "the push is answered",
            (Some(_), true, _) => {
                faults.fail_fetch = 1;
                "the fetch fails"
            }
            (Some(_), _, true) => {
                faults.fail_build = 1;
                "the build fails"
            }
            (Some(IoFault::Fails), ..) => {
                faults.fail_push = 1;
                "the push never reaches the remote"
            }
            (Some(IoFault::AnswerLost), ..) => {
                faults.lose_answer = 1;
                "the push lands, its answer is lost"
            }
            (Some(IoFault::HookRefuses), ..) => {
                faults.hook_refuses = 1;
                "a hook refuses the push"
            }
        };
        self.log(what.to_string());
        let (before, lost) = (self.branch.remote.tip, self.branch.faults.lose_answer > 0);
        self.branch.answer();
        let (now, cfg) = (self.branch.now, self.branch.core.config());
        let remote = &self.branch.remote;
        if fetch {
            let landed = self.pace.unheard_landing();
            let learned = !faulty && landed.is_some_and(|head| remote.contains(remote.tip, head));
            self.pace.fetch_answered(now, learned, cfg);
        } else if !build && let Some(head) = remote.tip.filter(|tip| Some(*tip) != before) {
            self.pace.push_landed(head, now, !lost, cfg);
        }
        // A fault is this answer's only (a push refused as stale keeps no lost answer armed).
        self.branch.faults = model::Faults::default();
        self.pump();
    }

    /// The push webhook arrives: the branch worker looks at the remote.
    fn webhook(&mut self) {
        self.log("a push notice: the worker looks at the remote".into());
        self.branch.step(Input::RemoteMoved);
        self.pump();
    }

    /// The oldest watch event reaches the mirror, which routes it.
    fn deliver(&mut self) {
        let Some(event) = self.watch.pop_front() else {
            return self.tick();
        };
        if event.by.is_applier() {
            self.echoes_queued = self.echoes_queued.saturating_sub(1);
        }
        // As the real stream: what the object's previous event showed of people's writes.
        let seen = self.writers_seen.get(&event.name).copied();
        if absent(&event.value) {
            self.writers_seen.remove(&event.name);
        } else {
            self.writers_seen
                .insert(event.name.clone(), event.writes.writers());
        }
        let verdict = if self.variant == Variant::MirrorTheApply {
            Verdict::Edit
        } else {
            self.judge(&event, seen)
        };
        // The mirror's own decision (`Verdict::mirrored_as`), as the watch stream makes it.
        let Some(mirrored) = verdict.mirrored_as(&event.writes, seen) else {
            return;
        };
        self.log(format!(
            "the mirror submits {} = {} ({:?})",
            event.name, event.value, event.by
        ));
        let echo = !absent(&event.value) && mirrored == Mirrored::Echo;
        // As the stream of a coordinated folder: an edit is a change of what it last submitted
        // of the object (or saw the apply land), which the replay lays onto Git field by field.
        let before = (self
            .mirrored
            .insert(event.name.clone(), event.value.clone()))
        .filter(|v| !absent(v));
        let intent = if absent(&event.value) {
            Intent::delete("apps", model::key(&event.name))
        } else {
            let before =
                (before.as_deref()).map(|b| Arc::new(ObjectJson::new(&model::value_of(b))));
            mirrored.intent(model::put(&event.name, &event.value), before)
        };
        let tag = self.fresh("edit-");
        self.branch.step(Input::Submit(changed_by(intent, &tag)));
        let (receipt, now) = (self.branch.core.last_seq(), self.branch.now);
        self.pace.submitted(receipt, now);
        let remote = &self.branch.remote;
        // Owed to a flush: what the write changed of the object it replaced (all of it, a
        // create or a delete) — not what the mirror read it against.
        let replaced = event.replaced.as_deref();
        self.ledger
            .submitted(&event.name, &event.value, replaced, echo, remote);
        let windows = self.windows.spans(self.branch.now.0.as_nanos());
        self.window_edits.submitted(&event.name, &windows);
        if event.by == Writer::Person && self.rng.random_range(0..3) == 0 {
            // The person's client waits for the push (`X-Backflow-Wait`): group commit.
            self.log(format!("{}'s writer waits for the push", event.name));
            self.branch.step(Input::Hurry);
            self.pace.hurried(receipt, now);
        }
        if event.by == Writer::Person
            && let Some(e) = self.expected.get_mut(&event.name)
        {
            e.submitted(&event.value, &tag);
        }
        self.pump();
    }

    /// The mirror judges `event` against the apply window, as the real one does (the real
    /// [`WindowEdits`] over the event's managedFields, second precision): the apply landing is
    /// not mirrored; the applier's write over an edit decided after the flush is a collision
    /// (Git keeps the edit, and a Repair applies it back). An edit or a late write is mirrored.
    fn judge(&mut self, event: &WatchEvent, previous: Option<Writers>) -> Verdict {
        let windows = self.windows.spans(self.branch.now.0.as_nanos());
        let verdict = if absent(&event.value) {
            let pruned = Pruned {
                name: event.name.clone(),
                uid: event.uid,
            };
            let pruned_in = self.windows.take_prune(&pruned);
            self.window_edits
                .judge_delete(&event.name, &windows, pruned_in)
        } else {
            self.window_edits
                .judge(&event.name, &event.writes, previous, &windows)
        };
        let (name, value) = (&event.name, &event.value);
        match verdict {
            Verdict::Collision | Verdict::OverCollided => {
                let kept = (self.mirrored.get(name).cloned()).filter(|v| !absent(v));
                let write = WithheldWrite {
                    version: event.version,
                    kept,
                };
                self.withheld.insert(name.clone(), write);
            }
            Verdict::Edit | Verdict::Late | Verdict::Landing => {
                self.withheld.remove(name);
            }
        }
        if verdict == Verdict::Landing {
            // As the stream: Git holds what was applied.
            self.mirrored.insert(name.clone(), value.clone());
        }
        match verdict {
            Verdict::Edit | Verdict::Late => {}
            Verdict::Landing => self.log(format!(
                "the mirror sees the apply land on {name} (= {value}): not mirrored"
            )),
            Verdict::Collision => {
                self.log(format!(
                    "the apply wrote {name} = {value} over a newer edit: withheld, Repair asked"
                ));
                self.applier_input(ApplyInput::Reason(Reason::Repair));
                self.pump();
            }
            Verdict::OverCollided => self.log(format!(
                "the apply wrote {name} = {value} over a newer edit again: withheld"
            )),
        }
        verdict
    }

    /// The apply ended: its window stays open for the grace, as the real one does.
    fn close_window(&mut self) {
        self.windows.ended(self.branch.now.0.as_nanos());
    }

    /// Time moves to the next wake-up of either core (or a little), and both look at it.
    fn tick(&mut self) {
        // The worker asked to act now (requests start no I/O; the tick after them does): as
        // its driver, tick it before time moves on — again if what that set off (a flush)
        // asks once more; a worker that asks for ever is caught as idle or never quiet.
        for _ in 0..3 {
            if self.branch.wake > self.branch.now || self.branch.in_flight.is_some() {
                break;
            }
            self.branch.tick();
            self.pump();
        }
        let now = self.branch.now;
        let wakes = [
            Some(self.branch.wake),
            self.apply_wake,
            self.retry_at,
            self.stalled_until,
            self.reconciles_until,
        ];
        // While the applier is stalled, time jumps to the next thing due (minutes pass in a
        // few steps); otherwise it moves by at most a quarter of a second.
        let mut next = if self.stalled_until.is_some() {
            now + STALL
        } else {
            now + Duration::from_millis(250)
        };
        for wake in wakes.into_iter().flatten() {
            if wake > now && wake < next {
                next = wake;
            }
        }
        if self.branch.in_flight.is_none() && self.found.is_none() {
            let urgent = self.flushes.flush_waiting();
            let cfg = self.branch.core.config();
            match self.pace.idle_until(now, next, cfg, urgent) {
                Ok(Some(held)) if self.cooling_logged != Some(held) => {
                    let until = held.until.0.as_millis();
                    self.log(format!(
                        "the worker holds its push for the cooldown until {until} ms"
                    ));
                    self.cooling_logged = Some(held);
                }
                Ok(_) => {}
                Err(late) => {
                    let (phase, wake) = (self.branch.core.phase(), self.branch.wake.0.as_millis());
                    self.found = Some(Violation::Late(format!(
                        "{late} (the worker is {phase:?}, asks to be woken at {wake} ms)"
                    )));
                }
            }
        }
        self.branch.now = next;
        self.branch.tick();
        if self.apply_wake.is_some_and(|w| w <= next) {
            self.apply_wake = None;
            self.applier_input(ApplyInput::Tick);
        }
        if self.retry_at.is_some_and(|r| r <= next) {
            self.retry_at = None;
            self.applier_input(ApplyInput::Reason(Reason::Repair));
        }
        self.pump();
    }

    /// Hands the branch worker's events to the expectations and the apply decision, and runs
    /// the decision's effects until nothing is left to do.
    pub(crate) fn pump(&mut self) {
        if self.pump_held > 0 {
            return;
        }
        loop {
            for event in self.branch.take_events() {
                self.branch_event(event);
            }
            let Some(input) = self.apply_inputs.pop_front() else {
                let (now, urgent) = (self.branch.now, self.flushes.flush_waiting());
                let pushed = self.pace.effects(&self.branch.effects, now, urgent);
                if self.found.is_none() {
                    self.found = pushed.err();
                }
                return;
            };
            let now = self.branch.now;
            for effect in self.applier.step(input, now) {
                self.apply_effect(effect);
            }
        }
    }

    fn applier_input(&mut self, input: ApplyInput) {
        self.apply_inputs.push_back(input);
    }

    fn branch_event(&mut self, event: Event) {
        match event {
            Event::Published { tip, through } => {
                self.pace.published(through);
                if self.snapshot_unpublished.is_some_and(|r| r <= through) {
                    self.snapshot_unpublished = None;
                    self.before_whole.clear();
                }
                if let Some(tip) = tip {
                    self.applier_input(ApplyInput::Published(tip));
                }
                if !self.flushes.published(through).flushes.is_empty() {
                    self.log(format!(
                        "the flush is answered: published through {}",
                        through.0
                    ));
                    self.applier_input(ApplyInput::Flushed(tip));
                }
            }
            Event::Foreign(foreign) => {
                self.foreign_seen += 1;
                self.log(format!("the worker saw a foreign commit {}", foreign.tip));
                // Backflow's own commit is foreign only when somebody else moved the branch
                // to it (a force-push back).
                let remote = &self.branch.remote;
                let by = remote.commits.get(&foreign.tip).map(|c| c.by.as_str());
                let moved_by_push = remote
                    .tips
                    .iter()
                    .rev()
                    .find(|(tip, _)| *tip == Some(foreign.tip))
                    .is_some_and(|(_, forced)| !forced);
                if self.found.is_none() && by == Some("backflow") && moved_by_push {
                    self.found = Some(Violation::OwnCommitForeign(foreign.tip.to_string()));
                }
                self.applier_input(ApplyInput::Foreign(foreign.tip));
            }
            Event::Diverged(divergence) => {
                // As the controller: every target's stream lists again (events of the old
                // watch are not delivered), the lists are published, then the worker is told.
                self.log(format!(
                    "the branch lost backflow's commits ({divergence:?}): the mirror resyncs"
                ));
                self.watch.clear();
                for e in self.expected.values_mut() {
                    e.unseen();
                }
                self.lost_to_applier();
                self.echoes_queued = 0;
                // The new list replaces one still under way.
                self.listing = false;
                // The claim is held while the streams read their new lists.
                self.applier_input(ApplyInput::Gate(Some(Hold::Snapshots(
                    "the branch is resynced after it lost backflow's commits".into(),
                ))));
                // The streams start again: each reads the claim before its list.
                let baseline = self.claim_start();
                self.publish_live_state(baseline);
                self.branch.step(Input::Recovered);
                if let Some(tip) = divergence.tip {
                    self.applier_input(ApplyInput::Foreign(tip));
                }
                // As the claim: a Git-side change, applied once the resync is published (an
                // apply in flight may write the commit the branch lost over the resync).
                self.applier_input(ApplyInput::Reason(Reason::ForeignCommit));
            }
            Event::Failed { error, retry_at } => {
                self.log(format!(
                    "the cycle failed ({error}); retried at {retry_at:?}"
                ));
                let (now, cfg) = (self.branch.now, self.branch.core.config());
                let paced = self.pace.failed(now, retry_at, cfg);
                if self.found.is_none() {
                    self.found = paced.err();
                }
            }
            other @ Event::Refused { .. } => self.log(format!("branch event {other:?}")),
        }
    }

    fn apply_effect(&mut self, effect: ApplyEffect) {
        match effect {
            ApplyEffect::Flush => {
                let paced = self
                    .apply_pace
                    .flushed(self.branch.now, &ApplierConfig::default());
                if self.found.is_none() {
                    self.found = paced.err();
                }
                self.flush();
            }
            ApplyEffect::Ask(operation) => self.ask(operation),
            ApplyEffect::WakeAt(at) => self.apply_wake = Some(at),
            ApplyEffect::Record { operation, .. } => {
                // As the runner, by its rule: an operation that left objects to a newer live
                // edit is not the live side's in full, so a restart applies its commit again.
                match operation.phase {
                    OperationPhase::Failed => self.apply_pace.failed(self.branch.now),
                    OperationPhase::Succeeded => {
                        self.apply_pace.succeeded();
                        self.check_last_applied(&operation);
                    }
                    _ => {}
                }
                let recorded = self.deferred.recorded(&operation, LeftOff::default());
                self.recorded_applied = recorded.applied.or(self.recorded_applied);
                self.recorded_in_step = recorded.in_step.or(self.recorded_in_step);
                if self.found.is_none() {
                    self.found = self.operations.recorded(&operation);
                }
                self.recorded = Some(operation);
            }
            ApplyEffect::Emit(event) => {
                if let ApplyEvent::Unresolved(operation) = &event {
                    self.check_unresolved(operation);
                }
                self.log(format!("apply decision: {event:?}"));
            }
        }
    }

    /// What the decision reports as last applied (the claim's `lastAppliedCommit` reads it) is
    /// the commit of the operation that just succeeded, unless that only stamped.
    fn check_last_applied(&mut self, operation: &Operation) {
        let reported = self.applier.last_applied();
        if !operation.reasons.catch_up_only()
            && reported != Some(operation.commit)
            && self.found.is_none()
        {
            self.found = Some(Violation::Reported(format!(
                "apply {} succeeded at {}, the decision reports {reported:?} last applied",
                operation.id.0, operation.commit
            )));
        }
    }

    /// An operation is reported unresolved only once it was in flight as long as the decision
    /// promises (`unresolved_after`, 5 minutes), counted from when the claim's status says it
    /// was requested.
    fn check_unresolved(&mut self, operation: &Operation) {
        let patience = ApplierConfig::default().unresolved_after;
        let waited = self.branch.now.saturating_since(operation.requested_at);
        if waited < patience && self.found.is_none() {
            self.found = Some(Violation::Late(format!(
                "apply {} reported unresolved after {waited:?}, before {patience:?}",
                operation.id.0
            )));
        }
    }

    /// Closes the window and publishes everything decided so far, then answers with the tip.
    fn flush(&mut self) {
        // As the claim's runner: the streams catch up first, then the window opens, then the
        // mark is taken. What the catch-up decides is before the mark (in the commit), so it
        // is judged before this apply's window is open, against the earlier ones alone.
        if !self.listing {
            self.catch_up();
        }
        self.flushed_at = self.branch.now;
        self.windows.open(self.flushed_at.0.as_nanos());
        self.ledger.flushed();
        if self.variant == Variant::ApplyWithoutFlush {
            self.flush_mark = self.branch.core.last_seq();
            let tip = self.branch.remote.tip;
            self.log("flush skipped (broken variant)".into());
            return self.applier_input(ApplyInput::Flushed(tip));
        }
        self.branch.step(Input::Flush);
        self.flush_mark = self.branch.core.decided_through();
        self.pace.flushed(self.flush_mark, self.flushed_at);
        self.log(format!("flush through intent {}", self.flush_mark.0));
        self.flushes.flush(self.flush_mark, ());
    }

    /// As the claim's runner before a flush: every stream lists its scope and decides what its
    /// watch has not delivered yet (the events, when they come, find nothing to do).
    fn catch_up(&mut self) {
        if !self.watch.is_empty() {
            self.log(format!(
                "the streams catch up: {} events on their way are decided",
                self.watch.len()
            ));
        }
        // Decided inside the flush's step: what they set off is pumped once the flush is done.
        self.pump_held += 1;
        while !self.watch.is_empty() {
            self.deliver();
        }
        self.pump_held -= 1;
    }

    /// Runs until nothing is in flight anywhere: every event delivered, every apply finished,
    /// every write published, no reason pending.
    pub fn quiesce(&mut self) -> Result<(), Violation> {
        self.log("--- quiescence: no more edits or pushes ---".into());
        self.quiescing = true;
        self.run_out()
    }

    /// Runs what is in flight until the system is quiet (or never gets there).
    fn run_out(&mut self) -> Result<(), Violation> {
        for _ in 0..2_000 {
            if self.is_quiet() {
                return Ok(());
            }
            if self.listing {
                self.list();
            } else if self.gate_opening {
                self.open_gate();
            } else if self.branch.in_flight.is_some() {
                self.io_answers();
            } else if !self.watch.is_empty() {
                self.deliver();
            } else if self.asked.is_some() {
                self.finish_apply();
            } else {
                self.webhook();
                self.tick();
            }
        }
        Err(Violation::NeverQuiet(format!(
            "branch {:?}, apply {:?}, {} events queued",
            self.branch.core.phase(),
            self.applier.phase(),
            self.watch.len()
        )))
    }

    pub(crate) fn is_quiet(&self) -> bool {
        !self.listing
            && !self.gate_opening
            && self.branch.in_flight.is_none()
            && !self.flushes.flush_waiting()
            && self.watch.is_empty()
            && self.asked.is_none()
            && self.echoes_queued == 0
            && !self.branch.core.has_unpublished()
            && matches!(self.branch.core.phase(), Phase::Idle)
            && matches!(self.applier.phase(), ApplyPhase::Idle)
            // With no branch (deleted, and nothing live to write) reasons wait for one.
            && (self.applier.pending().is_empty() || self.branch.remote.tip.is_none())
            && self.retry_at.is_none()
            && self.branch.remote.tip == self.known_tip()
    }

    /// Whether `name` is live while Git dropped it, and it is a held applier's to leave: Flux
    /// prunes only its inventory (what its last successful apply applied), so an object Git
    /// dropped before it ever applied it stays live (as it would without backflow).
    pub(crate) fn left_by_contract(&self, name: &str) -> bool {
        let path = model::file(name);
        self.held()
            && !absent(&self.live[name].value)
            && !self.branch.remote.tip_files().contains_key(&path)
            && !self
                .branch
                .remote
                .files(self.last_applied)
                .contains_key(&path)
    }

    /// The tip the branch worker last saw, as a commit.
    fn known_tip(&self) -> Option<CommitId> {
        self.branch.core.remote_tip().commit()
    }

    /// Lets time pass with nothing happening: for the "quiescent stays quiet" check.
    pub(crate) fn idle_for(&mut self, ticks: usize) {
        for _ in 0..ticks {
            if self.branch.in_flight.is_some() {
                self.io_answers();
            }
            self.tick();
            if !self.watch.is_empty() {
                self.deliver();
            }
            if self.asked.is_some() {
                self.finish_apply();
            }
        }
    }
}

/// `intent`, named in its commit's `Changed-by:` as `tag`: how the checker tells from the
/// remote's history which submission a commit carries.
fn changed_by(intent: Intent, tag: &str) -> Intent {
    intent.attributed(Some(Attribution {
        by: ChangedBy::Manager(tag.into()),
        commits: CommitAuthors::CoAuthored,
    }))
}
