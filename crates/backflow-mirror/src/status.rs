//! The status of the configuration kinds, computed from a snapshot: pure functions, no API
//! calls. The controller gathers the snapshot (the board, the plan, the reconcile's findings)
//! and patches what these functions return.

use backflow_api::config::condition::{NotReady, cond, set_condition, summary};
use backflow_api::config::{
    Condition, ConditionStatus, GitProvider, GitTarget, GitTargetStatus, StreamSummary,
    WatchRuleStatus,
};

use crate::plan::{Problem, TargetRef};
use backflow_board::{StreamState, TargetActivity};

/// A `GitProvider`'s status: Ready when its settings parse, it names a URL, its credentials
/// can be read and its remote answers (`problem`: why not, as the workers found).
pub(crate) fn provider_status(
    g: &GitProvider,
    problem: Option<Problem>,
    now: &str,
) -> serde_json::Value {
    let mut conditions = g
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = g.metadata.generation;
    let ready =
        match crate::workers::worker_config(g, "main", 0, std::time::Duration::from_secs(600)) {
            Err(e) => Err(NotReady::stalled("InvalidConfig", e.to_string())),
            Ok(_) if g.spec.url.trim().is_empty() => {
                Err(NotReady::stalled("InvalidConfig", "spec.url is empty"))
            }
            Ok(_) => match problem {
                // An outage passes by itself; a refused credential or host key needs a person.
                Some(p) if matches!(p.reason, "RemoteUnreachable" | "RemoteBusy") => {
                    Err(NotReady::progressing(p.reason, p.message))
                }
                Some(p) => Err(NotReady::stalled(p.reason, p.message)),
                None => Ok(()),
            },
        };
    summary(&mut conditions, ready, now, generation);
    serde_json::json!({"observedGeneration": generation, "conditions": conditions})
}

/// A `WatchRule`'s or `ClusterWatchRule`'s status, from what the plan resolved for it (`None`:
/// not evaluated yet).
pub(crate) fn rule_status(
    old: Option<WatchRuleStatus>,
    generation: Option<i64>,
    resolved: Option<&Result<Vec<String>, Problem>>,
    now: &str,
) -> WatchRuleStatus {
    let mut st = old.unwrap_or_default();
    st.observed_generation = generation;
    let stamp = |status, reason: &str, message: String| {
        cond(
            "ResourcesResolved",
            status,
            reason,
            message,
            now,
            generation,
        )
    };
    let ready = match resolved {
        Some(Ok(types)) => {
            st.resolved.clone_from(types);
            let message = format!("{} types", types.len());
            set_condition(
                &mut st.conditions,
                stamp(ConditionStatus::True, "Resolved", message),
            );
            Ok(())
        }
        Some(Err(problem)) => {
            st.resolved.clear();
            let c = stamp(
                ConditionStatus::False,
                problem.reason,
                problem.message.clone(),
            );
            set_condition(&mut st.conditions, c);
            Err(NotReady::stalled(problem.reason, problem.message.clone()))
        }
        None => Err(NotReady::progressing("Progressing", "not evaluated yet")),
    };
    summary(&mut st.conditions, ready, now, generation);
    st
}

/// How a `CommitRequest` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommitOutcome {
    /// Every change made before it is in commit `sha` of `branch`, on the remote.
    Committed {
        /// The branch.
        branch: String,
        /// The pushed commit.
        sha: String,
    },
    /// The branch does not exist and nothing was pending.
    NothingToCommit {
        /// The branch.
        branch: String,
    },
    /// The worker stopped before the save was pushed.
    PushFailed(String),
    /// The `GitTarget` it names does not exist or is not ready.
    TargetNotFound(TargetRef),
}

