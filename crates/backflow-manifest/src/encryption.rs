//! Which objects are sensitive, and how each target folder encrypts them.
//!
//! Sensitive objects reach Git only as SOPS files, one object per `{…}/{name}.sops.yaml` file,
//! with `apiVersion`, `kind` and `metadata` in clear so that the folder index still finds them
//! by identity. Secrets encrypt `data`/`stringData` (the Kubernetes convention); every other
//! sensitive type encrypts everything else (see [`rules_for`]). A folder with no [`Encryptor`]
//! in the [`EncryptionMap`] never gets them: there is no plaintext fallback.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use backflow_api::GroupResource;
use backflow_sops::{Encryptor, Identity, Rules, parse_identities};
use serde_json::Value;

use crate::layout::normalize_target;

/// Types whose objects hold secrets, as (group, resource): written only encrypted.
pub const SENSITIVE: &[(&str, &str)] = &[("", "secrets")];

/// Whether objects of `resource` are written only encrypted.
#[must_use]
pub fn is_sensitive(resource: &GroupResource) -> bool {
    SENSITIVE
        .iter()
        .any(|(g, r)| resource.group == *g && resource.resource == *r)
}

/// The first line of a `.sops.yaml` backflow wrote; only such a file is rewritten when the
/// recipients change, so a person's own `.sops.yaml` (without it) is never overwritten.
pub const SOPS_CONFIG_MARKER: &str = "# Written by backflow";

/// The top-level fields a SOPS file keeps in clear: what the folder index identifies it by.
pub const CLEAR_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// The rule backflow encrypts a sensitive object of `resource` with: `data`/`stringData` for
/// Secrets; for any other type, every top-level field but [`CLEAR_FIELDS`], so a credential
/// under `spec` (or anywhere else) never reaches Git in plain text.
#[must_use]
pub fn rules_for(resource: &GroupResource, object: &Value) -> Rules {
    if is_sensitive(resource) {
        return Rules::default();
    }
    object
        .as_object()
        .and_then(|doc| Rules::encrypt_all_but(doc, CLEAR_FIELDS))
        // Nothing outside the identity: nothing to encrypt, any rule reads the same.
        .unwrap_or_default()
}

/// The creation rule for Secrets at their canonical path, `{namespace}/secrets/{name}.sops.yaml`
/// (the segment before `secrets` has no dot: a namespace, never an API group of a custom type).
/// sops matches it against the path relative to the `.sops.yaml`.
const SECRET_PATH_REGEX: &str = "(^|/)[^/.]+/secrets/[^/]+\\.sops\\.ya?ml$";

/// The folder's `.sops.yaml`: the creation rules `sops` uses to create or edit files here, with
/// the recipients backflow encrypts to. Secrets at their canonical path get backflow's own
/// rule; every other `*.sops.yaml` gets `unencrypted_regex` over [`CLEAR_FIELDS`], the closest
/// static rule to [`rules_for`] (it also leaves nested keys of those names readable, where
/// backflow's own per-file rule encrypts them).
#[must_use]
pub fn sops_config(recipients: &[String]) -> String {
    let mut keys = String::from("    key_groups:\n      - age:\n");
    for r in recipients {
        keys.push_str("          - ");
        keys.push_str(r);
        keys.push('\n');
    }
    format!(
        "{SOPS_CONFIG_MARKER} from the GitTarget's spec.encryption; rewritten when the recipients\n\
         # change. Delete the first line to keep your own version of this file.\n\
         creation_rules:\n  \
         # Secrets: only data and stringData.\n  \
         - path_regex: '{SECRET_PATH_REGEX}'\n    \
         encrypted_regex: '^(data|stringData)$'\n\
         {keys}  \
         # Every other file: everything but the fields that identify the object.\n  \
         - path_regex: '\\.sops\\.ya?ml$'\n    \
         unencrypted_regex: '^({clear})$'\n\
         {keys}",
        clear = CLEAR_FIELDS.join("|"),
    )
}

/// The suffix of the Secret keys that hold age identities (`age-keygen` output).
pub const AGE_KEY_SUFFIX: &str = ".agekey";

