//! The branch worker driven step by step against a bare repository over `file://`.

use std::time::Duration;

use backflow_branch::{Intent, IntentSeq, Tip};
use backflow_git::{CliRemote, Credentials, FileRemote, RemoteSpec, WorkerEvent, open_remote};

use crate::support::*;

fn published(events: &[WorkerEvent]) -> Vec<(IntentSeq, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Published { through, tip } => Some((*through, tip.map(|t| t.to_string()))),
            _ => None,
        })
        .collect()
}

fn foreign(events: &[WorkerEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Foreign(f) => Some(f.tip.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn zero_window_makes_one_commit_and_push_per_intent() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    for (name, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
        w.submit(put(name, value));
        w.poll();
    }
    let events = w.take_events();
    let tip = bare.tip().expect("main exists");
    assert_eq!(
        published(&events).last(),
        Some(&(IntentSeq(3), Some(tip.clone())))
    );
    assert_eq!(
        bare.subjects(),
        vec![
            "backflow: update configmaps/web/c in apps",
            "backflow: update configmaps/web/b in apps",
            "backflow: update configmaps/web/a in apps"
        ]
    );
    let files = bare.files("main");
    assert_eq!(files.get(&path_of("b")), Some(&rendered("2")));
    assert_eq!(files.len(), 3);
    let stats = w.stats();
    assert_eq!(
        (stats.commits, stats.pushes_accepted, stats.pushes_rejected),
        (3, 3, 0)
    );
    assert!(foreign(&events).is_empty(), "own pushes are never foreign");
    // Author and committer come from the configuration.
    assert_eq!(
        git(
            bare.path(),
            &["log", "-1", "--format=%an <%ae>|%cn", "main"]
        )
        .trim(),
        "backflow test <backflow@example.com>|backflow test"
    );
    bare.assert_only_fast_forwards();
}

#[test]
fn window_groups_by_silence_with_last_write_wins() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.window = Duration::from_secs(1);
        c.timing.max_window_age = Duration::from_secs(3);
    });
    w.submit(put("a", "1"));
    w.submit(put("b", "1"));
    w.submit(put("a", "2"));
    let wake = w.poll();
    assert_eq!(
        wake,
        start_time() + Duration::from_secs(1),
        "wakes when the silence ends"
    );
    assert_eq!(
        bare.tip(),
        None,
        "nothing is committed while the window is open"
    );
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert_eq!(bare.subjects(), vec!["backflow: 2 changes in apps"]);
    let files = bare.files("main");
    assert_eq!(files.get(&path_of("a")), Some(&rendered("2")));
    // A steady stream every 900 ms still commits when the window reaches its maximum age.
    for i in 0..4 {
        w.submit(put("c", &i.to_string()));
        clock.advance(Duration::from_millis(900));
        w.poll();
    }
    assert_eq!(
        bare.subjects().len(),
        2,
        "max age closed the window under a steady stream"
    );
    assert_eq!(bare.files("main").get(&path_of("c")), Some(&rendered("3")));
}

#[test]
fn flush_ignores_cooldown_and_is_not_delayed_by_later_writes() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.push_cooldown = Duration::from_secs(3600);
        c.timing.refresh_interval = Duration::from_secs(7200);
    });
    w.submit(put("a", "1"));
    w.poll();
    let first = bare.tip().expect("first push");
    w.submit(put("b", "1"));
    let wake = w.poll();
    assert_eq!(
        bare.tip(),
        Some(first.clone()),
        "the cooldown holds the second push"
    );
    assert_eq!(wake, start_time() + Duration::from_secs(3600));
    assert_eq!(
        w.stats().commits,
        2,
        "the commit is made, only the push waits"
    );
    let mark = w.flush();
    assert_eq!(mark.0, IntentSeq(2));
    // Taken after the mark: must not hold the flush back.
    let later = w.submit(put("c", "1"));
    let _ = later;
    w.poll();
    let events = w.take_events();
    let tip = bare.tip().expect("tip");
    assert_ne!(tip, first);
    assert!(
        published(&events)
            .iter()
            .any(|(through, t)| *through >= mark.0 && t.as_deref() == Some(tip.as_str()))
    );
    // A flush with nothing pending answers with the current tip.
    clock.advance(Duration::from_secs(1));
    let mark = w.flush();
    w.poll();
    let tip_now = bare.tip().expect("tip");
    assert!(
        published(&w.take_events())
            .iter()
            .any(|(through, t)| *through >= mark.0 && t.as_deref() == Some(tip_now.as_str()))
    );
}

