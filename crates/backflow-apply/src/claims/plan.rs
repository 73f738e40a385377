//! Which claims act, on which branch and folders: computed from the configuration (pure).

use std::collections::BTreeMap;

use backflow_api::config::{
    ArgoCDClaim, FirstContact, FluxClaim, GitProvider, GitTarget, NativeClaim, ObjectReference,
};
use kube::ResourceExt;

/// A claim: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimKey {
    /// `NativeClaim` or `FluxClaim`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The applier a claim holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holds {
    /// backflow's own applier, acting as the service account named (in the claim's
    /// namespace), or with backflow's own rights.
    Native(Option<String>),
    /// A Flux Kustomization: (namespace, name).
    Flux(String, String),
    /// An Argo CD Application: (namespace, name).
    Argo(String, String),
}

/// A claim of any kind, as planning reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimObject {
    /// Which claim.
    pub key: ClaimKey,
    /// `spec.suspend`.
    pub suspend: bool,
    /// `spec.firstContact`.
    pub first_contact: FirstContact,
    /// `spec.pruneLimitPercent` (`NativeClaim`; the others' appliers prune on their own).
    pub prune_limit: Option<u8>,
    /// The applier it holds.
    pub holds: Holds,
}

impl ClaimObject {
    /// A `NativeClaim`.
    #[must_use]
    pub fn native(claim: &NativeClaim) -> Self {
        Self {
            key: ClaimKey {
                kind: NATIVE.into(),
                namespace: claim.namespace().unwrap_or_default(),
                name: claim.name_any(),
            },
            suspend: claim.spec.suspend,
            first_contact: claim.spec.first_contact,
            prune_limit: claim.spec.prune_limit_percent,
            holds: Holds::Native(claim.spec.service_account_name.clone()),
        }
    }

    /// A `FluxClaim`; its Kustomization's namespace defaults to the claim's.
    #[must_use]
    pub fn flux(claim: &FluxClaim) -> Self {
        let (key, (ns, name)) = Self::held(claim, FLUX, &claim.spec.kustomization_ref);
        Self {
            key,
            suspend: claim.spec.suspend,
            first_contact: claim.spec.first_contact,
            prune_limit: None,
            holds: Holds::Flux(ns, name),
        }
    }

    /// An `ArgoCDClaim`; its Application's namespace defaults to the claim's.
    #[must_use]
    pub fn argo(claim: &ArgoCDClaim) -> Self {
        let (key, (ns, name)) = Self::held(claim, ARGO, &claim.spec.application_ref);
        Self {
            key,
            suspend: claim.spec.suspend,
            first_contact: claim.spec.first_contact,
            prune_limit: None,
            holds: Holds::Argo(ns, name),
        }
    }

    /// The claim's key, and the (namespace, name) of what it holds.
    fn held<K: ResourceExt>(
        claim: &K,
        kind: &str,
        reference: &ObjectReference,
    ) -> (ClaimKey, (String, String)) {
        let namespace = claim.namespace().unwrap_or_default();
        let held_namespace = if reference.namespace.is_empty() {
            namespace.clone()
        } else {
            reference.namespace.clone()
        };
        let key = ClaimKey {
            kind: kind.into(),
            namespace,
            name: claim.name_any(),
        };
        (key, (held_namespace, reference.name.clone()))
    }
}

/// What one claim applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPlan {
    /// The repository URL (the providers' `spec.url`).
    pub url: String,
    /// The branch.
    pub branch: String,
    /// The folders of every target naming the claim, sorted.
    pub folders: Vec<String>,
    /// The targets naming it: (namespace, name), sorted.
    pub targets: Vec<(String, String)>,
    /// Secrets (same namespace) holding the targets' age identities (`spec.encryption.age.secretRef`).
    pub identity_secrets: Vec<String>,
    /// `spec.suspend`.
    pub suspended: bool,
    /// `spec.firstContact`.
    pub first_contact: FirstContact,
    /// `spec.pruneLimitPercent` (`NativeClaim`; the others' appliers prune on their own).
    pub prune_limit: Option<u8>,
    /// The applier it holds.
    pub holds: Holds,
}

