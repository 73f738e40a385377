//! What the board's streams are: a watch of one served type in one namespace scope, feeding
//! one `GitTarget`.

use backflow_api::GroupResource;

/// A type the live API serves (its preferred version, or each listed version).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServedType {
    /// API group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub plural: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Whether this is the group's preferred version.
    pub preferred: bool,
}

impl ServedType {
    /// The storage identity.
    #[must_use]
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }
}

/// The objects of a type the mirror does not see: the roles and bindings the API server
/// bootstraps itself (kube-apiserver, and backflow's embedded server under RBAC) and recreates
/// at every start, which are its defaults, not anybody's intent.
#[must_use]
pub fn unseen_objects(served: &ServedType) -> Option<&'static str> {
    (served.group == "rbac.authorization.k8s.io")
        .then_some("kubernetes.io/bootstrapping!=rbac-defaults")
}

/// A `GitTarget`, by namespace and name.
pub type TargetRef = (String, String);

/// One watch: a type in one namespace (or all), for one target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamSpec {
    /// The target it feeds.
    pub target: TargetRef,
    /// The type watched.
    pub served: ServedType,
    /// One namespace, or every namespace (and cluster-scoped types) with `None`.
    pub namespace: Option<String>,
}

impl StreamSpec {
    /// `configmaps in team-a`, `apps/deployments in every namespace`, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        let resource = if self.served.group.is_empty() {
            self.served.plural.clone()
        } else {
            format!("{}/{}", self.served.group, self.served.plural)
        };
        match &self.namespace {
            Some(ns) => format!("{resource} in {ns}"),
            None => format!("{resource} in every namespace"),
        }
    }
}
