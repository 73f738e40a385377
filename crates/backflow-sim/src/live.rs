//! The model live store's objects and their watch events, with the managedFields the real
//! mirror judges them by: who wrote, in which second.

use backflow_branch::Moment;
use backflow_decision::{ManagedWrite, Writes};

/// The field manager of a person's edits (kubectl's).
const PERSON_MANAGER: &str = "kubectl-edit";
/// The native applier's field manager.
const APPLIER_MANAGER: &str = "backflow-applier";
/// The field managers a held applier writes as: Flux's kustomize-controller, Argo CD's
/// application controller with server-side apply, and with client-side apply (its default).
pub(crate) const HELD_MANAGERS: [&str; 3] = [
    "kustomize-controller",
    "argocd-controller",
    "argocd-application-controller",
];

/// The value of an object that does not exist: a tombstone, `-` followed by the edit that
/// removed it (`-p12` deleted through the API, `-g7` removed from Git), so each removal is an
/// edit of its own, as each value is; `-` alone when the applier removed it.
pub(crate) const ABSENT: &str = "-";

/// Whether `value` is a tombstone (the object does not exist).
pub(crate) fn absent(value: &str) -> bool {
    value.starts_with(ABSENT)
}

/// Whether two values say the same: equal, or both that the object does not exist.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a == b || (absent(a) && absent(b))
}

/// `at` in whole seconds, the precision of managedFields (the simulated clock starts 1,000 s
/// after the epoch).
pub(crate) fn second(at: Moment) -> i64 {
    i64::try_from(at.0.as_secs()).unwrap_or(i64::MAX)
}

/// Who wrote a live value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    Person,
    /// backflow's own applier.
    Applier,
    /// A held applier (Flux's kustomize-controller, Argo CD's application controller), by
    /// its field manager.
    Held(&'static str),
}

impl Writer {
    /// Whether an applier wrote (its own write's watch event is an echo on its way).
    pub(crate) fn is_applier(self) -> bool {
        matches!(self, Self::Applier | Self::Held(_))
    }
}

/// A live object: its value, who wrote it, its uid and its managedFields.
#[derive(Debug, Clone)]
pub(crate) struct LiveObject {
    pub value: String,
    pub by: Writer,
    /// Its incarnation: an object deleted and created again has a new one. A tombstone keeps
    /// the uid of the object deleted (its delete event carries it).
    pub uid: u64,
    /// The object's managedFields: the applier's (its label and the fields it applied) and a
    /// person's. Empty for an object that does not exist.
    pub managed: Vec<ManagedWrite>,
    /// Its `resourceVersion`: every write makes a new one (a delete too).
    pub version: u64,
}

impl LiveObject {
    /// The object after `by` wrote `value` at `at` over `previous` (`fresh`: a number never
    /// used before — the uid of an object created, and the write's `resourceVersion`). Each writer owns a field of its own besides the value (the applier its
    /// label, a person kubectl's last-applied annotation), so a write takes the value over and
    /// leaves the other writer's entry as it was; a delete leaves nothing.
    pub(crate) fn written(
        previous: Option<&LiveObject>,
        value: String,
        by: Writer,
        at: Moment,
        fresh: u64,
    ) -> Self {
        let existing = previous.filter(|p| !absent(&p.value));
        let uid = existing.map_or(fresh, |p| p.uid);
        let mut managed = Vec::new();
        if !absent(&value) {
            let manager = match by {
                Writer::Person => PERSON_MANAGER,
                Writer::Applier => APPLIER_MANAGER,
                Writer::Held(manager) => manager,
            };
            if let Some(p) = existing {
                managed.extend(p.managed.iter().filter(|w| w.manager != manager).cloned());
            }
            managed.push(ManagedWrite {
                manager: manager.into(),
                second: second(at),
            });
        }
        Self {
            value,
            by,
            uid,
            managed,
            version: fresh,
        }
    }

    /// Whether a manager other than the applier wrote it in `cutoff`'s second or later: the
    /// native applier leaves such an object for now (`edited_since`).
    pub(crate) fn edited_since(&self, cutoff: Moment) -> bool {
        let cutoff = second(cutoff);
        self.managed
            .iter()
            .any(|w| w.manager != APPLIER_MANAGER && w.second >= cutoff)
    }

    /// Its watch event: what the mirror reads.
    pub(crate) fn event(&self, name: &str) -> WatchEvent {
        WatchEvent {
            name: name.to_string(),
            value: self.value.clone(),
            by: self.by,
            uid: self.uid,
            version: self.version,
            writes: Writes::new(self.managed.clone()),
        }
    }
}

/// A watch event on its way to the mirror.
#[derive(Debug, Clone)]
pub(crate) struct WatchEvent {
    pub name: String,
    pub value: String,
    pub by: Writer,
    pub uid: u64,
    pub version: u64,
    pub writes: Writes,
}

/// An object the applier deletes, as the mirror's windows hold it: name and uid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pruned {
    pub name: String,
    pub uid: u64,
}
