//! The `snapshot` scenario: N objects already in the API when the mirror is switched on; how long
//! until the remote holds all of them, and at what peak memory.
//!
//! backflow runs in a child process (this benchmark's binary, started with the hidden command
//! `snapshot-child N DIR LAYOUT`) so its memory is measured alone: the child starts the server
//! with the mirror off, creates N objects (~1 KiB each) over HTTP with 16 connections — all
//! `ConfigMaps` in `default` (one folder), or spread over 100 namespaces and 5 kinds as a real
//! cluster's are (`layout.rs`) — reports, resets
//! its peak RSS (`5` written to `/proc/self/clear_refs`), then applies the default configuration
//! (`defaults::ensure`, commit window `1s` as `backflow serve` has it; the snapshot is one resync
//! commit whatever the window) and starts the mirror. The parent times from the child's "mirror"
//! line until the remote's branch holds the N files (it reads the branch with git2 every 20 ms
//! and counts their folders' trees when the branch moved), then reads the
//! child's `VmHWM` from `/proc/<pid>/status`: the peak of the mirror phase. The peak of the whole
//! child (creates included) is reported too.
//!
//! Baselines, in the same run: `git fast-import` of the same N paths with the same kind of content
//! into a fresh bare repository, one commit; timed from spawn to exit, its peak RSS read from
//! `/proc/<pid>/status` (`VmHWM`) every 5 ms while it runs. fast-import handles one large
//! directory in time quadratic in its entries, so a linear floor is measured too: git2 writing
//! the same blobs, one tree per directory and one commit straight into a bare repository.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use git2::Repository;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::Conn;
use crate::git::{BRANCH, init_remote, path_str};
use crate::layout::{Layout, NAMESPACES, write_tree};
use crate::live::{self, Live, proc_kib};
use crate::server::{round2, row};

/// The aims from the issue.
const AIM_TIME_FACTOR: f64 = 3.0;
/// At 10,000 objects and more, against the linear floor.
const AIM_FLOOR_FACTOR: f64 = 3.0;
/// What the floor is, beside its figures.
const FLOOR_IS: &str = "linear floor: git2 writing the same N blobs, one tree per directory, one commit, into the bare remote";
const AIM_PEAK_MIB: f64 = 1024.0;
/// The aim: the whole process's peak grows by at most this much per 10,000 objects mirrored.
const AIM_GROWTH_MIB: f64 = 50.0;
/// How long the parent waits for the snapshot before giving up on that size (and larger ones).
fn give_up(quick: bool) -> Duration {
    Duration::from_secs(if quick { 3 * 60 } else { 15 * 60 })
}
/// Connections the child creates objects with.
const CREATORS: usize = 16;

fn sizes(quick: bool, layout: Layout) -> Vec<usize> {
    match (quick, layout) {
        (true, Layout::Folder) => vec![250, 500],
        (true, Layout::Spread) => vec![500],
        (false, Layout::Folder) => vec![1_000, 2_000, 10_000, 100_000],
        (false, Layout::Spread) => vec![10_000, 100_000],
    }
}

fn name(i: usize) -> String {
    format!("snap-{i:06}")
}

