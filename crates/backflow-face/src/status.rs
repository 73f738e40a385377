//! What `backflow status` and the web view's overview report: every target, branch and claim
//! the API holds, with what needs a person (conditions that are not fine, an apply that failed
//! or is unresolved, a held prune, refused changes, unreadable files, plaintext secrets).

use backflow_api::config::{
    ArgoCDClaim, ClaimStatus, Condition, ConditionStatus, FluxClaim, GitBranch, GitTarget,
    NativeClaim,
};
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};

use crate::render::{short_commit, text_table};

/// What `backflow status` reports.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// Every `GitTarget`.
    pub targets: Vec<TargetLine>,
    /// Every `GitBranch`.
    pub branches: Vec<BranchLine>,
    /// Every applier claim.
    pub claims: Vec<ClaimLine>,
    /// What needs a person, one line each, naming the object.
    pub needs_a_person: Vec<String>,
}

/// One `GitTarget`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetLine {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its branch.
    pub branch: String,
    /// Its folder.
    pub folder: String,
    /// `Ready`'s status, or `-`.
    pub ready: String,
    /// `ready/total ready` of its watch streams, or `-`.
    pub streams: String,
    /// The last commit it made.
    pub last_commit: Option<String>,
    /// When it last pushed.
    pub last_push_time: Option<String>,
}

/// One `GitBranch`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchLine {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The branch.
    pub branch: String,
    /// `Ready`'s status, or `-`.
    pub ready: String,
    /// The tip backflow last saw.
    pub tip: Option<String>,
    /// Writes not pushed yet.
    pub pending_writes: u32,
    /// When it last pushed.
    pub last_push_time: Option<String>,
}

/// One applier claim.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimLine {
    /// Its namespace.
    pub namespace: String,
    /// `NativeClaim`, `FluxClaim` or `ArgoCDClaim`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// `Ready`'s status, or `-`.
    pub ready: String,
    /// The commit last applied.
    pub last_applied: Option<String>,
    /// The last operation: its number, phase and commit.
    pub operation: Option<OperationLine>,
}

/// An apply operation.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationLine {
    /// Its number.
    pub id: u64,
    /// `Running`, `Succeeded`, `Failed`, …
    pub phase: String,
    /// The commit it applies.
    pub commit: String,
}

async fn list<K>(client: &Client, namespace: Option<&str>) -> Result<Vec<K>, String>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let kind = K::kind(&K::DynamicType::default()).to_string();
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        // A cluster without backflow's CRDs holds none of them.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(format!("cannot list {kind}s: {e}")),
    }
}

impl StatusReport {
    /// Reads every target, branch and claim (of `namespace`, or all) through `client`.
    pub async fn read(client: &Client, namespace: Option<&str>) -> Result<Self, String> {
        read(client, namespace).await
    }

    /// Whether something needs a person.
    #[must_use]
    pub fn needs_a_person(&self) -> bool {
        !self.needs_a_person.is_empty()
    }

    /// The report for a person: one table per kind, then what needs a person.
    #[must_use]
    pub fn render(&self) -> String {
        render(self)
    }
}

async fn read(client: &Client, namespace: Option<&str>) -> Result<StatusReport, String> {
    let ns = namespace;
    let mut report = StatusReport::default();
    for target in list::<GitTarget>(client, ns).await? {
        report.target(&target);
    }
    for branch in list::<GitBranch>(client, ns).await? {
        report.branch(&branch);
    }
    for claim in list::<NativeClaim>(client, ns).await? {
        report.claim("NativeClaim", &claim, claim.status.as_ref());
    }
    for claim in list::<FluxClaim>(client, ns).await? {
        report.claim("FluxClaim", &claim, claim.status.as_ref());
    }
    for claim in list::<ArgoCDClaim>(client, ns).await? {
        report.claim("ArgoCDClaim", &claim, claim.status.as_ref());
    }
    Ok(report)
}

/// `Ready`'s status, or `-` before there is one.
fn ready(conditions: &[Condition]) -> String {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or_else(|| "-".to_string(), |c| format!("{:?}", c.status))
}

