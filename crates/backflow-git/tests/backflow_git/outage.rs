//! The remote becomes unreachable mid-stream and comes back: every intent lands, none twice.

use std::collections::BTreeMap;
use std::time::Duration;

use backflow_branch::IntentSeq;
use backflow_git::{FileRemote, RemoteSpec, WorkerEvent, open_remote};

use crate::support::*;

/// Polls, advancing the manual clock to each wake-up, until nothing is unpublished.
fn settle(w: &mut backflow_git::BranchWorker, clock: &backflow_api::ManualClock) {
    for _ in 0..100 {
        let wake = w.poll();
        if !w.has_unpublished() {
            return;
        }
        let now = backflow_api::Clock::now(clock);
        if let Ok(d) = wake.duration_since(now) {
            clock.advance(d);
        }
    }
    panic!("did not settle");
}

fn assert_each_intent_once(bare: &Bare, n: usize) {
    // With a zero window each intent is one commit: count commits per object.
    let subjects = bare.subjects();
    let mut per_object: BTreeMap<String, usize> = BTreeMap::new();
    for s in &subjects {
        *per_object.entry(s.clone()).or_default() += 1;
    }
    assert_eq!(subjects.len(), n, "{subjects:#?}");
    assert!(
        per_object.values().all(|c| *c == 1),
        "an intent landed twice: {per_object:#?}"
    );
    let files = bare.files("main");
    for i in 0..n {
        assert_eq!(
            files.get(&path_of(&format!("o{i}"))),
            Some(&rendered(&i.to_string()))
        );
    }
}

#[test]
fn file_remote_moved_away_and_restored() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    let hidden = bare.dir.path().join("hidden.git");
    let n = 12;
    let mut failures = 0;
    for i in 0..n {
        if i == 4 {
            std::fs::rename(bare.path(), &hidden).expect("take the remote away");
        }
        if i == 9 {
            std::fs::rename(&hidden, bare.path()).expect("bring it back");
        }
        w.submit(put(&format!("o{i}"), &i.to_string()));
        w.poll();
        failures += w
            .take_events()
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Failed { .. }))
            .count();
        // Let retries come due now and then, as time passes.
        clock.advance(Duration::from_millis(300));
    }
    assert!(failures > 0, "the outage was noticed");
    settle(&mut w, &clock);
    assert_eq!(w.published_through(), IntentSeq(n as u64));
    assert_each_intent_once(&bare, n);
    bare.assert_only_fast_forwards();
}

#[test]
fn http_remote_down_and_up() {
    let bare = Bare::new();
    let server = HttpServer::start(bare.dir.path(), None);
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(
        cache.path(),
        open_remote(&RemoteSpec::new(server.url("remote.git"))),
        |_| {},
    );
    let n = 8;
    for i in 0..n {
        if i == 2 {
            server.set_down(true);
        }
        if i == 6 {
            server.set_down(false);
        }
        w.submit(put(&format!("o{i}"), &i.to_string()));
        w.poll();
        clock.advance(Duration::from_millis(300));
    }
    settle(&mut w, &clock);
    assert_eq!(w.published_through(), IntentSeq(n as u64));
    assert_each_intent_once(&bare, n);
}
