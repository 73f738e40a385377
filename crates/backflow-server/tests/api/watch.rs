//! Watches: resuming from a resourceVersion, streaming lists, 410 Expired and the watcher's
//! recovery, and finalizers as a watcher sees them.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use http::{Method, Request};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

use crate::both_transports;
use crate::common::{TestServer, Transport, guard, status_of};

both_transports!(
    watch_resumes_from_a_resource_version,
    streaming_list_sends_initial_events_then_changes,
    expired_resource_version_gets_410_and_the_watcher_relists,
    finalizers_hold_deletion_until_removed,
);

fn configmap(name: &str, labels: Value, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data,
    }))
    .expect("configmap")
}

fn rv_of(o: &ConfigMap) -> u64 {
    o.resource_version()
        .expect("resourceVersion")
        .parse()
        .expect("integer resourceVersion")
}

async fn next<S, T>(stream: &mut S, what: &str) -> T
where
    S: Stream<Item = T> + Unpin,
{
    guard(what, stream.next())
        .await
        .unwrap_or_else(|| panic!("the stream ended while waiting for {what}"))
}

/// A watch event reduced to (type, name).
fn describe(e: &WatchEvent<ConfigMap>) -> (&'static str, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED", o.name_any()),
        WatchEvent::Modified(o) => ("MODIFIED", o.name_any()),
        WatchEvent::Deleted(o) => ("DELETED", o.name_any()),
        WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
        WatchEvent::Error(s) => panic!("unexpected watch error: {s:?}"),
    }
}

async fn watch_resumes_from_a_resource_version(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let pp = PostParams::default();
    let a = api
        .create(&pp, &configmap("a", json!({}), json!({"v": "1"})))
        .await
        .expect("create a");
    let from = a.resource_version().expect("rv");
    let b = api
        .create(&pp, &configmap("b", json!({}), json!({"v": "1"})))
        .await
        .expect("create b");
    let a2 = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await
        .expect("patch a");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");

    // Everything after `from`, in order, and nothing before it.
    let mut events = api
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    let mut got = Vec::new();
    let mut rvs = Vec::new();
    for _ in 0..3 {
        let e = next(&mut events, "a replayed event").await.expect("event");
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &e {
            rvs.push(rv_of(o));
        }
        got.push(describe(&e));
    }
    assert_eq!(
        got,
        [
            ("ADDED", "b".to_string()),
            ("MODIFIED", "a".to_string()),
            ("DELETED", "b".to_string())
        ]
    );
    assert_eq!(rvs[0], rv_of(&b));
    assert_eq!(rvs[1], rv_of(&a2));
    assert!(
        rvs[2] > rvs[1],
        "a DELETED event carries a new resourceVersion"
    );

    // Then live changes.
    let c = api
        .create(&pp, &configmap("c", json!({}), json!({})))
        .await
        .expect("create c");
    let e = next(&mut events, "the live ADDED").await.expect("event");
    assert_eq!(describe(&e), ("ADDED", "c".to_string()));
    if let WatchEvent::Added(o) = &e {
        assert_eq!(o.resource_version(), c.resource_version());
    }

    // resourceVersion 0: the current objects first, as synthetic ADDED events.
    let mut initial = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch from 0")
        .boxed();
    let mut names = BTreeSet::new();
    for _ in 0..2 {
        let e = next(&mut initial, "an initial ADDED").await.expect("event");
        let (kind, name) = describe(&e);
        assert_eq!(kind, "ADDED");
        names.insert(name);
    }
    assert_eq!(names, BTreeSet::from(["a".to_string(), "c".to_string()]));

    // A watch limited by a label selector sees an object enter and leave the selection.
    let mut selected = api
        .watch(
            &WatchParams::default().labels("pick=yes"),
            &c.resource_version().expect("rv"),
        )
        .await
        .expect("selected watch")
        .boxed();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"pick": "yes"}}})),
    )
    .await
    .expect("label a");
    api.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"unrelated": "change"}})),
    )
    .await
    .expect("change c");
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"pick": "no"}}})),
    )
    .await
    .expect("unlabel a");
    let mut got = Vec::new();
    for _ in 0..2 {
        let e = next(&mut selected, "a selected event")
            .await
            .expect("event");
        got.push(describe(&e));
    }
    assert_eq!(
        got,
        [("ADDED", "a".to_string()), ("DELETED", "a".to_string())]
    );
    s.stop().await;
}

