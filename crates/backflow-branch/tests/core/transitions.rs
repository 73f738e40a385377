//! Each phase transition of the core, one scenario at a time.

use std::time::Duration;

use backflow_branch::{
    CoreConfig, CycleFailure, Divergence, Effect, Event, Input, IntentSeq, Phase, Tip,
};

use crate::model::*;

fn zero_window() -> CoreConfig {
    CoreConfig {
        window: Duration::ZERO,
        ..CoreConfig::default()
    }
}

fn published(events: &[Event]) -> Vec<IntentSeq> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Published { through, .. } => Some(*through),
            _ => None,
        })
        .collect()
}

fn foreign(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::Foreign(_)))
        .count()
}

fn kinds(effects: &[Effect]) -> Vec<&'static str> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Fetch { .. } => "fetch",
            Effect::Build { .. } => "build",
            Effect::Push { .. } => "push",
            Effect::Persist(_) => "persist",
            Effect::Emit(_) => "emit",
            Effect::WakeAt(_) => "wake",
        })
        .collect()
}

#[test]
fn requests_record_and_ticks_act_one_io_effect_at_a_time() {
    let mut s = Shell::new(zero_window());
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let now = s.now;
    let effects = s.core.step(Input::Submit(put("a", "1")), now, &mut rng);
    assert_eq!(kinds(&effects), ["wake"], "a request starts no I/O");
    assert!(
        matches!(effects[0], Effect::WakeAt(at) if at == now),
        "but asks to be ticked now"
    );
    let effects = s.core.step(Input::Tick, now, &mut rng);
    assert_eq!(
        kinds(&effects),
        ["fetch", "wake"],
        "the tip is unknown at start"
    );
    assert!(matches!(s.core.phase(), Phase::Fetching(_)));
    let effects = s.core.step(
        Input::Fetched(Ok(backflow_branch::FetchedTip {
            tip: Tip::Absent,
            contains: std::collections::BTreeSet::default(),
        })),
        now,
        &mut rng,
    );
    assert_eq!(kinds(&effects), ["build", "wake"]);
    assert!(matches!(
        s.core.phase(),
        Phase::Building {
            from: 0,
            count: 1,
            attempt: Some(1)
        }
    ));
}

#[test]
fn zero_window_commits_and_pushes_each_intent_and_reports_it_published() {
    let mut s = Shell::new(zero_window());
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        s.submit(put(name, &i.to_string()));
        s.tick();
    }
    let events = s.take_events();
    assert_eq!(
        published(&events),
        [IntentSeq(1), IntentSeq(2), IntentSeq(3)]
    );
    assert_eq!(s.remote.history().len(), 3);
    assert_eq!(
        s.remote.tip_files().get(&file("b")).map(String::as_str),
        Some("1")
    );
    assert_eq!(foreign(&events), 0, "own pushes are never foreign");
    assert_eq!(
        s.durable.pushed, s.remote.tip,
        "the last push is kept durably"
    );
    assert!(matches!(s.core.phase(), Phase::Idle));
}

#[test]
fn a_burst_of_requests_taken_together_is_one_push() {
    let mut s = Shell::new(zero_window());
    s.tick();
    for name in ["a", "b", "c"] {
        s.submit(put(name, "1"));
    }
    s.tick();
    let stats = s.core.stats();
    assert_eq!((stats.commits, stats.pushes_accepted), (3, 1));
}

#[test]
fn window_closes_on_silence_and_cooldown_holds_only_the_push() {
    let mut s = Shell::new(CoreConfig {
        window: Duration::from_secs(1),
        push_cooldown: Duration::from_secs(60),
        ..CoreConfig::default()
    });
    s.submit(put("a", "1"));
    s.submit(put("a", "2"));
    s.tick();
    assert_eq!(s.core.window_len(), 1, "last write wins in the window");
    assert!(s.remote.tip.is_none());
    s.advance(Duration::from_secs(1));
    s.tick();
    assert_eq!(s.remote.history().len(), 1);
    let first = s.remote.tip;
    s.submit(put("b", "1"));
    s.advance(Duration::from_secs(1));
    s.tick();
    assert_eq!(s.remote.tip, first, "the cooldown holds the push");
    assert_eq!(s.core.stats().commits, 2, "but the commit is made");
    assert_eq!(
        s.wake,
        s.now + Duration::from_secs(59),
        "and it wakes when the cooldown ends"
    );
    s.step(Input::Flush);
    s.tick();
    assert_ne!(s.remote.tip, first, "a flush ignores the cooldown");
    assert_eq!(published(&s.take_events()).last(), Some(&IntentSeq(3)));
}

