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
fn write_objects(work: &Path, n: usize, layout: Layout) -> Result<usize, String> {
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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One run: push, apply, restart; the restart's time to a published write.
async fn restart_time(dir: &Path, n: usize, layout: Layout) -> Result<(Duration, usize), String> {
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
    let bytes = write_objects(&work, n, layout)?;
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
    let took = t0.elapsed();
    live.stop().await;
    Ok((took, bytes))
}

/// Runs the scenario and returns its result object.
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = documents(quick);
    let one = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (ours, bytes) = restart_time(one.path(), n, Layout::OneFile).await?;
    let many = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (baseline, _) = restart_time(many.path(), n, Layout::FilePerObject).await?;
    let (o, b) = (ours.as_secs_f64(), baseline.as_secs_f64());
    let rows = vec![row(
        &format!("restart → a write in Git, s ({n} documents in one file)"),
        o,
        b,
        false,
        "the same objects one file each",
    )];
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
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    Ok(json!({
        "scenario": "big-file",
        "parameters": {"documents": n, "value_bytes": VALUE_BYTES, "file_bytes": bytes, "quick": quick},
        "backflow": {"restart_s": round2(o)},
        "baseline": {"restart_s": round2(b)},
        "rows": rows,
        "notes": notes,
    }))
}
