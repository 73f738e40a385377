//! What a live snapshot's objects are published as changes of (`Intent::baseline`): the
//! mirror's rule for its lists, kept pure so the simulator runs the same decision.
//!
//! | folder and moment | objects | a sweep may remove |
//! |---|---|---|
//! | not coordinated | whole | every document not kept |
//! | a relist | changes of what the stream last saw | only objects it saw |
//! | the first list after a (re)start | changes of the claim's commits ([`LiveHeld`]) | only documents the in-step commit held |
//! | first contact | per the claim's rule | nothing |

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use backflow_api::ObjectKey;

use crate::{CommitId, Intent, LiveHeld, ObjectJson, ObjectState};

/// The rule for an object both sides hold when a claim first meets its branch (its
/// `spec.firstContact`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FirstContactRule {
    /// The live object is published over the file.
    #[default]
    LiveWins,
    /// The file is applied over the live object.
    GitWins,
}

/// What a stream's first list reads from the folder's claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimStart {
    /// The newest commit the live side is known to have held in full: the claim's
    /// `status.inStepCommit`, else `lastAppliedCommit`.
    pub since: Option<CommitId>,
    /// The commit of the claim's last operation, when it is not `since`: applied in part at
    /// most (cut short, failed, or objects left to newer edits), so an object that reads as it
    /// holds the object was written by the applier, not changed live.
    pub applying: Option<CommitId>,
    /// The claim's first-contact rule, when this is its first contact with the branch (it never
    /// recorded an operation).
    pub first_contact: Option<FirstContactRule>,
}

/// What a stream last saw of each object: its sanitized value, where it keeps one.
pub type SeenValues = BTreeMap<ObjectKey, Option<Arc<ObjectJson>>>;

/// What a snapshot's objects are published as changes of, where an applier coordinates the
/// folder (elsewhere the live side is the truth, and objects are written whole).
#[derive(Debug, Clone, PartialEq)]
pub enum SnapshotBaseline {
    /// Not coordinated: whole objects, and a sweep removes every document not kept.
    Whole,
    /// A relist: each object as the stream last saw it; a sweep removes only objects it saw
    /// (none, when it saw none).
    Seen(SeenValues),
    /// The first snapshot: what the commit the live side last held in full holds, or the
    /// commit of the operation applied since, where an object reads as that.
    Applied(LiveHeld),
    /// The first snapshot of a folder no claim applied yet (first contact): Git's documents
    /// are the applier's to create, so a sweep removes none of them; an object both sides
    /// hold follows the claim's rule.
    FirstContact(FirstContactRule),
}

impl SnapshotBaseline {
    /// The baseline of a list: `coordinated` whether an applier claim coordinates the folder;
    /// `seen` what the stream saw before (a relist); `start` what the claim said, for the first
    /// list since the stream started (`None` for a relist).
    #[must_use]
    pub fn of(coordinated: bool, seen: SeenValues, start: Option<ClaimStart>) -> Self {
        if !coordinated {
            return Self::Whole;
        }
        let Some(start) = start else {
            return Self::Seen(seen);
        };
        match (start.since, start.first_contact) {
            (Some(in_step), _) => Self::Applied(LiveHeld {
                in_step,
                applying: start.applying,
                listed_on: None,
            }),
            (None, Some(rule)) => Self::FirstContact(rule),
            // Operations were recorded, none succeeded: what the live side held is unknown,
            // and it is taken as the truth (as before baselines existed).
            (None, None) => Self::Whole,
        }
    }

    /// `intent`, a listed object's write, as a change of this baseline.
    #[must_use]
    pub fn of_object(&self, intent: Intent) -> Intent {
        match self {
            Self::Seen(seen) => match seen.get(&intent.key).cloned().flatten() {
                Some(before) => intent.edit_of(before),
                None => intent,
            },
            Self::Applied(held) => intent.since(*held),
            Self::FirstContact(FirstContactRule::GitWins) => match &intent.state {
                // A change of nothing: every field reads as Git has it, so a file that holds
                // the object is left as it is (the apply writes it live); one that does not is
                // written whole.
                ObjectState::Present(value) => {
                    let unchanged = value.clone();
                    intent.edit_of(unchanged)
                }
                _ => intent,
            },
            Self::Whole | Self::FirstContact(FirstContactRule::LiveWins) => intent,
        }
    }

