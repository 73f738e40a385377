//! The schemas of the built-in kinds, generated from k8s-openapi's (which it generates from
//! Kubernetes' own `OpenAPI` definitions): descriptions, types, formats and required fields as
//! kube-apiserver publishes them, under the same names (`io.k8s.api.apps.v1.Deployment`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v1 as autoscaling_v1, autoscaling::v2 as autoscaling_v2, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, events::v1 as events,
    networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value};

/// Schemas by name (`io.k8s.api.apps.v1.Deployment`), as a document's `components.schemas`.
pub(super) type Schemas = Map<String, Value>;

/// The built-in kinds of one group-version: every schema they need, and each kind's own.
pub(super) struct GroupVersionSchemas {
    /// The kinds' schemas and every schema they refer to.
    pub(super) schemas: Schemas,
    /// Each kind's schema name.
    pub(super) kinds: BTreeMap<String, String>,
    /// A hash of the schemas, for the index's cache-busting URLs.
    pub(super) hash: String,
}

/// The schemas of one group-version's built-in kinds, built once per process.
pub(super) fn schemas_for(group: &str, version: &str) -> Option<&'static GroupVersionSchemas> {
    static BY_GROUP_VERSION: OnceLock<BTreeMap<String, GroupVersionSchemas>> = OnceLock::new();
    BY_GROUP_VERSION
        .get_or_init(generate_all)
        .get(&super::group_version_path(group, version))
}

/// `ObjectMeta`'s schema name and the schemas it needs, for custom resources' `metadata`.
pub(super) fn object_meta() -> &'static (String, Schemas) {
    static OBJECT_META: OnceLock<(String, Schemas)> = OnceLock::new();
    OBJECT_META.get_or_init(|| {
        let mut generator = generator();
        generator.subschema_for::<ObjectMeta>();
        (
            ObjectMeta::schema_name().into_owned(),
            generator.take_definitions(true),
        )
    })
}

fn generator() -> SchemaGenerator {
    SchemaGenerator::new(SchemaSettings::openapi3())
}

fn generate_all() -> BTreeMap<String, GroupVersionSchemas> {
    let mut by_group_version: BTreeMap<String, (SchemaGenerator, BTreeMap<String, String>)> =
        BTreeMap::new();
    for t in crate::builtin::types() {
        let (generator, kinds) = by_group_version
            .entry(super::group_version_path(&t.group, &t.version))
            .or_insert_with(|| (generator(), BTreeMap::new()));
        if let Some(name) = add_kind(generator, &t.group, &t.version, &t.kind) {
            kinds.insert(t.kind.clone(), name);
        } else {
            tracing::warn!(
                kind = %t.kind,
                api_version = %t.api_version(),
                "no OpenAPI schema for this built-in kind"
            );
        }
    }
    by_group_version
        .into_iter()
        .map(|(key, (mut generator, kinds))| {
            let schemas = generator.take_definitions(true);
            let hash = super::content_hash(&Value::Object(schemas.clone()));
            (
                key,
                GroupVersionSchemas {
                    schemas,
                    kinds,
                    hash,
                },
            )
        })
        .collect()
}