/// The child: serves, creates `n` objects laid out as `layout` says, then mirrors until told to
/// stop on standard input.
pub async fn child(n: usize, dir: &Path, layout: Layout) -> Result<(), String> {
    let mut live = Live::start(dir).await?;
    let addr = live.addr();
    let t0 = Instant::now();
    let mut conn = Conn::open(addr).await?;
    for ns in layout.namespaces() {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let sent = conn
            .send(
                Method::POST,
                "/api/v1/namespaces",
                "application/json",
                Bytes::from(body.to_string()),
            )
            .await?;
        if sent.0 != StatusCode::CREATED {
            return Err(format!("creating namespace {ns}: {}", sent.0));
        }
    }
    let mut tasks = Vec::new();
    for c in 0..CREATORS {
        let mut conn = Conn::open(addr).await?;
        tasks.push(tokio::spawn(async move {
            let mut failures = 0usize;
            for i in (c..n).step_by(CREATORS) {
                let (path, body) = layout.object(i, &name(i), &format!("t{i:06}"));
                match conn
                    .send(
                        Method::POST,
                        &path,
                        "application/json",
                        Bytes::from(body.to_string()),
                    )
                    .await
                {
                    Ok((StatusCode::CREATED, _)) => {}
                    _ => failures += 1,
                }
            }
            failures
        }));
    }
    let mut failures = 0;
    for t in tasks {
        failures += t.await.map_err(|e| e.to_string())?;
    }
    let out = std::io::stdout();
    let say = |line: String| {
        let mut o = out.lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    say(format!(
        "created {} {failures} {}",
        t0.elapsed().as_secs_f64(),
        proc_kib(None, "VmHWM").unwrap_or(0)
    ));
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    say(format!("reset {reset}"));
    say("mirror".into());
    live.start_mirror("1s").await?;
    // The parent has measured when it writes a line or goes away; nothing is left to publish
    // that it waits for, so the child ends without the graceful stop (which would first finish
    // a snapshot the parent gave up on).
    let mut line = String::new();
    let _ = tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line)).await;
    std::process::exit(0)
}

/// What the child reported and what the parent saw.
struct Ours {
    create_s: f64,
    create_failures: usize,
    create_peak_kib: u64,
    peak_reset: bool,
    /// Seconds from applying the configuration until the remote held all N files.
    snapshot_s: Option<f64>,
    files_seen: usize,
    mirror_peak_kib: u64,
    commits_seen: usize,
}

fn read_line(out: &mut BufReader<ChildStdout>) -> Result<String, String> {
    let mut line = String::new();
    let got = out.read_line(&mut line).map_err(|e| e.to_string())?;
    if got == 0 {
        return Err("the child ended early (see its standard error)".into());
    }
    Ok(line.trim().to_string())
}

fn run_child(n: usize, dir: &Path, give_up: Duration, layout: Layout) -> Result<Ours, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child: Child = Command::new(exe)
        .arg("snapshot-child")
        .arg(n.to_string())
        .arg(dir)
        .arg(layout.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().ok_or("child without stdout")?);
    let result = (|| {
        let created = read_line(&mut out)?;
        let mut f = created.split_whitespace().skip(1);
        let create_s: f64 = f.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
        let create_failures: usize = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let create_peak_kib: u64 = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        let peak_reset = read_line(&mut out)? == "reset true";
        let mirror = read_line(&mut out)?;
        if mirror != "mirror" {
            return Err(format!("the child said {mirror:?}"));
        }
        let t0 = Instant::now();
        let remote = Repository::open_bare(dir.join("origin.git")).map_err(|e| e.to_string())?;
        let branch = format!("refs/heads/{BRANCH}");
        let (mut last, mut files_seen, mut commits_seen, mut rss_max) = (None, 0, 0, 0);
        let snapshot_s = loop {
            rss_max = rss_max.max(proc_kib(Some(pid), "VmRSS").unwrap_or(0));
            if let Ok(tip) = remote.refname_to_id(&branch)
                && Some(tip) != last
            {
                last = Some(tip);
                commits_seen += 1;
                files_seen = layout.count(&remote, tip);
                if files_seen >= n {
                    break Some(t0.elapsed().as_secs_f64());
                }
            }
            if t0.elapsed() > give_up {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let hwm = proc_kib(Some(pid), "VmHWM").unwrap_or(0);
        Ok(Ours {
            create_s,
            create_failures,
            create_peak_kib,
            peak_reset,
            snapshot_s,
            files_seen,
            mirror_peak_kib: if peak_reset { hwm } else { hwm.max(rss_max) },
            commits_seen,
        })
    })();
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin, "done");
    }
    // The child exits on that line; it is killed if it has not within ten seconds.
    let t = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    result
}

