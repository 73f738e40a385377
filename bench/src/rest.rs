//! The `rest-writes` scenario: W concurrent writers, each creating and then updating its own
//! `ConfigMaps` (~1 KiB), every write answered only once it is on a local bare remote.
//!
//! - backflow: the API server and the mirror in this process, wired like `backflow serve`
//!   (default configuration, commit window `0s`; and 16 writers with the default `1s`, where
//!   group commit answers them; those 16 again answered as soon as the store committed each
//!   write, the latency aim's floor; and those again, ten times as long, into a folder growing
//!   to 3,200 files),
//!   writers POST and PATCH over HTTP with
//!   `X-Backflow-Wait: pushed`; a write counts as acknowledged when it is answered 201/200 with a
//!   commit SHA in `X-Backflow-Commit`.
//! - baseline, in the same run: seed 004's version three (git worktrees) with the `git` CLI. One
//!   main clone made at start; per request `git worktree add -b <session> <dir> main`, write the
//!   file, `git add`, `git commit`, then up to 12 × (`git pull origin main --rebase`,
//!   `git push origin <session>:main`) 50 ms apart, then `git pull` in the main clone, and
//!   `git worktree remove` (forced, then deleted, when that fails). A request is acknowledged
//!   when the push went through and the main clone's pull succeeded (the deployed service answers
//!   500 when that pull fails, even though the push landed).
//!
//! Both sides write the same files (`live/default/configmaps/<name>.yaml`) in the same order:
//! writer w's op i creates `rw-<w>-<i/2>` when i is even and rewrites it when i is odd, with a
//! unique token in the data. Afterwards each remote's final tree is read with `git ls-tree` and
//! `git cat-file`: an acknowledged write is lost when its object's file holds neither its token
//! nor a later write's token.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::client::Conn;
use crate::cpu::{CpuUse, ThreadTimes};
use crate::git::{BRANCH, init_remote, path_str};
use crate::live::{self, COMMIT, CONFIGMAPS, Live, WAIT, configmap_write, configmap_yaml, is_sha};
use crate::server::{percentile, round2, row};

/// The aim from the issue: with 16 writers, at least 50× the baseline's throughput.
const AIM_RATIO: f64 = 50.0;
/// Group commit's aim: 16 waiting writers under the default configuration, at least 200× the
/// baseline's throughput and 700 pushed writes/s.
const GROUP_AIM_RATIO: f64 = 200.0;
/// See [`GROUP_AIM_RATIO`].
const GROUP_AIM_RATE: f64 = 700.0;
/// How many times the baseline tries pull and push (apl-api's `GIT_PUSH_RETRIES`).
const PUSH_ATTEMPTS: usize = 12;
/// The fixed pause between the baseline's attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// How long a backflow write may wait for its push.
const WAIT_VALUE: &str = "pushed;timeout=120s";

struct Level {
    writers: usize,
    backflow_ops: usize,
    baseline_ops: usize,
}

fn levels(quick: bool) -> Vec<Level> {
    let l = |writers, backflow_ops, baseline_ops| Level {
        writers,
        backflow_ops,
        baseline_ops,
    };
    if quick {
        vec![l(1, 40, 6), l(4, 20, 4), l(16, 10, 2)]
    } else {
        vec![l(1, 200, 24), l(4, 100, 8), l(16, 40, 4), l(64, 16, 2)]
    }
}

/// Writer w's op i: the object it writes, its token, and whether it creates the object.
fn op(w: usize, i: usize) -> (String, String, bool) {
    (
        format!("rw-{w}-{}", i / 2),
        format!("w{w:03}i{i:05}"),
        i.is_multiple_of(2),
    )
}

/// What one side did at one level.
#[derive(Default)]
struct Run {
    /// (writer, op, acknowledged, latency when acknowledged).
    ops: Vec<(usize, usize, bool, Option<Duration>)>,
    /// Why the other ops failed.
    failures: BTreeMap<String, usize>,
    /// The commits the acknowledged writes were answered with (`X-Backflow-Commit`).
    commits: BTreeSet<String>,
    wall: f64,
    /// Where the process's CPU time went while the writers ran (backflow's side only).
    cpu: CpuUse,
}

impl Run {
    fn acked(&self) -> usize {
        self.ops.iter().filter(|o| o.2).count()
    }

    fn failed(&self) -> usize {
        self.ops.len() - self.acked()
    }

    fn rate(&self) -> f64 {
        if self.wall > 0.0 {
            self.acked() as f64 / self.wall
        } else {
            0.0
        }
    }

    fn latencies(&self) -> Vec<Duration> {
        let mut l: Vec<Duration> = self.ops.iter().filter_map(|o| o.3).collect();
        l.sort();
        l
    }

