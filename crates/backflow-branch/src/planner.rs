//! Planners turn intents into path updates against a tree.
//!
//! The YAML planner (in-place edits, placement by identity) lives with the manifest code; this
//! crate defines the seam (and, with the `testing` feature, a simple planner for tests and
//! benchmarks: `file_planner.rs`).

use std::collections::BTreeSet;

use crate::error::TreeError;
use crate::intent::Intent;
use crate::tree::{LayeredView, PathUpdate, TreeView};

/// Turns one intent into path updates against `tree`.
///
/// Called with the tree the write is being built on, including the updates of the intents of
/// the same write planned before this one. It must be a pure function of `tree` and `intent`: on
/// a refused push the worker plans every pending intent again onto the new tip.
pub trait Planner: Send {
    /// The updates that make `tree` hold `intent`. An empty list, or updates equal to what the
    /// tree already holds, means the intent changes nothing and it is dropped.
    fn plan(&self, tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError>;

    /// What `tree` holds of each intent's object (or of a sweep's scope), read for the
    /// intents whose baseline is a commit ([`crate::Baseline::Commit`]), one answer per intent.
    /// The default knows nothing: such intents are then written whole, as before, and a
    /// sweep removes everything it does not keep.
    fn held(&self, tree: &dyn TreeView, intents: &[&Intent]) -> Result<Vec<Held>, TreeError> {
        let _ = tree;
        Ok(intents.iter().map(|_| Held::Nothing).collect())
    }

    /// Plans a whole write: each intent against `tree` plus the updates of the intents before it
    /// (a refused intent contributes none). The default plans them one by one; a planner with
    /// per-tree work to share (an index of the folder) overrides it, so a write of N objects
    /// does that work once.
    fn plan_all(
        &self,
        tree: &dyn TreeView,
        intents: &[&Intent],
    ) -> Vec<Result<Vec<PathUpdate>, TreeError>> {
        let mut view = LayeredView::new(tree);
        for intent in intents {
            let planned = self.plan(&view, intent);
            view.record(planned);
        }
        view.into_planned()
    }
}

/// What a tree holds of one intent's object, as [`Planner::held`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// The object's document as a value; `None` when the tree holds none (or none it can read
    /// in plaintext).
    Object(Option<serde_json::Value>),
    /// The objects of a sweep's scope the tree holds, as `(namespace, name)`.
    Objects(BTreeSet<(String, String)>),
    /// Nothing was read.
    Nothing,
}