/// `git fast-import` of the same files: (seconds, peak RSS in KiB, files on the branch).
fn fast_import(n: usize, dir: &Path, layout: Layout) -> Result<(f64, u64, usize), String> {
    let repo = dir.join("fast-import.git");
    init_remote(&repo)?;
    let t0 = Instant::now();
    let mut child = Command::new("git")
        .args(["--git-dir", path_str(&repo)?, "fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git fast-import: {e}"))?;
    let pid = child.id();
    let stdin = child.stdin.take().ok_or("git fast-import without stdin")?;
    let feeder = std::thread::spawn(move || -> std::io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, stdin);
        let message = "snapshot";
        write!(
            w,
            "commit refs/heads/{BRANCH}\ncommitter baseline <baseline@localhost> 0 +0000\ndata {}\n{message}\n",
            message.len()
        )?;
        for i in 0..n {
            let (path, content) = layout.file(i, &name(i), &format!("t{i:06}"));
            write!(
                w,
                "M 100644 inline {path}\ndata {}\n{content}\n",
                content.len()
            )?;
        }
        w.flush()
    });
    let mut peak = 0;
    let status = loop {
        peak = peak.max(proc_kib(Some(pid), "VmHWM").unwrap_or(0));
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    feeder
        .join()
        .map_err(|_| "the feeder panicked")?
        .map_err(|e| format!("feeding git fast-import: {e}"))?;
    if !status.success() {
        return Err(format!("git fast-import exited with {status}"));
    }
    let r = Repository::open_bare(&repo).map_err(|e| e.to_string())?;
    let tip = r
        .refname_to_id(&format!("refs/heads/{BRANCH}"))
        .map_err(|e| e.to_string())?;
    Ok((secs, peak, layout.count(&r, tip)))
}

/// The linear floor: git2 writing the same N blobs, one tree per directory and one commit
/// straight into a bare repository standing for the remote, and moving its branch (what a push
/// over `file://` ends with). Linear in N, unlike fast-import's directory handling: (seconds,
/// files on the branch).
fn git2_floor(n: usize, dir: &Path, layout: Layout) -> Result<(f64, usize), String> {
    let path = dir.join("git2-floor.git");
    init_remote(&path)?;
    let repo = Repository::open_bare(&path).map_err(|e| e.to_string())?;
    let err = |e: git2::Error| e.to_string();
    let t0 = Instant::now();
    let mut files = Vec::with_capacity(n);
    for i in 0..n {
        let (path, content) = layout.file(i, &name(i), &format!("t{i:06}"));
        files.push((path, repo.blob(content.as_bytes()).map_err(err)?));
    }
    let root = write_tree(&repo, &files).map_err(err)?;
    let root = repo.find_tree(root).map_err(err)?;
    let who =
        git2::Signature::new("floor", "floor@localhost", &git2::Time::new(0, 0)).map_err(err)?;
    let tip = repo
        .commit(
            Some(&format!("refs/heads/{BRANCH}")),
            &who,
            &who,
            "snapshot",
            &root,
            &[],
        )
        .map_err(err)?;
    let secs = t0.elapsed().as_secs_f64();
    Ok((secs, layout.count(&repo, tip)))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    tokio::task::spawn_blocking(move || run_blocking(quick))
        .await
        .map_err(|e| e.to_string())?
}

/// What the baselines did at one size.
struct Baselines {
    fi_s: f64,
    fi_kib: u64,
    fi_files: usize,
    floor_s: f64,
    floor_files: usize,
}

impl Baselines {
    fn json(&self) -> Value {
        json!({"fast_import_s": round2(self.fi_s), "peak_mib": round2(mib(self.fi_kib)),
               "files": self.fi_files, "git2_floor_s": round2(self.floor_s),
               "git2_floor_files": self.floor_files})
    }
}

const FI_IS: &str = "git fast-import of the same N files into a bare repository, one commit";

/// The rows, aims and notes as the sizes of one layout are run, and what the later sizes need
/// of the earlier.
struct Report {
    layout: Layout,
    rows: Vec<Value>,
    notes: Vec<Value>,
    aims: Vec<Value>,
    sizes_json: Vec<Value>,
    /// (objects, seconds) of every size backflow finished, to see how the time grows.
    done: Vec<(usize, f64)>,
    /// (objects, whole-process peak MiB, peak MiB with the mirror off) of every size run.
    peaks: Vec<(usize, f64, f64)>,
    /// The size backflow did not finish within the give-up time.
    gave_up_at: Option<usize>,
}