/// The conditions that need a person: `Ready=False`, `Stalled=True`.
fn not_fine(conditions: &[Condition]) -> impl Iterator<Item = String> + '_ {
    conditions
        .iter()
        .filter(|c| {
            (c.type_ == "Ready" && c.status == ConditionStatus::False)
                || (c.type_ == "Stalled" && c.status == ConditionStatus::True)
        })
        .map(|c| format!("{}={:?} ({}): {}", c.type_, c.status, c.reason, c.message))
}

/// A commit as a person reads it (12 characters), or `-`.
fn short(commit: Option<&String>) -> String {
    commit.map_or_else(|| "-".to_string(), |c| short_commit(c))
}

fn or_dash(text: Option<&String>) -> String {
    text.cloned().unwrap_or_else(|| "-".to_string())
}

impl StatusReport {
    fn target(&mut self, target: &GitTarget) {
        let (namespace, name) = (target.namespace().unwrap_or_default(), target.name_any());
        let status = target.status.clone().unwrap_or_default();
        let shown = format!("GitTarget {namespace}/{name}");
        self.needs_a_person
            .extend(not_fine(&status.conditions).map(|c| format!("{shown}: {c}")));
        let streams = status.streams.as_ref().map_or_else(
            || "-".to_string(),
            |s| format!("{}/{} ready", s.ready, s.total),
        );
        self.targets.push(TargetLine {
            branch: target.spec.branch.clone(),
            folder: target.spec.path.clone(),
            ready: ready(&status.conditions),
            streams,
            last_commit: status.last_commit,
            last_push_time: status.last_push_time,
            namespace,
            name,
        });
    }

    fn branch(&mut self, branch: &GitBranch) {
        let (namespace, name) = (branch.namespace().unwrap_or_default(), branch.name_any());
        let status = branch.status.clone().unwrap_or_default();
        let shown = format!("GitBranch {namespace}/{name}");
        self.needs_a_person
            .extend(not_fine(&status.conditions).map(|c| format!("{shown}: {c}")));
        self.branches.push(BranchLine {
            branch: branch.spec.branch.clone(),
            ready: ready(&status.conditions),
            tip: status.tip,
            pending_writes: status.pending_writes,
            last_push_time: status.last_push_time,
            namespace,
            name,
        });
    }

    fn claim(&mut self, kind: &str, claim: &impl ResourceExt, status: Option<&ClaimStatus>) {
        let (namespace, name) = (claim.namespace().unwrap_or_default(), claim.name_any());
        let status = status.cloned().unwrap_or_default();
        let shown = format!("{kind} {namespace}/{name}");
        let mut needs: Vec<String> = not_fine(&status.conditions).collect();
        if let Some(op) = &status.operation
            && matches!(op.phase.as_str(), "Failed" | "Unresolved")
        {
            needs.push(format!(
                "apply {} of {} is {}: {}",
                op.id,
                short(Some(&op.commit)),
                op.phase,
                op.message
            ));
        }
        if let Some(held) = &status.prune_held {
            needs.push(format!(
                "a prune is held: commit {} would delete {} of {} objects; confirm it (see docs/apply.md)",
                short(Some(&held.commit)),
                held.pruning,
                held.owned
            ));
        }
        let lists = [
            ("refused", &status.refused_changes),
            ("unreadable", &status.unreadable_files),
            ("plaintext secret", &status.plaintext_secrets),
            ("failed", &status.failures),
        ];
        for (what, lines) in lists {
            needs.extend(lines.iter().map(|l| format!("{what}: {l}")));
        }
        self.needs_a_person
            .extend(needs.into_iter().map(|n| format!("{shown}: {n}")));
        let operation = status.operation.map(|op| OperationLine {
            id: op.id,
            phase: op.phase,
            commit: op.commit,
        });
        self.claims.push(ClaimLine {
            kind: kind.to_string(),
            ready: ready(&status.conditions),
            last_applied: status.last_applied_commit,
            operation,
            namespace,
            name,
        });
    }
}

