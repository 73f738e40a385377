//! Sanitization: the object as it should read in Git.
//!
//! A denylist, not an allowlist: everything a user can set survives (Secret `immutable`,
//! `StorageClass` `provisioner`, RBAC `rules`, fields of kinds nobody has heard of yet), and only
//! what the server or a controller writes is removed. Keeping a server-written field would make
//! the live object and the committed file disagree forever, so every apply of that file would
//! produce a commit (the "no loops" invariant); dropping a user field would lose intent.
//!
//! The rules:
//! - `status`, and server metadata (`uid`, `resourceVersion`, `generation`, `creationTimestamp`,
//!   `managedFields`, `selfLink`, `deletionTimestamp`, `deletionGracePeriodSeconds`,
//!   `ownerReferences`, `generateName`).
//! - Controller bookkeeping in labels and annotations (see [`is_bookkeeping_label`] and
//!   [`is_bookkeeping_annotation`]), keeping the keys users set on purpose (Argo CD sync waves,
//!   sync and compare options, hooks; Flux `ssa`, `prune`, `force`, `reconcile`).
//! - Per kind, fields the server allocates: Service cluster IPs, IP families and the health-check
//!   node port; the Namespace finalizer `kubernetes`; a Pod's `nodeName`.
//! - Label and annotation maps (and any map these rules emptied) become absent.
//!
//! `sanitize` is idempotent: sanitizing a sanitized object changes nothing.

use serde_json::{Map, Value};

/// Metadata fields the API server writes. None of them is user intent.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "generateName",
];

/// Label keys a controller stamps to track what it applied.
const BOOKKEEPING_LABELS: &[&str] = &[
    // backflow's own applier's ownership label (`<namespace>.<claim>`).
    backflow_api::APPLIER_LABEL,
];

/// Label prefixes that are bookkeeping as a whole.
const BOOKKEEPING_LABEL_PREFIXES: &[&str] = &["kro.run/", "applyset.kubernetes.io/"];

/// Annotation keys a controller stamps to track what it applied.
const BOOKKEEPING_ANNOTATIONS: &[&str] = &[
    // A foreign tracking id in Git makes another Argo CD Application report a shared resource.
    "argocd.argoproj.io/tracking-id",
    "argocd.argoproj.io/installation-id",
    "kcp.io/cluster",
];

/// Annotation prefixes that are bookkeeping as a whole.
const BOOKKEEPING_ANNOTATION_PREFIXES: &[&str] = &[
    // Includes kubectl.kubernetes.io/last-applied-configuration, written by client-side apply.
    "kubectl.kubernetes.io/",
    // The Deployment controller's revision counters.
    "deployment.kubernetes.io/",
    "applyset.kubernetes.io/",
    "control-plane.alpha.kubernetes.io/",
    // backflow's own applier stamps what it applied; mirroring them back would loop.
    "backflow.dev/applied-",
];

/// Flux labels and annotations that carry user intent and stay; every other key under
/// `kustomize.toolkit.fluxcd.io/` (its `name`/`namespace` ownership labels first) is bookkeeping.
const FLUX_INTENT_KEYS: &[&str] = &[
    "kustomize.toolkit.fluxcd.io/ssa",
    "kustomize.toolkit.fluxcd.io/prune",
    "kustomize.toolkit.fluxcd.io/force",
    "kustomize.toolkit.fluxcd.io/reconcile",
];

/// Whether a label is controller bookkeeping that must not reach Git.
#[must_use]
pub fn is_bookkeeping_label(key: &str) -> bool {
    BOOKKEEPING_LABELS.contains(&key)
        || BOOKKEEPING_LABEL_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
        || is_flux_bookkeeping(key)
}

fn is_flux_bookkeeping(key: &str) -> bool {
    key.starts_with("kustomize.toolkit.fluxcd.io/") && !FLUX_INTENT_KEYS.contains(&key)
}

/// Whether an annotation is controller bookkeeping that must not reach Git.
///
/// Under `argocd.argoproj.io/` only the exact tracking keys go: `sync-wave`, `sync-options`,
/// `hook` and `compare-options` are user intent.
#[must_use]
pub fn is_bookkeeping_annotation(key: &str) -> bool {
    if BOOKKEEPING_ANNOTATIONS.contains(&key)
        || BOOKKEEPING_ANNOTATION_PREFIXES
            .iter()
            .any(|p| key.starts_with(p))
    {
        return true;
    }
    is_flux_bookkeeping(key)
}

/// The object as it should read in Git. Values that are not objects are returned unchanged.
pub fn sanitize(object: &Value) -> Value {
    let mut out = object.clone();
    let Some(root) = out.as_object_mut() else {
        return out;
    };
    root.remove("status");
    if let Some(meta) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        sanitize_metadata(meta);
    }
    let api_version = root
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = root
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // Per-kind rules only apply to the core group: a CRD may reuse a kind name.
    if api_version == "v1" {
        match kind.as_str() {
            "Service" => sanitize_service(root),
            "Namespace" => sanitize_namespace(root),
            "Pod" => {
                // The scheduler picks the node; a pod written by hand has no nodeName.
                remove_in(root, "spec", "nodeName");
            }
            _ => {}
        }
    }
    out
}

fn sanitize_metadata(meta: &mut Map<String, Value>) {
    for field in SERVER_METADATA {
        meta.remove(*field);
    }
    clean_string_map(meta, "labels", is_bookkeeping_label);
    clean_string_map(meta, "annotations", is_bookkeeping_annotation);
    // Removing fields leaves the capacity of the server's metadata behind, and a snapshot keeps
    // one sanitized object per resource until it is pushed.
    backflow_api::compact::compact_map(meta);
}

