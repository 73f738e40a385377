//! The `store-scale` scenario: a million 1 KiB `ConfigMaps` stored and listed by the embedded API
//! server, with the mirror off, and the memory that takes.
//!
//! backflow runs in a child process (`store-scale-child N DIR`) so its RSS is its own. The child
//! creates N `ConfigMaps` through the REST API (16 connections), reporting its RSS at every tenth,
//! then lists them in pages of 500 (as kubectl does) and in one unpaginated list read as a
//! stream. The baseline is the objects' own JSON as the full list returns it: what any store that
//! answers from memory holds at the least.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::client::Conn;
use crate::live::{self, Live, proc_kib};
use crate::server::{round2, row};

/// The aim: the whole process holding a million 1 KiB `ConfigMaps`, listed, within 3 GiB.
const AIM_PEAK_MIB: f64 = 3072.0;
/// The aim: the process holding the objects within this many times their own JSON.
const AIM_JSON_FACTOR: f64 = 1.3;
const CREATORS: usize = 16;
const PAGE: usize = 500;
const LIST_PATH: &str = "/api/v1/namespaces/default/configmaps";

fn objects(quick: bool) -> usize {
    if quick { 20_000 } else { 1_000_000 }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn say(line: &str) {
    let out = std::io::stdout();
    let mut o = out.lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// The child: serves, creates `n` `ConfigMaps`, lists them, and exits when told on standard input.
pub async fn child(n: usize, dir: &Path) -> Result<(), String> {
    let live = Live::start(dir).await?;
    let addr = live.addr();
    say(&format!("started {}", proc_kib(None, "VmRSS").unwrap_or(0)));
    create(addr, n).await?;
    let paged = list_paged(addr).await?;
    say(&format!(
        "paged {} {} {}",
        paged.0,
        paged.1,
        proc_kib(None, "VmHWM").unwrap_or(0)
    ));
    let full = list_whole(addr).await?;
    say(&format!(
        "full {} {} {} {}",
        full.0,
        full.1,
        full.2,
        proc_kib(None, "VmHWM").unwrap_or(0)
    ));
    let mut line = String::new();
    let _ = tokio::task::spawn_blocking(move || std::io::stdin().read_line(&mut line)).await;
    std::process::exit(0)
}

/// Creates `n` `ConfigMaps` over [`CREATORS`] connections, saying the RSS at every tenth.
async fn create(addr: std::net::SocketAddr, n: usize) -> Result<(), String> {
    let t0 = Instant::now();
    let filler = live::filler();
    let step = (n / 10).max(1);
    let mut failures = 0usize;
    let mut done = 0;
    while done < n {
        let upto = (done + step).min(n);
        let mut tasks = Vec::new();
        for c in 0..CREATORS {
            let mut conn = Conn::open(addr).await?;
            let filler = filler.clone();
            tasks.push(tokio::spawn(async move {
                let mut failures = 0usize;
                for i in (done + c..upto).step_by(CREATORS) {
                    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c-{i:07}")}, "data": {"v": filler}});
                    let sent = conn
                        .send(
                            Method::POST,
                            LIST_PATH,
                            "application/json",
                            Bytes::from(body.to_string()),
                        )
                        .await;
                    if !matches!(sent, Ok((StatusCode::CREATED, _))) {
                        failures += 1;
                    }
                }
                failures
            }));
        }
        for t in tasks {
            failures += t.await.map_err(|e| e.to_string())?;
        }
        done = upto;
        say(&format!(
            "at {done} {} {}",
            proc_kib(None, "VmRSS").unwrap_or(0),
            t0.elapsed().as_secs_f64()
        ));
    }
    say(&format!(
        "created {} {failures}",
        t0.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// Lists every `ConfigMap` in pages of [`PAGE`]: seconds and items.
async fn list_paged(addr: std::net::SocketAddr) -> Result<(f64, usize), String> {
    let t0 = Instant::now();
    let mut conn = Conn::open(addr).await?;
    let mut items = 0;
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("{LIST_PATH}?limit={PAGE}&continue={t}"),
            None => format!("{LIST_PATH}?limit={PAGE}"),
        };
        let (status, body) = conn.send(Method::GET, &path, "", Bytes::new()).await?;
        if status != StatusCode::OK {
            return Err(format!("a page answered {status}"));
        }
        let page: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        items += page["items"].as_array().map_or(0, Vec::len);
        token = page["metadata"]["continue"].as_str().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok((t0.elapsed().as_secs_f64(), items))
}

/// Lists every `ConfigMap` in one answer read as a stream: seconds, bytes and items (counted by
/// their names, without holding the answer).
async fn list_whole(addr: std::net::SocketAddr) -> Result<(f64, usize, usize), String> {
    const NAME: &[u8] = b"\"name\":\"c-";
    let t0 = Instant::now();
    let mut body = Conn::open(addr).await?.stream(LIST_PATH).await?;
    let (mut bytes, mut items) = (0, 0);
    let mut tail: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        bytes += data.len();
        tail.extend_from_slice(data);
        items += tail.windows(NAME.len()).filter(|w| *w == NAME).count();
        // Keep what could start a name cut by the frame's end.
        let keep = tail.len().min(NAME.len() - 1);
        tail.drain(..tail.len() - keep);
    }
    Ok((t0.elapsed().as_secs_f64(), bytes, items))
}

/// What the child said.
#[derive(Default)]
struct Ours {
    started_kib: u64,
    /// (objects, RSS KiB, seconds) at every tenth.
    at: Vec<(usize, u64, f64)>,
    create_s: f64,
    failures: usize,
    paged_s: f64,
    paged_items: usize,
    paged_hwm_kib: u64,
    full_s: f64,
    full_bytes: usize,
    full_items: usize,
    full_hwm_kib: u64,
}

impl Ours {
    fn hear(&mut self, line: &str) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        match f.first().copied() {
            Some("started") => self.started_kib = num(1) as u64,
            Some("at") => self.at.push((num(1) as usize, num(2) as u64, num(3))),
            Some("created") => (self.create_s, self.failures) = (num(1), num(2) as usize),
            Some("paged") => {
                (self.paged_s, self.paged_items, self.paged_hwm_kib) =
                    (num(1), num(2) as usize, num(3) as u64);
            }
            Some("full") => {
                (
                    self.full_s,
                    self.full_bytes,
                    self.full_items,
                    self.full_hwm_kib,
                ) = (num(1), num(2) as usize, num(3) as usize, num(4) as u64);
            }
            _ => {}
        }
    }
}

fn run_child(n: usize, dir: &Path) -> Result<Ours, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg("store-scale-child")
        .arg(n.to_string())
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let out = BufReader::new(child.stdout.take().ok_or("child without stdout")?);
    let mut ours = Ours::default();
    for line in out.lines() {
        let line = line.map_err(|e| e.to_string())?;
        ours.hear(&line);
        if line.starts_with("full ") {
            break;
        }
    }
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin, "done");
    }
    let _ = child.wait();
    if ours.full_hwm_kib == 0 {
        return Err("the child ended before listing (see its standard error)".into());
    }
    Ok(ours)
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    tokio::task::spawn_blocking(move || run_blocking(quick))
        .await
        .map_err(|e| e.to_string())?
}