#[test]
fn refused_push_replays_pending_writes_onto_the_foreign_commit() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "api-1"));
    w.poll();
    w.take_events();
    // Somebody else changes an API-written object and adds a file of their own.
    let foreign_clone = ForeignClone::new(&bare.url());
    let foreign_sha = foreign_clone.commit_and_push(
        &[
            (path_of("a").as_str(), Some("bob's a\n")),
            ("README.md", Some("hello\n")),
        ],
        "bob edits",
    );
    // The worker does not know yet: its next push is refused, fetched, replayed and pushed.
    w.submit(put("a", "api-2"));
    w.submit(put("b", "api-1"));
    w.poll();
    let events = w.take_events();
    assert_eq!(
        foreign(&events),
        vec![foreign_sha.clone()],
        "the foreign tip is reported once"
    );
    let stats = w.stats();
    assert_eq!((stats.pushes_rejected, stats.replays), (1, 1));
    assert!(
        bare.contains(&foreign_sha),
        "the foreign commit stays in history"
    );
    let files = bare.files("main");
    assert_eq!(
        files.get("README.md").map(String::as_str),
        Some("hello\n"),
        "foreign paths survive"
    );
    assert_eq!(
        files.get(&path_of("a")),
        Some(&rendered("api-2")),
        "the API side wins for what it wrote"
    );
    assert_eq!(files.get(&path_of("b")), Some(&rendered("api-1")));
    assert_eq!(published(&events).last().map(|p| p.0), Some(IntentSeq(3)));
    bare.assert_only_fast_forwards();
}

#[test]
fn writes_that_change_nothing_collapse_away() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    // The same value again (a watch echo) makes no commit but is reported published.
    w.submit(put("a", "1"));
    w.submit(Intent::delete("apps", key("never-existed")));
    w.poll();
    assert_eq!(w.stats().commits, 1);
    assert_eq!(
        published(&w.take_events()).last().map(|p| p.0),
        Some(IntentSeq(3))
    );
    // A foreign commit that makes exactly the pending change: the replayed write collapses.
    let foreign_clone = ForeignClone::new(&bare.url());
    w.submit(put("b", "same"));
    foreign_clone.commit_and_push(
        &[(path_of("b").as_str(), Some(rendered("same").as_str()))],
        "bob got there first",
    );
    w.poll();
    assert_eq!(
        bare.subjects()[0],
        "bob got there first",
        "nothing to add on top of it"
    );
    assert_eq!(
        published(&w.take_events()).last().map(|p| p.0),
        Some(IntentSeq(4))
    );
}

#[test]
fn an_empty_resync_is_reported_published_while_idle() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    w.take_events();
    // A snapshot of a type with no objects: nothing to write, nothing else pending.
    let seq = w.submit_resync("apps", Vec::new());
    w.poll();
    let tip = bare.tip();
    assert!(
        published(&w.take_events())
            .iter()
            .any(|(through, at)| *through >= seq && *at == tip),
        "the empty resync is reported published at the current tip"
    );
    assert_eq!(w.stats().commits, 1, "and makes no commit");
}

#[test]
fn commit_request_uses_the_callers_message() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.window = Duration::from_secs(60);
    });
    w.submit(put("a", "1"));
    w.submit(put("b", "1"));
    let mark = w.commit_request("release 2024.1\n\nrequested by alice");
    w.poll();
    assert_eq!(
        git(bare.path(), &["log", "-1", "--format=%B", "main"]).trim(),
        "release 2024.1\n\nrequested by alice"
    );
    let tip = bare.tip();
    assert!(
        published(&w.take_events())
            .iter()
            .any(|(t, tip_)| *t >= mark.0 && *tip_ == tip)
    );
}