#[test]
fn flush_with_nothing_pending_reports_the_current_tip() {
    let mut s = Shell::new(zero_window());
    let foreign_tip = s.remote.foreign_push("x", Some("1"));
    s.step(Input::Flush);
    s.tick();
    let events = s.take_events();
    assert!(matches!(
        events.last(),
        Some(Event::Published { tip: Some(t), .. }) if *t == foreign_tip
    ));
}

#[test]
fn a_refused_push_replays_onto_the_foreign_tip_and_keeps_its_files() {
    let mut s = Shell::new(zero_window());
    s.submit(put("a", "1"));
    s.tick();
    s.faults.race = Some(("apps/web/configmaps/a".into(), "foreign".into()));
    s.remote.foreign_push("other/file", Some("kept"));
    s.submit(put("a", "2"));
    s.tick();
    let files = s.remote.tip_files();
    assert_eq!(
        files.get(&file("a")).map(String::as_str),
        Some("2"),
        "the API side wins"
    );
    assert_eq!(files.get("other/file").map(String::as_str), Some("kept"));
    assert_eq!(s.core.stats().replays, 1);
    assert_eq!(s.core.stats().pushes_rejected, 1);
    assert_eq!(
        foreign(&s.take_events()),
        1,
        "the tip the replay found is reported"
    );
    s.remote.assert_never_forced_by_backflow();
}

#[test]
fn a_hook_refusal_backs_off_and_retries_on_time() {
    let mut s = Shell::new(zero_window());
    s.faults.hook_refuses = 1;
    s.submit(put("a", "1"));
    s.tick();
    let events = s.take_events();
    let retry_at = events
        .iter()
        .find_map(|e| match e {
            Event::Failed {
                error: CycleFailure::Refused { reason },
                retry_at,
            } => {
                assert!(reason.contains("hook"));
                Some(*retry_at)
            }
            _ => None,
        })
        .expect("a failure is reported");
    assert!(matches!(s.core.phase(), Phase::BackingOff { until } if *until == retry_at));
    assert_eq!(
        s.wake, retry_at,
        "the retry is timed: no new event is needed"
    );
    s.tick();
    assert!(
        s.remote.tip.is_none(),
        "nothing is tried before the backoff ends"
    );
    s.tick_at_wake();
    assert!(s.remote.tip.is_some());
}

#[test]
fn every_attempt_refused_ends_the_cycle_as_exhausted() {
    let mut s = Shell::new(CoreConfig {
        max_attempts: 1,
        ..zero_window()
    });
    s.tick();
    s.submit(put("a", "1"));
    s.faults.race = Some(("x".into(), "1".into()));
    s.tick();
    assert!(
        s.take_events().iter().any(|e| matches!(
            e,
            Event::Failed {
                error: CycleFailure::Exhausted { attempts: 1 },
                ..
            }
        )),
        "one attempt allowed, one refused: the cycle gives up and backs off"
    );
    assert!(matches!(s.core.phase(), Phase::BackingOff { .. }));
    s.tick_at_wake();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("1"),
        "and publishes on the timed retry"
    );
    s.remote.assert_never_forced_by_backflow();
}

#[test]
fn a_push_that_landed_with_its_answer_lost_is_published_once() {
    let mut s = Shell::new(zero_window());
    s.faults.lose_answer = 1;
    s.submit(put("a", "1"));
    s.tick();
    let events = s.take_events();
    assert_eq!(
        published(&events),
        [IntentSeq(1)],
        "recognised by looking at the remote"
    );
    assert!(!events.iter().any(|e| matches!(e, Event::Failed { .. })));
    assert_eq!(s.core.stats().push_errors, 1);
    assert_eq!(s.core.stats().pushes_accepted, 0);
    assert!(!s.core.has_unpublished());
    s.submit(put("b", "1"));
    s.tick();
    assert_eq!(
        commits_touching(&s.remote, &file("a")),
        1,
        "never replayed twice"
    );
    assert_eq!(s.remote.history().len(), 2);
    assert_eq!(
        foreign(&s.take_events()),
        0,
        "its own lost push is not foreign"
    );
    assert_eq!(s.durable.pushed, s.remote.tip);
}