async fn streaming_list_sends_initial_events_then_changes(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    for name in ["s1", "s2", "s3"] {
        api.create(
            &PostParams::default(),
            &configmap(name, json!({}), json!({})),
        )
        .await
        .expect("create");
    }
    let mut w = watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(
        next(&mut w, "Init").await.expect("event"),
        Event::Init
    ));
    let mut initial = BTreeSet::new();
    loop {
        match next(&mut w, "initial events").await.expect("event") {
            Event::InitApply(o) => {
                assert!(initial.insert(o.name_any()), "each object once");
            }
            Event::InitDone => break,
            other => panic!("unexpected event during the initial list: {other:?}"),
        }
    }
    assert_eq!(
        initial,
        BTreeSet::from(["s1".to_string(), "s2".to_string(), "s3".to_string()])
    );

    api.create(
        &PostParams::default(),
        &configmap("s4", json!({}), json!({})),
    )
    .await
    .expect("create s4");
    match next(&mut w, "Apply s4").await.expect("event") {
        Event::Apply(o) => assert_eq!(o.name_any(), "s4"),
        other => panic!("expected Apply(s4), got {other:?}"),
    }
    api.delete("s1", &DeleteParams::default())
        .await
        .expect("delete s1");
    match next(&mut w, "Delete s1").await.expect("event") {
        Event::Delete(o) => assert_eq!(o.name_any(), "s1"),
        other => panic!("expected Delete(s1), got {other:?}"),
    }
    s.stop().await;
}

