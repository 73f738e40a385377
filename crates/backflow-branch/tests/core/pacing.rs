//! When the core acts: the wake-ups it asks for, a new configuration taking effect on what is
//! already running, and how many times it tries a push. The simulator sees these only as
//! "acted late or not at all"; here each is pinned to its instant.

use std::time::Duration;

use backflow_branch::{CoreConfig, CycleFailure, Event, Input, IntentSeq};

use crate::model::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn pushes(s: &Shell) -> usize {
    s.effects.iter().filter(|e| e.starts_with("Push")).count()
}

fn builds(s: &Shell) -> usize {
    s.effects.iter().filter(|e| e.starts_with("Build")).count()
}

/// A worker that has pushed one write and now cools down for `cooldown`, with a zero window.
fn cooling(cooldown: Duration) -> Shell {
    let mut s = Shell::new(CoreConfig {
        window: Duration::ZERO,
        push_cooldown: cooldown,
        ..CoreConfig::default()
    });
    s.submit(put("a", "1"));
    s.tick();
    assert_eq!(pushes(&s), 1);
    assert_eq!(s.core.published_through(), IntentSeq(1));
    assert_eq!(
        s.core.durable().pushed,
        s.remote.tip,
        "what a restart starts from"
    );
    s
}

#[test]
fn a_shorter_cooldown_caps_the_one_already_running() {
    let mut s = cooling(secs(60));
    let cfg = CoreConfig {
        window: Duration::ZERO,
        push_cooldown: secs(5),
        ..CoreConfig::default()
    };
    s.step(Input::Reconfigure(cfg));
    s.submit(put("b", "1"));
    s.tick();
    assert_eq!(pushes(&s), 1, "the new cooldown runs from the reconfigure");
    s.advance(secs(4));
    s.tick();
    assert_eq!(pushes(&s), 1);
    s.advance(secs(1));
    s.tick();
    assert_eq!(pushes(&s), 2, "pushed once the shorter cooldown is over");
}

#[test]
fn a_shorter_refresh_interval_is_counted_from_the_reconfigure() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    assert_eq!(s.wake, s.now + secs(600));
    s.advance(secs(100));
    s.step(Input::Reconfigure(CoreConfig {
        refresh_interval: secs(30),
        ..CoreConfig::default()
    }));
    assert_eq!(s.wake, s.now + secs(30), "not at once, not at the old time");
}

#[test]
fn a_window_made_immediate_closes_what_it_holds_and_a_shorter_one_waits() {
    let mut s = Shell::new(CoreConfig {
        window: secs(10),
        ..CoreConfig::default()
    });
    s.submit(put("a", "1"));
    s.submit(put("b", "1"));
    s.step(Input::Reconfigure(CoreConfig {
        window: secs(5),
        ..CoreConfig::default()
    }));
    assert_eq!(s.core.window_len(), 2, "a window of 5 s still gathers");
    s.step(Input::Reconfigure(CoreConfig {
        window: Duration::ZERO,
        ..CoreConfig::default()
    }));
    assert_eq!(s.core.window_len(), 0, "a zero window holds nothing");
    assert_eq!(s.core.decided_through(), IntentSeq(2));
}

#[test]
fn a_decided_write_waiting_for_the_cooldown_is_committed_at_once() {
    let mut s = cooling(secs(60));
    s.submit(put("b", "1"));
    assert_eq!(s.wake, s.now, "the commit is due now, only the push waits");
    s.tick();
    assert_eq!(builds(&s), 2);
    assert_eq!(pushes(&s), 1);
}

#[test]
fn a_foreign_commit_seen_while_cooling_rebuilds_the_waiting_commit_on_it_at_once() {
    let mut s = cooling(secs(60));
    s.submit(put("b", "1"));
    s.tick();
    assert_eq!(builds(&s), 2);
    let foreign = s.remote.foreign_push("other", Some("x"));
    s.step(Input::RemoteMoved);
    s.tick();
    assert_eq!(
        builds(&s),
        3,
        "built again on the tip just read, before the push is due"
    );
    assert!(
        s.effects.last_chunk::<3>().is_some_and(|e| e
            .iter()
            .any(|e| e.starts_with("Build") && e.contains(&format!("{foreign:?}")))),
        "on the foreign commit: {:?}",
        s.effects
    );
    assert_eq!(pushes(&s), 1);
    assert_eq!(s.core.stats().foreign_commits, 1);
}

#[test]
fn someone_waiting_for_the_window_wakes_the_worker_now() {
    let mut s = Shell::new(CoreConfig {
        window: secs(10),
        ..CoreConfig::default()
    });
    s.tick();
    s.submit(put("a", "1"));
    assert_eq!(s.wake, s.now + secs(10), "the window's silence");
    s.step(Input::Hurry);
    assert_eq!(s.wake, s.now, "a waiter does not sit out the window");
}

#[test]
fn an_empty_resync_while_a_write_cools_takes_no_flush_mark() {
    let mut s = cooling(secs(60));
    s.submit(put("b", "1"));
    s.tick();
    s.step(Input::Resync {
        target: "apps/web".into(),
        intents: Vec::new(),
    });
    s.tick();
    assert_eq!(
        pushes(&s),
        1,
        "the write pending is published by its push, not hurried by the resync"
    );
    assert_eq!(s.core.resync_receipt(), IntentSeq(2));
}

#[test]
fn an_empty_resync_while_another_is_gathering_waits_for_it() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    s.step(Input::Resync {
        target: "apps/web".into(),
        intents: vec![put("a", "1")],
    });
    s.step(Input::Resync {
        target: "apps/db".into(),
        intents: Vec::new(),
    });
    assert_eq!(
        s.core.resync_receipt(),
        IntentSeq(1),
        "the receipt covers the resync still gathering"
    );
    s.tick();
    let early = s
        .take_events()
        .into_iter()
        .any(|e| matches!(e, Event::Published { .. }));
    assert!(!early, "nothing reported before the gathering resync");
    s.settle();
    assert!(
        s.take_events()
            .iter()
            .any(|e| matches!(e, Event::Published { through, .. } if *through == IntentSeq(1)))
    );
}

#[test]
fn every_replay_counts_as_an_attempt() {
    let mut s = Shell::new(CoreConfig {
        max_attempts: 2,
        window: Duration::ZERO,
        ..CoreConfig::default()
    });
    s.tick();
    s.deferred_io = true;
    s.submit(put("a", "1"));
    s.tick();
    for n in 0..2 {
        // Somebody pushes before each of backflow's pushes lands.
        while s
            .in_flight
            .as_ref()
            .is_some_and(|e| !matches!(e, backflow_branch::Effect::Push { .. }))
        {
            s.answer();
        }
        s.remote.foreign_push(&format!("race-{n}"), Some("1"));
        s.answer();
    }
    while s.answer() {}
    let exhausted = s.take_events().into_iter().find_map(|e| match e {
        Event::Failed {
            error: CycleFailure::Exhausted { attempts },
            ..
        } => Some(attempts),
        _ => None,
    });
    assert_eq!(exhausted, Some(2), "two attempts allowed, two refused");
    assert_eq!(pushes(&s), 2);
}