/// Somebody force-pushes the branch back to a commit of backflow's after a foreign commit
/// moved it on: the live side holds the foreign commit's values, so the move is a foreign
/// commit like any other, to be applied. It was taken for backflow's own push and never
/// applied (the simulator's held-applier schedule, seed 402923 of a million). Backflow's push
/// whose answer was lost, found at the tip, stays its own.
#[test]
fn a_force_push_back_to_an_older_commit_of_backflows_is_foreign() {
    for lost in [false, true] {
        let mut s = Shell::new(zero_window());
        s.faults.lose_answer = u32::from(lost);
        s.submit(put("a", "1"));
        s.tick();
        let own = s.remote.tip.unwrap();
        assert_eq!(
            foreign(&s.take_events()),
            0,
            "its own push (lost answer: {lost})"
        );
        s.remote.foreign_push(&file("a"), Some("2"));
        s.step(Input::RemoteMoved);
        s.tick();
        assert_eq!(foreign(&s.take_events()), 1, "the push on top");
        s.remote.force_push(Some(own));
        s.step(Input::RemoteMoved);
        s.tick();
        let events = s.take_events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Foreign(f) if f.tip == own)),
            "the force-push back to {own} (lost answer: {lost}): {events:?}"
        );
        assert!(
            diverged(&events).is_none(),
            "nothing of backflow's was lost"
        );
    }
}

#[test]
fn a_landed_push_with_a_lost_answer_never_overwrites_a_later_foreign_edit() {
    let mut s = Shell::new(zero_window());
    s.faults.lose_answer = 1;
    s.faults.after_landing = Some((file("a"), "edited by a person".into()));
    s.submit(put("a", "1"));
    s.tick();
    s.settle();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("edited by a person"),
        "the write already landed: replaying it would revert the person's later edit"
    );
    assert_eq!(commits_touching(&s.remote, &file("a")), 2);
}

#[test]
fn a_push_that_did_not_land_is_retried_after_the_backoff() {
    let mut s = Shell::new(zero_window());
    s.faults.fail_push = 1;
    s.submit(put("a", "1"));
    s.tick();
    let events = s.take_events();
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Failed {
            error: CycleFailure::Push(_),
            ..
        }
    )));
    assert!(s.remote.tip.is_none());
    s.settle();
    assert_eq!(commits_touching(&s.remote, &file("a")), 1);
}

#[test]
fn a_lost_answer_whose_check_fails_looks_again_before_pushing() {
    let mut s = Shell::new(zero_window());
    s.faults.lose_answer = 1;
    s.faults.fail_fetch = 1;
    s.submit(put("a", "1"));
    s.tick();
    assert!(
        matches!(s.core.phase(), Phase::BackingOff { .. }),
        "whether it landed is unknown"
    );
    s.settle();
    assert_eq!(
        commits_touching(&s.remote, &file("a")),
        1,
        "it landed, so nothing is pushed twice"
    );
    assert_eq!(s.core.stats().pushes_accepted, 0);
}

