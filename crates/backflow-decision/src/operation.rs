//! One apply, as recorded in the claim's `status.operation` before the applier is asked.

use backflow_branch::{CommitId, Moment};

use crate::reason::Reasons;

/// Numbers operations of one applier, increasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationId(pub u64);

/// Where an operation stands (`status.operation.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationPhase {
    /// Recorded; the applier is being asked.
    Requested,
    /// The applier is seen working on it.
    Running,
    /// The applier applied it.
    Succeeded,
    /// The applier failed; decided again after the backoff.
    Failed,
    /// Still in flight after the unresolved timeout; still followed, nothing more asked.
    Unresolved,
}

impl OperationPhase {
    /// The name in status.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "Requested",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unresolved => "Unresolved",
        }
    }

    /// The phase a status names; `None` for an unknown name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "Requested" => Self::Requested,
            "Running" => Self::Running,
            "Succeeded" => Self::Succeeded,
            "Failed" => Self::Failed,
            "Unresolved" => Self::Unresolved,
            _ => return None,
        })
    }

    /// Whether the operation has not ended.
    #[must_use]
    pub fn in_flight(self) -> bool {
        matches!(self, Self::Requested | Self::Running | Self::Unresolved)
    }
}

/// One apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Its number.
    pub id: OperationId,
    /// The commit applied: the tip the flush produced.
    pub commit: CommitId,
    /// Why.
    pub reasons: Reasons,
    /// Where it stands.
    pub phase: OperationPhase,
    /// When it was requested (monotonic; a restored operation counts from its restore).
    pub requested_at: Moment,
}

#[cfg(test)]
mod tests {
    use super::OperationPhase;

    const ALL: [OperationPhase; 5] = [
        OperationPhase::Requested,
        OperationPhase::Running,
        OperationPhase::Succeeded,
        OperationPhase::Failed,
        OperationPhase::Unresolved,
    ];

    /// A status written by one process reads back as the same phase in the next one.
    #[test]
    fn every_phase_reads_back_as_written_and_nothing_else_reads() {
        for phase in ALL {
            assert_eq!(OperationPhase::parse(phase.as_str()), Some(phase));
        }
        let names: std::collections::BTreeSet<&str> = ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names.len(), ALL.len(), "every phase has a name of its own");
        assert_eq!(OperationPhase::parse("Pending"), None);
        assert_eq!(OperationPhase::parse(""), None);
    }

    /// What a restart finds in flight is followed; what ended is not.
    #[test]
    fn requested_running_and_unresolved_are_in_flight() {
        let in_flight: Vec<OperationPhase> = ALL.into_iter().filter(|p| p.in_flight()).collect();
        assert_eq!(
            in_flight,
            [
                OperationPhase::Requested,
                OperationPhase::Running,
                OperationPhase::Unresolved
            ]
        );
    }
}