/// Adds a kind's schema (and those it refers to) to the generator; its schema name.
fn add_kind(
    generator: &mut SchemaGenerator,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<String> {
    fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
        generator.subschema_for::<T>();
        T::schema_name().into_owned()
    }
    let name = match (group, version, kind) {
        ("", "v1", "Namespace") => add::<core::Namespace>(generator),
        ("", "v1", "ConfigMap") => add::<core::ConfigMap>(generator),
        ("", "v1", "Secret") => add::<core::Secret>(generator),
        ("", "v1", "Service") => add::<core::Service>(generator),
        ("", "v1", "ServiceAccount") => add::<core::ServiceAccount>(generator),
        ("", "v1", "Event") => add::<core::Event>(generator),
        ("events.k8s.io", "v1", "Event") => add::<events::Event>(generator),
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => {
            add::<authorization::SelfSubjectAccessReview>(generator)
        }
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => {
            add::<authorization::SelfSubjectRulesReview>(generator)
        }
        ("authorization.k8s.io", "v1", "SubjectAccessReview") => {
            add::<authorization::SubjectAccessReview>(generator)
        }
        ("authorization.k8s.io", "v1", "LocalSubjectAccessReview") => {
            add::<authorization::LocalSubjectAccessReview>(generator)
        }
        ("authentication.k8s.io", "v1", "SelfSubjectReview") => {
            add::<authentication::SelfSubjectReview>(generator)
        }
        ("", "v1", "Pod") => add::<core::Pod>(generator),
        ("", "v1", "PersistentVolumeClaim") => add::<core::PersistentVolumeClaim>(generator),
        ("", "v1", "Endpoints") => add::<core::Endpoints>(generator),
        ("", "v1", "ResourceQuota") => add::<core::ResourceQuota>(generator),
        ("", "v1", "LimitRange") => add::<core::LimitRange>(generator),
        ("apps", "v1", "Deployment") => add::<apps::Deployment>(generator),
        ("apps", "v1", "StatefulSet") => add::<apps::StatefulSet>(generator),
        ("apps", "v1", "DaemonSet") => add::<apps::DaemonSet>(generator),
        ("apps", "v1", "ReplicaSet") => add::<apps::ReplicaSet>(generator),
        ("apps", "v1", "ControllerRevision") => add::<apps::ControllerRevision>(generator),
        ("batch", "v1", "Job") => add::<batch::Job>(generator),
        ("batch", "v1", "CronJob") => add::<batch::CronJob>(generator),
        ("rbac.authorization.k8s.io", "v1", "Role") => add::<rbac::Role>(generator),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => add::<rbac::RoleBinding>(generator),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => add::<rbac::ClusterRole>(generator),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            add::<rbac::ClusterRoleBinding>(generator)
        }
        ("networking.k8s.io", "v1", "Ingress") => add::<networking::Ingress>(generator),
        ("networking.k8s.io", "v1", "NetworkPolicy") => add::<networking::NetworkPolicy>(generator),
        ("networking.k8s.io", "v1", "IngressClass") => add::<networking::IngressClass>(generator),
        ("coordination.k8s.io", "v1", "Lease") => add::<coordination::Lease>(generator),
        ("policy", "v1", "PodDisruptionBudget") => add::<policy::PodDisruptionBudget>(generator),
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            add::<autoscaling_v1::HorizontalPodAutoscaler>(generator)
        }
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => {
            add::<autoscaling_v2::HorizontalPodAutoscaler>(generator)
        }
        ("storage.k8s.io", "v1", "StorageClass") => add::<storage::StorageClass>(generator),
        ("scheduling.k8s.io", "v1", "PriorityClass") => add::<scheduling::PriorityClass>(generator),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            add::<apiextensions::CustomResourceDefinition>(generator)
        }
        _ => return None,
    };
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in kind the server serves has a schema; a kind added to the table without one
    /// would leave `kubectl explain` of it failing.
    #[test]
    fn every_builtin_kind_has_a_schema() {
        for t in crate::builtin::types() {
            let generated = schemas_for(&t.group, &t.version).expect("group-version generated");
            let name = generated
                .kinds
                .get(&t.kind)
                .unwrap_or_else(|| panic!("no schema for {} {}", t.api_version(), t.kind));
            let schema = &generated.schemas[name];
            assert_eq!(schema["type"], "object", "{name}");
            assert!(schema["properties"]["metadata"].is_object(), "{name}");
        }
    }

    #[test]
    fn references_resolve_inside_the_document_and_carry_descriptions_beside_them() {
        let schemas = &schemas_for("apps", "v1").expect("apps/v1").schemas;
        let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
        let spec = &deployment["properties"]["spec"];
        // kube-apiserver's v3 shape: the reference under allOf, its description beside it.
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(spec["description"].as_str().is_some_and(|d| !d.is_empty()));
        let text = serde_json::to_string(schemas).expect("serializes");
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let target = reference.split('"').next().unwrap_or_default();
            assert!(schemas.contains_key(target), "dangling reference {target}");
        }
        let container = &schemas["io.k8s.api.core.v1.Container"];
        assert_eq!(container["required"], serde_json::json!(["name"]));
    }
}
