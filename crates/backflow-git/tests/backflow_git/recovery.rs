//! What the worker keeps across restarts and how it meets a branch that lost its commits, with
//! real repositories: a push made while backflow was stopped, a force-push, a deleted branch,
//! and a wall clock stepped backwards.

use std::time::Duration;

use backflow_branch::Tip;
use backflow_git::{FileRemote, WorkerEvent};

use crate::support::*;

fn foreign(events: &[WorkerEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Foreign(f) => Some(f.tip.to_string()),
            _ => None,
        })
        .collect()
}

fn diverged(events: &[WorkerEvent]) -> Option<(Option<String>, String)> {
    events.iter().find_map(|e| match e {
        WorkerEvent::Diverged(d) => Some((d.tip.map(|t| t.to_string()), d.lost.to_string())),
        _ => None,
    })
}

#[test]
fn a_push_made_while_stopped_is_reported_foreign_on_start_once() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let ours = bare.tip().expect("pushed");
    drop(w);
    let person = ForeignClone::new(&bare.url());
    let theirs = person.commit_and_push(&[("notes.txt", Some("hi"))], "while stopped");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.poll();
    let events = w.take_events();
    assert_eq!(foreign(&events), vec![theirs.clone()]);
    assert!(events.iter().any(|e| matches!(
        e,
        WorkerEvent::Foreign(f) if f.previous.map(|p| p.to_string()) == Some(ours.clone())
    )));
    drop(w);
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.poll();
    assert!(
        foreign(&w.take_events()).is_empty(),
        "a tip already reported is not reported again on the next start"
    );
}

/// A process killed after its push landed and before it recorded the push (its answer never
/// heard, or the record still held back by its pace) finds its own commit at the tip on start:
/// the commit it was sending was kept before the push went out, so it is not reported foreign.
#[test]
fn a_push_the_process_died_before_recording_is_not_foreign_on_start() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let first = bare.tip().expect("pushed");
    w.submit(put("a", "2"));
    w.poll();
    let second = bare.tip().expect("pushed");
    assert_ne!(first, second);
    drop(w);
    // What a kill -9 right after the second push leaves: the record names the first.
    let repo = cache.path().join("cache.git");
    git(&repo, &["update-ref", "refs/backflow/pushed/main", &first]);
    git(&repo, &["update-ref", "refs/remotes/origin/main", &first]);
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.poll();
    let events = w.take_events();
    assert!(foreign(&events).is_empty(), "{events:?}");
    assert_eq!(diverged(&events), None);
    w.submit(put("b", "1"));
    w.poll();
    assert!(bare.contains(&second), "the next push builds on it");
}

#[test]
fn a_force_push_that_drops_backflows_commit_holds_publication_until_the_resync() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let ours = bare.tip().expect("pushed");
    // Somebody rewrites history: a new root commit, force-pushed over ours.
    let person = ForeignClone::new(&bare.url());
    let w2 = person.work();
    std::fs::write(w2.join("x.txt"), "rewritten").expect("write");
    git(&w2, &["add", "-A"]);
    git(&w2, &["commit", "--quiet", "-m", "rewrite"]);
    git(
        &w2,
        &[
            "push",
            "--quiet",
            "--force",
            "origin",
            "HEAD:refs/heads/main",
        ],
    );
    let theirs = bare.tip().expect("force-pushed");
    w.submit(put("b", "1"));
    w.notify_remote_moved();
    w.poll();
    let events = w.take_events();
    assert_eq!(diverged(&events), Some((Some(theirs.clone()), ours)));
    assert_eq!(
        bare.tip(),
        Some(theirs.clone()),
        "nothing pushed from the pending writes alone"
    );
    w.submit_resync("apps", vec![put("a", "1"), put("b", "1")]);
    w.recovered();
    w.poll();
    let files = bare.files("main");
    assert_eq!(
        files.get(&path_of("a")),
        Some(&rendered("1")),
        "the dropped write is back"
    );
    assert_eq!(files.get(&path_of("b")), Some(&rendered("1")));
    assert_eq!(files.get("x.txt").map(String::as_str), Some("rewritten"));
    assert!(
        bare.contains(&theirs),
        "the rewrite itself is kept: no force-push back"
    );
}

