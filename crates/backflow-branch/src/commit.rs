//! Commit identities as the worker sees them: a SHA, and what the remote branch points at.

use std::fmt;
use std::str::FromStr;

/// A commit's SHA-1 object id. The Git engine converts its own ids to and from this type at its
/// edge, so nothing that decides has to link a Git library.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitId([u8; 20]);

impl CommitId {
    /// The id with these bytes.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }

    /// The raw bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommitId({self})")
    }
}

/// Text that is not a 40-digit hexadecimal SHA-1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a commit id (40 hexadecimal digits)")]
pub struct ParseCommitIdError {
    /// The text given.
    pub text: String,
}

impl FromStr for CommitId {
    type Err = ParseCommitIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseCommitIdError {
            text: s.to_string(),
        };
        if s.len() != 40 || !s.is_ascii() {
            return Err(err());
        }
        let mut bytes = [0u8; 20];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| err())?;
        }
        Ok(Self(bytes))
    }
}

/// What the worker believes the remote branch points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tip {
    /// Not looked at since the worker started.
    Unknown,
    /// The branch does not exist.
    Absent,
    /// The branch points at this commit.
    At(CommitId),
}

impl Tip {
    /// The commit, if the branch is known to exist.
    #[must_use]
    pub fn commit(self) -> Option<CommitId> {
        match self {
            Self::At(id) => Some(id),
            _ => None,
        }
    }

    /// The tip read from a remote: a commit, or no branch.
    pub fn from_remote(tip: Option<CommitId>) -> Self {
        tip.map_or(Self::Absent, Self::At)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_what_is_not_a_sha() {
        let text = "0123456789abcdef0123456789abcdef01234567";
        let id: CommitId = text.parse().expect("a sha");
        assert_eq!(id.to_string(), text);
        for bad in ["", "0123", &"g".repeat(40), &"é".repeat(20)] {
            assert!(bad.parse::<CommitId>().is_err(), "{bad:?}");
        }
    }
}