/// The report for a person: one table per kind, then what needs a person.
fn render(report: &StatusReport) -> String {
    let targets: Vec<Vec<String>> = (report.targets.iter())
        .map(|t| {
            vec![
                format!("{}/{}", t.namespace, t.name),
                t.branch.clone(),
                t.folder.clone(),
                t.ready.clone(),
                t.streams.clone(),
                short(t.last_commit.as_ref()),
                or_dash(t.last_push_time.as_ref()),
            ]
        })
        .collect();
    let branches: Vec<Vec<String>> = (report.branches.iter())
        .map(|b| {
            vec![
                format!("{}/{}", b.namespace, b.name),
                b.branch.clone(),
                b.ready.clone(),
                short(b.tip.as_ref()),
                b.pending_writes.to_string(),
                or_dash(b.last_push_time.as_ref()),
            ]
        })
        .collect();
    let claims: Vec<Vec<String>> = (report.claims.iter())
        .map(|c| {
            vec![
                format!("{} {}/{}", c.kind, c.namespace, c.name),
                c.ready.clone(),
                short(c.last_applied.as_ref()),
                c.operation.as_ref().map_or_else(
                    || "-".to_string(),
                    |op| format!("{} {} {}", op.id, op.phase, short(Some(&op.commit))),
                ),
            ]
        })
        .collect();
    let mut out = text_table(
        &[
            "TARGET",
            "BRANCH",
            "FOLDER",
            "READY",
            "STREAMS",
            "LAST COMMIT",
            "LAST PUSH",
        ],
        &targets,
    );
    out.push('\n');
    out.push_str(&text_table(
        &[
            "GITBRANCH",
            "BRANCH",
            "READY",
            "TIP",
            "PENDING",
            "LAST PUSH",
        ],
        &branches,
    ));
    out.push('\n');
    out.push_str(&text_table(
        &["CLAIM", "READY", "LAST APPLIED", "LAST OPERATION"],
        &claims,
    ));
    out.push('\n');
    if report.needs_a_person.is_empty() {
        out.push_str("Nothing needs a person.\n");
    } else {
        out.push_str("NEEDS A PERSON\n");
        for line in &report.needs_a_person {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use backflow_api::config::{OperationStatus, PruneHeldStatus};

    use super::*;

    fn condition(type_: &str, status: ConditionStatus) -> Condition {
        Condition::new(
            type_,
            status,
            "Because",
            "what to do",
            "2026-12-07T00:00:00Z",
        )
    }

    #[test]
    fn a_claim_needs_a_person_for_a_failed_apply_a_held_prune_and_what_it_refused() {
        let claim = NativeClaim::new("default", backflow_api::config::NativeClaimSpec::default());
        let mut report = StatusReport::default();
        let fine = ClaimStatus {
            conditions: vec![
                condition("Ready", ConditionStatus::True),
                condition("Stalled", ConditionStatus::False),
            ],
            ..ClaimStatus::default()
        };
        report.claim("NativeClaim", &claim, Some(&fine));
        assert!(
            report.needs_a_person.is_empty(),
            "{:?}",
            report.needs_a_person
        );
        let troubled = ClaimStatus {
            conditions: vec![condition("Ready", ConditionStatus::False)],
            operation: Some(OperationStatus {
                id: 7,
                commit: "0123456789abcdef".into(),
                phase: "Unresolved".into(),
                message: "still in flight".into(),
                ..OperationStatus::default()
            }),
            prune_held: Some(PruneHeldStatus {
                commit: "fedcba".into(),
                pruning: 40,
                owned: 50,
            }),
            unreadable_files: vec!["live/x.yaml: not YAML".into()],
            ..ClaimStatus::default()
        };
        report.claim("NativeClaim", &claim, Some(&troubled));
        let needs = report.needs_a_person.join("\n");
        for expected in [
            "NativeClaim /default: Ready=False (Because): what to do",
            "apply 7 of 0123456789ab is Unresolved: still in flight",
            "commit fedcba would delete 40 of 50 objects",
            "unreadable: live/x.yaml: not YAML",
        ] {
            assert!(needs.contains(expected), "{expected:?} in {needs}");
        }
        let text = render(&report);
        assert!(
            text.contains("NativeClaim /default  False  -             7 Unresolved 0123456789ab"),
            "{text}"
        );
        assert!(text.contains("NEEDS A PERSON\n- NativeClaim"), "{text}");
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = vec![vec!["a-long-name".to_string(), "x".to_string()]];
        assert_eq!(
            text_table(&["N", "V"], &rows),
            "N            V\na-long-name  x\n"
        );
    }
}
