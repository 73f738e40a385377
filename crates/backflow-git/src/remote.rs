//! Talking to the Git remote: ref advertisement, fetch and compare-and-swap push, behind one
//! trait with three transports.
//!
//! - [`FileRemote`]: a bare repository on this machine (`file://` or a path). Objects are copied
//!   in process and the branch is moved with an atomic compare-and-swap on the ref, under the same
//!   lock file `git receive-pack` takes. libgit2's own local transport is not used because it
//!   moves the ref without comparing it to the expected tip.
//! - [`Libgit2Remote`]: smart HTTP(S) through libgit2. The lease is checked before the pack is
//!   sent (push negotiation) and the per-ref status after (`Remote::push` returning `Ok` is not
//!   success).
//! - [`CliRemote`]: the `git` program (`git push --force-with-lease=<ref>:<expected>`), for SSH
//!   with a key and `known_hosts`, HTTPS with a bearer token, a CA of its own or a proxy, and
//!   wherever libgit2 falls short.
//!
//! A push either lands exactly on the expected tip or is [`PushOutcome::Rejected`]; a transport
//! failure is a [`RemoteError`], which the worker treats as transient: everything stays pending
//! and is retried.

mod cli;
mod file;
mod libgit2;

use std::fmt;
use std::path::PathBuf;

use git2::Oid;

pub use cli::CliRemote;
pub use file::FileRemote;
pub use libgit2::Libgit2Remote;

use crate::repo::LocalRepo;

/// The tip a push expects the remote branch to be at: the compare half of compare-and-swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedTip {
    /// The branch must not exist yet.
    Absent,
    /// The branch must point at this commit.
    At(Oid),
}

impl ExpectedTip {
    /// The expected commit, if any.
    #[must_use]
    pub fn oid(self) -> Option<Oid> {
        match self {
            Self::Absent => None,
            Self::At(oid) => Some(oid),
        }
    }
}

impl From<Option<Oid>> for ExpectedTip {
    fn from(tip: Option<Oid>) -> Self {
        tip.map_or(Self::Absent, Self::At)
    }
}

impl fmt::Display for ExpectedTip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absent => f.write_str("(absent)"),
            Self::At(oid) => write!(f, "{oid}"),
        }
    }
}

/// What the remote said to a push that reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// The branch now points at the pushed commit.
    Accepted,
    /// The remote refused the update: usually because the branch moved (stale lease,
    /// non-fast-forward), possibly for another reason (a hook, a protected branch). The worker
    /// tells the two apart by looking at the remote's tip afterwards.
    Rejected {
        /// The remote's or the client's explanation.
        reason: String,
    },
}

/// Which remote operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOp {
    /// Reading the ref advertisement.
    LsRemote,
    /// Fetching the branch.
    Fetch,
    /// Pushing the branch.
    Push,
}

impl fmt::Display for RemoteOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::LsRemote => "ls-remote",
            Self::Fetch => "fetch",
            Self::Push => "push",
        })
    }
}

/// Broad classes of transport failure, for logs and status. All are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteErrorKind {
    /// The remote could not be reached (network, missing repository, TLS).
    Unreachable,
    /// The remote refused our credentials, or asked for credentials we do not have.
    Auth,
    /// The SSH host's key is not in the configured `known_hosts` (or differs from it).
    HostKey,
    /// The remote answered something we did not understand, or a lock was held.
    Protocol,
    /// The local cache failed.
    Local,
}

/// A transport failure: nothing is known to have changed on the remote.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{op} {url} failed ({kind:?}): {message}")]
pub struct RemoteError {
    /// The operation.
    pub op: RemoteOp,
    /// The remote, without credentials.
    pub url: String,
    /// What kind of failure.
    pub kind: RemoteErrorKind,
    /// The underlying message.
    pub message: String,
}

impl RemoteError {
    pub(crate) fn new(
        op: RemoteOp,
        url: &str,
        kind: RemoteErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            op,
            url: url.to_string(),
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn local(op: RemoteOp, url: &str, e: &crate::error::RepoError) -> Self {
        Self::new(op, url, RemoteErrorKind::Local, e.to_string())
    }
}

/// One Git remote, as the branch worker uses it.
///
/// Implementations must never move the branch anywhere but from `expected` to `new`.
pub trait GitRemote: Send {
    /// The remote's URL without credentials, for logs.
    fn display_url(&self) -> &str;