impl Report {
    fn new(layout: Layout) -> Self {
        Self {
            layout,
            rows: Vec::new(),
            notes: Vec::new(),
            aims: Vec::new(),
            sizes_json: Vec::new(),
            done: Vec::new(),
            peaks: Vec::new(),
            gave_up_at: None,
        }
    }

    /// `n` objects, and how they are laid out when not in one folder.
    fn objects(&self, n: usize) -> String {
        match self.layout {
            Layout::Folder => format!("{n} objects"),
            Layout::Spread => format!("{n} objects over {NAMESPACES} namespaces × 5 kinds"),
        }
    }

    /// Why size `n` is not run: a larger size than one given up on, or one the growth measured
    /// so far says cannot finish before the give-up.
    fn skip(&self, n: usize, give_up: Duration) -> Option<String> {
        let projected = match self.done[..] {
            [.., (n1, t1), (n2, t2)] => {
                let exponent = (t2 / t1).ln() / (n2 as f64 / n1 as f64).ln();
                Some(t2 * (n as f64 / n2 as f64).powf(exponent))
            }
            _ => None,
        };
        match (self.gave_up_at, projected) {
            (Some(m), _) => Some(format!(
                "not run ({m} objects already took > {} s)",
                give_up.as_secs()
            )),
            (None, Some(p)) if p > give_up.as_secs_f64() => Some(format!(
                "not run (projected {p:.0} s ≈ {:.1} h > {} s)",
                p / 3600.0,
                give_up.as_secs()
            )),
            _ => None,
        }
    }

    fn skipped(&mut self, n: usize, why: String, base: &Baselines) {
        let objs = self.objects(n);
        self.notes.push(json!(format!(
            "{objs}: backflow {why}; fast-import took {:.2} s at {:.0} MiB peak.",
            base.fi_s,
            mib(base.fi_kib)
        )));
        self.rows
            .push(json!({"figure": format!("snapshot on remote, s, {objs}"),
            "backflow": why, "baseline": round2(base.fi_s), "ratio": null, "baseline_is": FI_IS}));
        self.sizes_json
            .push(json!({"objects": n, "backflow": null, "baseline": base.json()}));
    }

    /// The time rows and aims of a size backflow finished in `s` seconds.
    fn finished(&mut self, n: usize, s: f64, biggest: usize, base: &Baselines) {
        let objs = self.objects(n);
        self.done.push((n, s));
        let figure = format!("snapshot on remote, s, {objs}");
        self.rows.push(row(&figure, s, base.fi_s, false, FI_IS));
        let floor = format!("{figure}, against the linear floor");
        self.rows
            .push(row(&floor, s, base.floor_s, false, FLOOR_IS));
        let said = |met: bool| if met { "met" } else { "not met" };
        if n >= 10_000 {
            let factor = s / base.floor_s;
            self.aims.push(json!(format!(
                "Aim at {objs}: ≤ {AIM_FLOOR_FACTOR:.0}× the linear floor: {s:.2} s against {:.2} s, {factor:.1}×, {}.",
                base.floor_s,
                said(factor <= AIM_FLOOR_FACTOR)
            )));
        }
        if n == biggest {
            let factor = s / base.fi_s;
            self.aims.push(json!(format!(
                "Aim at {objs}: ≤ {AIM_TIME_FACTOR:.0}× fast-import's time: {s:.2} s against {:.2} s, {factor:.1}×, {}.",
                base.fi_s,
                said(factor <= AIM_TIME_FACTOR)
            )));
        }
    }

    /// The row and note of a size backflow did not finish in `give_up`: larger ones are not run.
    fn gave_up(&mut self, n: usize, ours: &Ours, give_up: Duration, base: &Baselines) {
        let objs = self.objects(n);
        self.gave_up_at = Some(n);
        self.rows.push(json!({"figure": format!("snapshot on remote, s, {objs}"),
            "backflow": format!("> {} (gave up, {} files on the remote)", give_up.as_secs(), ours.files_seen),
            "baseline": round2(base.fi_s), "ratio": null, "baseline_is": FI_IS}));
        self.notes.push(json!(format!(
            "{objs}: the remote did not hold all files within {} s ({} of {n} there); larger sizes were not run.",
            give_up.as_secs(), ours.files_seen
        )));
    }

