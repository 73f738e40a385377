//! Random interleavings of writes, foreign pushes, lost answers and outages: nothing published
//! is ever lost, nothing is forced, and at quiescence Git holds the last value of every object.

use std::collections::BTreeMap;
use std::time::Duration;

use backflow_branch::{CoreConfig, Event, Input};
use proptest::prelude::*;

use crate::model::*;

#[derive(Debug, Clone)]
enum Op {
    Submit(u8, u8),
    Resync(u8, u8),
    Tick,
    Wait(u16),
    Flush,
    Foreign(u8),
    LoseAnswer,
    FailPush,
    FailFetch,
    Race,
    Hint,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 0u8..50).prop_map(|(n, v)| Op::Submit(n, v)),
        1 => (0u8..6, 0u8..50).prop_map(|(n, v)| Op::Resync(n, v)),
        3 => Just(Op::Tick),
        2 => (1u16..3000).prop_map(Op::Wait),
        1 => Just(Op::Flush),
        1 => (0u8..3).prop_map(Op::Foreign),
        1 => Just(Op::LoseAnswer),
        1 => Just(Op::FailPush),
        1 => Just(Op::FailFetch),
        1 => Just(Op::Race),
        1 => Just(Op::Hint),
    ]
}

fn config() -> impl Strategy<Value = CoreConfig> {
    (0u64..3, 0u64..2).prop_map(|(window, cooldown)| CoreConfig {
        window: Duration::from_millis(500 * window),
        push_cooldown: Duration::from_millis(700 * cooldown),
        ..CoreConfig::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn interleavings_lose_nothing_and_force_nothing(cfg in config(), ops in prop::collection::vec(op(), 1..60)) {
        let mut s = Shell::new(cfg);
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Submit(n, v) => {
                    let name = format!("o{n}");
                    last.insert(name.clone(), v.to_string());
                    s.submit(put(&name, &v.to_string()));
                }
                Op::Resync(n, v) => {
                    // A fresh snapshot of the object: newer than anything submitted before.
                    let name = format!("o{n}");
                    last.insert(name.clone(), v.to_string());
                    s.step(Input::Resync {
                        target: "apps".into(),
                        intents: vec![put(&name, &v.to_string())],
                    });
                }
                Op::Tick => s.tick(),
                Op::Wait(ms) => {
                    s.advance(Duration::from_millis(u64::from(ms)));
                    s.tick();
                }
                Op::Flush => s.step(Input::Flush),
                Op::Foreign(n) => {
                    s.remote.foreign_push(&format!("foreign/{n}"), Some("f"));
                }
                Op::LoseAnswer => s.faults.lose_answer += 1,
                Op::FailPush => s.faults.fail_push += 1,
                Op::FailFetch => s.faults.fail_fetch += 1,
                Op::Race => s.faults.race = Some(("foreign/race".into(), "r".into())),
                Op::Hint => s.step(Input::RemoteMoved),
            }
            // Whatever was reported published is on the remote now.
            for event in s.take_events() {
                if let Event::Published { tip, .. } = event {
                    prop_assert!(tip.is_none() || s.remote.contains(s.remote.tip, tip.expect("some")));
                }
            }
        }
        s.faults = Faults::default();
        s.step(Input::Flush);
        s.settle();
        let files = s.remote.tip_files();
        for (name, value) in &last {
            prop_assert_eq!(files.get(&file(name)), Some(value), "{}", s.effects.join("\n"));
        }
        for (path, _) in s.remote.commits.values().flat_map(|c| c.files.iter()) {
            if path.starts_with("foreign/") {
                prop_assert!(files.contains_key(path), "foreign file {} dropped", path);
            }
        }
        s.remote.assert_never_forced_by_backflow();
        // Quiescence: nothing more to do, no commit and no push on later ticks.
        let before = s.remote.tips.len();
        s.advance(Duration::from_secs(3600));
        s.tick();
        prop_assert_eq!(s.remote.tips.len(), before);
    }
}