/// A `CommitRequest`'s status once it ended.
pub(crate) fn commit_request_status(
    outcome: &CommitOutcome,
    generation: Option<i64>,
    now: &str,
) -> serde_json::Value {
    let c = |type_: &str, status, reason: &str, message: String| {
        cond(type_, status, reason, message, now, generation)
    };
    let (yes, no) = (ConditionStatus::True, ConditionStatus::False);
    match outcome {
        CommitOutcome::Committed { branch, sha } => serde_json::json!({
            "observedGeneration": generation, "branch": branch, "sha": sha,
            "conditions": [
                c("Ready", yes, "Committed", "every change made before the request is in this commit, on the remote".into()),
                c("Pushed", yes, "Pushed", String::new()),
            ],
        }),
        CommitOutcome::NothingToCommit { branch } => serde_json::json!({
            "observedGeneration": generation, "branch": branch,
            "conditions": [c("Ready", yes, "NothingToCommit", "the branch does not exist and nothing was pending".into())],
        }),
        CommitOutcome::PushFailed(e) => serde_json::json!({
            "observedGeneration": generation,
            "conditions": [c("Ready", no, "PushFailed", e.clone()), c("Stalled", yes, "PushFailed", e.clone())],
        }),
        CommitOutcome::TargetNotFound((ns, name)) => serde_json::json!({
            "observedGeneration": generation,
            "conditions": [
                c("Ready", no, "TargetNotFound", format!("GitTarget {ns}/{name} does not exist or is not ready")),
                c("Stalled", yes, "TargetNotFound", "create the GitTarget, then a new CommitRequest".into()),
            ],
        }),
    }
}

/// A condition as the reconcile found it, before it is stamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConditionReport {
    /// True or False.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: &'static str,
    /// For a person.
    pub message: String,
}

/// What a `GitTarget`'s status is computed from.
#[derive(Debug, Clone, Default)]
pub(crate) struct TargetSnapshot {
    /// The states of its watch streams.
    pub streams: Vec<StreamState>,
    /// What it did lately (pushes, refusals).
    pub activity: TargetActivity,
    /// Why it cannot be served, if it cannot.
    pub problem: Option<Problem>,
    /// Its `EncryptionConfigured` condition, once encryption was resolved.
    pub encryption: Option<ConditionReport>,
    /// Its `ApplierClaimReady` condition, when it names an applier claim.
    pub claim: Option<backflow_board::ClaimReadiness>,
}

/// The status of `t` as `snapshot` shows it at `now`.
pub(crate) fn target_status(
    t: &GitTarget,
    snapshot: &TargetSnapshot,
    now: &str,
) -> GitTargetStatus {
    let generation = t.metadata.generation;
    let mut st: GitTargetStatus = t.status.clone().unwrap_or_default();
    st.observed_generation = generation;
    let stamp = |type_: &str, status, reason: &str, message: String| {
        cond(type_, status, reason, message, now, generation)
    };
    let (sum, blocked) = summarize(&snapshot.streams);
    let activity = &snapshot.activity;
    show_activity(&mut st, activity);
    let validated = match &snapshot.problem {
        Some(p) => stamp(
            "Validated",
            ConditionStatus::False,
            p.reason,
            p.message.clone(),
        ),
        None => stamp(
            "Validated",
            ConditionStatus::True,
            "Validated",
            String::new(),
        ),
    };
    set_condition(&mut st.conditions, validated);
    let ready = if let Some(p) = &snapshot.problem {
        Err(NotReady::stalled(p.reason, p.message.clone()))
    } else {
        let (running, ready) = streams_running(&sum, blocked.as_deref());
        set_condition(
            &mut st.conditions,
            stamp(
                "StreamsRunning",
                running.status,
                running.reason,
                running.message,
            ),
        );
        ready
    };
    let refused = refusal_message(activity);
    let ready = match (ready, &refused) {
        (Ok(()), Some(m)) => Err(NotReady::stalled("WriteRefused", m.clone())),
        (ready, _) => ready,
    };
    let accepted = match refused {
        Some(m) => stamp("GitPathAccepted", ConditionStatus::False, "WriteRefused", m),
        None => stamp(
            "GitPathAccepted",
            ConditionStatus::True,
            "GitPathAccepted",
            String::new(),
        ),
    };
    set_condition(&mut st.conditions, accepted);
    if let Some(e) = &snapshot.encryption {
        set_condition(
            &mut st.conditions,
            stamp(
                "EncryptionConfigured",
                e.status,
                e.reason,
                e.message.clone(),
            ),
        );
    }
    set_claim_condition(&mut st.conditions, snapshot.claim.as_ref(), now, generation);
    summary(&mut st.conditions, ready, now, generation);
    st.streams = Some(sum);
    st
}

