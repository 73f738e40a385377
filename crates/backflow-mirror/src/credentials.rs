//! A `GitProvider`'s credentials, read from the Secret its `spec.secretRef` names, and made
//! into what the Git transports take.
//!
//! | remote | Secret keys |
//! |---|---|
//! | `ssh://…`, `user@host:path` | `identity` (an OpenSSH private key), `known_hosts` (required: host keys are always checked), optionally `identity.passphrase` |
//! | `https://…` | `username` and `password`, or `bearerToken`; optionally `caFile` (PEM) |
//!
//! SSH keys, passphrases and CA files are handed to the `git` program as files: they are
//! written under the mirror's data directory, readable by the owner only, and rewritten when
//! the Secret changes (read at every reconcile), so a rotated key is used by the next fetch or
//! push without a restart.

use std::path::{Path, PathBuf};

use backflow_api::config::GitProvider;
use backflow_git::Credentials;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};

use crate::error::MirrorError;

/// How a worker reaches its remote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// How it authenticates.
    pub credentials: Credentials,
    /// The CA an HTTPS remote's certificate chains to, when not a system one.
    pub ca_file: Option<PathBuf>,
    /// The resourceVersion of the Secret read: a rotated key changes it (not the file names),
    /// and the worker then retries at once instead of waiting out its backoff.
    pub secret_version: Option<String>,
}

/// Whether `url` is reached over SSH (`ssh://…` or scp-like `user@host:path`).
#[must_use]
pub fn is_ssh(url: &str) -> bool {
    if url.starts_with("ssh://") || url.starts_with("git+ssh://") {
        return true;
    }
    if url.contains("://") || url.starts_with('/') || url.starts_with('.') {
        return false;
    }
    // scp-like: a colon before the first slash.
    url.split('/').next().is_some_and(|head| head.contains(':'))
}

/// Reads `provider`'s credentials; SSH and CA material goes into files under `dir`.
pub async fn read(
    client: &Client,
    provider: &GitProvider,
    dir: &Path,
) -> Result<Access, MirrorError> {
    let namespace = provider.namespace().unwrap_or_default();
    let ssh = is_ssh(&provider.spec.url);
    let Some(r) = &provider.spec.secret_ref else {
        if ssh {
            return Err(MirrorError::HostKeyUnknown {
                provider: provider.name_any(),
                message: "an SSH remote needs spec.secretRef naming a Secret with `identity` and `known_hosts`".into(),
            });
        }
        return Ok(Access::default());
    };
    let name = r.name.clone();
    let secret = match Api::<Secret>::namespaced(client.clone(), &namespace)
        .get_opt(&name)
        .await
    {
        Ok(Some(secret)) => secret,
        Ok(None) => return Err(MirrorError::SecretMissing { namespace, name }),
        Err(source) => {
            return Err(MirrorError::SecretUnreadable {
                namespace,
                name,
                source,
            });
        }
    };
    let secret_version = secret.resource_version();
    let keys = SecretKeys {
        data: secret.data.unwrap_or_default(),
        namespace,
        name,
    };
    let dir = dir.join(&keys.namespace).join(provider.name_any());
    let access = if ssh {
        ssh_access(&keys, &dir)
    } else {
        https_access(&keys, &dir)
    }?;
    Ok(Access {
        secret_version,
        ..access
    })
}

/// The keys of one Secret.
struct SecretKeys {
    data: std::collections::BTreeMap<String, k8s_openapi::ByteString>,
    namespace: String,
    name: String,
}

impl SecretKeys {
    fn bytes(&self, key: &str) -> Option<&[u8]> {
        self.data.get(key).map(|b| b.0.as_slice())
    }

    fn text(&self, key: &str) -> Option<String> {
        self.bytes(key).map(|b| {
            String::from_utf8_lossy(b)
                .trim_end_matches(['\r', '\n'])
                .to_string()
        })
    }

    fn missing(&self, wanted: &'static str) -> MirrorError {
        MirrorError::SecretKeys {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            wanted,
        }
    }

    fn io(&self, path: &Path, source: std::io::Error) -> MirrorError {
        MirrorError::CredentialFile {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn ssh_access(keys: &SecretKeys, dir: &Path) -> Result<Access, MirrorError> {
    let identity = keys
        .bytes("identity")
        .ok_or_else(|| keys.missing("`identity` (an OpenSSH private key) and `known_hosts`"))?;
    let Some(known_hosts) = keys
        .bytes("known_hosts")
        .filter(|k| !k.iter().all(u8::is_ascii_whitespace))
    else {
        return Err(MirrorError::HostKeyUnknown {
            provider: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            message: format!(
                "Secret {}/{} has no `known_hosts`: add the host's keys (`ssh-keyscan -p PORT HOST`), which are always checked",
                keys.namespace, keys.name
            ),
        });
    };
    let private_key = dir.join("identity");
    let known = dir.join("known_hosts");
    // OpenSSH refuses a key without its final line break.
    let mut identity = identity.to_vec();
    if !identity.ends_with(b"\n") {
        identity.push(b'\n');
    }
    write_private(&private_key, &identity).map_err(|e| keys.io(&private_key, e))?;
    write_private(&known, known_hosts).map_err(|e| keys.io(&known, e))?;
    let passphrase_file = match keys.text("identity.passphrase") {
        Some(passphrase) => {
            let file = dir.join("identity.passphrase");
            write_private(&file, passphrase.as_bytes()).map_err(|e| keys.io(&file, e))?;
            Some(file)
        }
        None => None,
    };
    Ok(Access {
        credentials: Credentials::SshKey {
            private_key,
            known_hosts: known,
            passphrase_file,
        },
        ca_file: None,
        secret_version: None,
    })
}

fn https_access(keys: &SecretKeys, dir: &Path) -> Result<Access, MirrorError> {
    let credentials = match (
        keys.text("bearerToken"),
        keys.text("username"),
        keys.text("password"),
    ) {
        (Some(token), _, _) => Credentials::Bearer { token },
        (None, Some(username), Some(password)) => Credentials::Basic { username, password },
        (None, None, None) if keys.bytes("caFile").is_some() => Credentials::None,
        _ => {
            return Err(keys
                .missing("`username` and `password`, or `bearerToken` (and optionally `caFile`)"));
        }
    };
    let ca_file = match keys.bytes("caFile") {
        Some(pem) => {
            let file = dir.join("ca.crt");
            write_private(&file, pem).map_err(|e| keys.io(&file, e))?;
            Some(file)
        }
        None => None,
    };
    Ok(Access {
        credentials,
        ca_file,
        secret_version: None,
    })
}

/// Writes `bytes` to `path` readable by the owner only, replacing it whole (a reader never sees
/// half a key), unless it already holds them.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        builder.mode(0o700);
        builder.create(parent)?;
    }
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut file = opts.open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_urls_are_told_from_the_others() {
        for ssh in [
            "ssh://git@github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "git.example.com:repo.git",
        ] {
            assert!(is_ssh(ssh), "{ssh}");
        }
        for other in [
            "https://github.com/org/repo.git",
            "file:///srv/repo.git",
            "/srv/repo.git",
            "./repo.git",
        ] {
            assert!(!is_ssh(other), "{other}");
        }
    }

    #[test]
    fn credential_files_are_the_owners_and_replaced_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("team").join("git").join("identity");
        write_private(&path, b"first").expect("write");
        write_private(&path, b"second").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let parent = std::fs::metadata(path.parent().expect("parent")).expect("meta");
            assert_eq!(parent.permissions().mode() & 0o777, 0o700);
        }
    }
}
