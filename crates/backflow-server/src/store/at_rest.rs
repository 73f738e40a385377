//! Secrets encrypted at rest, as kube-apiserver's `EncryptionConfiguration` with an `aesgcm`
//! provider does: each stored Secret is AES-256-GCM-sealed with a key kept beside the store
//! (`store.key`, owner only), its storage key bound in as additional data so a sealed value
//! cannot be moved to another object. The read model in memory holds plaintext; only what
//! reaches the disk is sealed.

use std::path::{Path, PathBuf};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use backflow_api::ObjectKey;

/// What starts a sealed value, as kube-apiserver marks its own (`k8s:enc:<provider>:v1:<key>:`).
const PREFIX: &[u8] = b"k8s:enc:aesgcm:v1:backflow:";

/// Why the at-rest key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AtRestError {
    /// The key file could not be read or written.
    #[error("cannot use the store's encryption key {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The key file does not hold a 32-byte key.
    #[error(
        "{path} is not a store encryption key (32 bytes); restore the one backed up with the store"
    )]
    Malformed {
        /// The key file.
        path: PathBuf,
    },
    /// A sealed value does not open with this key (another key, or a damaged value).
    #[error(
        "stored {key} does not decrypt with the store's key: restore the store.key backed up with this store"
    )]
    Open {
        /// The object.
        key: String,
    },
    /// The system's random generator failed.
    #[error("the system's random generator failed")]
    Random,
}

/// The key Secrets are sealed with.
pub struct AtRestKey {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for AtRestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtRestKey(<redacted>)")
    }
}

impl AtRestKey {
    /// Reads the key at `path`; when `create` and there is none, makes one (owner only).
    pub fn load(path: &Path, create: bool) -> Result<Option<Self>, AtRestError> {
        let io = |source| AtRestError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let rng = SystemRandom::new();
                let mut bytes = vec![0u8; 32];
                rng.fill(&mut bytes).map_err(|_| AtRestError::Random)?;
                crate::tls::write_private(path, &bytes)
                    .map_err(|e| io(std::io::Error::other(e.to_string())))?;
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let unbound =
            UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| AtRestError::Malformed {
                path: path.to_path_buf(),
            })?;
        Ok(Some(Self {
            key: LessSafeKey::new(unbound),
            rng: SystemRandom::new(),
        }))
    }

    /// `plaintext` sealed for `key`: the prefix, a random nonce, the ciphertext and its tag.
    pub fn seal(&self, key: &ObjectKey, plaintext: &[u8]) -> Result<Vec<u8>, AtRestError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| AtRestError::Random)?;
        let mut sealed = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key.to_string().as_bytes()),
                &mut sealed,
            )
            .map_err(|_| AtRestError::Random)?;
        let mut out = Vec::with_capacity(PREFIX.len() + NONCE_LEN + sealed.len());
        out.extend_from_slice(PREFIX);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of a value [`AtRestKey::seal`] made for `key`.
    pub fn open(&self, key: &ObjectKey, stored: &[u8]) -> Result<Vec<u8>, AtRestError> {
        let fail = || AtRestError::Open {
            key: key.to_string(),
        };
        let rest = stored.strip_prefix(PREFIX).ok_or_else(fail)?;
        if rest.len() < NONCE_LEN {
            return Err(fail());
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| fail())?;
        let mut buf = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(key.to_string().as_bytes()), &mut buf)
            .map_err(|_| fail())?;
        Ok(plain.to_vec())
    }
}

/// Whether a stored value is sealed.
#[must_use]
pub fn is_sealed(stored: &[u8]) -> bool {
    stored.starts_with(PREFIX)
}

/// Whether objects under `key` are sealed at rest: Secrets.
#[must_use]
pub fn is_sensitive(key: &ObjectKey) -> bool {
    key.resource.group.is_empty() && key.resource.resource == "secrets"
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::GroupResource;

    fn secret(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "secrets"), "default", name)
    }

    #[test]
    fn a_sealed_value_opens_only_for_its_object_and_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.key");
        assert!(AtRestKey::load(&path, false).expect("no key").is_none());
        let key = AtRestKey::load(&path, true)
            .expect("created")
            .expect("a key");
        let sealed = key.seal(&secret("db"), b"hunter2").expect("seal");
        assert!(is_sealed(&sealed));
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(key.open(&secret("db"), &sealed).expect("open"), b"hunter2");
        assert!(
            key.open(&secret("other"), &sealed).is_err(),
            "bound to its object"
        );
        let again = AtRestKey::load(&path, false)
            .expect("read")
            .expect("the same key");
        assert_eq!(
            again.open(&secret("db"), &sealed).expect("open"),
            b"hunter2"
        );
        std::fs::write(&path, [7u8; 32]).expect("another key");
        let other = AtRestKey::load(&path, false).expect("read").expect("a key");
        assert!(other.open(&secret("db"), &sealed).is_err(), "another key");
        std::fs::write(&path, b"short").expect("damage");
        assert!(AtRestKey::load(&path, false).is_err());
    }
}
