//! The real `backflow serve` binary: acknowledged writes survive SIGKILL, and SIGTERM stops it
//! cleanly even with a watch open.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::json;

/// How long any single wait may take before the test is declared hung.
const HANG_GUARD: Duration = Duration::from_secs(30);

async fn guard<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("hung: {what} did not finish within {HANG_GUARD:?}"),
    }
}

/// A running `backflow serve`, stopped by its own PID when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// Starts the binary on a free loopback port and waits until it says where it listens.
    fn start(data_dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env("BACKFLOW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn backflow serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        match rx.recv_timeout(HANG_GUARD) {
            Ok(url) => Self { child, url },
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the server did not report its address ({e}); exit: {status:?}");
            }
        }
    }

    async fn client(&self, data_dir: &Path) -> Client {
        let kubeconfig = Kubeconfig::read_from(data_dir.join("kubeconfig")).expect("kubeconfig");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("config");
        assert_eq!(
            config.cluster_url.to_string().trim_end_matches('/'),
            self.url.trim_end_matches('/'),
            "the kubeconfig points at the running server"
        );
        Client::try_from(config).expect("client")
    }

    /// SIGKILL: no chance to flush or clean up.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL the server");
        let status = self.child.wait().expect("reap the server");
        assert!(!status.success(), "a killed server does not exit cleanly");
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM could not be sent to {pid}");
        let deadline = std::time::Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not stop within {HANG_GUARD:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"value": value},
    }))
    .expect("configmap")
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
    let server = Server::start(&data);
    let client = server.client(&data).await;
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

    let server = Server::start(&data);
    let client = server.client(&data).await;
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
    let listed = guard("list", api.list(&Default::default()))
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
    let server = Server::start(&data);
    let client = server.client(&data).await;
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
    let server = Server::start(&data);
    let client = server.client(&data).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let after = guard("get", api.get("watched")).await.expect("get");
    assert_eq!(after.resource_version(), created.resource_version());
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("join");
    assert!(status.success(), "{status:?}");
}
