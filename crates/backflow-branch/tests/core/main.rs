//! The branch worker core driven alone, against a model remote (trees in maps): every phase
//! transition, lost answers, divergence, restarts and crashes between any two effects.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use backflow_branch::model;

mod crash;
mod layering;
mod pacing;
mod property;
mod transitions;
