//! Which objects are sensitive, and how each target folder encrypts them.
//!
//! Sensitive objects (Secrets) reach Git only as SOPS files, one object per
//! `{…}/{name}.sops.yaml` file, with only `data`/`stringData` encrypted so that the folder index
//! still finds them by identity. A folder with no [`Encryptor`] in the [`EncryptionMap`] never
//! gets them: there is no plaintext fallback.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use backflow_api::GroupResource;
use backflow_sops::Encryptor;

use crate::layout::normalize_target;

/// Types whose objects hold secrets, as (group, resource): written only encrypted.
pub const SENSITIVE: &[(&str, &str)] = &[("", "secrets")];

/// Whether objects of `resource` are written only encrypted.
pub fn is_sensitive(resource: &GroupResource) -> bool {
    SENSITIVE
        .iter()
        .any(|(g, r)| resource.group == *g && resource.resource == *r)
}

/// The first line of a `.sops.yaml` backflow wrote; only such a file is rewritten when the
/// recipients change, so a person's own `.sops.yaml` (without it) is never overwritten.
pub const SOPS_CONFIG_MARKER: &str = "# Written by backflow";

/// The folder's `.sops.yaml`: the creation rule `sops` uses to edit or create files here,
/// matching what backflow writes (same recipients, same `encrypted_regex`).
pub fn sops_config(recipients: &[String]) -> String {
    let mut out = format!(
        "{SOPS_CONFIG_MARKER} from the GitTarget's spec.encryption; rewritten when the recipients\n\
         # change. Delete the first line to keep your own version of this file.\n\
         creation_rules:\n  \
         - path_regex: '.*\\.sops\\.ya?ml$'\n    \
         encrypted_regex: '^(data|stringData)$'\n    \
         key_groups:\n      \
         - age:\n"
    );
    for r in recipients {
        out.push_str("          - ");
        out.push_str(r);
        out.push('\n');
    }
    out
}

/// Target folder → the encryptor of its sensitive objects, shared between whoever configures
/// it (the mirror, from each GitTarget's `spec.encryption`) and the planner. Cloning shares the
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
    pub fn new() -> Self {
        Self::default()
    }

    /// Sensitive objects of `target` are encrypted with `encryptor` from now on.
    pub fn set(&self, target: &str, encryptor: Arc<Encryptor>) {
        // A poisoned lock only means a writer panicked mid-insert of a plain map entry.
        let mut map = self.inner.write().unwrap_or_else(|e| e.into_inner());
        map.insert(folder_key(target), encryptor);
    }

    /// Sensitive objects of `target` are no longer written.
    pub fn remove(&self, target: &str) {
        let mut map = self.inner.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&folder_key(target));
    }

    /// Adds `resources` (replacing earlier ones) to the types `target` writes only encrypted.
    pub fn set_sensitive(&self, target: &str, resources: Vec<GroupResource>) {
        let mut extra = self.extra.write().unwrap_or_else(|e| e.into_inner());
        if resources.is_empty() {
            extra.remove(&folder_key(target));
        } else {
            extra.insert(folder_key(target), resources);
        }
    }

    /// Whether objects of `resource` are written only encrypted in `target`: always for
    /// [`SENSITIVE`] types, and for the types the folder's configuration adds.
    pub fn is_sensitive(&self, target: &str, resource: &GroupResource) -> bool {
        is_sensitive(resource)
            || self
                .extra
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&folder_key(target))
                .is_some_and(|r| r.contains(resource))
    }

    /// The encryptor of `target`'s sensitive objects, if it encrypts.
    pub fn get(&self, target: &str) -> Option<Arc<Encryptor>> {
        let map = self.inner.read().unwrap_or_else(|e| e.into_inner());
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
    fn config_reads_as_a_creation_rule() {
        let text = sops_config(&["age1a".into(), "age1b".into()]);
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("valid YAML");
        let rule = &v["creation_rules"][0];
        assert_eq!(rule["path_regex"], ".*\\.sops\\.ya?ml$");
        assert_eq!(rule["encrypted_regex"], "^(data|stringData)$");
        assert_eq!(
            rule["key_groups"][0]["age"],
            serde_json::json!(["age1a", "age1b"])
        );
        assert!(text.starts_with(SOPS_CONFIG_MARKER));
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
