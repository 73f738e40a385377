//! `OpenAPI` v3 for every served kind: what kubectl's default (server-side) validation and
//! `kubectl explain` read.
//!
//! Each group-version document lists one `patch` operation per resource advertising the
//! `fieldValidation` parameter, which tells kubectl to let the server validate. Every kind with a
//! schema — each built-in (generated from k8s-openapi's, see [`builtin`]) and each CRD with an
//! `openAPIV3Schema` — is under `components.schemas`, tagged with its group-version-kind, with
//! every schema it refers to, so `kubectl explain` of any field works.
//!
//! The patch operations advertise no strategic-merge-patch body on purpose: kubectl then builds
//! its client-side apply patches from its compiled-in types (which know each list's merge key),
//! as it did before these schemas were published.

mod builtin;

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
    let own = OwnParts::of(reg, group, version)?;
    let mut schemas = own.builtins.map(|b| b.schemas.clone()).unwrap_or_default();
    for (name, gvk) in own.builtin_kinds {
        if let Some(Value::Object(m)) = schemas.get_mut(&name) {
            m.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        }
    }
    schemas.extend(own.custom_schemas);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": own.paths,
        "components": {"schemas": schemas},
    }))
}

/// What a group-version's document holds beyond the built-in schemas, which are the same for
/// the whole process: hashed on its own, the index need not build every document.
struct OwnParts {
    builtins: Option<&'static builtin::GroupVersionSchemas>,
    paths: Map<String, Value>,
    /// Built-in kinds served here, by schema name, with their group-version-kind.
    builtin_kinds: Vec<(String, Value)>,
    /// Custom resources' schemas, with the `ObjectMeta` schemas they refer to.
    custom_schemas: Map<String, Value>,
}

impl OwnParts {
    fn of(reg: &Registry, group: &str, version: &str) -> Option<Self> {
        if !reg.has_group_version(group, version) {
            return None;
        }
        let builtins = builtin::schemas_for(group, version);
        let mut own = Self {
            builtins,
            paths: Map::new(),
            builtin_kinds: Vec::new(),
            custom_schemas: Map::new(),
        };
        for t in reg
            .all()
            .filter(|t| t.group == group && t.version == version)
        {
            own.paths
                .insert(resource_path(t), json!({"patch": patch_operation(t)}));
            if let Some(schema) = &t.schema {
                let custom = custom_schema(t, schema, &mut own.custom_schemas);
                own.custom_schemas.insert(schema_name(t), custom);
            } else if let Some(name) = builtins.and_then(|b| b.kinds.get(&t.kind)) {
                own.builtin_kinds.push((name.clone(), gvk(t)));
            }
        }
        Some(own)
    }

    /// A hash of the whole document.
    fn hash(&self) -> String {
        content_hash(&json!({
            "builtins": self.builtins.map(|b| b.hash.as_str()),
            "paths": self.paths,
            "builtin_kinds": self.builtin_kinds.iter().map(|(n, g)| json!([n, g])).collect::<Vec<_>>(),
            "custom": self.custom_schemas,
        }))
    }
}

/// The `patch` operation of a resource: it tells kubectl the server validates fields.
fn patch_operation(t: &ResourceType) -> Value {
    json!({
        "x-kubernetes-group-version-kind": gvk(t),
        "x-kubernetes-action": "patch",
        "parameters": [
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
        ],
        "responses": {"200": {"description": "OK"}},
    })
}

