//! The built-in transformers: namespace, name prefix and suffix, labels, annotations, replicas
//! and images, over the fields kustomize's default configuration names.

use serde_json::{Value, json};

use super::KustomizeError;
use super::build::{Layer, Resource};
use super::file::{entries, string_map};

/// Kinds with no namespace (kustomize reads this from the API's schema; CRs are namespaced).
pub(super) fn cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "Node"
            | "PersistentVolume"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "CustomResourceDefinition"
            | "StorageClass"
            | "PriorityClass"
            | "IngressClass"
            | "RuntimeClass"
            | "CSIDriver"
            | "CSINode"
            | "VolumeAttachment"
            | "APIService"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
            | "PodSecurityPolicy"
            | "CertificateSigningRequest"
            | "FlowSchema"
            | "PriorityLevelConfiguration"
            | "ComponentStatus"
    )
}

/// `namespace:` — every namespaced object moves there, and a Namespace object is renamed to it.
pub(super) fn namespace(
    k: &Value,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let Some(ns) = k.get("namespace").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let Some(ns) = ns.as_str().filter(|n| !n.is_empty()) else {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("namespace is a name, found {ns}"),
        });
    };
    for r in resources {
        if r.kind() == "Namespace" {
            r.rename(ns.to_string());
        } else if !cluster_scoped(r.kind()) {
            r.set_namespace(ns);
        }
    }
    Ok(())
}

/// `namePrefix:` and `nameSuffix:` — every object but Namespaces, CRDs and `APIService`s.
pub(super) fn prefix_suffix(k: &Value, resources: &mut [Resource]) {
    let prefix = k["namePrefix"].as_str().unwrap_or("");
    let suffix = k["nameSuffix"].as_str().unwrap_or("");
    if prefix.is_empty() && suffix.is_empty() {
        return;
    }
    for r in resources {
        if matches!(
            r.kind(),
            "Namespace" | "CustomResourceDefinition" | "APIService"
        ) {
            continue;
        }
        let name = format!("{prefix}{}{suffix}", r.name());
        r.rename(name);
    }
}

/// Where a workload's pod template is, by kind.
fn template_paths(kind: &str) -> &'static [&'static str] {
    match kind {
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => &["spec/template/metadata"],
        "CronJob" => &[
            "spec/jobTemplate/metadata",
            "spec/jobTemplate/spec/template/metadata",
        ],
        _ => &[],
    }
}

/// Where a kind's label selectors are: (path, created when missing).
fn selector_paths(kind: &str, group: &str) -> Vec<(&'static str, bool)> {
    let apps = matches!(group, "apps" | "extensions");
    let mut paths = match kind {
        "Service" if group.is_empty() => vec![("spec/selector", true)],
        "ReplicationController" if group.is_empty() => vec![("spec/selector", true)],
        "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet" => {
            vec![("spec/selector/matchLabels", true)]
        }
        "Job" => vec![("spec/selector/matchLabels", false)],
        "CronJob" => vec![("spec/jobTemplate/spec/selector/matchLabels", false)],
        "PodDisruptionBudget" => vec![("spec/selector/matchLabels", false)],
        "NetworkPolicy" => vec![
            ("spec/podSelector/matchLabels", false),
            ("spec/ingress/from/podSelector/matchLabels", false),
            ("spec/egress/to/podSelector/matchLabels", false),
        ],
        _ => Vec::new(),
    };
    if apps && matches!(kind, "Deployment" | "StatefulSet") {
        for affinity in ["podAffinity", "podAntiAffinity"] {
            paths.push((
                match affinity {
                    "podAffinity" => "spec/template/spec/affinity/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
                    _ => "spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
                },
                false,
            ));
            paths.push((
                match affinity {
                    "podAffinity" => "spec/template/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
                    _ => "spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
                },
                false,
            ));
        }
        paths.push((
            "spec/template/spec/topologySpreadConstraints/labelSelector/matchLabels",
            false,
        ));
    }
    paths
}

/// Sets `pairs` in the map at `path` of `value` (lists on the way are walked into), creating
/// the map when `create` says so.
fn set_at(value: &mut Value, path: &[&str], create: bool, pairs: &[(String, String)]) {
    if let Value::Array(items) = value {
        for item in items {
            set_at(item, path, create, pairs);
        }
        return;
    }
    if value.is_null() && create {
        *value = json!({});
    }
    let Some((first, rest)) = path.split_first() else {
        if let Some(map) = value.as_object_mut() {
            for (k, v) in pairs {
                map.insert(k.clone(), json!(v));
            }
        }
        return;
    };
    let Some(map) = value.as_object_mut() else {
        return;
    };
    if !map.contains_key(*first) {
        if !create {
            return;
        }
        map.insert((*first).to_string(), Value::Null);
    }
    if let Some(next) = map.get_mut(*first) {
        set_at(next, rest, create, pairs);
    }
}

fn split(path: &str) -> Vec<&str> {
    path.split('/').collect()
}

/// Where `pairs` go on one object.
struct LabelScope {
    selectors: bool,
    templates: bool,
}

fn apply_labels(r: &mut Resource, pairs: &[(String, String)], scope: &LabelScope) {
    if pairs.is_empty() {
        return;
    }
    let kind = r.kind().to_string();
    let group = r.group().to_string();
    set_at(&mut r.value, &["metadata", "labels"], true, pairs);
    if scope.templates {
        for path in template_paths(&kind) {
            let mut p = split(path);
            p.push("labels");
            set_at(&mut r.value, &p, true, pairs);
        }
        if kind == "StatefulSet" && scope.selectors {
            set_at(
                &mut r.value,
                &["spec", "volumeClaimTemplates", "metadata", "labels"],
                true,
                pairs,
            );
        }
    }
    if scope.selectors {
        for (path, create) in selector_paths(&kind, &group) {
            set_at(&mut r.value, &split(path), create, pairs);
        }
    }
}