/// The raw lines of a watch response that ends by itself.
async fn watch_lines(client: &kube::Client, uri: &str) -> (http::StatusCode, Vec<Value>) {
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = guard("watch request", client.send(req))
        .await
        .expect("send");
    let code = resp.status();
    let body = guard("the watch to end", resp.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8(body.to_vec()).expect("utf-8");
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect();
    (code, lines)
}

async fn expired_resource_version_gets_410_and_the_watcher_relists(t: Transport) {
    const HISTORY: usize = 5;
    let s = TestServer::start_with(t, |c| c.watch_history = HISTORY).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let watched = api
        .create(
            &PostParams::default(),
            &configmap("watched", json!({"w": "1"}), json!({"v": "1"})),
        )
        .await
        .expect("create watched");
    let old = watched.resource_version().expect("rv");
    api.create(
        &PostParams::default(),
        &configmap("noise", json!({}), json!({})),
    )
    .await
    .expect("create noise");
    for i in 0..(HISTORY * 2) {
        api.patch(
            "noise",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"i": i.to_string()}})),
        )
        .await
        .expect("patch noise");
    }

    // Raw protocol: HTTP 200, then one ERROR event carrying a 410 Expired Status, then the end.
    let (code, lines) = watch_lines(
        &s.client,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["kind"], "Status");
    assert_eq!(lines[0]["object"]["code"], 410);
    assert_eq!(lines[0]["object"]["reason"], "Expired");

    // A resourceVersion inside the history still resumes.
    let recent = api.get("noise").await.expect("get noise");
    let mut ok = api
        .watch(
            &WatchParams::default(),
            &recent.resource_version().expect("rv"),
        )
        .await
        .expect("watch from a recent rv")
        .boxed();
    api.patch(
        "noise",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"last": "yes"}})),
    )
    .await
    .expect("patch");
    match next(&mut ok, "an event after a recent rv").await {
        Ok(WatchEvent::Modified(o)) => assert_eq!(o.name_any(), "noise"),
        other => panic!("expected MODIFIED noise, got {other:?}"),
    }

    // The kube-rs watcher: list, then stop polling so its watch starts only after the history
    // has moved past the list's resourceVersion.
    let mut w = watcher::watcher(api.clone(), watcher::Config::default().labels("w=1")).boxed();
    assert!(matches!(
        next(&mut w, "Init").await.expect("event"),
        Event::Init
    ));
    match next(&mut w, "InitApply").await.expect("event") {
        Event::InitApply(o) => assert_eq!(o.name_any(), "watched"),
        other => panic!("expected InitApply(watched), got {other:?}"),
    }
    assert!(matches!(
        next(&mut w, "InitDone").await.expect("event"),
        Event::InitDone
    ));
    let latest = api
        .patch(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await
        .expect("patch watched");
    for i in 0..(HISTORY * 2) {
        api.patch(
            "noise",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"j": i.to_string()}})),
        )
        .await
        .expect("patch noise");
    }
    match next(&mut w, "the expired watch").await {
        Err(watcher::Error::WatchError(st)) => {
            assert_eq!((st.code, st.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected a 410 watch error, got {other:?}"),
    }
    // It re-lists and so sees the change it missed.
    let mut relisted = None;
    loop {
        match next(&mut w, "the re-list").await {
            Ok(Event::Init) => {}
            Ok(Event::InitApply(o)) => relisted = Some(o),
            Ok(Event::InitDone) => break,
            other => panic!("unexpected event while re-listing: {other:?}"),
        }
    }
    let relisted = relisted.expect("the watched object is re-listed");
    assert_eq!(relisted.data.as_ref().expect("data")["v"], "2");
    assert_eq!(relisted.resource_version(), latest.resource_version());

    // And watches on from there.
    api.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "3"}})),
    )
    .await
    .expect("patch watched again");
    match next(&mut w, "Apply after recovery").await {
        Ok(Event::Apply(o)) => assert_eq!(o.data.expect("data")["v"], "3"),
        other => panic!("expected Apply(watched v=3), got {other:?}"),
    }
    s.stop().await;
}

async fn finalizers_hold_deletion_until_removed(t: Transport) {
    let s = TestServer::start(t).await;
    let api: Api<ConfigMap> = Api::default_namespaced(s.client.clone());
    let mut held = configmap("held", json!({}), json!({"k": "v"}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = api
        .create(&PostParams::default(), &held)
        .await
        .expect("create");
    let mut events = api
        .watch(
            &WatchParams::default(),
            &created.resource_version().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();

    let answered = api
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = answered
        .left()
        .expect("the object, still there, is answered");
    assert!(marked.metadata.deletion_timestamp.is_some());
    let still = api.get("held").await.expect("the object remains");
    assert!(still.metadata.deletion_timestamp.is_some());
    assert_eq!(
        still.finalizers(),
        ["example.com/hold".to_string()].as_slice()
    );

    // No new finalizers while deleting; deleting again changes nothing.
    let st = status_of(
        api.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
        )
        .await,
    );
    assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete again");
    assert_eq!(
        api.get("held").await.expect("get").resource_version(),
        still.resource_version()
    );

    // Removing the last finalizer removes the object.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    let gone = status_of(api.get("held").await);
    assert_eq!(gone.code, 404);

    match next(&mut events, "MODIFIED with deletionTimestamp").await {
        Ok(WatchEvent::Modified(o)) => {
            assert_eq!(o.name_any(), "held");
            assert!(o.metadata.deletion_timestamp.is_some());
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }
    match next(&mut events, "DELETED").await {
        Ok(WatchEvent::Deleted(o)) => {
            assert_eq!(o.name_any(), "held");
            assert!(o.finalizers().is_empty());
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    s.stop().await;
}
