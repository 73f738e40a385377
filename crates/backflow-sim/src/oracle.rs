//! The outside oracle of "flush, then apply" and "nothing before the snapshot": what the world
//! handed the branch worker, and which of it the applied commit must hold — judged from the
//! remote's history, never from the cores' variables (their flush mark, their pending writes,
//! their `Published` reports).

use std::collections::BTreeMap;

use backflow_branch::CommitId;
use backflow_branch::model::{self, ModelRemote};

use crate::check::Violation;
use crate::live::{ABSENT, same};

/// One object's value as the mirror submitted it.
#[derive(Debug, Clone)]
struct Submission {
    value: String,
    /// How many tips the branch had had by then.
    since: usize,
    /// An applier's echo: the worker may drop it (Git held that value), so it is owed to no
    /// flush; a newer value of the object all the same.
    echo: bool,
}

/// For each object, which of its submissions a flush or a snapshot covers (an index into
/// [`Ledger::submitted`]'s list): the commit applied must hold that one or a newer one.
type Covered = BTreeMap<String, usize>;

/// The world's record of what this process submitted and flushed.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Every submission of each object, in order.
    submissions: BTreeMap<String, Vec<Submission>>,
    /// The latest snapshot of the live state (the initial list, a resync after a divergence).
    snapshot: Option<Covered>,
    /// The flush of the next apply, taken when it was asked of the worker.
    flush: Option<Covered>,
}

impl Ledger {
    /// The mirror submitted `value` for `name`: an API edit, a snapshot's object, or (`echo`)
    /// an applier's write.
    pub(crate) fn submitted(&mut self, name: &str, value: &str, echo: bool, remote: &ModelRemote) {
        let list = self.submissions.entry(name.to_string()).or_default();
        list.push(Submission {
            value: value.to_string(),
            since: remote.tips.len(),
            echo,
        });
    }

    /// The mirror submitted a snapshot of the live state.
    pub(crate) fn snapshot<'a>(
        &mut self,
        objects: impl Iterator<Item = (&'a String, &'a str)>,
        remote: &ModelRemote,
    ) {
        let mut covered = Covered::new();
        for (name, value) in objects {
            self.submitted(name, value, false, remote);
            covered.insert(name.clone(), self.submissions[name].len() - 1);
        }
        self.snapshot = Some(covered);
    }

    /// The apply's flush was asked of the worker: it covers the last submission of each
    /// object, unless that is an echo.
    pub(crate) fn flushed(&mut self) {
        let covered = self
            .submissions
            .iter()
            .filter_map(|(name, list)| {
                let last = list.len().checked_sub(1)?;
                (!list[last].echo).then(|| (name.clone(), last))
            })
            .collect();
        self.flush = Some(covered);
    }

    /// The process was killed: the new one submitted nothing yet.
    pub(crate) fn restarted(&mut self) {
        *self = Self::default();
    }

    /// The applier is asked for `commit`: invariants 1 and 7, from the remote's history.
    pub(crate) fn asked(&mut self, commit: CommitId, remote: &ModelRemote) -> Option<Violation> {
        let Some(flush) = self.flush.take() else {
            return Some(Violation::AppliedUnflushed(
                "an apply asked with no flush since the last one".into(),
            ));
        };
        let Some(snapshot) = &self.snapshot else {
            return Some(Violation::AppliedBeforeSnapshot(
                "the live state was not listed yet".into(),
            ));
        };
        if let Some(missing) = self.missing(snapshot, commit, remote) {
            return Some(Violation::AppliedBeforeSnapshot(missing));
        }
        self.missing(&flush, commit, remote)
            .map(Violation::AppliedUnflushed)
    }

    /// What of `covered` the history of `commit` lacks, if anything.
    fn missing(&self, covered: &Covered, commit: CommitId, remote: &ModelRemote) -> Option<String> {
        let missing: Vec<String> = covered
            .iter()
            .filter(|(name, from)| {
                let list = &self.submissions[name.as_str()];
                !list[**from..]
                    .iter()
                    .any(|sub| held_since(remote, commit, name, sub))
            })
            .map(|(name, from)| format!("{name} = {}", self.submissions[name][*from].value))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{} submitted before it, never in the history of {commit}",
                missing.join(", ")
            )
        })
    }
}

/// Whether `sub` of `name` is in Git as `commit` has it: some tip the branch pointed at from
/// the submission on (or right before it: Git may have held the value already) held it, and
/// `commit` is that tip or descends from it — or somebody force-pushed the branch since, a
/// Git-side change newer than the edit.
fn held_since(remote: &ModelRemote, commit: CommitId, name: &str, sub: &Submission) -> bool {
    let path = model::file(name);
    let holds = |tip: Option<CommitId>| {
        let files = remote.files(tip);
        same(files.get(&path).map_or(ABSENT, String::as_str), &sub.value)
    };
    if sub.since == 0 && holds(None) {
        return true;
    }
    let from = sub.since.saturating_sub(1);
    let tips = &remote.tips[from..];
    tips.iter().enumerate().any(|(at, (tip, _))| {
        let forced_since = tips[at + 1..].iter().any(|(_, forced)| *forced);
        holds(*tip) && (forced_since || tip.is_none_or(|t| remote.contains(Some(commit), t)))
    })
}
