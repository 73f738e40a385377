//! The one error type of the codec.
//!
//! Messages name the failing step and, where there is one, the value's path in the SOPS form
//! (`data:password:`), never a plaintext value or a secret key: they end up in logs and in
//! Kubernetes status conditions.

/// Why a document could not be encrypted or decrypted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SopsError {
    /// The encryptor has no recipient; a secret must never be written without one.
    #[error("no age recipient is configured: refusing to write a secret without encryption")]
    NoRecipients,
    /// A recipient string is not an `age1…` X25519 public key.
    #[error("invalid age recipient {recipient:?}: {reason}")]
    InvalidRecipient {
        /// The offending recipient (public, safe to show).
        recipient: String,
        /// What the parser said.
        reason: String,
    },
    /// An identity is not an `AGE-SECRET-KEY-1…` X25519 secret key. The key itself is never shown.
    #[error("invalid age identity on line {line}: {reason}")]
    InvalidIdentity {
        /// 1-based line of the identity text that failed to parse.
        line: usize,
        /// What the parser said.
        reason: String,
    },
    /// An `encrypted_regex`/`unencrypted_regex` does not compile.
    #[error("invalid {rule} {pattern:?}: {reason}")]
    InvalidRule {
        /// Which rule (`encrypted_regex`, …).
        rule: &'static str,
        /// The pattern as given.
        pattern: String,
        /// What the regex compiler said.
        reason: String,
    },
    /// The text is not a single YAML document.
    #[error("the file is not a readable YAML document: {0}")]
    Yaml(String),
    /// The document is not a mapping at its top level.
    #[error("the document must be a mapping at its top level")]
    NotAMapping,
    /// The plaintext document already has a top-level `sops` key, which the metadata needs.
    #[error("the document has its own top-level `sops` key, which SOPS reserves for its metadata")]
    ReservedKey,
    /// The document has no `sops` metadata: it is not a SOPS file.
    #[error("the file has no `sops` metadata; it is not SOPS-encrypted")]
    MissingMetadata,
    /// The `sops` metadata is malformed.
    #[error("invalid sops metadata: {0}")]
    InvalidMetadata(String),
    /// The file uses a SOPS feature this codec does not implement (key groups, comment rules, …).
    #[error("unsupported sops feature: {0}")]
    Unsupported(String),
    /// The metadata has no age entry: the file is keyed only to KMS, PGP, Vault, ….
    #[error("the file has no age recipient; only age keys are supported")]
    NoAgeRecipients,
    /// None of the identities opens any age entry of the file.
    #[error(
        "no given age identity can open the data key (the file is encrypted to {recipients:?})"
    )]
    NoMatchingIdentity {
        /// The recipients the file names, so an operator sees which key is missing.
        recipients: Vec<String>,
    },
    /// An `enc` entry opened, but its content is not a 32-byte data key.
    #[error("the age entry for {recipient} does not hold a 32-byte data key")]
    BadDataKey {
        /// The recipient whose entry was opened.
        recipient: String,
    },
    /// A value under an encrypted path is not a well-formed `ENC[AES256_GCM,…]` string.
    #[error("malformed encrypted value at {path}: {reason}")]
    MalformedValue {
        /// The value's path, SOPS style (`data:password:`).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// AES-GCM authentication failed: the value was altered, moved to another path, or belongs to
    /// another data key.
    #[error("the value at {path} failed authentication (altered, moved, or from another key)")]
    Authentication {
        /// The value's path, SOPS style (`data:password:`).
        path: String,
    },
    /// The values do not match the file's MAC: something was added, removed or changed.
    #[error("MAC mismatch: the file's values were changed without the data key")]
    MacMismatch,
    /// A plaintext value cannot be stored in a SOPS file.
    #[error("the value at {path} cannot be stored: {reason}")]
    UnsupportedValue {
        /// The value's path, SOPS style.
        path: String,
        /// Why not.
        reason: String,
    },
    /// The clock handed in is before 1970 or after 9999, which RFC 3339 cannot write.
    #[error("the time handed in cannot be written as an RFC 3339 timestamp")]
    Clock,
    /// age failed to wrap the data key.
    #[error("age could not wrap the data key: {0}")]
    Age(String),
}
