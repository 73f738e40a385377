//! Why an applier is asked to apply (seed 000, "When `GitOps` Reverser asks for an apply").

use std::collections::BTreeSet;
use std::fmt;

/// One reason to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The branch gained a commit backflow did not push.
    ForeignCommit,
    /// An API create in the folder (or a resync that added an object) is stamped by applying;
    /// never skipped as already applied.
    CatchUpAdopt,
    /// Once at start and once when a target first names the claim; skipped when the last
    /// successful operation already applied the tip.
    CatchUpConverge,
    /// A refused edit, under `onRefusal: Reapply`.
    Refusal,
    /// An apply reverted an edit made after the flush; Git kept the edit.
    Repair,
}

impl Reason {
    /// The name in status and metrics.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ForeignCommit => "ForeignCommit",
            Self::CatchUpAdopt | Self::CatchUpConverge => "CatchUp",
            Self::Refusal => "Refusal",
            Self::Repair => "Repair",
        }
    }
}

impl Reason {
    /// The reason a status names (`CatchUp` reads as an adopt, which is never skipped).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "ForeignCommit" => Self::ForeignCommit,
            "CatchUp" => Self::CatchUpAdopt,
            "Refusal" => Self::Refusal,
            "Repair" => Self::Repair,
            _ => return None,
        })
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of pending reasons: a burst of the same reason is one flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reasons(BTreeSet<Reason>);

impl Reasons {
    /// Adds a reason.
    pub fn insert(&mut self, reason: Reason) {
        self.0.insert(reason);
    }

    /// Adds every reason of `other`.
    pub fn extend(&mut self, other: &Self) {
        self.0.extend(other.0.iter().copied());
    }

    /// Takes every reason, leaving none.
    #[must_use]
    pub fn take(&mut self) -> Self {
        std::mem::take(self)
    }

    /// Whether none is pending.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `reason` is pending.
    #[must_use]
    pub fn contains(&self, reason: Reason) -> bool {
        self.0.contains(&reason)
    }

    /// Whether the only reason is a converge, which an apply of the same commit satisfies.
    #[must_use]
    pub fn only_converge(&self) -> bool {
        self.0.len() == 1 && self.contains(Reason::CatchUpConverge)
    }

    /// Whether every reason is a catch-up (adopt, converge): an apply for them only stamps what
    /// is live, and does not bring Git's changes to the live side.
    #[must_use]
    pub fn catch_up_only(&self) -> bool {
        self.iter()
            .all(|r| matches!(r, Reason::CatchUpAdopt | Reason::CatchUpConverge))
    }

    /// The reasons, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = Reason> + '_ {
        self.0.iter().copied()
    }

    /// The distinct names (`CatchUp` once for both kinds), in a stable order.
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.iter().map(Reason::as_str).collect();
        names.dedup();
        names
    }
}

impl FromIterator<Reason> for Reasons {
    fn from_iter<I: IntoIterator<Item = Reason>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    /// A status written by one process reads back in the next one; `CatchUp` reads as an
    /// adopt, which is never skipped as already applied.
    #[test]
    fn every_reason_reads_back_from_its_name() {
        let all = [
            Reason::ForeignCommit,
            Reason::CatchUpAdopt,
            Reason::CatchUpConverge,
            Reason::Refusal,
            Reason::Repair,
        ];
        for reason in all {
            let read = Reason::parse(&reason.to_string()).expect("a name it wrote");
            assert_eq!(read.as_str(), reason.as_str());
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(Reason::parse("CatchUp"), Some(Reason::CatchUpAdopt));
        assert_eq!(Reason::parse("Converge"), None);
    }
}
