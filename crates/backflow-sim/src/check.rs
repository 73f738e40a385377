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

use std::fmt;

use backflow_branch::IntentSeq;
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
    AppliedBeforeSnapshot,
    /// The system never settled.
    NeverQuiet(String),
    /// 8: backflow's own push reported as somebody else's commit.
    OwnCommitForeign(String),
    /// A core broke one of its own checks (a `debug_assert!` on its phase or watermarks).
    CoreCheck(String),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AppliedUnflushed(m) => write!(f, "(1) applied unflushed: {m}"),
            Self::WrongFinalValue(m) => write!(f, "(2-4) wrong final value: {m}"),
            Self::LostCommit(m) => write!(f, "(5) lost commit: {m}"),
            Self::NotQuiescent(m) => write!(f, "(6) not quiescent: {m}"),
            Self::AppliedBeforeSnapshot => write!(f, "(7) applied before the initial snapshot"),
            Self::NeverQuiet(m) => write!(f, "never quiet: {m}"),
            Self::OwnCommitForeign(c) => write!(f, "(8) backflow's own commit {c} reported foreign"),
            Self::CoreCheck(m) => write!(f, "a core broke its own check: {m}"),
        }
    }
}

/// What one object may end with, following the last edit on each side.
///
/// An API edit (or a snapshot of the live state) wins over a push made after it was
/// published; over a push made while it was still on its way, either may win (the API side
/// wins the replay unless its intent was dropped as unchanged, judged against a tip read after
/// the edit, which depends on when the push landed), so both are accepted — but nothing older
/// ever is.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    /// The values the object may end with.
    pub candidates: Vec<String>,
    /// The newest API edit, and its intent once the mirror submitted it.
    person: Option<(String, Option<IntentSeq>)>,
}

impl Expected {
    pub(crate) fn new(value: String) -> Self {
        Self {
            candidates: vec![value],
            person: None,
        }
    }

    pub(crate) fn person_edits(&mut self, value: String) {
        self.candidates = vec![value.clone()];
        self.person = Some((value, None));
    }

    pub(crate) fn submitted(&mut self, value: &str, seq: IntentSeq) {
        if let Some(p) = self.person.as_mut().filter(|p| p.0 == value) {
            p.1 = Some(seq);
        }
    }

    /// Somebody pushed `value`, when the worker had published through `published`.
    pub(crate) fn foreign_push(&mut self, value: String, published: IntentSeq) {
        let settled = match &self.person {
            None => true,
            Some((_, seq)) => seq.is_some_and(|s| s <= published),
        };
        if settled {
            self.candidates = vec![value];
        } else {
            self.candidates.push(value);
        }
    }
}

/// Invariant 1, at the moment an apply is asked: no edit decided up to the flush's mark is
/// still unpublished.
pub(crate) fn flushed_before_asking(world: &World, mark: IntentSeq) -> Option<Violation> {
    let stale: Vec<String> = world
        .unpublished()
        .into_iter()
        .filter(|(seq, _)| *seq <= mark)
        .map(|(seq, intent)| format!("intent {} ({})", seq.0, intent.key.name))
        .collect();
    (!stale.is_empty()).then(|| {
        Violation::AppliedUnflushed(format!(
            "{} decided before the flush but not published",
            stale.join(", ")
        ))
    })
}

impl World {
    /// The invariants that hold after every step.
    pub fn check_step(&mut self) -> Result<(), Violation> {
        if let Some(v) = self.found.take() {
            return Err(v);
        }
        match self.branch.remote.dropped_by_a_push() {
            Some(dropped) => Err(Violation::LostCommit(dropped)),
            None => Ok(()),
        }
    }

    /// The invariants of a quiescent system (call after [`World::quiesce`]).
    pub fn check_quiescent(&mut self) -> Result<(), Violation> {
        self.check_step()?;
        let git = self.branch.remote.tip_files();
        for name in NAMES {
            let allowed = &self.expected[name].candidates;
            let live = &self.live[name].value;
            let in_git = git.get(&model::file(name)).map_or(ABSENT, String::as_str);
            if !allowed.iter().any(|a| same(a, live)) || !same(in_git, live) {
                return Err(Violation::WrongFinalValue(format!(
                    "{name}: expected one of {allowed:?}, live {live}, Git {in_git}"
                )));
            }
        }
        let (tip, asks) = (self.branch.remote.tip, self.asks);
        self.idle_for(40);
        if self.branch.remote.tip != tip || self.asks != asks {
            return Err(Violation::NotQuiescent(format!(
                "tip {tip:?} -> {:?}, applies asked {asks} -> {}",
                self.branch.remote.tip, self.asks
            )));
        }
        self.check_step()
    }
}
