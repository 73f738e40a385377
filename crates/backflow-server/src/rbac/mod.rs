//! Authorization with kube-apiserver's RBAC semantics: who may do what, from the Roles,
//! `ClusterRoles` and their bindings the store holds, with `ClusterRole` aggregation, the
//! `system:masters` bypass, and escalation prevention (a user grants only what they hold,
//! unless they may `escalate` or `bind`).
//!
//! Pure: a [`Policy`] is a snapshot of the RBAC objects, and every answer is a function of it
//! and the request's [`Attributes`]. The HTTP layer takes a snapshot per request that needs one.

mod aggregation;
mod bootstrap;
mod escalation;
mod rule;

use std::collections::BTreeMap;
use std::sync::Arc;

use backflow_api::GroupResource;
use serde::Deserialize;
use serde_json::Value;

use aggregation::rules_of;
pub use aggregation::{aggregation_updates, selected_keys};
pub use bootstrap::bootstrap_objects;
pub use escalation::Grantor;
pub use rule::PolicyRule;

use crate::error::ApiError;
use crate::store::Store;

/// The group whose members may do everything, without a binding.
pub const MASTERS: &str = "system:masters";

/// Who is asking: the user name and every group (`system:authenticated` included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The user name (`alice`, `system:serviceaccount:ns:name`, `system:anonymous`).
    pub name: String,
    /// The groups.
    pub groups: Vec<String>,
}

impl Subject {
    /// Whether the subject is in `system:masters`.
    #[must_use]
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// The object a resource request concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// API group (`""`: core).
    pub group: String,
    /// The plural resource.
    pub resource: String,
    /// `status`, `scale`, `log`, …
    pub subresource: Option<String>,
    /// The namespace (`None`: cluster-scoped, or every namespace).
    pub namespace: Option<String>,
    /// The object's name, when the request names one.
    pub name: Option<String>,
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`, `bind`, `escalate`, … (for a non-resource request: the lowercase method).
    pub verb: String,
    /// The object, for a resource request; `None`: a non-resource request of `path`.
    pub resource: Option<ResourceAttributes>,
    /// The path of a non-resource request.
    pub path: String,
}

impl Attributes {
    /// A resource request.
    #[must_use]
    pub fn resource(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (resource.to_string(), None),
        };
        Self {
            verb: verb.into(),
            resource: Some(ResourceAttributes {
                group: group.into(),
                resource,
                subresource,
                namespace: namespace.filter(|n| !n.is_empty()).map(str::to_string),
                name: name.filter(|n| !n.is_empty()).map(str::to_string),
            }),
            path: String::new(),
        }
    }

    /// A non-resource request.
    #[must_use]
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.into(),
            resource: None,
            path: path.into(),
        }
    }

    /// kube-apiserver's 403 for `user` being refused this request.
    #[must_use]
    pub fn denied(&self, user: &str) -> ApiError {
        let (group, resource, name) = match &self.resource {
            Some(r) => (
                r.group.clone(),
                r.resource.clone(),
                r.name.clone().unwrap_or_default(),
            ),
            None => Default::default(),
        };
        ApiError::Denied {
            group,
            resource,
            name,
            message: self.forbidden(user),
        }
    }

    /// kube-apiserver's denial: `configmaps "x" is forbidden: User "alice" cannot get resource
    /// "configmaps" in API group "" in the namespace "team-b"`.
    #[must_use]
    pub fn forbidden(&self, user: &str) -> String {
        let Some(r) = &self.resource else {
            return format!(
                "forbidden: User \"{user}\" cannot {} path \"{}\"",
                self.verb, self.path
            );
        };
        let qualified = if r.group.is_empty() {
            r.resource.clone()
        } else {
            format!("{}.{}", r.resource, r.group)
        };
        let what = match &r.name {
            Some(n) => format!("{qualified} \"{n}\" is forbidden"),
            None => format!("{qualified} is forbidden"),
        };
        let resource = match &r.subresource {
            Some(s) => format!("{}/{s}", r.resource),
            None => r.resource.clone(),
        };
        let scope = match &r.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".into(),
        };
        format!(
            "{what}: User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            self.verb, r.group
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Debug, Clone, Deserialize)]
struct BindingSubject {
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Debug, Clone)]
struct Binding {
    /// `None`: a `ClusterRoleBinding`.
    namespace: Option<String>,
    role_ref: RoleRef,
    subjects: Vec<BindingSubject>,
}

