//! The real `backflow serve` binary: acknowledged writes survive SIGKILL, and SIGTERM stops it
//! cleanly even with a watch open.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{HANG_GUARD, Server};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::json;

/// The store's durability, without the applier's stamps moving resourceVersions.
const NO_APPLY: &[&str] = &["--no-apply"];

/// Awaits `fut`, panicking with `what` past the hang guard.
async fn guard<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("hung: {what} did not finish within {HANG_GUARD:?}"),
    }
}

/// A kube client from the kubeconfig `server` wrote into `data_dir`, checked to point at it.
async fn kube_client(server: &Server, data_dir: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(data_dir.join("kubeconfig")).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        server.url.trim_end_matches('/'),
        "the kubeconfig points at the running server"
    );
    Client::try_from(config).expect("client")
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"value": value},
    }))
    .expect("configmap")
}

/// Waits until the branch `main` of `origin` holds every acknowledged `ConfigMap` with its value.
fn git_converges(origin: &Path, acknowledged: &BTreeMap<String, (u64, String)>) {
    let read = |name: &str| {
        let out = backflow_testkit::git(std::env::temp_dir())
            .arg("--git-dir")
            .arg(origin)
            .args(["show", &format!("main:live/default/configmaps/{name}.yaml")])
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let value_in = |file: &str| {
        file.lines()
            .find_map(|l| l.trim().strip_prefix("value: "))
            .map(|v| v.trim_matches('"').to_string())
    };
    crate::common::wait_for(
        "Git converging to the store after SIGKILL",
        || {
            acknowledged
                .iter()
                .filter(|(name, (_, value))| value_in(&read(name)).as_ref() != Some(value))
                .map(|(name, _)| format!("{name} is missing or stale in Git"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        || {
            acknowledged
                .iter()
                .all(|(name, (_, value))| value_in(&read(name)).as_ref() == Some(value))
                .then_some(())
        },
    );
}

fn rv_of(o: &ConfigMap) -> u64 {
    o.resource_version()
        .expect("resourceVersion")
        .parse()
        .expect("integer resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    const N: usize = 60;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = Server::start_with(&data, None, NO_APPLY);
    let client = kube_client(&server, &data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);

    // Concurrent creates, so several land in one group commit.
    let creates = (0..N).map(|i| {
        let api = api.clone();
        async move {
            let name = format!("durable-{i:03}");
            let created = api
                .create(&PostParams::default(), &configmap(&name, &i.to_string()))
                .await
                .unwrap_or_else(|e| panic!("create {name}: {e}"));
            (name, created)
        }
    });
    let mut acknowledged: BTreeMap<String, (u64, String)> =
        guard("creates", futures::future::join_all(creates))
            .await
            .into_iter()
            .map(|(name, o)| {
                let value = o.data.as_ref().expect("data")["value"].clone();
                (name, (rv_of(&o), value))
            })
            .collect();
    // Updates and deletes are acknowledged writes too.
    for i in (0..N).step_by(7) {
        let name = format!("durable-{i:03}");
        let mut o = guard("get", api.get(&name)).await.expect("get");
        o.data
            .get_or_insert_default()
            .insert("value".into(), format!("updated-{i}"));
        let updated = guard("replace", api.replace(&name, &PostParams::default(), &o))
            .await
            .expect("replace");
        acknowledged.insert(name, (rv_of(&updated), format!("updated-{i}")));
    }
    let mut deleted = Vec::new();
    for i in (3..N).step_by(11) {
        let name = format!("durable-{i:03}");
        guard("delete", api.delete(&name, &DeleteParams::default()))
            .await
            .expect("delete");
        acknowledged.remove(&name);
        deleted.push(name);
    }
    let highest = acknowledged
        .values()
        .map(|(rv, _)| *rv)
        .max()
        .expect("objects");
    let rvs: std::collections::BTreeSet<u64> = acknowledged.values().map(|(rv, _)| *rv).collect();
    assert_eq!(
        rvs.len(),
        acknowledged.len(),
        "every write has its own resourceVersion"
    );

    server.kill();

    let server = Server::start_with(&data, None, NO_APPLY);
    // Writes still in the commit window when the process died reach Git after the restart: the
    // mirror's start-up resync makes Git converge to the store.
    let origin = data.join("origin.git");
    tokio::task::block_in_place(|| git_converges(&origin, &acknowledged));
    let client = kube_client(&server, &data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for (name, (rv, value)) in &acknowledged {
        let o = guard("get after restart", api.get(name))
            .await
            .unwrap_or_else(|e| panic!("{name} was acknowledged but is gone after SIGKILL: {e}"));
        assert_eq!(rv_of(&o), *rv, "{name} keeps its resourceVersion");
        assert_eq!(o.data.as_ref().expect("data")["value"], *value, "{name}");
    }
    for name in &deleted {
        assert!(
            guard("get deleted", api.get_opt(name))
                .await
                .expect("get")
                .is_none(),
            "{name} was deleted before the crash and stays deleted"
        );
    }
    let listed = guard("list", api.list(&kube::api::ListParams::default()))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), acknowledged.len());
    let list_rv: u64 = listed
        .metadata
        .resource_version
        .as_deref()
        .expect("list rv")
        .parse()
        .expect("integer");
    assert!(list_rv >= highest);

    let fresh = guard(
        "create after restart",
        api.create(&PostParams::default(), &configmap("after-restart", "x")),
    )
    .await
    .expect("create after restart");
    assert!(
        rv_of(&fresh) > list_rv,
        "a new write ({}) is ordered after everything before the crash ({list_rv})",
        rv_of(&fresh)
    );
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_with_an_open_watch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = Server::start_with(&data, None, NO_APPLY);
    let client = kube_client(&server, &data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let created = guard(
        "create",
        api.create(&PostParams::default(), &configmap("watched", "1")),
    )
    .await
    .expect("create");

    // A watch without timeoutSeconds stays open until the server goes; the first event shows
    // it is established.
    let mut events = guard("watch", api.watch(&WatchParams::default(), "0"))
        .await
        .expect("watch")
        .boxed();
    match guard("the initial event", events.next()).await {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.uid(), created.uid()),
        other => panic!("expected ADDED watched, got {other:?}"),
    }

    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("join");
    assert!(status.success(), "SIGTERM exits cleanly: {status:?}");

    // The watch ended with the server rather than hanging.
    loop {
        match guard("the watch to end", events.next()).await {
            None => break,
            Some(Err(_)) => {}
            Some(Ok(e)) => panic!("unexpected event after shutdown: {e:?}"),
        }
    }

    // Nothing was lost in the clean stop either.
    let server = Server::start_with(&data, None, NO_APPLY);
    let client = kube_client(&server, &data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let after = guard("get", api.get("watched")).await.expect("get");
    assert_eq!(after.resource_version(), created.resource_version());
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("join");
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_the_remote_gone_stops_within_the_grace_and_the_restart_publishes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let flags = [
        "--no-apply",
        "--commit-window",
        "0s",
        "--shutdown-grace",
        "1s",
    ];
    let server = Server::start_with(&data, None, &flags);
    let client = kube_client(&server, &data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    // The remote goes away: the write is stored, and its push keeps failing.
    let origin = data.join("origin.git");
    let away = dir.path().join("origin-away.git");
    std::fs::rename(&origin, &away).expect("move the remote away");
    guard(
        "create",
        api.create(&PostParams::default(), &configmap("stranded", "1")),
    )
    .await
    .expect("create");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let asked = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("join");
    let took = asked.elapsed();
    assert!(status.success(), "{status:?}");
    // The worker gives up after its 1 s grace (it retried for 30 s before the grace existed).
    assert!(
        took < std::time::Duration::from_secs(8),
        "SIGTERM took {took:?} with --shutdown-grace 1s"
    );
    // Nothing is lost: the restart's resync publishes the stranded write.
    std::fs::rename(&away, &origin).expect("bring the remote back");
    let server = Server::start_with(&data, None, &flags);
    let show = || {
        std::process::Command::new("git")
            .args(["--git-dir", &origin.to_string_lossy(), "show"])
            .arg("main:live/default/configmaps/stranded.yaml")
            .output()
            .expect("git show")
    };
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while !show().status.success() {
        assert!(
            std::time::Instant::now() < deadline,
            "the stranded write never reached Git"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("join");
    assert!(status.success(), "{status:?}");
}
