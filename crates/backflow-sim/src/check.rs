//! The invariants, checked after every step and at quiescence.
//!
//! 1. Every API edit decided before a flush is in the commit that apply applies.
//! 2. No API edit is reverted permanently, and 3. a Git-side change to an object with no
//!    pending API edit reaches the live side: at quiescence each object holds the value of its
//!    last edit — a push made after the last API edit was published wins; over one still on
//!    its way either may (see [`Expected`]); nothing older ever does.
//! 4. At quiescence Git equals the live state.
//! 5. No commit is lost and no push is forced: every tip descends from the one before.
//! 6. A quiescent system makes no commit and asks for no apply.
//! 7. Nothing is applied before the initial snapshot is published.
//! 10. The branch worker keeps its timing, and the apply decision its backoff (`pace.rs`).
//! 11. What the branch worker reports (its stats, read by the metrics) is what happened: the
//!     commits its builds wrote, the pushes accepted, refused and unanswered, the foreign
//!     commits it reported — counted by the world as it answered; and the apply decision's last
//!     applied commit is the one of the operation that just succeeded (unless it only stamped).

use std::fmt;

use backflow_branch::model::{self, ModelRemote};

use crate::world::{ABSENT, NAMES, World, same};

/// What a schedule broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// 1: an apply was asked while an edit decided before its flush was unpublished.
    AppliedUnflushed(String),
    /// 2, 3, 4: the value an object ended with.
    WrongFinalValue(String),
    /// 5: a push dropped commits.
    LostCommit(String),
    /// 6: a quiescent system committed or asked for an apply.
    NotQuiescent(String),
    /// 7: an apply asked before the initial snapshot was published.
    AppliedBeforeSnapshot(String),
    /// The system never settled.
    NeverQuiet(String),
    /// 8: backflow's own push reported as somebody else's commit.
    OwnCommitForeign(String),
    /// 9: an operation asked anew beside one found in flight, or under a number used before.
    Operations(String),
    /// 10: the branch worker kept an edit waiting past its window, retried later than its
    /// backoff allows, or pushed inside its cooldown.
    Late(String),
    /// A core broke one of its own checks (a `debug_assert!` on its phase or watermarks).
    CoreCheck(String),
    /// 11: the branch worker's stats, or the decision's last applied commit, say something
    /// else than what happened.
    Reported(String),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AppliedUnflushed(m) => write!(f, "(1) applied unflushed: {m}"),
            Self::WrongFinalValue(m) => write!(f, "(2-4) wrong final value: {m}"),
            Self::LostCommit(m) => write!(f, "(5) lost commit: {m}"),
            Self::NotQuiescent(m) => write!(f, "(6) not quiescent: {m}"),
            Self::AppliedBeforeSnapshot(m) => {
                write!(f, "(7) applied before the initial snapshot: {m}")
            }
            Self::NeverQuiet(m) => write!(f, "never quiet: {m}"),
            Self::Operations(m) => write!(f, "(9) operations: {m}"),
            Self::OwnCommitForeign(c) => {
                write!(f, "(8) backflow's own commit {c} reported foreign")
            }
            Self::Late(m) => write!(f, "(10) timing: {m}"),
            Self::CoreCheck(m) => write!(f, "a core broke its own check: {m}"),
            Self::Reported(m) => write!(f, "(11) reported: {m}"),
        }
    }
}

/// What one object may end with, following the last edit on each side.
///
/// An API edit (or a snapshot of the live state) wins over a push made after Git held it; over
/// a push made while it was still on its way, either may win (the API side wins the replay
/// unless its intent was dropped as unchanged, judged against a tip read after the edit, which
/// depends on when the push landed), so both are accepted — but nothing older ever is. Whether
/// Git held it is read from the remote's history, not from the branch worker.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    /// The values the object may end with.
    pub candidates: Vec<String>,
    /// The newest API edit, and its submission once the mirror made it.
    person: Option<(String, Option<Submitted>)>,
    /// Any value will do, as long as both sides agree: a person's delete that never reached a
    /// branch worker (its event died with the process or the stream) and that the next list's
    /// sweep does not remove (the commit it reads against did not hold the object); until the
    /// person's next edit (older edits still on their way may win over later pushes).
    pub any: bool,
}

