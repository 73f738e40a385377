//! Create, read, update, patch and delete of built-in kinds and of custom resources.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::discovery::Discovery;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::both_transports;
use crate::common::{TestServer, Transport, raw, status_of, store_rv};

both_transports!(
    configmap_crud,
    secret_string_data_is_merged_into_data,
    deployment_generation_moves_only_with_spec,
    namespace_lifecycle,
    custom_resource_follows_its_crd,
    stale_replace_is_a_conflict,
);

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }))
    .expect("configmap")
}

fn rv<K: kube::Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .expect("objects carry a resourceVersion")
        .parse()
        .expect("resourceVersions are integers here")
}

async fn configmap_crud(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());

    let created = api
        .create(&PostParams::default(), &configmap("cm1", &[("a", "1")]))
        .await
        .expect("create");
    assert_eq!(created.name_any(), "cm1");
    assert_eq!(created.namespace().as_deref(), Some("default"));
    assert!(created.uid().is_some(), "uid is set");
    assert!(created.metadata.creation_timestamp.is_some());
    // Like a real API server: core types such as ConfigMaps carry no generation.
    assert_eq!(created.metadata.generation, None);

    let got = api.get("cm1").await.expect("get");
    assert_eq!(got.data, created.data);
    assert_eq!(rv(&got), rv(&created));

    let dup = status_of(
        api.create(&PostParams::default(), &configmap("cm1", &[]))
            .await,
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    // Replace with the current resourceVersion.
    let mut changed = got.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("b".into(), "2".into());
    let replaced = api
        .replace("cm1", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert!(rv(&replaced) > rv(&got));
    assert_eq!(replaced.uid(), created.uid());
    assert_eq!(
        replaced.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );

    // Each patch type.
    let pp = PatchParams::default();
    let merged = api
        .patch(
            "cm1",
            &pp,
            &Patch::Merge(json!({"data": {"c": "3", "a": null}})),
        )
        .await
        .expect("merge patch");
    let strategic = api
        .patch("cm1", &pp, &Patch::Strategic(json!({"data": {"d": "4"}})))
        .await
        .expect("strategic patch");
    // kube-rs builds JSON patches from the `json-patch` crate; send the same request raw.
    let (code, patched) = raw(
        &s.client,
        http::Method::PATCH,
        "/api/v1/namespaces/default/configmaps/cm1",
        "application/json-patch+json",
        json!([{"op": "replace", "path": "/data/b", "value": "two"}])
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    let patched: ConfigMap = serde_json::from_value(patched).expect("configmap");
    assert!(rv(&merged) > rv(&replaced));
    assert!(rv(&strategic) > rv(&merged));
    assert!(rv(&patched) > rv(&strategic));
    let want: BTreeMap<String, String> = [("b", "two"), ("c", "3"), ("d", "4")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(patched.data.as_ref(), Some(&want));

    // A patch that changes nothing keeps the resourceVersion.
    let noop = api
        .patch("cm1", &pp, &Patch::Merge(json!({"data": {"c": "3"}})))
        .await
        .expect("no-op patch");
    assert_eq!(rv(&noop), rv(&patched));

    let listed = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(
        listed
            .items
            .iter()
            .map(kube::ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["cm1"]
    );

    api.delete("cm1", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = status_of(api.get("cm1").await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
    let again = status_of(api.delete("cm1", &DeleteParams::default()).await);
    assert_eq!(again.code, 404);
    s.stop().await;
}

async fn secret_string_data_is_merged_into_data(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<Secret> = Api::default_namespaced(s.client.clone());
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds"},
        "type": "Opaque",
        // "a" is given both ways: stringData wins, as on a cluster.
        "data": {"user": "YWRtaW4=", "a": "b2xk"},
        "stringData": {"password": "s3cret", "a": "new"},
    }))
    .expect("secret");
    let created = api
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    assert!(created.string_data.is_none(), "stringData is not stored");
    let data = created.data.expect("data");
    let plain: BTreeMap<&str, &[u8]> = data.iter().map(|(k, v)| (k.as_str(), &v.0[..])).collect();
    assert_eq!(
        plain,
        BTreeMap::from([
            ("a", &b"new"[..]),
            ("password", &b"s3cret"[..]),
            ("user", &b"admin"[..]),
        ])
    );

    // On the wire the values are base64, and stringData is gone from the stored object too.
    let (code, raw_secret) = raw(
        &s.client,
        http::Method::GET,
        "/api/v1/namespaces/default/secrets/creds",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(raw_secret["data"]["password"], json!("czNjcmV0"));
    assert!(raw_secret.get("stringData").is_none());

    // A later stringData update lands in data as well.
    let patched = api
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "rotated"}})),
        )
        .await
        .expect("patch stringData");
    assert_eq!(
        patched.data.expect("data")["password"].0,
        b"rotated".to_vec()
    );
    s.stop().await;
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]},
            },
        },
    }))
    .expect("deployment")
}

