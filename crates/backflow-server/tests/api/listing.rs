//! Label and field selectors, pagination, and dry-run writes.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use crate::both_transports;
use crate::common::{TestServer, Transport, guard, raw, raw_accept, status_of, store_rv};

both_transports!(
    discovery_answers_with_a_trailing_slash_too,
    selectors_filter_lists,
    pagination_returns_every_item_once,
    dry_run_changes_nothing,
    an_exact_list_is_the_state_at_that_version,
    metadata_only_reads_carry_the_metadata_alone,
);

fn labelled(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": name},
    }))
    .expect("configmap")
}

async fn names(api: &Api<ConfigMap>, lp: &ListParams) -> Vec<String> {
    let mut n: Vec<String> = api
        .list(lp)
        .await
        .unwrap_or_else(|e| panic!("list with {lp:?}: {e}"))
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    n.sort();
    n
}

async fn selectors_filter_lists(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    for (name, labels) in [
        ("a1", json!({"app": "a", "tier": "front"})),
        ("a2", json!({"app": "a"})),
        ("b1", json!({"app": "b", "tier": "back"})),
        ("c1", json!({"app": "c"})),
    ] {
        api.create(&PostParams::default(), &labelled(name, labels))
            .await
            .expect("create");
    }
    let cases: &[(&str, &[&str])] = &[
        ("app=a", &["a1", "a2"]),
        ("app==b", &["b1"]),
        ("app!=a", &["b1", "c1"]),
        ("tier", &["a1", "b1"]),
        ("!tier", &["a2", "c1"]),
        ("app in (a,b)", &["a1", "a2", "b1"]),
        ("app notin (a,b)", &["c1"]),
        ("app=a,tier=front", &["a1"]),
        ("app=zzz", &[]),
    ];
    for (selector, want) in cases {
        assert_eq!(
            names(&api, &ListParams::default().labels(selector)).await,
            *want,
            "labelSelector {selector}"
        );
    }
    assert_eq!(
        names(&api, &ListParams::default().fields("metadata.name=b1")).await,
        ["b1"]
    );
    assert_eq!(
        names(&api, &ListParams::default().fields("metadata.name!=b1")).await,
        ["a1", "a2", "c1"]
    );
    assert_eq!(
        names(
            &api,
            &ListParams::default()
                .fields("metadata.namespace=default")
                .labels("app=a")
        )
        .await,
        ["a1", "a2"]
    );
    // Across all namespaces, a namespace field selector narrows as well.
    let all: Api<ConfigMap> = Api::all(s.client.clone());
    assert_eq!(
        names(
            &all,
            &ListParams::default().fields("metadata.namespace=kube-system")
        )
        .await,
        Vec::<String>::new()
    );
    assert_eq!(
        names(
            &all,
            &ListParams::default().fields("metadata.namespace=default")
        )
        .await,
        ["a1", "a2", "b1", "c1"]
    );

    // Label-selected delete-collection removes exactly the selection.
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=a"),
    )
    .await
    .expect("delete collection");
    assert_eq!(names(&api, &ListParams::default()).await, ["b1", "c1"]);
    s.stop().await;
}

async fn pagination_returns_every_item_once(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let mut want = BTreeSet::new();
    for i in 0..11 {
        let name = format!("page-{i:02}");
        api.create(
            &PostParams::default(),
            &labelled(&name, json!({"set": "p"})),
        )
        .await
        .expect("create");
        want.insert(name);
    }
    // Another namespace's objects stay out of the pages.
    let system: Api<ConfigMap> = Api::namespaced(s.client.clone(), "kube-system");
    system
        .create(
            &PostParams::default(),
            &labelled("elsewhere", json!({"set": "p"})),
        )
        .await
        .expect("create elsewhere");

    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut list_rv = None;
    loop {
        let mut lp = ListParams::default().limit(4);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 4, "a page holds at most `limit` items");
        // Every page reports the resourceVersion the first one was cut at.
        let this_rv = page.metadata.resource_version.clone();
        assert_eq!(*list_rv.get_or_insert(this_rv.clone()), this_rv);
        seen.extend(page.items.iter().map(kube::ResourceExt::name_any));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => {
                assert!(
                    page.metadata.remaining_item_count.unwrap_or(0) > 0,
                    "a page with a continue token says more remain"
                );
                token = Some(next);
            }
            None => break,
        }
        assert!(pages < 20, "pagination does not end");
    }
    assert_eq!(pages, 3, "11 items in pages of 4");
    assert_eq!(seen.len(), want.len(), "every item exactly once: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), want);

    // Paging combines with a selector.
    let first = api
        .list(&ListParams::default().limit(2).labels("set=p"))
        .await
        .expect("selected page");
    assert_eq!(first.items.len(), 2);
    // As kube-apiserver: a selected page says more follow, not how many.
    assert!(first.metadata.continue_.is_some_and(|c| !c.is_empty()));
    assert_eq!(first.metadata.remaining_item_count, None);

    // A forged continue token is a 400, not a silent restart.
    let bad = status_of(
        api.list(&ListParams::default().limit(2).continue_token("not-a-token"))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (400, "BadRequest"));
    s.stop().await;
}

