//! Planners turn intents into path updates against a tree.
//!
//! The YAML planner (in-place edits, placement by identity) lives with the manifest code; this
//! crate only defines the seam and a simple planner for tests and benchmarks.

use crate::error::TreeError;
use crate::intent::{Intent, ObjectState};
use crate::tree::{PathUpdate, TreeView};

/// Turns one intent into path updates against `tree`.
///
/// Called with the tree the write is being built on, including the updates of the intents of
/// the same write planned before this one. It must be a pure function of `tree` and `intent`: on
/// a refused push the worker plans every pending intent again onto the new tip.
pub trait Planner: Send {
    /// The updates that make `tree` hold `intent`. An empty list, or updates equal to what the
    /// tree already holds, means the intent changes nothing and it is dropped.
    fn plan(&self, tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError>;
}

/// One file per object at `{target}/{namespace or _cluster}/{group/}{resource}/{name}.json`,
/// holding the value as pretty JSON. For tests and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct FilePerObjectPlanner;

impl FilePerObjectPlanner {
    /// Where this planner puts an intent's object.
    pub fn path_of(intent: &Intent) -> String {
        let key = &intent.key;
        let ns = if key.namespace.is_empty() {
            "_cluster"
        } else {
            key.namespace.as_str()
        };
        let group = if key.resource.group.is_empty() {
            String::new()
        } else {
            format!("{}/", key.resource.group)
        };
        let target = intent.target.trim_matches('/');
        let prefix = if target.is_empty() {
            String::new()
        } else {
            format!("{target}/")
        };
        format!(
            "{prefix}{ns}/{group}{}/{}.json",
            key.resource.resource, key.name
        )
    }

    /// The bytes this planner writes for a value.
    pub fn render(value: &serde_json::Value) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

impl Planner for FilePerObjectPlanner {
    fn plan(&self, _tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError> {
        let path = Self::path_of(intent);
        if intent.key.name.contains('/')
            || intent.key.name.starts_with('.')
            || intent.key.name.is_empty()
        {
            return Err(crate::error::PlanError::new(format!(
                "object name {:?} cannot be a file name",
                intent.key.name
            ))
            .into());
        }
        Ok(vec![match &intent.state {
            ObjectState::Present(value) => PathUpdate::write(path, Self::render(value)),
            ObjectState::Absent => PathUpdate::remove(path),
        }])
    }
}
