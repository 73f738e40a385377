//! What to watch and where it goes: a pure function from the configuration objects and the
//! served types to a set of watch streams per `GitTarget`.
//!
//! Kept free of I/O so the controller can recompute it on every change and diff the result.

use std::collections::{BTreeMap, BTreeSet};

use backflow_api::config::{
    AgeEncryption, ArgoCDClaim, ClusterWatchRule, CommitAuthors, FluxClaim, GitProvider, GitTarget,
    ObjectReference, OnRefusal, PruneMode, ResourceRule, WatchRule,
};
use backflow_api::{AppliedBy, GroupResource};
use backflow_manifest::PlacementRules;
use backflow_manifest::validate_template;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

/// Types never mirrored by a wildcard: runtime noise, not intent. Naming one explicitly in a rule
/// still mirrors it.
pub const DEFAULT_EXCLUSIONS: &[(&str, &str)] = &[
    ("", "events"),
    ("events.k8s.io", "events"),
    ("coordination.k8s.io", "leases"),
    ("", "endpoints"),
    ("discovery.k8s.io", "endpointslices"),
    ("apps", "controllerrevisions"),
    ("apps", "replicasets"),
    ("", "pods"),
    ("", "componentstatuses"),
    ("backflow.dev", "gitbranches"),
    ("backflow.dev", "commitrequests"),
];

/// Types whose objects hold secrets: never written to Git in plaintext, so mirrored only into
/// `GitTargets` with `spec.encryption` (the controller also drops them when its recipients cannot
/// be resolved).
pub use backflow_manifest::SENSITIVE;

pub use backflow_board::{ServedType, StreamSpec, TargetRef, unseen_objects};

/// Where a target's changes go and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPlan {
    /// The folder inside the repository.
    pub path: String,
    /// Repository URL of its provider.
    pub url: String,
    /// The branch.
    pub branch: String,
    /// The provider (namespace, name).
    pub provider: (String, String),
    /// Deletion policy.
    pub prune: PruneMode,
    /// Its watch streams.
    pub streams: BTreeSet<StreamSpec>,
    /// Its age encryption settings; sensitive types are planned only with them.
    pub encryption: Option<AgeEncryption>,
    /// Path templates for new objects (`spec.placement`), already validated.
    pub placement: PlacementRules,
    /// Types written only encrypted beyond Secrets (`spec.encryption.sensitiveResources`).
    pub sensitive: Vec<GroupResource>,
    /// Which live writes the folder takes, and what a refusal asks for.
    pub policy: FolderPolicy,
}

/// Which live writes a folder takes, and what a refused one asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderPolicy {
    /// The folder's applier when an applier claim coordinates it (`spec.applierClaimRef`):
    /// objects other appliers own are then not mirrored into it, and a resync bootstraps it.
    pub applier: Option<AppliedBy>,
    /// `spec.onRefusal: Reapply` with a claim: a refused edit asks the applier to apply Git
    /// over it.
    pub reapply: bool,
    /// `spec.exclude.fieldManagers`: writes made by these managers alone are not mirrored.
    pub excluded_managers: Vec<String>,
    /// `spec.exclude.users`: changes these users make are not mirrored.
    pub excluded_users: Vec<String>,
    /// `spec.commitAuthors`: whether each user's changes get commits of their own.
    pub commit_authors: CommitAuthors,
    /// The claim `spec.applierClaimRef` names, in the target's namespace.
    pub claim: Option<NamedClaim>,
}

/// An applier claim, by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedClaim {
    /// `NativeClaim`, `FluxClaim` or `ArgoCDClaim`.
    pub kind: String,
    /// Its namespace (the target's).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl TargetPlan {
    /// Whether objects of `resource` are written only encrypted into this target.
    #[must_use]
    pub fn is_sensitive(&self, resource: &GroupResource) -> bool {
        SENSITIVE.contains(&(resource.group.as_str(), resource.resource.as_str()))
            || self.sensitive.contains(resource)
    }
}