/// Drops the keys of `meta[field]` that `drop` selects; an empty map becomes absent.
fn clean_string_map(meta: &mut Map<String, Value>, field: &str, drop: fn(&str) -> bool) {
    let empty = match meta.get_mut(field) {
        Some(Value::Object(map)) => {
            map.retain(|k, _| !drop(k));
            map.is_empty()
        }
        // `labels: null` reads like no labels at all.
        Some(Value::Null) => true,
        _ => false,
    };
    if empty {
        meta.remove(field);
    }
}

/// Service fields the API server allocates.
///
/// - `clusterIP`/`clusterIPs` are allocated from the service range, unless they are `None`
///   (a headless Service, which is intent).
/// - `ipFamilies` follows from the allocation; `ipFamilyPolicy` is dropped only when it is the
///   server's default `SingleStack` (`PreferDualStack` and `RequireDualStack` are chosen by a user).
/// - `healthCheckNodePort` is allocated for `externalTrafficPolicy: Local`.
/// - `ports[].nodePort` is kept: the server allocates one only when none is given, an update
///   without it keeps the allocated port, and a user who fixed a port (`30080`) means it, so
///   keeping it never loops and dropping it would lose intent.
fn sanitize_service(root: &mut Map<String, Value>) {
    let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("clusterIP").and_then(Value::as_str) != Some("None") {
        spec.remove("clusterIP");
    }
    let headless_ips = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| ips.iter().all(|ip| ip.as_str() == Some("None")) && !ips.is_empty());
    if !headless_ips {
        spec.remove("clusterIPs");
    }
    spec.remove("ipFamilies");
    if spec.get("ipFamilyPolicy").and_then(Value::as_str) == Some("SingleStack") {
        spec.remove("ipFamilyPolicy");
    }
    spec.remove("healthCheckNodePort");
    drop_if_emptied(root, "spec");
}

/// The `kubernetes` finalizer is added to every Namespace by the server.
fn sanitize_namespace(root: &mut Map<String, Value>) {
    let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::Array(finalizers)) = spec.get_mut("finalizers") {
        finalizers.retain(|f| f.as_str() != Some("kubernetes"));
        if finalizers.is_empty() {
            spec.remove("finalizers");
        }
    }
    drop_if_emptied(root, "spec");
}

fn remove_in(root: &mut Map<String, Value>, parent: &str, field: &str) {
    if let Some(map) = root.get_mut(parent).and_then(Value::as_object_mut) {
        map.remove(field);
    }
    drop_if_emptied(root, parent);
}

/// A map these rules emptied becomes absent (an empty map a user wrote elsewhere, such as
/// `emptyDir: {}`, is meaningful and stays).
fn drop_if_emptied(root: &mut Map<String, Value>, field: &str) {
    if root
        .get(field)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        root.remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argo_intent_stays_and_tracking_goes() {
        assert!(is_bookkeeping_annotation("argocd.argoproj.io/tracking-id"));
        assert!(is_bookkeeping_annotation(
            "argocd.argoproj.io/installation-id"
        ));
        assert!(!is_bookkeeping_annotation("argocd.argoproj.io/sync-wave"));
        assert!(!is_bookkeeping_annotation(
            "argocd.argoproj.io/sync-options"
        ));
        assert!(!is_bookkeeping_annotation("argocd.argoproj.io/hook"));
        assert!(!is_bookkeeping_annotation(
            "argocd.argoproj.io/compare-options"
        ));
        assert!(is_bookkeeping_annotation(
            "kubectl.kubernetes.io/last-applied-configuration"
        ));
        assert!(is_bookkeeping_annotation(
            "kubectl.kubernetes.io/restartedAt"
        ));
        assert!(is_bookkeeping_annotation("backflow.dev/applied-commit"));
        assert!(is_bookkeeping_label("backflow.dev/applier"));
        assert!(!is_bookkeeping_annotation("backflow.dev/owner"));
        assert!(is_bookkeeping_annotation(
            "kustomize.toolkit.fluxcd.io/checksum"
        ));
        assert!(!is_bookkeeping_annotation(
            "kustomize.toolkit.fluxcd.io/ssa"
        ));
        assert!(!is_bookkeeping_annotation(
            "kustomize.toolkit.fluxcd.io/reconcile"
        ));
        assert!(is_bookkeeping_label("kustomize.toolkit.fluxcd.io/name"));
        // Every other Flux label is bookkeeping too, except the user-intent keys.
        assert!(is_bookkeeping_label("kustomize.toolkit.fluxcd.io/other"));
        assert!(!is_bookkeeping_label(
            "kustomize.toolkit.fluxcd.io/reconcile"
        ));
        assert!(!is_bookkeeping_label("kustomize.toolkit.fluxcd.io/prune"));
        assert!(is_bookkeeping_label("kro.run/instance-id"));
        assert!(is_bookkeeping_label("applyset.kubernetes.io/part-of"));
        assert!(!is_bookkeeping_label("app.kubernetes.io/instance"));
    }

    #[test]
    fn sanitize_is_idempotent_and_keeps_non_objects() {
        let v = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a",
            "labels": {}}, "spec": {"clusterIP": "10.0.0.1"}, "status": {}});
        let once = sanitize(&v);
        assert_eq!(sanitize(&once), once);
        assert_eq!(
            once,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}})
        );
        assert_eq!(sanitize(&json!([1, 2])), json!([1, 2]));
    }

    #[test]
    fn a_crd_named_service_keeps_its_fields() {
        let v = json!({"apiVersion": "example.com/v1", "kind": "Service",
            "metadata": {"name": "a"}, "spec": {"clusterIP": "x"}});
        assert_eq!(sanitize(&v), v);
    }
}
