//! Service account tokens: what `kubectl create token NAME` asks for (a `TokenRequest` on
//! `serviceaccounts/NAME/token`), and how the server knows them again.
//!
//! A token is `bfsa1.<payload>.<signature>`: the payload (URL-safe base64 of JSON) names the
//! namespace, service account, its UID and the expiry; the signature is HMAC-SHA256 with a key
//! kept beside the store (`sa.key`, owner only). A token authenticates as
//! `system:serviceaccount:<namespace>:<name>` (groups `system:serviceaccounts` and
//! `system:serviceaccounts:<namespace>`) until it expires or its service account is deleted
//! (the UID must still match), as kube-apiserver's bound tokens do.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Value, json};

use crate::auth::UserInfo;

/// What marks a service account token.
const PREFIX: &str = "bfsa1.";
/// The shortest life a token may ask for (kube-apiserver's minimum).
pub const MIN_EXPIRATION: Duration = Duration::from_secs(600);
/// The life of a token that asks for none.
pub const DEFAULT_EXPIRATION: Duration = Duration::from_secs(3600);
/// The longest life a token may have.
pub const MAX_EXPIRATION: Duration = Duration::from_secs(48 * 3600);

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// The service account's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID when the token was issued.
    pub uid: String,
}

impl TokenClaims {
    /// The user the token authenticates as.
    #[must_use]
    pub fn user(&self) -> UserInfo {
        UserInfo {
            name: format!("system:serviceaccount:{}:{}", self.namespace, self.name).into(),
            uid: self.uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", self.namespace),
            ],
        }
    }
}

/// Issues and checks service account tokens.
#[derive(Clone)]
pub struct ServiceAccountTokens {
    key: Arc<hmac::Key>,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServiceAccountTokens(<redacted>)")
    }
}

impl ServiceAccountTokens {
    /// Signs with the key at `path`, made (owner only) when there is none.
    pub fn load(path: &Path) -> std::io::Result<Self> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) if bytes.len() >= 32 => bytes,
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} holds no signing key (32 bytes or more)",
                    path.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let bytes = random_key()?;
                crate::tls::write_private(path, &bytes)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                bytes
            }
            Err(e) => return Err(e),
        };
        Ok(Self::with_key(&bytes))
    }

    /// Signs with a key that lives as long as the process.
    #[cfg(test)]
    pub fn ephemeral() -> std::io::Result<Self> {
        Ok(Self::with_key(&random_key()?))
    }

    fn with_key(bytes: &[u8]) -> Self {
        Self {
            key: Arc::new(hmac::Key::new(hmac::HMAC_SHA256, bytes)),
        }
    }

    /// A token for `claims` valid until `expires`.
    #[must_use]
    pub fn issue(&self, claims: &TokenClaims, expires: SystemTime) -> String {
        let exp = expires
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let payload =
            json!({"ns": claims.namespace, "name": claims.name, "uid": claims.uid, "exp": exp});
        let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
        let signature = hmac::sign(&self.key, payload.as_bytes());
        format!(
            "{PREFIX}{payload}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        )
    }

    /// What `token` says, if this server signed it and it has not expired at `now`.
    #[must_use]
    pub fn verify(&self, token: &str, now: SystemTime) -> Option<TokenClaims> {
        let rest = token.strip_prefix(PREFIX)?;
        let (payload, signature) = rest.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        hmac::verify(&self.key, payload.as_bytes(), &signature).ok()?;
        let payload: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let exp = payload.get("exp").and_then(Value::as_u64)?;
        let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        if exp <= now {
            return None;
        }
        let text = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_string);
        Some(TokenClaims {
            namespace: text("ns")?,
            name: text("name")?,
            uid: text("uid")?,
        })
    }
}

fn random_key() -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| std::io::Error::other("the system's random generator failed"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> TokenClaims {
        TokenClaims {
            namespace: "ci".into(),
            name: "deployer".into(),
            uid: "u-1".into(),
        }
    }

    #[test]
    fn a_token_is_good_until_it_expires_and_only_with_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let signer = ServiceAccountTokens::load(&dir.path().join("sa.key")).expect("key");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let token = signer.issue(&claims(), now + DEFAULT_EXPIRATION);
        assert_eq!(signer.verify(&token, now), Some(claims()));
        assert_eq!(&*claims().user().name, "system:serviceaccount:ci:deployer");
        assert_eq!(
            signer.verify(&token, now + DEFAULT_EXPIRATION),
            None,
            "expired"
        );
        let again = ServiceAccountTokens::load(&dir.path().join("sa.key")).expect("same key");
        assert_eq!(again.verify(&token, now), Some(claims()), "the key is kept");
        let other = ServiceAccountTokens::ephemeral().expect("key");
        assert_eq!(other.verify(&token, now), None, "another server's key");
        let (head, _) = token.rsplit_once('.').expect("signed");
        let forged = format!("{head}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
        assert_eq!(signer.verify(&forged, now), None, "a forged signature");
        assert_eq!(signer.verify("admin-token", now), None);
    }
}
