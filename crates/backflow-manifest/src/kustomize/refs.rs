//! References to renamed objects rewritten after the build, as kustomize's name-reference
//! pass does: a Deployment's `configMapRef` to `cfg` follows the `ConfigMap` to `prod-cfg-7d9…`.

use serde_json::Value;

use super::build::Resource;
use super::transform::cluster_scoped;

/// Where a pod spec is, by kind.
fn pod_specs(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &["spec"],
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => &["spec/template/spec"],
        "CronJob" => &["spec/jobTemplate/spec/template/spec"],
        _ => &[],
    }
}

/// One reference: the kind it names, and where its name is in the referring object (lists
/// on the way are walked into).
struct Reference {
    target: &'static str,
    path: &'static str,
}

const fn to(target: &'static str, path: &'static str) -> Reference {
    Reference { target, path }
}

/// The references inside a pod spec.
const POD_REFERENCES: [Reference; 14] = [
    to("ConfigMap", "volumes/configMap/name"),
    to("ConfigMap", "volumes/projected/sources/configMap/name"),
    to("Secret", "volumes/secret/secretName"),
    to("Secret", "volumes/projected/sources/secret/name"),
    to(
        "PersistentVolumeClaim",
        "volumes/persistentVolumeClaim/claimName",
    ),
    to("ConfigMap", "containers/env/valueFrom/configMapKeyRef/name"),
    to(
        "ConfigMap",
        "initContainers/env/valueFrom/configMapKeyRef/name",
    ),
    to("ConfigMap", "containers/envFrom/configMapRef/name"),
    to("ConfigMap", "initContainers/envFrom/configMapRef/name"),
    to("Secret", "containers/env/valueFrom/secretKeyRef/name"),
    to("Secret", "initContainers/env/valueFrom/secretKeyRef/name"),
    to("Secret", "containers/envFrom/secretRef/name"),
    to("Secret", "initContainers/envFrom/secretRef/name"),
    to("Secret", "imagePullSecrets/name"),
];

/// The references of objects other than pod specs, by the referring kind.
fn other_references(kind: &str) -> &'static [Reference] {
    const INGRESS: [Reference; 3] = [
        to("Service", "spec/rules/http/paths/backend/service/name"),
        to("Service", "spec/defaultBackend/service/name"),
        to("Secret", "spec/tls/secretName"),
    ];
    const SERVICE_ACCOUNT: [Reference; 2] = [
        to("Secret", "secrets/name"),
        to("Secret", "imagePullSecrets/name"),
    ];
    const STATEFUL_SET: [Reference; 1] = [to("Service", "spec/serviceName")];
    const CLAIM: [Reference; 1] = [to("StorageClass", "spec/storageClassName")];
    match kind {
        "Ingress" => &INGRESS,
        "ServiceAccount" => &SERVICE_ACCOUNT,
        "StatefulSet" => &STATEFUL_SET,
        "PersistentVolumeClaim" => &CLAIM,
        _ => &[],
    }
}

/// Names in `value` at `path` (walking lists), each handed to `f`.
fn each_at<'v>(value: &'v mut Value, path: &[&str], f: &mut dyn FnMut(&mut Value)) {
    if let Value::Array(items) = value {
        for item in items {
            each_at(item, path, f);
        }
        return;
    }
    match path.split_first() {
        None => f(value),
        Some((first, rest)) => {
            if let Some(next) = value.get_mut(*first) {
                each_at(next, rest, f);
            }
        }
    }
}

/// What the objects are called now, for looking references up.
struct Renamed {
    kind: String,
    names: Vec<String>,
    namespaces: Vec<String>,
    now: String,
    namespace: String,
}

/// The namespaces `r` was in: no namespace is `default`, as on a cluster.
fn namespaces_of(r: &Resource) -> Vec<String> {
    r.previous_namespaces
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(r.namespace()))
        .map(|ns| if ns.is_empty() { "default" } else { ns }.to_string())
        .collect()
}

impl Renamed {
    fn of(r: &Resource) -> Self {
        let mut names = r.previous_names.clone();
        names.push(r.name().to_string());
        let namespaces = namespaces_of(r);
        Self {
            kind: r.kind().to_string(),
            names,
            namespaces,
            now: r.name().to_string(),
            namespace: r.namespace().to_string(),
        }
    }
}

