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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::Conn;
use crate::git::{BRANCH, path_str, person_git as git};
use crate::hook::{HookReceiver, TOKEN};
use crate::live::{self, Live};
use crate::server::{percentile, round2, row};

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

/// What the scenario runs against: backflow with its receiver, a connection to the API, and a
/// person's clone of the remote.
struct Scene {
    tmp: tempfile::TempDir,
    live: Live,
    hook: HookReceiver,
    api: Conn,
    work: PathBuf,
    remote: String,
    kubeconfig: PathBuf,
}

/// What the bulk push measured.
struct Bulk {
    rate: f64,
    base_rate: f64,
    commits_after: String,
    tip_after: String,
    tip_later: String,
}

/// Creates a namespace through the API.
async fn namespace(api: &mut Conn, name: &str) -> Result<(), String> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    api.send(
        Method::POST,
        "/api/v1/namespaces",
        "application/json",
        Bytes::from(body.to_string()),
    )
    .await
    .map(|_| ())
}

/// `count` `ConfigMaps` `{prefix}{i}` of namespace `ns` with `value`, one file each in `dir`.
fn write_configmaps(
    dir: &Path,
    ns: &str,
    prefix: &str,
    count: usize,
    value: impl Fn(usize) -> String,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for i in 0..count {
        let name = format!("{prefix}{i}");
        std::fs::write(
            dir.join(format!("{name}.yaml")),
            configmap(ns, &name, &value(i)),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// backflow coordinating its default folder, `OBJECTS` `ConfigMaps` in it (in Git and adopted),
/// the receiver, and a clone taken once the mirror settled.
async fn set_up() -> Result<Scene, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut live = Live::start(&tmp.path().join("backflow")).await?;
    live.start_mirror_with("1s", Duration::from_secs(3600), Some(TOKEN), true)
        .await?;
    live.wait_mirroring().await?;
    let hook = HookReceiver::start(&live).await?;
    let remote = path_str(&live.remote)?.to_string();
    let mut api = Conn::open(live.addr()).await?;
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
    let work = tmp.path().join("person");
    git(tmp.path(), &["clone", "-q", &remote, path_str(&work)?])?;
    namespace(&mut api, "baseline").await?;
    let kubeconfig = tmp.path().join("backflow/data/kubeconfig");
    Ok(Scene {
        tmp,
        live,
        hook,
        api,
        work,
        remote,
        kubeconfig,
    })
}

/// `n` one-file pushes, each timed until the live object holds it, and the same folder applied
/// by kubectl into a namespace of its own.
async fn single_pushes(
    scene: &mut Scene,
    n: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let folder = scene.work.join("live/default/configmaps");
    let baseline_dir = scene.tmp.path().join("baseline");
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
            &scene.work,
            &["commit", "-q", "-am", &format!("set {name} to {value}")],
        )?;
        push(&scene.work)?;
        let sha = git(&scene.work, &["rev-parse", "HEAD"])?;
        let t0 = Instant::now();
        scene.hook.notify(&sha).await?;
        wait_value(&mut scene.api, "default", &name, &value).await?;
        ours.push(t0.elapsed());
        let changed = k % OBJECTS;
        write_configmaps(&baseline_dir, "baseline", "app-", OBJECTS, |i| {
            if i == changed {
                value.clone()
            } else {
                "0".into()
            }
        })?;
        base.push(tokio::task::block_in_place(|| {
            kubectl_apply(&scene.kubeconfig, &baseline_dir)
        })?);
        // Let the mirror's echo of the apply settle before the next push.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    Ok((ours, base))
}

/// One push adding `BULK` files, timed until every object is live; then the commits the mirror
/// made after it settled, and kubectl applying the same files.
async fn bulk_push(scene: &mut Scene) -> Result<Bulk, String> {
    let bulk = scene.work.join("live/bulk");
    write_configmaps(&bulk.join("configmaps"), "bulk", "b-", BULK, |_| "1".into())?;
    std::fs::write(
        bulk.join("namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bulk\n",
    )
    .map_err(|e| e.to_string())?;
    git(&scene.work, &["add", "-A"])?;
    git(&scene.work, &["commit", "-q", "-m", "1,000 new objects"])?;
    push(&scene.work)?;
    let sha = git(&scene.work, &["rev-parse", "HEAD"])?;
    let t0 = Instant::now();
    scene.hook.notify(&sha).await?;
    for i in 0..BULK {
        wait_value(&mut scene.api, "bulk", &format!("b-{i}"), "1").await?;
    }
    let rate = BULK as f64 / t0.elapsed().as_secs_f64();
    let tip = |work: &Path, remote: &str| {
        git(
            work,
            &["ls-remote", remote, &format!("refs/heads/{BRANCH}")],
        )
    };
    let tip_after = tip(&scene.work, &scene.remote)?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let tip_later = tip(&scene.work, &scene.remote)?;
    git(&scene.work, &["fetch", "-q", "origin"])?;
    let commits_after = git(
        &scene.work,
        &["rev-list", "--count", &format!("{sha}..origin/{BRANCH}")],
    )?;
    namespace(&mut scene.api, "bulk-baseline").await?;
    let dir = scene.tmp.path().join("bulk-baseline");
    write_configmaps(&dir, "bulk-baseline", "b-", BULK, |_| "1".into())?;
    let took = tokio::task::block_in_place(|| kubectl_apply(&scene.kubeconfig, &dir))?;
    Ok(Bulk {
        rate,
        base_rate: BULK as f64 / took.as_secs_f64(),
        commits_after,
        tip_after,
        tip_later,
    })
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = pushes(quick);
    let mut scene = set_up().await?;
    let (mut ours, mut base) = single_pushes(&mut scene, n).await?;
    let bulk = bulk_push(&mut scene).await?;
    let Scene {
        tmp, live, hook, ..
    } = scene;
    hook.stop().await;
    live.stop().await;
    drop(tmp);
    Ok(report(n, quick, &mut ours, &mut base, &bulk))
}

/// The result object.
// Long on purpose: the table's rows and notes, read top to bottom as they print.
#[allow(clippy::too_many_lines)]
fn report(
    n: usize,
    quick: bool,
    ours: &mut [Duration],
    base: &mut [Duration],
    bulk: &Bulk,
) -> Value {
    let Bulk {
        rate,
        base_rate,
        commits_after,
        tip_after,
        tip_later,
    } = bulk;
    let (rate, base_rate) = (*rate, *base_rate);
    ours.sort();
    base.sort();
    let (o50, o99) = (percentile(ours, 0.5), percentile(ours, 0.99));
    let (b50, b99) = (percentile(base, 0.5), percentile(base, 0.99));
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
    json!({
        "scenario": "foreign-push",
        "parameters": {"pushes": n, "objects": OBJECTS, "bulk": BULK, "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(o50), "p99_ms": round2(o99), "bulk_objects_per_s": round2(rate), "commits_after_bulk": commits_after},
        "baseline": {"p50_ms": round2(b50), "p99_ms": round2(b99), "bulk_objects_per_s": round2(base_rate)},
        "rows": rows,
        "notes": notes,
    })
}
