//! A claim's status, computed from the operation and the applier's report (pure).

use backflow_api::config::condition::{NotReady, cond, set_condition, summary};
use backflow_api::config::{
    ClaimStatus, Condition, ConditionStatus, InventoryEntry, OperationStatus,
};
use backflow_decision::{Operation, OperationPhase};

use super::plan::{ClaimPlan, ClaimProblem};

/// `status.operation` for an operation.
#[must_use]
pub fn operation_status(
    op: &Operation,
    message: &str,
    requested_at: &str,
    now: &str,
) -> OperationStatus {
    OperationStatus {
        id: op.id.0,
        commit: op.commit.to_string(),
        reasons: op.reasons.names().into_iter().map(str::to_string).collect(),
        phase: op.phase.as_str().to_string(),
        message: message.to_string(),
        requested_at: Some(requested_at.to_string()),
        finished_at: matches!(op.phase, OperationPhase::Succeeded | OperationPhase::Failed)
            .then(|| now.to_string()),
    }
}

/// The conditions of a claim that acts: `ApplierClaimReady` from its plan, `Ready` from its
/// last operation.
#[must_use]
pub fn acting_conditions(
    previous: &[Condition],
    plan: &ClaimPlan,
    operation: Option<&OperationStatus>,
    now: &str,
    generation: Option<i64>,
) -> Vec<Condition> {
    let mut conditions = previous.to_vec();
    set_condition(
        &mut conditions,
        cond(
            "ApplierClaimReady",
            ConditionStatus::True,
            "Claimed",
            format!(
                "applies {} of {} branch {} when backflow asks",
                plan.folders.join(", "),
                plan.url,
                plan.branch
            ),
            now,
            generation,
        ),
    );
    let ready = match operation.map(|o| (o.phase.as_str(), o)) {
        None => Err(NotReady::progressing(
            "Progressing",
            "no apply asked for yet",
        )),
        Some(("Succeeded", o)) => {
            summary(&mut conditions, Ok(()), now, generation);
            if let Some(c) = conditions.iter_mut().find(|c| c.type_ == "Ready") {
                c.message = format!("Applied commit {}", o.commit);
            }
            return conditions;
        }
        Some(("Failed", o)) => Err(NotReady::progressing(
            "ApplyFailed",
            format!(
                "applying {} failed (retried after a backoff): {}",
                o.commit, o.message
            ),
        )),
        Some(("Unresolved", o)) => Err(NotReady::progressing(
            "Unresolved",
            format!(
                "applying {} has not ended after 5 minutes; still followed",
                o.commit
            ),
        )),
        Some((_, o)) => Err(NotReady::progressing(
            "Progressing",
            format!("applying {}", o.commit),
        )),
    };
    summary(&mut conditions, ready, now, generation);
    conditions
}

/// The status of a claim that cannot act.
#[must_use]
pub fn problem_status(
    previous: Option<&ClaimStatus>,
    problem: &ClaimProblem,
    now: &str,
    generation: Option<i64>,
) -> ClaimStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;
    set_condition(
        &mut status.conditions,
        cond(
            "ApplierClaimReady",
            ConditionStatus::False,
            problem.reason,
            problem.message.clone(),
            now,
            generation,
        ),
    );
    summary(
        &mut status.conditions,
        Err(NotReady::stalled(problem.reason, problem.message.clone())),
        now,
        generation,
    );
    status
}

/// The inventory as status holds it, sorted.
#[must_use]
pub fn inventory(mut entries: Vec<InventoryEntry>) -> Vec<InventoryEntry> {
    entries.sort();
    entries.dedup();
    entries
}

/// What the last apply could not do because of what was pushed, as the claim shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushLimits {
    /// A prune held for a person to confirm: what to do.
    pub prune_held: Option<String>,
    /// Changes out of a push's reach, not applied.
    pub refused: Vec<String>,
    /// Files that could not be read, skipped.
    pub unreadable: Vec<String>,
    /// Secrets Git holds in plain text (applied).
    pub plaintext: Vec<String>,
}

/// Shows `limits` in `conditions`: `PruneHeld`, `GitChangesRefused`, `FilesUnreadable` and
/// `PlaintextSecrets`,
/// each true while it holds and gone once it does not. A held prune makes the claim not
/// `Ready` (stalled: a person confirms it, or a commit restores the files).
pub fn limit_conditions(
    conditions: &mut Vec<Condition>,
    limits: &PushLimits,
    now: &str,
    generation: Option<i64>,
) {
    let first = |lines: &[String]| {
        let more = lines.len().saturating_sub(1);
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        lines.first().map(|l| format!("{l}{tail}"))
    };
    let shown = [
        ("PruneHeld", "PruneHeld", limits.prune_held.clone()),
        (
            "GitChangesRefused",
            "OutOfPushReach",
            first(&limits.refused),
        ),
        (
            "FilesUnreadable",
            "UnreadableFiles",
            first(&limits.unreadable),
        ),
        (
            "PlaintextSecrets",
            "PlaintextInGit",
            first(&limits.plaintext),
        ),
    ];
    for (type_, reason, message) in shown {
        match message {
            Some(message) => set_condition(
                conditions,
                cond(
                    type_,
                    ConditionStatus::True,
                    reason,
                    message,
                    now,
                    generation,
                ),
            ),
            None => conditions.retain(|c| c.type_ != type_),
        }
    }
    if let Some(message) = &limits.prune_held {
        summary(
            conditions,
            Err(NotReady::stalled("PruneHeld", message.clone())),
            now,
            generation,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_limits_show_while_they_hold_and_a_held_prune_is_not_ready() {
        let mut conditions = Vec::new();
        summary(&mut conditions, Ok(()), "t0", None);
        let limits = PushLimits {
            prune_held: Some("commit c would delete 3 of 3".into()),
            refused: vec!["a.yaml: GitTarget".into(), "b.yaml: GitProvider".into()],
            unreadable: Vec::new(),
            plaintext: Vec::new(),
        };
        limit_conditions(&mut conditions, &limits, "t1", Some(2));
        let get = |c: &[Condition], t: &str| c.iter().find(|c| c.type_ == t).cloned();
        assert_eq!(
            get(&conditions, "PruneHeld").map(|c| c.status),
            Some(ConditionStatus::True)
        );
        assert_eq!(
            get(&conditions, "GitChangesRefused").map(|c| c.message),
            Some("a.yaml: GitTarget (and 1 more)".into())
        );
        assert!(get(&conditions, "FilesUnreadable").is_none());
        let ready = get(&conditions, "Ready").expect("Ready");
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, "PruneHeld")
        );
        limit_conditions(&mut conditions, &PushLimits::default(), "t2", Some(2));
        assert!(get(&conditions, "PruneHeld").is_none());
        assert!(get(&conditions, "GitChangesRefused").is_none());
    }
}