    /// Acknowledged writes whose content is not in the final tree (nor superseded there by a
    /// later write of the same object).
    fn lost(&self, files: &BTreeMap<String, Vec<u8>>) -> usize {
        let mut lost = 0;
        for &(w, i, acked, _) in &self.ops {
            if !acked {
                continue;
            }
            let (name, _, _) = op(w, i);
            let Some(content) = files.get(&format!("{name}.yaml")) else {
                lost += 1;
                continue;
            };
            let content = String::from_utf8_lossy(content);
            // This op or any later op of the same object (same writer, same pair of ops).
            let later = (i..(i / 2) * 2 + 2).any(|j| content.contains(&op(w, j).1));
            if !later {
                lost += 1;
            }
        }
        lost
    }
}

/// What a level's writers wait for before their write counts as acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    /// `X-Backflow-Wait: pushed`: the commit holding the write is on the remote.
    Pushed,
    /// No wait: the API's answer, once the store committed the write durably (the mirror
    /// still publishes it, within its window).
    Stored,
}

async fn backflow_level(
    dir: &Path,
    writers: usize,
    ops: usize,
    window: &str,
    ack: Ack,
) -> Result<(Run, usize, f64), String> {
    let mut live = Live::start(dir).await?;
    live.start_mirror(window).await?;
    let warmup = live.wait_mirroring().await?;
    let addr = live.addr();
    let mut conns = Vec::new();
    for _ in 0..writers {
        conns.push(Conn::open(addr).await?);
    }
    let start = Instant::now();
    let threads_before = ThreadTimes::now();
    let mut tasks = Vec::new();
    for (w, mut conn) in conns.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut run = Run::default();
            for i in 0..ops {
                let (name, token, create) = op(w, i);
                let (method, path, ct, body, want) = configmap_write(&name, &token, create);
                let t0 = Instant::now();
                let wait: &[(&str, &str)] = match ack {
                    Ack::Pushed => &[(WAIT, WAIT_VALUE)],
                    Ack::Stored => &[],
                };
                let answer = conn
                    .send_with(method, &path, ct, wait, Bytes::from(body.to_string()))
                    .await;
                let outcome = match answer {
                    Ok((status, _, _)) if status == want && ack == Ack::Stored => None,
                    Ok((status, headers, _)) if status == want => match headers.get(COMMIT) {
                        Some(v) if is_sha(v) => {
                            run.commits
                                .insert(v.to_str().unwrap_or_default().to_string());
                            None
                        }
                        Some(v) => {
                            Some(format!("answered {COMMIT}: {}", v.to_str().unwrap_or("?")))
                        }
                        None => Some(format!("answered without {COMMIT}")),
                    },
                    Ok((status, _, _)) => Some(format!("answered {status}")),
                    Err(e) => Some(format!("transport: {e}")),
                };
                match outcome {
                    None => run.ops.push((w, i, true, Some(t0.elapsed()))),
                    Some(why) => {
                        run.ops.push((w, i, false, None));
                        *run.failures.entry(why).or_default() += 1;
                    }
                }
            }
            run
        }));
    }
    let mut run = Run::default();
    for t in tasks {
        let r = t.await.map_err(|e| e.to_string())?;
        run.ops.extend(r.ops);
        for (k, v) in r.failures {
            *run.failures.entry(k).or_default() += v;
        }
        run.commits.extend(r.commits);
    }
    run.wall = start.elapsed().as_secs_f64();
    run.cpu = ThreadTimes::now().since(&threads_before);
    let remote = live.remote.clone();
    live.stop().await;
    let files = tokio::task::spawn_blocking(move || live::remote_files(&remote, CONFIGMAPS))
        .await
        .map_err(|e| e.to_string())??;
    let lost = run.lost(&files);
    Ok((run, lost, warmup.as_secs_f64()))
}

/// Runs one git command in `dir`; the error names the command and git's complaint.
fn git_in(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "git {}: {}",
            args.first().copied().unwrap_or(""),
            err.lines().last().unwrap_or("").trim()
        ))
    }
}

/// The baseline's state: the bare remote and the main clone next to the session worktrees.
struct Baseline {
    remote: PathBuf,
    root: PathBuf,
    main: PathBuf,
}

impl Baseline {
    /// Creates the remote with one commit on `main`, and the main clone (the service's startup).
    fn setup(dir: &Path) -> Result<Self, String> {
        let remote = dir.join("baseline-remote.git");
        let url = init_remote(&remote)?;
        let root = dir.join("values");
        std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
        let main = root.join("main");
        crate::git::git(&["clone", "--quiet", &url, path_str(&main)?])?;
        git_in(&main, &["config", "user.name", "baseline"])?;
        git_in(&main, &["config", "user.email", "baseline@localhost"])?;
        git_in(
            &main,
            &["symbolic-ref", "HEAD", &format!("refs/heads/{BRANCH}")],
        )?;
        git_in(
            &main,
            &["commit", "--quiet", "--allow-empty", "-m", "initial commit"],
        )?;
        git_in(&main, &["push", "--quiet", "-u", "origin", BRANCH])?;
        Ok(Self { remote, root, main })
    }