#[test]
fn refused_intents_are_reported_and_the_rest_of_the_write_goes_on() {
    let mut s = Shell::new(CoreConfig::default());
    s.submit(put("bad-name", "1"));
    s.submit(put("good", "1"));
    s.step(Input::Flush);
    s.tick();
    let events = s.take_events();
    let refused: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Refused { seq, key, .. } => Some((*seq, key.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(refused, [(IntentSeq(1), "bad-name".to_string())]);
    assert_eq!(s.remote.tip_files().len(), 1);
    assert_eq!(published(&events), [IntentSeq(2)]);
}

#[test]
fn intents_git_already_holds_are_dropped_and_never_overwrite_a_later_foreign_change() {
    let mut s = Shell::new(zero_window());
    s.remote.foreign_push(&file("a"), Some("1"));
    s.tick();
    s.submit(put("a", "1"));
    s.tick();
    assert_eq!(s.core.stats().commits, 0, "Git already reads like this");
    assert!(!s.core.has_unpublished());
    // The drop is final: a later push of `a` is not overwritten by the next write's replay.
    s.remote.foreign_push(&file("a"), Some("2"));
    s.submit(put("b", "1"));
    s.settle();
    let files = s.remote.tip_files();
    assert_eq!(files.get(&file("a")).map(String::as_str), Some("2"));
    assert_eq!(files.get(&file("b")).map(String::as_str), Some("1"));
}

/// The worker last read `a = 1`; somebody pushed `a = 2` that it has not seen; then a person
/// set `a = 1` through the API. Git read like the edit only before that push: the edit must
/// be written on top of it, not dropped as unchanged.
#[test]
fn an_intent_judged_unchanged_against_a_tip_not_read_since_is_confirmed_first() {
    let mut s = Shell::new(zero_window());
    s.remote.foreign_push(&file("a"), Some("1"));
    s.tick();
    s.remote.foreign_push(&file("a"), Some("2"));
    s.submit(put("a", "1"));
    s.settle();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("1"),
        "{}",
        s.effects.join("\n")
    );
    assert_eq!(s.core.stats().commits, 1);
}

/// The same with an applier's echo of what Git held (its write seen outside any apply
/// window): what Git read like when the worker first built it decides, and a push made since
/// is not overwritten.
#[test]
fn an_echo_git_already_reads_like_is_dropped_at_its_first_build() {
    let mut s = Shell::new(zero_window());
    s.remote.foreign_push(&file("a"), Some("1"));
    s.tick();
    s.remote.foreign_push(&file("a"), Some("2"));
    s.submit(put("a", "1").echo());
    s.settle();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("2")
    );
    assert_eq!(s.core.stats().commits, 0);
}

/// An applier's echo submitted while the worker knew a tip that held it, and a push removing
/// the object that the worker reads before the echo's first build (the commit window was open):
/// the echo repeats the commit it was judged against, so the removal stays. Built on the new tip
/// alone, it would put the object back (seen as an e2e `drivers::argo` failure).
#[test]
fn an_echo_of_the_tip_known_at_its_submit_never_overwrites_a_push_read_before_its_build() {
    let mut s = Shell::new(CoreConfig::default());
    s.remote.foreign_push(&file("a"), Some("1"));
    s.tick();
    s.settle();
    s.submit(put("a", "1").echo());
    s.remote.foreign_push(&file("a"), None);
    s.step(Input::RemoteMoved);
    s.tick();
    s.step(Input::Flush);
    s.settle();
    assert_eq!(
        s.remote.tip_files().get(&file("a")),
        None,
        "{}",
        s.effects.join("\n")
    );
    assert_eq!(s.core.stats().commits, 0);
}

/// As above, with another intent of the same write changing the tree: the push is refused,
/// and the replay judges the intent again on the tip it finds.
#[test]
fn an_intent_judged_unchanged_against_a_stale_tip_is_judged_again_on_the_replay() {
    let mut s = Shell::new(CoreConfig::default());
    s.remote.foreign_push(&file("a"), Some("1"));
    s.tick();
    s.remote.foreign_push(&file("a"), Some("2"));
    s.submit(put("a", "1"));
    s.submit(put("b", "1"));
    s.step(Input::Flush);
    s.settle();
    let files = s.remote.tip_files();
    assert_eq!(files.get(&file("a")).map(String::as_str), Some("1"));
    assert_eq!(files.get(&file("b")).map(String::as_str), Some("1"));
    assert_eq!(s.core.stats().pushes_rejected, 1);
}

#[test]
fn a_failed_build_backs_off_and_loses_nothing() {
    let mut s = Shell::new(zero_window());
    s.faults.fail_build = 1;
    s.submit(put("a", "1"));
    s.tick();
    assert!(s.take_events().iter().any(|e| matches!(
        e,
        Event::Failed {
            error: CycleFailure::Build(_),
            ..
        }
    )));
    s.settle();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("1")
    );
}