/// Where a stream's changes go: what a running stream was started with. A stream whose
/// placement changes is restarted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPlacement {
    /// The target's folder.
    pub path: String,
    /// The target's deletion policy.
    pub prune: PruneMode,
    /// The repository URL.
    pub url: String,
    /// The branch.
    pub branch: String,
    /// Which live writes the folder takes.
    pub policy: FolderPolicy,
}

impl StreamPlacement {
    /// Where the streams of `target` write.
    #[must_use]
    pub fn of(target: &TargetPlan) -> Self {
        Self {
            path: target.path.clone(),
            prune: target.prune,
            url: target.url.clone(),
            branch: target.branch.clone(),
            policy: target.policy.clone(),
        }
    }

    /// Whether it writes to the branch `url`, `branch`.
    #[must_use]
    pub fn is_on(&self, url: &str, branch: &str) -> bool {
        self.url == url && self.branch == branch
    }
}

/// What to do to the running streams to reach the wanted ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamChanges {
    /// Streams to stop: no longer wanted, or wanted with another placement.
    pub stop: Vec<StreamSpec>,
    /// Streams to start (after the stops): new, or restarted with a new placement.
    pub start: BTreeMap<StreamSpec, StreamPlacement>,
}

/// The changes that turn `running` into `wanted`.
#[must_use]
pub fn diff_streams(
    wanted: &BTreeMap<StreamSpec, StreamPlacement>,
    running: &BTreeMap<StreamSpec, StreamPlacement>,
) -> StreamChanges {
    let stop = running
        .iter()
        .filter(|(spec, placement)| wanted.get(*spec) != Some(*placement))
        .map(|(spec, _)| spec.clone())
        .collect();
    let start = wanted
        .iter()
        .filter(|(spec, placement)| running.get(*spec) != Some(*placement))
        .map(|(spec, placement)| (spec.clone(), placement.clone()))
        .collect();
    StreamChanges { stop, start }
}

/// Parses `resource` or `resource.group` (the group is everything after the first dot).
#[must_use]
pub fn parse_group_resource(s: &str) -> GroupResource {
    match s.split_once('.') {
        Some((resource, group)) => GroupResource::new(group, resource),
        None => GroupResource::new("", s),
    }
}

/// Why a target or rule cannot be served, for its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase reason.
    pub reason: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

/// The whole plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Targets that can be served.
    pub targets: BTreeMap<TargetRef, TargetPlan>,
    /// Targets that cannot, and why.
    pub target_problems: BTreeMap<TargetRef, Problem>,
    /// Per rule (kind, namespace, name): the types it resolved to, or why it resolved nothing.
    pub rules: BTreeMap<(String, String, String), Result<Vec<String>, Problem>>,
}

fn glob_match(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((pre, post)) => {
            s.len() >= pre.len() + post.len() && s.starts_with(pre) && s.ends_with(post)
        }
    }
}

/// Checks a target path: relative, no `..`, no empty segments (`.` is the repository root).
pub fn validate_path(path: &str) -> Result<String, String> {
    if path == "." {
        return Ok(String::new());
    }
    if path.is_empty() || path.starts_with('/') || path.ends_with('/') {
        return Err(format!(
            "spec.path {path:?} must be a relative folder without leading or trailing '/' (use \".\" for the root)"
        ));
    }
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == ".." || s.contains('\\'))
    {
        return Err(format!(
            "spec.path {path:?} may not contain empty, '.' or '..' segments"
        ));
    }
    // The tree writer's own check, so a target is refused where the writer would refuse it.
    backflow_manifest::normalize_target(path).map_err(|e| format!("spec.path: {e}"))?;
    Ok(path.to_string())
}

