//! The apply window, as the watch streams see it: which write is an apply landing (kept out of
//! Git), and which is an apply landing over a newer live edit (withheld, and repaired).
//!
//! A window opens at the flush before an apply and closes when its operation ends (plus
//! [`ApplyWindows::GRACE`]). An edit whose watch event arrives while it is open was decided
//! after the flush's mark, whenever it was made, so the apply's commit does not hold it. Inside it, a write whose newest field managers are the applier's
//! alone, to an object nobody else edited in the window, is the apply landing: mirrored, it
//! would carry the applied commit's values onto a newer tip. An edit made in the window keeps
//! its value in Git; when the applier's write lands over it, that write is withheld and a
//! Repair applies the tip that holds the edit. The edit is captured from its own watch event: a
//! forced apply may take the editor's fields over, so managedFields read after the apply cannot
//! be trusted to show it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backflow_api::ObjectKey;
use kube::api::DynamicObject;

use crate::managers::Writes;

/// The field managers of the appliers backflow holds: its own, Flux's kustomize-controller and
/// Argo CD's application controller. A write by these alone is an applier's.
const APPLIER_MANAGERS: &[&str] = &[
    "backflow-applier",
    "kustomize-controller",
    "argocd-controller",
];

/// The apply windows of the coordinated targets, shared by the claims (which open and close
/// them) and the watch streams (which judge writes against them).
#[derive(Debug, Clone, Default)]
pub struct ApplyWindows(Arc<Mutex<BTreeMap<(String, String), Window>>>);

/// One target's window: open since the flush, until the operation ended plus the grace, and
/// the objects its applier deleted in it.
#[derive(Debug, Clone)]
struct Window {
    since: SystemTime,
    until: Option<SystemTime>,
    pruned: BTreeSet<ObjectKey>,
}

impl Window {
    fn is_open(&self, now: SystemTime) -> bool {
        self.until.is_none_or(|until| now < until)
    }
}

impl ApplyWindows {
    /// How long a window stays open after its operation ended: the apply's last watch events
    /// may still be on their way.
    pub const GRACE: Duration = Duration::from_secs(2);

    /// Opens the window of each target (namespace, name), from `since` (the flush).
    pub fn open(&self, targets: &[(String, String)], since: SystemTime) {
        let mut windows = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for t in targets {
            let window = Window {
                since,
                until: None,
                pruned: BTreeSet::new(),
            };
            windows.insert(t.clone(), window);
        }
    }

    /// The operation of each target ended at `at`: its window closes after the grace.
    pub fn close(&self, targets: &[(String, String)], at: SystemTime) {
        let mut windows = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for t in targets {
            if let Some(w) = windows.get_mut(t) {
                w.until = Some(at + Self::GRACE);
            }
        }
    }

    /// Since when the window of `target` is open at `now`, if it is.
    #[must_use]
    pub fn since(&self, target: &(String, String), now: SystemTime) -> Option<SystemTime> {
        let windows = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let w = windows.get(target)?;
        w.is_open(now).then_some(w.since)
    }

    /// The applier of `targets` is about to delete `key` (a prune): the delete's watch event
    /// is the apply landing, not somebody's delete. Noted before the delete is sent, so the
    /// event can never arrive first.
    pub fn note_prune(&self, targets: &[(String, String)], key: &ObjectKey) {
        let mut windows = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for t in targets {
            if let Some(w) = windows.get_mut(t).filter(|w| w.until.is_none()) {
                w.pruned.insert(key.clone());
            }
        }
    }

    /// Whether the applier of `target` deleted `key` in the window open at `now`.
    #[must_use]
    pub fn pruned(&self, target: &(String, String), key: &ObjectKey, now: SystemTime) -> bool {
        let windows = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        windows
            .get(target)
            .is_some_and(|w| w.is_open(now) && w.pruned.contains(key))
    }
}

/// What a write is, judged against its target's apply window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Somebody's edit (or a write the window cannot prove is the applier's): mirrored.
    Edit,
    /// The applier's alone with no window open: mirrored like any edit, counted `late`.
    Late,
    /// The apply landing: not mirrored.
    Landing,
    /// The applier's write over a live edit made in the window: withheld from Git (the edit
    /// keeps its value there), and a Repair is asked for.
    Collision,
    /// Another applier write over the same edit in the same window (a stamp after the apply):
    /// withheld too, without asking again.
    OverCollided,
}

/// The live edits one stream saw inside the open window, captured from their own watch
/// events.
#[derive(Debug, Default)]
pub(crate) struct WindowEdits {
    /// The window the edits were seen in (its start); another window forgets them.
    window: Option<SystemTime>,
    edits: BTreeMap<ObjectKey, WindowEdit>,
}

