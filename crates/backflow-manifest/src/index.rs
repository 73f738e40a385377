//! The folder index: every manifest document under a target folder, by identity.
//!
//! Built from the tree a write is planned on, and refreshed file by file as the write's intents
//! change files, so planning stays a pure function of the tree (a replay on a new tip sees the
//! new tip's files) while a write of N objects parses the folder once, not N times. Building it is also the acceptance
//! check of the folder: a folder holding content backflow cannot handle safely (invalid YAML,
//! documents that are not Kubernetes objects, two documents for one object, foreign files) is
//! refused as a whole, with the reason, rather than partly overwritten.

use std::collections::BTreeMap;

use backflow_git::TreeView;

use crate::document::parse_file;
use crate::error::{IndexError, ManifestError};
use crate::identity::Identity;

/// Where one document lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocRef {
    /// The file, relative to the repository root.
    pub path: String,
    /// The document's position in the file, from 0.
    pub doc: usize,
    /// YAML features in the document that make an in-place edit unsafe (it can still be
    /// removed whole).
    pub hazards: Vec<&'static str>,
    /// Whether the document is SOPS-encrypted (never edited as plain text).
    pub encrypted: bool,
}

/// Every manifest document under a folder, by identity.
#[derive(Debug, Clone, Default)]
pub struct FolderIndex {
    docs: BTreeMap<Identity, DocRef>,
    /// The identities each file holds, so a changed file is re-indexed alone.
    by_path: BTreeMap<String, Vec<Identity>>,
}

/// What a file in a target folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileClass {
    /// A YAML file whose documents are manifests.
    Manifests,
    /// A file backflow or a person keeps next to the manifests (README, kustomization,
    /// `.sops.yaml`, ignore files, licenses); never read as manifests, never removed.
    Companion,
    /// Anything else: its presence makes the folder refused.
    Foreign,
}

/// Classifies a file by its name.
pub fn classify(path: &str) -> FileClass {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    const COMPANIONS: &[&str] = &[
        "kustomization.yaml",
        "kustomization.yml",
        "kustomization",
        ".sops.yaml",
        ".gittargetignore",
        ".gitignore",
        ".gitattributes",
        ".gitkeep",
        ".keep",
    ];
    if COMPANIONS.contains(&lower.as_str()) {
        return FileClass::Companion;
    }
    if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return FileClass::Manifests;
    }
    let stem = lower.split('.').next().unwrap_or("");
    let license_like = matches!(stem, "license" | "licence" | "copying" | "notice")
        && matches!(lower.strip_prefix(stem), Some("" | ".txt" | ".md"));
    if lower.ends_with(".md") || license_like {
        return FileClass::Companion;
    }
    FileClass::Foreign
}

impl FolderIndex {
    /// Indexes every manifest under `target` (normalized; `""` is the repository root).
    pub fn build(tree: &dyn TreeView, target: &str) -> Result<Self, IndexError> {
        let mut index = Self::default();
        for path in tree.list(target)? {
            if let Some(bytes) = tree.read(&path)? {
                index.add_file(&path, &bytes)?;
            }
        }
        Ok(index)
    }

    /// Re-indexes one file after it changed (`None`: it was removed), as planning a write
    /// changes files one intent at a time.
    pub fn refresh(&mut self, path: &str, content: Option<&[u8]>) -> Result<(), IndexError> {
        for identity in self.by_path.remove(path).unwrap_or_default() {
            self.docs.remove(&identity);
        }
        match content {
            Some(bytes) => self.add_file(path, bytes),
            None => Ok(()),
        }
    }

    fn add_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), IndexError> {
        match classify(path) {
            FileClass::Companion => return Ok(()),
            FileClass::Foreign => {
                return Err(ManifestError::ForeignFile {
                    path: path.to_string(),
                }
                .into());
            }
            FileClass::Manifests => {}
        }
        let file = parse_file(path, bytes)?;
        for (i, doc) in file.docs.iter().enumerate() {
            if doc.value.is_null() {
                // An empty or comment-only document describes nothing.
                continue;
            }
            let identity = Identity::of(&doc.value).map_err(|reason| ManifestError::NotKrm {
                path: path.to_string(),
                doc: i,
                reason,
            })?;
            let here = DocRef {
                path: path.to_string(),
                doc: i,
                hazards: doc.hazards.clone(),
                encrypted: doc.value.get("sops").is_some(),
            };
            if let Some(first) = self.docs.get(&identity) {
                return Err(ManifestError::DuplicateIdentity {
                    identity: identity.to_string(),
                    first: format!("{}#{}", first.path, first.doc),
                    second: format!("{}#{}", here.path, here.doc),
                }
                .into());
            }
            self.by_path
                .entry(path.to_string())
                .or_default()
                .push(identity.clone());
            self.docs.insert(identity, here);
        }
        Ok(())
    }

    /// Where the document for `identity` lives.
    pub fn get(&self, identity: &Identity) -> Option<&DocRef> {
        self.docs.get(identity)
    }

    /// Every indexed document, by identity, sorted.
    pub fn iter(&self) -> impl Iterator<Item = (&Identity, &DocRef)> {
        self.docs.iter()
    }

    /// How many documents the folder holds.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the folder holds no documents.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify("t/a/b.yaml"), FileClass::Manifests);
        assert_eq!(classify("t/a/b.YML"), FileClass::Manifests);
        assert_eq!(classify("t/README.md"), FileClass::Companion);
        assert_eq!(classify("t/kustomization.yaml"), FileClass::Companion);
        assert_eq!(classify("t/.sops.yaml"), FileClass::Companion);
        assert_eq!(classify("t/.gittargetignore"), FileClass::Companion);
        assert_eq!(classify("t/LICENSE"), FileClass::Companion);
        assert_eq!(classify("t/NOTICE.txt"), FileClass::Companion);
        assert_eq!(classify("t/run.sh"), FileClass::Foreign);
        assert_eq!(classify("t/notes.txt"), FileClass::Foreign);
        assert_eq!(classify("t/x.json"), FileClass::Foreign);
    }
}
