//! age keys: recipients (public, `age1…`) and identities (secret, `AGE-SECRET-KEY-1…`).
//!
//! Thin wrappers over the `age` crate's X25519 types so that callers never depend on the `age`
//! version, and so that a secret key cannot leak through `Debug`.

use std::fmt;
use std::str::FromStr;

use age::secrecy::ExposeSecret;
use rand::CryptoRng;
use zeroize::Zeroizing;

use crate::SopsError;

/// An age X25519 recipient (`age1…`): the public half, which the data key is wrapped for.
#[derive(Clone)]
pub struct Recipient(pub(crate) age::x25519::Recipient);

impl FromStr for Recipient {
    type Err = SopsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        age::x25519::Recipient::from_str(trimmed)
            .map(Recipient)
            .map_err(|reason| SopsError::InvalidRecipient {
                recipient: trimmed.to_owned(),
                reason: reason.to_owned(),
            })
    }
}

impl fmt::Display for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipient({})", self.0)
    }
}

impl PartialEq for Recipient {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Recipient {}

/// An age X25519 identity (`AGE-SECRET-KEY-1…`): the secret half, which opens the data key.
///
/// `Debug` shows only the public recipient.
#[derive(Clone)]
pub struct Identity(pub(crate) age::x25519::Identity);

impl Identity {
    /// Makes a new identity from 32 bytes of the randomness handed in.
    ///
    /// The randomness is injected (not the OS generator) so that tests and simulations are
    /// reproducible; production passes the OS generator.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut secret = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(secret.as_mut());
        // age exposes no constructor from raw bytes, so the key goes through its text form.
        let hrp = bech32::Hrp::parse_unchecked("age-secret-key-");
        let encoded = bech32::encode::<bech32::Bech32>(hrp, secret.as_ref())
            .map(|text| Zeroizing::new(text.to_uppercase()));
        match encoded
            .ok()
            .and_then(|text| age::x25519::Identity::from_str(&text).ok())
        {
            Some(identity) => Identity(identity),
            // Unreachable for 32 bytes (bech32 limits are far above); fall back to age's own
            // generator rather than panic.
            None => Identity(age::x25519::Identity::generate()),
        }
    }

    /// The public recipient that this identity opens.
    #[must_use]
    pub fn recipient(&self) -> Recipient {
        Recipient(self.0.to_public())
    }

    /// The secret key in its text form, `AGE-SECRET-KEY-1…`, for storing in a Secret.
    #[must_use]
    pub fn to_secret_string(&self) -> Zeroizing<String> {
        Zeroizing::new(self.0.to_string().expose_secret().to_owned())
    }
}

impl FromStr for Identity {
    type Err = SopsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        age::x25519::Identity::from_str(s.trim())
            .map(Identity)
            .map_err(|reason| SopsError::InvalidIdentity {
                line: 1,
                reason: reason.to_owned(),
            })
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity(for {})", self.0.to_public())
    }
}

/// Parses an age key file (`age-keygen` output, `SOPS_AGE_KEY` content): one identity per line;
/// blank lines and `#` comments are skipped.
pub fn parse_identities(text: &str) -> Result<Vec<Identity>, SopsError> {
    let mut identities = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let identity =
            age::x25519::Identity::from_str(line).map_err(|reason| SopsError::InvalidIdentity {
                line: index + 1,
                reason: reason.to_owned(),
            })?;
        identities.push(Identity(identity));
    }
    Ok(identities)
}

/// Makes a new identity and returns it as text: `(secret "AGE-SECRET-KEY-1…", recipient "age1…")`.
pub fn generate_identity<R: CryptoRng + ?Sized>(rng: &mut R) -> (Zeroizing<String>, String) {
    let identity = Identity::generate(rng);
    (
        identity.to_secret_string(),
        identity.recipient().to_string(),
    )
}
