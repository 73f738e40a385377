//! Bad requests of each kind: the Status a client gets, and that nothing was written.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchParams,
};
use serde_json::json;

use crate::both_transports;
use crate::common::{TestServer, Transport, raw, status_of, store_rv};

both_transports!(
    invalid_name_is_422_with_causes,
    missing_namespace_is_404,
    kind_mismatch_is_400,
    strategic_patch_of_custom_resource_is_415,
    oversized_body_is_413,
    malformed_json_is_400,
    bad_selectors_are_400,
    wrongly_typed_fields_are_400_and_nothing_is_stored,
    data_over_one_mebibyte_is_422_and_secret_values_are_never_echoed,
    bad_query_parameters_are_refused_and_encoded_paths_are_decoded,
    custom_resources_are_validated_against_their_schema,
);

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": "v"},
    }))
    .expect("configmap")
}

async fn invalid_name_is_422_with_causes(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let before = store_rv(&s.client).await;
    let st = status_of(
        api.create(&PostParams::default(), &configmap("Bad_Name"))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    let details = st.details.as_ref().expect("details");
    assert_eq!(details.kind, "ConfigMap");
    assert_eq!(details.name, "Bad_Name");
    assert!(
        details
            .causes
            .iter()
            .any(|c| c.field == "metadata.name" && c.reason == "FieldValueInvalid"),
        "causes name the field: {:?}",
        details.causes
    );
    assert!(st.message.contains("metadata.name"), "{}", st.message);

    // A data key that is not a valid ConfigMap key is refused the same way.
    let mut bad_key = configmap("fine");
    bad_key
        .data
        .get_or_insert_default()
        .insert("no spaces allowed".into(), "v".into());
    let st = status_of(api.create(&PostParams::default(), &bad_key).await);
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    assert!(!st.details.expect("details").causes.is_empty());

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    assert!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    s.stop().await;
}

async fn missing_namespace_is_404(t: Transport) {
    let s = TestServer::start(t).await;
    let before = store_rv(&s.client).await;
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), "nope");
    let st = status_of(api.create(&PostParams::default(), &configmap("cm")).await);
    assert_eq!((st.code, st.reason.as_str()), (404, "NotFound"));
    assert!(st.message.contains("nope"), "{}", st.message);
    assert_eq!(st.details.expect("details").kind, "namespaces");

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    assert!(
        namespaces.get_opt("nope").await.expect("get").is_none(),
        "no namespace was made up"
    );
    s.stop().await;
}

async fn kind_mismatch_is_400(t: Transport) {
    let s = TestServer::start(t).await;
    let before = store_rv(&s.client).await;
    let (code, st) = raw(
        &s.client,
        http::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mixed"}, "data": {}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["reason"], "BadRequest");
    assert!(
        st["message"].as_str().unwrap_or("").contains("Secret"),
        "{st}"
    );

    // A name in the body that differs from the URL's is refused too.
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let st = status_of(
        cms.replace("one", &PostParams::default(), &configmap("other"))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (400, "BadRequest"));

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    assert!(cms.get_opt("mixed").await.expect("get").is_none());
    assert!(cms.get_opt("one").await.expect("get").is_none());
    let secrets: Api<Secret> = Api::default_namespaced(s.client.clone());
    assert!(secrets.get_opt("mixed").await.expect("get").is_none());
    s.stop().await;
}

/// Creates the namespaced CRD `{plural}.example.com` served at `v1` with `schema`; returns its
/// resource.
async fn custom_type(
    s: &TestServer,
    plural: &str,
    kind: &str,
    schema: serde_json::Value,
) -> ApiResource {
    let singular = plural.trim_end_matches('s');
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}],
        },
    }))
    .expect("crd");
    Api::<CustomResourceDefinition>::all(s.client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", kind), plural)
}

async fn strategic_patch_of_custom_resource_is_415(t: Transport) {
    let s = TestServer::start(t).await;
    let ar = custom_type(
        &s,
        "gadgets",
        "Gadget",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .await;
    let gadgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), "default", &ar);
    let created = gadgets
        .create(
            &PostParams::default(),
            &DynamicObject::new("g1", &ar).data(json!({"spec": {"n": 1}})),
        )
        .await
        .expect("create gadget");
    let before = store_rv(&s.client).await;

    let st = status_of(
        gadgets
            .patch(
                "g1",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"n": 2}})),
            )
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(st.message.contains("merge-patch+json"), "{}", st.message);

    let now = gadgets.get("g1").await.expect("get");
    assert_eq!(now.data["spec"]["n"], json!(1));
    assert_eq!(now.resource_version(), created.resource_version());
    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    s.stop().await;
}

