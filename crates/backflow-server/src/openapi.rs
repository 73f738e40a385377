//! A minimal `OpenAPI` v3: enough for kubectl's default (server-side) validation and `kubectl explain`.
//!
//! Each group-version document lists one `patch` operation per resource advertising the
//! `fieldValidation` parameter, which tells kubectl to let the server validate. Kinds with a schema
//! (CRDs with `openAPIV3Schema`) also get it under `components.schemas`, tagged with their
//! group-version-kind, so `kubectl explain` works for them.

use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceType};

/// The path key of a group-version in the index (`api/v1`, `apis/apps/v1`).
#[must_use]
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn resource_path(t: &ResourceType) -> String {
    let prefix = if t.group.is_empty() {
        format!("/api/{}", t.version)
    } else {
        format!("/apis/{}/{}", t.group, t.version)
    };
    if t.namespaced() {
        format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
    } else {
        format!("{prefix}/{}/{{name}}", t.plural)
    }
}

/// The schema name Kubernetes uses: reversed group, version, kind (`com.example.v1.Widget`).
fn schema_name(t: &ResourceType) -> String {
    let mut group: Vec<&str> = t.group.split('.').collect();
    group.reverse();
    format!("{}.{}.{}", group.join("."), t.version, t.kind)
}

fn gvk(t: &ResourceType) -> Value {
    json!({"group": t.group, "version": t.version, "kind": t.kind})
}

/// The document for one group-version, or `None` if the registry has no such group-version.
#[must_use]
pub fn document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.has_group_version(group, version) {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for t in reg
        .all()
        .filter(|t| t.group == group && t.version == version)
    {
        let op = json!({
            "x-kubernetes-group-version-kind": gvk(t),
            "x-kubernetes-action": "patch",
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(resource_path(t), json!({"patch": op}));
        if let Some(schema) = &t.schema {
            let mut s = schema.clone();
            if let Some(m) = s.as_object_mut() {
                m.insert("x-kubernetes-group-version-kind".into(), json!([gvk(t)]));
                m.entry("description").or_insert_with(|| {
                    json!(format!(
                        "{} is a custom resource of {}.",
                        t.kind,
                        t.api_version()
                    ))
                });
                let props = m.entry("properties").or_insert_with(|| json!({}));
                if let Some(p) = props.as_object_mut() {
                    p.entry("apiVersion").or_insert_with(|| json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
                    p.entry("kind").or_insert_with(|| json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
                    p.entry("metadata").or_insert_with(
                        || json!({"type": "object", "description": "Standard object's metadata."}),
                    );
                }
            }
            schemas.insert(schema_name(t), s);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A short, stable content hash for cache-busting URLs (FNV-1a, 64 bits).
#[must_use]
pub fn content_hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// The index at `/openapi/v3`.
#[must_use]
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in reg.groups() {
        for version in versions {
            if let Some(doc) = document(reg, &group, &version) {
                let key = group_version_path(&group, &version);
                let url = format!("/openapi/v3/{key}?hash={}", content_hash(&doc));
                paths.insert(key, json!({"serverRelativeURL": url}));
            }
        }
    }
    json!({"paths": paths})
}