/// The newest push holding one of the target's changes, and the fields a live edit kept over
/// a push's value (shown once it happened).
fn show_activity(st: &mut GitTargetStatus, activity: &TargetActivity) {
    if activity.last_commit.is_some() {
        st.last_commit.clone_from(&activity.last_commit);
        st.last_push_time.clone_from(&activity.last_push_time);
    }
    if activity.merge_overrides > 0 {
        st.merge_overrides = Some(activity.merge_overrides);
        st.last_merge_override
            .clone_from(&activity.last_merge_override);
    }
}

/// What the target's standing refusals say, for a person: the first, and how many more.
fn refusal_message(activity: &TargetActivity) -> Option<String> {
    let first = activity.refusals.values().next()?;
    let more = activity.refusals.len() - 1;
    let tail = if more > 0 {
        format!(" (and {more} more refused)")
    } else {
        String::new()
    };
    Some(format!(
        "{first}{tail}; the live edit waits: it is written when a push fixes the file (or the object is written again)"
    ))
}

/// `ApplierClaimReady` as the claims reported it; removed when the target names no claim.
fn set_claim_condition(
    conditions: &mut Vec<Condition>,
    claim: Option<&backflow_board::ClaimReadiness>,
    now: &str,
    generation: Option<i64>,
) {
    let Some(c) = claim else {
        conditions.retain(|c| c.type_ != "ApplierClaimReady");
        return;
    };
    let status = if c.ready {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let condition = cond(
        "ApplierClaimReady",
        status,
        &c.reason,
        c.message.clone(),
        now,
        generation,
    );
    set_condition(conditions, condition);
}

/// How many streams are in each state, and the first reason one cannot watch.
fn summarize(streams: &[StreamState]) -> (StreamSummary, Option<String>) {
    let mut sum = StreamSummary {
        total: u32::try_from(streams.len()).unwrap_or(u32::MAX),
        ..StreamSummary::default()
    };
    let mut blocked = None;
    for state in streams {
        match state {
            StreamState::Replaying => sum.replaying += 1,
            StreamState::Streaming => sum.ready += 1,
            StreamState::Blocked(m) => {
                sum.blocked += 1;
                blocked.get_or_insert_with(|| m.clone());
            }
        }
    }
    (sum, blocked)
}

/// The `StreamsRunning` condition and what it means for Ready.
fn streams_running(
    sum: &StreamSummary,
    blocked: Option<&str>,
) -> (ConditionReport, Result<(), NotReady>) {
    let report = |status, reason, message: String| ConditionReport {
        status,
        reason,
        message,
    };
    if let Some(m) = blocked {
        let message = format!(
            "{} of {} watch streams cannot watch: {m}",
            sum.blocked, sum.total
        );
        return (
            report(ConditionStatus::False, "WatchError", m.to_string()),
            Err(NotReady::progressing("WatchError", message)),
        );
    }
    if sum.total == 0 {
        return (
            report(
                ConditionStatus::False,
                "NoResolvedTypes",
                "no WatchRule or ClusterWatchRule selects anything for this target".into(),
            ),
            Err(NotReady::progressing(
                "NoResolvedTypes",
                "no WatchRule or ClusterWatchRule selects anything for this target yet",
            )),
        );
    }
    if sum.replaying > 0 {
        let message = format!(
            "{} of {} streams are publishing their initial snapshot",
            sum.replaying, sum.total
        );
        return (
            report(ConditionStatus::False, "Replaying", message.clone()),
            Err(NotReady::progressing("Progressing", message)),
        );
    }
    (
        report(
            ConditionStatus::True,
            "AllStreamsReady",
            format!("{} streams", sum.total),
        ),
        Ok(()),
    )
}

#[cfg(test)]
mod tests {
    use backflow_api::GroupResource;

    use super::*;

    fn target() -> GitTarget {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "backflow.dev/v1alpha1",
            "kind": "GitTarget",
            "metadata": {"name": "t", "namespace": "team", "generation": 3},
            "spec": {"providerRef": {"name": "p"}, "branch": "main", "path": "live"},
        }))
        .expect("a GitTarget")
    }

    fn condition<'a>(st: &'a GitTargetStatus, type_: &str) -> &'a backflow_api::config::Condition {
        st.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_}: {:#?}", st.conditions))
    }

    fn ready_reason(streams: Vec<StreamState>) -> (ConditionStatus, String) {
        let snapshot = TargetSnapshot {
            streams,
            ..TargetSnapshot::default()
        };
        let st = target_status(&target(), &snapshot, "2026-12-01T00:00:00Z");
        let ready = condition(&st, "Ready");
        (ready.status, ready.reason.clone())
    }

    #[test]
    fn a_rule_that_resolves_nothing_stalls_and_one_not_evaluated_progresses() {
        let problem = Err(Problem {
            reason: "NoMatchingTypes",
            message: "no served type matches widgets".into(),
        });
        let st = rule_status(None, Some(2), Some(&problem), "t");
        let ready = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Stalled")
            .expect("stalled");
        assert_eq!(ready.reason, "NoMatchingTypes");
        let st = rule_status(Some(st), Some(2), Some(&Ok(vec!["configmaps".into()])), "t");
        assert_eq!(st.resolved, vec!["configmaps".to_string()]);
        assert!(st.conditions.iter().all(|c| c.type_ != "Stalled"));
        let st = rule_status(None, None, None, "t");
        assert!(st.conditions.iter().any(|c| c.type_ == "Reconciling"));
    }

    #[test]
    fn ready_follows_the_streams() {
        use StreamState::{Blocked, Replaying, Streaming};
        assert_eq!(
            ready_reason(vec![Streaming, Streaming]),
            (ConditionStatus::True, "Succeeded".into())
        );
        assert_eq!(
            ready_reason(vec![Streaming, Replaying]),
            (ConditionStatus::False, "Progressing".into())
        );
        assert_eq!(
            ready_reason(vec![Replaying, Blocked("forbidden".into())]),
            (ConditionStatus::False, "WatchError".into())
        );
        assert_eq!(
            ready_reason(vec![]),
            (ConditionStatus::False, "NoResolvedTypes".into())
        );
    }

    #[test]
    fn a_problem_stalls_and_a_refusal_is_reported() {
        let snapshot = TargetSnapshot {
            streams: vec![StreamState::Streaming],
            problem: Some(Problem {
                reason: "BranchNotAllowed",
                message: "branch main is not allowed".into(),
            }),
            activity: TargetActivity {
                refusals: [(
                    backflow_board::WriteScope::Resync(GroupResource::new("", "configmaps"), None),
                    "anchors in live/a.yaml".to_string(),
                )]
                .into(),
                ..TargetActivity::default()
            },
            encryption: None,
            claim: None,
        };
        let st = target_status(&target(), &snapshot, "2026-12-01T00:00:00Z");
        assert_eq!(condition(&st, "Validated").status, ConditionStatus::False);
        assert_eq!(condition(&st, "Stalled").reason, "BranchNotAllowed");
        assert!(st.conditions.iter().all(|c| c.type_ != "Reconciling"));
        let accepted = condition(&st, "GitPathAccepted");
        assert_eq!(
            (accepted.status, accepted.reason.as_str()),
            (ConditionStatus::False, "WriteRefused")
        );
        assert_eq!(st.observed_generation, Some(3));
        assert_eq!(condition(&st, "Ready").observed_generation, Some(3));
    }

    #[test]
    fn a_standing_refusal_makes_the_target_not_ready_until_it_clears() {
        let mut snapshot = TargetSnapshot {
            streams: vec![StreamState::Streaming],
            ..TargetSnapshot::default()
        };
        snapshot.activity.refusals.insert(
            backflow_board::WriteScope::Object(backflow_api::ObjectKey::new(
                GroupResource::new("", "configmaps"),
                "web",
                "a",
            )),
            "anchors in live/web/configmaps/a.yaml".into(),
        );
        let st = target_status(&target(), &snapshot, "2026-12-01T00:00:00Z");
        let ready = condition(&st, "Ready");
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, "WriteRefused")
        );
        assert!(ready.message.contains("anchors"), "{}", ready.message);
        snapshot.activity.refusals.clear();
        let st = target_status(&target(), &snapshot, "2026-12-01T00:00:01Z");
        assert_eq!(condition(&st, "Ready").status, ConditionStatus::True);
        assert_eq!(
            condition(&st, "GitPathAccepted").status,
            ConditionStatus::True
        );
    }
}