/// A live edit seen in the window.
#[derive(Debug, Clone, Copy)]
struct WindowEdit {
    /// Its second.
    at: i64,
    /// Whether an applier write already landed over it (and a Repair was asked for).
    collided: bool,
}

impl WindowEdits {
    /// Judges a write of `key` (the object as its watch event carries it) against the window
    /// open since `window`, and remembers it when it is an edit made inside the window.
    pub(crate) fn judge(
        &mut self,
        key: &ObjectKey,
        obj: &DynamicObject,
        window: Option<SystemTime>,
    ) -> Verdict {
        if self.window != window {
            self.window = window;
            self.edits.clear();
        }
        let since = window.map(unix_second);
        let writes = Writes::of(obj);
        let Some(newest) = writes.newest() else {
            return Verdict::Edit;
        };
        if !writes.only_by_at(APPLIER_MANAGERS, newest) {
            // An edit whose event arrives while the window is open was decided after the
            // flush's mark, whenever it was made: the apply's commit does not hold it.
            if since.is_some() {
                let edit = WindowEdit {
                    at: newest,
                    collided: false,
                };
                self.edits.insert(key.clone(), edit);
            }
            return Verdict::Edit;
        }
        let Some(since) = since else {
            return Verdict::Late;
        };
        // The edit's event came first, so in the same second the edit arrived first. Every
        // applier write over it in this window is withheld (Git keeps the edit until the
        // Repair, which runs in a window of its own); only the first asks for the Repair.
        if let Some(edit) = self.edits.get_mut(key).filter(|e| newest >= e.at) {
            if edit.collided {
                return Verdict::OverCollided;
            }
            edit.collided = true;
            return Verdict::Collision;
        }
        if newest >= since && !writes.others_since(APPLIER_MANAGERS, since) {
            Verdict::Landing
        } else {
            Verdict::Edit
        }
    }

    /// Judges a delete of `key` against the window open since `window`; `pruned` says whether
    /// the applier deleted it ([`ApplyWindows::note_prune`]). The applier's delete is the apply
    /// landing, or, over a live edit seen in the window, a collision (Git keeps the edit, and
    /// the Repair brings the object back). Somebody's delete in the window is remembered like an
    /// edit: the applier re-creating the object after it collides.
    pub(crate) fn judge_delete(
        &mut self,
        key: &ObjectKey,
        window: Option<SystemTime>,
        pruned: bool,
    ) -> Verdict {
        if self.window != window {
            self.window = window;
            self.edits.clear();
        }
        let Some(since) = window.map(unix_second) else {
            return Verdict::Edit;
        };
        if !pruned {
            let edit = WindowEdit {
                at: since,
                collided: false,
            };
            self.edits.insert(key.clone(), edit);
            return Verdict::Edit;
        }
        match self.edits.get_mut(key) {
            Some(edit) if edit.collided => Verdict::OverCollided,
            Some(edit) => {
                edit.collided = true;
                Verdict::Collision
            }
            None => Verdict::Landing,
        }
    }
}