async fn deployment_generation_moves_only_with_spec(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<Deployment> = Api::default_namespaced(s.client.clone());
    let created = api
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .expect("create deployment");
    assert_eq!(created.metadata.generation, Some(1));
    let status = created.status.as_ref().expect("synthesized status");
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.available_replicas, Some(2));

    // Metadata-only change: new resourceVersion, same generation.
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "blue"}}})),
        )
        .await
        .expect("label patch");
    assert!(rv(&labelled) > rv(&created));
    assert_eq!(labelled.metadata.generation, Some(1));

    // Spec change: generation moves, and the synthesized status follows it.
    let scaled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(scaled.metadata.generation, Some(2));
    let status = scaled.status.as_ref().expect("status");
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(status.replicas, Some(3));

    // Replacing with an identical spec keeps the generation.
    let same = api
        .replace("web", &PostParams::default(), &scaled)
        .await
        .expect("replace unchanged");
    assert_eq!(same.metadata.generation, Some(2));
    assert_eq!(
        rv(&same),
        rv(&scaled),
        "a no-op replace keeps the resourceVersion"
    );
    s.stop().await;
}

async fn namespace_lifecycle(t: Transport) {
    let s = TestServer::start(t).await;
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    assert!(names.iter().any(|n| n == "default"), "seeded: {names:?}");

    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "proj"}}),
    )
    .expect("namespace");
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );

    let cms: Api<ConfigMap> = Api::namespaced(s.client.clone(), "proj");
    cms.create(&PostParams::default(), &configmap("inside", &[("k", "v")]))
        .await
        .expect("create in the new namespace");
    let other: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    assert!(
        other.get_opt("inside").await.expect("get").is_none(),
        "namespaces separate objects"
    );

    namespaces
        .delete("proj", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let gone = status_of(namespaces.get("proj").await);
    assert_eq!(gone.code, 404);
    let gone = status_of(cms.get("inside").await);
    assert_eq!(gone.code, 404, "the namespace took its objects along");
    let refused = status_of(
        cms.create(&PostParams::default(), &configmap("late", &[]))
            .await,
    );
    assert_eq!((refused.code, refused.reason.as_str()), (404, "NotFound"));
    s.stop().await;
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .expect("crd")
}

fn widget_gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("example.com", "v1", "Widget")
}

async fn discovered_widget(client: &Client) -> Option<ApiResource> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    discovery
        .resolve_gvk(&widget_gvk())
        .map(|(resource, _caps)| resource)
}

async fn custom_resource_follows_its_crd(t: Transport) {
    let s = TestServer::start(t).await;
    assert!(
        discovered_widget(&s.client).await.is_none(),
        "no Widget before its CRD"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .expect("create CRD");

    let ar = discovered_widget(&s.client)
        .await
        .expect("discovery shows Widget at once");
    assert_eq!(ar.plural, "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), "default", &ar);
    let w = DynamicObject::new("w1", &ar).data(json!({"spec": {"size": 1}}));
    let created = widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("create widget");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.data["spec"]["size"], json!(1));

    let patched = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .expect("merge patch widget");
    assert_eq!(patched.data["spec"]["size"], json!(2));
    assert_eq!(patched.metadata.generation, Some(2));

    // The status subresource changes status only.
    let with_status = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 99}})),
        )
        .await
        .expect("status patch");
    assert_eq!(with_status.data["status"]["ready"], json!(true));
    assert_eq!(with_status.data["spec"]["size"], json!(2));

    let listed = widgets.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    assert!(
        discovered_widget(&s.client).await.is_none(),
        "the kind is gone with its CRD"
    );
    let unknown = status_of(widgets.list(&ListParams::default()).await);
    assert_eq!(unknown.code, 404);

    // Bringing the CRD back does not bring the objects back.
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .expect("recreate CRD");
    let ar = discovered_widget(&s.client).await.expect("Widget again");
    let widgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), "default", &ar);
    let listed = widgets.list(&ListParams::default()).await.expect("list");
    assert!(
        listed.items.is_empty(),
        "objects went with the CRD: {:?}",
        listed.items
    );
    s.stop().await;
}

async fn stale_replace_is_a_conflict(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let first = api
        .create(&PostParams::default(), &configmap("shared", &[("v", "1")]))
        .await
        .expect("create");
    let mut mine = first.clone();
    mine.data
        .get_or_insert_default()
        .insert("v".into(), "mine".into());
    let mut theirs = first.clone();
    theirs
        .data
        .get_or_insert_default()
        .insert("v".into(), "theirs".into());
    let won = api
        .replace("shared", &PostParams::default(), &theirs)
        .await
        .expect("first writer wins");

    let before = store_rv(&s.client).await;
    let lost = status_of(api.replace("shared", &PostParams::default(), &mine).await);
    assert_eq!((lost.code, lost.reason.as_str()), (409, "Conflict"));
    assert!(
        lost.message.contains("the object has been modified"),
        "{}",
        lost.message
    );
    // A merge patch carrying the stale resourceVersion is refused the same way.
    let lost = status_of(
        api.patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": first.resource_version()}, "data": {"v": "mine"}})),
        )
        .await,
    );
    assert_eq!((lost.code, lost.reason.as_str()), (409, "Conflict"));
    // So is a server-side apply carrying it: kube-apiserver treats it as an optimistic lock.
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shared", "resourceVersion": first.resource_version()},
        "data": {"v": "mine"}});
    let lost = status_of(
        api.patch(
            "shared",
            &PatchParams::apply("backflow-applier").force(),
            &Patch::Apply(&apply),
        )
        .await,
    );
    assert_eq!((lost.code, lost.reason.as_str()), (409, "Conflict"));

    let now = api.get("shared").await.expect("get");
    assert_eq!(now.data.as_ref().expect("data")["v"], "theirs");
    assert_eq!(rv(&now), rv(&won));
    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    s.stop().await;
}
