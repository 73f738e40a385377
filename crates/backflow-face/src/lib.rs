//! What people see of backflow: the story of every object both ways, why it looks as it does,
//! and what differs between the live side and Git — read from what backflow already records
//! (the embedded server's record of writes, each folder's history through its branch worker,
//! the claims' status and backflow's Events) and served, behind the API's authentication, to
//! the CLI (`backflow history`, `why`, `diff`).
//!
//! - `object.rs`: [`ObjectRef`], the object a person asks about.
//! - `fields.rs`: the fields people read an object by, and which a change touched.
//! - `story.rs`: [`Story`], an object's timeline (pure).
//! - `why.rs`: [`Why`], each field's last writer and how the value got there (pure).
//! - `folder_diff.rs`: [`FolderDiff`], a folder against the live side (pure).
//! - `text_diff.rs`: unified diffs of two texts.
//! - `sources.rs`: [`Face`], what the face reads in the running backflow.
//! - `status.rs`: [`StatusReport`], every target, branch and claim and what needs a person
//!   (`backflow status`, the web view's overview).
//! - `routes.rs`: the `/backflow/v1/` endpoints; `render.rs`: the answers as terminal text.
//! - `web/`: the web view under `/ui/` (the overview with its live feed, each object's page),
//!   server-rendered HTML.
//! - `error.rs`: [`FaceError`], answered as a Kubernetes `Status`.

mod error;
mod fields;
mod folder_diff;
mod object;
pub mod render;
mod routes;
mod sources;
mod status;
mod story;
mod text_diff;
mod web;
mod why;

pub use error::FaceError;
pub use folder_diff::{DiffState, FolderDiff, ObjectDiff};
pub use object::ObjectRef;
pub use routes::router;
pub use sources::{Face, STORY_CHANGES};
pub use status::{BranchLine, ClaimLine, OperationLine, StatusReport, TargetLine};
pub use story::{Entry, EntryKind, EventNote, Story, StoryInputs, TargetHistory};
pub use text_diff::unified;
pub use why::{FieldWriter, Why};