fn run_blocking(quick: bool) -> Result<Value, String> {
    let n = objects(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let load_before = live::load_average();
    let ours = run_child(n, tmp.path())?;
    Ok(report(n, &ours, &load_before))
}

/// The memory figures a run's rows and aims are read from.
struct Figures {
    json_mib: f64,
    per_object: f64,
    stored_mib: f64,
    growth: f64,
    json_per_10k: f64,
    peak: f64,
}

impl Figures {
    fn of(n: usize, ours: &Ours) -> Self {
        let per_object = ours.full_bytes as f64 / n as f64;
        let growth = match (ours.at.first(), ours.at.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                mib(b.1.saturating_sub(a.1)) / ((b.0 - a.0) as f64 / 10_000.0)
            }
            _ => 0.0,
        };
        Self {
            json_mib: ours.full_bytes as f64 / 1024.0 / 1024.0,
            per_object,
            stored_mib: mib(ours.at.last().map_or(0, |a| a.1)),
            growth,
            json_per_10k: per_object * 10_000.0 / 1024.0 / 1024.0,
            peak: mib(ours.full_hwm_kib.max(ours.paged_hwm_kib)),
        }
    }
}

fn said(met: bool) -> &'static str {
    if met { "met" } else { "not met" }
}

fn report(n: usize, ours: &Ours, load_before: &str) -> Value {
    let f = Figures::of(n, ours);
    json!({
        "scenario": "store-scale",
        "parameters": {"objects": n, "value_bytes": 1024, "page": PAGE, "creators": CREATORS},
        "rows": rows(n, ours, &f),
        "notes": notes(n, ours, &f, load_before),
    })
}