fn unix_second(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use backflow_api::GroupResource;

    use super::*;

    fn object(entries: &[(&str, u64)]) -> DynamicObject {
        let fields: Vec<serde_json::Value> = entries
            .iter()
            .map(|(manager, secs)| {
                let time = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(*secs));
                serde_json::json!({"manager": manager, "operation": "Update", "time": time.to_string()})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": fields},
        }))
        .unwrap()
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
    }

    fn judge(entries: &[(&str, u64)], window: Option<u64>) -> Verdict {
        WindowEdits::default().judge(
            &key("a"),
            &object(entries),
            window.map(|s| UNIX_EPOCH + Duration::from_secs(s)),
        )
    }

    #[test]
    fn an_apply_landing_is_the_applier_alone_newest_inside_its_window() {
        let landing = [("kubectl-edit", 50), ("backflow-applier", 101)];
        assert_eq!(judge(&landing, Some(100)), Verdict::Landing);
        assert_eq!(judge(&landing, None), Verdict::Late, "no window: an edit");
        let edited_in_window = [("kubectl-edit", 100), ("backflow-applier", 101)];
        assert_eq!(
            judge(&edited_in_window, Some(100)),
            Verdict::Edit,
            "somebody else wrote in it"
        );
        let tie = [("kubectl-edit", 101), ("backflow-applier", 101)];
        assert_eq!(
            judge(&tie, Some(100)),
            Verdict::Edit,
            "a tie with another manager is mirrored"
        );
        let before = [("backflow-applier", 90)];
        assert_eq!(
            judge(&before, Some(100)),
            Verdict::Edit,
            "older than the window"
        );
        let user = [("backflow-applier", 90), ("kubectl-edit", 120)];
        assert_eq!(judge(&user, Some(100)), Verdict::Edit);
    }

    #[test]
    fn the_applier_deleting_is_a_landing_and_over_an_edit_in_the_window_a_collision() {
        let window = Some(UNIX_EPOCH + Duration::from_secs(100));
        let mut edits = WindowEdits::default();
        assert_eq!(
            edits.judge_delete(&key("a"), window, true),
            Verdict::Landing
        );
        assert_eq!(
            edits.judge_delete(&key("a"), None, true),
            Verdict::Edit,
            "no window: mirrored"
        );
        let mut edits = WindowEdits::default();
        let edit = object(&[("kubectl-edit", 90)]);
        assert_eq!(edits.judge(&key("b"), &edit, window), Verdict::Edit);
        assert_eq!(
            edits.judge_delete(&key("b"), window, true),
            Verdict::Collision
        );
        // Somebody's delete is mirrored, and the applier re-creating the object collides.
        assert_eq!(edits.judge_delete(&key("c"), window, false), Verdict::Edit);
        let created = object(&[("backflow-applier", 101)]);
        assert_eq!(edits.judge(&key("c"), &created, window), Verdict::Collision);
        assert_eq!(
            edits.judge(&key("d"), &created, window),
            Verdict::Landing,
            "nobody deleted d"
        );
    }

    #[test]
    fn a_prune_is_noted_only_in_an_open_window_and_forgotten_with_it() {
        let windows = ApplyWindows::default();
        let target = ("web".to_string(), "apps".to_string());
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        windows.note_prune(std::slice::from_ref(&target), &key("a"));
        windows.open(std::slice::from_ref(&target), at(100));
        assert!(
            !windows.pruned(&target, &key("a"), at(100)),
            "noted before the window"
        );
        windows.note_prune(std::slice::from_ref(&target), &key("a"));
        assert!(windows.pruned(&target, &key("a"), at(101)));
        assert!(!windows.pruned(&target, &key("b"), at(101)));
        windows.close(std::slice::from_ref(&target), at(102));
        assert!(
            windows.pruned(&target, &key("a"), at(103)),
            "within the grace"
        );
        assert!(!windows.pruned(&target, &key("a"), at(105)), "closed");
        windows.open(std::slice::from_ref(&target), at(200));
        assert!(!windows.pruned(&target, &key("a"), at(200)), "a new window");
    }

    #[test]
    fn the_applier_writing_over_an_edit_seen_in_the_window_collides() {
        let window = Some(UNIX_EPOCH + Duration::from_secs(100));
        let mut edits = WindowEdits::default();
        // The edit, in the window's second, then the forced apply that took its fields over:
        // the edit's entry is gone from the apply's event, and only the captured edit tells.
        let edit = object(&[("backflow-applier", 90), ("kubectl-edit", 100)]);
        assert_eq!(edits.judge(&key("a"), &edit, window), Verdict::Edit);
        let over = object(&[("backflow-applier", 100)]);
        assert_eq!(edits.judge(&key("a"), &over, window), Verdict::Collision);
        // The applier writes over it again in the same window (a stamp): withheld, asked once.
        assert_eq!(edits.judge(&key("a"), &over, window), Verdict::OverCollided);
        // Another object, never edited: a landing.
        assert_eq!(edits.judge(&key("b"), &over, window), Verdict::Landing);
        // An edit made before the flush whose event arrives in the window (a slow watch) was
        // decided after the mark: an apply writing over it collides too.
        let mut edits = WindowEdits::default();
        let late = object(&[("kubectl-edit", 90)]);
        assert_eq!(edits.judge(&key("d"), &late, window), Verdict::Edit);
        let over_late = object(&[("backflow-applier", 101)]);
        assert_eq!(
            edits.judge(&key("d"), &over_late, window),
            Verdict::Collision
        );
        // The Repair runs in a window of its own: its landing is a landing.
        let repair = Some(UNIX_EPOCH + Duration::from_secs(150));
        let repaired = object(&[("backflow-applier", 150)]);
        assert_eq!(edits.judge(&key("a"), &repaired, repair), Verdict::Landing);
        // An edit captured in an earlier window does not count in the next one.
        assert_eq!(edits.judge(&key("c"), &edit, window), Verdict::Edit);
        let next = Some(UNIX_EPOCH + Duration::from_secs(200));
        let later = object(&[("backflow-applier", 201)]);
        assert_eq!(edits.judge(&key("c"), &later, next), Verdict::Landing);
    }
}
