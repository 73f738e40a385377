//! The `mirror-latency` scenario: from a write through the API to its commit being on the remote,
//! commit window `0s`, one writer.
//!
//! backflow is measured by what a client sees: the write is sent with `X-Backflow-Wait: pushed` and
//! timed until its answer, which backflow gives once the commit holding it is on the remote. After
//! each answer the remote's branch is read (git2, straight from the bare repository's refs) and
//! must be the commit named in `X-Backflow-Commit`, so the figure is checked rather than trusted.
//!
//! Baselines in the same run, interleaved write by write with backflow (same paths, ~same bytes):
//! - bare minimum: git2 writes the blob, builds the tree from the previous one plus that path,
//!   commits, and pushes to a bare remote over `file://` (the `git` scenario's push loop);
//! - floor: the same commit written straight into a bare repository and its branch moved by
//!   compare-and-swap, no transport at all.
//!
//! The breakdown: a watch the benchmark holds on the same `ConfigMaps` times when each write's
//! event leaves the API server (HTTP, admission, store commit, event log); the branch worker's
//! own histograms (`backflow_git_build_duration_seconds`, `…_push_duration_seconds`) give the
//! commit's build and push; the rest is the mirror's handling of the event, the hops between the
//! mirror, the worker and the tracker, and the answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use git2::Repository;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::client::Conn;
use crate::git::{BRANCH, Minimum, Publish, init_remote};
use crate::live::{self, CONFIGMAPS, Live, PushedWrite, configmap_yaml, pushed_write};
use crate::server::{percentile, round2, row};

/// The aims: p50 at most twice the bare minimum's, and at most twice the in-place floor's.
const AIM_FACTOR: f64 = 2.0;
/// Objects written in rotation.
const OBJECTS: usize = 100;

fn writes(quick: bool) -> usize {
    if quick { 60 } else { 500 }
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = writes(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let load_before = live::load_average();
    let mut live = Live::start(&tmp.path().join("backflow")).await?;
    live.start_mirror("0s").await?;
    let warmup = live.wait_mirroring().await?;
    let mut baselines = Baselines::new(tmp.path())?;
    let events = EventTimes::watch(live.addr()).await?;
    let before = WorkerTimes::read(&live);
    let samples = measure(&live, &mut baselines, &events, n).await?;
    let worker = WorkerTimes::read(&live).since(&before);
    live.stop().await;
    Ok(report(
        n,
        quick,
        samples,
        &baselines,
        &worker,
        warmup,
        &load_before,
    ))
}

/// The two baselines, stepped write by write with backflow.
pub(crate) struct Baselines {
    minimum: Minimum,
    floor: Minimum,
    pub(crate) minimum_times: Vec<Duration>,
    pub(crate) floor_times: Vec<Duration>,
    minimum_failures: usize,
    floor_failures: usize,
}

impl Baselines {
    pub(crate) fn new(tmp: &std::path::Path) -> Result<Self, String> {
        let base_url = init_remote(&tmp.join("baseline-remote.git"))?;
        let cache =
            Repository::init_bare(tmp.join("baseline-cache.git")).map_err(|e| e.to_string())?;
        let floor_path = tmp.join("floor-remote.git");
        init_remote(&floor_path)?;
        let floor_repo = Repository::open_bare(&floor_path).map_err(|e| e.to_string())?;
        Ok(Self {
            minimum: Minimum::new(cache, Publish::Push(base_url))?,
            floor: Minimum::new(floor_repo, Publish::InPlace)?,
            minimum_times: Vec::new(),
            floor_times: Vec::new(),
            minimum_failures: 0,
            floor_failures: 0,
        })
    }

    pub(crate) fn step(&mut self, path: &str, bytes: &[u8]) {
        // git2 blocks: keep the runtime's other workers free for the server and the mirror.
        tokio::task::block_in_place(|| {
            let t0 = Instant::now();
            match self.minimum.step(path, bytes) {
                Ok(true) => self.minimum_times.push(t0.elapsed()),
                _ => self.minimum_failures += 1,
            }
            let t0 = Instant::now();
            match self.floor.step(path, bytes) {
                Ok(true) => self.floor_times.push(t0.elapsed()),
                _ => self.floor_failures += 1,
            }
        });
    }
}

/// When each write's watch event reached a watch the benchmark holds, by the token it wrote.
struct EventTimes(Arc<Mutex<HashMap<String, Instant>>>);

impl EventTimes {
    async fn watch(addr: std::net::SocketAddr) -> Result<Self, String> {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let mut body = Conn::open(addr)
            .await?
            .stream("/api/v1/namespaces/default/configmaps?watch=1")
            .await?;
        let record = seen.clone();
        tokio::spawn(async move {
            let mut buffer: Vec<u8> = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                let at = Instant::now();
                buffer.extend_from_slice(data);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
                    if let Some(token) = event["object"]["data"]["token"].as_str() {
                        let mut seen = record
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        seen.entry(token.to_string()).or_insert(at);
                    }
                }
            }
        });
        Ok(Self(seen))
    }

    fn of(&self, token: &str) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(token)
            .copied()
    }
}

