//! `CustomResourceDefinitions`: validation, the status the server reports, and the types they add.

use serde_json::{Value, json};

use crate::error::Cause;
use crate::registry::{KindBehavior, ResourceType, ScalePaths, Scope};
use crate::validation::{is_dns_label, is_dns_subdomain};

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks a CRD as the API server would; the causes name each broken field.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let group = str_at(crd, "/spec/group").unwrap_or("");
    let plural = str_at(crd, "/spec/names/plural").unwrap_or("");
    let kind = str_at(crd, "/spec/names/kind").unwrap_or("");
    let name = str_at(crd, "/metadata/name").unwrap_or("");
    if group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !is_dns_subdomain(group) || !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural"));
    } else if !is_dns_label(plural) {
        causes.push(Cause::invalid(
            "spec.names.plural",
            plural,
            "a lowercase RFC 1123 label is required",
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::required("spec.names.kind"));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match str_at(crd, "/spec/scope") {
        Some("Namespaced" | "Cluster") => {}
        Some(other) => causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "spec.scope".into(),
            message: format!(
                "Unsupported value: {}: supported values: \"Cluster\", \"Namespaced\"",
                json!(other)
            ),
        }),
        None => causes.push(Cause::required("spec.scope")),
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::required("spec.versions"));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push(Cause::invalid(
            "spec.versions",
            &format!("{storage} storage versions"),
            "must have exactly one version marked as storage version",
        ));
    }
    causes.extend(version_errors(&versions));
    causes.extend(rule_compile_errors(&versions));
    causes
}

/// Each version's name and `served`.
fn version_errors(versions: &[Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        match v.get("name").and_then(Value::as_str) {
            Some(n) if is_dns_label(n) => {}
            Some(n) => causes.push(Cause::invalid(
                format!("spec.versions[{i}].name"),
                n,
                "a DNS-1035 label is required",
            )),
            None => causes.push(Cause::required(format!("spec.versions[{i}].name"))),
        }
        if v.get("served").and_then(Value::as_bool).is_none() {
            causes.push(Cause::required(format!("spec.versions[{i}].served")));
        }
    }
    causes
}

/// The CEL rules of every version's schema that do not compile. A schema all versions share
/// is named as kube-apiserver names it (`spec.validation.openAPIV3Schema`), each version's
/// own otherwise.
fn rule_compile_errors(versions: &[Value]) -> Vec<Cause> {
    let schema = |v: &Value| v.pointer("/schema/openAPIV3Schema").cloned();
    let shared = versions
        .first()
        .and_then(schema)
        .filter(|first| versions.iter().all(|v| schema(v).as_ref() == Some(first)));
    if let Some(shared) = shared {
        return crate::cel_rules::compile_errors(&shared, "spec.validation.openAPIV3Schema");
    }
    versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, schema(v)?)))
        .flat_map(|(i, s)| {
            let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
            crate::cel_rules::compile_errors(&s, &at)
        })
        .collect()
}

/// Fields the server fills in on a CRD (`listKind`, `singular`) and the status it reports.
pub fn complete(crd: &mut Value) {
    let kind = str_at(crd, "/spec/names/kind").unwrap_or("").to_string();
    if let Some(names) = crd
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_ascii_lowercase()));
    }
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let stored: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut stored_versions = strings_at(crd, "/status/storedVersions");
    for v in stored {
        if !stored_versions.contains(&v) {
            stored_versions.push(v);
        }
    }
    let now = crd
        .pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(json!(null));
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored_versions,
    });
}

/// The resource types a (valid) CRD serves: one per served version.
pub fn resource_types(crd: &Value) -> Vec<ResourceType> {
    let group = str_at(crd, "/spec/group").unwrap_or("").to_string();
    let plural = str_at(crd, "/spec/names/plural").unwrap_or("").to_string();
    let kind = str_at(crd, "/spec/names/kind").unwrap_or("").to_string();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return vec![];
    }
    let singular = str_at(crd, "/spec/names/singular")
        .map_or_else(|| kind.to_ascii_lowercase(), str::to_string);
    let list_kind =
        str_at(crd, "/spec/names/listKind").map_or_else(|| format!("{kind}List"), str::to_string);
    let scope = if str_at(crd, "/spec/scope") == Some("Cluster") {
        Scope::Cluster
    } else {
        Scope::Namespaced
    };
    let short_names = strings_at(crd, "/spec/names/shortNames");
    let categories = strings_at(crd, "/spec/names/categories");
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| {
            let version = v.get("name")?.as_str()?.to_string();
            let sub = v
                .get("subresources")
                .or_else(|| crd.pointer("/spec/subresources"));
            let scale = sub.and_then(|s| s.get("scale")).map(|s| ScalePaths {
                spec_replicas: s
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .into(),
                status_replicas: s
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .into(),
                label_selector: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
            Some(ResourceType {
                group: group.clone(),
                version,
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                list_kind: list_kind.clone(),
                scope,
                short_names: short_names.clone(),
                categories: categories.clone(),
                status_subresource: sub.and_then(|s| s.get("status")).is_some(),
                scale,
                storage_version: v.get("storage").and_then(Value::as_bool) == Some(true),
                custom: true,
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                behavior: KindBehavior::Plain,
                tracks_generation: true,
            })
        })
        .collect()
}