async fn oversized_body_is_413(t: Transport) {
    let s = TestServer::start(t).await;
    let before = store_rv(&s.client).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let mut big = configmap("big");
    big.data
        .get_or_insert_default()
        .insert("blob".into(), "x".repeat(3 * 1024 * 1024 + 1024));
    let st = status_of(api.create(&PostParams::default(), &big).await);
    assert_eq!(
        (st.code, st.reason.as_str()),
        (413, "RequestEntityTooLarge")
    );

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    assert!(api.get_opt("big").await.expect("get").is_none());
    // The server still answers normally afterwards.
    api.create(&PostParams::default(), &configmap("small"))
        .await
        .expect("a normal create after the refused one");
    s.stop().await;
}

async fn malformed_json_is_400(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let existing = api
        .create(&PostParams::default(), &configmap("keep"))
        .await
        .expect("create");
    let before = store_rv(&s.client).await;

    let broken =
        br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "half""#.to_vec();
    let (code, st) = raw(
        &s.client,
        http::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        broken.clone(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(st["status"], "Failure");

    for (method, content_type) in [
        (http::Method::PUT, "application/json"),
        (http::Method::PATCH, "application/merge-patch+json"),
        (http::Method::PATCH, "application/json-patch+json"),
    ] {
        let (code, st) = raw(
            &s.client,
            method.clone(),
            "/api/v1/namespaces/default/configmaps/keep",
            content_type,
            broken.clone(),
        )
        .await;
        assert_eq!(code, 400, "{method} {content_type}: {st}");
        assert_eq!(st["reason"], "BadRequest");
    }
    // A JSON patch that is JSON but not a patch is refused without a write as well.
    let (code, _) = raw(
        &s.client,
        http::Method::PATCH,
        "/api/v1/namespaces/default/configmaps/keep",
        "application/json-patch+json",
        br#"{"op": "add"}"#.to_vec(),
    )
    .await;
    assert!(code.is_client_error(), "{code}");

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    assert!(api.get_opt("half").await.expect("get").is_none());
    let now = api.get("keep").await.expect("get");
    assert_eq!(now.resource_version(), existing.resource_version());
    assert_eq!(now.data, existing.data);
    s.stop().await;
}

async fn bad_selectors_are_400(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    api.create(&PostParams::default(), &configmap("stay"))
        .await
        .expect("create");
    let before = store_rv(&s.client).await;
    for selector in ["bad key=x", "app in (a,b", "=x"] {
        let st = status_of(api.list(&ListParams::default().labels(selector)).await);
        assert_eq!(
            (st.code, st.reason.as_str()),
            (400, "BadRequest"),
            "labelSelector {selector:?}"
        );
        let st = status_of(
            api.watch(&WatchParams::default().labels(selector), "0")
                .await
                .map(|_| ()),
        );
        assert_eq!(st.code, 400, "watch with labelSelector {selector:?}");
    }
    let st = status_of(api.list(&ListParams::default().fields("spec.foo=x")).await);
    assert_eq!((st.code, st.reason.as_str()), (400, "BadRequest"));
    let st = status_of(
        api.list(&ListParams::default().fields("metadata.name"))
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (400, "BadRequest"));

    // A selector in a delete-collection is checked before anything is deleted.
    let st = status_of(
        api.delete_collection(
            &kube::api::DeleteParams::default(),
            &ListParams::default().labels("bad key=x"),
        )
        .await,
    );
    assert_eq!(st.code, 400);
    assert!(api.get_opt("stay").await.expect("get").is_some());
    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    s.stop().await;
}

async fn wrongly_typed_fields_are_400_and_nothing_is_stored(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let existing = api
        .create(&PostParams::default(), &configmap("keep"))
        .await
        .expect("create");
    let before = store_rv(&s.client).await;
    let post = |body: serde_json::Value| {
        raw(
            &s.client,
            http::Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            body.to_string().into_bytes(),
        )
    };
    for body in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "ownerReferences": "x"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": [1, 2]}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "labels": {"a": 1}}}),
    ] {
        let (code, st) = post(body.clone()).await;
        assert_eq!(code, 400, "{body}: {st}");
        assert_eq!(st["reason"], "BadRequest");
        assert!(
            st["message"]
                .as_str()
                .unwrap_or_default()
                .contains("cannot be handled as a ConfigMap"),
            "{st}"
        );
    }
    // A resourceVersion that is a number is not a precondition skipped: it is a bad request.
    let mut stale = serde_json::to_value(&existing).expect("json");
    stale["metadata"]["resourceVersion"] = json!(1);
    stale["data"] = json!({"k": "overwritten"});
    let (code, st) = raw(
        &s.client,
        http::Method::PUT,
        "/api/v1/namespaces/default/configmaps/keep",
        "application/json",
        stale.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    // So is a Secret's stringData that is not a map.
    let (code, st) = raw(
        &s.client,
        http::Method::POST,
        "/api/v1/namespaces/default/secrets",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": "x"})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{st}");

    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    let kept = api.get("keep").await.expect("get");
    assert_eq!(kept.data.expect("data")["k"], "v");
    s.stop().await;
}

async fn data_over_one_mebibyte_is_422_and_secret_values_are_never_echoed(t: Transport) {
    let s = TestServer::start(t).await;
    let before = store_rv(&s.client).await;
    let configmaps: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let mut big = configmap("big");
    big.data = Some([("k".to_string(), "x".repeat(1024 * 1024))].into());
    let st = status_of(configmaps.create(&PostParams::default(), &big).await);
    assert_eq!(
        (st.code, st.reason.as_str()),
        (422, "Invalid"),
        "{}",
        st.message
    );
    let causes = st.details.expect("details").causes;
    assert!(
        causes.iter().any(|c| c.reason == "FieldValueTooLong"),
        "{causes:?}"
    );
    // Exactly at the limit (key and value together) is fine.
    big.data = Some([("k".to_string(), "x".repeat(1024 * 1024 - 1))].into());
    configmaps
        .create(&PostParams::default(), &big)
        .await
        .expect("at the limit");
    configmaps
        .delete("big", &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    let before = before.max(store_rv(&s.client).await);

    let secrets: Api<Secret> = Api::default_namespaced(s.client.clone());
    let (code, st) = raw(
        &s.client,
        http::Method::POST,
        "/api/v1/namespaces/default/secrets",
        "application/json",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "data": {"password": "hunter2-not-base64!"}})
        .to_string()
        .into_bytes(),
    )
    .await;
    assert_eq!(code, 422, "{st}");
    assert!(
        !st.to_string().contains("hunter2"),
        "the value is never echoed: {st}"
    );
    assert_eq!(store_rv(&s.client).await, before, "nothing was written");
    assert!(secrets.get_opt("s").await.expect("get").is_none());
    s.stop().await;
}

async fn bad_query_parameters_are_refused_and_encoded_paths_are_decoded(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    api.create(&PostParams::default(), &configmap("my-app"))
        .await
        .expect("create");
    let get = |uri: String| {
        let client = s.client.clone();
        async move {
            raw(
                &client,
                http::Method::GET,
                &uri,
                "application/json",
                Vec::new(),
            )
            .await
        }
    };
    let list = "/api/v1/namespaces/default/configmaps";
    for (query, code, reason) in [
        (
            "?resourceVersionMatch=Bogus&resourceVersion=1",
            422,
            "Invalid",
        ),
        ("?watch=maybe", 400, "BadRequest"),
        ("?resourceVersion=abc", 400, "BadRequest"),
    ] {
        let (got, st) = get(format!("{list}{query}")).await;
        assert_eq!(got, code, "{query}: {st}");
        assert_eq!(st["reason"], reason, "{query}: {st}");
    }
    let (got, st) = get(format!("{list}/my-app?resourceVersion=abc")).await;
    assert_eq!(got, 400, "{st}");
    // Go's router decodes percent-encoding: my%2Dapp is my-app.
    let (got, found) = get(format!("{list}/my%2Dapp")).await;
    assert_eq!(got, 200, "{found}");
    assert_eq!(found["metadata"]["name"], "my-app");
    let (got, _) = get(format!("{list}/my%zzapp")).await;
    assert_eq!(got, 400);
    s.stop().await;
}

async fn custom_resources_are_validated_against_their_schema(t: Transport) {
    let s = TestServer::start(t).await;
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["fast", "safe"]}}}}});
    let ar = custom_type(&s, "widgets", "Widget", schema).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), "default", &ar);
    let before = store_rv(&s.client).await;
    let st = status_of(
        widgets
            .create(
                &PostParams::default(),
                &DynamicObject::new("w1", &ar).data(json!({"spec": {"size": "3", "mode": "slow"}})),
            )
            .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"), "{st:?}");
    assert!(
        st.message
            .contains("spec.size in body must be of type integer: \"string\""),
        "{}",
        st.message
    );
    assert!(
        st.message.contains("supported values: \"fast\", \"safe\""),
        "{}",
        st.message
    );
    assert_eq!(store_rv(&s.client).await, before, "nothing stored");
    widgets
        .create(
            &PostParams::default(),
            &DynamicObject::new("w1", &ar).data(json!({"spec": {"size": 3, "mode": "fast"}})),
        )
        .await
        .expect("a valid widget");
    let st = status_of(
        widgets
            .patch(
                "w1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"size": 0}})),
            )
            .await,
    );
    assert_eq!(st.code, 422, "{st:?}");
    assert!(
        st.message.contains("should be greater than or equal to 1"),
        "{}",
        st.message
    );
    s.stop().await;
}
