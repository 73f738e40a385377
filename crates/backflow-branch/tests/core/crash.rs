//! A crash between any two effects: the core's memory is lost, the remote and the durable tips
//! are kept, and the owner resubmits what its store holds (as the mirror's start-up resync
//! does). Git must converge to the store, with nothing forced and foreign work kept.

use std::collections::BTreeMap;
use std::time::Duration;

use backflow_branch::{CoreConfig, Input, Intent};

use crate::model::*;

#[derive(Debug, Clone)]
enum Op {
    Submit(&'static str, &'static str),
    Tick,
    Later,
    Race,
    LoseAnswer,
    FailPush,
    Foreign,
}

const SCRIPT: &[Op] = &[
    Op::Submit("a", "1"),
    Op::Submit("b", "1"),
    Op::Tick,
    Op::Race,
    Op::Submit("a", "2"),
    Op::Tick,
    Op::LoseAnswer,
    Op::Submit("c", "1"),
    Op::Tick,
    Op::Later,
    Op::Foreign,
    Op::FailPush,
    Op::Submit("b", "2"),
    Op::Tick,
    Op::Later,
    Op::Tick,
    Op::Later,
    Op::Tick,
];

fn cfg() -> CoreConfig {
    CoreConfig {
        window: Duration::ZERO,
        ..CoreConfig::default()
    }
}

/// Runs the script with at most `budget` effects; returns the store's final values and whether
/// the script ran out of budget (crashed).
fn run(s: &mut Shell, budget: Option<usize>) -> (BTreeMap<String, String>, bool) {
    let mut store = BTreeMap::new();
    let mut budget = budget;
    for op in SCRIPT {
        let alive = match op {
            Op::Submit(name, value) => {
                // The store commits before the mirror submits: acknowledged from here on.
                store.insert((*name).to_string(), (*value).to_string());
                s.step_budget(Input::Submit(put(name, value)), &mut budget)
            }
            Op::Tick => s.step_budget(Input::Tick, &mut budget),
            Op::Later => {
                s.now = s.now.max(s.wake) + Duration::from_secs(1);
                s.step_budget(Input::Tick, &mut budget)
            }
            Op::Race => {
                s.faults.race = Some(("foreign/race".into(), "x".into()));
                true
            }
            Op::LoseAnswer => {
                s.faults.lose_answer = 1;
                true
            }
            Op::FailPush => {
                s.faults.fail_push = 1;
                true
            }
            Op::Foreign => {
                s.remote.foreign_push("foreign/direct", Some("y"));
                true
            }
        };
        if !alive {
            return (store, true);
        }
    }
    (store, false)
}

fn resync_of(store: &BTreeMap<String, String>) -> Vec<Intent> {
    store.iter().map(|(name, value)| put(name, value)).collect()
}

#[test]
fn git_converges_to_the_store_after_a_crash_between_any_two_effects() {
    let mut whole = Shell::new(cfg());
    let (store, crashed) = run(&mut whole, None);
    assert!(!crashed);
    let total = whole.effects.len();
    assert!(total > 30, "the script exercises many effects: {total}");
    for crash_at in 0..=total {
        let mut s = Shell::new(cfg());
        let (acknowledged, crashed) = run(&mut s, Some(crash_at));
        let mut s = s.restart(cfg());
        s.faults = Faults::default();
        s.step(Input::Resync {
            target: "apps".into(),
            intents: resync_of(&acknowledged),
        });
        s.step(Input::Recovered);
        s.settle();
        let files = s.remote.tip_files();
        for (name, value) in &acknowledged {
            assert_eq!(
                files.get(&file(name)),
                Some(value),
                "crash after {crash_at} effects (crashed: {crashed}): {name} lost\n{}",
                s.effects.join("\n")
            );
        }
        s.remote.assert_never_forced_by_backflow();
        for foreign in ["foreign/race", "foreign/direct"] {
            let pushed = s
                .remote
                .commits
                .values()
                .any(|c| c.files.contains_key(foreign));
            if pushed {
                assert!(
                    files.contains_key(foreign),
                    "crash after {crash_at}: {foreign} dropped"
                );
            }
        }
    }
    assert_eq!(store.len(), 3);
}
