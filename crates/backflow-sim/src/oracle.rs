//! The outside oracle of "flush, then apply" and "nothing before the snapshot": what the world
//! handed the branch worker, and which of it the applied commit must hold — judged from the
//! remote's history, never from the cores' variables (their flush mark, their pending writes,
//! their `Published` reports). And of the operations: what was asked of the applier and what
//! the claim's status recorded, across processes.

use std::collections::BTreeMap;

use backflow_branch::CommitId;
use backflow_branch::model::{self, ModelRemote};
use backflow_decision::{Operation, OperationId, OperationPhase};

use crate::check::Violation;
use crate::live::{ABSENT, absent, field_of, same};

/// One field of one object: the ledger's unit (a one-value object's field is `""`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FieldKey {
    name: String,
    field: &'static str,
}

impl std::fmt::Display for FieldKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field {
            "" => write!(f, "{}", self.name),
            field => write!(f, "{}.{field}", self.name),
        }
    }
}

/// One field of one object as the mirror submitted it.
#[derive(Debug, Clone)]
struct Submission {
    value: String,
    /// How many tips the branch had had by then.
    since: usize,
    /// Whose it is.
    source: Source,
    /// A field the write left as it was, of an object it made exist again after a delete:
    /// owed only that the object exists (its value may be what Git gained meanwhile).
    revived: bool,
}

/// Where a submission came from, as far as the ledger owes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A person's edit through the API.
    Edit,
    /// An applier's echo: the worker may drop it (Git held that value), so it is owed to no
    /// flush; a newer value of the object all the same.
    Echo,
    /// A snapshot's object. A push that changed the field after it is a newer change of it,
    /// which the replay of an older edit of the object may keep (a snapshot whose field an
    /// older pending write of the object already held is dropped as unchanged, and that write,
    /// read against its baseline, keeps what Git gained since). `baselined`: read against the
    /// claim's in-step commit — when Git held this value before, the object reads as unchanged
    /// live and Git's value since stands, so it is owed to no apply.
    Listed { baselined: bool },
}

impl Submission {
    /// Whether a tree whose object holds `held` in this field carries this submission.
    fn carried_by(&self, held: &str) -> bool {
        if self.revived {
            !absent(held)
        } else {
            same(held, &self.value)
        }
    }
}

/// For each field, which of its submissions a flush or a snapshot covers (an index into
/// [`Ledger::submitted`]'s list): the commit applied must hold that one or a newer one.
type Covered = BTreeMap<FieldKey, usize>;

/// The world's record of what this process submitted and flushed, field by field: a submission
/// owes to a flush only the fields it changed (the replay keeps Git's value of the others).
#[derive(Debug)]
pub(crate) struct Ledger {
    /// The fields of the world's objects.
    fields: &'static [&'static str],
    /// Every submission of each field, in order.
    submissions: BTreeMap<FieldKey, Vec<Submission>>,
    /// The latest snapshot of the live state (the initial list, a resync after a divergence).
    snapshot: Option<Covered>,
    /// The flush of the next apply, taken when it was asked of the worker.
    flush: Option<Covered>,
}