#[test]
fn a_webhook_hint_makes_the_next_tick_look_at_the_remote() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    let tip = s.remote.foreign_push("x", Some("1"));
    s.advance(Duration::from_secs(1));
    s.tick();
    assert_eq!(
        foreign(&s.take_events()),
        0,
        "the refresh is ten minutes away"
    );
    s.step(Input::RemoteMoved);
    assert_eq!(s.wake, s.now, "a hint asks for a tick now");
    s.tick();
    let events = s.take_events();
    assert!(matches!(
        events.as_slice(),
        [Event::Foreign(f)] if f.tip == tip && f.previous.is_none()
    ));
    assert_eq!(s.durable.seen, Some(tip));
}

#[test]
fn the_periodic_refresh_finds_foreign_commits() {
    let mut s = Shell::new(CoreConfig {
        refresh_interval: Duration::from_secs(60),
        ..CoreConfig::default()
    });
    s.tick();
    s.remote.foreign_push("x", Some("1"));
    assert_eq!(s.wake, s.now + Duration::from_secs(60));
    s.tick_at_wake();
    assert_eq!(foreign(&s.take_events()), 1);
}

#[test]
fn a_push_made_while_stopped_is_foreign_on_start() {
    let mut s = Shell::new(zero_window());
    s.submit(put("a", "1"));
    s.tick();
    let ours = s.remote.tip.expect("pushed");
    let mut s = s.restart(zero_window());
    s.tick();
    assert_eq!(
        foreign(&s.take_events()),
        0,
        "an unchanged branch is not foreign"
    );
    let mut s = s.restart(zero_window());
    let theirs = s.remote.foreign_push("x", Some("1"));
    s.tick();
    let events = s.take_events();
    assert!(
        matches!(events.as_slice(), [Event::Foreign(f)] if f.tip == theirs && f.previous == Some(ours)),
        "{events:?}"
    );
    let mut s = s.restart(zero_window());
    s.tick();
    assert_eq!(
        foreign(&s.take_events()),
        0,
        "reported once, not on every start"
    );
}

#[test]
fn a_first_start_takes_the_branch_as_it_finds_it() {
    let mut s = Shell::new(zero_window());
    s.remote.foreign_push("x", Some("1"));
    s.tick();
    assert!(
        s.take_events().is_empty(),
        "backflow never pushed here: nothing is foreign yet"
    );
}

fn diverged(events: &[Event]) -> Option<Divergence> {
    events.iter().find_map(|e| match e {
        Event::Diverged(d) => Some(*d),
        _ => None,
    })
}

#[test]
fn a_force_push_that_drops_backflows_commits_waits_for_the_owners_resync() {
    let mut s = Shell::new(zero_window());
    s.submit(put("a", "1"));
    s.tick();
    let ours = s.remote.tip.expect("pushed");
    let root = s
        .remote
        .write_commit(None, [("x".to_string(), "1".to_string())].into(), "foreign");
    s.remote.force_push(Some(root));
    s.submit(put("b", "1"));
    s.step(Input::RemoteMoved);
    s.tick();
    let events = s.take_events();
    assert_eq!(
        diverged(&events),
        Some(Divergence {
            tip: Some(root),
            lost: ours
        })
    );
    assert!(matches!(s.core.phase(), Phase::Recovering { .. }));
    s.tick();
    assert_eq!(
        s.remote.tip,
        Some(root),
        "nothing is pushed from the pending writes alone"
    );
    // The owner resubmits every object of every target, then says so.
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("a", "1"), put("b", "1")],
    });
    s.step(Input::Recovered);
    s.tick();
    let files = s.remote.tip_files();
    assert_eq!(
        files.get(&file("a")).map(String::as_str),
        Some("1"),
        "the lost write is back"
    );
    assert_eq!(files.get(&file("b")).map(String::as_str), Some("1"));
    assert_eq!(files.get("x").map(String::as_str), Some("1"));
    s.advance(Duration::from_secs(3600));
    s.tick();
    assert!(diverged(&s.take_events()).is_none(), "reported once");
}