/// A target's `spec.placement`, every template checked.
fn placement_rules(t: &GitTarget) -> Result<PlacementRules, String> {
    let Some(p) = &t.spec.placement else {
        return Ok(PlacementRules::default());
    };
    for (type_key, template) in &p.by_type {
        validate_template(template)
            .map_err(|m| format!("spec.placement.byType[{type_key:?}]: {m}"))?;
    }
    if let Some(d) = &p.default {
        validate_template(d).map_err(|m| format!("spec.placement.default: {m}"))?;
    }
    Ok(PlacementRules {
        by_type: p.by_type.clone(),
        default: p.default.clone(),
    })
}

fn resolve_rule(
    rule: &ResourceRule,
    served: &[ServedType],
    cluster: bool,
    encrypted: bool,
) -> Vec<ServedType> {
    let groups_any = rule.api_groups.is_empty() || rule.api_groups.iter().any(|g| g == "*");
    let resources_any = rule.resources.iter().any(|r| r == "*");
    served
        .iter()
        .filter(|t| t.namespaced != cluster)
        .filter(|t| groups_any || rule.api_groups.contains(&t.group))
        .filter(|t| {
            if rule.api_versions.is_empty() {
                t.preferred
            } else {
                rule.api_versions.contains(&t.version)
            }
        })
        .filter(|t| {
            let named = rule.resources.contains(&t.plural);
            let id = (t.group.as_str(), t.plural.as_str());
            // Sensitive types go only where they can be encrypted; with encryption, a wildcard
            // takes them like any other type.
            let allowed = encrypted || !SENSITIVE.contains(&id);
            let wildcard_ok = resources_any && !DEFAULT_EXCLUSIONS.contains(&id);
            allowed && (named || wildcard_ok)
        })
        .cloned()
        .collect()
}

fn describe(t: &ServedType) -> String {
    if t.group.is_empty() {
        format!("{}/{}", t.version, t.plural)
    } else {
        format!("{}/{}/{}", t.group, t.version, t.plural)
    }
}

/// Computes the plan.
#[must_use]
pub fn plan(
    providers: &[GitProvider],
    targets: &[GitTarget],
    rules: &[WatchRule],
    cluster_rules: &[ClusterWatchRule],
    served: &[ServedType],
) -> Plan {
    let mut out = Plan::default();
    for t in targets {
        let key = (t.namespace().unwrap_or_default(), t.name_any());
        match plan_target(t, providers) {
            Ok(tp) => {
                out.targets.insert(key, tp);
            }
            Err(p) => {
                out.target_problems.insert(key, p);
            }
        }
    }
    refuse_shared_folders(&mut out);
    share_sensitive_types(&mut out);
    for r in rules {
        let ns = r.namespace().unwrap_or_default();
        let rule_key = ("WatchRule".to_string(), ns.clone(), r.name_any());
        let target = (ns.clone(), r.spec.target_ref.name.clone());
        let scope = |rule: &ResourceRule| match rule.source_namespace.as_deref() {
            None | Some("") => Some(ns.clone()),
            Some("*") => None,
            Some(other) => Some(other.to_string()),
        };
        let resolved = add_streams(&mut out, &target, &r.spec.rules, served, false, scope);
        let outcome = rule_outcome(resolved, &target, &out.targets, &out.target_problems);
        out.rules.insert(rule_key, outcome);
    }
    for r in cluster_rules {
        let rule_key = ("ClusterWatchRule".to_string(), String::new(), r.name_any());
        let target = (
            r.spec.target_ref.namespace.clone(),
            r.spec.target_ref.name.clone(),
        );
        let resolved = add_streams(&mut out, &target, &r.spec.rules, served, true, |_| None);
        let outcome = rule_outcome(resolved, &target, &out.targets, &out.target_problems);
        out.rules.insert(rule_key, outcome);
    }
    drop_covered_streams(&mut out);
    out
}

/// A type one target writes only encrypted (`spec.encryption.sensitiveResources`) is sensitive
/// in every target of the server: another target must not publish in plain text what the first
/// encrypts. A target without encryption then does not mirror that type, as for Secrets.
fn share_sensitive_types(out: &mut Plan) {
    let mut shared: Vec<GroupResource> = out
        .targets
        .values()
        .flat_map(|tp| tp.sensitive.iter().cloned())
        .collect();
    shared.sort();
    shared.dedup();
    for tp in out.targets.values_mut() {
        tp.sensitive.clone_from(&shared);
    }
}

