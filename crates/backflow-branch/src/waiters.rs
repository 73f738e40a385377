//! Who waits for what the worker publishes: the writer of an intent, of a resync, and a flush.
//! Which of them a [`crate::Event::Published`] or [`crate::Event::Refused`] answers is decided
//! here, in one place the worker's driver and the simulator share.

use std::collections::BTreeMap;

use crate::IntentSeq;

/// Replies `R` waiting for intents, resyncs and flushes of one branch worker.
#[derive(Debug)]
pub struct Waiters<R> {
    /// Per intent number, the replies waiting for it (a resync's wait at its last intent).
    intents: BTreeMap<IntentSeq, Vec<R>>,
    /// Per resync still waiting, its last intent's number and its first's: a refusal of any of
    /// its intents is the resync's.
    resyncs: BTreeMap<IntentSeq, IntentSeq>,
    /// Flushes, each with the mark it waits for.
    flushes: Vec<(IntentSeq, R)>,
}

impl<R> Default for Waiters<R> {
    fn default() -> Self {
        Self {
            intents: BTreeMap::new(),
            resyncs: BTreeMap::new(),
            flushes: Vec::new(),
        }
    }
}

/// The replies one event answers.
#[derive(Debug)]
pub struct Answered<R> {
    /// Writers of intents (and resyncs) published, or refused.
    pub writes: Vec<R>,
    /// Flushes whose mark was reached.
    pub flushes: Vec<R>,
}

impl<R> Waiters<R> {
    /// `reply` waits for intent `seq`.
    pub fn intent(&mut self, seq: IntentSeq, reply: R) {
        self.intents.entry(seq).or_default().push(reply);
    }

    /// `reply` waits for a resync of `count` intents, the last numbered `last`.
    pub fn resync(&mut self, last: IntentSeq, count: u64, reply: R) {
        if count > 1 {
            self.resyncs.insert(
                last,
                IntentSeq(last.0.saturating_add(1).saturating_sub(count)),
            );
        }
        self.intent(last, reply);
    }

    /// `reply` waits for every intent up to `mark` to be published.
    pub fn flush(&mut self, mark: IntentSeq, reply: R) {
        self.flushes.push((mark, reply));
    }

    /// Everything up to `through` is published: the writers and flushes that waited for it.
    pub fn published(&mut self, through: IntentSeq) -> Answered<R> {
        let next = IntentSeq(through.0.saturating_add(1));
        self.resyncs = self.resyncs.split_off(&next);
        let later = self.intents.split_off(&next);
        let writes = std::mem::replace(&mut self.intents, later)
            .into_values()
            .flatten()
            .collect();
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(mark, _)| *mark <= through);
        self.flushes = waiting;
        Answered {
            writes,
            flushes: done.into_iter().map(|(_, reply)| reply).collect(),
        }
    }

    /// Intent `seq` was refused: the writers waiting for it, or for the resync it is part of.
    pub fn refused(&mut self, seq: IntentSeq) -> Vec<R> {
        let answered = match self.resyncs.range(seq..).next() {
            Some((last, first)) if *first <= seq => *last,
            _ => seq,
        };
        self.resyncs.remove(&answered);
        self.intents.remove(&answered).unwrap_or_default()
    }

    /// Whether a flush still waits.
    #[must_use]
    pub fn flush_waiting(&self) -> bool {
        !self.flushes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publication_answers_what_it_covers_and_nothing_later() {
        let mut w = Waiters::default();
        w.intent(IntentSeq(1), "a");
        w.intent(IntentSeq(3), "c");
        w.flush(IntentSeq(2), "flush 2");
        w.flush(IntentSeq(3), "flush 3");
        let answered = w.published(IntentSeq(2));
        assert_eq!(answered.writes, ["a"]);
        assert_eq!(answered.flushes, ["flush 2"]);
        assert!(w.flush_waiting());
        let answered = w.published(IntentSeq(3));
        assert_eq!(answered.writes, ["c"]);
        assert_eq!(answered.flushes, ["flush 3"]);
        assert!(!w.flush_waiting());
    }

    #[test]
    fn a_refused_intent_of_a_resync_answers_the_resync() {
        let mut w = Waiters::default();
        w.resync(IntentSeq(5), 3, "resync 3..5");
        w.intent(IntentSeq(6), "f");
        assert_eq!(w.refused(IntentSeq(4)), ["resync 3..5"]);
        assert!(w.refused(IntentSeq(5)).is_empty(), "answered once");
        assert_eq!(w.refused(IntentSeq(6)), ["f"]);
        w.resync(IntentSeq(9), 2, "resync 8..9");
        assert!(w.refused(IntentSeq(7)).is_empty(), "not the resync's");
        assert_eq!(w.published(IntentSeq(9)).writes, ["resync 8..9"]);
    }
}
