//! The built-in kinds: core and the common groups, stored schemaless.

use crate::registry::{KindBehavior, ResourceType, ScalePaths, Scope};

#[allow(
    clippy::struct_excessive_bools,
    reason = "a table of independent yes/no traits, one row per kind"
)]
struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    scope: Scope,
    short: &'static [&'static str],
    status: bool,
    scale: bool,
    all: bool,
    /// Objects are stored at this version (false: served from another version's storage,
    /// converted, see `crate::convert`).
    storage: bool,
}

const fn b(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        kind,
        scope: Scope::Namespaced,
        short: &[],
        status: false,
        scale: false,
        all: false,
        storage: true,
    }
}

impl Builtin {
    const fn cluster(mut self) -> Self {
        self.scope = Scope::Cluster;
        self
    }
    const fn short(mut self, s: &'static [&'static str]) -> Self {
        self.short = s;
        self
    }
    const fn status(mut self) -> Self {
        self.status = true;
        self
    }
    const fn scale(mut self) -> Self {
        self.scale = true;
        self
    }
    const fn all(mut self) -> Self {
        self.all = true;
        self
    }
    const fn served_only(mut self) -> Self {
        self.storage = false;
        self
    }
}

const BUILTINS: &[Builtin] = &[
    b("", "v1", "namespaces", "Namespace")
        .cluster()
        .short(&["ns"])
        .status(),
    b("", "v1", "configmaps", "ConfigMap").short(&["cm"]),
    b("", "v1", "secrets", "Secret"),
    b("", "v1", "services", "Service")
        .short(&["svc"])
        .status()
        .all(),
    b("", "v1", "serviceaccounts", "ServiceAccount").short(&["sa"]),
    b("", "v1", "events", "Event").short(&["ev"]),
    // What client-go's `tools/events` recorder writes; stored as core Events, converted both ways.
    b("events.k8s.io", "v1", "events", "Event")
        .short(&["ev"])
        .served_only(),
    b("", "v1", "pods", "Pod").short(&["po"]).status().all(),
    b("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
        .short(&["pvc"])
        .status(),
    b("", "v1", "endpoints", "Endpoints").short(&["ep"]),
    b("", "v1", "resourcequotas", "ResourceQuota")
        .short(&["quota"])
        .status(),
    b("", "v1", "limitranges", "LimitRange").short(&["limits"]),
    b("apps", "v1", "deployments", "Deployment")
        .short(&["deploy"])
        .status()
        .scale()
        .all(),
    b("apps", "v1", "statefulsets", "StatefulSet")
        .short(&["sts"])
        .status()
        .scale()
        .all(),
    b("apps", "v1", "daemonsets", "DaemonSet")
        .short(&["ds"])
        .status()
        .all(),
    b("apps", "v1", "replicasets", "ReplicaSet")
        .short(&["rs"])
        .status()
        .scale()
        .all(),
    b("apps", "v1", "controllerrevisions", "ControllerRevision"),
    b("batch", "v1", "jobs", "Job").status().all(),
    b("batch", "v1", "cronjobs", "CronJob")
        .short(&["cj"])
        .status()
        .all(),
    b("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
    )
    .cluster(),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
    )
    .cluster(),
    b("networking.k8s.io", "v1", "ingresses", "Ingress")
        .short(&["ing"])
        .status(),
    b(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
    )
    .short(&["netpol"]),
    b("networking.k8s.io", "v1", "ingressclasses", "IngressClass").cluster(),
    b("coordination.k8s.io", "v1", "leases", "Lease"),
    b(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
    )
    .short(&["pdb"])
    .status(),
    b(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    )
    .short(&["hpa"])
    .status()
    .all(),
    // What `kubectl autoscale` up to 1.31 creates; stored at v2, converted both ways.
    b(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    )
    .short(&["hpa"])
    .status()
    .all()
    .served_only(),
    b("storage.k8s.io", "v1", "storageclasses", "StorageClass")
        .cluster()
        .short(&["sc"]),
    b(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
    )
    .cluster()
    .short(&["pc"]),
    // Answered by the authorizer (`http/review.rs`), listed so clients find them.
    b(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    )
    .cluster(),
    b(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    )
    .cluster(),
    b(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
    )
    .cluster(),
    b(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
    ),
    b(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
    )
    .cluster(),
    b(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
    )
    .cluster()
    .short(&["crd", "crds"])
    .status(),
];

/// The built-in resource types.
#[must_use]
pub fn types() -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .map(|b| ResourceType {
            group: b.group.into(),
            version: b.version.into(),
            plural: b.plural.into(),
            singular: b.kind.to_ascii_lowercase(),
            kind: b.kind.into(),
            list_kind: format!("{}List", b.kind),
            scope: b.scope,
            short_names: b
                .short
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            categories: if b.all { vec!["all".into()] } else { vec![] },
            status_subresource: b.status,
            scale: b.scale.then(|| ScalePaths {
                spec_replicas: ".spec.replicas".into(),
                status_replicas: ".status.replicas".into(),
                label_selector: None,
            }),
            storage_version: b.storage,
            custom: false,
            schema: None,
            printer_columns: vec![],
            behavior: KindBehavior::of_builtin(b.group, b.plural),
            tracks_generation: !b.group.is_empty() || b.plural == "replicationcontrollers",
        })
        .collect()
}

/// The names of the namespaces that exist from the start.
pub const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];
