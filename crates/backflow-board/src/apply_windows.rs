//! The apply windows of the coordinated targets, shared by the claims (which open and close
//! them, and announce the applier's prunes) and the watch streams (which judge writes against
//! them with [`backflow_decision::WindowEdits`]).
//!
//! A window opens at the flush before an apply and stays open until its operation ended plus
//! [`ApplyWindows::GRACE`]; the last [`WindowHistory::KEPT`] are remembered beyond that, so an
//! apply's write whose watch event arrives late is still known as that apply's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backflow_api::ObjectKey;
use backflow_decision::{WindowHistory, WindowSpan};

/// The apply windows of the coordinated targets, by target (namespace, name).
#[derive(Debug, Clone, Default)]
pub struct ApplyWindows(Arc<Mutex<ByTarget>>);

/// Each target's windows.
type ByTarget = BTreeMap<(String, String), WindowHistory<Pruned>>;

/// An object the applier deletes: its key and uid. A delete of another incarnation of the same
/// name (deleted and created again meanwhile) is somebody's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pruned {
    /// The object.
    pub key: ObjectKey,
    /// Its `metadata.uid`.
    pub uid: String,
}

fn nanos(at: SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()
}

impl ApplyWindows {
    /// How long a window stays open after its operation ended: the apply's last watch events
    /// may still be on their way.
    pub const GRACE: Duration = backflow_decision::APPLY_WINDOW_GRACE;

    fn lock(&self) -> MutexGuard<'_, ByTarget> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens the window of each target (namespace, name), from `since` (the flush).
    pub fn open(&self, targets: &[(String, String)], since: SystemTime) {
        let mut windows = self.lock();
        for t in targets {
            windows.entry(t.clone()).or_default().open(nanos(since));
        }
    }

    /// Opens the window of each target (namespace, name) that has none open, from `since`: a
    /// restart found its claim's operation in flight with a held applier (Flux, Argo CD), which
    /// may write any moment, and whose flush was in the process that died. The claim and the
    /// folder's watch streams each open it when they read the status, whichever comes first,
    /// so a stream's first list is read inside it.
    pub fn open_restored(&self, targets: &[(String, String)], since: SystemTime) {
        let at = nanos(since);
        let mut windows = self.lock();
        for t in targets {
            let history = windows.entry(t.clone()).or_default();
            if !history
                .spans(at)
                .iter()
                .any(|w| w.open && w.until.is_none())
            {
                history.open(at);
            }
        }
    }

    /// The operation of each target ended at `at`: its window closes after the grace.
    pub fn close(&self, targets: &[(String, String)], at: SystemTime) {
        let mut windows = self.lock();
        for t in targets {
            if let Some(w) = windows.get_mut(t) {
                w.ended(nanos(at));
            }
        }
    }

    /// The windows of `target` a write seen at `now` is judged against.
    #[must_use]
    pub fn spans(&self, target: &(String, String), now: SystemTime) -> Vec<WindowSpan> {
        self.lock()
            .get(target)
            .map(|w| w.spans(nanos(now)))
            .unwrap_or_default()
    }

    /// The applier of `targets` is about to delete `object` (a prune): the delete's watch
    /// event is its apply landing, not somebody's delete. Announced before the delete is sent,
    /// so the event can never arrive first.
    pub fn note_prune(&self, targets: &[(String, String)], object: &Pruned) {
        let mut windows = self.lock();
        for t in targets {
            if let Some(w) = windows.get_mut(t) {
                w.note_prune(object.clone());
            }
        }
    }

    /// The window of `target` in which its applier announced deleting `object`, if a kept one
    /// did; used up by the asking.
    #[must_use]
    pub fn take_prune(&self, target: &(String, String), object: &Pruned) -> Option<u128> {
        self.lock().get_mut(target)?.take_prune(object)
    }
}

#[cfg(test)]
mod tests {
    use backflow_api::GroupResource;

    use super::*;

    fn key(name: &str) -> Pruned {
        Pruned {
            key: ObjectKey::new(GroupResource::new("", "configmaps"), "web", name),
            uid: format!("uid-{name}"),
        }
    }

    #[test]
    fn windows_are_kept_per_target_and_close_after_the_grace() {
        let windows = ApplyWindows::default();
        let target = ("web".to_string(), "apps".to_string());
        let targets = std::slice::from_ref(&target);
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        assert!(windows.spans(&target, at(100_000)).is_empty());
        windows.note_prune(targets, &key("a"));
        windows.open(targets, at(100_250));
        assert_eq!(
            windows.take_prune(&target, &key("a")),
            None,
            "announced before it"
        );
        windows.note_prune(targets, &key("a"));
        windows.close(targets, at(102_000));
        let spans = windows.spans(&target, at(103_000));
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].since, spans[0].until), (100, Some(104)));
        assert!(spans[0].open, "within the grace");
        assert!(!windows.spans(&target, at(104_000))[0].open, "closed");
        assert_eq!(
            windows.take_prune(&target, &key("a")),
            Some(100_250_000_000)
        );
        let other = ("web".to_string(), "other".to_string());
        assert!(windows.spans(&other, at(103_000)).is_empty());
    }

    /// The claim and the folder's streams both open a restored operation's window: one
    /// window, from whichever came first; one whose operation ended opens anew.
    #[test]
    fn a_restored_window_opens_once() {
        let windows = ApplyWindows::default();
        let target = ("web".to_string(), "apps".to_string());
        let targets = std::slice::from_ref(&target);
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        windows.open_restored(targets, at(100_000));
        windows.open_restored(targets, at(101_000));
        let spans = windows.spans(&target, at(101_500));
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].since, spans[0].until), (100, None));
        windows.close(targets, at(102_000));
        windows.open_restored(targets, at(102_500));
        let spans = windows.spans(&target, at(102_600));
        assert_eq!(spans.len(), 2, "the ended one is kept, a new one opens");
        assert_eq!(spans[1].since, 102);
    }
}