async fn dry_run_changes_nothing(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let dry_post = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let dry_patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };

    // Create.
    let before = store_rv(&s.client).await;
    let would_be = api
        .create(&dry_post, &labelled("ghost", json!({"x": "1"})))
        .await
        .expect("dry-run create");
    assert_eq!(would_be.name_any(), "ghost");
    assert_eq!(would_be.data.as_ref().expect("data")["k"], "ghost");
    assert!(api.get_opt("ghost").await.expect("get").is_none());
    assert_eq!(store_rv(&s.client).await, before);

    // Update (replace and patch).
    let real = api
        .create(&PostParams::default(), &labelled("real", json!({"x": "1"})))
        .await
        .expect("create");
    let before = store_rv(&s.client).await;
    let mut changed = real.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("k".into(), "changed".into());
    let would_be = api
        .replace("real", &dry_post, &changed)
        .await
        .expect("dry-run replace");
    assert_eq!(would_be.data.as_ref().expect("data")["k"], "changed");
    assert_eq!(
        would_be.resource_version(),
        real.resource_version(),
        "a dry-run update answers with the live resourceVersion"
    );
    let would_be = api
        .patch(
            "real",
            &dry_patch,
            &Patch::Merge(json!({"data": {"k": "patched"}})),
        )
        .await
        .expect("dry-run patch");
    assert_eq!(would_be.data.as_ref().expect("data")["k"], "patched");
    let now = api.get("real").await.expect("get");
    assert_eq!(now.data.as_ref().expect("data")["k"], "real");
    assert_eq!(now.resource_version(), real.resource_version());
    assert_eq!(store_rv(&s.client).await, before);

    // Delete (dryRun travels in the DeleteOptions body).
    let deleted = api
        .delete("real", &DeleteParams::default().dry_run())
        .await
        .expect("dry-run delete");
    assert!(deleted.is_left(), "the would-be-deleted object is answered");
    let now = api.get("real").await.expect("still there");
    assert_eq!(now.resource_version(), real.resource_version());
    api.delete_collection(&DeleteParams::default().dry_run(), &ListParams::default())
        .await
        .expect("dry-run delete collection");
    assert!(api.get_opt("real").await.expect("get").is_some());
    assert_eq!(store_rv(&s.client).await, before);
    s.stop().await;
}

/// kube-apiserver serves discovery with or without a trailing slash; kr8s asks for `/version/`
/// first, and the Python client's `get_code()` for `/version/`.
async fn discovery_answers_with_a_trailing_slash_too(t: Transport) {
    let s = TestServer::start(t).await;
    for (path, field) in [
        ("/version/", "gitVersion"),
        ("/api/", "versions"),
        ("/apis/", "groups"),
        ("/api/v1/", "resources"),
        ("/apis/apps/v1/", "resources"),
        ("/apis/apps/", "versions"),
    ] {
        let (code, body) = raw(
            &s.client,
            http::Method::GET,
            path,
            "application/json",
            Vec::new(),
        )
        .await;
        assert_eq!(code, http::StatusCode::OK, "{path}: {body}");
        assert!(
            body.get(field).is_some(),
            "{path} answers discovery: {body}"
        );
        let (_, without) = raw(
            &s.client,
            http::Method::GET,
            path.trim_end_matches('/'),
            "application/json",
            Vec::new(),
        )
        .await;
        assert_eq!(body, without, "{path} answers as without the slash");
    }
}

