//! What Git keeps of objects whose live state is an applier's write withheld from Git: the
//! applier wrote over a live edit made during its apply (a collision), the mirror kept the
//! write out of Git, and a Repair is to apply the edit back. Until the object's next write is
//! seen, its live state is not what Git must hold.
//!
//! It outlives the watch streams that found it, so a stream that starts again (after the
//! branch lost backflow's commits, or a watch error) lists such an object as the edit Git
//! keeps, not as the applier's write: a list knows nothing of the collision, and would
//! otherwise publish the write over the edit, which the Repair then applies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use backflow_api::ObjectKey;
use backflow_branch::ObjectJson;

use crate::TargetRef;

/// Per target, per object whose applier's write was withheld, that write and what Git keeps.
#[derive(Debug, Clone, Default)]
pub struct Withheld(Arc<Mutex<BTreeMap<TargetRef, Kept>>>);

/// One target's withheld objects.
pub type Kept = BTreeMap<ObjectKey, WithheldWrite>;

/// An applier's write kept out of Git, and what Git keeps instead: the edit's sanitized value,
/// or `None` when the edit was a delete (how a list reads it: [`backflow_decision::as_git_keeps`]).
pub type WithheldWrite = backflow_decision::WithheldWrite<Arc<ObjectJson>>;

impl Withheld {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<TargetRef, Kept>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The applier's `write` of `key` in `target` was withheld.
    pub fn withhold(&self, target: &TargetRef, key: ObjectKey, write: WithheldWrite) {
        self.lock()
            .entry(target.clone())
            .or_default()
            .insert(key, write);
    }

    /// A later write of `key` was seen (an edit, or the Repair's apply landing): its live state
    /// is what the mirror makes of it again.
    pub fn release(&self, target: &TargetRef, key: &ObjectKey) {
        let mut all = self.lock();
        if let Some(kept) = all.get_mut(target) {
            kept.remove(key);
            if kept.is_empty() {
                all.remove(target);
            }
        }
    }

    /// What Git keeps of `target`'s withheld objects.
    #[must_use]
    pub fn of(&self, target: &TargetRef) -> Kept {
        self.lock().get(target).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use backflow_api::GroupResource;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
    }

    #[test]
    fn a_withheld_object_is_kept_until_its_next_write_and_per_target() {
        let withheld = Withheld::default();
        let (apps, other) = (
            ("ns".to_string(), "apps".to_string()),
            ("ns".into(), "other".into()),
        );
        let edit = Arc::new(ObjectJson::new(&serde_json::json!({"data": {"k": "edit"}})));
        let write = |version, kept| WithheldWrite { version, kept };
        withheld.withhold(&apps, key("a"), write(3, Some(edit.clone())));
        withheld.withhold(&apps, key("b"), write(4, None));
        assert_eq!(
            withheld.of(&apps).get(&key("a")),
            Some(&write(3, Some(edit)))
        );
        assert_eq!(withheld.of(&apps).get(&key("b")), Some(&write(4, None)));
        assert!(withheld.of(&other).is_empty());
        withheld.release(&apps, &key("a"));
        withheld.release(&other, &key("b"));
        assert_eq!(withheld.of(&apps).keys().collect::<Vec<_>>(), [&key("b")]);
        withheld.release(&apps, &key("b"));
        assert!(withheld.of(&apps).is_empty());
    }
}