/// Why a claim named by targets cannot act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimProblem {
    /// CamelCase reason.
    pub reason: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

/// The kind a `GitTarget` names for backflow's own applier.
pub const NATIVE: &str = "NativeClaim";
/// The kind a `GitTarget` names for a Flux Kustomization.
pub const FLUX: &str = "FluxClaim";
/// The kind a `GitTarget` names for an Argo CD Application.
pub const ARGO: &str = "ArgoCDClaim";

/// Every claim some target names, with its plan or why it has none.
#[must_use]
pub fn plan_claims(
    claims: &[ClaimObject],
    targets: &[GitTarget],
    providers: &[GitProvider],
) -> BTreeMap<ClaimKey, Result<ClaimPlan, ClaimProblem>> {
    let mut out = BTreeMap::new();
    for claim in claims {
        let key = &claim.key;
        let naming: Vec<&GitTarget> = targets
            .iter()
            .filter(|t| t.namespace().as_deref() == Some(key.namespace.as_str()))
            .filter(|t| {
                t.spec
                    .applier_claim_ref
                    .as_ref()
                    .is_some_and(|r| r.kind == key.kind && r.name == key.name)
            })
            .collect();
        if naming.is_empty() {
            continue;
        }
        out.insert(key.clone(), plan_one(claim, &naming, providers));
    }
    refuse_overlaps(&mut out);
    out
}