#[test]
fn a_branch_deleted_while_stopped_is_diverged_on_start() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    drop(w);
    git(bare.path(), &["update-ref", "-d", "refs/heads/main"]);
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.poll();
    assert_eq!(w.remote_tip(), Tip::Absent);
    let (tip, _) = diverged(&w.take_events()).expect("diverged");
    assert_eq!(tip, None);
    w.submit_resync("apps", vec![put("a", "1")]);
    w.recovered();
    w.poll();
    assert_eq!(bare.files("main").get(&path_of("a")), Some(&rendered("1")));
}

#[test]
fn a_wall_clock_stepped_backwards_does_not_stretch_the_window() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |c| {
        c.timing.window = Duration::from_secs(1);
    });
    w.poll();
    w.submit(put("a", "1"));
    w.poll();
    assert_eq!(bare.tip(), None, "the window is open");
    // NTP steps the clock back an hour, then a second passes.
    clock.set_wall(start_time() - Duration::from_secs(3600));
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert!(
        bare.tip().is_some(),
        "the window closed after one second of real time"
    );
}

#[test]
fn the_last_push_is_recorded_at_most_once_a_second_and_always_when_the_worker_goes() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let recorded = || {
        git(
            cache.path().join("cache.git"),
            &["rev-parse", "--verify", "-q", "refs/backflow/pushed/main"],
        )
        .trim()
        .to_string()
    };
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let first = bare.tip().expect("pushed");
    assert_eq!(recorded(), first, "the first push is recorded at once");
    w.submit(put("b", "1"));
    w.poll();
    let second = bare.tip().expect("pushed");
    assert_eq!(recorded(), first, "a push within the second waits");
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert_eq!(
        recorded(),
        second,
        "and is recorded once the second has passed"
    );
    w.submit(put("c", "1"));
    w.poll();
    let third = bare.tip().expect("pushed");
    drop(w);
    assert_eq!(
        recorded(),
        third,
        "a worker that goes records its last push"
    );
}

#[test]
fn a_delete_taken_but_not_pushed_before_a_crash_reaches_git_after_restart() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let journal = journal_of(cache.path());
    let one_second = |c: &mut backflow_git::WorkerConfig| c.timing.window = Duration::from_secs(1);
    let (mut w, clock) = worker(
        cache.path(),
        Box::new(FileRemote::new(&bare.url())),
        one_second,
    );
    w.submit(put("a", "1"));
    w.submit(put("b", "1"));
    w.flush();
    w.poll();
    assert!(bare.files("main").contains_key(&path_of("a")));
    w.submit(backflow_branch::Intent::delete("apps", key("a")));
    w.poll();
    assert!(journal.exists(), "the delete is journaled when it is taken");
    // The process dies with the delete in the open window: nothing of it reached Git.
    drop(w);
    assert!(bare.files("main").contains_key(&path_of("a")));

    let (mut w, clock2) = worker(
        cache.path(),
        Box::new(FileRemote::new(&bare.url())),
        one_second,
    );
    w.poll();
    clock2.advance(Duration::from_secs(1));
    w.poll();
    let files = bare.files("main");
    assert!(
        !files.contains_key(&path_of("a")),
        "the journaled delete is published"
    );
    assert!(files.contains_key(&path_of("b")));
    assert!(!journal.exists(), "and forgotten once pushed");
    let _ = clock;
}

/// A delete taken and then superseded by a new write of the object (created again live) before
/// a crash is not submitted again after it: the new process's resync reads the object back,
/// and a stale delete would remove it from Git (and the applier then from the live side).
#[test]
fn a_delete_superseded_by_a_later_write_is_forgotten_by_the_journal() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let journal = journal_of(cache.path());
    let one_second = |c: &mut backflow_git::WorkerConfig| c.timing.window = Duration::from_secs(1);
    let (mut w, _clock) = worker(
        cache.path(),
        Box::new(FileRemote::new(&bare.url())),
        one_second,
    );
    w.submit(put("a", "1"));
    w.flush();
    w.poll();
    w.submit(backflow_branch::Intent::delete("apps", key("a")));
    assert!(journal.exists(), "the delete is journaled when it is taken");
    w.submit(put("a", "2"));
    assert!(
        !journal.exists(),
        "a later write of the object supersedes its journaled delete"
    );
    drop(w);
    let (mut w, clock) = worker(
        cache.path(),
        Box::new(FileRemote::new(&bare.url())),
        one_second,
    );
    w.poll();
    clock.advance(Duration::from_secs(1));
    w.poll();
    assert!(
        bare.files("main").contains_key(&path_of("a")),
        "no stale delete removes the object"
    );
}

