//! Injected identifiers: the UIDs and generated names a server hands out come from an
//! [`IdSource`], so a simulator or a test can make them deterministic.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where new object UIDs and `generateName` suffixes come from.
pub trait IdSource: Send + Sync + std::fmt::Debug {
    /// A fresh UID in the textual UUID form.
    fn uid(&self) -> String;
    /// A fresh suffix for `metadata.generateName`: five characters from `bcdfghjklmnpqrstvwxz2456789`,
    /// as kube-apiserver uses.
    fn name_suffix(&self) -> String;
}

/// The alphabet of generated name suffixes (no vowels, no look-alikes).
pub const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Identifiers counted up from one: the same sequence on every run.
#[derive(Debug, Default)]
pub struct SequentialIds {
    next: AtomicU64,
}

impl SequentialIds {
    fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }
}

impl IdSource for SequentialIds {
    fn uid(&self) -> String {
        let n = self.take();
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    fn name_suffix(&self) -> String {
        let mut n = self.take();
        let base = NAME_ALPHABET.len() as u64;
        (0..5)
            .map(|_| {
                let c = NAME_ALPHABET[(n % base) as usize] as char;
                n /= base;
                c
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_repeat_across_runs_and_never_within_one() {
        let (a, b) = (SequentialIds::default(), SequentialIds::default());
        let first: Vec<String> = (0..3).map(|_| a.uid()).collect();
        let again: Vec<String> = (0..3).map(|_| b.uid()).collect();
        assert_eq!(first, again);
        assert_eq!(first[0], "00000000-0000-4000-8000-000000000001");
        let suffixes: std::collections::BTreeSet<String> =
            (0..100).map(|_| a.name_suffix()).collect();
        assert_eq!(suffixes.len(), 100);
        assert!(
            suffixes
                .iter()
                .all(|s| s.len() == 5 && s.bytes().all(|c| NAME_ALPHABET.contains(&c)))
        );
    }
}