/// Sums and counts of the branch worker's build and push histograms.
#[derive(Default)]
struct WorkerTimes {
    build_s: f64,
    builds: f64,
    push_s: f64,
    pushes: f64,
}

impl WorkerTimes {
    fn read(live: &Live) -> Self {
        let text = live
            .mirror()
            .map(|m| m.metrics_renderer()())
            .unwrap_or_default();
        let sum = |name: &str| {
            text.lines()
                .filter(|l| l.starts_with(name))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        Self {
            build_s: sum("backflow_git_build_duration_seconds_sum"),
            builds: sum("backflow_git_build_duration_seconds_count"),
            push_s: sum("backflow_git_push_duration_seconds_sum"),
            pushes: sum("backflow_git_push_duration_seconds_count"),
        }
    }

    fn since(&self, before: &Self) -> Self {
        Self {
            build_s: self.build_s - before.build_s,
            builds: self.builds - before.builds,
            push_s: self.push_s - before.push_s,
            pushes: self.pushes - before.pushes,
        }
    }

    /// Mean build and push, in milliseconds.
    fn means_ms(&self) -> (f64, f64) {
        let mean = |s: f64, n: f64| if n > 0.0 { s / n * 1000.0 } else { 0.0 };
        (
            mean(self.build_s, self.builds),
            mean(self.push_s, self.pushes),
        )
    }
}

/// What backflow's writes took.
#[derive(Default)]
struct Samples {
    /// Send → answer.
    answers: Vec<Duration>,
    /// Send → the write's event on the benchmark's watch.
    events: Vec<Duration>,
    failures: usize,
    tip_mismatch: usize,
}

async fn measure(
    live: &Live,
    baselines: &mut Baselines,
    events: &EventTimes,
    n: usize,
) -> Result<Samples, String> {
    let ours_remote = Repository::open_bare(&live.remote).map_err(|e| e.to_string())?;
    let mut conn = Conn::open(live.addr()).await?;
    let mut samples = Samples::default();
    let branch = format!("refs/heads/{BRANCH}");
    for i in 0..n {
        let name = format!("lat-{}", i % OBJECTS);
        let token = format!("t{i:06}");
        let path = format!("{CONFIGMAPS}/{name}.yaml");
        baselines.step(&path, configmap_yaml(&name, &token).as_bytes());
        let PushedWrite {
            sent: t0,
            took: elapsed,
            commit,
        } = pushed_write(&mut conn, &name, &token, i < OBJECTS).await;
        let Some(commit) = commit else {
            samples.failures += 1;
            continue;
        };
        samples.answers.push(elapsed);
        if let Some(at) = events.of(&token) {
            samples.events.push(at.saturating_duration_since(t0));
        }
        let tip = ours_remote
            .refname_to_id(&branch)
            .map(|o| o.to_string())
            .unwrap_or_default();
        if tip != commit {
            samples.tip_mismatch += 1;
        }
    }
    Ok(samples)
}

fn mean_ms(samples: &[Duration]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1000.0
}

/// The breakdown rows: where a write's time goes, in means (which add up, unlike medians).
fn breakdown(samples: &Samples, worker: &WorkerTimes, floor: &[Duration]) -> Vec<Value> {
    let (total, event) = (mean_ms(&samples.answers), mean_ms(&samples.events));
    let (build, push) = worker.means_ms();
    let none = |figure: &str, v: f64, what: &str| json!({"figure": figure, "backflow": round2(v), "baseline": null, "ratio": null, "baseline_is": what});
    let floor_is = "the in-place floor's whole write (blob, tree, commit, compare-and-swap), mean";
    vec![
        row(
            "breakdown: the whole write, mean ms",
            total,
            mean_ms(floor),
            false,
            floor_is,
        ),
        row(
            "breakdown: the branch worker's commit build (plan, blobs, tree, commit) and push, mean ms",
            build + push,
            mean_ms(floor),
            false,
            floor_is,
        ),
        none(
            "breakdown: of which the push (file://), mean ms",
            push,
            "— (backflow_git_push_duration_seconds)",
        ),
        none(
            "breakdown: the rest (HTTP, admission, durable store commit, watch, the mirror, the hops to the worker and back, the answer), mean ms",
            total - build - push,
            "— (the whole write minus the worker's build and push)",
        ),
        none(
            "breakdown: of the rest, until a watch held by the benchmark sees the write's event, mean ms",
            event,
            "— (overlaps the mirror's work when the benchmark's watch is served later than the mirror's)",
        ),
    ]
}

/// The p50 and p99 rows against the bare minimum and the in-place floor.
fn latency_rows(ours: &[Duration], base: &[Duration], in_place: &[Duration]) -> Vec<Value> {
    let baseline_is = "git2: blob, tree, commit, Remote::push to a bare remote over file://";
    let floor_is = "git2 commit written into the bare repository, branch moved by compare-and-swap";
    let p = percentile;
    vec![
        row(
            "write → on remote p50 ms",
            p(ours, 0.5),
            p(base, 0.5),
            false,
            baseline_is,
        ),
        row(
            "write → on remote p99 ms",
            p(ours, 0.99),
            p(base, 0.99),
            false,
            baseline_is,
        ),
        row(
            "write → on remote p50 ms, vs floor",
            p(ours, 0.5),
            p(in_place, 0.5),
            false,
            floor_is,
        ),
        row(
            "write → on remote p99 ms, vs floor",
            p(ours, 0.99),
            p(in_place, 0.99),
            false,
            floor_is,
        ),
    ]
}

/// The note that reads the breakdown.
fn breakdown_note(samples: &Samples, worker: &WorkerTimes, floor: &[Duration]) -> Value {
    let (total, event) = (mean_ms(&samples.answers), mean_ms(&samples.events));
    let (build, push) = worker.means_ms();
    let (rest, floor) = (total - build - push, mean_ms(floor));
    let outside = if floor > 0.0 { rest / floor } else { 0.0 };
    let reach = if outside > AIM_FACTOR {
        format!(
            "more than the floor aim's {AIM_FACTOR:.0}×: the aim asks that path to be faster, whatever the branch worker does"
        )
    } else {
        format!("within the floor aim's {AIM_FACTOR:.0}×")
    };
    json!(format!(
        "Breakdown of the mean write ({total:.2} ms; means add up, medians do not): the branch worker built {} commit(s) in {build:.2} ms and pushed {} time(s) in {push:.2} ms on average; the other {rest:.2} ms are HTTP, admission, the durable store commit, the watch, the mirror's handling of the event, the hops to the worker and back, and the answer — a watch the benchmark holds saw each write's event {event:.2} ms after it was sent. The in-place floor writes no durable store and has no transport: its whole write takes {floor:.2} ms on average, so the part outside the branch worker alone is {outside:.1}× it, {reach}. The floor creates a file per object and one to move its ref, so it follows the file system's state (creations cost more for a while after many deletions, as the benchmarks before this one make) and the ratio with it.",
        worker.builds, worker.pushes,
    ))
}

/// The rows, aims and notes.
fn report(
    n: usize,
    quick: bool,
    mut samples: Samples,
    baselines: &Baselines,
    worker: &WorkerTimes,
    warmup: Duration,
    load_before: &str,
) -> Value {
    samples.answers.sort();
    samples.events.sort();
    let mut base = baselines.minimum_times.clone();
    let mut in_place = baselines.floor_times.clone();
    base.sort();
    in_place.sort();
    let ours = &samples.answers;
    let (o50, o99) = (percentile(ours, 0.5), percentile(ours, 0.99));
    let (b50, b99) = (percentile(&base, 0.5), percentile(&base, 0.99));
    let (f50, f99) = (percentile(&in_place, 0.5), percentile(&in_place, 0.99));
    let factor = if b50 > 0.0 { o50 / b50 } else { 0.0 };
    let floor_factor = if f50 > 0.0 { o50 / f50 } else { 0.0 };
    let clean = samples.failures == 0 && samples.tip_mismatch == 0;
    let met = factor <= AIM_FACTOR && clean;
    let floor_met = floor_factor <= AIM_FACTOR && clean;
    let mut rows = latency_rows(ours, &base, &in_place);
    rows.extend(breakdown(&samples, worker, &in_place));
    let said = |m: bool| if m { "met" } else { "not met" };
    let notes = vec![
        json!(format!(
            "Aim: p50 ≤ {AIM_FACTOR:.0}× the bare minimum's: {o50:.2} ms against {b50:.2} ms, {factor:.2}×, {}.",
            said(met)
        )),
        json!(format!(
            "Aim: p50 ≤ {AIM_FACTOR:.0}× the in-place floor's: {o50:.2} ms against {f50:.2} ms, {floor_factor:.2}×, {}.",
            said(floor_met)
        )),
        breakdown_note(&samples, worker, &in_place),
        json!(
            "Measured by timing the answer of a write sent with X-Backflow-Wait: pushed (the whole path a client waits for: HTTP, store commit, watch, mirror, commit, push, tracker). After every answer the backflow remote's branch was read: it must be the commit named in X-Backflow-Commit."
        ),
        json!(format!(
            "{n} writes from one writer over {OBJECTS} objects (the first {} create, the rest merge-patch), commit window 0s; backflow {} answered with a commit, {} failures, {} answers whose commit was not the remote's tip; bare minimum {} failures, floor {} failures.",
            n.min(OBJECTS),
            ours.len(),
            samples.failures,
            samples.tip_mismatch,
            baselines.minimum_failures,
            baselines.floor_failures
        )),
        json!(format!(
            "The three sides alternate write by write. The mirror pushed its first probe {:.1} s after start (not counted).",
            warmup.as_secs_f64()
        )),
        json!(format!(
            "Load average (1/5/15 min) before: {load_before}, after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    json!({
        "scenario": "mirror-latency",
        "parameters": {"writes": n, "objects": OBJECTS, "commit_window": "0s", "writers": 1,
                        "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(o50), "p99_ms": round2(o99), "answered": ours.len(),
                      "failures": samples.failures, "tip_mismatches": samples.tip_mismatch},
        "baseline": {"p50_ms": round2(b50), "p99_ms": round2(b99), "failures": baselines.minimum_failures},
        "floor": {"p50_ms": round2(f50), "p99_ms": round2(f99), "failures": baselines.floor_failures},
        "ratio": {"p50_factor": round2(factor), "aim_factor": AIM_FACTOR, "aim_met": met,
                  "floor_factor": round2(floor_factor), "floor_aim_met": floor_met},
        "rows": rows,
        "notes": notes,
    })
}
