//! Foreign writers pushing with the `git` program while the worker publishes.

use std::sync::Arc;
use std::time::Duration;

use backflow_api::SystemClock;
use backflow_branch::FilePerObjectPlanner;
use backflow_git::BranchMetrics;
use backflow_git::{BranchWorker, Identity, RemoteSpec, TransportChoice, WorkerConfig, spawn};

use crate::support::*;

const HANG: Duration = Duration::from_secs(120);

async fn run(url_for_worker: String, bare: &Bare, transport: TransportChoice) {
    let data = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(SystemClock);
    let mut cfg = WorkerConfig::new("main");
    cfg.timing.window = Duration::ZERO;
    cfg.committer = Identity::new("backflow test", "backflow@example.com");
    cfg.timing.backoff.initial = Duration::from_millis(10);
    cfg.timing.backoff.max = Duration::from_millis(200);
    cfg.seed = 11;
    let spec = RemoteSpec {
        transport,
        ..RemoteSpec::new(url_for_worker)
    };
    let worker = BranchWorker::open(
        data.path(),
        &spec,
        cfg,
        Box::new(FilePerObjectPlanner),
        clock.clone(),
        BranchMetrics::disabled(),
    )
    .expect("worker");
    let handle = spawn(worker, clock, Duration::from_secs(30));
    let mut foreign_events = handle.subscribe();

    // Three foreign writers, each with its own clone, pushing their own files and, now and then,
    // a file the API also writes.
    let writers: Vec<_> = (0..3)
        .map(|n| {
            let url = bare.url();
            std::thread::spawn(move || {
                let clone = ForeignClone::new(&url);
                let mut shas = Vec::new();
                for i in 0..6 {
                    let own = format!("foreign/{n}/{i}.txt");
                    let shared = path_of(&format!("o{i}"));
                    let mut files = vec![(own.as_str(), Some("x"))];
                    if i % 2 == 0 {
                        files.push((shared.as_str(), Some("foreign")));
                    }
                    shas.push(clone.commit_and_push(&files, &format!("writer {n} #{i}")));
                }
                shas
            })
        })
        .collect();

    let mut pushed = Vec::new();
    for round in 0..3 {
        for i in 0..8 {
            pushed.push(handle.submit(put(&format!("o{i}"), &format!("api-{round}"))));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut our_tips = std::collections::BTreeSet::new();
    for p in pushed {
        let tip = tokio::time::timeout(HANG, p)
            .await
            .expect("hang guard")
            .expect("pushed")
            .expect("branch exists");
        our_tips.insert(tip.to_string());
    }
    let foreign_shas: Vec<String> = writers
        .into_iter()
        .flat_map(|h| h.join().expect("writer"))
        .collect();
    // After the foreign writers stop, the API writes once more on top of everything.
    let mut last = Vec::new();
    for i in 0..8 {
        last.push(handle.submit(put(&format!("o{i}"), "final")));
    }
    for p in last {
        let tip = tokio::time::timeout(HANG, p)
            .await
            .expect("hang guard")
            .expect("pushed")
            .expect("tip");
        our_tips.insert(tip.to_string());
    }
    handle.shutdown().await.expect("shutdown");

    for sha in &foreign_shas {
        assert!(bare.contains(sha), "foreign commit {sha} disappeared");
    }
    let files = bare.files("main");
    for n in 0..3 {
        for i in 0..6 {
            assert_eq!(
                files
                    .get(&format!("foreign/{n}/{i}.txt"))
                    .map(String::as_str),
                Some("x")
            );
        }
    }
    for i in 0..8 {
        assert_eq!(
            files.get(&path_of(&format!("o{i}"))),
            Some(&rendered("final"))
        );
    }
    bare.assert_only_fast_forwards();
    // Whatever foreign tips were reported, none of them was one of our own pushes.
    while let Ok(notice) = foreign_events.try_recv() {
        let backflow_git::BranchNotice::Foreign(f) = notice else {
            panic!("foreign pushes that keep every commit are no divergence: {notice:?}");
        };
        assert!(
            !our_tips.contains(&f.tip.to_string()),
            "own push {} reported as foreign",
            f.tip
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_git_pushers_over_file() {
    let bare = Bare::new();
    let url = bare.url();
    run(url, &bare, TransportChoice::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_git_pushers_over_http() {
    let bare = Bare::new();
    let server = HttpServer::start(bare.dir.path(), None);
    run(server.url("remote.git"), &bare, TransportChoice::Auto).await;
}
