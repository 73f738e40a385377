//! Why a manifest operation was refused.
//!
//! Every message names the file (and document) or object it is about and says what a person can
//! do about it, because these reasons end up in a `GitTarget`'s status and in logs.

/// A refusal from the manifest layer: the folder, a file or an object cannot be handled safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// A file is not valid YAML (or not UTF-8).
    #[error("{path}: not valid YAML ({reason}); fix or remove the file")]
    InvalidYaml {
        /// The file, relative to the repository root.
        path: String,
        /// What the parser reported.
        reason: String,
    },
    /// A file is larger than backflow reads (its size, its documents, or what its aliases
    /// expand to), refused before the memory is spent.
    #[error("{path}: {what} ({found}, the limit is {limit}); split the file or expand it by hand")]
    TooLarge {
        /// The file.
        path: String,
        /// What is too large.
        what: &'static str,
        /// How large it is.
        found: u64,
        /// The limit.
        limit: u64,
    },
    /// A document is not a Kubernetes object (no `apiVersion`, `kind` or `metadata.name`).
    #[error(
        "{path} document {doc}: not a Kubernetes object ({reason}); only manifests may live in a backflow folder"
    )]
    NotKrm {
        /// The file.
        path: String,
        /// The document's position in the file, from 0.
        doc: usize,
        /// Which part is missing.
        reason: String,
    },
    /// Two documents in the folder describe the same object.
    #[error(
        "{identity} is defined twice, in {first} and {second}; keep one of them so edits have a single home"
    )]
    DuplicateIdentity {
        /// The object.
        identity: String,
        /// The first place, `path#doc`.
        first: String,
        /// The second place, `path#doc`.
        second: String,
    },
    /// A file that is neither a manifest nor a known companion file sits in the folder.
    #[error(
        "{path}: foreign file in a folder backflow writes; move it out of the folder (only YAML manifests, README.md, kustomization.yaml, .sops.yaml, .gittargetignore, .gitignore, .gitkeep, .backflow-owner and license files may live here)"
    )]
    ForeignFile {
        /// The file.
        path: String,
    },
    /// A document that must be edited uses YAML features an in-place edit cannot keep correct.
    #[error(
        "{path} document {doc}: {feature} cannot be edited in place safely; expand them by hand"
    )]
    UnsafeDocument {
        /// The file.
        path: String,
        /// The document's position in the file.
        doc: usize,
        /// What was found (`anchors`, `aliases`, `merge keys`, `tags`).
        feature: String,
    },
    /// An encrypted (SOPS) document would have to be edited as plain text.
    #[error("{path} document {doc}: is SOPS-encrypted and is never edited as plain text")]
    EncryptedDocument {
        /// The file.
        path: String,
        /// The document's position in the file.
        doc: usize,
    },
    /// A sensitive object (a Secret) would have to be written, but its folder has no encryption.
    #[error(
        "{object}: holds secrets and this folder has no usable encryption, so it is not written (never in plain text); set spec.encryption.age on the GitTarget"
    )]
    EncryptionUnavailable {
        /// The object's key.
        object: String,
    },
    /// An encrypted file and another object would share a file.
    #[error("{path}: {reason}")]
    EncryptedFileConflict {
        /// The file.
        path: String,
        /// What would have happened and what to do.
        reason: String,
    },
    /// Encrypting a sensitive object failed; nothing is written.
    #[error("{object}: cannot be encrypted ({reason}); nothing was written")]
    EncryptionFailed {
        /// The object's key.
        object: String,
        /// What the codec reported.
        reason: String,
    },
    /// A name or namespace would put a file outside its folder, or is no file name at all.
    #[error("{object}: {reason}")]
    InvalidName {
        /// The object, as `resource/namespace/name`.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The target folder path itself is unusable.
    #[error("target folder {target:?}: {reason}")]
    InvalidTarget {
        /// The folder as configured.
        target: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A live edit of an object a kustomize layout builds, which no document of the layout can
    /// take without changing something else.
    #[error(
        "{object}: the kustomize layout {layout:?} cannot take this live edit: {reason}; make the change in Git"
    )]
    KustomizeUnplaceable {
        /// The object's key.
        object: String,
        /// The folder of the layout's kustomization.
        layout: String,
        /// Why, naming the field and the files concerned.
        reason: String,
    },
    /// The object handed in is not a Kubernetes object or does not match its key.
    #[error("{object}: {reason}")]
    InvalidObject {
        /// The object's key.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A document index is beyond the end of the file.
    #[error("{path}: has no document {doc}")]
    NoSuchDocument {
        /// The file.
        path: String,
        /// The requested document.
        doc: usize,
    },
    /// Another backflow writes the folder (its owner file names it): this one writes nothing
    /// there and applies nothing from it.
    #[error(
        "folder {folder} is written by another backflow (instance {instance}, on {host}), as {file} says: this one writes nothing into it and applies nothing from it. If that backflow is gone for good, delete {file} in a commit and this one takes the folder over"
    )]
    OwnedElsewhere {
        /// The folder.
        folder: String,
        /// Its owner file.
        file: String,
        /// The instance the file names.
        instance: String,
        /// Where that instance runs, as the file says.
        host: String,
    },
    /// An edit did not produce the object it was meant to; nothing is written.
    #[error(
        "{path} document {doc}: the edited document does not read back as the object ({reason})"
    )]
    EditMismatch {
        /// The file.
        path: String,
        /// The document's position.
        doc: usize,
        /// What differed.
        reason: String,
    },
}

/// Why a folder could not be indexed (or an intent planned): a refusal, or the tree itself
/// could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The folder's content cannot be handled safely.
    #[error(transparent)]
    Refused(#[from] ManifestError),
    /// The tree could not be read.
    #[error(transparent)]
    Repo(#[from] backflow_branch::IoFailure),
}

impl From<IndexError> for backflow_branch::TreeError {
    fn from(e: IndexError) -> Self {
        match e {
            IndexError::Refused(refusal) => refusal.into(),
            IndexError::Repo(repo) => backflow_branch::TreeError::Read(repo),
        }
    }
}

impl From<ManifestError> for backflow_branch::TreeError {
    fn from(e: ManifestError) -> Self {
        backflow_branch::TreeError::Plan(backflow_branch::PlanError::from_error(e))
    }
}
