//! The commit window: rolling silence with a maximum age.
//!
//! Intents collect in the open window, last write wins per object. The window closes after
//! `silence` without a new intent, or `max_age` after it opened, whichever comes first, so a
//! steady stream still commits. A silence of zero closes it on every intent.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::intent::{Intent, IntentSeq, ObjectState, Slot};
use crate::moment::Moment;

/// The open commit window of one branch worker. Pure: time is handed in.
#[derive(Debug, Clone)]
pub struct CommitWindow {
    silence: Duration,
    max_age: Duration,
    entries: BTreeMap<Slot, (IntentSeq, Intent)>,
    opened_at: Option<Moment>,
    last_write_at: Option<Moment>,
}

impl CommitWindow {
    /// A closed window with these limits.
    #[must_use]
    pub fn new(silence: Duration, max_age: Duration) -> Self {
        Self {
            silence,
            max_age,
            entries: BTreeMap::new(),
            opened_at: None,
            last_write_at: None,
        }
    }

    /// Changes the limits; an open window closes by the new ones.
    pub fn set_limits(&mut self, silence: Duration, max_age: Duration) {
        self.silence = silence;
        self.max_age = max_age;
    }

    /// Whether every intent should be its own commit.
    #[must_use]
    pub fn is_immediate(&self) -> bool {
        self.silence.is_zero()
    }

    /// Whether no intent is waiting.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many objects the window holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The oldest intent the window holds.
    #[must_use]
    pub fn first_seq(&self) -> Option<IntentSeq> {
        self.entries.values().map(|(seq, _)| *seq).min()
    }

    /// Adds an intent; an earlier intent for the same object is replaced. A sweep is the newer
    /// word on every object of its scope it does not keep: an earlier write of one in this
    /// window (a snapshot listed before the object was deleted, superseded by a newer one) is
    /// dropped, or it would bring the object back into Git.
    pub fn put(&mut self, seq: IntentSeq, intent: Intent, now: Moment) {
        if self.opened_at.is_none() {
            self.opened_at = Some(now);
        }
        self.last_write_at = Some(now);
        if let ObjectState::Sweep(scope) = &intent.state {
            self.entries.retain(|(target, key), (_, earlier)| {
                let in_scope = *target == intent.target
                    && key.resource == scope.resource
                    && scope
                        .namespace
                        .as_ref()
                        .is_none_or(|ns| *ns == key.namespace)
                    && matches!(earlier.state, ObjectState::Present(_));
                !in_scope || scope.keeps(&key.namespace, &key.name)
            });
        }
        let slot = intent.slot();
        let mut intent = intent;
        if let Some((_, earlier)) = self.entries.get(&slot) {
            // Both changes go out as one: what the live side held before the first of them.
            intent.baseline.clone_from(&earlier.baseline);
        }
        self.entries.insert(slot, (seq, intent));
    }

    /// When the window closes by itself, if it is open.
    #[must_use]
    pub fn deadline(&self) -> Option<Moment> {
        let opened = self.opened_at?;
        let last = self.last_write_at.unwrap_or(opened);
        Some(std::cmp::min(last + self.silence, opened + self.max_age))
    }

    /// Whether the window is open and its deadline has passed.
    #[must_use]
    pub fn is_due(&self, now: Moment) -> bool {
        self.deadline().is_some_and(|d| d <= now)
    }

    /// Closes the window and hands back its intents (empty when it was not open).
    pub fn close(&mut self) -> BTreeMap<Slot, (IntentSeq, Intent)> {
        self.opened_at = None;
        self.last_write_at = None;
        std::mem::take(&mut self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::{GroupResource, ObjectKey};
    use std::sync::Arc;

    fn intent(name: &str, v: i64) -> Intent {
        Intent::put(
            "t",
            ObjectKey::new(GroupResource::new("", "configmaps"), "ns", name),
            serde_json::json!(v),
        )
    }

    #[test]
    fn silence_rolls_and_max_age_caps() {
        let t0 = Moment(Duration::from_secs(1000));
        let s = Duration::from_secs(1);
        let mut w = CommitWindow::new(s, Duration::from_secs(5));
        assert_eq!(w.deadline(), None);
        w.put(IntentSeq(1), intent("a", 1), t0);
        assert_eq!(w.deadline(), Some(t0 + s));
        // A steady stream every 900 ms keeps pushing the silence deadline out, until max age.
        for i in 1..10u64 {
            let at = t0 + Duration::from_millis(900 * i);
            w.put(IntentSeq(1 + i), intent("a", i as i64), at);
        }
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(5)));
        assert!(w.is_due(t0 + Duration::from_secs(5)));
        let closed = w.close();
        assert_eq!(closed.len(), 1, "last write wins per object");
        let (seq, last) = closed.values().next().cloned().expect("one entry");
        assert_eq!(seq, IntentSeq(10));
        assert_eq!(last, intent("a", 9));
        assert!(w.is_empty());
        assert_eq!(w.deadline(), None);
    }

    /// Two snapshots of one type in one window (the start-up list, then the list after the
    /// branch lost backflow's commits): an object the first held and the second does not (it
    /// was deleted in between) is not written back; what the second keeps, and other types,
    /// stay.
    #[test]
    fn a_newer_sweep_drops_earlier_writes_of_what_it_does_not_keep() {
        let t0 = Moment(Duration::from_secs(1));
        let mut w = CommitWindow::new(Duration::from_secs(1), Duration::from_secs(5));
        let secret = Intent::put(
            "t",
            ObjectKey::new(GroupResource::new("", "secrets"), "ns", "gone"),
            serde_json::json!(1),
        );
        w.put(IntentSeq(1), intent("kept", 1), t0);
        w.put(IntentSeq(2), intent("gone", 1), t0);
        w.put(IntentSeq(3), secret, t0);
        let scope = crate::SweepScope {
            resource: GroupResource::new("", "configmaps"),
            namespace: Some("ns".into()),
            keep: [("ns".to_string(), "kept".to_string())].into(),
            removable: None,
        };
        w.put(IntentSeq(4), Intent::sweep("t", scope), t0);
        let names: Vec<(String, String)> = w
            .close()
            .keys()
            .map(|(_, key)| (key.resource.resource.clone(), key.name.clone()))
            .collect();
        assert!(
            !names.contains(&("configmaps".into(), "gone".into())),
            "{names:?}"
        );
        assert!(
            names.contains(&("configmaps".into(), "kept".into())),
            "{names:?}"
        );
        assert!(
            names.contains(&("secrets".into(), "gone".into())),
            "{names:?}"
        );
    }

    #[test]
    fn changes_of_one_object_in_one_window_keep_the_first_ones_baseline() {
        let t0 = Moment(Duration::from_secs(1));
        let mut w = CommitWindow::new(Duration::from_secs(1), Duration::from_secs(5));
        let before = |v: i64| Arc::new(crate::ObjectJson::new(&serde_json::json!(v)));
        w.put(IntentSeq(1), intent("a", 1).edit_of(before(0)), t0);
        w.put(IntentSeq(2), intent("a", 2).edit_of(before(1)), t0);
        w.put(IntentSeq(3), intent("b", 1), t0);
        w.put(IntentSeq(4), intent("b", 2).edit_of(before(1)), t0);
        let closed = w.close();
        let baselines: Vec<_> = closed.values().map(|(_, i)| i.baseline.clone()).collect();
        // A create followed by an edit is still a create: the whole object.
        assert_eq!(
            baselines,
            vec![Some(crate::Baseline::Value(before(0))), None]
        );
    }
}