    /// Reads the remote's ref advertisement for `branch`: its tip, or `None` if it does not exist.
    fn ls_remote(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError>;

    /// Fetches `branch` into `repo` (objects, and the tracking ref
    /// [`crate::repo::tracking_ref`]) and returns its tip.
    fn fetch(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError>;

    /// Moves `branch` from `expected` to `new` (a commit in `repo`), or reports why not.
    fn push(
        &mut self,
        repo: &LocalRepo,
        branch: &str,
        new: Oid,
        expected: ExpectedTip,
    ) -> Result<PushOutcome, RemoteError>;

    /// Housekeeping no write waits for, run when the writes a push published are answered
    /// (a `file://` remote rolls up the small packs its pushes left). Returns whether it did
    /// any. Nothing by default.
    fn maintain(&mut self) -> bool {
        false
    }

    /// The repository whose small packs are due for a roll-up, when this remote keeps one on
    /// this machine (a `file://` remote) and enough packs were pushed since the last look:
    /// [`GitRemote::maintain`]'s work, for a roll-up thread to do. Counting starts again.
    fn roll_up_due(&mut self) -> Option<PathBuf> {
        None
    }

    /// Another handle rolled this remote's packs up: what this one lists may be gone.
    fn packs_rolled_up(&mut self) {}
}

/// Credentials for a remote, from configuration.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// Anonymous access.
    #[default]
    None,
    /// HTTP basic authentication. Tokens go here too, with the user name the host expects
    /// (for example `x-access-token` or `oauth2`) and the token as the password.
    Basic {
        /// User name.
        username: String,
        /// Password or token.
        password: String,
    },
    /// An HTTP bearer token (`Authorization: Bearer …`), as GitLab and Gitea accept. Served by
    /// the `git` program.
    Bearer {
        /// The token.
        token: String,
    },
    /// An SSH key, with the `known_hosts` file the host key must be found in. Always served by
    /// the `git` program and OpenSSH.
    SshKey {
        /// Private key file.
        private_key: PathBuf,
        /// `known_hosts` file; the host key is checked strictly against it.
        known_hosts: PathBuf,
        /// A file holding the private key's passphrase, when it has one.
        passphrase_file: Option<PathBuf>,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Secrets never reach logs.
        match self {
            Self::None => f.write_str("None"),
            Self::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            Self::Bearer { .. } => f.write_str("Bearer(<redacted>)"),
            Self::SshKey {
                private_key,
                known_hosts,
                passphrase_file,
            } => f
                .debug_struct("SshKey")
                .field("private_key", private_key)
                .field("known_hosts", known_hosts)
                .field("passphrase_file", passphrase_file)
                .finish(),
        }
    }
}

/// Which implementation serves a remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportChoice {
    /// In process where possible: [`FileRemote`] for `file://` and paths, [`Libgit2Remote`] for
    /// HTTP(S); [`CliRemote`] for SSH.
    #[default]
    Auto,
    /// Always the `git` program.
    Cli,
}

/// A remote as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// `file://…`, a path, `http(s)://…`, `ssh://…` or `user@host:path`.
    pub url: String,
    /// How to authenticate.
    pub credentials: Credentials,
    /// CA certificates (PEM file) an HTTPS remote's certificate must chain to, instead of the
    /// system's. Served by the `git` program.
    pub ca_file: Option<PathBuf>,
    /// Which transport to use.
    pub transport: TransportChoice,
}

impl RemoteSpec {
    /// An anonymous remote with the automatic transport.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            credentials: Credentials::None,
            ca_file: None,
            transport: TransportChoice::Auto,
        }
    }
}

/// What kind of URL this is.
fn scheme_of(url: &str) -> &'static str {
    if url.starts_with("file://") || url.starts_with('/') || url.starts_with("./") {
        "file"
    } else if url.starts_with("http://") || url.starts_with("https://") {
        "http"
    } else {
        "ssh"
    }
}

