//! kstatus conditions, as every configuration kind reports them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `True`, `False` or `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

/// One condition (`metav1.Condition` shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Reconciling`, `Stalled`, or a kind's own condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A CamelCase reason a program can match on.
    pub reason: String,
    /// What happened and what to do, for a person.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// The generation this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition stamped at `now` (RFC 3339).
    pub fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
        now: &str,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now.into(),
            observed_generation: None,
        }
    }
}

/// Sets `new` in `conditions`, keeping `lastTransitionTime` when the status did not change.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time
                    .clone_from(&old.last_transition_time);
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// A condition stamped with the time and the generation it describes.
pub fn cond(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    now: &str,
    generation: Option<i64>,
) -> Condition {
    Condition {
        observed_generation: generation,
        ..Condition::new(type_, status, reason, message, now)
    }
}

/// Why an object is not Ready, and whether waiting can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// CamelCase reason.
    pub reason: &'static str,
    /// What is wrong and what to do.
    pub message: String,
    /// Whether only a change of the object can help (Stalled) rather than time (Reconciling).
    pub stalled: bool,
}

impl NotReady {
    /// Not ready until the object changes.
    pub fn stalled(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            stalled: true,
        }
    }

    /// Not ready yet; it is being worked on.
    pub fn progressing(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            stalled: false,
        }
    }
}

/// Sets the kstatus summary: `Ready`, plus the abnormal-true `Reconciling` (waiting can help)
/// or `Stalled` (only a change of the object can).
pub fn summary(
    conditions: &mut Vec<Condition>,
    ready: Result<(), NotReady>,
    now: &str,
    generation: Option<i64>,
) {
    let ready = match ready {
        Ok(()) => {
            let c = cond(
                "Ready",
                ConditionStatus::True,
                "Succeeded",
                "",
                now,
                generation,
            );
            set_condition(conditions, c);
            conditions.retain(|c| c.type_ != "Reconciling" && c.type_ != "Stalled");
            return;
        }
        Err(not_ready) => not_ready,
    };
    let NotReady {
        reason,
        message,
        stalled,
    } = ready;
    let c = cond(
        "Ready",
        ConditionStatus::False,
        reason,
        message.clone(),
        now,
        generation,
    );
    set_condition(conditions, c);
    let (keep, drop) = if stalled {
        ("Stalled", "Reconciling")
    } else {
        ("Reconciling", "Stalled")
    };
    set_condition(
        conditions,
        cond(
            keep,
            ConditionStatus::True,
            reason,
            message,
            now,
            generation,
        ),
    );
    conditions.retain(|c| c.type_ != drop);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut cs = vec![];
        set_condition(
            &mut cs,
            Condition::new("Ready", ConditionStatus::False, "Progressing", "", "t1"),
        );
        set_condition(
            &mut cs,
            Condition::new(
                "Ready",
                ConditionStatus::False,
                "Progressing",
                "again",
                "t2",
            ),
        );
        assert_eq!(cs[0].last_transition_time, "t1");
        set_condition(
            &mut cs,
            Condition::new("Ready", ConditionStatus::True, "Succeeded", "", "t3"),
        );
        assert_eq!((cs.len(), cs[0].last_transition_time.as_str()), (1, "t3"));
    }
}
