//! The `push-notice` scenario: somebody else pushes; how long until backflow knows?
//!
//! backflow: after each push (git, straight into the bare remote, which has no hook), a
//! generic-hmac notice is posted to the receiver exactly as `serve`'s post-receive hook posts
//! it, and the clock runs until the branch's `GitBranch.status.tip` — read through the API,
//! as a user would — names the pushed commit. The periodic refresh is set to an hour, so only
//! the notice can explain the figure.
//!
//! Baseline in the same run, push by push: one `git ls-remote` of the same remote, the least
//! any poller must spend to learn the tip once (a poller also waits half its interval on
//! average: 300 s for the default 10-minute refresh).

use std::time::{Duration, Instant};

use backflow_api::config::GitBranch;
use kube::Api;
use serde_json::{Value, json};

use crate::git::{BRANCH, path_str, person_git as git};
use crate::hook::{HookReceiver, TOKEN};
use crate::live::{self, Live};
use crate::server::{percentile, round2, row};

const NAMESPACE: &str = backflow_mirror::defaults::NAMESPACE;

fn pushes(quick: bool) -> usize {
    if quick { 5 } else { 40 }
}

/// Polls the default branch's `GitBranch` until its tip is `sha`.
async fn wait_tip(api: &Api<GitBranch>, sha: &str) -> Result<Duration, String> {
    let t0 = Instant::now();
    loop {
        let tip = api
            .get_opt("default-main")
            .await
            .map_err(|e| e.to_string())?
            .and_then(|b| b.status)
            .and_then(|s| s.tip);
        if tip.as_deref() == Some(sha) {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err(format!("GitBranch never showed {sha} (tip {tip:?})"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Runs the scenario and returns its result object.
// Long on purpose: a scenario reads top to bottom as the steps it measures and reports.
#[allow(clippy::too_many_lines)]
pub async fn run(quick: bool) -> Result<Value, String> {
    let n = pushes(quick);
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut live = Live::start(&tmp.path().join("backflow")).await?;
    // The default configuration with its receiver, as `serve` applies it.
    live.start_mirror_with("1s", Duration::from_secs(3600), Some(TOKEN), false)
        .await?;
    live.wait_mirroring().await?;
    let mut hook = HookReceiver::start(&live).await?;
    let remote = path_str(&live.remote)?.to_string();
    let work = tmp.path().join("person");
    git(tmp.path(), &["clone", "-q", &remote, path_str(&work)?])?;
    let branches: Api<GitBranch> = Api::namespaced(live.client(), NAMESPACE);

    let (mut ours, mut polls) = (Vec::new(), Vec::new());
    for i in 0..n {
        std::fs::write(work.join(format!("person-{i}.md")), format!("push {i}\n"))
            .map_err(|e| e.to_string())?;
        git(&work, &["add", "-A"])?;
        git(&work, &["commit", "-q", "-m", &format!("person {i}")])?;
        git(&work, &["push", "-q", "origin", &format!("HEAD:{BRANCH}")])?;
        let sha = git(&work, &["rev-parse", "HEAD"])?;

        let t0 = Instant::now();
        git(
            tmp.path(),
            &["ls-remote", &remote, &format!("refs/heads/{BRANCH}")],
        )?;
        polls.push(t0.elapsed());

        let t0 = Instant::now();
        hook.notify(&sha).await?;
        wait_tip(&branches, &sha).await?;
        ours.push(t0.elapsed());
    }
    hook.stop().await;
    live.stop().await;

    ours.sort();
    polls.sort();
    let (o50, o99) = (percentile(&ours, 0.5), percentile(&ours, 0.99));
    let (b50, b99) = (percentile(&polls, 0.5), percentile(&polls, 0.99));
    let rows = vec![
        row(
            "notice → GitBranch shows the tip, p50 ms",
            o50,
            b50,
            false,
            "one `git ls-remote` of the remote (p50)",
        ),
        row(
            "notice → GitBranch shows the tip, p99 ms",
            o99,
            b99,
            false,
            "one `git ls-remote` of the remote (p99)",
        ),
        row(
            "mean wait to learn of a push, ms",
            o50,
            300_000.0,
            false,
            "periodic refresh every 10 min: half the interval on average",
        ),
    ];
    let notes = vec![
        json!(format!(
            "{n} pushes by a person straight into the bare remote; after each, a signed generic-hmac notice (what serve's post-receive hook sends) is posted, and the time is taken until GitBranch.status.tip, read through the API every 2 ms, names the commit. Refresh interval 1 h, so the notice alone explains it."
        )),
        json!(format!(
            "Aim: under a second — p50 {o50:.1} ms, p99 {o99:.1} ms: {}.",
            if o99 < 1000.0 { "met" } else { "not met" }
        )),
        json!(format!(
            "Load average (1/5/15 min) after: {} — 2 cores shared with other builds.",
            live::load_average()
        )),
    ];
    Ok(json!({
        "scenario": "push-notice",
        "parameters": {"pushes": n, "refresh_interval": "1h", "remote": "local bare repository over file://", "quick": quick},
        "backflow": {"p50_ms": round2(o50), "p99_ms": round2(o99)},
        "baseline": {"p50_ms": round2(b50), "p99_ms": round2(b99)},
        "rows": rows,
        "notes": notes,
    }))
}