    /// The memory rows, aim and notes of a size run, finished or given up on.
    fn memory(&mut self, n: usize, biggest: usize, ours: &Ours, base: &Baselines) {
        let objs = self.objects(n);
        let process_peak = mib(ours.mirror_peak_kib.max(ours.create_peak_kib));
        self.peaks
            .push((n, process_peak, mib(ours.create_peak_kib)));
        self.rows.push(row(
            &format!("peak RSS MiB while mirroring, {objs}"),
            mib(ours.mirror_peak_kib),
            mib(base.fi_kib),
            false,
            "git fast-import's peak RSS (VmHWM)",
        ));
        self.rows.push(
            json!({"figure": format!("peak RSS MiB of the whole backflow process, {objs}"),
            "backflow": round2(process_peak), "baseline": null, "ratio": null,
            "baseline_is": "— (server, store and creates included)"}),
        );
        if n == biggest {
            self.aims.push(json!(format!(
                "Aim at {objs}: peak RSS ≤ {AIM_PEAK_MIB:.0} MiB: {process_peak:.0} MiB for the whole process ({:.0} MiB while mirroring){}.",
                mib(ours.mirror_peak_kib),
                if ours.snapshot_s.is_none() {
                    ", up to when the parent gave up: not a full figure"
                } else if process_peak <= AIM_PEAK_MIB {
                    ", met"
                } else {
                    ", not met"
                }
            )));
        }
        self.notes.push(json!(format!(
            "{objs}: created in {:.1} s ({} failures, peak RSS {:.0} MiB with the mirror off); the branch moved {} time(s) while waiting; {} files seen; fast-import wrote {} files in {:.2} s.",
            ours.create_s, ours.create_failures, mib(ours.create_peak_kib), ours.commits_seen, ours.files_seen,
            base.fi_files, base.fi_s
        )));
        if !ours.peak_reset {
            self.notes.push(json!(
                "The child could not reset its peak RSS: the mirroring peak is the larger of the creates' peak and the RSS sampled every 20 ms."
            ));
        }
        self.sizes_json.push(json!({"objects": n,
            "backflow": {"snapshot_s": ours.snapshot_s.map(round2), "mirror_peak_mib": round2(mib(ours.mirror_peak_kib)),
                         "process_peak_mib": round2(process_peak),
                         "create_s": round2(ours.create_s), "create_failures": ours.create_failures,
                         "files_seen": ours.files_seen, "branch_moves": ours.commits_seen},
            "baseline": base.json()}));
    }

    /// How time and memory grow with N, from the two largest sizes run, and the aims at the
    /// largest size when backflow did not finish it.
    fn growth(&mut self, biggest: usize) {
        let label = match self.layout {
            Layout::Folder => String::new(),
            Layout::Spread => format!("Spread over {NAMESPACES} namespaces × 5 kinds: "),
        };
        if let [.., (n1, t1), (n2, t2)] = self.done[..] {
            let exponent = (t2 / t1).ln() / (n2 as f64 / n1 as f64).ln();
            let projected = t2 * (biggest as f64 / n2 as f64).powf(exponent);
            self.notes.push(json!(format!(
                "{}Growth: {n1} → {n2} objects took {t1:.2} → {t2:.2} s, time ∝ N^{exponent:.2}{}.",
                label,
                if n2 < biggest {
                    format!(
                        "; at that rate {biggest} objects would take about {:.0} s ({:.1} h)",
                        projected,
                        projected / 3600.0
                    )
                } else {
                    String::new()
                }
            )));
        }
        if let [.., (n1, p1, c1), (n2, p2, c2)] = self.peaks[..] {
            let per_10k = |a: f64, b: f64| (b - a) / ((n2 - n1) as f64 / 10_000.0);
            let growth = per_10k(p1, p2);
            self.notes.push(json!(format!(
                "{}Memory growth: {n1} → {n2} objects, {growth:.0} MiB per 10,000 objects for the whole process ({:.0} MiB of it with the mirror off: server and store); aim ≤ {AIM_GROWTH_MIB:.0} MiB, {}.",
                label,
                per_10k(c1, c2),
                if growth <= AIM_GROWTH_MIB { "met" } else { "not met" }
            )));
        }
        if self.done.last().map(|d| d.0) != Some(biggest) {
            self.aims.insert(0, json!(format!(
                "Aims at {} (≤ {AIM_TIME_FACTOR:.0}× fast-import's time, peak RSS ≤ {AIM_PEAK_MIB:.0} MiB): not measured, backflow's snapshot could not finish in reasonable time (see the rows), so the time aim is not met; the largest size measured is {}.",
                self.objects(biggest),
                self.done.last().map_or_else(|| "none".into(), |d| d.0.to_string())
            )));
        }
    }
}

