//! Which values are encrypted: the one `encrypted_regex` / `unencrypted_suffix` / … rule of a file.

use regex::Regex;

use crate::SopsError;

/// The key sops uses when a file names no rule.
pub(crate) const DEFAULT_UNENCRYPTED_SUFFIX: &str = "_unencrypted";

/// Which values of a document get encrypted. A file carries exactly one rule; sops refuses two.
///
/// A rule looks at every key on a value's path (sequence indices are not part of a path): with
/// `EncryptedRegex("^(data|stringData)$")`, everything below `data` or `stringData` is encrypted,
/// and `apiVersion`, `kind` and `metadata` stay readable so the file can be indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rules {
    /// Encrypt a value if any key on its path matches the regex (`encrypted_regex`).
    EncryptedRegex(String),
    /// Encrypt a value unless a key on its path matches the regex (`unencrypted_regex`).
    UnencryptedRegex(String),
    /// Encrypt a value if any key on its path ends with the suffix (`encrypted_suffix`).
    EncryptedSuffix(String),
    /// Encrypt a value unless a key on its path ends with the suffix (`unencrypted_suffix`;
    /// sops' default is `_unencrypted`).
    UnencryptedSuffix(String),
}

impl Default for Rules {
    /// `encrypted_regex: ^(data|stringData)$`, the rule for Kubernetes Secrets.
    fn default() -> Self {
        Rules::EncryptedRegex("^(data|stringData)$".to_owned())
    }
}

impl Rules {
    /// An `encrypted_regex` naming every top-level key of `doc` except those in `clear`, so that
    /// everything outside `clear` is encrypted, however deep, while keys named like a `clear`
    /// key further down (a nested `metadata`, say) are encrypted too. `None` when nothing is
    /// left to encrypt.
    ///
    /// sops has no rule for "top level only"; this one is exact for the document it was made
    /// for and is stored in the file, so sops and this codec agree on it.
    #[must_use]
    pub fn encrypt_all_but(
        doc: &serde_json::Map<String, serde_json::Value>,
        clear: &[&str],
    ) -> Option<Self> {
        // Sorted, so that the rule (stored in the file) does not change with key order.
        let mut keys: Vec<String> = doc
            .keys()
            .filter(|k| !clear.contains(&k.as_str()))
            .map(|k| regex::escape(k))
            .collect();
        keys.sort();
        if keys.is_empty() {
            return None;
        }
        Some(Rules::EncryptedRegex(format!("^({})$", keys.join("|"))))
    }

    /// The metadata key this rule is stored under in the `sops` map.
    #[must_use]
    pub fn metadata_key(&self) -> &'static str {
        match self {
            Rules::EncryptedRegex(_) => "encrypted_regex",
            Rules::UnencryptedRegex(_) => "unencrypted_regex",
            Rules::EncryptedSuffix(_) => "encrypted_suffix",
            Rules::UnencryptedSuffix(_) => "unencrypted_suffix",
        }
    }

    /// The regex or suffix, as written in the file.
    #[must_use]
    pub fn pattern(&self) -> &str {
        match self {
            Rules::EncryptedRegex(p)
            | Rules::UnencryptedRegex(p)
            | Rules::EncryptedSuffix(p)
            | Rules::UnencryptedSuffix(p) => p,
        }
    }

    /// Compiles the rule once per document rather than once per value.
    pub(crate) fn compile(&self) -> Result<Matcher, SopsError> {
        // sops reads an empty rule as "no rule" (and then applies `_unencrypted`), so writing
        // one would make sops and this codec disagree about which values are encrypted.
        if self.pattern().is_empty() {
            return Err(SopsError::InvalidRule {
                rule: self.metadata_key(),
                pattern: String::new(),
                reason: "empty".to_owned(),
            });
        }
        let regex = |pattern: &str| {
            Regex::new(pattern).map_err(|e| SopsError::InvalidRule {
                rule: self.metadata_key(),
                pattern: pattern.to_owned(),
                reason: e.to_string(),
            })
        };
        Ok(match self {
            Rules::EncryptedRegex(p) => Matcher::EncryptedRegex(regex(p)?),
            Rules::UnencryptedRegex(p) => Matcher::UnencryptedRegex(regex(p)?),
            Rules::EncryptedSuffix(s) => Matcher::EncryptedSuffix(s.clone()),
            Rules::UnencryptedSuffix(s) => Matcher::UnencryptedSuffix(s.clone()),
        })
    }
}

/// A compiled [`Rules`].
pub(crate) enum Matcher {
    EncryptedRegex(Regex),
    UnencryptedRegex(Regex),
    EncryptedSuffix(String),
    UnencryptedSuffix(String),
}

impl Matcher {
    /// Whether the value at `path` is encrypted. Mirrors sops: a regex is searched (not
    /// anchored) in each key of the path.
    pub(crate) fn encrypts(&self, path: &[&str]) -> bool {
        match self {
            Matcher::EncryptedRegex(r) => path.iter().any(|k| r.is_match(k)),
            Matcher::UnencryptedRegex(r) => !path.iter().any(|k| r.is_match(k)),
            Matcher::EncryptedSuffix(s) => path.iter().any(|k| k.ends_with(s.as_str())),
            Matcher::UnencryptedSuffix(s) => !path.iter().any(|k| k.ends_with(s.as_str())),
        }
    }
}
