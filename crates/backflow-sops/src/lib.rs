//! The SOPS file format with age recipients, so that Secrets reach Git only encrypted.
//!
//! A SOPS file is the original YAML document with each selected value replaced by
//! `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`, followed by a `sops` map holding the data key
//! wrapped for each age recipient, `lastmodified`, the MAC over all values, the encryption rule
//! and the format `version`. Files written here decrypt with `sops -d`; files `sops` writes
//! decrypt here.
//!
//! - [`Encryptor`]: writes files for a set of [`Recipient`]s, keeping the data key and the
//!   ciphertext of unchanged values when handed the previous file, as sops does, so that an
//!   unchanged Secret produces an unchanged file.
//! - [`decrypt_document`]: reads a file back with [`Identity`]s, verifying every value and the
//!   MAC.
//! - [`Rules`]: which values are encrypted (`encrypted_regex: ^(data|stringData)$` by default).
//!
//! Time and randomness are handed in. Nothing here knows about Git or Kubernetes.
//!
//! ```
//! use std::time::SystemTime;
//! use backflow_sops::{decrypt_document, generate_identity, parse_identities, Encryptor, Rules};
//!
//! # fn main() -> Result<(), backflow_sops::SopsError> {
//! let mut rng = rand::rng();
//! let (secret, recipient) = generate_identity(&mut rng);
//! let secret_doc = serde_json::json!({
//!     "apiVersion": "v1",
//!     "kind": "Secret",
//!     "metadata": {"name": "db", "namespace": "default"},
//!     "data": {"password": "aHVudGVyMg=="},
//! });
//! let encryptor = Encryptor::new([recipient])?;
//! let file = encryptor.encrypt_document(&secret_doc, &Rules::default(), None, SystemTime::now(), &mut rng)?;
//! assert!(!file.contains("aHVudGVyMg=="));
//!
//! // Re-encrypting the unchanged Secret over its own file changes nothing.
//! let again = encryptor.encrypt_document(&secret_doc, &Rules::default(), Some(&file), SystemTime::now(), &mut rng)?;
//! assert_eq!(again, file);
//!
//! let identities = parse_identities(&secret)?;
//! assert_eq!(decrypt_document(&file, &identities)?, secret_doc);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod cipher;
mod document;
mod error;
mod keys;
mod rules;
mod tree;
mod yaml;

pub use document::{Encryptor, FORMAT_VERSION, decrypt_document};
pub use error::SopsError;
pub use keys::{Identity, Recipient, generate_identity, parse_identities};
pub use rules::Rules;