#[test]
fn refresh_and_notify_report_foreign_commits_but_not_our_own() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.refresh_interval = Duration::from_secs(600);
    });
    w.poll();
    assert_eq!(w.remote_tip(), Tip::Absent);
    w.submit(put("a", "1"));
    w.poll();
    let foreign_clone = ForeignClone::new(&bare.url());
    let f1 = foreign_clone.commit_and_push(&[("x", Some("1"))], "f1");
    w.poll();
    assert!(
        foreign(&w.take_events()).is_empty(),
        "not looked yet: the refresh is 10 minutes away"
    );
    w.notify_remote_moved();
    w.poll();
    assert_eq!(foreign(&w.take_events()), vec![f1.clone()]);
    let f2 = foreign_clone.commit_and_push(&[("x", Some("2"))], "f2");
    clock.advance(Duration::from_secs(600));
    w.poll();
    assert_eq!(
        foreign(&w.take_events()),
        vec![f2.clone()],
        "the periodic refresh sees it"
    );
    // A duplicate hint changes nothing.
    w.notify_remote_moved();
    w.poll();
    assert!(foreign(&w.take_events()).is_empty());
}

#[test]
fn a_refusal_that_is_not_a_move_is_retried_on_a_timer() {
    let bare = Bare::new();
    let hook = bare.path().join("hooks").join("pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'frozen for release' >&2\nexit 1\n").expect("hook");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cache = tempfile::tempdir().expect("tempdir");
    // The CLI transport runs server hooks over file://.
    let (mut w, clock) = worker(
        cache.path(),
        Box::new(CliRemote::new(&bare.url(), Credentials::None)),
        |_| {},
    );
    w.submit(put("a", "1"));
    let wake = w.poll();
    let events = w.take_events();
    let retry_at = events
        .iter()
        .find_map(|e| match e {
            WorkerEvent::Failed { retry_at, .. } => Some(*retry_at),
            _ => None,
        })
        .expect("the cycle failed");
    assert_eq!(
        wake, retry_at,
        "a timed retry is scheduled without waiting for another write"
    );
    assert_eq!(w.pending_writes().len(), 1, "the write stays pending");
    assert_eq!(
        w.stats().replays,
        0,
        "the branch did not move, so nothing is replayed"
    );
    std::fs::remove_file(&hook).expect("unhook");
    // Before the retry time nothing happens; at it, the write lands.
    w.poll();
    assert_eq!(bare.tip(), None);
    clock.advance(retry_at.duration_since(start_time()).expect("later"));
    w.poll();
    assert!(bare.tip().is_some());
    assert_eq!(bare.files("main").get(&path_of("a")), Some(&rendered("1")));
}

#[test]
fn cli_and_auto_transports_agree_over_file_urls() {
    // One body, two transports: the in-process file remote and `git push --force-with-lease`.
    for cli in [false, true] {
        let bare = Bare::new();
        let cache = tempfile::tempdir().expect("tempdir");
        let spec = RemoteSpec {
            transport: if cli {
                backflow_git::TransportChoice::Cli
            } else {
                backflow_git::TransportChoice::Auto
            },
            ..RemoteSpec::new(bare.url())
        };
        let (mut w, _clock) = worker(cache.path(), open_remote(&spec), |_| {});
        w.submit(put("a", "1"));
        w.poll();
        let foreign_clone = ForeignClone::new(&bare.url());
        let f = foreign_clone.commit_and_push(&[("other.txt", Some("x"))], "foreign");
        w.submit(put("a", "2"));
        w.poll();
        assert!(bare.contains(&f), "cli={cli}");
        assert_eq!(
            bare.files("main").get(&path_of("a")),
            Some(&rendered("2")),
            "cli={cli}"
        );
        assert_eq!(w.stats().replays, 1, "cli={cli}");
        assert!(!w.has_unpublished(), "cli={cli}");
        bare.assert_only_fast_forwards();
    }
}

