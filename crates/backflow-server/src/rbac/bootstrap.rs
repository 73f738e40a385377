//! The roles and bindings kube-apiserver bootstraps, as it writes them (label
//! `kubernetes.io/bootstrapping: rbac-defaults`, annotation
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`): `cluster-admin`, the aggregated
//! `admin`, `edit` and `view` with the `system:aggregate-to-*` roles that fill them, and
//! `system:discovery`, `system:basic-user`, `system:public-info-viewer` with their bindings.
//! Their rules are kube-apiserver's for the kinds it serves (plugin/pkg/auth/authorizer/rbac/
//! bootstrappolicy).

use serde_json::{Value, json};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

fn read_write() -> Vec<&'static str> {
    READ.iter().chain(WRITE).copied().collect()
}

fn metadata(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut all = serde_json::Map::new();
    all.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for (k, v) in labels {
        all.insert((*k).into(), json!(v));
    }
    json!({"name": name, "labels": all,
           "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": metadata(name, labels), "rules": rules})
}

fn aggregated(name: &str, to: &str, labels: &[(&str, &str)]) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": metadata(name, labels),
           "aggregationRule": {"clusterRoleSelectors": [
               {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"}}]},
           "rules": []})
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": metadata(name, &[]),
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            "",
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        rule(READ, "", &["namespaces"]),
        rule(READ, "discovery.k8s.io", &["endpointslices"]),
        rule(
            READ,
            "apps",
            &[
                "controllerrevisions",
                "statefulsets",
                "deployments",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "daemonsets",
                "statefulsets/scale",
                "statefulsets/status",
                "deployments/status",
                "replicasets/status",
                "daemonsets/status",
            ],
        ),
        rule(
            READ,
            "autoscaling",
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            "batch",
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            "networking.k8s.io",
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

fn edit_rules() -> Vec<Value> {
    let rw = read_write();
    vec![
        rule(&["impersonate"], "", &["serviceaccounts"]),
        rule(
            &rw,
            "",
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], "", &["pods/eviction"]),
        rule(
            &rw,
            "",
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            &rw,
            "apps",
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(&rw, "autoscaling", &["horizontalpodautoscalers"]),
        rule(&rw, "batch", &["jobs", "cronjobs"]),
        rule(&rw, "policy", &["poddisruptionbudgets"]),
        rule(&rw, "networking.k8s.io", &["networkpolicies", "ingresses"]),
    ]
}

fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["create"],
            "authorization.k8s.io",
            &["localsubjectaccessreviews"],
        ),
        rule(
            &read_write(),
            "rbac.authorization.k8s.io",
            &["rolebindings", "roles"],
        ),
    ]
}

/// Every object kube-apiserver bootstraps that backflow serves, `ClusterRoles` first.
#[must_use]
pub fn bootstrap_objects() -> Vec<Value> {
    let to = |roles: &[&'static str]| -> Vec<(&'static str, &'static str)> {
        roles
            .iter()
            .map(|r| match *r {
                "admin" => ("rbac.authorization.k8s.io/aggregate-to-admin", "true"),
                "edit" => ("rbac.authorization.k8s.io/aggregate-to-edit", "true"),
                _ => ("rbac.authorization.k8s.io/aggregate-to-view", "true"),
            })
            .collect()
    };
    let discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    let public_urls = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![
                json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ],
        ),
        aggregated("admin", "admin", &[]),
        aggregated("edit", "edit", &to(&["admin"])),
        aggregated("view", "view", &to(&["admin", "edit"])),
        cluster_role("system:aggregate-to-admin", &to(&["admin"]), admin_rules()),
        cluster_role(
            "system:aggregate-to-edit",
            &to(&["admin", "edit"]),
            edit_rules(),
        ),
        cluster_role(
            "system:aggregate-to-view",
            &to(&["admin", "edit", "view"]),
            view_rules(),
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![json!({"nonResourceURLs": discovery_urls, "verbs": ["get"]})],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    "authentication.k8s.io",
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![json!({"nonResourceURLs": public_urls, "verbs": ["get"]})],
        ),
        binding("cluster-admin", "cluster-admin", &[super::MASTERS]),
        binding(
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}