/// A delete whose push landed while the process died before hearing so is still in the
/// journal at start, and is submitted again; a push made meanwhile created the object again
/// in Git. The delete reached Git already (the worker's first fetch finds the push it was
/// sending): it must not remove the file the later push made.
#[test]
fn a_journaled_delete_that_landed_unheard_does_not_remove_a_file_pushed_since() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let journal = journal_of(cache.path());
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let before = bare.tip().expect("pushed");
    w.submit(backflow_branch::Intent::delete("apps", key("a")));
    let journaled = std::fs::read(&journal).expect("the delete is journaled");
    w.poll();
    assert!(
        !bare.files("main").contains_key(&path_of("a")),
        "the delete landed"
    );
    drop(w);
    // What a kill -9 right after the push leaves: the record names the push before, and the
    // journal still holds the delete.
    let repo = cache.path().join("cache.git");
    git(&repo, &["update-ref", "refs/backflow/pushed/main", &before]);
    git(&repo, &["update-ref", "refs/remotes/origin/main", &before]);
    std::fs::write(&journal, journaled).expect("restore the journal");
    // Somebody creates the object again in Git meanwhile.
    let person = ForeignClone::new(&bare.url());
    person.commit_and_push(&[(&path_of("a"), Some("value: again\n"))], "a again");
    let (mut w, clock) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.poll();
    clock.advance(Duration::from_secs(2));
    w.poll();
    assert_eq!(
        bare.files("main").get(&path_of("a")).map(String::as_str),
        Some("value: again\n"),
        "the push made since the delete landed stays"
    );
}

/// The delete journal of branch `main` in the worker cache under `cache`.
fn journal_of(cache: &std::path::Path) -> std::path::PathBuf {
    cache.join("cache.git/backflow/pending-deletes-main.json")
}

/// What `backflow history` reads of Git: the commits that changed a folder, newest first, each
/// with its author and the changed files before and after; backflow's own told by its
/// committer. A commit outside the folder is not one of them.
#[test]
fn a_folders_history_names_each_commit_that_changed_it_with_the_files_before_and_after() {
    let bare = Bare::new();
    let cache = tempfile::tempdir().expect("tempdir");
    let (mut w, _) = worker(cache.path(), Box::new(FileRemote::new(&bare.url())), |_| {});
    w.submit(put("a", "1"));
    w.poll();
    let ours = bare.tip().expect("pushed");
    let person = ForeignClone::new(&bare.url());
    let path = path_of("a");
    let folder = path.rsplit_once('/').map_or("", |(d, _)| d).to_string();
    let theirs = person.commit_and_push(&[(path.as_str(), Some("value: 2\n"))], "by hand");
    person.commit_and_push(&[("elsewhere/notes.txt", Some("hi"))], "outside");
    w.notify_remote_moved();
    w.poll();
    let tip: backflow_branch::CommitId = bare.tip().expect("tip").parse().expect("id");
    let history = w.read_history(tip, &folder, 10).expect("history");
    assert_eq!(history.backflow.name, "backflow test");
    let commits: Vec<String> = history
        .changes
        .iter()
        .map(|c| c.commit.to_string())
        .collect();
    assert_eq!(
        commits,
        [theirs, ours],
        "newest first, the outside commit left out"
    );
    let hand = &history.changes[0];
    assert_eq!(hand.author.email, "person@example.com");
    assert_eq!(hand.message.trim(), "by hand");
    assert_eq!(hand.files.len(), 1);
    assert_eq!(hand.files[0].path, path);
    assert_eq!(
        hand.files[0].before.as_deref(),
        Some(rendered("1").as_bytes())
    );
    assert_eq!(hand.files[0].after.as_deref(), Some(&b"value: 2\n"[..]));
    let own = &history.changes[1];
    assert_eq!(own.committer, history.backflow, "backflow's own commit");
    assert_eq!(own.files[0].before, None, "the commit added the file");
    let limited = w.read_history(tip, &folder, 1).expect("history");
    assert_eq!(limited.changes.len(), 1, "at most the limit");
}
