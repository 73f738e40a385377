//! The async handle around a worker running on its own thread, with the system clock.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use backflow_api::SystemClock;
use backflow_branch::FilePerObjectPlanner;
use backflow_git::{BranchMetrics, GitMetrics};
use backflow_git::{
    BranchWorker, Identity, RemoteSpec, WorkerConfig, WorkerHandle, WriteError, spawn,
};

use crate::support::*;

/// Hang guard only: a test that takes this long has failed.
const HANG: Duration = Duration::from_secs(60);

fn config(window: Duration) -> WorkerConfig {
    let mut cfg = WorkerConfig::new("main");
    cfg.timing.window = window;
    cfg.committer = Identity::new("backflow test", "backflow@example.com");
    cfg.timing.backoff.initial = Duration::from_millis(20);
    cfg.seed = 3;
    cfg
}

/// A worker on `bare` with its cache in `data`, running with the system clock.
fn started(bare: &Bare, data: &Path, window: Duration, metrics: BranchMetrics) -> WorkerHandle {
    let clock = Arc::new(SystemClock);
    let worker = BranchWorker::open(
        data,
        &RemoteSpec::new(bare.url()),
        config(window),
        Box::new(FilePerObjectPlanner),
        clock.clone(),
        metrics,
    )
    .expect("worker");
    spawn(worker, clock, Duration::from_secs(10))
}

#[tokio::test]
async fn submit_resolves_with_the_pushed_commit_and_flush_returns_the_tip() {
    let bare = Bare::new();
    let data = tempfile::tempdir().expect("tempdir");
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = GitMetrics::register(&mut registry).for_branch(&bare.url(), "main");
    let handle = started(&bare, data.path(), Duration::from_secs(3600), metrics);
    let a = handle.submit(put("a", "1"));
    let b = handle.submit(put("b", "1"));
    // The window is an hour long: only the flush publishes them.
    let flushed = tokio::time::timeout(HANG, handle.flush())
        .await
        .expect("hang guard")
        .expect("flush");
    let (a, b) = tokio::time::timeout(HANG, async { (a.await, b.await) })
        .await
        .expect("hang guard");
    assert_eq!(a.clone().ok(), Some(flushed));
    let a = a.expect("a pushed").expect("branch exists");
    assert_eq!(b, Ok(Some(a)), "one window, one commit");
    assert_eq!(bare.tip(), Some(a.to_string()));
    assert_eq!(bare.subjects(), vec!["backflow: 2 changes in apps"]);
    // A refused intent resolves with the refusal, and does not hold others back.
    let bad = handle.submit(put("../escape", "x"));
    let good = handle.submit(put("c", "1"));
    let _ = handle.flush().await;
    let bad = tokio::time::timeout(HANG, bad).await.expect("hang guard");
    assert!(matches!(bad, Err(WriteError::Refused(_))), "{bad:?}");
    let flushed = tokio::time::timeout(HANG, handle.flush())
        .await
        .expect("hang guard")
        .expect("flush");
    let good = tokio::time::timeout(HANG, good)
        .await
        .expect("hang guard")
        .expect("pushed");
    assert_eq!(flushed, good);
    // Each tip is numbered before its writers hear of it, later ones higher: reports that
    // settle in any order can keep the newest.
    let good = good.expect("branch exists");
    let (first, later) = (handle.tip_order(a), handle.tip_order(good));
    assert!(first.is_some() && later > first, "{first:?} {later:?}");
    let saved = tokio::time::timeout(HANG, async {
        drop(handle.submit(put("d", "1")));
        handle.commit_request("save from the UI").await
    })
    .await
    .expect("hang guard")
    .expect("save");
    assert_eq!(saved.map(|o| o.to_string()), bare.tip());
    assert_eq!(bare.subjects()[0], "save from the UI");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains("backflow_git_commits_total{remote="),
        "{text}"
    );
    assert!(text.contains("result=\"accepted\""), "{text}");
    assert!(text.contains("backflow_git_pending_writes{"), "{text}");
    // Shutdown publishes what is still in the window.
    let last = handle.submit(put("e", "1"));
    let down = tokio::time::timeout(HANG, handle.shutdown())
        .await
        .expect("hang guard")
        .expect("shutdown");
    assert_eq!(down.map(|o| o.to_string()), bare.tip());
    assert_eq!(last.await, Ok(down));
    assert_eq!(bare.files("main").len(), 5);
    assert!(handle.flush().await.is_err(), "stopped");
}

#[tokio::test]
async fn disabled_metrics_and_shutdown_on_drop() {
    let bare = Bare::new();
    let data = tempfile::tempdir().expect("tempdir");
    let handle = started(
        &bare,
        data.path(),
        Duration::from_secs(3600),
        BranchMetrics::disabled(),
    );
    let pushed = handle.submit(put("a", "1"));
    drop(handle);
    // Dropping the last handle flushes the hour-long window.
    let tip = tokio::time::timeout(HANG, pushed)
        .await
        .expect("hang guard")
        .expect("pushed");
    assert_eq!(tip.map(|o| o.to_string()), bare.tip());
}

/// A resync is answered once, at its last intent: a refusal of any of its intents is the
/// resync's (it used to be lost unless the last one was refused, and the folder said nothing).
#[tokio::test]
async fn a_resync_with_a_refused_intent_is_answered_refused() {
    let bare = Bare::new();
    let data = tempfile::tempdir().expect("tempdir");
    let handle = started(
        &bare,
        data.path(),
        Duration::from_millis(10),
        BranchMetrics::disabled(),
    );
    let refused = handle.submit_resync("apps", vec![put("../escape", "x"), put("a", "1")]);
    let refused = tokio::time::timeout(HANG, refused)
        .await
        .expect("hang guard");
    assert!(
        matches!(refused, Err(WriteError::Refused(_))),
        "{refused:?}"
    );
    let flushed = tokio::time::timeout(HANG, handle.flush())
        .await
        .expect("hang guard")
        .expect("flush");
    assert_eq!(flushed.map(|o| o.to_string()), bare.tip());
    assert_eq!(
        bare.files("main").len(),
        1,
        "the rest of the resync is written"
    );
    // A resync of good intents only is answered with its commit.
    let good = handle.submit_resync("apps", vec![put("b", "1"), put("c", "1")]);
    let good = tokio::time::timeout(HANG, good).await.expect("hang guard");
    assert_eq!(good.expect("pushed").map(|o| o.to_string()), bare.tip());
}
