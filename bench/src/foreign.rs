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

use crate::bulk_apply::{self, ApplyTimes, BulkRun};
use crate::client::Conn;
use crate::git::{BRANCH, path_str, person_git as git};
use crate::hook::{HookReceiver, TOKEN};
use crate::live::{self, Live};
use crate::server::{percentile, round2, row};

/// Objects the folder holds while single-file pushes are timed.
const OBJECTS: usize = 100;
/// Files the first bulk push adds; kubectl applies as many.
const BULK: usize = 1000;
/// Files the second bulk push adds (a full run only).
const BIG_BULK: usize = 10_000;

fn bulk_sizes(quick: bool) -> &'static [usize] {
    if quick { &[BULK] } else { &[BULK, BIG_BULK] }
}

fn pushes(quick: bool) -> usize {
    if quick { 5 } else { 40 }
}

/// Pushes as a person does: rebased onto what the mirror pushed meanwhile, again if it pushed
/// in between.
pub(crate) fn push(work: &Path) -> Result<(), String> {
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
pub(crate) async fn wait_value(
    api: &mut Conn,
    ns: &str,
    name: &str,
    want: &str,
) -> Result<(), String> {
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
pub(crate) fn kubectl_apply(kubeconfig: &Path, dir: &Path) -> Result<Duration, String> {
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
pub(crate) struct Scene {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) live: Live,
    pub(crate) hook: HookReceiver,
    pub(crate) api: Conn,
    pub(crate) work: PathBuf,
    pub(crate) remote: String,
    pub(crate) kubeconfig: PathBuf,
}

/// What the bulk pushes measured.
struct Bulk {
    /// One run per size, smallest first.
    runs: Vec<BulkRun>,
    /// `kubectl apply -f` of the first size's files, objects/s.
    base_rate: f64,
    commits_after: String,
    tip_after: String,
    tip_later: String,
}

/// Creates a namespace through the API.
pub(crate) async fn namespace(api: &mut Conn, name: &str) -> Result<(), String> {
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
pub(crate) fn write_configmaps(
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
async fn single_pushes(scene: &mut Scene, n: usize) -> Result<Singles, String> {
    let folder = scene.work.join("live/default/configmaps");
    let baseline_dir = scene.tmp.path().join("baseline");
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    let mut applies = ApplyTimes::default();
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
        let times0 = ApplyTimes::read(&scene.live);
        let t0 = Instant::now();
        scene.hook.notify(&sha).await?;
        wait_value(&mut scene.api, "default", &name, &value).await?;
        ours.push(t0.elapsed());
        // The operation's metrics are kept once it ended, a moment after the write.
        applies.add(&ApplyTimes::after_an_apply(&scene.live, &times0).await);
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
    Ok(Singles {
        ours,
        base,
        applies,
    })
}

/// What the single-file pushes measured.
struct Singles {
    /// Notice → live, each push.
    ours: Vec<Duration>,
    /// kubectl applying the folder, each push.
    base: Vec<Duration>,
    /// The appliers' metrics over the pushes' windows.
    applies: ApplyTimes,
}

/// One push per size in `sizes`, each adding that many files, timed until every object is
/// live; then the commits the mirror made after the last settled, and kubectl applying the
/// first size's files.
async fn bulk_pushes(scene: &mut Scene, sizes: &[usize]) -> Result<Bulk, String> {
    let mut runs = Vec::new();
    let mut sha = String::new();
    for &files in sizes {
        runs.push(bulk_apply::push_and_time(scene, &format!("bulk-{files}"), files).await?);
        sha = git(&scene.work, &["rev-parse", "HEAD"])?;
    }
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
    let first = sizes.first().copied().unwrap_or(BULK);
    namespace(&mut scene.api, "bulk-baseline").await?;
    let dir = scene.tmp.path().join("bulk-baseline");
    write_configmaps(&dir, "bulk-baseline", "b-", first, |_| "1".into())?;
    let took = tokio::task::block_in_place(|| kubectl_apply(&scene.kubeconfig, &dir))?;
    Ok(Bulk {
        runs,
        base_rate: first as f64 / took.as_secs_f64(),
        commits_after,
        tip_after,
        tip_later,
    })
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = pushes(quick);
    let mut scene = set_up().await?;
    let mut singles = single_pushes(&mut scene, n).await?;
    let bulk = bulk_pushes(&mut scene, bulk_sizes(quick)).await?;
    let Scene {
        tmp, live, hook, ..
    } = scene;
    hook.stop().await;
    live.stop().await;
    drop(tmp);
    Ok(report(n, quick, &mut singles, &bulk))
}

/// The result object.
fn report(n: usize, quick: bool, singles: &mut Singles, bulk: &Bulk) -> Value {
    let (ours, base) = (&mut singles.ours, &mut singles.base);
    ours.sort();
    base.sort();
    let (o50, o99) = (percentile(ours, 0.5), percentile(ours, 0.99));
    let (b50, b99) = (percentile(base, 0.5), percentile(base, 0.99));
    let mut rows = vec![
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
    ];
    let mean_push_ms =
        ours.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / ours.len().max(1) as f64;
    rows.extend(single_breakdown(&singles.applies, n, mean_push_ms));
    rows.extend(bulk_rows(bulk));
    let mut notes = vec![
        json!(format!(
            "Aim push → live p50 ≤ 30 ms: {o50:.1} ms, {}; p99 ≤ 100 ms: {o99:.1} ms, {}.",
            met(o50 <= 30.0),
            met(o99 <= 100.0)
        )),
        json!(format!(
            "{n} single-file pushes into a folder of {OBJECTS} objects (plus what the API holds), each announced by the signed notice serve's hook sends, timed until a GET shows the value."
        )),
    ];
    notes.extend(bulk_notes(bulk));
    notes.push(json!(format!(
        "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
        live::load_average()
    )));
    let sizes: Vec<usize> = bulk.runs.iter().map(|r| r.files).collect();
    let rates: Vec<f64> = bulk.runs.iter().map(|r| round2(r.rate())).collect();
    json!({
        "scenario": "foreign-push",
        "parameters": {"pushes": n, "objects": OBJECTS, "bulk": sizes, "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(o50), "p99_ms": round2(o99), "bulk_objects_per_s": rates, "commits_after_bulk": bulk.commits_after},
        "baseline": {"p50_ms": round2(b50), "p99_ms": round2(b99), "bulk_objects_per_s": round2(bulk.base_rate)},
        "rows": rows,
        "notes": notes,
    })
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "not met" }
}

/// Where a single-file push's time went: the apply's phases (mean per apply), and the rest of
/// the mean push outside them.
fn single_breakdown(applies: &ApplyTimes, pushes: usize, mean_push_ms: f64) -> Vec<Value> {
    let none = |figure: String, v: f64, what: &str| json!({"figure": figure, "backflow": round2(v), "baseline": null, "ratio": null, "baseline_is": what});
    let per = applies.applies().max(1.0);
    let mut rows: Vec<Value> = applies
        .phase_ms()
        .map(|(phase, ms)| {
            none(
                format!("breakdown, one-file push: apply phase {phase}, mean ms per apply"),
                ms / per,
                &format!(
                    "— (backflow_apply_phase_seconds; {} applies over {pushes} pushes' windows)",
                    applies.applies()
                ),
            )
        })
        .collect();
    let in_apply: f64 = applies.phase_ms().map(|(_, ms)| ms / per).sum();
    rows.push(none(
        "breakdown, one-file push: outside the apply's phases (the notice, reading the remote, the flush with every watch stream's catch-up list, the operation recorded, the GET that sees it), mean ms".into(),
        mean_push_ms - in_apply,
        "— (the mean push minus the apply's phases)",
    ));
    rows
}

/// Each bulk push's rate against kubectl's, its time against linear growth from the first,
/// and where its apply's time went.
fn bulk_rows(bulk: &Bulk) -> Vec<Value> {
    let none = |figure: String, v: f64, what: &str| json!({"figure": figure, "backflow": round2(v), "baseline": null, "ratio": null, "baseline_is": what});
    let mut rows = Vec::new();
    let first = bulk.runs.first();
    for run in &bulk.runs {
        let files = run.files;
        rows.push(row(
            &format!("objects applied/s, one push of {files} files"),
            run.rate(),
            bulk.base_rate,
            true,
            &format!(
                "`kubectl apply -f` of {} of the same files",
                first.map_or(BULK, |f| f.files)
            ),
        ));
        if let Some(first) = first.filter(|f| f.files < files) {
            let linear = first.secs * files as f64 / first.files as f64;
            rows.push(row(
                &format!("one push of {files} files, notice → all live, s"),
                run.secs,
                linear,
                false,
                &format!("the {}-file push's time, grown linearly", first.files),
            ));
        }
        for (phase, ms) in run.phase_ms() {
            rows.push(none(
                format!("breakdown, {files} files: apply phase {phase}, ms"),
                ms,
                "— (backflow_apply_phase_seconds)",
            ));
        }
        rows.push(none(
            format!("breakdown, {files} files: the operation, request → success, ms"),
            run.request_to_success_ms(),
            "— (backflow_apply_latency_seconds)",
        ));
    }
    rows
}

/// The bulk pushes' aims, what their operations reported and which threads ran.
fn bulk_notes(bulk: &Bulk) -> Vec<Value> {
    let mut notes = Vec::new();
    for run in &bulk.runs {
        let files = run.files;
        let rate = run.rate();
        if files == BULK {
            let ratio = rate / bulk.base_rate.max(f64::EPSILON);
            notes.push(json!(format!(
                "Aim ≥ 2,000 objects/s for a {files}-file push: {rate:.0}/s, {}; ≥ 20× `kubectl apply -f` of the same files: {ratio:.1}×, {} (Flux's published figure ≈ 16 objects/s).",
                met(rate >= 2000.0),
                met(ratio >= 20.0)
            )));
        }
        if files == BIG_BULK {
            notes.push(json!(format!(
                "Aim a {files}-file push in ≤ 10 s: {:.2} s, {}.",
                run.secs,
                met(run.secs <= 10.0)
            )));
        }
        let cpu = &run.cpu;
        notes.push(json!(format!(
            "{files} files: {:.2} s from the notice until a list of the namespace held every object with its value; {} appl{} ran meanwhile; the claim reported \"{}\". The process kept {:.2} cores busy: the async runtime's threads (HTTP, server-side apply, admission, the applier, the mirror judging each write's echo) {:.2}, the store's writer thread {:.2} (durable commits), the branch worker {:.2}; waiting for a CPU: runtime {:.2}, store {:.2}.",
            run.secs,
            run.applies(),
            if (run.applies() - 1.0).abs() < f64::EPSILON { "y" } else { "ies" },
            run.report,
            cpu.cores(),
            cpu.busy("tokio-rt-worker"),
            cpu.busy("backflow-store"),
            cpu.busy("backflow-git"),
            cpu.queued("tokio-rt-worker"),
            cpu.queued("backflow-store"),
        )));
    }
    notes.push(json!(format!(
        "The bulk pushes settled with {} commit(s) after them on the branch (tip {} → {}): the applies' echoes were recognised, not published back.",
        bulk.commits_after,
        bulk.tip_after.split_whitespace().next().unwrap_or(""),
        bulk.tip_later.split_whitespace().next().unwrap_or("")
    )));
    notes
}
