//! The model live store's objects and their watch events, with the managedFields the real
//! mirror judges them by: who wrote, in which second.

use backflow_branch::Moment;
use backflow_branch::model;
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

/// The fields of a one-value object: the value is its one field.
pub(crate) const ONE_VALUE: &[&str] = &[""];
/// The fields of a two-field object (`Variant::TwoFields`).
pub(crate) const TWO_FIELDS: &[&str] = &["x", "y"];

/// What `value` holds in `field`: the value itself for a one-value object and for a
/// tombstone (every field of an object that does not exist is absent).
pub(crate) fn field_of(value: &str, field: &str) -> String {
    if field.is_empty() || absent(value) {
        return value.to_string();
    }
    match model::value_of(value).get(field) {
        Some(serde_json::Value::String(v)) => v.clone(),
        _ => ABSENT.to_string(),
    }
}

/// `value` (of `fields`) with `field` set to `to`: for a one-value object `to` itself; an
/// object that does not exist is created with every field set to `to`.
pub(crate) fn with_field(value: &str, fields: &[&str], field: &str, to: &str) -> String {
    if field.is_empty() {
        return to.to_string();
    }
    let mut object = serde_json::Map::new();
    for f in fields {
        let kept = field_of(value, f);
        let v = if *f == field || absent(&kept) {
            to.to_string()
        } else {
            kept
        };
        object.insert((*f).to_string(), serde_json::Value::String(v));
    }
    model::text_of(&serde_json::Value::Object(object))
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
    /// The value this write replaced, when it changed an object that existed (the oracle's:
    /// which fields a person's edit changed).
    pub replaced: Option<String>,
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
        let replaced = (existing.filter(|_| !absent(&value))).map(|p| p.value.clone());
        Self {
            value,
            by,
            uid,
            managed,
            version: fresh,
            replaced,
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
            replaced: self.replaced.clone(),
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
    /// See [`LiveObject::replaced`].
    pub replaced: Option<String>,
}

/// An object the applier deletes, as the mirror's windows hold it: name and uid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pruned {
    pub name: String,
    pub uid: u64,
}
