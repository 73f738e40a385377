//! Which backflow writes a folder: the `.backflow-owner` file.
//!
//! Two backflows writing one folder would rewrite each other's objects and `.sops.yaml`
//! recipients without a word. The first to write a folder names itself in this file (in the
//! same commit as its first write); any other backflow then writes nothing there and applies
//! nothing from it, and says which one holds the folder. A person hands a folder over by
//! deleting the file in a commit once the old backflow is gone.
//!
//! The file has no `.yaml` suffix, so neither Flux's kustomize-controller nor Argo CD reads it
//! as a manifest.

use crate::error::ManifestError;
use crate::layout::join;

/// The name of the file, in the folder it names the owner of.
pub const OWNER_FILE: &str = ".backflow-owner";

/// The key naming the instance in the file.
const INSTANCE_KEY: &str = "instance:";
/// The key naming the host, for a person.
const HOST_KEY: &str = "host:";

/// One running backflow, as a folder's owner file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderOwner {
    /// What makes the instance itself: the uid of the live side's `kube-system` Namespace (the
    /// cluster's identity, which HA replicas share and a fresh `serve` data dir does not).
    pub instance: String,
    /// Where it runs (a host or pod name): only for a person reading the refusal.
    pub host: String,
}

/// What a folder's owner file says, compared with this backflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No file: the folder is anybody's, and this backflow's first write claims it.
    Unclaimed,
    /// The file names this backflow.
    Mine,
    /// The file names another backflow (or cannot be read as naming any).
    Other(FolderOwner),
}

impl FolderOwner {
    /// The file's content naming this owner.
    #[must_use]
    pub fn render(&self) -> String {
        format!(
            "# This folder is written by one backflow: the one named here. Any other backflow\n\
             # writes nothing into it and applies nothing from it, and says so in its status.\n\
             # To hand the folder to another backflow, stop this one, then delete this file in a\n\
             # commit: the next backflow to write the folder names itself here.\n\
             {INSTANCE_KEY} {}\n\
             {HOST_KEY} {}\n",
            self.instance, self.host
        )
    }

    /// The owner the file `content` names; `None` when it names none (then nobody may assume
    /// the folder is theirs).
    #[must_use]
    pub fn parse(content: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(content).ok()?;
        let value = |key: &str| {
            text.lines()
                .find_map(|line| line.trim().strip_prefix(key))
                .map(|v| v.trim().to_string())
        };
        let instance = value(INSTANCE_KEY).filter(|i| !i.is_empty())?;
        let host = value(HOST_KEY).unwrap_or_default();
        Some(Self { instance, host })
    }

    /// Where the owner file of `folder` (normalized) lives.
    #[must_use]
    pub fn path(folder: &str) -> String {
        join(folder, OWNER_FILE)
    }

    /// What `content` (the folder's owner file, if any) says about this backflow.
    #[must_use]
    pub fn judge(&self, content: Option<&[u8]>) -> Ownership {
        let Some(content) = content else {
            return Ownership::Unclaimed;
        };
        match Self::parse(content) {
            Some(owner) if owner.instance == self.instance => Ownership::Mine,
            Some(owner) => Ownership::Other(owner),
            None => Ownership::Other(Self {
                instance: "unreadable".into(),
                host: String::new(),
            }),
        }
    }

    /// The refusal of a write to (or an apply of) `folder` held by `holder`.
    #[must_use]
    pub fn refusal(folder: &str, holder: &Self) -> ManifestError {
        ManifestError::OwnedElsewhere {
            folder: if folder.is_empty() {
                "/".into()
            } else {
                folder.to_string()
            },
            file: Self::path(folder),
            instance: holder.instance.clone(),
            host: if holder.host.is_empty() {
                "an unknown host".into()
            } else {
                holder.host.clone()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> FolderOwner {
        FolderOwner {
            instance: "4f0c-aa".into(),
            host: "alpha".into(),
        }
    }

    #[test]
    fn the_rendered_file_names_its_owner_and_no_other() {
        let file = me().render();
        assert_eq!(FolderOwner::parse(file.as_bytes()), Some(me()));
        assert_eq!(me().judge(Some(file.as_bytes())), Ownership::Mine);
        assert_eq!(me().judge(None), Ownership::Unclaimed);
        let other = FolderOwner {
            instance: "77".into(),
            host: "beta".into(),
        };
        assert_eq!(
            me().judge(Some(other.render().as_bytes())),
            Ownership::Other(other)
        );
    }

    #[test]
    fn a_file_naming_nobody_is_nobody_s_to_take() {
        for content in [&b""[..], b"host: alpha\n", b"instance:\n", b"\xff\xfe"] {
            assert!(
                matches!(me().judge(Some(content)), Ownership::Other(_)),
                "{content:?}"
            );
        }
    }

    #[test]
    fn the_refusal_names_the_holder_and_the_way_out() {
        let other = FolderOwner {
            instance: "77".into(),
            host: String::new(),
        };
        let message = FolderOwner::refusal("live", &other).to_string();
        assert!(message.contains("77"), "{message}");
        assert!(message.contains("an unknown host"), "{message}");
        assert!(message.contains("delete live/.backflow-owner"), "{message}");
        assert_eq!(FolderOwner::path(""), ".backflow-owner");
    }
}