#[test]
fn a_deleted_branch_is_diverged_and_recreated_from_the_resync() {
    let mut s = Shell::new(zero_window());
    s.submit(put("a", "1"));
    s.tick();
    s.remote.force_push(None);
    let mut s = s.restart(zero_window());
    s.tick();
    assert!(matches!(
        diverged(&s.take_events()),
        Some(Divergence { tip: None, .. })
    ));
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("a", "1")],
    });
    s.step(Input::Recovered);
    s.tick();
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("1")
    );
}

#[test]
fn without_the_owner_recovery_times_out_and_publication_goes_on() {
    let cfg = CoreConfig {
        recovery_timeout: Duration::from_secs(30),
        ..zero_window()
    };
    let mut s = Shell::new(cfg);
    s.submit(put("a", "1"));
    s.tick();
    s.remote.force_push(None);
    s.submit(put("b", "1"));
    s.step(Input::RemoteMoved);
    s.tick();
    assert!(s.remote.tip.is_none());
    s.advance(Duration::from_secs(29));
    s.tick();
    assert!(s.remote.tip.is_none());
    s.tick_at_wake();
    assert!(s.remote.tip.is_some());
}

#[test]
fn a_resync_that_changes_nothing_is_reported_published() {
    let mut s = Shell::new(zero_window());
    s.submit(put("a", "1"));
    s.tick();
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![],
    });
    let through = s.core.decided_through();
    s.tick();
    assert!(published(&s.take_events()).contains(&through));
}

#[test]
fn the_resyncs_of_one_target_within_a_window_are_one_commit() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    for (name, value) in [("a", "1"), ("b", "1"), ("c", "1")] {
        s.step(Input::Resync {
            target: "apps".into(),
            intents: vec![put(name, value)],
        });
        s.advance(Duration::from_millis(300));
        s.tick();
    }
    assert!(s.remote.tip.is_none(), "the window is still open");
    s.tick_at_wake();
    assert_eq!(
        s.remote.history().len(),
        1,
        "one commit for the three snapshots"
    );
    assert_eq!(s.remote.tip_files().len(), 3);
    assert!(published(&s.take_events()).contains(&IntentSeq(3)));
}

/// Two targets' resyncs gathering at once, the later one complete first: its write would be
/// published through its intents while the other's older intent is not, and a flush waiting
/// for that older intent would be answered by it. Deciding a resync window decides every window
/// opened before it first, so writes are pending, and published, in the order of their intents.
/// (Found end to end: a branch core check failed in
/// `apply::nothing_is_applied_before_the_claims_targets_have_their_snapshots`.)
#[test]
fn a_resync_complete_before_an_older_one_is_published_after_it() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    for (target, name) in [("first", "x"), ("second", "y"), ("first", "z")] {
        s.step(Input::Resync {
            target: target.into(),
            intents: vec![put(name, "1")],
        });
    }
    s.step(Input::ResyncComplete {
        target: "second".into(),
    });
    s.tick();
    let files = s.remote.tip_files();
    assert!(
        files.contains_key(&file("y")),
        "the complete resync is published"
    );
    assert!(
        files.contains_key(&file("x")),
        "with the older resync's intent before it"
    );
    let reported = published(&s.take_events());
    assert!(
        reported.iter().all(|through| *through >= IntentSeq(2)),
        "{reported:?}"
    );
    s.settle();
    assert!(s.remote.tip_files().contains_key(&file("z")));
}

#[test]
fn a_target_whose_snapshots_are_all_in_is_published_without_waiting_out_the_window() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    for name in ["a", "b"] {
        s.step(Input::Resync {
            target: "apps".into(),
            intents: vec![put(name, "1")],
        });
    }
    s.step(Input::Resync {
        target: "other".into(),
        intents: vec![put("c", "1")],
    });
    s.step(Input::ResyncComplete {
        target: "apps".into(),
    });
    s.tick();
    s.tick();
    assert_eq!(
        s.remote.history().len(),
        1,
        "apps went out at once, in one commit"
    );
    assert_eq!(
        s.remote.tip_files().len(),
        2,
        "the other target still waits"
    );
    s.tick_at_wake();
    assert_eq!(s.remote.tip_files().len(), 3);
    // A target with nothing gathered: nothing to do.
    s.step(Input::ResyncComplete {
        target: "none".into(),
    });
    s.tick();
    assert_eq!(s.remote.history().len(), 2);
}