/// A custom resource's schema as kube-apiserver publishes it: the CRD's, tagged with its
/// group-version-kind, with `apiVersion` and `kind` described and `metadata` as `ObjectMeta`
/// (whose schemas join the document's).
fn custom_schema(t: &ResourceType, schema: &Value, schemas: &mut Map<String, Value>) -> Value {
    let mut s = schema.clone();
    let Some(m) = s.as_object_mut() else {
        return s;
    };
    m.insert("x-kubernetes-group-version-kind".into(), json!([gvk(t)]));
    m.entry("description").or_insert_with(|| {
        json!(format!(
            "{} is a custom resource of {}.",
            t.kind,
            t.api_version()
        ))
    });
    let (meta_name, meta_schemas) = builtin::object_meta();
    for (name, meta_schema) in meta_schemas {
        schemas
            .entry(name.clone())
            .or_insert_with(|| meta_schema.clone());
    }
    let props = m.entry("properties").or_insert_with(|| json!({}));
    if let Some(p) = props.as_object_mut() {
        p.entry("apiVersion").or_insert_with(|| json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
        p.entry("kind").or_insert_with(|| json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
        p.insert(
            "metadata".into(),
            json!({
                "allOf": [{"$ref": format!("#/components/schemas/{meta_name}")}],
                "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            }),
        );
    }
    s
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
            if let Some(own) = OwnParts::of(reg, &group, &version) {
                let key = group_version_path(&group, &version);
                let url = format!("/openapi/v3/{key}?hash={}", own.hash());
                paths.insert(key, json!({"serverRelativeURL": url}));
            }
        }
    }
    json!({"paths": paths})
}

/// The `OpenAPI` v2 (Swagger) document at `/openapi/v2` as JSON: every group-version's schemas
/// under `definitions` and its patch operations under `paths`, in v2's shape (references under
/// `#/definitions/`, beside their description rather than under `allOf`, no `nullable`).
#[must_use]
pub fn swagger(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for (group, versions) in reg.groups() {
        for version in versions {
            let Some(Value::Object(mut doc)) = document(reg, &group, &version) else {
                continue;
            };
            if let Some(Value::Object(p)) = doc.remove("paths") {
                paths.extend(p.into_iter().map(|(path, mut op)| {
                    to_v2(&mut op);
                    (path, op)
                }));
            }
            if let Some(Value::Object(schemas)) = doc
                .remove("components")
                .and_then(|mut c| c.get_mut("schemas").map(Value::take))
            {
                for (name, mut schema) in schemas {
                    to_v2(&mut schema);
                    definitions.entry(name).or_insert(schema);
                }
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Rewrites a v3 schema or operation in v2's shape, in place.
fn to_v2(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("nullable");
            let lone_ref = match m.get("allOf") {
                Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref").cloned(),
                _ => None,
            };
            if let Some(reference) = lone_ref {
                m.remove("allOf");
                m.insert("$ref".into(), reference);
            }
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/definitions/{name}");
            }
            // A v3 parameter's type sits under `schema`; v2 puts it on the parameter.
            if m.get("in").is_some_and(Value::is_string)
                && let Some(Value::Object(schema)) = m.remove("schema")
            {
                m.extend(schema);
            }
            m.values_mut().for_each(to_v2);
        }
        Value::Array(items) => items.iter_mut().for_each(to_v2),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn references(v: &Value) -> Vec<String> {
        let text = v.to_string();
        text.split("\"$ref\":\"")
            .skip(1)
            .filter_map(|r| r.split('"').next().map(str::to_string))
            .collect()
    }

    #[test]
    fn every_v3_document_tags_each_kind_and_resolves_its_references() {
        let reg = Registry::builtin();
        for (group, versions) in reg.groups() {
            for version in versions {
                let doc = document(&reg, &group, &version).expect("served group-version");
                let schemas = &doc["components"]["schemas"];
                for reference in references(&doc) {
                    let name = reference
                        .strip_prefix("#/components/schemas/")
                        .unwrap_or_else(|| panic!("{reference} outside the document"));
                    assert!(schemas.get(name).is_some(), "dangling {reference}");
                }
                let tagged = schemas
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, s)| s.get("x-kubernetes-group-version-kind").is_some())
                    .count();
                let kinds = reg
                    .all()
                    .filter(|t| t.group == group && t.version == version)
                    .count();
                assert_eq!(tagged, kinds, "{group}/{version}");
            }
        }
    }

    #[test]
    fn the_v2_document_has_every_definition_in_v2_shape() {
        let swagger = swagger(&Registry::builtin());
        let definitions = &swagger["definitions"];
        for reference in references(&swagger) {
            let name = reference
                .strip_prefix("#/definitions/")
                .unwrap_or_else(|| panic!("{reference} is not a v2 reference"));
            assert!(definitions.get(name).is_some(), "dangling {reference}");
        }
        let deployment = &definitions["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        assert_eq!(
            deployment["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(!swagger.to_string().contains("\"allOf\":[{\"$ref\""));
        let parameter = &swagger["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
            ["patch"]["parameters"][0];
        assert_eq!(parameter["name"], "fieldValidation");
        assert_eq!(parameter["type"], "string");
    }
}
