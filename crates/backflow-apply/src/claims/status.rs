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
