//! The `big-file` scenario: a folder whose objects a person keeps in one large file; how long
//! does a restart take before backflow mirrors again?
//!
//! backflow (`serve`'s wiring in process, its `NativeClaim` applying): a person pushes N
//! 10 KiB `ConfigMaps` as documents of one file; once they are live, backflow stops and starts
//! again, and the clock runs from the start until a write made through the API is in Git (the
//! start-up resync of the whole folder published before it). Baseline in the same run: the same
//! objects pushed one file each, the layout backflow writes itself. Before the planner kept one
//! parse of a file per build, the resync parsed the large file once per object (time ×4 per
//! doubling of the documents).
//!
//! Then scale: 15,000 objects one file each (a claim whose inventory lives in `ConfigMaps`),
//! restarted the same way, and a push removing two files after the restart timed
//! until both are pruned. Whether a restart is linear in the folder: its time per 1,000 objects
//! against the 2,000-object run's.
//!
//! The `big-folder` scenario is the scale run alone at 100,000 objects, against 10,000 in the
//! same run.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::git::{BRANCH, path_str, person_git as git};
use crate::live::{self, Live};
use crate::server::{round2, row};

/// Bytes of each object's value: 2,000 documents make the 20 MB file of the issue.
const VALUE_BYTES: usize = 10_000;

fn documents(quick: bool) -> usize {
    if quick { 200 } else { 2000 }
}

/// The folder sizes of the scale runs.
fn many(quick: bool) -> &'static [usize] {
    if quick { &[1500] } else { &[15_000] }
}

/// Small objects, for the scale run.
fn small(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{i}\n  namespace: default\ndata:\n  i: \"{i}\"\n"
    )
}

/// How the person keeps the objects.
#[derive(Clone, Copy)]
enum Layout {
    /// All of them in `live/big.yaml`.
    OneFile,
    /// One file each, where backflow writes them.
    FilePerObject,
}

fn document(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{i}\n  namespace: default\ndata:\n  value: \"{}\"\n",
        "x".repeat(VALUE_BYTES)
    )
}

/// Writes the objects into the clone `work` as `layout` keeps them; returns the bytes written.
fn write_objects(
    work: &Path,
    n: usize,
    layout: Layout,
    document: fn(usize) -> String,
) -> Result<usize, String> {
    let io = |e: std::io::Error| e.to_string();
    match layout {
        Layout::OneFile => {
            let mut text = String::new();
            for i in 0..n {
                text.push_str("---\n");
                text.push_str(&document(i));
            }
            std::fs::write(work.join("live/big.yaml"), &text).map_err(io)?;
            Ok(text.len())
        }
        Layout::FilePerObject => {
            let dir = work.join(live::CONFIGMAPS);
            std::fs::create_dir_all(&dir).map_err(io)?;
            let mut bytes = 0;
            for i in 0..n {
                let text = document(i);
                bytes += text.len();
                std::fs::write(dir.join(format!("big-{i}.yaml")), text).map_err(io)?;
            }
            Ok(bytes)
        }
    }
}

/// Waits until `n` of the pushed objects are live.
async fn wait_live(client: kube::Client, n: usize) -> Result<Duration, String> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let t0 = Instant::now();
    loop {
        let listed = api
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let live = listed
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("big-"))
            })
            .count();
        if live >= n {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(600) {
            return Err(format!(
                "only {live} of {n} objects were applied in 10 minutes"
            ));
        }
        // Each look lists every object: look less often at larger sizes.
        tokio::time::sleep(Duration::from_millis((n as u64 / 100).max(100))).await;
    }
}

/// What one run measured.
struct Restarted {
    /// Start → a write in Git.
    restart: Duration,
    /// The objects' bytes in Git.
    bytes: usize,
    /// A push removing two files after the restart → both pruned.
    prune: Duration,
}