impl Expected {
    pub(crate) fn new(value: String) -> Self {
        Self {
            candidates: vec![value],
            person: None,
            any: false,
        }
    }

    pub(crate) fn person_edits(&mut self, value: String) {
        self.candidates = vec![value.clone()];
        self.person = Some((value, None));
        self.any = false;
    }

    /// The watch events on their way died (with the process, or with the streams a divergence
    /// starts again): a person's delete never handed to the branch worker is known to nobody
    /// now (the live store keeps no trace of it), and the object may come back.
    pub(crate) fn unseen(&mut self) {
        if let Some((value, None)) = &self.person
            && value.starts_with('-')
        {
            self.any = true;
        }
    }

    /// The mirror submitted `value`, named `tag` in its commit.
    pub(crate) fn submitted(&mut self, value: &str, tag: &str) {
        if let Some(p) = self.person.as_mut().filter(|p| p.0 == value) {
            // Submitted again (a snapshot after a restart or a divergence): any commit naming
            // one of its submissions carries it.
            p.1.get_or_insert_with(|| Submitted { tags: Vec::new() })
                .tags
                .push(tag.to_string());
        }
    }

    /// The newest API edit's value, if a person edited the object.
    pub(crate) fn edit(&self) -> Option<&str> {
        self.person.as_ref().map(|(value, _)| value.as_str())
    }

    /// Whether the newest API edit is in a commit the branch holds.
    pub(crate) fn edit_in_git(&self, remote: &ModelRemote) -> bool {
        self.person
            .as_ref()
            .and_then(|(_, submitted)| submitted.as_ref())
            .is_some_and(|s| s.pushed(remote))
    }

    /// Somebody force-pushed the branch to a commit holding `value` (`was_in_git`: whether the
    /// newest API edit was in the branch before). When that dropped the edit's commit, the
    /// worker publishes the edit again — as a replay when it did not know the commit landed,
    /// or in the resync after it saw its commits go — so the edit may win again.
    pub(crate) fn force_pushed(&mut self, value: String, was_in_git: bool, remote: &ModelRemote) {
        self.foreign_push(value, remote);
        if was_in_git
            && !self.edit_in_git(remote)
            && let Some((edit, _)) = &self.person
        {
            self.candidates.push(edit.clone());
        }
    }

    /// An applier wrote over the newest API edit, and the streams listed again before the edit
    /// was repaired (a restart, a divergence): the edit may be lost (a known gap, see
    /// docs/simulation.md), and any value will do as long as both sides agree.
    pub(crate) fn lost_in_a_list(&mut self) {
        self.any = true;
    }

    /// A held applier wrote `value` over the newest API edit while backflow was down, before
    /// the edit reached Git: the edit is lost as it would be without backflow.
    /// `in_git`: what the branch holds of the object now.
    pub(crate) fn lost_to_applier(&mut self, value: String, in_git: String) {
        if let Some((edit, _)) = self.person.take() {
            self.candidates.retain(|c| *c != edit);
        }
        // What Git holds stands against the applier's older value where the start-up snapshot
        // reads the object as unchanged since the live side last held a commit.
        self.candidates.push(value);
        self.candidates.push(in_git);
    }

    /// Somebody pushed `value` (already on `remote`).
    pub(crate) fn foreign_push(&mut self, value: String, remote: &ModelRemote) {
        let settled = match &self.person {
            None => true,
            Some((_, submitted)) => submitted.as_ref().is_some_and(|s| s.pushed(remote)),
        };
        if settled {
            self.candidates = vec![value];
        } else {
            self.candidates.push(value);
        }
    }
}

