//! Manifests: how Kubernetes objects read in Git and how their files are edited.
//!
//! - `sanitize.rs`: the object as it should read in Git (server fields and controller
//!   bookkeeping removed, user intent kept).
//! - `yaml.rs`: canonical YAML for new files and the quoting every write uses.
//! - `layout.rs`: where a new object's file goes; names can never leave the folder.
//! - `index.rs`: every manifest document of a folder by identity, and the folder's acceptance
//!   check.
//! - `edit.rs`: in-place edits of one document, keeping comments, order and other documents.
//! - `encryption.rs`: which objects are sensitive and how each folder encrypts them (SOPS).
//! - `bootstrap.rs`: the README and ignore file a folder gets with its first write.
//! - `owner.rs`: which backflow writes a folder (`.backflow-owner`); others keep out.
//! - `declared.rs`: the objects a folder declares, decrypted, as an applier applies them.
//! - `kustomize/`: a kustomization rendered as `kubectl kustomize` renders it.
//! - `kustomized.rs`: live edits of objects a layout builds, projected back into it.
//! - `planner.rs`: [`YamlPlanner`], the branch worker's planner built from all of the above.
//!
//! Nothing here does I/O beyond reading the trees it is handed.

#![deny(missing_docs)]

mod bootstrap;
mod declared;
mod document;
mod edit;
mod encryption;
mod error;
mod identity;
mod index;
mod kinds;
pub mod kustomize;
mod kustomized;
mod layout;
mod owner;
mod placement;
mod planner;
mod sanitize;
mod yaml;

pub use declared::{
    DeclarationCache, DeclarationProblem, Declared, DeclaredObject, declared_objects,
    declared_objects_cached, declared_objects_within,
};
pub use document::{
    ALIAS_EXPANSION_RATIO, MAX_ALIAS_NODES, MAX_ALIASES, MAX_DOCUMENTS, MAX_FILE_BYTES,
};
pub use edit::{append_document, edit_document, remove_document};
pub use encryption::{
    AGE_KEY_SUFFIX, CLEAR_FIELDS, EncryptionMap, SENSITIVE, SecretKeyError, identities_from_secret,
    is_sensitive, rules_for,
};
pub use error::{IndexError, ManifestError};
pub use identity::Identity;
pub use index::{DocRef, FolderIndex};
pub use kinds::KindMap;
pub use layout::{is_git_dir, normalize_target, object_path, sops_object_path};
pub use owner::{FolderOwner, OWNER_FILE, Ownership};
pub use placement::{PlacementMap, PlacementRules, validate_template};
pub use planner::MergeReport;
pub use planner::YamlPlanner;
pub use sanitize::sanitize;
pub use yaml::render;