    /// One write request, seed 004 version three. `Err` names the step that failed.
    fn request(&self, session: &str, file: &str, content: &str) -> Result<(), String> {
        let wt = self.root.join(session);
        let wt_s = path_str(&wt)?.to_string();
        git_in(
            &self.main,
            &["worktree", "add", "--quiet", "-b", session, &wt_s, BRANCH],
        )
        .map_err(|e| format!("worktree add: {e}"))?;
        let result = self.in_session(&wt, session, file, content);
        if git_in(&self.main, &["worktree", "remove", &wt_s]).is_err()
            && git_in(&self.main, &["worktree", "remove", "--force", &wt_s]).is_err()
        {
            let _ = std::fs::remove_dir_all(&wt);
        }
        result
    }

    fn in_session(
        &self,
        wt: &Path,
        session: &str,
        file: &str,
        content: &str,
    ) -> Result<(), String> {
        let path = wt.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("write: {e}"))?;
        }
        std::fs::write(&path, content).map_err(|e| format!("write: {e}"))?;
        git_in(wt, &["add", "./*"]).map_err(|e| format!("add: {e}"))?;
        git_in(
            wt,
            &[
                "commit",
                "--quiet",
                "-m",
                "otomi-api commit by bench@localhost",
            ],
        )
        .map_err(|e| format!("commit: {e}"))?;
        let refspec = format!("{session}:{BRANCH}");
        let mut pushed = false;
        for attempt in 1..=PUSH_ATTEMPTS {
            let tried = git_in(wt, &["pull", "--quiet", "origin", BRANCH, "--rebase=true"])
                .and_then(|()| git_in(wt, &["push", "--quiet", "origin", &refspec]));
            if tried.is_ok() {
                pushed = true;
                break;
            }
            if attempt < PUSH_ATTEMPTS {
                std::thread::sleep(RETRY_PAUSE);
            }
        }
        if !pushed {
            return Err(format!("push: {PUSH_ATTEMPTS} attempts failed (409)"));
        }
        git_in(&self.main, &["pull", "--quiet"]).map_err(|e| format!("main clone pull (500): {e}"))
    }
}

/// Shortens a failure to its step and the gist of git's message, for counting.
fn failure_kind(e: &str) -> String {
    let (step, rest) = e.split_once(':').unwrap_or((e, ""));
    let gist = rest
        .trim()
        .trim_start_matches("git ")
        .split(['\'', '"', '/'])
        .next()
        .unwrap_or("")
        .trim();
    let gist: String = gist.chars().take(60).collect();
    if gist.is_empty() {
        step.to_string()
    } else {
        format!("{step}: {gist}")
    }
}

fn baseline_level(dir: &Path, writers: usize, ops: usize) -> Result<(Run, usize), String> {
    let base = Arc::new(Baseline::setup(dir)?);
    let start = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let base = base.clone();
            std::thread::spawn(move || {
                let mut run = Run::default();
                for i in 0..ops {
                    let (name, token, _) = op(w, i);
                    let file = format!("{CONFIGMAPS}/{name}.yaml");
                    let session = format!("session-{w}-{i}");
                    let t0 = Instant::now();
                    match base.request(&session, &file, &configmap_yaml(&name, &token)) {
                        Ok(()) => run.ops.push((w, i, true, Some(t0.elapsed()))),
                        Err(e) => {
                            run.ops.push((w, i, false, None));
                            *run.failures.entry(failure_kind(&e)).or_default() += 1;
                        }
                    }
                }
                run
            })
        })
        .collect();
    let mut run = Run::default();
    for h in handles {
        let r = h.join().map_err(|_| "a baseline writer panicked")?;
        run.ops.extend(r.ops);
        for (k, v) in r.failures {
            *run.failures.entry(k).or_default() += v;
        }
    }
    run.wall = start.elapsed().as_secs_f64();
    let files = live::remote_files(&base.remote, CONFIGMAPS)?;
    let lost = run.lost(&files);
    Ok((run, lost))
}