/// Where one `GitTarget` writes, or why it cannot be served.
fn plan_target(t: &GitTarget, providers: &[GitProvider]) -> Result<TargetPlan, Problem> {
    let ns = t.namespace().unwrap_or_default();
    let problem = |reason, message: String| Problem { reason, message };
    let Some(p) = providers.iter().find(|p| {
        p.namespace().as_deref() == Some(ns.as_str()) && p.name_any() == t.spec.provider_ref.name
    }) else {
        return Err(problem(
            "ProviderNotFound",
            format!(
                "GitProvider {:?} does not exist in namespace {ns:?}; create it or fix spec.providerRef.name",
                t.spec.provider_ref.name
            ),
        ));
    };
    if p.spec.url.trim().is_empty() {
        return Err(problem(
            "InvalidConfig",
            format!("GitProvider {:?} has an empty spec.url", p.name_any()),
        ));
    }
    let allowed = if p.spec.allowed_branches.is_empty() {
        vec!["*".to_string()]
    } else {
        p.spec.allowed_branches.clone()
    };
    if t.spec.branch.is_empty() {
        return Err(problem("InvalidConfig", "spec.branch is empty".into()));
    }
    if !allowed.iter().any(|a| glob_match(a, &t.spec.branch)) {
        return Err(problem(
            "BranchNotAllowed",
            format!(
                "branch {:?} is not in GitProvider {:?} allowedBranches {:?}",
                t.spec.branch,
                p.name_any(),
                allowed
            ),
        ));
    }
    let path = validate_path(&t.spec.path).map_err(|m| problem("InvalidConfig", m))?;
    let placement = placement_rules(t).map_err(|m| problem("InvalidConfig", m))?;
    let encryption = t.spec.encryption.as_ref();
    Ok(TargetPlan {
        path,
        url: p.spec.url.clone(),
        branch: t.spec.branch.clone(),
        provider: (ns.clone(), p.name_any()),
        prune: t.spec.prune.mode,
        streams: BTreeSet::new(),
        encryption: encryption.and_then(|e| e.age.clone()),
        placement,
        sensitive: encryption
            .map(|e| {
                e.sensitive_resources
                    .iter()
                    .map(|r| parse_group_resource(r))
                    .collect()
            })
            .unwrap_or_default(),
        policy: folder_policy(&ns, t),
    })
}

/// A folder coordinated by a `FluxClaim` or an `ArgoCDClaim` belongs to the Kustomization or
/// Application the claim holds: objects it applied (its stamps) are the folder's own, and every
/// other applier's are excluded.
pub fn hold_appliers(
    p: &mut Plan,
    targets: &[GitTarget],
    fluxes: &[FluxClaim],
    argos: &[ArgoCDClaim],
) {
    for t in targets {
        let Some(reference) = t.spec.applier_claim_ref.as_ref() else {
            continue;
        };
        let ns = t.namespace().unwrap_or_default();
        let named = |meta: &ObjectMeta| {
            meta.namespace.as_deref() == Some(ns.as_str())
                && meta.name.as_deref() == Some(reference.name.as_str())
        };
        let held = |r: &ObjectReference| {
            let held_ns = if r.namespace.is_empty() {
                &ns
            } else {
                &r.namespace
            };
            (held_ns.clone(), r.name.clone())
        };
        let applier = match reference.kind.as_str() {
            "FluxClaim" => fluxes.iter().find(|c| named(&c.metadata)).map(|c| {
                let (namespace, name) = held(&c.spec.kustomization_ref);
                AppliedBy::Flux { namespace, name }
            }),
            "ArgoCDClaim" => argos
                .iter()
                .find(|c| named(&c.metadata))
                .map(|c| AppliedBy::ArgoCd(held(&c.spec.application_ref).1)),
            _ => None,
        };
        if let (Some(applier), Some(tp)) = (applier, p.targets.get_mut(&(ns.clone(), t.name_any())))
        {
            tp.policy.applier = Some(applier);
        }
    }
}

