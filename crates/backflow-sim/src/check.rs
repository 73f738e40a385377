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

use backflow_branch::model;

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
            let live = &self.live[name].value;
            let in_git = git.get(&model::file(name)).map_or(ABSENT, String::as_str);
            let unmet = self.expected[name].unmet(live);
            if unmet.is_some() || !same(in_git, live) {
                return Err(Violation::WrongFinalValue(format!(
                    "{name}: {}, live {live}, Git {in_git}",
                    unmet.as_deref().unwrap_or("as expected")
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