impl Binding {
    fn names(&self, who: &Subject) -> bool {
        self.subjects.iter().any(|s| match s.kind.as_str() {
            "User" => s.name == who.name,
            "Group" => who.groups.contains(&s.name),
            "ServiceAccount" => {
                let ns = s
                    .namespace
                    .as_deref()
                    .or(self.namespace.as_deref())
                    .unwrap_or("");
                who.name == format!("system:serviceaccount:{ns}:{}", s.name)
            }
            _ => false,
        })
    }
}

/// A snapshot of the RBAC objects: Roles by namespace and name, `ClusterRoles` (aggregation
/// resolved), and the bindings.
#[derive(Debug, Default, Clone)]
pub struct Policy {
    roles: BTreeMap<(String, String), Vec<PolicyRule>>,
    cluster_roles: BTreeMap<String, Vec<PolicyRule>>,
    bindings: Vec<Binding>,
}

/// The RBAC types a policy is built from, in [`Policy::from_objects`]'s order.
const RBAC_RESOURCES: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

/// The policy of the store's RBAC objects, built again only when one of them changed (it was
/// built for every request a user other than `system:masters` made).
#[derive(Debug, Default)]
pub struct PolicyCache(std::sync::Mutex<Option<CachedPolicy>>);

#[derive(Debug)]
struct CachedPolicy {
    /// The stored JSON of the RBAC objects the policy was built from. Held, so no other
    /// object's JSON can be allocated where one of them lies: an object is unchanged exactly
    /// when its JSON is the same allocation.
    objects: [Vec<bytes::Bytes>; 4],
    policy: Arc<Policy>,
}

impl PolicyCache {
    /// The policy the store holds now.
    pub fn current(&self, store: &Store) -> Arc<Policy> {
        let objects: [Vec<bytes::Bytes>; 4] = RBAC_RESOURCES.map(|resource| {
            let gr = GroupResource::new("rbac.authorization.k8s.io", resource);
            store.read(|s| s.list(&gr, None).map(|(_, o)| o.json().clone()).collect())
        });
        let mut cached = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cached.as_ref()
            && c.objects.iter().zip(&objects).all(|(was, now)| {
                was.len() == now.len()
                    && was
                        .iter()
                        .zip(now)
                        .all(|(a, b)| std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len())
            })
        {
            return c.policy.clone();
        }
        let values = |i: usize| -> Vec<Value> {
            objects[i]
                .iter()
                .filter_map(|json| serde_json::from_slice(json).ok())
                .collect()
        };
        let policy = Arc::new(Policy::from_objects(
            &values(0),
            &values(1),
            &values(2),
            &values(3),
        ));
        *cached = Some(CachedPolicy {
            objects,
            policy: policy.clone(),
        });
        policy
    }
}