/// The proxy the environment names for `url` (`env` reads a variable): `https_proxy` for
/// HTTPS, `http_proxy` otherwise (either case), unless `no_proxy` names the host (a domain
/// suffix, or `*`).
fn proxy_for(url: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let either =
        |lower: &str, upper: &str| env(lower).or_else(|| env(upper)).filter(|v| !v.is_empty());
    let (scheme, rest) = url.split_once("://")?;
    let proxy = if scheme == "https" {
        either("https_proxy", "HTTPS_PROXY")?
    } else {
        either("http_proxy", "HTTP_PROXY")?
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host_port
        .strip_prefix('[')
        .and_then(|h| h.split_once(']').map(|(h, _)| h))
        .unwrap_or_else(|| host_port.split(':').next().unwrap_or_default())
        .to_ascii_lowercase();
    let bypass = either("no_proxy", "NO_PROXY").unwrap_or_default();
    let skipped = bypass.split(',').map(str::trim).any(|pattern| {
        let pattern = pattern.trim_start_matches('.').to_ascii_lowercase();
        pattern == "*"
            || (!pattern.is_empty() && (host == pattern || host.ends_with(&format!(".{pattern}"))))
    });
    (!skipped).then_some(proxy)
}

/// Opens the transport `spec` asks for. An HTTP(S) remote behind a proxy (the environment's
/// `https_proxy`/`http_proxy`) is served by the `git` program, which speaks to proxies the way
/// `git` users expect; libgit2 did not use them.
#[must_use]
pub fn open_remote(spec: &RemoteSpec) -> Box<dyn GitRemote> {
    let proxied = proxy_for(&spec.url, |name| std::env::var(name).ok()).is_some();
    let in_process = matches!(
        spec.credentials,
        Credentials::None | Credentials::Basic { .. }
    ) && spec.ca_file.is_none()
        && !proxied;
    match (spec.transport, scheme_of(&spec.url)) {
        (TransportChoice::Auto, "file") => Box::new(FileRemote::new(&spec.url)),
        (TransportChoice::Auto, "http") if in_process => {
            Box::new(Libgit2Remote::new(&spec.url, spec.credentials.clone()))
        }
        _ => Box::new(
            CliRemote::new(&spec.url, spec.credentials.clone()).with_ca_file(spec.ca_file.clone()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_pick_transports() {
        assert_eq!(scheme_of("file:///srv/r.git"), "file");
        assert_eq!(scheme_of("/srv/r.git"), "file");
        assert_eq!(scheme_of("https://h/r.git"), "http");
        assert_eq!(scheme_of("ssh://git@h/r.git"), "ssh");
        assert_eq!(scheme_of("git@h:r.git"), "ssh");
        let secret = Credentials::Basic {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{secret:?}").contains("hunter2"));
    }

    #[test]
    fn the_environment_names_the_proxy_unless_no_proxy_names_the_host() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        let plain = env(&[
            ("http_proxy", "http://proxy:3128"),
            ("HTTPS_PROXY", "http://secure:3128"),
        ]);
        assert_eq!(
            proxy_for("http://git.example.com/r.git", plain).as_deref(),
            Some("http://proxy:3128")
        );
        assert_eq!(
            proxy_for("https://u:p@git.example.com:8443/r.git", plain).as_deref(),
            Some("http://secure:3128")
        );
        let bypass = env(&[
            ("https_proxy", "http://p:1"),
            ("no_proxy", "localhost, .example.com"),
        ]);
        assert_eq!(proxy_for("https://git.example.com/r.git", bypass), None);
        assert_eq!(proxy_for("https://example.com/r.git", bypass), None);
        assert_eq!(proxy_for("https://localhost:3000/r.git", bypass), None);
        assert_eq!(
            proxy_for("https://github.com/r.git", bypass).as_deref(),
            Some("http://p:1")
        );
        assert_eq!(
            proxy_for(
                "https://[::1]:8443/r.git",
                env(&[("https_proxy", "http://p:1"), ("no_proxy", "::1")])
            ),
            None
        );
        assert_eq!(
            proxy_for(
                "https://github.com/r.git",
                env(&[("https_proxy", "http://p:1"), ("NO_PROXY", "*")])
            ),
            None
        );
        assert_eq!(proxy_for("https://github.com/r.git", env(&[])), None);
    }
}
