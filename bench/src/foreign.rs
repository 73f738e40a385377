//! The `foreign-push` scenario: somebody pushes a changed manifest; how long until the live
//! object holds it?
//!
//! backflow (`serve --apply`'s wiring in process): after each push straight into the bare remote,
//! the receiver gets the signed notice `serve`'s post-receive hook sends, and the clock runs
//! until a GET of the object through the API shows the pushed value — notice, fetch, flush,
//! operation recorded, server-side apply. Baseline in the same run, push by push: `kubectl apply
//! -f` of the same folder (a copy in another namespace), what a CI job applying the folder would
//! spend. Then one push that adds 1,000 files: objects applied per second, and the commits the
//! mirror made after it settled (none expected).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backflow_api::SystemClock;
use backflow_apply::receiver::{Receiver, ReceiverMetrics, sign_sha256, webhook_path};
use backflow_server::Listener;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::Conn;
use crate::git::{BRANCH, path_str, person_git as git};
use crate::live::{self, Live};
use crate::server::{percentile, round2, row};

const TOKEN: &str = "bench-receiver-token";
/// Objects the folder holds while single-file pushes are timed.
const OBJECTS: usize = 100;
/// Files the bulk push adds.
const BULK: usize = 1000;

fn pushes(quick: bool) -> usize {
    if quick { 5 } else { 40 }
}

/// Pushes as a person does: rebased onto what the mirror pushed meanwhile, again if it pushed
/// in between.
fn push(work: &Path) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..20 {
        git(work, &["pull", "-q", "--rebase", "origin", BRANCH])?;
        match git(work, &["push", "-q", "origin", &format!("HEAD:{BRANCH}")]) {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
    }
    let log = git(
        work,
        &[
            "log",
            "--format=%h %an: %s",
            "-8",
            &format!("origin/{BRANCH}"),
        ],
    )
    .unwrap_or_default();
    Err(format!(
        "{last}\nthe branch kept moving; its last commits:\n{log}"
    ))
}

fn configmap(ns: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  value: \"{value}\"\n"
    )
}

/// Posts the notice `serve`'s hook would post for a push of `sha`.
async fn notify(conn: &mut Conn, path: &str, url: &str, sha: &str) -> Result<(), String> {
    let body = json!({"ref": format!("refs/heads/{BRANCH}"), "after": sha, "repository": {"clone_url": url}})
        .to_string();
    let signature = sign_sha256(TOKEN.as_bytes(), body.as_bytes());
    let (status, _, _) = conn
        .send_with(
            Method::POST,
            path,
            "application/json",
            &[("x-signature", &signature)],
            Bytes::from(body),
        )
        .await?;
    if status == StatusCode::ACCEPTED {
        Ok(())
    } else {
        Err(format!("the receiver answered {status}"))
    }
}