impl Policy {
    /// The policy of these objects.
    #[must_use]
    pub fn from_objects(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_bindings: &[Value],
    ) -> Self {
        let meta = |o: &Value, f: &str| o["metadata"][f].as_str().unwrap_or("").to_string();
        let roles = roles
            .iter()
            .map(|r| ((meta(r, "namespace"), meta(r, "name")), rules_of(r)))
            .collect();
        // Aggregated roles as the aggregation leaves them (their stored rules may lag a
        // change being written).
        let updates = aggregation_updates(cluster_roles);
        let resolved = cluster_roles
            .iter()
            .map(|role| {
                let current = updates
                    .iter()
                    .find(|u| u["metadata"]["name"] == role["metadata"]["name"])
                    .unwrap_or(role);
                (meta(role, "name"), rules_of(current))
            })
            .collect();
        let binding = |o: &Value, namespaced: bool| -> Option<Binding> {
            Some(Binding {
                namespace: namespaced.then(|| meta(o, "namespace")),
                role_ref: serde_json::from_value(o.get("roleRef")?.clone()).ok()?,
                subjects: o
                    .get("subjects")
                    .cloned()
                    .and_then(|s| serde_json::from_value(s).ok())
                    .unwrap_or_default(),
            })
        };
        let bindings = role_bindings
            .iter()
            .filter_map(|b| binding(b, true))
            .chain(cluster_bindings.iter().filter_map(|b| binding(b, false)))
            .collect();
        Self {
            roles,
            cluster_roles: resolved,
            bindings,
        }
    }

    fn role_rules(&self, namespace: Option<&str>, role_ref: &RoleRef) -> &[PolicyRule] {
        let rules = match (role_ref.kind.as_str(), namespace) {
            ("ClusterRole", _) => self.cluster_roles.get(&role_ref.name),
            ("Role", Some(ns)) => self.roles.get(&(ns.to_string(), role_ref.name.clone())),
            _ => None,
        };
        rules.map_or(&[], Vec::as_slice)
    }

    /// Every rule `who` holds in `namespace` (`None`: cluster-wide only): what their
    /// `ClusterRoleBindings` grant everywhere, and their `RoleBindings` there.
    #[must_use]
    pub fn rules_for(&self, who: &Subject, namespace: Option<&str>) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        for b in &self.bindings {
            let applies = match &b.namespace {
                None => true,
                Some(ns) => Some(ns.as_str()) == namespace,
            };
            if applies && b.names(who) {
                out.extend_from_slice(self.role_rules(b.namespace.as_deref(), &b.role_ref));
            }
        }
        out
    }

    /// Whether `who` may do what `a` asks.
    #[must_use]
    pub fn allows(&self, who: &Subject, a: &Attributes) -> bool {
        if who.is_master() {
            return true;
        }
        let namespace = a.resource.as_ref().and_then(|r| r.namespace.as_deref());
        self.rules_for(who, namespace).iter().any(|r| r.allows(a))
    }

    /// The rules of `rules` that `who` does not hold in `namespace`, as atoms: empty when
    /// granting them escalates nothing.
    #[must_use]
    pub fn not_held(
        &self,
        who: &Subject,
        namespace: Option<&str>,
        rules: &[PolicyRule],
    ) -> Vec<PolicyRule> {
        if who.is_master() {
            return Vec::new();
        }
        let held = self.rules_for(who, namespace);
        rules
            .iter()
            .flat_map(PolicyRule::atoms)
            .filter(|atom| !held.iter().any(|h| h.covers_atom(atom)))
            .collect()
    }

    /// The rules of the role a binding in `namespace` refers to (`kind`, `name`).
    #[must_use]
    pub fn referenced_rules(
        &self,
        namespace: Option<&str>,
        kind: &str,
        name: &str,
    ) -> Vec<PolicyRule> {
        self.role_rules(
            namespace,
            &RoleRef {
                kind: kind.into(),
                name: name.into(),
            },
        )
        .to_vec()
    }
}

/// A rule as kube-apiserver prints one it refuses to grant: `{APIGroups:[""],
/// Resources:["secrets"], Verbs:["get"]}`.
#[must_use]
pub fn describe_rule(rule: &PolicyRule) -> String {
    let list = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:[{}]", list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:[{}]", list(&rule.resources)));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!("ResourceNames:[{}]", list(&rule.resource_names)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:[{}]",
            list(&rule.non_resource_urls)
        ));
    }
    parts.push(format!("Verbs:[{}]", list(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests;
