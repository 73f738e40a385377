//! Who wrote a live object, as its managedFields say: every entry but status ones (a
//! controller reporting status edits nothing Git holds), each with its manager and second.

use kube::api::DynamicObject;

/// An object's non-status managedFields entries: manager and second.
pub(crate) struct Writes(Vec<(String, i64)>);

impl Writes {
    /// The entries of `obj`.
    pub(crate) fn of(obj: &DynamicObject) -> Self {
        let entries = obj.metadata.managed_fields.as_deref().unwrap_or_default();
        Self(
            entries
                .iter()
                .filter(|e| e.subresource.as_deref() != Some("status"))
                .filter_map(|e| {
                    let time = e.time.as_ref()?.0.as_second();
                    Some((e.manager.clone().unwrap_or_default(), time))
                })
                .collect(),
        )
    }

    /// The manager of the newest entry (of the ties, the last listed).
    pub(crate) fn newest_manager(&self) -> Option<&str> {
        let newest = self.newest()?;
        self.0
            .iter()
            .rev()
            .find(|(_, t)| *t == newest)
            .map(|(m, _)| m.as_str())
            .filter(|m| !m.is_empty())
    }

    /// The second of the newest entry.
    pub(crate) fn newest(&self) -> Option<i64> {
        self.0.iter().map(|(_, t)| *t).max()
    }

    /// Whether every entry of second `at` is by one of `managers` (a tie with another manager
    /// is not).
    pub(crate) fn only_by_at<S: AsRef<str>>(&self, managers: &[S], at: i64) -> bool {
        self.0
            .iter()
            .filter(|(_, t)| *t == at)
            .all(|(m, _)| managers.iter().any(|x| x.as_ref() == m))
    }

    /// Whether the newest write was made by `managers` alone.
    pub(crate) fn newest_only_by<S: AsRef<str>>(&self, managers: &[S]) -> bool {
        self.newest()
            .is_some_and(|at| self.only_by_at(managers, at))
    }

    /// Whether a manager not in `managers` has an entry as new as `since` (managedFields have
    /// second precision: `since`'s own second counts).
    pub(crate) fn others_since<S: AsRef<str>>(&self, managers: &[S], since: i64) -> bool {
        self.0
            .iter()
            .any(|(m, t)| *t >= since && !managers.iter().any(|x| x.as_ref() == m))
    }
}