/// What left a folder since a commit: a file added and removed in between is found, with the
/// content it last had; a file still there, or one removed before `since`, is not.
#[test]
fn read_gone_finds_files_that_left_the_folder_since_a_commit() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    let tip = |w: &mut backflow_git::BranchWorker| {
        w.poll();
        w.take_events()
            .iter()
            .rev()
            .find_map(|e| match e {
                WorkerEvent::Published { tip, .. } => *tip,
                _ => None,
            })
            .expect("published")
    };
    w.submit(put("early", "1"));
    w.submit(put("kept", "1"));
    tip(&mut w);
    w.submit(Intent::delete("apps", key("early")));
    let since = tip(&mut w);
    w.submit(put("passing", "v1"));
    tip(&mut w);
    w.submit(put("passing", "v2"));
    tip(&mut w);
    w.submit(Intent::delete("apps", key("passing")));
    w.submit(put("kept", "2"));
    let now = tip(&mut w);
    let gone = w.read_gone(Some(since), now, "apps").expect("read");
    let paths: Vec<&str> = gone.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, [path_of("passing").as_str()], "{gone:?}");
    assert_eq!(gone[0].content, rendered("v2").into_bytes());
    // Without a starting commit, the recent history: `early` went away too.
    let all = w.read_gone(None, now, "apps").expect("read");
    assert_eq!(all.len(), 2, "{all:?}");
}

/// Files directly in `objects/<two hex digits>/` (loose objects) and packs under `objects/pack`.
fn object_files(repo: &std::path::Path) -> (usize, usize) {
    let objects = repo.join("objects");
    let loose = std::fs::read_dir(&objects)
        .expect("objects")
        .flatten()
        .filter(|e| e.file_name().len() == 2)
        .map(|e| std::fs::read_dir(e.path()).map_or(0, Iterator::count))
        .sum();
    let packs = std::fs::read_dir(objects.join("pack")).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
            .count()
    });
    (loose, packs)
}

/// A commit of many writes is one pack in the cache and one in a `file://` remote, not a file
/// per object in each (it was 18 loose objects on each side); so is a commit of one write
/// (it was five loose files on each side).
#[test]
fn a_group_commit_reaches_the_cache_and_the_remote_as_one_pack_each() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _clock) = worker(
        cache.path(),
        Box::new(FileRemote::new(&bare.url())),
        |cfg| {
            cfg.timing.window = Duration::from_secs(60);
        },
    );
    w.poll();
    let cache_repo = cache.path().join("cache.git");
    let before = (object_files(&cache_repo), object_files(&bare.path()));
    for i in 0..12 {
        w.submit(put(&format!("n{i}"), &i.to_string()));
    }
    w.flush();
    w.poll();
    assert_eq!(bare.files("main").len(), 12);
    assert_eq!(w.stats().commits, 1);
    let ((cache_loose, cache_packs), (remote_loose, remote_packs)) = before;
    assert_eq!(object_files(&cache_repo), (cache_loose, cache_packs + 1));
    assert_eq!(object_files(&bare.path()), (remote_loose, remote_packs + 1));

    w.submit(put("n0", "changed"));
    w.flush();
    w.poll();
    assert_eq!(w.stats().commits, 2);
    // A commit of one write is a blob, its folders' trees and the commit: one pack too, and
    // never a loose file on either side.
    assert_eq!(object_files(&cache_repo), (cache_loose, cache_packs + 2));
    assert_eq!(object_files(&bare.path()), (remote_loose, remote_packs + 2));
    assert!(git_ok(bare.path(), &["fsck", "--full", "--strict"]));
    assert!(git_ok(&cache_repo, &["fsck", "--full", "--strict"]));
}

/// An applier's echo of the tip the worker knew when it was submitted, and a push removing the
/// object that the worker reads before the echo's first build: the removal stays (planned on the
/// new tip alone, the echo would put the object back over it).
#[test]
fn an_echo_is_judged_against_the_tip_known_at_its_submit() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.window = Duration::from_secs(1);
        c.timing.refresh_interval = Duration::from_secs(600);
    });
    w.submit(put("a", "1"));
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert_eq!(bare.files("main").get(&path_of("a")), Some(&rendered("1")));
    w.submit(put("a", "1").echo());
    let removal = ForeignClone::new(&bare.url()).commit_and_push(&[(&path_of("a"), None)], "rm a");
    w.notify_remote_moved();
    w.poll();
    assert_eq!(foreign(&w.take_events()), vec![removal.clone()]);
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert_eq!(
        bare.tip(),
        Some(removal),
        "nothing was written over the removal"
    );
    assert_eq!(bare.files("main").get(&path_of("a")), None);
}