fn describe(failures: &BTreeMap<String, usize>) -> String {
    if failures.is_empty() {
        return "none".into();
    }
    failures
        .iter()
        .map(|(k, v)| format!("{v}× {k}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn side_json(run: &Run, lost: usize) -> Value {
    let lat = run.latencies();
    json!({"writes": run.ops.len(), "acknowledged": run.acked(), "failures": run.failed(), "lost": lost,
           "writes_per_s": round2(run.rate()), "p50_ms": round2(percentile(&lat, 0.5)),
           "p99_ms": round2(percentile(&lat, 0.99)), "wall_s": round2(run.wall),
           "failure_kinds": run.failures, "cpu": run.cpu.to_json()})
}

/// Throughput, p50, p99 and failures of one level, each beside the baseline's.
fn level_rows(w: usize, ours: (&Run, usize), base: (&Run, usize)) -> Vec<Value> {
    let ((ours, ours_lost), (base, base_lost)) = (ours, base);
    let (ol, bl) = (ours.latencies(), base.latencies());
    vec![
        row(
            &format!("pushed writes/s, {w} writers"),
            ours.rate(),
            base.rate(),
            true,
            BASELINE_IS,
        ),
        row(
            &format!("write p50 ms, {w} writers"),
            percentile(&ol, 0.5),
            percentile(&bl, 0.5),
            false,
            BASELINE_IS,
        ),
        row(
            &format!("write p99 ms, {w} writers"),
            percentile(&ol, 0.99),
            percentile(&bl, 0.99),
            false,
            BASELINE_IS,
        ),
        json!({"figure": format!("failed / lost writes, {w} writers"),
        "backflow": format!("{} / {} of {}", ours.failed(), ours_lost, ours.ops.len()),
        "baseline": format!("{} / {} of {}", base.failed(), base_lost, base.ops.len()),
        "ratio": null, "baseline_is": BASELINE_IS}),
    ]
}

/// 16 writers that wait for the push under the default 1 s window, `ops` each, in `dir`: group
/// commit closes the window as soon as the worker is idle, and what arrives while a push is in
/// flight shares the next commit.
async fn group_commit_level(dir: &Path, ops: usize) -> Result<(Run, usize), String> {
    let (run, lost, _) = backflow_level(dir, 16, ops, "1s", Ack::Pushed).await?;
    Ok((run, lost))
}

/// Ops per writer of the large-folder group-commit level (ten times the group-commit level's):
/// the folder ends with 16 × ops / 2 files, and the branch worker rebuilds the folder's tree for
/// every commit, so its cost grows with the folder (shown, not an aim).
fn large_folder_ops(quick: bool) -> usize {
    if quick { 100 } else { 400 }
}

/// One writer that waits for the push under the default 1 s window: what group commit costs a
/// lone writer against one commit per change (window 0s).
async fn lone_waiter_level(tmp: &Path, quick: bool) -> Result<Run, String> {
    let ops = if quick { 40 } else { 200 };
    let dir = tmp.join("backflow-1-window-1s");
    let (run, _, _) = backflow_level(&dir, 1, ops, "1s", Ack::Pushed).await?;
    Ok(run)
}

/// The group-commit level's 16 writers again, answered once the store committed their writes
/// (no wait for the push): the part of a waiting write's latency that is the API server's own
/// durable write under that concurrency, with the mirror still publishing in the background.
/// A floor for the 16-writer latency aim, from the same run.
async fn stored_floor_level(tmp: &Path, ops: usize) -> Result<(Run, usize), String> {
    let dir = tmp.join("backflow-16-window-1s-stored");
    let (run, lost, _) = backflow_level(&dir, 16, ops, "1s", Ack::Stored).await?;
    Ok((run, lost))
}

/// The latency aims of group commit, said as a note: 16 waiting writers' p50 within 2× a lone
/// waiting writer's, and a lone waiting writer's p50 within 2× its window-0s p50.
fn group_latency_aim(sixteen: &Run, lone: &Run, lone_0s_p50: Option<f64>) -> Value {
    let p16 = percentile(&sixteen.latencies(), 0.5);
    let p1 = percentile(&lone.latencies(), 0.5);
    let p0 = lone_0s_p50.unwrap_or(f64::NAN);
    let said = |met: bool| if met { "met" } else { "not met" };
    json!(format!(
        "Aim, latency under group commit (window 1s): 16 waiting writers' p50 ≤ 2× one waiting writer's: {p16:.2} ms against {p1:.2} ms, {:.1}×, {}; one waiting writer's p50 ≤ 2× its window-0s p50: {p1:.2} ms against {p0:.2} ms, {:.1}×, {}. {}",
        p16 / p1,
        said(p16 <= 2.0 * p1),
        p1 / p0,
        said(p1 <= 2.0 * p0),
        little_bound(sixteen, p1)
    ))
}

/// What the 16-writer latency aim asks of throughput: each writer always has one write in
/// flight, so by Little's law their mean latency is 16 / throughput, whatever the grouping; and
/// where the level's CPU time went, which says what bounds that throughput here.
fn little_bound(sixteen: &Run, lone_p50: f64) -> String {
    let lat = sixteen.latencies();
    let mean =
        lat.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / lat.len().max(1) as f64;
    let rate = sixteen.rate();
    let needed = 16_000.0 / (2.0 * lone_p50);
    format!(
        "Each of the 16 writers always has one write in flight, so by Little's law their mean latency is 16 / throughput whatever the grouping: {:.1} ms at {rate:.0} writes/s (measured mean {mean:.1} ms). A p50 of 2× the lone writer's ({:.1} ms) asks for about {needed:.0} pushed writes/s, {:.1}× this run's. {} {}",
        16_000.0 / rate,
        2.0 * lone_p50,
        needed / rate,
        cpu_note(&sixteen.cpu),
        cpu_budget(&sixteen.cpu, rate, needed)
    )
}

/// What a throughput asks of the CPU time per write: the ceiling this run's cost per write
/// puts on throughput (the whole process on the machine's 2 cores; the branch worker on its
/// one thread), and the cost per write `needed` writes/s would allow.
fn cpu_budget(cpu: &CpuUse, rate: f64, needed: f64) -> String {
    if cpu.by_name.is_empty() || rate <= 0.0 || needed <= 0.0 {
        return String::new();
    }
    let per_write = cpu.cores() / rate * 1000.0;
    let worker_per_write = cpu.busy("backflow-git:") / rate * 1000.0;
    format!(
        "That is {per_write:.2} ms of CPU per pushed write, {worker_per_write:.2} ms of it on the worker's thread: at that cost the 2 cores allow at most {:.0} writes/s and the worker's one thread {:.0}/s, while {needed:.0}/s allows {:.2} ms per write and {:.2} ms on the worker's thread.",
        2000.0 / per_write,
        1000.0 / worker_per_write.max(f64::EPSILON),
        2000.0 / needed,
        1000.0 / needed,
    )
}

/// Where a level's CPU time went, said as a sentence: the cores the process kept busy and the
/// share of each kind of thread (thread names as Linux keeps them, 15 bytes).
fn cpu_note(cpu: &CpuUse) -> String {
    if cpu.by_name.is_empty() {
        return "Where the CPU time went is not known (no /proc/self/task).".into();
    }
    format!(
        "While the writers ran, the process kept {:.2} of the machine's 2 cores busy: the branch worker's thread (which plans, builds and pushes every commit, one at a time) ran {:.0} % of the wall time and waited for a CPU another {:.0} %, the async runtime's threads (HTTP, admission, the watch, the mirror, and the benchmark's own 16 clients) used {:.2} cores, the store's writer thread {:.2}, the roll-up thread (small packs merged beside the worker) {:.2} (from /proc/self/task/*/schedstat).",
        cpu.cores(),
        100.0 * cpu.busy("backflow-git:"),
        100.0 * cpu.queued("backflow-git:"),
        cpu.busy("tokio-rt"),
        cpu.busy("backflow-store"),
        cpu.busy("backflow-roll:"),
    )
}

/// A group-commit level's rows (`what`: how it was run): throughput beside the 16-writer
/// baseline, and its p50.
fn group_commit_rows(slow: &Run, base16: f64, what: &str) -> Vec<Value> {
    let mut p50 = row(
        &format!("write p50 ms, 16 writers, {what}"),
        percentile(&slow.latencies(), 0.5),
        0.0,
        false,
        "— (no baseline figure)",
    );
    p50["baseline"] = Value::Null;
    p50["ratio"] = Value::Null;
    vec![
        row(
            &format!("pushed writes/s, 16 writers, {what}"),
            slow.rate(),
            base16,
            true,
            BASELINE_IS,
        ),
        p50,
    ]
}

/// Whether group commit meets its aim, said as a note.
fn group_commit_aim(slow: &Run, slow_lost: usize, base16: f64) -> Value {
    let ratio = if base16 > 0.0 {
        slow.rate() / base16
    } else {
        f64::INFINITY
    };
    let met = ratio >= GROUP_AIM_RATIO
        && slow.rate() >= GROUP_AIM_RATE
        && slow.failed() == 0
        && slow_lost == 0;
    json!(format!(
        "Aim with 16 waiting writers under the default configuration (window 1s, group commit): ≥ {GROUP_AIM_RATIO:.0}× the baseline and ≥ {GROUP_AIM_RATE:.0} pushed writes/s, 0 failures, 0 lost: {ratio:.1}×, {:.0}/s, {} failures, {slow_lost} lost: {}.",
        slow.rate(),
        slow.failed(),
        if met { "met" } else { "not met" }
    ))
}

/// A level's p50 that has no baseline figure (the lone waiting writer's, the stored floor's).
fn unbaselined_p50_row(figure: &str, run: &Run) -> Value {
    let mut p50_row = row(
        figure,
        percentile(&run.latencies(), 0.5),
        0.0,
        false,
        "— (no baseline figure)",
    );
    p50_row["baseline"] = Value::Null;
    p50_row["ratio"] = Value::Null;
    p50_row
}

/// What the stored floor says of the 16-writer latency aim: how much of the aim's budget (2×
/// the lone waiting writer's p50) the API's own durable write under 16 writers takes, and how
/// much more than that floor the waiting writers spent on Git.
fn stored_floor_note(sixteen: &Run, lone: &Run, (stored, stored_lost): (&Run, usize)) -> Value {
    let p16 = percentile(&sixteen.latencies(), 0.5);
    let p1 = percentile(&lone.latencies(), 0.5);
    let floor = percentile(&stored.latencies(), 0.5);
    json!(format!(
        "Floor for that aim, from the same run: the same 16 writers answered once the store committed each write durably, without waiting for the push (the mirror publishes behind them, window 1s): {:.0} writes/s, p50 {floor:.2} ms, {:.1}× the lone waiting writer's p50, {} failures, {stored_lost} lost. The API's own durable write under 16 writers takes {:.0} % of the aim's {:.2} ms, leaving {:.2} ms for everything Git adds to a write (the watch event, planning and building a commit of the group's writes, pushing it, and the answer); the 16 waiting writers' p50 was {:.2} ms above this floor.",
        stored.rate(),
        floor / p1,
        stored.failed(),
        100.0 * floor / (2.0 * p1),
        2.0 * p1,
        (2.0 * p1 - floor).max(0.0),
        p16 - floor,
    ))
}

/// The aims, met or not, and what the group-commit level did: the first notes of a run.
/// `at_16` is the 16-writer level's (ratio, failures, lost, baseline rate).
fn aim_notes(
    at_16: Option<(f64, usize, usize, f64)>,
    group: &GroupCommitRuns,
    lone_0s_p50: Option<f64>,
) -> Vec<Value> {
    let (slow, slow_lost, lone) = (&group.sixteen, group.sixteen_lost, &group.lone);
    let mut head = Vec::new();
    match at_16 {
        Some((ratio, failed, lost, _)) => head.push(json!(format!(
            "Aim with 16 writers: ≥ {AIM_RATIO:.0}× the baseline's throughput, 0 failures, 0 lost: {ratio:.1}×, {failed} failures, {lost} lost: {}.",
            if ratio >= AIM_RATIO && failed == 0 && lost == 0 { "met" } else { "not met" }
        ))),
        None => head.push(json!("No 16-writer level in this run.")),
    }
    head.push(group_commit_aim(
        slow,
        slow_lost,
        at_16.map_or(0.0, |a| a.3),
    ));
    head.push(group_latency_aim(slow, lone, lone_0s_p50));
    head.push(stored_floor_note(
        slow,
        lone,
        (&group.stored, group.stored_lost),
    ));
    head.push(json!(
        "The levels run with commit window 0s (one commit per change, `backflow serve --commit-window 0s`). With the default 1s window a write that waits for the push does not sit out the window: the worker closes it as soon as nothing is in flight, and the writes that arrive while a push is in flight share the next commit (group commit); its rows show 16 writers."
    ));
    head.push(json!(format!(
        "16 writers with window 1s: {} writes, {} failures, {} lost, p50 {:.0} ms; the writes were answered with {} distinct commits ({:.1} writes per commit; window 0s makes one per write).",
        slow.ops.len(),
        slow.failed(),
        slow_lost,
        percentile(&slow.latencies(), 0.5),
        slow.commits.len(),
        slow.acked() as f64 / slow.commits.len().max(1) as f64
    )));
    head
}

/// How the figures were taken, said under every run's table.
const METHOD_NOTES: [&str; 2] = [
    "Lost = an acknowledged write whose token is missing from its object's file in the remote's final tree (read with git ls-tree and git cat-file), unless a later write of the same object is there. Failed writes are not acknowledged and not counted as lost.",
    "Baseline: seed 004 version three exactly as its sequence describes; the deployed apl-api adds a pull of the main clone before each worktree (with --depth=5, sharing .git/shallow.lock), 2 × git config per session, a recovery path with reset --hard and push --force, and pushes HEAD rather than the session branch. Those are left out, which if anything favours the baseline. Each level uses a fresh remote and main clone; session branches are left behind as in the service. Every backflow level runs first (the group-commit level last of them), then every baseline level: the baseline's 64 concurrent git pipelines and the worktrees it removes weigh on whatever runs next (the 1-minute load average reads 20–35 after it, though none of its processes is left).",
];

/// What the baseline is, beside each of its figures.
const BASELINE_IS: &str = "seed 004 v3 with the git CLI: worktree per request, commit, ≤12 × (pull --rebase, push) 50 ms apart, pull main clone";

/// What the baseline side of the window-0s levels adds to the result, each level beside
/// backflow's run of it.
#[derive(Default)]
struct BaselineLevels {
    rows: Vec<Value>,
    levels_json: Vec<Value>,
    notes: Vec<Value>,
    /// At 16 writers: the throughput ratio, backflow's failures and lost writes, the
    /// baseline's rate.
    at_16: Option<(f64, usize, usize, f64)>,
}

/// Runs the baseline of every window-0s level and sets it beside backflow's run of the level.
async fn baseline_levels(
    tmp: &Path,
    quick: bool,
    ours_runs: Vec<(Run, usize, f64)>,
) -> Result<BaselineLevels, String> {
    let mut out = BaselineLevels::default();
    for (level, (ours, ours_lost, warmup)) in levels(quick).into_iter().zip(ours_runs) {
        let w = level.writers;
        let dir = tmp.join(format!("baseline-{w}"));
        let ops = level.baseline_ops;
        let (base, base_lost) = tokio::task::spawn_blocking(move || baseline_level(&dir, w, ops))
            .await
            .map_err(|e| e.to_string())??;
        let ratio = if base.rate() > 0.0 {
            ours.rate() / base.rate()
        } else {
            f64::INFINITY
        };
        out.rows
            .extend(level_rows(w, (&ours, ours_lost), (&base, base_lost)));
        out.notes.push(json!(format!(
            "{w} writers: backflow {} writes in {:.1} s (mirror pushing {:.1} s after start), failures: {}; baseline {} writes in {:.1} s, failures: {}.",
            ours.ops.len(), ours.wall, warmup, describe(&ours.failures),
            base.ops.len(), base.wall, describe(&base.failures)
        )));
        if w == 16 {
            out.at_16 = Some((ratio, ours.failed(), ours_lost, base.rate()));
        }
        out.levels_json.push(json!({"writers": w, "backflow": side_json(&ours, ours_lost),
                                "baseline": side_json(&base, base_lost), "ratio_writes_per_s": round2(ratio)}));
    }
    Ok(out)
}

/// The levels under the default 1 s window (group commit), with what each lost.
struct GroupCommitRuns {
    /// 16 waiting writers.
    sixteen: Run,
    sixteen_lost: usize,
    /// One waiting writer.
    lone: Run,
    /// The 16 writers answered once stored: the latency aim's floor.
    stored: Run,
    stored_lost: usize,
    /// 16 waiting writers into a folder growing to thousands of files.
    large: Run,
    large_lost: usize,
}

impl GroupCommitRuns {
    async fn run(tmp: &Path, quick: bool) -> Result<Self, String> {
        let ops = if quick { 10 } else { 40 };
        let (sixteen, sixteen_lost) =
            group_commit_level(&tmp.join("backflow-16-window-1s"), ops).await?;
        let lone = lone_waiter_level(tmp, quick).await?;
        let (stored, stored_lost) = stored_floor_level(tmp, ops).await?;
        let large_dir = tmp.join("backflow-16-window-1s-large-folder");
        let (large, large_lost) = group_commit_level(&large_dir, large_folder_ops(quick)).await?;
        Ok(Self {
            sixteen,
            sixteen_lost,
            lone,
            stored,
            stored_lost,
            large,
            large_lost,
        })
    }

    /// Their rows, the throughputs beside the 16-writer baseline's rate `base16`.
    fn rows(&self, base16: f64, quick: bool) -> Vec<Value> {
        let mut rows = group_commit_rows(&self.sixteen, base16, "window 1s (default)");
        rows.push(unbaselined_p50_row(
            "write p50 ms, 1 writer, window 1s (default)",
            &self.lone,
        ));
        rows.push(unbaselined_p50_row(
            "write p50 ms, 16 writers, window 1s, answered when stored (no wait for the push)",
            &self.stored,
        ));
        rows.extend(group_commit_rows(
            &self.large,
            base16,
            &format!(
                "window 1s, folder growing to {} files",
                large_folder_files(quick)
            ),
        ));
        rows
    }

    /// What the large-folder level did, said as a note.
    fn large_folder_note(&self, quick: bool) -> Value {
        let large = &self.large;
        json!(format!(
            "16 waiting writers with window 1s into a folder growing to {} files: {} writes, {} failures, {} lost, {:.0}/s, p50 {:.1} ms. The branch worker builds one commit at a time and rewrites the folder's tree (and hashes and compresses it once) for every commit, so group commit's rate falls as the folder grows; no aim is set for it. {}",
            large_folder_files(quick),
            large.ops.len(),
            large.failed(),
            self.large_lost,
            large.rate(),
            percentile(&large.latencies(), 0.5),
            cpu_note(&large.cpu)
        ))
    }
}

/// Files the large-folder level's folder ends with: each writer's ops alternate create and
/// update.
fn large_folder_files(quick: bool) -> usize {
    16 * large_folder_ops(quick) / 2
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let load_before = live::load_average();
    // Every backflow side first, the group-commit level included, then every baseline side:
    // its 64-writer level runs 64 git pipelines at once and removes thousands of worktree files,
    // which makes the file system's next file creations dearer for a while (the 1-minute load
    // average reads 20–35 after it, though none of its processes is left).
    let mut ours_runs = Vec::new();
    for level in levels(quick) {
        let dir = tmp.path().join(format!("backflow-{}", level.writers));
        ours_runs.push(
            backflow_level(&dir, level.writers, level.backflow_ops, "0s", Ack::Pushed).await?,
        );
    }
    let group = GroupCommitRuns::run(tmp.path(), quick).await?;
    let lone_0s_p50 = ours_runs
        .first()
        .filter(|_| levels(quick).first().is_some_and(|l| l.writers == 1))
        .map(|(run, _, _)| percentile(&run.latencies(), 0.5));
    let BaselineLevels {
        mut rows,
        levels_json,
        notes,
        at_16,
    } = baseline_levels(tmp.path(), quick, ours_runs).await?;

    let base16 = at_16.map_or(0.0, |a| a.3);
    rows.extend(group.rows(base16, quick));
    let load_after = live::load_average();
    let mut head = aim_notes(at_16, &group, lone_0s_p50);
    head.push(json!(
        "Each level starts from an empty folder and ends with writers × ops / 2 files in it. backflow's cost per commit grows with the number of files in the target folder (its planner indexes the folder's manifests once per write, and with window 0s every change is its own write; a snapshot is one write and pays it once), so its rate falls as the levels grow, and the ratios depend on the number of writes per level."
    ));
    head.push(group.large_folder_note(quick));
    head.extend(notes);
    head.extend(METHOD_NOTES.iter().map(|n| json!(n)));
    head.push(json!(format!(
        "Load average (1/5/15 min) before: {load_before}, after: {load_after} — 2 cores shared with other builds; both sides run in the same process, one after the other, so the ratios are same-run."
    )));

    Ok(json!({
        "scenario": "rest-writes",
        "parameters": {"levels": levels(quick).iter().map(|l| json!({"writers": l.writers,
                          "backflow_ops_per_writer": l.backflow_ops, "baseline_ops_per_writer": l.baseline_ops})).collect::<Vec<_>>(),
                        "commit_window": "0s", "value_bytes": 1024, "wait": WAIT_VALUE,
                        "remote": "local bare repository over file://", "quick": quick},
        "levels": levels_json,
        "window_1s_16_writers": side_json(&group.sixteen, group.sixteen_lost),
        "window_1s_1_writer": side_json(&group.lone, 0),
        "window_1s_16_writers_stored": side_json(&group.stored, group.stored_lost),
        "window_1s_16_writers_large_folder": side_json(&group.large, group.large_lost),
        "rows": rows,
        "notes": head,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `n` acknowledged writes by one writer, each taking `ms`.
    fn run_of(n: usize, ms: u64) -> Run {
        Run {
            ops: (0..n)
                .map(|i| (0, i, true, Some(Duration::from_millis(ms))))
                .collect(),
            wall: 1.0,
            ..Run::default()
        }
    }

    /// The floor's sentence: a 3 ms floor against a 4 ms lone writer takes 38 % of the aim's
    /// 8 ms and leaves 5 ms for Git; 16 writers at 10 ms were 7 ms above the floor.
    #[test]
    fn the_stored_floor_says_what_it_leaves_of_the_aim() {
        let said = stored_floor_note(&run_of(16, 10), &run_of(4, 4), (&run_of(16, 3), 0));
        let said = said.as_str().expect("a sentence");
        for figure in [
            "p50 3.00 ms, 0.8× the lone",
            "takes 38 % of the aim's 8.00 ms, leaving 5.00 ms",
            "7.00 ms above this floor",
        ] {
            assert!(said.contains(figure), "{figure:?} in {said}");
        }
    }

    /// The budget sentence's ceilings follow from CPU seconds per write: 1.5 ms per write on 2
    /// cores is at most 1,333 writes/s; 0.7 ms of it on the worker's one thread, 1,429/s.
    #[test]
    fn the_cpu_budget_is_ceilings_from_cost_per_write() {
        let cpu = CpuUse {
            wall: 2.0,
            by_name: BTreeMap::from([
                ("backflow-git:ma".to_string(), 1.4),
                ("tokio-rt-worker".to_string(), 1.6),
            ]),
            queued_by_name: BTreeMap::new(),
        };
        let said = cpu_budget(&cpu, 1000.0, 2000.0);
        for figure in [
            "1.50 ms of CPU",
            "0.70 ms of it",
            "1333 writes/s",
            "thread 1429/s",
            "allows 1.00 ms",
            "0.50 ms on",
        ] {
            assert!(said.contains(figure), "{figure} in {said}");
        }
        assert_eq!(cpu_budget(&CpuUse::default(), 1000.0, 2000.0), "");
    }
}
