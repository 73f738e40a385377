//! The bulk half of `foreign-push`: one push adding N files of `ConfigMaps` (and their
//! namespace), timed from the push notice until a list of the namespace shows every object with
//! its pushed value; beside it where the apply's time went (the applier's phases, from
//! `backflow_apply_phase_seconds`) and which threads ran.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value;

use crate::client::Conn;
use crate::cpu::{CpuUse, ThreadTimes};
use crate::foreign::{Scene, push, wait_value, write_configmaps};
use crate::git::person_git as git;
use crate::live::Live;

/// The applier's phases, as `backflow_apply_phase_seconds` names them.
pub(crate) const PHASES: [&str; 5] = ["read", "declare", "live_reads", "writes", "prune"];

/// Sums of the appliers' metrics at one moment.
#[derive(Debug, Clone, Default)]
pub(crate) struct ApplyTimes {
    /// Seconds per phase, in [`PHASES`] order.
    phase_s: [f64; 5],
    /// Applies observed.
    applies: f64,
    /// Seconds from operations' requests to their success.
    request_to_success_s: f64,
}

impl ApplyTimes {
    pub(crate) fn read(live: &Live) -> Self {
        let text = live
            .mirror()
            .map(|m| m.metrics_renderer()())
            .unwrap_or_default();
        let sum = |prefix: &str, label: Option<&str>| {
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .filter(|l| label.is_none_or(|label| l.contains(label)))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        let mut phase_s = [0.0; 5];
        for (i, phase) in PHASES.iter().enumerate() {
            phase_s[i] = sum(
                "backflow_apply_phase_seconds_sum",
                Some(&format!("phase=\"{phase}\"")),
            );
        }
        Self {
            phase_s,
            applies: sum(
                "backflow_apply_phase_seconds_count",
                Some("phase=\"writes\""),
            ),
            request_to_success_s: sum("backflow_apply_latency_seconds_sum", None),
        }
    }

    /// The metrics since `before`, once at least one more apply ended (or a second passed).
    pub(crate) async fn after_an_apply(live: &Live, before: &Self) -> Self {
        let t0 = Instant::now();
        loop {
            let now = Self::read(live).since(before);
            if now.applies >= 1.0 || t0.elapsed() > Duration::from_secs(1) {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Adds `other`'s figures to these.
    pub(crate) fn add(&mut self, other: &Self) {
        for (mine, theirs) in self.phase_s.iter_mut().zip(other.phase_s) {
            *mine += theirs;
        }
        self.applies += other.applies;
        self.request_to_success_s += other.request_to_success_s;
    }

    /// Milliseconds spent in each phase.
    pub(crate) fn phase_ms(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        PHASES
            .iter()
            .zip(self.phase_s)
            .map(|(p, s)| (*p, s * 1000.0))
    }

    /// Applies observed.
    pub(crate) fn applies(&self) -> f64 {
        self.applies
    }

    /// Milliseconds from the operations' requests to their success.
    pub(crate) fn request_to_success_ms(&self) -> f64 {
        self.request_to_success_s * 1000.0
    }

    fn since(&self, before: &Self) -> Self {
        let mut phase_s = [0.0; 5];
        for (i, s) in phase_s.iter_mut().enumerate() {
            *s = self.phase_s[i] - before.phase_s[i];
        }
        Self {
            phase_s,
            applies: self.applies - before.applies,
            request_to_success_s: self.request_to_success_s - before.request_to_success_s,
        }
    }
}

/// What one bulk push measured.
pub(crate) struct BulkRun {
    /// Files (objects) the push added.
    pub(crate) files: usize,
    /// Seconds from the notice until every object was live.
    pub(crate) secs: f64,
    /// The appliers' metrics over that time.
    pub(crate) times: ApplyTimes,
    /// This process's threads over that time.
    pub(crate) cpu: CpuUse,
    /// What the claim's status said of the operation that applied the push.
    pub(crate) report: String,
}

impl BulkRun {
    /// Objects applied per second.
    pub(crate) fn rate(&self) -> f64 {
        self.files as f64 / self.secs.max(f64::EPSILON)
    }

    /// Milliseconds spent in each phase (summed over the applies of the stretch).
    pub(crate) fn phase_ms(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.times.phase_ms()
    }

    /// Applies that ran over the stretch (the push's, and any catch-up beside it).
    pub(crate) fn applies(&self) -> f64 {
        self.times.applies
    }

    /// Milliseconds from the operations' requests to their success.
    pub(crate) fn request_to_success_ms(&self) -> f64 {
        self.times.request_to_success_ms()
    }
}

/// Pushes `files` new `ConfigMaps` in namespace `ns` (folder `live/{ns}`), announces the push,
/// and times it until every object is live.
pub(crate) async fn push_and_time(
    scene: &mut Scene,
    ns: &str,
    files: usize,
) -> Result<BulkRun, String> {
    let folder = scene.work.join("live").join(ns);
    write_configmaps(&folder.join("configmaps"), ns, "b-", files, |_| "1".into())?;
    std::fs::write(
        folder.join("namespace.yaml"),
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
    )
    .map_err(|e| e.to_string())?;
    git(&scene.work, &["add", "-A"])?;
    git(
        &scene.work,
        &["commit", "-q", "-m", &format!("{files} new objects")],
    )?;
    push(&scene.work)?;
    let sha = git(&scene.work, &["rev-parse", "HEAD"])?;
    let (times0, cpu0) = (ApplyTimes::read(&scene.live), ThreadTimes::now());
    let t0 = Instant::now();
    scene.hook.notify(&sha).await?;
    wait_all(&mut scene.api, ns, files, "1").await?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = ThreadTimes::now().since(&cpu0);
    let report = claim_report(&mut scene.api, &sha).await?;
    Ok(BulkRun {
        files,
        secs,
        times: ApplyTimes::read(&scene.live).since(&times0),
        cpu,
        report,
    })
}

/// Waits until a list of `ns` holds `count` `ConfigMaps` `b-*` whose `value` is `want`: first
/// the last file's object (the folder's order is the apply's), then lists until all are there.
async fn wait_all(api: &mut Conn, ns: &str, count: usize, want: &str) -> Result<(), String> {
    let mut names: Vec<String> = (0..count).map(|i| format!("b-{i}")).collect();
    names.sort();
    if let Some(last) = names.last() {
        wait_value(api, ns, last, want).await?;
    }
    let t0 = Instant::now();
    let uri = format!("/api/v1/namespaces/{ns}/configmaps");
    loop {
        let (status, body) = api
            .send(Method::GET, &uri, "application/json", Bytes::new())
            .await?;
        if status == StatusCode::OK {
            let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let holding = list["items"].as_array().map_or(0, |items| {
                items
                    .iter()
                    .filter(|i| i["data"]["value"] == want)
                    .filter(|i| {
                        i["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with("b-"))
                    })
                    .count()
            });
            if holding == count {
                return Ok(());
            }
        }
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(format!("{ns} never held all {count} objects"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The default `NativeClaim`'s report of the operation that applied `sha`, once it ended.
async fn claim_report(api: &mut Conn, sha: &str) -> Result<String, String> {
    let uri = "/apis/backflow.dev/v1alpha1/namespaces/backflow-system/nativeclaims/default";
    let t0 = Instant::now();
    loop {
        let (_, body) = api
            .send(Method::GET, uri, "application/json", Bytes::new())
            .await?;
        let claim: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let op = &claim["status"]["operation"];
        if op["commit"] == sha && (op["phase"] == "Succeeded" || op["phase"] == "Failed") {
            return Ok(format!(
                "{}: {}",
                op["phase"].as_str().unwrap_or("?"),
                op["message"].as_str().unwrap_or("")
            ));
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the claim never reported the operation of {sha}: {op}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