    /// `intent`, the list's sweep, removing only what this baseline allows.
    #[must_use]
    pub fn of_sweep(&self, intent: Intent) -> Intent {
        let removable = match self {
            Self::Whole => return intent,
            Self::Applied(held) => return intent.since(*held),
            Self::Seen(seen) => seen
                .keys()
                .map(|k| (k.namespace.clone(), k.name.clone()))
                .collect(),
            Self::FirstContact(_) => BTreeSet::new(),
        };
        intent.removing_only(removable)
    }
}

#[cfg(test)]
mod tests {
    use backflow_api::GroupResource;

    use super::*;
    use crate::{Baseline, SweepScope};

    fn cm_key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
    }

    fn put(name: &str, v: &str) -> Intent {
        Intent::put("live", cm_key(name), serde_json::json!({"v": v}))
    }

    fn sweep() -> Intent {
        Intent::sweep(
            "live",
            SweepScope {
                resource: GroupResource::new("", "configmaps"),
                namespace: None,
                keep: BTreeSet::new(),
                removable: None,
            },
        )
    }

    fn removable(intent: &Intent) -> Option<BTreeSet<(String, String)>> {
        match &intent.state {
            ObjectState::Sweep(scope) => scope.removable.clone(),
            _ => None,
        }
    }

    fn seen(name: &str, v: &str) -> SeenValues {
        let value = ObjectJson::new(&serde_json::json!({"v": v}));
        BTreeMap::from([(cm_key(name), Some(Arc::new(value)))])
    }

    fn commit(hex: char) -> CommitId {
        hex.to_string().repeat(40).parse().expect("a commit id")
    }

    #[test]
    fn the_first_snapshot_is_a_change_of_the_commits_the_live_side_held() {
        let start = ClaimStart {
            since: Some(commit('1')),
            applying: Some(commit('2')),
            first_contact: None,
        };
        let b = SnapshotBaseline::of(true, SeenValues::new(), Some(start));
        let held = LiveHeld {
            in_step: commit('1'),
            applying: Some(commit('2')),
            listed_on: None,
        };
        assert_eq!(
            b.of_object(put("a", "1")).baseline,
            Some(Baseline::Commit(held))
        );
        assert_eq!(b.of_sweep(sweep()).baseline, Some(Baseline::Commit(held)));
        // A folder no claim coordinates: whole objects, a sweep of everything not kept.
        let whole = SnapshotBaseline::of(false, seen("a", "0"), None);
        assert_eq!(whole.of_object(put("a", "1")).baseline, None);
        assert_eq!(removable(&whole.of_sweep(sweep())), None);
    }

    #[test]
    fn a_relist_is_a_change_of_what_the_stream_saw_and_sweeps_only_that() {
        let b = SnapshotBaseline::of(true, seen("a", "0"), None);
        let edit = b.of_object(put("a", "1"));
        assert_eq!(
            edit.baseline.as_ref().and_then(Baseline::value),
            Some(&ObjectJson::new(&serde_json::json!({"v": "0"})))
        );
        assert_eq!(b.of_object(put("new", "1")).baseline, None);
        assert_eq!(
            removable(&b.of_sweep(sweep())),
            Some(BTreeSet::from([("web".to_string(), "a".to_string())]))
        );
        // A relist of a type the stream saw nothing of removes nothing Git holds.
        let empty = SnapshotBaseline::of(true, SeenValues::new(), None);
        assert_eq!(removable(&empty.of_sweep(sweep())), Some(BTreeSet::new()));
    }

    #[test]
    fn at_first_contact_git_wins_publishes_a_change_of_nothing() {
        let start = |rule| ClaimStart {
            since: None,
            applying: None,
            first_contact: Some(rule),
        };
        let git_wins = SnapshotBaseline::of(
            true,
            SeenValues::new(),
            Some(start(FirstContactRule::GitWins)),
        );
        let intent = git_wins.of_object(put("a", "live"));
        assert_eq!(
            intent.baseline.as_ref().and_then(Baseline::value),
            Some(&ObjectJson::new(&serde_json::json!({"v": "live"})))
        );
        assert_eq!(
            removable(&git_wins.of_sweep(sweep())),
            Some(BTreeSet::new())
        );
        let live_wins = SnapshotBaseline::of(
            true,
            SeenValues::new(),
            Some(start(FirstContactRule::LiveWins)),
        );
        assert_eq!(live_wins.of_object(put("a", "live")).baseline, None);
        // Operations recorded, none succeeded: nothing known, the live side is the truth.
        let unknown = SnapshotBaseline::of(true, SeenValues::new(), Some(ClaimStart::default()));
        assert_eq!(unknown.of_object(put("a", "live")).baseline, None);
    }
}