#[test]
fn a_live_edit_after_a_resync_is_never_overwritten_by_it() {
    let mut s = Shell::new(CoreConfig::default());
    s.tick();
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("a", "snapshot")],
    });
    s.submit(put("a", "edited"));
    // Another stream's snapshot arrives while the edit waits in the window.
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("b", "snapshot")],
    });
    s.settle();
    let files = s.remote.tip_files();
    assert_eq!(files.get(&file("a")).map(String::as_str), Some("edited"));
    assert_eq!(files.get(&file("b")).map(String::as_str), Some("snapshot"));
}

#[test]
fn a_zero_window_publishes_each_resync_at_once() {
    let mut s = Shell::new(zero_window());
    s.tick();
    for name in ["a", "b"] {
        s.step(Input::Resync {
            target: "apps".into(),
            intents: vec![put(name, "1")],
        });
        s.tick();
    }
    assert_eq!(s.remote.history().len(), 2);
}

#[test]
fn a_long_commit_window_does_not_hold_back_a_resync() {
    let mut s = Shell::new(CoreConfig {
        window: Duration::from_secs(600),
        max_window_age: Duration::from_secs(3600),
        ..CoreConfig::default()
    });
    s.tick();
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("a", "1")],
    });
    s.submit(put("b", "1"));
    s.advance(Duration::from_secs(1));
    s.tick();
    assert_eq!(
        s.remote.tip_files().len(),
        1,
        "the snapshot is out after a second"
    );
    assert_eq!(s.core.window_len(), 1, "the live edit waits for its window");
}

#[test]
fn a_window_of_several_users_becomes_one_commit_per_user_in_one_push() {
    use backflow_api::CommitAuthors;
    use backflow_branch::{Attribution, ChangedBy};
    let by = |user: &str, commits| {
        Some(Attribution {
            by: ChangedBy::User(user.into()),
            commits,
        })
    };
    let mut s = Shell::new(CoreConfig {
        window: Duration::from_secs(1),
        ..CoreConfig::default()
    });
    s.submit(put("a", "1").attributed(by("alice", CommitAuthors::PerAuthor)));
    s.submit(put("b", "1").attributed(by("bob", CommitAuthors::PerAuthor)));
    s.submit(put("c", "1"));
    s.submit(put("d", "1").attributed(by("alice", CommitAuthors::PerAuthor)));
    // A target that groups authors keeps its users' changes with the unattributed ones.
    s.submit(put("e", "1").attributed(by("carol", CommitAuthors::CoAuthored)));
    s.settle();
    let pushes = s.effects.iter().filter(|e| e.starts_with("Push")).count();
    assert_eq!(pushes, 1, "one compare-and-swap push: {:#?}", s.effects);
    let mut history = s.remote.history();
    history.reverse();
    assert_eq!(history.len(), 3, "alice, bob, everyone else");
    let files_of = |i: usize| {
        let commit = history[i];
        let parent = s.remote.commits[&commit].parent;
        let before = s.remote.files(parent);
        let mut changed: Vec<String> = s
            .remote
            .files(Some(commit))
            .into_keys()
            .filter(|f| !before.contains_key(f))
            .collect();
        changed.sort();
        changed
    };
    // In the order of each group's first change: alice (a), bob (b), the rest (c).
    assert_eq!(files_of(0), [file("a"), file("d")]);
    assert_eq!(files_of(1), [file("b")]);
    assert_eq!(files_of(2), [file("c"), file("e")]);
    assert_eq!(
        published(&s.events).last(),
        Some(&IntentSeq(5)),
        "every intent is published by that push"
    );
}