/// Whether folder `inner` lies inside folder `outer` (or is it): `""` is the repository root.
fn within(inner: &str, outer: &str) -> bool {
    outer.is_empty()
        || inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// One folder, one applier: a claim whose folder lies inside another claim's folder on the
/// same branch (the other would apply and prune its objects too) is refused, naming the
/// other; two claims on one folder are both refused.
fn refuse_overlaps(plans: &mut BTreeMap<ClaimKey, Result<ClaimPlan, ClaimProblem>>) {
    let planned: Vec<(ClaimKey, ClaimPlan)> = plans
        .iter()
        .filter_map(|(k, p)| Some((k.clone(), p.as_ref().ok()?.clone())))
        .collect();
    for (key, plan) in &planned {
        // Every folder of another claim's on this branch that holds one of this claim's: a
        // strictly enclosing one is named first.
        let mut overlaps: Vec<(&ClaimKey, &String, &String)> = planned
            .iter()
            .filter(|(other, theirs)| {
                other != key && theirs.url == plan.url && theirs.branch == plan.branch
            })
            .flat_map(|(other, theirs)| {
                plan.folders.iter().flat_map(move |mine| {
                    theirs
                        .folders
                        .iter()
                        .filter(move |outer| within(mine, outer))
                        .map(move |outer| (other, mine, outer))
                })
            })
            .collect();
        overlaps.sort_by_key(|(_, mine, outer)| mine == outer);
        let overlap = overlaps.into_iter().next();
        if let Some((other, mine, outer)) = overlap {
            let (reason, message) = if mine == outer {
                (
                    "FolderClaimedTwice",
                    format!(
                        "{other} applies folder {outer:?} of this branch too; one folder has one applier: point one of the GitTargets elsewhere"
                    ),
                )
            } else {
                (
                    "FolderNested",
                    format!(
                        "folder {mine:?} lies inside folder {outer:?}, which {other} applies (and prunes) already; one folder has one applier: move the folder out, or let {other} apply it"
                    ),
                )
            };
            plans.insert(key.clone(), Err(ClaimProblem { reason, message }));
        }
    }
}

/// A claim holds only an applier in its own namespace, unless every provider of the targets
/// naming it delegates more (`spec.allowCrossNamespace.appliers`).
fn same_namespace(claim: &ClaimObject, delegated: bool) -> Result<(), ClaimProblem> {
    let ns = &claim.key.namespace;
    match &claim.holds {
        Holds::Flux(held_ns, name) | Holds::Argo(held_ns, name) if held_ns != ns && !delegated => {
            Err(ClaimProblem {
                reason: "CrossNamespaceNotAllowed",
                message: format!(
                    "{held_ns}/{name} is outside the claim's namespace {ns}; a claim holds only an applier in its own namespace unless its GitProvider sets spec.allowCrossNamespace.appliers: true"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// The `GitProvider` target `t` (in `ns`) names.
fn provider_of<'p>(
    t: &GitTarget,
    ns: &str,
    providers: &'p [GitProvider],
) -> Result<&'p GitProvider, ClaimProblem> {
    providers
        .iter()
        .find(|p| p.namespace().as_deref() == Some(ns) && p.name_any() == t.spec.provider_ref.name)
        .ok_or_else(|| ClaimProblem {
            reason: "ProviderNotFound",
            message: format!(
                "GitTarget {ns}/{} names GitProvider {} which does not exist",
                t.name_any(),
                t.spec.provider_ref.name
            ),
        })
}

fn plan_one(
    claim: &ClaimObject,
    naming: &[&GitTarget],
    providers: &[GitProvider],
) -> Result<ClaimPlan, ClaimProblem> {
    let ns = claim.key.namespace.clone();
    let mut delegated = true;
    let mut branch_of: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut plan = ClaimPlan {
        url: String::new(),
        branch: String::new(),
        folders: Vec::new(),
        targets: Vec::new(),
        identity_secrets: Vec::new(),
        suspended: claim.suspend,
        first_contact: claim.first_contact,
        prune_limit: claim.prune_limit,
        holds: claim.holds.clone(),
    };
    for t in naming {
        let provider = provider_of(t, &ns, providers)?;
        delegated &= provider
            .spec
            .allow_cross_namespace
            .as_ref()
            .is_some_and(|a| a.appliers);
        branch_of
            .entry((provider.spec.url.clone(), t.spec.branch.clone()))
            .or_default()
            .push(t.name_any());
        plan.folders.push(t.spec.path.clone());
        plan.targets.push((ns.clone(), t.name_any()));
        if let Some(secret) = t
            .spec
            .encryption
            .as_ref()
            .and_then(|e| e.age.as_ref())
            .and_then(|a| a.secret_ref.as_ref())
        {
            plan.identity_secrets.push(secret.name.clone());
        }
    }
    same_namespace(claim, delegated)?;
    if branch_of.len() > 1 {
        let listed: Vec<String> = branch_of
            .iter()
            .map(|((url, branch), ts)| format!("{} → {url} {branch}", ts.join(", ")))
            .collect();
        return Err(ClaimProblem {
            reason: "TargetsDisagree",
            message: format!(
                "the GitTargets naming this claim write different branches ({}); one claim applies one branch",
                listed.join("; ")
            ),
        });
    }
    let Some(((url, branch), _)) = branch_of.into_iter().next() else {
        return Err(ClaimProblem {
            reason: "NoTarget",
            message: "no GitTarget names this claim".into(),
        });
    };
    plan.url = url;
    plan.branch = branch;
    plan.folders.sort();
    plan.folders.dedup();
    plan.targets.sort();
    plan.identity_secrets.sort();
    plan.identity_secrets.dedup();
    Ok(plan)
}

/// The decision re-checked just before an apply is asked for, against the configuration as
/// the API holds it now: `None` when the claim still exists, is not suspended, and the targets
/// naming it still make `plan` (same branch, folders, targets); otherwise why not.
#[must_use]
pub fn recheck(
    key: &ClaimKey,
    plan: &ClaimPlan,
    claims: &[ClaimObject],
    targets: &[GitTarget],
    providers: &[GitProvider],
) -> Option<String> {
    match plan_claims(claims, targets, providers).remove(key) {
        Some(Ok(now)) if now.suspended => Some("spec.suspend is true".into()),
        Some(Ok(now)) if now == *plan => None,
        Some(Ok(_)) => Some(
            "the GitTargets naming the claim changed just before the apply; deciding again".into(),
        ),
        Some(Err(problem)) => Some(problem.message),
        None => Some("no GitTarget names the claim any more, or the claim is gone".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> K {
        serde_json::from_value(v).unwrap()
    }

    fn target(name: &str, provider: &str, branch: &str, claim: Option<&str>) -> GitTarget {
        let mut spec = json!({"providerRef": {"name": provider}, "branch": branch, "path": name});
        if let Some(c) = claim {
            spec["applierClaimRef"] = json!({"kind": "NativeClaim", "name": c});
        }
        obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitTarget",
                   "metadata": {"name": name, "namespace": "team"}, "spec": spec}),
        )
    }

    #[test]
    fn a_claim_applies_the_folders_of_every_target_naming_it_on_one_branch() {
        let claim: NativeClaim = obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "NativeClaim",
            "metadata": {"name": "apply", "namespace": "team"}, "spec": {}}),
        );
        let idle: NativeClaim = obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "NativeClaim",
            "metadata": {"name": "idle", "namespace": "team"}, "spec": {}}),
        );
        let provider = |name: &str, url: &str| -> GitProvider {
            obj(
                json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitProvider",
                       "metadata": {"name": name, "namespace": "team"}, "spec": {"url": url}}),
            )
        };
        let providers = vec![
            provider("git", "file:///r.git"),
            provider("other", "file:///o.git"),
        ];
        let targets = vec![
            target("b", "git", "main", Some("apply")),
            target("a", "git", "main", Some("apply")),
            target("c", "git", "main", None),
        ];
        let (claim, idle) = (ClaimObject::native(&claim), ClaimObject::native(&idle));
        let plans = plan_claims(&[claim.clone(), idle], &targets, &providers);
        assert_eq!(plans.len(), 1, "a claim no target names does nothing");
        let plan = plans[&claim.key].clone().unwrap();
        assert_eq!(plan.folders, ["a", "b"]);
        assert_eq!(
            (plan.url.as_str(), plan.branch.as_str()),
            ("file:///r.git", "main")
        );

        let split = vec![
            target("a", "git", "main", Some("apply")),
            target("b", "other", "main", Some("apply")),
        ];
        let plans = plan_claims(std::slice::from_ref(&claim), &split, &providers);
        let problem = plans[&claim.key].clone().unwrap_err();
        assert_eq!(problem.reason, "TargetsDisagree");
    }

    #[test]
    fn the_recheck_before_an_apply_sees_a_target_that_stopped_naming_the_claim() {
        let claim = |suspend: bool| -> ClaimObject {
            ClaimObject::native(&obj(
                json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "NativeClaim",
                "metadata": {"name": "apply", "namespace": "team"}, "spec": {"suspend": suspend}}),
            ))
        };
        let providers: Vec<GitProvider> = vec![obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitProvider",
                   "metadata": {"name": "git", "namespace": "team"}, "spec": {"url": "file:///r.git"}}),
        )];
        let key = claim(false).key;
        let both = vec![
            target("a", "git", "main", Some("apply")),
            target("b", "git", "main", Some("apply")),
        ];
        let plan = plan_claims(&[claim(false)], &both, &providers)[&key]
            .clone()
            .unwrap();
        assert_eq!(
            recheck(&key, &plan, &[claim(false)], &both, &providers),
            None
        );
        let dropped = vec![
            target("a", "git", "main", Some("apply")),
            target("b", "git", "main", None),
        ];
        assert!(recheck(&key, &plan, &[claim(false)], &dropped, &providers).is_some());
        let moved = vec![
            target("a", "git", "main", Some("apply")),
            target("b", "git", "release", Some("apply")),
        ];
        assert!(recheck(&key, &plan, &[claim(false)], &moved, &providers).is_some());
        assert!(recheck(&key, &plan, &[claim(true)], &both, &providers).is_some());
        assert!(recheck(&key, &plan, &[], &both, &providers).is_some());
    }

    #[test]
    fn a_claim_inside_another_claims_folder_is_refused() {
        let claim = |name: &str| -> ClaimObject {
            ClaimObject::native(&obj(
                json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "NativeClaim",
                "metadata": {"name": name, "namespace": "team"}, "spec": {}}),
            ))
        };
        let providers: Vec<GitProvider> = vec![obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitProvider",
                   "metadata": {"name": "git", "namespace": "team"}, "spec": {"url": "file:///r.git"}}),
        )];
        let claims = [
            claim("outer"),
            claim("inner"),
            claim("twin"),
            claim("beside"),
            claim("other-branch"),
        ];
        let targets = vec![
            target("apps", "git", "main", Some("outer")),
            target("apps/team", "git", "main", Some("inner")),
            target("apps/team", "git", "main", Some("twin")),
            target("appsx", "git", "main", Some("beside")),
            target("apps/team", "git", "release", Some("other-branch")),
        ];
        let plans = plan_claims(&claims, &targets, &providers);
        let reason = |name: &str| plans[&claim(name).key].as_ref().err().map(|p| p.reason);
        assert_eq!(reason("outer"), None);
        assert_eq!(reason("inner"), Some("FolderNested"));
        assert_eq!(reason("twin"), Some("FolderNested"));
        assert_eq!(reason("beside"), None, "a folder that only shares a prefix");
        assert_eq!(reason("other-branch"), None, "another branch");
        let message = &plans[&claim("inner").key]
            .as_ref()
            .err()
            .map(|p| p.message.clone());
        assert!(
            message.as_ref().is_some_and(|m| m.contains("outer")),
            "{message:?}"
        );

        let twins = vec![
            target("apps/team", "git", "main", Some("inner")),
            target("apps/team", "git", "main", Some("twin")),
        ];
        let plans = plan_claims(&claims, &twins, &providers);
        for name in ["inner", "twin"] {
            let problem = plans[&claim(name).key].as_ref().err().map(|p| p.reason);
            assert_eq!(problem, Some("FolderClaimedTwice"), "{name}");
        }
    }

    #[test]
    fn a_flux_claim_is_named_by_kind_and_holds_only_a_kustomization_of_its_namespace() {
        let flux = |ns: &str| -> ClaimObject {
            ClaimObject::flux(&obj(
                json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "FluxClaim",
                "metadata": {"name": "apply", "namespace": "team"},
                "spec": {"kustomizationRef": {"name": "apps", "namespace": ns}}}),
            ))
        };
        let providers: Vec<GitProvider> = vec![obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitProvider",
                   "metadata": {"name": "git", "namespace": "team"}, "spec": {"url": "file:///r.git"}}),
        )];
        let mut named = target("a", "git", "main", None);
        named.spec.applier_claim_ref = Some(backflow_api::config::ApplierClaimReference {
            kind: FLUX.into(),
            name: "apply".into(),
        });
        // A NativeClaim of the same name is not named by a target naming the FluxClaim.
        let native = ClaimObject::native(&obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "NativeClaim",
            "metadata": {"name": "apply", "namespace": "team"}, "spec": {}}),
        ));
        let plans = plan_claims(
            &[flux(""), native],
            std::slice::from_ref(&named),
            &providers,
        );
        assert_eq!(plans.len(), 1);
        let plan = plans[&flux("").key].clone().unwrap();
        assert_eq!(plan.holds, Holds::Flux("team".into(), "apps".into()));
        let plans = plan_claims(
            &[flux("flux-system")],
            std::slice::from_ref(&named),
            &providers,
        );
        assert_eq!(
            plans[&flux("").key].clone().unwrap_err().reason,
            "CrossNamespaceNotAllowed"
        );
        // The provider's owner delegates: the claim may hold flux-system's Kustomization.
        let delegating: Vec<GitProvider> = vec![obj(
            json!({"apiVersion": "backflow.dev/v1alpha1", "kind": "GitProvider",
                   "metadata": {"name": "git", "namespace": "team"},
                   "spec": {"url": "file:///r.git", "allowCrossNamespace": {"appliers": true}}}),
        )];
        let plans = plan_claims(&[flux("flux-system")], &[named], &delegating);
        let plan = plans[&flux("").key].clone().unwrap();
        assert_eq!(plan.holds, Holds::Flux("flux-system".into(), "apps".into()));
    }
}