/// Why a Secret's age identities cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretKeyError {
    /// No key of the Secret ends in `.agekey`.
    #[error("has no key ending in .agekey; add one holding an age identity (age-keygen output)")]
    NoAgeKey,
    /// A `.agekey` entry is not text.
    #[error("key {key} is not UTF-8 text")]
    NotText {
        /// The Secret key.
        key: String,
    },
    /// A `.agekey` entry holds no valid identity.
    #[error("key {key}: {reason}")]
    Invalid {
        /// The Secret key.
        key: String,
        /// What is wrong with it (never the key material).
        reason: String,
    },
}

/// The age identities held by a Secret's `*.agekey` entries (`data`, already decoded from
/// base64): what a `GitTarget`'s `spec.encryption.age.secretRef` adds, and what reads a
/// `*.sops.yaml` file back into its object with [`backflow_sops::decrypt_document`].
pub fn identities_from_secret(
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Vec<Identity>, SecretKeyError> {
    let mut identities = Vec::new();
    let mut found = false;
    for (key, value) in data {
        if !key.ends_with(AGE_KEY_SUFFIX) {
            continue;
        }
        found = true;
        let text =
            std::str::from_utf8(value).map_err(|_| SecretKeyError::NotText { key: key.clone() })?;
        let parsed = parse_identities(text).map_err(|e| SecretKeyError::Invalid {
            key: key.clone(),
            reason: e.to_string(),
        })?;
        identities.extend(parsed);
    }
    if !found {
        return Err(SecretKeyError::NoAgeKey);
    }
    Ok(identities)
}

/// Target folder → the encryptor of its sensitive objects, shared between whoever configures
/// it (the mirror, from each `GitTarget`'s `spec.encryption`) and the planner. Cloning shares the
/// map.
#[derive(Debug, Clone, Default)]
pub struct EncryptionMap {
    inner: Arc<RwLock<BTreeMap<String, Arc<Encryptor>>>>,
    /// Types a folder's configuration adds to [`SENSITIVE`].
    extra: Arc<RwLock<BTreeMap<String, Vec<GroupResource>>>>,
}

/// The map's key for a target folder: normalized when valid, so `.`, `""` and `a/` agree.
fn folder_key(target: &str) -> String {
    normalize_target(target).unwrap_or_else(|_| target.to_string())
}

impl EncryptionMap {
    /// An empty map: no folder encrypts.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sensitive objects of `target` are encrypted with `encryptor` from now on.
    pub fn set(&self, target: &str, encryptor: Arc<Encryptor>) {
        // A poisoned lock only means a writer panicked mid-insert of a plain map entry.
        let mut map = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(folder_key(target), encryptor);
    }

    /// Sensitive objects of `target` are no longer written.
    pub fn remove(&self, target: &str) {
        let mut map = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.remove(&folder_key(target));
    }

    /// Adds `resources` (replacing earlier ones) to the types `target` writes only encrypted.
    pub fn set_sensitive(&self, target: &str, resources: Vec<GroupResource>) {
        let mut extra = self
            .extra
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if resources.is_empty() {
            extra.remove(&folder_key(target));
        } else {
            extra.insert(folder_key(target), resources);
        }
    }

    /// Whether objects of `resource` are written only encrypted in `target`: always for
    /// [`SENSITIVE`] types, and for the types the folder's configuration adds.
    #[must_use]
    pub fn is_sensitive(&self, target: &str, resource: &GroupResource) -> bool {
        is_sensitive(resource)
            || self
                .extra
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&folder_key(target))
                .is_some_and(|r| r.contains(resource))
    }

    /// The encryptor of `target`'s sensitive objects, if it encrypts.
    #[must_use]
    pub fn get(&self, target: &str) -> Option<Arc<Encryptor>> {
        let map = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&folder_key(target)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_sensitive() {
        assert!(is_sensitive(&GroupResource::new("", "secrets")));
        assert!(!is_sensitive(&GroupResource::new("", "configmaps")));
        assert!(!is_sensitive(&GroupResource::new("example.com", "secrets")));
    }

    #[test]
    fn config_reads_as_creation_rules() {
        let text = sops_config(&["age1a".into(), "age1b".into()]);
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("valid YAML");
        let rules = v["creation_rules"].as_array().expect("a list");
        assert_eq!(rules.len(), 2, "{text}");
        let secrets =
            regex::Regex::new(rules[0]["path_regex"].as_str().expect("str")).expect("regex");
        assert!(secrets.is_match("default/secrets/db.sops.yaml"));
        assert!(secrets.is_match("live/default/secrets/db.sops.yml"));
        assert!(!secrets.is_match("default/example.com/secrets/db.sops.yaml"));
        assert!(!secrets.is_match("default/secrets/db.yaml"));
        assert_eq!(rules[0]["encrypted_regex"], "^(data|stringData)$");
        assert_eq!(rules[1]["path_regex"], "\\.sops\\.ya?ml$");
        assert_eq!(
            rules[1]["unencrypted_regex"],
            "^(apiVersion|kind|metadata)$"
        );
        for rule in rules {
            assert_eq!(
                rule["key_groups"][0]["age"],
                serde_json::json!(["age1a", "age1b"])
            );
        }
        assert!(text.starts_with(SOPS_CONFIG_MARKER));
    }

    #[test]
    fn other_sensitive_types_encrypt_all_but_their_identity() {
        let secret = GroupResource::new("", "secrets");
        let creds = GroupResource::new("example.com", "credentials");
        let object = serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "Credential",
            "metadata": {"name": "a"}, "spec": {"password": "x"}, "type": "basic",
        });
        assert_eq!(rules_for(&secret, &object), Rules::default());
        assert_eq!(
            rules_for(&creds, &object),
            Rules::EncryptedRegex("^(spec|type)$".into())
        );
        let bare = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        assert_eq!(
            rules_for(&GroupResource::new("", "configmaps"), &bare),
            Rules::default()
        );
    }

    /// The applier's path: a file the planner's encryptor wrote is read back with the
    /// identities of the Secret that holds the key.
    #[test]
    fn secret_identities_read_sops_files_back() {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(11);
        let (secret_key, recipient) = backflow_sops::generate_identity(&mut rng);
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "web"},
            "data": {"password": "aHVudGVy"},
        });
        let file = Encryptor::new([&recipient])
            .expect("recipient")
            .encrypt_document(
                &object,
                &Rules::default(),
                None,
                std::time::UNIX_EPOCH,
                &mut rng,
            )
            .expect("encrypts");
        let mut data = BTreeMap::new();
        data.insert("README".to_string(), b"not a key".to_vec());
        data.insert(
            "identity.agekey".to_string(),
            format!("# public key: {recipient}\n{}\n", secret_key.as_str()).into_bytes(),
        );
        let ids = identities_from_secret(&data).expect("identities");
        assert_eq!(ids.len(), 1);
        assert_eq!(
            backflow_sops::decrypt_document(&file, &ids).expect("decrypts"),
            object
        );

        data.remove("identity.agekey");
        assert_eq!(
            identities_from_secret(&data).unwrap_err(),
            SecretKeyError::NoAgeKey
        );
        data.insert("bad.agekey".into(), b"AGE-SECRET-KEY-1NOPE".to_vec());
        let err = identities_from_secret(&data).unwrap_err();
        assert!(
            matches!(&err, SecretKeyError::Invalid { key, .. } if key == "bad.agekey"),
            "{err}"
        );
        assert!(
            !err.to_string().contains("AGE-SECRET-KEY"),
            "no key material in errors: {err}"
        );
        data.insert("bad.agekey".into(), vec![0xff, 0xfe]);
        assert!(matches!(
            identities_from_secret(&data),
            Err(SecretKeyError::NotText { .. })
        ));
    }

    #[test]
    fn folders_are_normalized() {
        let map = EncryptionMap::new();
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
        let (_, recipient) = backflow_sops::generate_identity(&mut rng);
        let enc = Arc::new(Encryptor::new([recipient]).expect("recipient"));
        map.set("live/", enc);
        assert!(map.get("live").is_some());
        map.remove("live");
        assert!(map.get("live/").is_none());
    }
}
