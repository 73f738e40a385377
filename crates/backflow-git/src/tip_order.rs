//! The order in which a branch worker learned its remote's tips (its own pushes and others'),
//! for reports that arrive in any order: the tasks that follow single writes settle in whatever
//! order the runtime wakes them, and a status must not go back to an older commit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use backflow_branch::CommitId;

/// The last number given, by any worker of the process: a worker started again for the same
/// branch (reconfigured) numbers on from where the one before it stopped.
static LAST: AtomicU64 = AtomicU64::new(0);

/// How many recent tips keep their number; a report naming an older one is older than all of
/// them.
const REMEMBERED: usize = 256;

/// The numbers a worker gave the tips it learned, newest last: shared between the worker's
/// thread, which numbers them as it publishes or finds them, and its handles, which look them
/// up.
#[derive(Debug, Clone, Default)]
pub(crate) struct TipOrder(Arc<Mutex<Learned>>);

#[derive(Debug, Default)]
struct Learned {
    recent: VecDeque<Numbered>,
}

#[derive(Debug, Clone, Copy)]
struct Numbered {
    tip: CommitId,
    number: u64,
}

impl TipOrder {
    /// Records `tip` as the remote's newest: it gets the next number, unless it is the newest
    /// already.
    pub(crate) fn learn(&self, tip: CommitId) {
        let mut learned = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if learned.recent.back().is_some_and(|n| n.tip == tip) {
            return;
        }
        let number = LAST.fetch_add(1, Ordering::Relaxed) + 1;
        if learned.recent.len() == REMEMBERED {
            learned.recent.pop_front();
        }
        learned.recent.push_back(Numbered { tip, number });
    }

    /// The number `tip` got when the worker last learned it (larger is newer), or `None` when
    /// it is not among the recent ones.
    #[must_use]
    pub(crate) fn of(&self, tip: CommitId) -> Option<u64> {
        let learned = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        learned
            .recent
            .iter()
            .rev()
            .find(|n| n.tip == tip)
            .map(|n| n.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(n: usize) -> CommitId {
        let mut bytes = [0; 20];
        bytes[..8].copy_from_slice(&(n as u64).to_be_bytes());
        CommitId::from_bytes(bytes)
    }

    #[test]
    fn later_tips_get_larger_numbers_and_a_tip_learned_again_keeps_its_place() {
        let order = TipOrder::default();
        order.learn(commit(1));
        order.learn(commit(2));
        order.learn(commit(2));
        let (one, two) = (order.of(commit(1)), order.of(commit(2)));
        assert!(one.is_some() && two.is_some());
        assert!(two > one, "{one:?} {two:?}");
        // The branch went back to an older commit (a force-push): that is the newest now.
        order.learn(commit(1));
        assert!(order.of(commit(1)) > two);
        assert_eq!(order.of(commit(3)), None);
        // Another worker (the branch's, started again) numbers on.
        let next = TipOrder::default();
        next.learn(commit(3));
        assert!(next.of(commit(3)) > order.of(commit(1)));
    }

    #[test]
    fn only_the_recent_tips_are_remembered() {
        let order = TipOrder::default();
        for n in 0..=REMEMBERED {
            order.learn(commit(n));
        }
        assert_eq!(order.of(commit(0)), None, "the oldest is forgotten");
        assert!(order.of(commit(1)).is_some());
    }
}