#[test]
fn a_waited_write_does_not_sit_out_the_window_and_waiting_writes_share_a_commit() {
    let window = CoreConfig {
        window: Duration::from_secs(10),
        ..CoreConfig::default()
    };
    // Without anyone waiting, a write sits in the window: no time passes, nothing is pushed.
    let mut s = Shell::new(window.clone());
    s.submit(put("a", "1"));
    s.tick();
    assert!(published(&s.events).is_empty(), "the window holds it");
    // Someone waits: published at once, in the same instant.
    s.step(Input::Hurry);
    s.tick();
    assert_eq!(published(&s.events), [IntentSeq(1)]);
    assert_eq!(s.core.stats().commits, 1);

    // Sixteen writers' writes that arrive while the worker is busy go out as one commit.
    let mut s = Shell::new(window);
    for i in 0..16 {
        s.submit(put(&format!("w{i}"), "1"));
        s.step(Input::Hurry);
    }
    s.tick();
    assert_eq!(published(&s.events).last(), Some(&IntentSeq(16)));
    assert_eq!(
        s.core.stats().commits,
        1,
        "one commit for all the waiting writes"
    );
    let pushes = s.effects.iter().filter(|e| e.starts_with("Push")).count();
    assert_eq!(pushes, 1);
}

/// A push of two commits (a resync writing `a`, an edit of `b`) lands with its answer lost;
/// before the worker looks, somebody force-pushes the branch back to the first commit and
/// pushes `a` = "edited by a person" on top, and the worker reads the remote. Returns the shell
/// and the head that was dropped.
fn forced_back_into_a_chain() -> (Shell, backflow_branch::CommitId) {
    let mut s = Shell::new(zero_window());
    s.deferred_io = true;
    s.step(Input::Resync {
        target: "apps".into(),
        intents: vec![put("a", "1")],
    });
    s.submit(put("b", "1"));
    for _ in 0..20 {
        if matches!(s.in_flight, Some(Effect::Push { .. })) {
            break;
        }
        if !s.answer() {
            s.tick_at_wake();
        }
    }
    assert!(
        matches!(s.in_flight, Some(Effect::Push { .. })),
        "the cycle reaches its push"
    );
    s.faults.lose_answer = 1;
    assert!(s.answer());
    let history = s.remote.history();
    let (head, first) = (history[0], history[1]);
    assert_eq!(
        s.remote.commits[&first].by, "backflow",
        "two commits of backflow's were pushed"
    );
    s.remote.force_push(Some(first));
    s.remote
        .foreign_push(&file("a"), Some("edited by a person"));
    while s.answer() {}
    (s, head)
}

/// A push of two commits lands with its answer lost, and before the worker looks somebody
/// force-pushes the branch back to the first and pushes on top. The head is gone, so the push
/// looks as if it never landed; replayed, the first commit's write went over the later push.
/// The first commit on the branch shows the push landed: backflow's head was dropped, a
/// divergence, and nothing is published until the owner's resync.
#[test]
fn a_force_push_into_a_chain_whose_answer_was_lost_is_a_divergence() {
    let (mut s, head) = forced_back_into_a_chain();
    let events = s.take_events();
    assert_eq!(diverged(&events).map(|d| d.lost), Some(head), "{events:?}");
    assert_eq!(
        s.remote.tip_files().get(&file("a")).map(String::as_str),
        Some("edited by a person"),
        "the first commit's write is not replayed over the later push"
    );
}

/// As above, and the owner resyncs: the write the first commit carried is on the branch, so it
/// is published, not built again over the push made on top of it since; only the lost head's
/// write is (before, the whole chain was built again after the resync and the first commit's
/// write went over the push — a person's later edit in Git lost; found by the simulator).
#[test]
fn after_a_force_push_into_a_chain_only_the_lost_commits_are_built_again() {
    let (mut s, _) = forced_back_into_a_chain();
    assert!(diverged(&s.take_events()).is_some(), "a divergence");
    s.step(Input::Recovered);
    for _ in 0..40 {
        if !s.answer() {
            s.tick_at_wake();
        }
    }
    let files = s.remote.tip_files();
    assert_eq!(
        files.get(&file("a")).map(String::as_str),
        Some("edited by a person"),
        "the published write is not built again over the later push"
    );
    assert_eq!(
        files.get(&file("b")).map(String::as_str),
        Some("1"),
        "the lost head's write is built again"
    );
}