/// The object of `kind` a reference `name` from namespaces `from` means, once renamed.
fn resolve<'a>(
    renamed: &'a [Renamed],
    kind: &str,
    name: &str,
    from: &[String],
) -> Option<&'a Renamed> {
    let reachable: Vec<&Renamed> = renamed
        .iter()
        .filter(|r| r.kind == kind && r.names.iter().any(|n| n == name))
        .filter(|r| cluster_scoped(kind) || r.namespaces.iter().any(|ns| from.contains(ns)))
        .collect();
    match reachable.as_slice() {
        [one] => Some(one),
        many => many.iter().copied().find(|r| {
            from.last().map(String::as_str)
                == Some(if r.namespace.is_empty() {
                    "default"
                } else {
                    &r.namespace
                })
        }),
    }
}

/// Rewrites every known reference to an object the build renamed.
pub(super) fn fix_references(resources: &mut [Resource]) {
    let renamed: Vec<Renamed> = resources.iter().map(Renamed::of).collect();
    for r in resources.iter_mut() {
        let kind = r.kind().to_string();
        let from = namespaces_of(r);
        let fix = |value: &mut Value, target: &str| {
            each_at_path(value, target, &renamed, &from);
        };
        for spec in pod_specs(&kind) {
            for reference in &POD_REFERENCES {
                let path = format!("{spec}/{}", reference.path);
                fix_path(&mut r.value, &path, reference.target, &renamed, &from);
            }
            let sa = format!("{spec}/serviceAccountName");
            fix_path(&mut r.value, &sa, "ServiceAccount", &renamed, &from);
            let priority = format!("{spec}/priorityClassName");
            fix_path(&mut r.value, &priority, "PriorityClass", &renamed, &from);
        }
        for reference in other_references(&kind) {
            fix_path(
                &mut r.value,
                reference.path,
                reference.target,
                &renamed,
                &from,
            );
        }
        if kind == "HorizontalPodAutoscaler"
            && let Some(holder) = super::build::field_mut(&mut r.value, &["spec", "scaleTargetRef"])
        {
            let target = holder["kind"].as_str().unwrap_or("").to_string();
            fix(holder, &target);
        }
        if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
            if let Some(holder) = super::build::field_mut(&mut r.value, &["roleRef"]) {
                let role = holder["kind"].as_str().unwrap_or("").to_string();
                fix(holder, &role);
            }
            subjects(&mut r.value, &renamed, &from);
        }
    }
}

/// The reference in `holder`'s `name` to an object of kind `target`.
fn each_at_path(holder: &mut Value, target: &str, renamed: &[Renamed], from: &[String]) {
    if let Some(name) = holder.get("name").and_then(Value::as_str)
        && let Some(found) = resolve(renamed, target, name, from)
    {
        holder["name"] = Value::String(found.now.clone());
    }
}

fn fix_path(value: &mut Value, path: &str, target: &str, renamed: &[Renamed], from: &[String]) {
    let segments: Vec<&str> = path.split('/').collect();
    each_at(value, &segments, &mut |v: &mut Value| {
        if let Some(name) = v.as_str()
            && let Some(found) = resolve(renamed, target, name, from)
        {
            *v = Value::String(found.now.clone());
        }
    });
}

/// A binding's `ServiceAccount` subjects follow the account's name and namespace.
fn subjects(binding: &mut Value, renamed: &[Renamed], from: &[String]) {
    let Some(list) = binding.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for s in list.iter_mut().filter(|s| s["kind"] == "ServiceAccount") {
        let name = s["name"].as_str().unwrap_or("").to_string();
        let namespaces: Vec<String> = match s["namespace"].as_str() {
            Some(ns) => vec![ns.to_string()],
            None => from.to_vec(),
        };
        let found = renamed.iter().find(|r| {
            r.kind == "ServiceAccount"
                && r.names.contains(&name)
                && r.namespaces.iter().any(|ns| namespaces.contains(ns))
        });
        if let Some(found) = found {
            s["name"] = Value::String(found.now.clone());
            if !found.namespace.is_empty() {
                s["namespace"] = Value::String(found.namespace.clone());
            }
        }
    }
}
