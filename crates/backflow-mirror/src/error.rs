//! Why the mirror cannot serve a `GitProvider` or `GitTarget`: each reason typed, with what it is
//! about, so status conditions and logs say exactly what to fix.

use backflow_git::RepoError;

/// Why a branch worker for a `GitTarget` cannot run.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A `GitProvider` duration does not parse.
    #[error("spec.push.{field} {value:?} is not a duration like 1s or 500ms: {source}")]
    Duration {
        /// The field, under `spec.push`.
        field: &'static str,
        /// What it holds.
        value: String,
        /// Why it does not parse.
        #[source]
        source: humantime::DurationError,
    },
    /// `spec.commit.committer` lacks a name or an email.
    #[error("spec.commit.committer needs both name and email")]
    Committer,
    /// `spec.commit.authorEmail` is not a usable template.
    #[error(
        "spec.commit.authorEmail {0:?} must contain {{user}} and no <, > or line break (like \"{{user}}@users.example.com\")"
    )]
    AuthorEmail(String),
    /// `spec.refreshInterval` is zero.
    #[error("spec.refreshInterval must be more than 0s (the remote would be read without pause)")]
    ZeroRefresh,
    /// The Secret named by `spec.secretRef` could not be read.
    #[error("cannot read Secret {namespace}/{name}: {}", backflow_board::explain(.source))]
    SecretUnreadable {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What the API said.
        #[source]
        source: kube::Error,
    },
    /// The Secret named by `spec.secretRef` does not exist.
    #[error("Secret {namespace}/{name} named by spec.secretRef does not exist")]
    SecretMissing {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Secret lacks the keys credentials are read from.
    #[error("Secret {namespace}/{name} named by spec.secretRef must hold {wanted}")]
    SecretKeys {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The keys this remote needs.
        wanted: &'static str,
    },
    /// An SSH remote's host keys are not known: no `known_hosts` to check them against.
    #[error("{message}")]
    HostKeyUnknown {
        /// The `GitProvider`.
        provider: String,
        /// What is missing and how to add it.
        message: String,
    },
    /// A credential file (SSH key, `known_hosts`, CA) could not be written for the `git`
    /// program.
    #[error("cannot write the credential file {path}: {source}")]
    CredentialFile {
        /// The file.
        path: std::path::PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// The local cache of the repository could not be opened.
    #[error("cannot open the local cache of {url}: {source}")]
    Cache {
        /// The repository.
        url: String,
        /// What the cache said.
        #[source]
        source: RepoError,
    },
}

impl MirrorError {
    /// The condition reason a person reads this as.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Duration { .. } | Self::Committer | Self::AuthorEmail(_) | Self::ZeroRefresh => {
                "InvalidConfig"
            }
            Self::SecretUnreadable { .. } | Self::SecretMissing { .. } => "SecretNotFound",
            Self::SecretKeys { .. } => "SecretInvalid",
            Self::HostKeyUnknown { .. } => "HostKeyUnknown",
            Self::CredentialFile { .. } | Self::Cache { .. } => "CacheFailed",
        }
    }
}