/// An API edit's submission to the branch worker.
#[derive(Debug, Clone)]
struct Submitted {
    /// The `Changed-by:` names of its intents (the mirror's submission, and the snapshots
    /// that carried it again).
    tags: Vec<String>,
}

impl Submitted {
    /// Whether the branch holds a commit that carries it (names it in its `Changed-by:`). An
    /// edit Git held already changes no file: when it counts as published is the worker's
    /// business, which the remote's history does not show, so until then either side may win.
    fn pushed(&self, remote: &ModelRemote) -> bool {
        remote.history().iter().any(|c| {
            remote
                .commits
                .get(c)
                .is_some_and(|m| self.tags.iter().any(|t| m.changed_by.contains(t)))
        })
    }
}

impl World {
    /// The invariants that hold after every step.
    pub fn check_step(&mut self) -> Result<(), Violation> {
        if let Some(v) = self.found.take() {
            return Err(v);
        }
        self.check_reported()?;
        match self.branch.remote.dropped_by_a_push() {
            Some(dropped) => Err(Violation::LostCommit(dropped)),
            None => Ok(()),
        }
    }

    /// Invariant 11: the worker's stats count what the world answered and heard.
    fn check_reported(&self) -> Result<(), Violation> {
        let stats = self.branch.core.stats();
        let answered = self.branch.answered;
        let reported = model::Answered {
            commits: stats.commits,
            pushes_accepted: stats.pushes_accepted,
            pushes_rejected: stats.pushes_rejected,
            push_errors: stats.push_errors,
        };
        if reported != answered || stats.foreign_commits != self.foreign_seen() {
            return Err(Violation::Reported(format!(
                "the worker's stats {stats:?}; answered {answered:?}, {} foreign commits reported",
                self.foreign_seen()
            )));
        }
        Ok(())
    }

    /// The invariants of a quiescent system (call after [`World::quiesce`]).
    pub fn check_quiescent(&mut self) -> Result<(), Violation> {
        self.check_step()?;
        let git = self.branch.remote.tip_files();
        for name in NAMES {
            if self.left_by_contract(name) {
                continue;
            }
            let expected = &self.expected[name];
            let allowed = &expected.candidates;
            let live = &self.live[name].value;
            let in_git = git.get(&model::file(name)).map_or(ABSENT, String::as_str);
            let wanted = expected.any || allowed.iter().any(|a| same(a, live));
            if !wanted || !same(in_git, live) {
                return Err(Violation::WrongFinalValue(format!(
                    "{name}: expected one of {allowed:?}, live {live}, Git {in_git}"
                )));
            }
        }
        let (tip, asks) = (self.branch.remote.tip, self.asks);
        let effects = self.branch.effects.len();
        self.idle_for(40);
        if self.branch.remote.tip != tip || self.asks != asks {
            return Err(Violation::NotQuiescent(format!(
                "tip {tip:?} -> {:?}, applies asked {asks} -> {}",
                self.branch.remote.tip, self.asks
            )));
        }
        // Ten quiet seconds, far inside the refresh interval: at most one read of the remote
        // (a refresh that fell due), nothing built, pushed or reported.
        let io = |prefix: &str| {
            self.branch.effects[effects..]
                .iter()
                .filter(|e| e.starts_with(prefix))
                .count()
        };
        let (fetches, builds, pushes) = (io("Fetch"), io("Build"), io("Push"));
        let events = io("Emit");
        if self.branch.wake <= self.branch.now {
            return Err(Violation::NotQuiescent(
                "idle, the worker asks to be woken at once".into(),
            ));
        }
        if fetches > 1 || builds > 0 || pushes > 0 || events > 0 {
            return Err(Violation::NotQuiescent(format!(
                "idle, the worker read the remote {fetches} times, built {builds}, pushed \
                 {pushes}, reported {events} events"
            )));
        }
        self.check_step()
    }
}