/// `commonLabels:` (metadata, selectors and templates) and `labels:` (metadata; selectors with
/// `includeSelectors`, templates with `includeTemplates` or `includeSelectors`).
pub(super) fn labels(
    k: &Value,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let common = string_map(k.get("commonLabels"), "commonLabels", file)?;
    let everywhere = LabelScope {
        selectors: true,
        templates: true,
    };
    for r in resources.iter_mut() {
        apply_labels(r, &common, &everywhere);
    }
    for entry in entries(k, "labels", file)? {
        let pairs = string_map(entry.get("pairs"), "labels.pairs", file)?;
        let selectors = entry["includeSelectors"].as_bool().unwrap_or(false);
        let scope = LabelScope {
            selectors,
            templates: selectors || entry["includeTemplates"].as_bool().unwrap_or(false),
        };
        for r in resources.iter_mut() {
            apply_labels(r, &pairs, &scope);
        }
    }
    Ok(())
}

/// `commonAnnotations:` — metadata and pod templates.
pub(super) fn annotations(
    k: &Value,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let pairs = string_map(k.get("commonAnnotations"), "commonAnnotations", file)?;
    if pairs.is_empty() {
        return Ok(());
    }
    for r in resources {
        let kind = r.kind().to_string();
        set_at(&mut r.value, &["metadata", "annotations"], true, &pairs);
        for path in template_paths(&kind) {
            let mut p = split(path);
            p.push("annotations");
            set_at(&mut r.value, &p, true, &pairs);
        }
    }
    Ok(())
}

/// `replicas:` — `spec.replicas` of the workloads of that name.
pub(super) fn replicas(
    k: &Value,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    for (index, entry) in entries(k, "replicas", file)?.iter().enumerate() {
        let (Some(name), Some(count)) = (entry["name"].as_str(), entry["count"].as_i64()) else {
            return Err(KustomizeError::Invalid {
                file: file.to_string(),
                reason: format!("a replicas entry has a name and a count, found {entry}"),
            });
        };
        for r in resources.iter_mut().filter(|r| r.was_called(name)) {
            if matches!(
                r.kind(),
                "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController"
            ) {
                let Some(spec) =
                    super::build::field_mut(&mut r.value, &["spec"]).and_then(Value::as_object_mut)
                else {
                    continue;
                };
                spec.insert("replicas".into(), json!(count));
                r.layers.push(Layer::Replicas {
                    kustomization: file.to_string(),
                    entry: index,
                });
            }
        }
    }
    Ok(())
}

/// An image reference split as kustomize splits it.
pub(super) struct ImageRef<'a> {
    pub name: &'a str,
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

pub(super) fn parse_image(image: &str) -> ImageRef<'_> {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    match rest[slash..].rfind(':') {
        Some(i) => ImageRef {
            name: &rest[..slash + i],
            tag: Some(&rest[slash + i + 1..]),
            digest,
        },
        None => ImageRef {
            name: rest,
            tag: None,
            digest,
        },
    }
}

/// `images:` — every container and init container whose image has that name.
pub(super) fn images(
    k: &Value,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let wanted = entries(k, "images", file)?;
    if wanted.is_empty() {
        return Ok(());
    }
    for r in resources {
        for pod in [
            "spec",
            "spec/template/spec",
            "spec/jobTemplate/spec/template/spec",
        ] {
            for list in ["containers", "initContainers"] {
                let pointer = format!("/{pod}/{list}");
                let Some(Value::Array(containers)) = r.value.pointer_mut(&pointer) else {
                    continue;
                };
                for (n, c) in containers.iter_mut().enumerate() {
                    let Some(image) = c["image"].as_str() else {
                        continue;
                    };
                    if let Some((entry, changed)) = retag(image, wanted) {
                        c["image"] = json!(changed);
                        r.layers.push(Layer::Image {
                            kustomization: file.to_string(),
                            entry,
                            container: format!("{pointer}/{n}"),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// `image` after every `images:` entry, in order, as kustomize runs one transformer per
/// entry (an entry may rename the image another one then retags), with the last entry that
/// changed it; `None` when no entry names it.
fn retag(image: &str, wanted: &[Value]) -> Option<(usize, String)> {
    let mut current = image.to_string();
    let mut last = None;
    for (index, entry) in wanted.iter().enumerate() {
        if let Some(changed) = retag_one(&current, entry) {
            current = changed;
            last = Some(index);
        }
    }
    last.map(|index| (index, current))
}

/// `image` as one `images:` entry says, when it names it.
fn retag_one(image: &str, entry: &Value) -> Option<String> {
    let parsed = parse_image(image);
    if entry["name"].as_str() != Some(parsed.name) {
        return None;
    }
    let name = entry["newName"].as_str().unwrap_or(parsed.name);
    let new_tag = match &entry["newTag"] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    if let Some(digest) = entry["digest"].as_str() {
        return Some(format!("{name}@{digest}"));
    }
    if let Some(tag) = new_tag {
        return Some(format!("{name}:{tag}"));
    }
    let mut out = name.to_string();
    if let Some(tag) = parsed.tag {
        out = format!("{out}:{tag}");
    }
    if let Some(digest) = parsed.digest {
        out = format!("{out}@{digest}");
    }
    Some(out)
}