impl Ledger {
    /// The ledger of a world whose objects have `fields`.
    pub(crate) fn new(fields: &'static [&'static str]) -> Self {
        Self {
            fields,
            submissions: BTreeMap::new(),
            snapshot: None,
            flush: None,
        }
    }

    /// The mirror submitted `value` for `name`, a change of `before` (the live value it
    /// replaced: the fields it holds otherwise are submitted; all, without one): an API edit, a
    /// snapshot's object, or (`echo`) an applier's write.
    pub(crate) fn submitted(
        &mut self,
        name: &str,
        value: &str,
        before: Option<&str>,
        echo: bool,
        remote: &ModelRemote,
    ) {
        for field in self.fields {
            let held = field_of(value, field);
            let key = FieldKey {
                name: name.to_string(),
                field,
            };
            // A field the write left as it was is owed nothing — unless its last submission
            // was a delete the write revives (the object exists again, this field with it).
            let last = (self.submissions.get(&key)).and_then(|list| list.last());
            let revived = !absent(value) && last.is_some_and(|sub| absent(&sub.value));
            let unchanged = before.is_some_and(|b| field_of(b, field) == held);
            if unchanged && !revived {
                continue;
            }
            self.submissions.entry(key).or_default().push(Submission {
                value: held,
                since: remote.tips.len(),
                source: if echo { Source::Echo } else { Source::Edit },
                revived: unchanged,
            });
        }
    }

    /// The mirror submitted a snapshot of the live state (`baselined`: read against the
    /// claim's in-step commit, not whole).
    pub(crate) fn snapshot<'a>(
        &mut self,
        objects: impl Iterator<Item = (&'a String, &'a str)>,
        baselined: bool,
        remote: &ModelRemote,
    ) {
        let mut covered = Covered::new();
        for (name, value) in objects {
            self.submitted(name, value, None, false, remote);
            for field in self.fields {
                let key = FieldKey {
                    name: name.clone(),
                    field,
                };
                let list = self.submissions.entry(key.clone()).or_default();
                if let Some(last) = list.last_mut() {
                    last.source = Source::Listed { baselined };
                }
                covered.insert(key, list.len() - 1);
            }
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
                (list[last].source != Source::Echo).then(|| (name.clone(), last))
            })
            .collect();
        self.flush = Some(covered);
    }

    /// The process was killed: the new one submitted nothing yet.
    pub(crate) fn restarted(&mut self) {
        *self = Self::new(self.fields);
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
            .filter(|(key, from)| {
                let list = &self.submissions[*key];
                !list[**from..].iter().any(|sub| {
                    held_since(remote, commit, key, sub)
                        || match sub.source {
                            Source::Listed { baselined } => {
                                (baselined && held_before(remote, key, sub))
                                    || pushed_since(remote, key, sub)
                            }
                            Source::Edit | Source::Echo => false,
                        }
                })
            })
            .map(|(key, from)| format!("{key} = {}", self.submissions[key][*from].value))
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
fn held_since(remote: &ModelRemote, commit: CommitId, key: &FieldKey, sub: &Submission) -> bool {
    let holds = |tip: Option<CommitId>| holds(remote, tip, key, sub);
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

/// Whether Git held `sub`'s value of `name` at some tip before it was submitted: a snapshot
/// read against a commit takes such an object as unchanged live, and Git's value since wins.
fn held_before(remote: &ModelRemote, key: &FieldKey, sub: &Submission) -> bool {
    (remote.tips[..sub.since].iter()).any(|(tip, _)| holds(remote, *tip, key, sub))
}

/// Whether somebody else pushed another value of `key`'s field after `sub` was submitted.
fn pushed_since(remote: &ModelRemote, key: &FieldKey, sub: &Submission) -> bool {
    (remote.tips[sub.since..].iter()).any(|(tip, _)| {
        let foreign = tip
            .and_then(|t| remote.commits.get(&t))
            .is_some_and(|c| c.by != "backflow");
        foreign && !holds(remote, *tip, key, sub)
    })
}

/// Whether the tree of `tip` carries `sub` in `key`'s field.
fn holds(remote: &ModelRemote, tip: Option<CommitId>, key: &FieldKey, sub: &Submission) -> bool {
    let files = remote.files(tip);
    let file = files.get(&model::file(&key.name));
    sub.carried_by(&field_of(file.map_or(ABSENT, String::as_str), key.field))
}

/// The operations asked of the applier and the phases the claim's status recorded for them, in
/// every process (invariant 9).
#[derive(Debug, Default)]
pub(crate) struct OperationLog {
    /// The newest operation asked anew.
    last_asked: Option<OperationId>,
    /// The phase last recorded for each operation.
    phases: BTreeMap<OperationId, OperationPhase>,
}

impl OperationLog {
    /// The applier is asked for `id` (`followed`: an operation a restart found in flight). It
    /// is followed, never asked anew beside it, and a new operation never reuses the number of
    /// one asked before (the claim's status names operations by number).
    pub(crate) fn asked(
        &mut self,
        id: OperationId,
        followed: Option<OperationId>,
    ) -> Option<Violation> {
        if let Some(followed) = followed.filter(|f| *f != id) {
            return Some(Violation::Operations(format!(
                "operation {} asked while {} found in flight was not followed",
                id.0, followed.0
            )));
        }
        if followed == Some(id) {
            return None;
        }
        if let Some(last) = self.last_asked.filter(|last| id <= *last) {
            return Some(Violation::Operations(format!(
                "operation {} asked after operation {}",
                id.0, last.0
            )));
        }
        self.last_asked = Some(id);
        None
    }

    /// The status recorded `operation`: it moves forward only (requested, running, unresolved,
    /// then succeeded or failed, and nothing after that).
    pub(crate) fn recorded(&mut self, operation: &Operation) -> Option<Violation> {
        use OperationPhase::{Failed, Requested, Running, Succeeded, Unresolved};
        let rank = |phase: OperationPhase| match phase {
            Requested => 0,
            Running => 1,
            Unresolved => 2,
            Succeeded | Failed => 3,
        };
        let before = self.phases.insert(operation.id, operation.phase)?;
        let ended = rank(before) == 3;
        let again = before == operation.phase && before != Requested;
        (rank(operation.phase) < rank(before) || ended || again).then(|| {
            Violation::Operations(format!(
                "operation {} recorded {:?} after {:?}",
                operation.id.0, operation.phase, before
            ))
        })
    }

    /// The applier said it was working on `id` when asked: the status says so by now.
    pub(crate) fn running(&self, id: OperationId) -> Option<Violation> {
        (self.phases.get(&id) == Some(&OperationPhase::Requested)).then(|| {
            Violation::Operations(format!(
                "operation {} is running, its status still says Requested",
                id.0
            ))
        })
    }
}
