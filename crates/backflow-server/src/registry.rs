//! The resource types the server serves: built-in kinds plus those `CustomResourceDefinitions` add.
//!
//! Discovery, routing and validation all read from here; a CRD write rebuilds the custom part so
//! new kinds appear (and deleted ones vanish) at once.

use std::collections::BTreeMap;

use backflow_api::GroupResource;
use serde_json::Value;

use crate::builtin;

/// Whether objects of a type live in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Objects live inside a namespace.
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

/// Where a scale subresource reads and writes replicas (CRD `subresources.scale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// JSON path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// JSON path of the label selector string, if any.
    pub label_selector: Option<String>,
}

/// What objects of a type do beyond the semantics every type shares. Held by the type, so the
/// engine asks the type instead of comparing group and resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KindBehavior {
    /// Nothing beyond the common semantics.
    #[default]
    Plain,
    /// Secrets: `stringData` folds into `data` on write.
    Secret,
    /// Namespaces: hold namespaced objects; an `Active` phase and the `kubernetes` finalizer;
    /// deleting one deletes what it holds.
    Namespace,
    /// `CustomResourceDefinitions`: register the kinds they declare, validated and completed;
    /// deleting one deletes its objects.
    CustomResourceDefinition,
    /// Deployments: a status as a controller would write it (no controller runs here).
    Deployment,
    /// Access reviews (`SelfSubjectAccessReview`, …): only created, answered by the
    /// authorizer, never stored.
    Review,
}

impl KindBehavior {
    /// The behaviour of the built-in type `group`/`plural`.
    #[must_use]
    pub fn of_builtin(group: &str, plural: &str) -> Self {
        match (group, plural) {
            ("", "secrets") => Self::Secret,
            ("", "namespaces") => Self::Namespace,
            ("apiextensions.k8s.io", "customresourcedefinitions") => Self::CustomResourceDefinition,
            ("apps", "deployments") => Self::Deployment,
            ("authorization.k8s.io" | "authentication.k8s.io", _) => Self::Review,
            _ => Self::Plain,
        }
    }
}

/// One served resource type at one version.
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent facts of a type, as discovery reports them"
)]
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// API group; empty for core.
    pub group: String,
    /// Version served, e.g. `v1`.
    pub version: String,
    /// Plural resource, e.g. `configmaps`.
    pub plural: String,
    /// Singular resource, e.g. `configmap`.
    pub singular: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Kind of the list, e.g. `ConfigMapList`.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
    /// Short names such as `cm`.
    pub short_names: Vec<String>,
    /// Categories such as `all`.
    pub categories: Vec<String>,
    /// Whether `status` is a subresource (the main endpoint ignores status changes).
    pub status_subresource: bool,
    /// The scale subresource, if any.
    pub scale: Option<ScalePaths>,
    /// Whether this is the version objects are stored at (CRDs), or the preferred one (built-ins).
    pub storage_version: bool,
    /// Whether the type comes from a `CustomResourceDefinition`.
    pub custom: bool,
    /// The CRD's `OpenAPI` v3 schema for this version, when it has one.
    pub schema: Option<Value>,
    /// The CRD's `additionalPrinterColumns` for this version.
    pub printer_columns: Vec<Value>,
    /// What its objects do beyond the common semantics.
    pub behavior: KindBehavior,
    /// Whether its objects carry `metadata.generation`, as on a real API server: custom
    /// resources and the types of the named groups do; the core group's types do not
    /// (`ConfigMaps`, Secrets, Services, Namespaces…), except `ReplicationControllers`.
    pub tracks_generation: bool,
}

impl ResourceType {
    /// The `apiVersion` string of objects of this type.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-resource pair (the storage identity).
    #[must_use]
    pub fn group_resource(&self) -> GroupResource {
        // As kube-apiserver: `events.k8s.io` Events are core Events, one object either way.
        if self.group == "events.k8s.io" && self.plural == "events" {
            return GroupResource::new("", "events");
        }
        GroupResource::new(&self.group, &self.plural)
    }

    /// Whether objects live in namespaces.
    #[must_use]
    pub fn namespaced(&self) -> bool {
        self.scope == Scope::Namespaced
    }

    /// The verbs served on this type.
    #[must_use]
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.behavior == KindBehavior::Review {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Every type the server serves, keyed by (group, version, plural).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
}

impl Registry {
    /// The built-in kinds only.
    #[must_use]
    pub fn builtin() -> Self {
        let mut r = Self::default();
        for t in builtin::types() {
            r.insert(t);
        }
        r
    }

    fn insert(&mut self, t: ResourceType) {
        self.types
            .insert((t.group.clone(), t.version.clone(), t.plural.clone()), t);
    }

    /// Replaces every custom type with those the given CRD objects define.
    pub fn set_custom(&mut self, crds: &[Value]) {
        self.types.retain(|_, t| !t.custom);
        for crd in crds {
            for t in crate::crd::resource_types(crd) {
                // A CRD may never shadow a built-in kind.
                let key = (t.group.clone(), t.version.clone(), t.plural.clone());
                self.types.entry(key).or_insert(t);
            }
        }
    }

    /// Looks up a type by group, version and plural.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// The version objects of a group-resource are stored and watched at.
    ///
    /// A CRD may mark an unserved version as its storage version; objects are then stored at the
    /// first served one, since no unserved version is routed.
    #[must_use]
    pub fn storage_type(&self, gr: &GroupResource) -> Option<&ResourceType> {
        let mut of_type = self
            .types
            .values()
            .filter(|t| t.group == gr.group && t.plural == gr.resource);
        let first = of_type.clone().next();
        of_type.find(|t| t.storage_version).or(first)
    }

    /// Whether a group/version exists at all (for `/apis/G/V`).
    #[must_use]
    pub fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.types
            .keys()
            .any(|(g, v, _)| g == group && v == version)
    }

    /// All types, ordered by group, version and plural.
    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// Groups with their versions, preferred version first (built-in order, then CRD order).
    #[must_use]
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.values() {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) => {
                    if !versions.contains(&t.version) {
                        versions.push(t.version.clone());
                    }
                }
                None => out.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        for (_, versions) in &mut out {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

/// Orders versions as Kubernetes does: GA over beta over alpha, higher numbers first.
#[must_use]
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    (level, major, num.parse().unwrap_or(0))
}