fn folder_policy(ns: &str, t: &GitTarget) -> FolderPolicy {
    // Every claim kind stamps backflow's label for now; a Flux or Argo CD claim will name the
    // Kustomization or Application it holds.
    let applier = t
        .spec
        .applier_claim_ref
        .as_ref()
        .map(|claim| AppliedBy::claim(ns, &claim.name));
    FolderPolicy {
        reapply: applier.is_some() && t.spec.on_refusal == OnRefusal::Reapply,
        applier,
        excluded_managers: t
            .spec
            .exclude
            .as_ref()
            .map(|e| e.field_managers.clone())
            .unwrap_or_default(),
        excluded_users: t
            .spec
            .exclude
            .as_ref()
            .map(|e| e.users.clone())
            .unwrap_or_default(),
        commit_authors: t.spec.commit_authors,
        claim: t.spec.applier_claim_ref.as_ref().map(|c| NamedClaim {
            kind: c.kind.clone(),
            namespace: ns.to_string(),
            name: c.name.clone(),
        }),
    }
}

/// Two targets may not share a folder of one branch: their writes would fight. The first (in
/// name order) keeps it.
fn refuse_shared_folders(out: &mut Plan) {
    let mut seen: BTreeMap<(String, String, String), TargetRef> = BTreeMap::new();
    let keys: Vec<TargetRef> = out.targets.keys().cloned().collect();
    for k in keys {
        let Some(tp) = out.targets.get(&k) else {
            continue;
        };
        let slot = (tp.url.clone(), tp.branch.clone(), tp.path.clone());
        if let Some(first) = seen.get(&slot) {
            let message = format!(
                "GitTarget {}/{} already writes folder {:?} of this branch",
                first.0, first.1, tp.path
            );
            out.targets.remove(&k);
            out.target_problems.insert(
                k,
                Problem {
                    reason: "TargetConflict",
                    message,
                },
            );
        } else {
            seen.insert(slot, k);
        }
    }
}

/// Adds to `target` a stream per type the `rules` resolve to, each in the namespace scope
/// `scope` gives its rule; returns the resolved types, described.
fn add_streams(
    out: &mut Plan,
    target: &TargetRef,
    rules: &[ResourceRule],
    served: &[ServedType],
    cluster: bool,
    scope: impl Fn(&ResourceRule) -> Option<String>,
) -> Vec<String> {
    let mut resolved = Vec::new();
    let encrypted = out
        .targets
        .get(target)
        .is_some_and(|t| t.encryption.is_some());
    for rule in rules {
        let namespace = scope(rule);
        for st in resolve_rule(rule, served, cluster, encrypted) {
            resolved.push(describe(&st));
            if let Some(tp) = out.targets.get_mut(target) {
                tp.streams.insert(StreamSpec {
                    target: target.clone(),
                    served: st,
                    namespace: namespace.clone(),
                });
            }
        }
    }
    resolved
}

/// A namespace-wide stream covers the per-namespace ones of the same type and target.
fn drop_covered_streams(out: &mut Plan) {
    for tp in out.targets.values_mut() {
        let wide: BTreeSet<(TargetRef, ServedType)> = tp
            .streams
            .iter()
            .filter(|s| s.namespace.is_none())
            .map(|s| (s.target.clone(), s.served.clone()))
            .collect();
        tp.streams.retain(|s| {
            s.namespace.is_none() || !wide.contains(&(s.target.clone(), s.served.clone()))
        });
    }
}