fn run_blocking(quick: bool) -> Result<Value, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let load_before = live::load_average();
    let give_up = give_up(quick);
    let (mut rows, mut aims, mut notes, mut sizes_json) = (vec![], vec![], vec![], vec![]);
    for layout in [Layout::Folder, Layout::Spread] {
        let report = run_layout(quick, layout, give_up, tmp.path())?;
        rows.extend(report.rows);
        aims.extend(report.aims);
        notes.extend(report.notes);
        sizes_json.extend(report.sizes_json.into_iter().map(|mut s| {
            s["layout"] = json!(layout.name());
            s
        }));
    }
    let mut all = aims;
    all.extend(notes);
    all.push(json!(
        "backflow runs in a child process so its peak RSS is its own; the mirroring peak is VmHWM after resetting it once the objects were created (server, store and mirror together), the whole-process peak includes the creates. fast-import's peak is VmHWM sampled every 5 ms, so the last few ms of its run may be missed."
    ));
    all.push(json!(format!(
        "Spread layout: object i in namespace spread-(i mod {NAMESPACES}), of kind (i / {NAMESPACES}) mod 5 — ConfigMap, ServiceAccount, Role, LimitRange, ResourceQuota — each with ~1 KiB in an annotation; the {NAMESPACES} namespaces are created first. The baselines write the same paths."
    )));
    all.push(json!(format!(
        "Timed from applying the default configuration (defaults::ensure, then Mirror::start) until the remote's branch holds all N files, read with git2 every 20 ms. fast-import is timed from spawn to exit, its input generated on the fly by this process. Load average (1/5/15 min) before: {load_before}, after: {} — 2 cores shared with other builds.",
        live::load_average()
    )));
    Ok(json!({
        "scenario": "snapshot",
        "parameters": {"objects": sizes(quick, Layout::Folder), "spread_objects": sizes(quick, Layout::Spread),
                        "value_bytes": 1024, "commit_window": "1s",
                        "give_up_s": give_up.as_secs(), "remote": "local bare repository over file://", "quick": quick},
        "sizes": sizes_json,
        "rows": rows,
        "notes": all,
    }))
}

/// Every size of `layout`, each beside its baselines.
fn run_layout(
    quick: bool,
    layout: Layout,
    give_up: Duration,
    tmp: &Path,
) -> Result<Report, String> {
    let biggest = *sizes(quick, layout).last().unwrap_or(&0);
    let mut report = Report::new(layout);
    for n in sizes(quick, layout) {
        let dir = tmp.join(format!("{}-n{n}", layout.name()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let (fi_s, fi_kib, fi_files) = fast_import(n, &dir, layout)?;
        let (floor_s, floor_files) = git2_floor(n, &dir, layout)?;
        let base = Baselines {
            fi_s,
            fi_kib,
            fi_files,
            floor_s,
            floor_files,
        };
        if let Some(why) = report.skip(n, give_up) {
            report.skipped(n, why, &base);
            continue;
        }
        let ours = run_child(n, &dir.join("backflow"), give_up, layout)?;
        if let Some(s) = ours.snapshot_s {
            report.finished(n, s, biggest, &base);
        } else {
            report.gave_up(n, &ours, give_up, &base);
        }
        report.memory(n, biggest, &ours, &base);
    }
    report.growth(biggest);
    Ok(report)
}