async fn an_exact_list_is_the_state_at_that_version(t: Transport) {
    use kube::api::VersionMatch;
    let s = TestServer::start_with(t, |c| c.watch_history = 8).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let rv_of = |c: &ConfigMap| c.resource_version().expect("rv");
    let a1 = api
        .create(&PostParams::default(), &labelled("a", json!({})))
        .await
        .expect("create a");
    let patch = Patch::Merge(json!({"data": {"k": "changed"}}));
    let a2 = api
        .patch("a", &PatchParams::default(), &patch)
        .await
        .expect("patch a");
    let b = api
        .create(&PostParams::default(), &labelled("b", json!({})))
        .await
        .expect("create b");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    let at = |rv: String| ListParams {
        resource_version: Some(rv),
        version_match: Some(VersionMatch::Exact),
        ..ListParams::default()
    };
    let state = |list: kube::core::ObjectList<ConfigMap>| {
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        let items: Vec<(String, String)> = list
            .items
            .iter()
            .map(|c| {
                let k = c
                    .data
                    .as_ref()
                    .and_then(|d| d.get("k"))
                    .cloned()
                    .unwrap_or_default();
                (c.name_any(), k)
            })
            .collect();
        (rv, items)
    };
    let first = state(api.list(&at(rv_of(&a1))).await.expect("list at a1"));
    assert_eq!(first, (rv_of(&a1), vec![("a".into(), "a".into())]));
    let second = state(api.list(&at(rv_of(&a2))).await.expect("list at a2"));
    assert_eq!(second.1, vec![("a".to_string(), "changed".to_string())]);
    let third = state(api.list(&at(rv_of(&b))).await.expect("list at b"));
    assert_eq!(
        third.1,
        vec![
            ("a".to_string(), "changed".to_string()),
            ("b".to_string(), "b".to_string())
        ]
    );
    assert_eq!(names(&api, &ListParams::default()).await, ["b"], "now");

    // Newer than the store: 504; older than the history kept: 410, as kube-apiserver answers.
    if t == Transport::InProcess {
        // Over TCP kube-rs retries a 504 with backoff for minutes; the answer is the same.
        let future = status_of(api.list(&at("999999".into())).await);
        assert_eq!(
            (future.code, future.reason.as_str()),
            (504, "Timeout"),
            "{future:?}"
        );
    }
    for i in 0..12 {
        api.create(
            &PostParams::default(),
            &labelled(&format!("n{i}"), json!({})),
        )
        .await
        .expect("create");
    }
    let gone = status_of(api.list(&at(rv_of(&a1))).await);
    assert_eq!(
        (gone.code, gone.reason.as_str()),
        (410, "Expired"),
        "{gone:?}"
    );
    s.stop().await;
}

/// kube-rs's metadata calls (`get_metadata`, `list_metadata`, `watch_metadata`) ask for
/// `PartialObjectMetadata`: the answers carry each object's metadata and nothing else, as
/// kube-apiserver's do (client-go's metadata informers ask the same way).
async fn metadata_only_reads_carry_the_metadata_alone(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &labelled("m1", json!({"secret": "x"})),
        )
        .await
        .expect("create");
    let one = api.get_metadata("m1").await.expect("get metadata");
    assert_eq!(one.metadata.uid, created.metadata.uid);
    assert_eq!(
        one.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    let list = api
        .list_metadata(&ListParams::default())
        .await
        .expect("list metadata");
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());

    let mut events = api
        .watch_metadata(
            &WatchParams::default(),
            &created.resource_version().expect("rv"),
        )
        .await
        .expect("watch metadata")
        .boxed();
    api.patch(
        "m1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"changed": "yes"}}})),
    )
    .await
    .expect("patch");
    let event = guard("a metadata event", events.next())
        .await
        .expect("an event")
        .expect("not an error");
    let WatchEvent::Modified(changed) = event else {
        panic!("{event:?}");
    };
    assert_eq!(
        changed.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(
        changed.labels().get("changed").map(String::as_str),
        Some("yes")
    );

    // On the wire: no data, as the client asked.
    let (code, body) = raw_accept(
        &s.client,
        "/api/v1/namespaces/default/configmaps",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json",
    )
    .await;
    assert_eq!(code, 200);
    assert!(body["items"][0].get("data").is_none(), "{body}");
    assert_eq!(body["items"][0]["metadata"]["name"], "m1");
    s.stop().await;
}