fn rule_outcome(
    mut resolved: Vec<String>,
    target: &TargetRef,
    targets: &BTreeMap<TargetRef, TargetPlan>,
    problems: &BTreeMap<TargetRef, Problem>,
) -> Result<Vec<String>, Problem> {
    resolved.sort();
    resolved.dedup();
    if !targets.contains_key(target) {
        return Err(match problems.get(target) {
            Some(p) => Problem {
                reason: "GitTargetNotReady",
                message: format!("GitTarget {}/{}: {}", target.0, target.1, p.message),
            },
            None => Problem {
                reason: "GitTargetNotFound",
                message: format!("GitTarget {}/{} does not exist", target.0, target.1),
            },
        });
    }
    if resolved.is_empty() {
        return Err(Problem {
            reason: "UnresolvedResources",
            message:
                "no served resource matches the rules (secrets are mirrored only into GitTargets with spec.encryption)"
                    .into(),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::config::{
        Encryption, GitProviderSpec, GitTargetSpec, LocalReference, WatchRuleSpec,
    };

    #[test]
    fn stream_diff_starts_new_restarts_moved_and_stops_unwanted() {
        let spec = |plural: &str| StreamSpec {
            target: ("team".into(), "t".into()),
            served: served()
                .into_iter()
                .find(|s| s.plural == plural)
                .expect("served"),
            namespace: None,
        };
        let at = |path: &str| StreamPlacement {
            path: path.into(),
            prune: PruneMode::OnEvent,
            url: "file:///r.git".into(),
            branch: "main".into(),
            policy: FolderPolicy::default(),
        };
        let running = BTreeMap::from([
            (spec("configmaps"), at("live")),
            (spec("deployments"), at("live")),
            (spec("namespaces"), at("live")),
        ]);
        let wanted = BTreeMap::from([
            (spec("configmaps"), at("live")),
            (spec("deployments"), at("moved")),
            (spec("secrets"), at("live")),
        ]);
        let changes = diff_streams(&wanted, &running);
        // In the running streams' order: the core group sorts first.
        assert_eq!(changes.stop, vec![spec("namespaces"), spec("deployments")]);
        assert_eq!(
            changes.start,
            BTreeMap::from([
                (spec("deployments"), at("moved")),
                (spec("secrets"), at("live"))
            ])
        );
        assert_eq!(diff_streams(&wanted, &wanted), StreamChanges::default());
    }

    fn served() -> Vec<ServedType> {
        let t = |g: &str, p: &str, k: &str, ns: bool| ServedType {
            group: g.into(),
            version: "v1".into(),
            plural: p.into(),
            kind: k.into(),
            namespaced: ns,
            preferred: true,
        };
        vec![
            t("", "configmaps", "ConfigMap", true),
            t("", "secrets", "Secret", true),
            t("", "events", "Event", true),
            t("", "namespaces", "Namespace", false),
            t("apps", "deployments", "Deployment", true),
        ]
    }

    fn setup(rules: Vec<ResourceRule>) -> Plan {
        setup_with(rules, None)
    }

    /// `GitProvider` `team/git` for `file:///r`.
    fn provider() -> GitProvider {
        let mut p = GitProvider::new(
            "git",
            GitProviderSpec {
                url: "file:///r".into(),
                ..Default::default()
            },
        );
        p.metadata.namespace = Some("team".into());
        p
    }

    fn setup_with(rules: Vec<ResourceRule>, encryption: Option<Encryption>) -> Plan {
        let p = provider();
        let mut t = GitTarget::new(
            "t",
            GitTargetSpec {
                provider_ref: LocalReference { name: "git".into() },
                branch: "main".into(),
                path: "live".into(),
                encryption,
                ..Default::default()
            },
        );
        t.metadata.namespace = Some("team".into());
        let mut r = WatchRule::new(
            "r",
            WatchRuleSpec {
                target_ref: LocalReference { name: "t".into() },
                rules,
            },
        );
        r.metadata.namespace = Some("team".into());
        plan(&[p], &[t], &[r], &[], &served())
    }

    #[test]
    fn wildcard_skips_noise_and_secrets() {
        let p = setup(vec![ResourceRule {
            resources: vec!["*".into()],
            ..Default::default()
        }]);
        let streams: Vec<String> = p.targets[&("team".to_string(), "t".to_string())]
            .streams
            .iter()
            .map(|s| format!("{}:{:?}", s.served.plural, s.namespace))
            .collect();
        assert_eq!(
            streams,
            vec!["configmaps:Some(\"team\")", "deployments:Some(\"team\")"]
        );
    }

    #[test]
    fn secrets_only_with_encryption() {
        let streams = |p: &Plan| -> Vec<String> {
            p.targets[&("team".to_string(), "t".to_string())]
                .streams
                .iter()
                .map(|s| s.served.plural.clone())
                .collect()
        };
        let named = ResourceRule {
            resources: vec!["secrets".into()],
            ..Default::default()
        };
        let p = setup(vec![named.clone()]);
        assert!(streams(&p).is_empty());
        let encryption = Encryption {
            age: Some(AgeEncryption {
                recipients: vec!["age1example".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = setup_with(vec![named], Some(encryption.clone()));
        assert_eq!(streams(&p), vec!["secrets"]);
        let wildcard = ResourceRule {
            resources: vec!["*".into()],
            ..Default::default()
        };
        let p = setup_with(vec![wildcard], Some(encryption));
        assert_eq!(streams(&p), vec!["configmaps", "secrets", "deployments"]);
    }

    #[test]
    fn named_resources_and_all_namespaces() {
        let p = setup(vec![ResourceRule {
            api_groups: vec!["apps".into()],
            resources: vec!["deployments".into()],
            source_namespace: Some("*".into()),
            ..Default::default()
        }]);
        let tp = &p.targets[&("team".to_string(), "t".to_string())];
        assert_eq!(tp.streams.len(), 1);
        assert_eq!(
            tp.streams.iter().next().map(|s| s.namespace.clone()),
            Some(None)
        );
    }

    #[test]
    fn a_type_one_target_encrypts_is_sensitive_in_every_target() {
        let target = |name: &str, sensitive: &[&str]| {
            let mut t = GitTarget::new(
                name,
                GitTargetSpec {
                    provider_ref: LocalReference { name: "git".into() },
                    branch: "main".into(),
                    path: name.into(),
                    encryption: (!sensitive.is_empty()).then(|| Encryption {
                        sensitive_resources: sensitive.iter().map(|s| (*s).to_string()).collect(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            );
            t.metadata.namespace = Some("team".into());
            t
        };
        let p = plan(
            &[provider()],
            &[target("vault", &["configmaps"]), target("plain", &[])],
            &[],
            &[],
            &served(),
        );
        let configmaps = GroupResource::new("", "configmaps");
        for name in ["vault", "plain"] {
            assert!(
                p.targets[&("team".to_string(), name.to_string())].is_sensitive(&configmaps),
                "{name}"
            );
        }
    }

    #[test]
    fn sensitive_resources_parse_with_their_group() {
        assert_eq!(
            parse_group_resource("configmaps"),
            GroupResource::new("", "configmaps")
        );
        assert_eq!(
            parse_group_resource("credentials.example.com"),
            GroupResource::new("example.com", "credentials")
        );
    }

    #[test]
    fn bad_paths_and_missing_providers_are_problems() {
        assert!(validate_path("../x").is_err());
        assert!(validate_path("/abs").is_err());
        assert!(validate_path("a//b").is_err());
        for git in [".git", ".GIT", "live/.Git", "a/.gIt/b"] {
            let err = validate_path(git).unwrap_err();
            assert!(err.contains(".git"), "{git}: {err}");
        }
        assert_eq!(validate_path("."), Ok(String::new()));
        let p = plan(
            &[],
            &[GitTarget::new("t", GitTargetSpec::default())],
            &[],
            &[],
            &served(),
        );
        assert_eq!(
            p.target_problems.values().next().map(|p| p.reason),
            Some("ProviderNotFound")
        );
    }
}