/// Polls a `ConfigMap` through the API until its `value` is `want`.
async fn wait_value(api: &mut Conn, ns: &str, name: &str, want: &str) -> Result<(), String> {
    let t0 = Instant::now();
    let uri = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    loop {
        let (status, body) = api
            .send(Method::GET, &uri, "application/json", Bytes::new())
            .await?;
        if status == StatusCode::OK {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if v["data"]["value"] == want {
                return Ok(());
            }
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!("{ns}/{name} never showed {want}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `kubectl apply -f dir` against the server, timed.
fn kubectl_apply(kubeconfig: &Path, dir: &Path) -> Result<Duration, String> {
    let t0 = Instant::now();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-f"])
        .arg(dir)
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(t0.elapsed())
}

/// Runs the scenario and returns its result object.
// Long on purpose: a scenario reads top to bottom as the steps it measures and reports.
#[allow(clippy::too_many_lines)]
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = pushes(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut live = Live::start(&tmp.path().join("backflow")).await?;
    live.start_mirror_with("1s", Duration::from_secs(3600), Some(TOKEN), true)
        .await?;
    live.wait_mirroring().await?;
    let client = live.client();
    let mirror = live.mirror().ok_or("the mirror is not running")?;
    let metrics = mirror.register_metrics(ReceiverMetrics::register);
    let receiver = Receiver::start(
        client.clone(),
        Arc::new(mirror.branches()),
        metrics,
        Arc::new(SystemClock),
    );
    let listener = Listener::bind(([127, 0, 0, 1], 0).into(), receiver.router(), None)
        .await
        .map_err(|e| e.to_string())?;
    let path = webhook_path(
        TOKEN.as_bytes(),
        backflow_mirror::defaults::NAME,
        backflow_mirror::defaults::NAMESPACE,
    );
    let remote = path_str(&live.remote)?.to_string();
    let url = format!("file://{remote}");
    let mut api = Conn::open(live.addr()).await?;
    let mut hook = Conn::open(listener.addr).await?;
    for i in 0..OBJECTS {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("app-{i}"), "namespace": "default"}, "data": {"value": "0"}});
        api.send(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Bytes::from(body.to_string()),
        )
        .await?;
    }
    let work = tmp.path().join("person");
    // Wait until every object is in Git (and adopted), then take a clone.
    let t0 = Instant::now();
    loop {
        let files = live::remote_files(&live.remote, "live/default/configmaps")?;
        if (0..OBJECTS).all(|i| files.keys().any(|p| p.ends_with(&format!("app-{i}.yaml")))) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err("the seeded objects never reached Git".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    git(tmp.path(), &["clone", "-q", &remote, path_str(&work)?])?;
    let folder = work.join("live/default/configmaps");
    let baseline_dir = tmp.path().join("baseline");
    std::fs::create_dir_all(&baseline_dir).map_err(|e| e.to_string())?;
    let kubeconfig = tmp.path().join("backflow/data/kubeconfig");
    api.send(
        Method::POST,
        "/api/v1/namespaces",
        "application/json",
        Bytes::from(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "baseline"}})
                .to_string(),
        ),
    )
    .await?;

    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for k in 0..n {
        let name = format!("app-{}", k % OBJECTS);
        let value = format!("v{k}");
        std::fs::write(
            folder.join(format!("{name}.yaml")),
            configmap("default", &name, &value),
        )
        .map_err(|e| e.to_string())?;
        git(
            &work,
            &["commit", "-q", "-am", &format!("set {name} to {value}")],
        )?;
        push(&work)?;
        let sha = git(&work, &["rev-parse", "HEAD"])?;
        let t0 = Instant::now();
        notify(&mut hook, &path, &url, &sha).await?;
        wait_value(&mut api, "default", &name, &value).await?;
        ours.push(t0.elapsed());
        // The same folder applied by kubectl, into a namespace of its own.
        for i in 0..OBJECTS {
            let v = if i == k % OBJECTS {
                value.clone()
            } else {
                "0".into()
            };
            std::fs::write(
                baseline_dir.join(format!("app-{i}.yaml")),
                configmap("baseline", &format!("app-{i}"), &v),
            )
            .map_err(|e| e.to_string())?;
        }
        base.push(tokio::task::block_in_place(|| {
            kubectl_apply(&kubeconfig, &baseline_dir)
        })?);
        // Let the mirror's echo of the apply settle before the next push.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    // One push adding BULK files.
    let bulk = work.join("live/bulk");
    std::fs::create_dir_all(bulk.join("configmaps")).map_err(|e| e.to_string())?;
    std::fs::write(
        bulk.join("namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bulk\n",
    )
    .map_err(|e| e.to_string())?;
    for i in 0..BULK {
        std::fs::write(
            bulk.join(format!("configmaps/b-{i}.yaml")),
            configmap("bulk", &format!("b-{i}"), "1"),
        )
        .map_err(|e| e.to_string())?;
    }
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "1,000 new objects"])?;
    push(&work)?;
    let sha = git(&work, &["rev-parse", "HEAD"])?;
    let t0 = Instant::now();
    notify(&mut hook, &path, &url, &sha).await?;
    wait_value(&mut api, "bulk", &format!("b-{}", BULK - 1), "1").await?;
    let mut bulk_elapsed = t0.elapsed();
    for i in 0..BULK {
        wait_value(&mut api, "bulk", &format!("b-{i}"), "1").await?;
    }
    bulk_elapsed = bulk_elapsed.max(t0.elapsed());
    let rate = BULK as f64 / bulk_elapsed.as_secs_f64();
    let tip_after = git(
        &work,
        &["ls-remote", &remote, &format!("refs/heads/{BRANCH}")],
    )?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let tip_later = git(
        &work,
        &["ls-remote", &remote, &format!("refs/heads/{BRANCH}")],
    )?;
    let commits_after = git(&work, &["fetch", "-q", "origin"]).and_then(|_| {
        git(
            &work,
            &["rev-list", "--count", &format!("{sha}..origin/{BRANCH}")],
        )
    })?;
    let bulk_base_dir = tmp.path().join("bulk-baseline");
    std::fs::create_dir_all(&bulk_base_dir).map_err(|e| e.to_string())?;
    api.send(
        Method::POST,
        "/api/v1/namespaces",
        "application/json",
        Bytes::from(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bulk-baseline"}})
                .to_string(),
        ),
    )
    .await?;
    for i in 0..BULK {
        std::fs::write(
            bulk_base_dir.join(format!("b-{i}.yaml")),
            configmap("bulk-baseline", &format!("b-{i}"), "1"),
        )
        .map_err(|e| e.to_string())?;
    }
    let bulk_base = tokio::task::block_in_place(|| kubectl_apply(&kubeconfig, &bulk_base_dir))?;
    let base_rate = BULK as f64 / bulk_base.as_secs_f64();

    listener.shutdown().await;
    receiver.shutdown().await;
    live.stop().await;

    ours.sort();
    base.sort();
    let (o50, o99) = (percentile(&ours, 0.5), percentile(&ours, 0.99));
    let (b50, b99) = (percentile(&base, 0.5), percentile(&base, 0.99));
    let rows = vec![
        row(
            "push → live object updated, p50 ms",
            o50,
            b50,
            false,
            "`kubectl apply -f` of the folder (p50)",
        ),
        row(
            "push → live object updated, p99 ms",
            o99,
            b99,
            false,
            "`kubectl apply -f` of the folder (p99)",
        ),
        row(
            "objects applied/s, one push of 1,000 files",
            rate,
            base_rate,
            true,
            "`kubectl apply -f` of the same 1,000 files",
        ),
    ];
    let notes = vec![
        json!(format!(
            "Aim p50 < 200 ms: {o50:.1} ms, {}.",
            if o50 < 200.0 { "met" } else { "not met" }
        )),
        json!(format!(
            "Aim ≥ 500 objects/s for a 1,000-file push: {rate:.0}/s, {} (Flux's published figure ≈ 16 objects/s).",
            if rate >= 500.0 { "met" } else { "not met" }
        )),
        json!(format!(
            "{n} single-file pushes into a folder of {OBJECTS} objects (plus what the API holds), each announced by the signed notice serve's hook sends, timed until a GET shows the value. The bulk push settled with {commits_after} commit(s) after it on the branch (tip {} → {}).",
            tip_after.split_whitespace().next().unwrap_or(""),
            tip_later.split_whitespace().next().unwrap_or("")
        )),
        json!(format!(
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    Ok(json!({
        "scenario": "foreign-push",
        "parameters": {"pushes": n, "objects": OBJECTS, "bulk": BULK, "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(o50), "p99_ms": round2(o99), "bulk_objects_per_s": round2(rate), "commits_after_bulk": commits_after},
        "baseline": {"p50_ms": round2(b50), "p99_ms": round2(b99), "bulk_objects_per_s": round2(base_rate)},
        "rows": rows,
        "notes": notes,
    }))
}
