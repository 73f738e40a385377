//! The deletes a branch worker has taken but not published, kept on disk.
//!
//! After a crash the live store gives back every object that exists, and the mirror's start-up
//! resync writes them again; an object that is gone leaves no trace there, so a delete decided
//! before the crash would never reach Git (a resync under prune mode `OnEvent` does not sweep).
//! The journal keeps those deletes until a push holds them; a new worker submits them again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use backflow_api::ObjectKey;
use backflow_branch::IntentSeq;
use serde::{Deserialize, Serialize};

/// One delete waiting for its push.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JournaledDelete {
    /// The target (folder) of the object.
    pub target: String,
    /// The object.
    pub key: ObjectKey,
}

/// The journal of one branch, in the branch worker's cache.
#[derive(Debug)]
pub(crate) struct DeleteJournal {
    path: PathBuf,
    entries: BTreeMap<IntentSeq, JournaledDelete>,
}

impl DeleteJournal {
    /// The journal of `branch` in the cache at `cache`, and the deletes a previous run left in
    /// it (the journal itself starts empty: they are recorded again when resubmitted).
    pub fn open(cache: &Path, branch: &str) -> (Self, Vec<JournaledDelete>) {
        let name: String = branch
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '+'
                }
            })
            .collect();
        let path = cache
            .join("backflow")
            .join(format!("pending-deletes-{name}.json"));
        let left = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Vec<JournaledDelete>>(&bytes).unwrap_or_else(|e| {
                tracing::error!(path = %path.display(), error = %e, "the journal of pending deletes is unreadable; ignoring it");
                Vec::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "cannot read the journal of pending deletes");
                Vec::new()
            }
        };
        let journal = Self {
            path,
            entries: BTreeMap::new(),
        };
        (journal, left)
    }

    /// Records a delete taken as intent `seq`.
    pub fn record(&mut self, seq: IntentSeq, delete: JournaledDelete) {
        self.entries.insert(seq, delete);
        self.save();
    }

    /// Forgets the deletes a push up to `through` holds.
    pub fn published(&mut self, through: IntentSeq) {
        let later = self.entries.split_off(&IntentSeq(through.0 + 1));
        let had = !self.entries.is_empty();
        self.entries = later;
        if had {
            self.save();
        }
    }

    /// Forgets the deletes of `key` in `target`: a later write of the object supersedes them
    /// (after a crash the live store gives that object back, and the start-up resync reads it).
    pub fn superseded(&mut self, target: &str, key: &ObjectKey) {
        let before = self.entries.len();
        self.entries
            .retain(|_, d| !(d.target == target && d.key == *key));
        if self.entries.len() != before {
            self.save();
        }
    }

    /// Forgets a delete the planner refused (it will never be published).
    pub fn refused(&mut self, seq: IntentSeq) {
        if self.entries.remove(&seq).is_some() {
            self.save();
        }
    }

    /// Writes the journal whole (to a temporary file renamed over it, so a crash leaves the old
    /// or the new one), or removes it when empty.
    fn save(&self) {
        let result = if self.entries.is_empty() {
            match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        } else {
            self.write()
        };
        if let Err(e) = result {
            // Nothing acknowledged is lost while the worker runs; only a crash before the push
            // would then leave the delete out of Git.
            tracing::error!(path = %self.path.display(), error = %e, "cannot write the journal of pending deletes");
        }
    }

    fn write(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let entries: Vec<&JournaledDelete> = self.entries.values().collect();
        let bytes = serde_json::to_vec(&entries).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &self.path)
    }
}