fn rows(n: usize, ours: &Ours, f: &Figures) -> Vec<Value> {
    let json_is = "the objects' own JSON, as the full list returns it";
    vec![
        row(
            &format!("RSS MiB holding {n} ConfigMaps (server and store)"),
            f.stored_mib,
            f.json_mib,
            false,
            json_is,
        ),
        row(
            "RSS growth MiB per 10,000 ConfigMaps",
            f.growth,
            f.json_per_10k,
            false,
            json_is,
        ),
        json!({"figure": format!("peak RSS MiB after listing {n} ConfigMaps in pages of {PAGE} and whole"),
               "backflow": round2(f.peak), "baseline": round2(f.json_mib), "ratio": round2(f.json_mib / f.peak), "baseline_is": json_is}),
        json!({"figure": format!("list of {n} in pages of {PAGE}, s"), "backflow": round2(ours.paged_s),
               "baseline": null, "ratio": null, "baseline_is": "— (no baseline: the time is for scale, the aim is memory)"}),
        json!({"figure": format!("one unpaginated list of {n}, s"), "backflow": round2(ours.full_s),
               "baseline": null, "ratio": null, "baseline_is": "— (no baseline: the time is for scale, the aim is memory)"}),
    ]
}

fn notes(n: usize, ours: &Ours, f: &Figures, load_before: &str) -> Vec<Value> {
    let (peak, json_mib, per_object) = (f.peak, f.json_mib, f.per_object);
    let held = f.stored_mib / json_mib.max(1e-9);
    vec![
        json!(format!(
            "Aim: {n} ConfigMaps of 1 KiB stored and listed with RSS ≤ {AIM_PEAK_MIB:.0} MiB: peak {peak:.0} MiB, {}.",
            said(peak <= AIM_PEAK_MIB)
        )),
        json!(format!(
            "Aim: RSS holding {n} ConfigMaps ≤ {AIM_JSON_FACTOR}× their JSON: {:.0} MiB against {json_mib:.0} MiB, {held:.2}×, {} (growth alone: {:.2}×).",
            f.stored_mib,
            said(held <= AIM_JSON_FACTOR),
            f.growth / f.json_per_10k.max(1e-9)
        )),
        json!(format!(
            "Created in {:.1} s ({:.0}/s, {} failures); {} items in {} pages, {} items ({:.0} MiB) in the unpaginated list; {per_object:.0} bytes of JSON per object.",
            ours.create_s,
            n as f64 / ours.create_s.max(1e-9),
            ours.failures,
            ours.paged_items,
            ours.paged_items.div_ceil(PAGE),
            ours.full_items,
            json_mib
        )),
        json!(format!(
            "RSS at start {:.0} MiB; at every tenth (objects: MiB): {}.",
            mib(ours.started_kib),
            ours.at
                .iter()
                .map(|(k, kib, _)| format!("{k}: {:.0}", mib(*kib)))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        json!(format!(
            "The child runs the server alone (the mirror off), creates over {CREATORS} connections, lists over one. Load average (1/5/15 min) before: {load_before}, after: {}.",
            live::load_average()
        )),
    ]
}