/// Waits until `big-0` and `big-1` are gone.
async fn wait_pruned(client: kube::Client) -> Result<Duration, String> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let t0 = Instant::now();
    loop {
        let a = api.get_opt("big-0").await.map_err(|e| e.to_string())?;
        let b = api.get_opt("big-1").await.map_err(|e| e.to_string())?;
        if a.is_none() && b.is_none() {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err("the removed objects were not pruned in 2 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One run: push, apply, restart; the restart's time to a published write, then a push removing
/// two files and the time until they are pruned.
async fn restart_time(
    dir: &Path,
    n: usize,
    layout: Layout,
    document: fn(usize) -> String,
) -> Result<Restarted, String> {
    let backflow = dir.join("backflow");
    let mut live = Live::start(&backflow).await?;
    live.start_mirror_with("1s", Duration::from_secs(1), None, true)
        .await?;
    live.wait_mirroring().await?;
    let work = dir.join("person");
    git(
        dir,
        &["clone", "-q", path_str(&live.remote)?, path_str(&work)?],
    )?;
    let bytes = write_objects(&work, n, layout, document)?;
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-q", "-m", "a person adds objects"])?;
    git(&work, &["push", "-q", "origin", &format!("HEAD:{BRANCH}")])?;
    wait_live(live.client(), n).await?;
    live.stop().await;

    let t0 = Instant::now();
    let mut live = Live::start(&backflow).await?;
    live.start_mirror_with("1s", Duration::from_secs(1), None, true)
        .await?;
    live.wait_mirroring().await?;
    let restart = t0.elapsed();
    let removed: &[&str] = match layout {
        // Two documents out of the one file: the first two.
        Layout::OneFile => &[],
        Layout::FilePerObject => &["big-0.yaml", "big-1.yaml"],
    };
    let prune = if removed.is_empty() {
        Duration::ZERO
    } else {
        git(&work, &["pull", "-q", "--rebase", "origin", BRANCH])?;
        for file in removed {
            std::fs::remove_file(work.join(live::CONFIGMAPS).join(file))
                .map_err(|e| e.to_string())?;
        }
        git(&work, &["add", "-A"])?;
        git(
            &work,
            &["commit", "-q", "-m", "a person removes two objects"],
        )?;
        git(&work, &["push", "-q", "origin", &format!("HEAD:{BRANCH}")])?;
        wait_pruned(live.client()).await?
    };
    live.stop().await;
    Ok(Restarted {
        restart,
        bytes,
        prune,
    })
}

/// The scale rows of `run` over `objects` against `base` over its objects: the restart per
/// 1,000 objects (linear when the ratio is 1) and the prune after the restart.
fn scale_rows(
    (run, objects): (&Restarted, usize),
    (base, base_objects): (&Restarted, usize),
) -> [Value; 2] {
    let per_k = |d: Duration, n: usize| d.as_secs_f64() * 1000.0 / n as f64;
    [
        row(
            &format!("restart → a write in Git, s per 1,000 objects ({objects} objects)"),
            per_k(run.restart, objects),
            per_k(base.restart, base_objects),
            false,
            &format!("the same per 1,000 objects at {base_objects} objects (linear: ratio 1)"),
        ),
        row(
            &format!("push removing 2 files after a restart → pruned, ms ({objects} objects)"),
            run.prune.as_secs_f64() * 1000.0,
            base.prune.as_secs_f64() * 1000.0,
            false,
            &format!("the same at {base_objects} objects"),
        ),
    ]
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = documents(quick);
    let one = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ours = restart_time(one.path(), n, Layout::OneFile, document).await?;
    let bytes = ours.bytes;
    let apart = tempfile::tempdir().map_err(|e| e.to_string())?;
    let baseline = restart_time(apart.path(), n, Layout::FilePerObject, document).await?;
    let (o, b) = (ours.restart.as_secs_f64(), baseline.restart.as_secs_f64());
    let mut rows = vec![row(
        &format!("restart → a write in Git, s ({n} documents in one file)"),
        o,
        b,
        false,
        "the same objects one file each",
    )];
    let mut scaled = Vec::new();
    for &m in many(quick) {
        let scale_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let run = restart_time(scale_dir.path(), m, Layout::FilePerObject, small).await?;
        rows.extend(scale_rows((&run, m), (&baseline, n)));
        scaled.push((m, run));
    }
    let aim = 10.0;
    let notes = vec![
        json!(format!(
            "A person pushes {n} ConfigMaps of {VALUE_BYTES} bytes as documents of one file ({:.1} MB); once the NativeClaim applied them, backflow stops and starts again, and the time runs from the start until a write made through the API (X-Backflow-Wait: pushed) is in Git, the start-up resync of the folder published before it.",
            bytes as f64 / 1e6
        )),
        json!(format!(
            "Aim: a restart mirrors again within {aim} s and no slower than {}× the same objects one file each: {o:.2} s against {b:.2} s — {}.",
            2,
            if o <= aim && o <= 2.0 * b.max(0.5) {
                "met"
            } else {
                "not met"
            }
        )),
        json!(format!(
            "Scale: small ConfigMaps one file each (the claim's inventory in ConfigMaps beside it), restarted the same way, then a push removing two files timed until both are pruned: {}. The prune waits for the operations a restart starts (the converge, then the push's), each judging every object the folder declares; the refresh that notices the push runs every second here (no hook).",
            scaled
                .iter()
                .map(|(m, r)| format!(
                    "{m} objects restart in {:.2} s, prune in {:.0} ms",
                    r.restart.as_secs_f64(),
                    r.prune.as_secs_f64() * 1000.0
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        json!(format!(
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    Ok(json!({
        "scenario": "big-file",
        "parameters": {"documents": n, "value_bytes": VALUE_BYTES, "file_bytes": bytes, "scale_objects": many(quick), "quick": quick},
        "backflow": {
            "restart_s": round2(o),
            "scale": scaled.iter().map(|(m, r)| json!({
                "objects": m,
                "restart_s": round2(r.restart.as_secs_f64()),
                "prune_ms": round2(r.prune.as_secs_f64() * 1000.0),
            })).collect::<Vec<_>>(),
        },
        "baseline": {"restart_s": round2(b)},
        "rows": rows,
        "notes": notes,
    }))
}

/// The `big-folder` scenario: a folder of 100,000 small objects one file each, restarted and
/// pruned after the restart, against 10,000 in the same run.
pub async fn run_folder(quick: bool) -> Result<Value, String> {
    let (base_n, big_n) = if quick {
        (1000, 3000)
    } else {
        (10_000, 100_000)
    };
    let base_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let base = restart_time(base_dir.path(), base_n, Layout::FilePerObject, small).await?;
    drop(base_dir);
    let big_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let big = restart_time(big_dir.path(), big_n, Layout::FilePerObject, small).await?;
    let mut rows = vec![row(
        &format!("restart → a write in Git, s ({big_n} objects)"),
        big.restart.as_secs_f64(),
        base.restart.as_secs_f64(),
        false,
        &format!("the same at {base_n} objects"),
    )];
    rows.extend(scale_rows((&big, big_n), (&base, base_n)));
    let notes = vec![
        json!(format!(
            "A person pushes {big_n} small ConfigMaps one file each (the claim's inventory in ConfigMaps beside it); once the NativeClaim applied them, backflow stops and starts again: the time runs from the start until a write made through the API (X-Backflow-Wait: pushed) is in Git. Then a push removing two files is timed until both are pruned (the refresh that notices the push runs every second here; no hook). Baseline: the same with {base_n} objects, in the same run."
        )),
        json!(format!(
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    Ok(json!({
        "scenario": "big-folder",
        "parameters": {"objects": big_n, "baseline_objects": base_n, "quick": quick},
        "backflow": {"restart_s": round2(big.restart.as_secs_f64()), "prune_ms": round2(big.prune.as_secs_f64() * 1000.0)},
        "baseline": {"restart_s": round2(base.restart.as_secs_f64()), "prune_ms": round2(base.prune.as_secs_f64() * 1000.0)},
        "rows": rows,
        "notes": notes,
    }))
}
