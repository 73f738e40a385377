//! The YAML planner: intents become in-place edits of the target folder's manifests.
//!
//! - `Present(object)`: the document with the object's identity, wherever it is in the folder,
//!   is edited in place; with none, the object goes to its layout path. If a file already sits
//!   at that path, the object is appended to it as a new document (the file's other documents
//!   are kept byte for byte), since a person may have bundled objects there on purpose.
//! - `Absent`: the document is found by identity (the resource type's kind comes from the
//!   [`KindMap`]) and removed; without a known kind, the layout path is checked instead. A file
//!   whose last document goes is removed.
//! - `Bootstrap`: a folder holding no file gets its bootstrap files; any other is left alone.
//! - `Sweep(scope)`: every document of the scope's type in exactly its namespace scope whose
//!   name is not kept is removed. Without a known kind the sweep is refused: guessing could
//!   remove objects of another type.
//!
//! Sensitive objects ([`crate::encryption`]) are written only as SOPS files, one object per
//! `{name}.sops.yaml`, encrypted with the target's encryptor from the [`EncryptionMap`] and
//! re-encrypted over the current file so that an unchanged object gives an unchanged file;
//! without an encryptor they are refused, never written in plain text. The folder's
//! `.sops.yaml` carries the matching creation rule.
//!
//! Every intent first indexes the whole folder, which refuses folders holding foreign or
//! ambiguous content; bootstrap files are added with any write that creates or edits a
//! document. The planner reads only the tree it is handed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use backflow_api::{Clock, ObjectKey, defaults};
use backflow_branch::blob_id;
use backflow_branch::{
    Baseline, Held, Intent, LayeredView, ObjectJson, ObjectState, PathUpdate, Planner, SweepScope,
    TreeError, TreeView,
};
use rand::rngs::StdRng;
use serde_json::Value;

use crate::bootstrap;
use crate::document::parse_file;
use crate::edit::{append_document, edit_parsed, remove_document};
use crate::encryption::{EncryptionMap, SOPS_CONFIG_MARKER, is_sensitive, rules_for, sops_config};
use crate::error::{IndexError, ManifestError};
use crate::identity::Identity;
use crate::index::{
    DocRef, FolderIndex, FolderMemo, KnownFile, WriteIndex, entries_of, rendered_entries,
};
use crate::kinds::KindMap;
use crate::layout::{
    check_key, is_sops_path, join, normalize_target, object_path, sops_object_path,
};
use crate::owner::{FolderOwner, Ownership};
use crate::placement::PlacementMap;
use crate::sanitize::sanitize;
use crate::yaml::render;
use backflow_branch::merge_object;

/// What encrypting sensitive objects needs: the per-folder encryptors, and the time and
/// randomness handed in (planning never reads the system clock or generator itself).
#[derive(Clone)]
struct Crypto {
    map: EncryptionMap,
    clock: Arc<dyn Clock>,
    rng: Arc<Mutex<StdRng>>,
}

impl Crypto {
    /// `object` (of `key`) encrypted by `encryptor`, re-using what `previous` (the file as it
    /// is) can keep: its data key, and the ciphertext of values that did not change.
    fn encrypt(
        &self,
        encryptor: &backflow_sops::Encryptor,
        key: &ObjectKey,
        object: &Value,
        previous: Option<&str>,
    ) -> Result<String, TreeError> {
        let mut rng = self
            .rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        encryptor
            .encrypt_document(
                object,
                &rules_for(&key.resource, object),
                previous,
                self.clock.now(),
                &mut *rng,
            )
            .map_err(|e| {
                ManifestError::EncryptionFailed {
                    object: key.to_string(),
                    reason: e.to_string(),
                }
                .into()
            })
    }
}

impl std::fmt::Debug for Crypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crypto")
            .field("map", &self.map)
            .finish_non_exhaustive()
    }
}

/// Plans intents as edits of YAML manifests. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct YamlPlanner {
    kinds: KindMap,
    crypto: Option<Crypto>,
    placement: PlacementMap,
    /// Per folder, its files' parses by blob id and its index as the last write left it: a
    /// write re-reads only the files that changed.
    folders: Arc<Mutex<BTreeMap<String, FolderMemo>>>,
    /// Files this planner wrote and knows the documents of, by path (rendered new from one
    /// object, or edited and parsed to check they read back): refreshing the index after such
    /// a file needs no parse of it.
    known: Arc<Mutex<BTreeMap<String, KnownEntries>>>,
    /// The documents of files read during the build in progress, by path and blob id: a write
    /// of many objects of one file (a resync of a file of thousands of documents) reads and
    /// parses the file once to find those whose document already says the same, not once per
    /// object. Emptied when the build ends.
    values: Arc<Mutex<BTreeMap<String, ReadDocuments>>>,
    /// Where a field both sides changed is reported, once per override.
    overrides: Option<Overrides>,
    /// This backflow, as folders' owner files name it: a write claims an unclaimed folder and
    /// is refused in one another backflow holds. `None`: owner files are not looked at.
    owner: Option<FolderOwner>,
    /// Per owner file's blob id, what it says about this backflow: every write into a folder
    /// asks, and a resync of 100,000 objects would otherwise read the file 100,000 times.
    owner_files: Arc<Mutex<BTreeMap<String, Ownership>>>,
}

/// The value of the document `found` names, read from `tree` (`None`: it does not parse).
fn document_value(tree: &dyn TreeView, found: &DocRef) -> Result<Option<Value>, TreeError> {
    let bytes = tree.read(&found.path)?.unwrap_or_default();
    Ok(parse_file(&found.path, &bytes)
        .ok()
        .and_then(|file| file.docs.into_iter().nth(found.doc))
        .map(|doc| doc.value))
}

/// The update that takes the document `found` out of its file (the file goes with its last
/// document).
fn without_document(tree: &dyn TreeView, found: &DocRef) -> Result<PathUpdate, TreeError> {
    let bytes = tree.read(&found.path)?.unwrap_or_default();
    Ok(match remove_document(&found.path, &bytes, found.doc)? {
        Some(rest) => PathUpdate::write(found.path.to_string(), rest),
        None => PathUpdate::remove(found.path.to_string()),
    })
}

/// Where a sensitive object is written.
struct SensitiveFile {
    /// Its encrypted file.
    path: String,
    /// What that file holds now.
    previous: Option<Vec<u8>>,
    /// Its document in plain text, which the write removes (moving it to `path`).
    plaintext: Option<DocRef>,
}

/// The documents of one file as a build read them: the blob id they were read from, and
/// their values.
type ReadDocuments = (String, Arc<Vec<Value>>);

/// Where the planner reports a field both the live side and Git changed, where the live value
/// was kept over Git's (see [`merge_object`]).
pub trait MergeReport: Send + Sync {
    /// `object` of `folder` had `fields` changed on both sides; the live values were kept.
    fn overridden(&self, folder: &str, object: &ObjectKey, fields: &[String]);
}

/// A live change to plan: the object's key, sanitized value, identity, and the baseline of the
/// change (see [`Intent::baseline`]).
#[derive(Clone, Copy)]
struct LiveChange<'a> {
    key: &'a ObjectKey,
    object: &'a Value,
    identity: &'a Identity,
    baseline: Option<&'a ObjectJson>,
    /// Whether a document Git removed stays removed when the object reads as `baseline`
    /// ([`Baseline::keeps_git_removal`]).
    keeps_git_removal: bool,
}

impl LiveChange<'_> {
    /// Whether Git's removal of the object's document stands: the live object reads as the
    /// commit the live side held held it (nothing changed live since).
    fn git_removal_stands(&self) -> bool {
        self.keeps_git_removal
            && self
                .baseline
                .is_some_and(|before| sanitize(&before.value()) == *self.object)
    }
}

/// The report, and what it was told: a write is planned again on every replay, and an override
/// is reported once.
#[derive(Clone)]
struct Overrides {
    report: Arc<dyn MergeReport>,
    /// Per object, the blob id of the last override reported (its fields, both values).
    told: Arc<Mutex<BTreeMap<(String, ObjectKey), String>>>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overrides").finish_non_exhaustive()
    }
}

/// The documents of a file the planner wrote, and the blob id of the bytes they were taken from.
#[derive(Debug)]
struct KnownEntries {
    blob: String,
    entries: Arc<Vec<(Identity, DocRef)>>,
}

impl YamlPlanner {
    /// A planner that looks kinds up in `kinds` (shared with whoever fills it). It refuses
    /// sensitive objects until given [`YamlPlanner::with_encryption`].
    #[must_use]
    pub fn new(kinds: KindMap) -> Self {
        Self {
            kinds,
            crypto: None,
            placement: PlacementMap::default(),
            folders: Arc::default(),
            known: Arc::default(),
            values: Arc::default(),
            overrides: None,
            owner: None,
            owner_files: Arc::default(),
        }
    }

    /// Writes only folders that `owner` holds or nobody does, naming it in the owner file of
    /// each folder it writes first (see [`FolderOwner`]).
    #[must_use]
    pub fn with_owner(mut self, owner: FolderOwner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Reports to `report` each field both sides changed where the live value was kept.
    #[must_use]
    pub fn with_merge_report(mut self, report: Arc<dyn MergeReport>) -> Self {
        self.overrides = Some(Overrides {
            report,
            told: Arc::default(),
        });
        self
    }

    /// Places new objects by the path templates of each folder in `map` (shared with whoever
    /// fills it from `GitTarget.spec.placement`); folders without rules use the canonical layout.
    #[must_use]
    pub fn with_placement(mut self, map: PlacementMap) -> Self {
        self.placement = map;
        self
    }

    /// Encrypts sensitive objects of the folders in `map` (shared with whoever fills it), with
    /// `clock` for `lastmodified` and `rng` for data keys and IVs. `rng` must be seeded from a
    /// secure source in production (e.g. `StdRng::from_os_rng()`); tests may seed it fixed.
    #[must_use]
    pub fn with_encryption(
        mut self,
        map: EncryptionMap,
        clock: Arc<dyn Clock>,
        rng: StdRng,
    ) -> Self {
        self.crypto = Some(Crypto {
            map,
            clock,
            rng: Arc::new(Mutex::new(rng)),
        });
        self
    }

    /// The kind map this planner reads.
    #[must_use]
    pub fn kinds(&self) -> &KindMap {
        &self.kinds
    }

    fn present(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        key: &ObjectKey,
        object: &Value,
        baseline: Option<&Baseline>,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        // Intents carry sanitized objects already; sanitizing again is idempotent and keeps
        // bookkeeping out of Git whoever built the intent.
        let object = sanitize(object);
        let identity = Identity::of(&object).map_err(|reason| ManifestError::InvalidObject {
            object: key.to_string(),
            reason: format!("not a Kubernetes object: {reason}"),
        })?;
        if identity.name != key.name
            || (!identity.namespace.is_empty() && identity.namespace != key.namespace)
            || identity.group != key.resource.group
        {
            return Err(ManifestError::InvalidObject {
                object: key.to_string(),
                reason: format!("the object says it is {identity}"),
            }
            .into());
        }
        let sensitive = match &self.crypto {
            Some(c) => c.map.is_sensitive(target, &key.resource),
            None => is_sensitive(&key.resource),
        };
        let change = LiveChange {
            key,
            object: &object,
            identity: &identity,
            baseline: baseline.and_then(Baseline::value),
            keeps_git_removal: baseline.is_some_and(Baseline::keeps_git_removal),
        };
        if sensitive {
            return self.present_sensitive(tree, target, &change, index);
        }
        if let Some(updates) =
            self.present_in_layout(tree, index, target, key, &identity, &object)?
        {
            return Ok(updates);
        }
        let mut updates = Vec::new();
        if let Some(found) = index.get(&identity) {
            let Some(edited) = self.edit_in_place(tree, index, target, &change, found)? else {
                return Ok(Vec::new());
            };
            updates.push(edited);
        } else if change.git_removal_stands() {
            // Git removed the document of an object the live side holds as it was: Git's
            // removal (a push made while backflow was down) stands, as any field Git changed.
            return Ok(Vec::new());
        } else {
            let object = self.omit_defaults(object, None);
            let placed = self.place_new(tree, index, target, key, &object)?;
            if let Some(layout) = index.layout_of(&placed.path) {
                return crate::kustomized::create(tree, target, layout, &placed.path, &object);
            }
            if index.has_layouts()
                && let Some(listed) = crate::kustomized::list_new_file(tree, target, &placed.path)?
            {
                updates.push(listed);
            }
            updates.push(placed);
        }
        updates.extend(bootstrap::missing(tree, target)?);
        Ok(updates)
    }

    /// A live write of an object a kustomize layout of the folder builds, projected into the
    /// layout; refused when a layout does not build and the object is not a plain file's;
    /// `None` when no layout is concerned.
    fn present_in_layout(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        key: &ObjectKey,
        identity: &Identity,
        object: &Value,
    ) -> Result<Option<Vec<PathUpdate>>, TreeError> {
        if !index.has_layouts() {
            return Ok(None);
        }
        match crate::kustomized::building(tree, target, identity)? {
            crate::kustomized::Found::Built(built) => {
                let live = self.omit_defaults(object.clone(), Some(&built.object));
                crate::kustomized::project(&built, &key.to_string(), &live).map(Some)
            }
            crate::kustomized::Found::Unbuildable(layout, error)
                if index.get(identity).is_none() =>
            {
                Err(crate::kustomized::unbuildable(
                    &key.to_string(),
                    &layout,
                    &error,
                ))
            }
            _ => Ok(None),
        }
    }

    /// The edit of `found`, the document `change`'s object has in `target`, that the change
    /// makes (`None`: the document says so already).
    fn edit_in_place(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        change: &LiveChange<'_>,
        found: &DocRef,
    ) -> Result<Option<PathUpdate>, TreeError> {
        if found.encrypted {
            return Err(ManifestError::EncryptedDocument {
                path: found.path.to_string(),
                doc: found.doc,
            }
            .into());
        }
        let desired = |current: &Value| {
            let desired = match change.baseline {
                Some(before) => self.merged(
                    target,
                    change.key,
                    &sanitize(&before.value()),
                    change.object.clone(),
                    current,
                ),
                None => change.object.clone(),
            };
            self.omit_defaults(desired, Some(current))
        };
        let cached = self.document(tree, index, found)?;
        let known = cached.as_ref().map(|current| (desired(current), current));
        if let Some((desired, current)) = &known
            && desired == *current
        {
            return Ok(None);
        }
        let bytes = tree.read(&found.path)?.unwrap_or_default();
        let edited = match known {
            Some((desired, _)) => edit_parsed(&found.path, &bytes, found.doc, |_| desired)?,
            None => edit_parsed(&found.path, &bytes, found.doc, desired)?,
        };
        let Some(edited) = edited.filter(|e| e.bytes != bytes) else {
            return Ok(None);
        };
        if let Ok(entries) = entries_of(&found.path, &edited.parsed) {
            self.know(&found.path, &edited.bytes, Arc::new(entries));
        }
        Ok(Some(PathUpdate::write(
            found.path.to_string(),
            edited.bytes,
        )))
    }

    /// `object` without the defaults the API server filled in that Git's document (`kept`)
    /// does not hold: kube-apiserver's for built-in kinds, the CRD schema's for custom ones.
    fn omit_defaults(&self, object: Value, kept: Option<&Value>) -> Value {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        match api_version
            .zip(kind)
            .and_then(|(v, k)| self.kinds.schema_of(v, k))
        {
            Some(schema) => defaults::omit_with_schema(object, kept, &schema),
            None => defaults::omit(object, kept),
        }
    }

    /// A new document for an object the folder does not hold: at its placement (or layout)
    /// path, appended to a file already there, never in a file named like a SOPS file.
    fn place_new(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        key: &ObjectKey,
        object: &Value,
    ) -> Result<PathUpdate, TreeError> {
        let path = if let Some(placed) = self.placement.place(target, key, object, false)? {
            placed
        } else {
            self.placement.count_canonical();
            object_path(target, key)?
        };
        if is_sops_path(&path) {
            // A name like `x.sops` would make a plain file that sops treats as encrypted.
            return Err(ManifestError::EncryptedFileConflict {
                path,
                reason: format!(
                    "{key} would be written in plain text to a file named like a SOPS file; move it with spec.placement or rename the object"
                ),
            }
            .into());
        }
        if let Some(existing) = tree.read(&path)? {
            if let Some((_, at)) = index
                .iter()
                .find(|(_, at)| *at.path == *path && at.encrypted)
            {
                return Err(ManifestError::EncryptedDocument {
                    path: at.path.to_string(),
                    doc: at.doc,
                }
                .into());
            }
            return Ok(PathUpdate::write(path, append_document(&existing, object)));
        }
        let content = render(object).into_bytes();
        if let Ok(identity) = Identity::of(object) {
            self.know(&path, &content, rendered_entries(&path, identity));
        }
        Ok(PathUpdate::write(path, content))
    }

    /// A sensitive object: encrypted into its own SOPS file, or refused.
    fn present_sensitive(
        &self,
        tree: &dyn TreeView,
        target: &str,
        sensitive: &LiveChange<'_>,
        index: &FolderIndex,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        let LiveChange {
            key,
            object,
            identity,
            baseline,
            ..
        } = *sensitive;
        let unavailable = || ManifestError::EncryptionUnavailable {
            object: key.to_string(),
        };
        let crypto = self.crypto.as_ref().ok_or_else(unavailable)?;
        let encryptor = crypto.map.get(target).ok_or_else(unavailable)?;
        let SensitiveFile {
            path,
            previous,
            plaintext,
        } = self.sensitive_file(tree, target, key, object, identity, index)?;
        let previous_text = previous
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok());
        if previous.is_none() && plaintext.is_none() && sensitive.git_removal_stands() {
            // Git removed the file of an object the live side holds as it was: that stands.
            return Ok(Vec::new());
        }
        // A document Git holds in plain text is what Git holds: merged with, then moved.
        let plaintext_value = match &plaintext {
            Some(found) => document_value(tree, found)?,
            None => None,
        };
        // Which fields the file holds is readable without decrypting: SOPS encrypts values.
        let kept = previous
            .as_deref()
            .and_then(|b| parse_file(&path, b).ok())
            .and_then(|file| file.docs.into_iter().next())
            .map(|doc| doc.value);
        // A live change laid onto the file as Git holds it, where the file can be opened (a
        // file this process wrote, or one the folder's identities open); else written whole.
        let current = plaintext_value.or_else(|| previous_text.and_then(|t| encryptor.open(t)));
        let desired = match (baseline, current) {
            (Some(before), Some(current)) => self.merged(
                target,
                key,
                &sanitize(&before.value()),
                object.clone(),
                &current,
            ),
            _ => object.clone(),
        };
        let object = &self.omit_defaults(desired, kept.as_ref());
        let encrypted = crypto.encrypt(&encryptor, key, object, previous_text)?;
        let mut updates = Vec::new();
        if let Some(found) = plaintext.filter(|found| *found.path != *path) {
            tracing::warn!(object = %key, from = %found.path, to = %path, "a Secret Git held in plain text is moved to an encrypted file");
            updates.push(without_document(tree, &found)?);
        }
        if previous.as_deref() != Some(encrypted.as_bytes()) {
            updates.push(PathUpdate::write(path, encrypted));
        }
        updates.extend(sops_config_update(tree, target, &encryptor)?);
        if updates.is_empty() {
            return Ok(updates);
        }
        updates.extend(bootstrap::missing(tree, target)?);
        Ok(updates)
    }

    /// The file a sensitive object goes to and what it holds now: its own encrypted file,
    /// or a new `*.sops.yaml` file that does not exist yet. A document Git holds in plain text
    /// (somebody pushed it so) moves to the new file: the write removes it where it was.
    fn sensitive_file(
        &self,
        tree: &dyn TreeView,
        target: &str,
        key: &ObjectKey,
        object: &Value,
        identity: &Identity,
        index: &FolderIndex,
    ) -> Result<SensitiveFile, TreeError> {
        let plaintext = index
            .get(identity)
            .filter(|found| !found.encrypted)
            .cloned();
        if let Some(found) = index.get(identity).filter(|found| found.encrypted) {
            if index
                .iter()
                .any(|(other, at)| at.path == found.path && other != identity)
            {
                return Err(ManifestError::EncryptedFileConflict {
                    path: found.path.to_string(),
                    reason: format!(
                        "holds {identity} together with other documents; an encrypted object needs a file of its own, so move the others out"
                    ),
                }
                .into());
            }
            return Ok(SensitiveFile {
                path: found.path.to_string(),
                previous: tree.read(&found.path)?,
                plaintext: None,
            });
        }
        let path = match self.placement.place(target, key, object, true)? {
            Some(placed) if is_sops_path(&placed) => placed,
            Some(placed) => {
                return Err(ManifestError::EncryptedFileConflict {
                    path: placed,
                    reason: format!("{key} is encrypted, so its file must be named *.sops.yaml: end the placement template with {{sensitiveSuffix}}"),
                }
                .into());
            }
            None => {
                self.placement.count_canonical();
                sops_object_path(target, key)?
            }
        };
        // A plain-text file of this object alone, at the encrypted file's name: rewritten.
        let rewritten = plaintext
            .as_ref()
            .is_some_and(|found| *found.path == *path && index.documents_in(&path) == 1);
        if !rewritten && tree.read(&path)?.is_some() {
            return Err(ManifestError::EncryptedFileConflict {
                path,
                reason: format!(
                    "already exists and does not hold {identity}; an encrypted object is never appended to a file, so move that file"
                ),
            }
            .into());
        }
        Ok(SensitiveFile {
            path,
            previous: None,
            plaintext,
        })
    }

    fn absent(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        key: &ObjectKey,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        check_key(key)?;
        let found = if let Some(kind) = self.kinds.kind_of(&key.resource) {
            index
                .get(&Identity {
                    group: key.resource.group.clone(),
                    kind,
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                })
                .cloned()
        } else {
            // No kind known: only a document at the layout path with this group,
            // namespace and name can be this object.
            let path = object_path(target, key)?;
            let sops_path = sops_object_path(target, key)?;
            index
                .iter()
                .filter(|(id, at)| {
                    (*at.path == *path || *at.path == *sops_path)
                        && id.group == key.resource.group
                        && id.namespace == key.namespace
                        && id.name == key.name
                })
                .map(|(_, at)| at.clone())
                .next()
        };
        let Some(found) = found else {
            if index.has_layouts()
                && let Some(kind) = self.kinds.kind_of(&key.resource)
            {
                let identity = Identity {
                    group: key.resource.group.clone(),
                    kind,
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                };
                match crate::kustomized::building(tree, target, &identity)? {
                    crate::kustomized::Found::Built(built) => {
                        return crate::kustomized::delete(&built, &key.to_string());
                    }
                    crate::kustomized::Found::Unbuildable(layout, error) => {
                        return Err(crate::kustomized::unbuildable(
                            &key.to_string(),
                            &layout,
                            &error,
                        ));
                    }
                    crate::kustomized::Found::Nothing => {}
                }
            }
            return Ok(Vec::new());
        };
        Ok(vec![without_document(tree, &found)?])
    }

    fn sweep(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        scope: &SweepScope,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        let Some(kind) = self.kinds.kind_of(&scope.resource) else {
            return Err(ManifestError::InvalidObject {
                object: scope.resource.to_string(),
                reason: "its kind is unknown, so the sweep cannot tell its documents apart; nothing was removed".into(),
            }
            .into());
        };
        // Documents to remove, per file, highest index first so earlier indices stay valid.
        let mut doomed: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (id, at) in index.iter() {
            let in_scope = id.group == scope.resource.group
                && id.kind == kind
                && scope
                    .namespace
                    .as_ref()
                    .is_none_or(|ns| *ns == id.namespace);
            if in_scope && !scope.keeps(&id.namespace, &id.name) {
                doomed.entry(at.path.to_string()).or_default().push(at.doc);
            }
        }
        let mut updates = Vec::new();
        for (path, mut docs) in doomed {
            docs.sort_unstable_by(|a, b| b.cmp(a));
            let mut bytes = Some(tree.read(&path)?.unwrap_or_default());
            for doc in docs {
                if let Some(current) = bytes.take() {
                    bytes = remove_document(&path, &current, doc)?;
                }
            }
            updates.push(match bytes {
                Some(rest) => PathUpdate::write(path, rest),
                None => PathUpdate::remove(path),
            });
        }
        Ok(updates)
    }
}

impl YamlPlanner {
    /// The bootstrap files of a folder that holds no file yet (with encryption, its
    /// `.sops.yaml` too); nothing for a folder that exists, so a README a person removed stays
    /// removed.
    fn bootstrap(&self, tree: &dyn TreeView, target: &str) -> Result<Vec<PathUpdate>, TreeError> {
        if !tree.list(target)?.is_empty() {
            return Ok(Vec::new());
        }
        let mut updates = bootstrap::missing(tree, target)?;
        if let Some(encryptor) = self.crypto.as_ref().and_then(|c| c.map.get(target)) {
            updates.extend(sops_config_update(tree, target, &encryptor)?);
        }
        Ok(updates)
    }

    /// Plans `intent` on `tree`, whose folder `target` `index` describes; refused when it would
    /// change a blocked file (the write waits until the file is fixed, and changes nothing).
    fn plan_with(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        intent: &Intent,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        let mut updates = self.plan_intent(tree, index, target, intent)?;
        if let Some(why) = updates.iter().find_map(|u| index.blocked(&u.path)) {
            return Err(why.clone().into());
        }
        if let (Some(owner), false) = (&self.owner, updates.is_empty()) {
            let path = FolderOwner::path(target);
            match self.ownership(tree, owner, &path)? {
                Ownership::Mine => {}
                Ownership::Unclaimed => updates.push(PathUpdate::write(path, owner.render())),
                Ownership::Other(holder) => {
                    return Err(FolderOwner::refusal(target, &holder).into());
                }
            }
        }
        Ok(updates)
    }

    /// What the owner file at `path` says about `owner`, read once per blob.
    fn ownership(
        &self,
        tree: &dyn TreeView,
        owner: &FolderOwner,
        path: &str,
    ) -> Result<Ownership, TreeError> {
        let Some(id) = tree.file_id(path)? else {
            return Ok(Ownership::Unclaimed);
        };
        let known = self
            .owner_files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&id)
            .cloned();
        if let Some(known) = known {
            return Ok(known);
        }
        let judged = owner.judge(tree.read(path)?.as_deref());
        self.owner_files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, judged.clone());
        Ok(judged)
    }

    fn plan_intent(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        target: &str,
        intent: &Intent,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        match &intent.state {
            ObjectState::Present(object) => self.present(
                tree,
                index,
                target,
                &intent.key,
                &object.value(),
                intent.baseline.as_ref(),
            ),
            ObjectState::Absent => self.absent(tree, index, target, &intent.key),
            ObjectState::Sweep(scope) => self.sweep(tree, index, scope),
            ObjectState::Bootstrap => self.bootstrap(tree, target),
        }
    }
}

impl YamlPlanner {
    /// The value of the document `found` (of `index`, of `tree`) from the build's cache; files
    /// of one document are not cached (their edit parses them anyway).
    fn document(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        found: &DocRef,
    ) -> Result<Option<Value>, TreeError> {
        let Some(blob) = index.blob_of(&found.path).filter(|b| !b.is_empty()) else {
            return Ok(None);
        };
        if found.doc == 0 && index.documents_in(&found.path) <= 1 {
            return Ok(None);
        }
        let mut values = self
            .values
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((cached, docs)) = values.get(found.path.as_ref())
            && cached == blob
        {
            return Ok(docs.get(found.doc).cloned());
        }
        let Some(bytes) = tree.read(&found.path)? else {
            return Ok(None);
        };
        let Ok(file) = parse_file(&found.path, &bytes) else {
            return Ok(None);
        };
        let docs: Arc<Vec<Value>> = Arc::new(file.docs.into_iter().map(|d| d.value).collect());
        let value = docs.get(found.doc).cloned();
        values.insert(found.path.to_string(), (blob.to_string(), docs));
        Ok(value)
    }

    /// Ends a build: the documents it read are let go.
    fn forget_documents(&self) {
        self.values
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// What a live change of `before` into `ours` makes of Git's document `current`: the
    /// fields the change did not touch keep Git's values; a field both changed keeps the live
    /// side's, and is logged and reported once.
    fn merged(
        &self,
        folder: &str,
        key: &ObjectKey,
        before: &Value,
        ours: Value,
        current: &Value,
    ) -> Value {
        let merged = merge_object(before, &ours, current);
        if merged.overrides.is_empty() {
            return merged.value;
        }
        let Some(overrides) = &self.overrides else {
            tracing::info!(object = %key, fields = ?merged.overrides, "changed both live and in Git: the live value is kept over Git's");
            return merged.value;
        };
        let print = blob_id(format!("{:?}{ours}{current}", merged.overrides).as_bytes());
        let slot = (folder.to_string(), key.clone());
        let mut told = overrides
            .told
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if told.get(&slot) != Some(&print) {
            tracing::info!(folder, object = %key, fields = ?merged.overrides, "changed both live and in Git: the live value is kept over Git's");
            overrides.report.overridden(folder, key, &merged.overrides);
            told.insert(slot, print);
        }
        merged.value
    }
}

/// A folder's index while a write is planned: built once, then refreshed per changed file.
enum CachedIndex {
    Ready(WriteIndex),
    /// The folder is refused (the refusal applies to every intent of the write).
    Refused(ManifestError),
}

fn in_folder(path: &str, target: &str) -> bool {
    target.is_empty()
        || path
            .strip_prefix(target)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl YamlPlanner {
    /// Notes the documents of a file this planner is about to write, for the index's refresh.
    fn know(&self, path: &str, bytes: &[u8], entries: Arc<Vec<(Identity, DocRef)>>) {
        let blob = blob_id(bytes);
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(path.to_string(), KnownEntries { blob, entries });
    }

    /// The file `update` writes, if this planner knows its documents (and nobody wrote other
    /// content at its path since).
    fn take_known<'u>(&self, update: &'u PathUpdate) -> Option<KnownFile<'u>> {
        let known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&update.path)?;
        let bytes = update.content.as_deref()?;
        let blob = blob_id(bytes);
        (blob == known.blob).then_some(KnownFile {
            path: &update.path,
            bytes,
            blob,
            entries: known.entries,
        })
    }

    /// What this planner keeps of each folder.
    fn folders(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, FolderMemo>> {
        self.folders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The index of `target` in `tree`, re-reading only files that changed since the last write.
    fn take_index(&self, tree: &dyn TreeView, target: &str) -> Result<WriteIndex, IndexError> {
        self.folders()
            .entry(target.to_string())
            .or_default()
            .take_index(tree, target)
    }

    /// Keeps a write's index of `target` for the next write.
    fn keep_index(&self, target: &str, index: WriteIndex) {
        self.folders()
            .entry(target.to_string())
            .or_default()
            .keep(index);
    }
}

impl YamlPlanner {
    /// What `index` (of `tree`) holds of `intent`'s object, or of its sweep's scope.
    fn held_one(
        &self,
        tree: &dyn TreeView,
        index: &FolderIndex,
        intent: &Intent,
    ) -> Result<Held, TreeError> {
        let in_scope = |resource: &backflow_api::GroupResource, id: &Identity| {
            Some(id.group == resource.group && id.kind == self.kinds.kind_of(resource)?)
        };
        match &intent.state {
            ObjectState::Present(_) | ObjectState::Absent => {
                let Some(kind) = self.kinds.kind_of(&intent.key.resource) else {
                    return Ok(Held::Object(None));
                };
                let identity = Identity {
                    group: intent.key.resource.group.clone(),
                    kind,
                    namespace: intent.key.namespace.clone(),
                    name: intent.key.name.clone(),
                };
                let Some(found) = index.get(&identity) else {
                    return Ok(Held::Object(None));
                };
                if found.encrypted {
                    let bytes = tree.read(&found.path)?.unwrap_or_default();
                    let opened = std::str::from_utf8(&bytes).ok().and_then(|text| {
                        let target = normalize_target(&intent.target).ok()?;
                        self.crypto.as_ref()?.map.get(&target)?.open(text)
                    });
                    return Ok(Held::Object(opened));
                }
                // A file of many documents is read once per build, not once per object.
                let value = match self.document(tree, index, found)? {
                    Some(value) => Some(value),
                    None => document_value(tree, found)?,
                };
                Ok(Held::Object(value))
            }
            ObjectState::Sweep(scope) => Ok(Held::Objects(
                index
                    .iter()
                    .filter(|(id, _)| in_scope(&scope.resource, id) == Some(true))
                    .filter(|(id, _)| {
                        scope
                            .namespace
                            .as_ref()
                            .is_none_or(|ns| *ns == id.namespace)
                    })
                    .map(|(id, _)| (id.namespace.clone(), id.name.clone()))
                    .collect(),
            )),
            ObjectState::Bootstrap => Ok(Held::Nothing),
        }
    }
}

impl Planner for YamlPlanner {
    fn held(&self, tree: &dyn TreeView, intents: &[&Intent]) -> Result<Vec<Held>, TreeError> {
        // Built afresh, not from the write's cached index: `tree` is an older commit.
        let mut indexes: BTreeMap<String, Option<FolderIndex>> = BTreeMap::new();
        let mut out = Vec::with_capacity(intents.len());
        for intent in intents {
            let Ok(target) = normalize_target(&intent.target) else {
                out.push(Held::Nothing);
                continue;
            };
            if !indexes.contains_key(&target) {
                let index = match FolderIndex::build(tree, &target) {
                    Ok(index) => Some(index),
                    // A folder the commit held in a shape backflow refuses: nothing known.
                    Err(IndexError::Refused(_)) => None,
                    Err(e @ IndexError::Repo(_)) => return Err(e.into()),
                };
                indexes.insert(target.clone(), index);
            }
            out.push(match indexes.get(&target).and_then(Option::as_ref) {
                Some(index) => self.held_one(tree, index, intent)?,
                None => Held::Nothing,
            });
        }
        Ok(out)
    }

    fn plan(&self, tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError> {
        let target = normalize_target(&intent.target)?;
        let index = self.take_index(tree, &target)?;
        let planned = self.plan_with(tree, index.index(), &target, intent);
        self.forget_documents();
        self.keep_index(&target, index);
        // Nothing refreshes an index after a single plan: forget what was written.
        let mut known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for u in planned.iter().flatten() {
            known.remove(&u.path);
        }
        drop(known);
        planned
    }

    fn plan_all(
        &self,
        tree: &dyn TreeView,
        intents: &[&Intent],
    ) -> Vec<Result<Vec<PathUpdate>, TreeError>> {
        let mut view = LayeredView::new(tree);
        let mut indexes: BTreeMap<String, CachedIndex> = BTreeMap::new();
        for intent in intents {
            let target = match normalize_target(&intent.target) {
                Ok(t) => t,
                Err(e) => {
                    view.record(Err(e.into()));
                    continue;
                }
            };
            if !indexes.contains_key(&target) {
                match self.take_index(&view, &target) {
                    Ok(index) => indexes.insert(target.clone(), CachedIndex::Ready(index)),
                    Err(IndexError::Refused(refusal)) => {
                        indexes.insert(target.clone(), CachedIndex::Refused(refusal))
                    }
                    Err(e @ IndexError::Repo(_)) => {
                        view.record(Err(e.into()));
                        continue;
                    }
                };
            }
            let planned = match indexes.get(&target) {
                Some(CachedIndex::Ready(index)) => {
                    self.plan_with(&view, index.index(), &target, intent)
                }
                Some(CachedIndex::Refused(refusal)) => Err(refusal.clone().into()),
                None => Err(ManifestError::InvalidObject {
                    object: intent.key.to_string(),
                    reason: "the folder could not be indexed".into(),
                }
                .into()),
            };
            for u in view.record(planned) {
                let mut known = self.take_known(u);
                for (folder, cached) in &mut indexes {
                    if !in_folder(&u.path, folder) {
                        continue;
                    }
                    let refreshed = match cached {
                        CachedIndex::Ready(index) => {
                            let mut folders = self.folders();
                            let cache = &mut folders.entry(folder.clone()).or_default().parsed;
                            index.refresh(&u.path, u.content.as_deref(), known.take(), cache)
                        }
                        CachedIndex::Refused(_) => Ok(()),
                    };
                    if let Err(e) = refreshed {
                        *cached = match e {
                            IndexError::Refused(refusal) => CachedIndex::Refused(refusal),
                            // A read error cannot happen here: the content is in hand.
                            IndexError::Repo(_) => {
                                CachedIndex::Refused(ManifestError::InvalidObject {
                                    object: u.path.clone(),
                                    reason: "the folder could not be re-indexed".into(),
                                })
                            }
                        };
                    }
                }
            }
        }
        for (folder, cached) in indexes {
            if let CachedIndex::Ready(index) = cached {
                self.keep_index(&folder, index);
            }
        }
        self.forget_documents();
        view.into_planned()
    }
}

/// The folder's `.sops.yaml` update for `encryptor`'s recipients: written when missing or when
/// backflow's own (marked) file lists other recipients; a person's own file is theirs to keep.
fn sops_config_update(
    tree: &dyn TreeView,
    target: &str,
    encryptor: &backflow_sops::Encryptor,
) -> Result<Option<PathUpdate>, TreeError> {
    let recipients: Vec<String> = encryptor
        .recipients()
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    let config_path = join(target, ".sops.yaml");
    let config = sops_config(&recipients);
    Ok(match tree.read(&config_path)? {
        None => Some(PathUpdate::write(config_path, config)),
        Some(current)
            if current.starts_with(SOPS_CONFIG_MARKER.as_bytes())
                && current != config.as_bytes() =>
        {
            Some(PathUpdate::write(config_path, config))
        }
        Some(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    use backflow_api::{GroupResource, ManualClock};
    use backflow_branch::IoFailure;
    use backflow_sops::{Encryptor, decrypt_document, generate_identity, parse_identities};
    use rand::SeedableRng;
    use serde_json::json;

    use super::*;

    /// A tree in memory, updated by applying the planner's path updates.
    #[derive(Default)]
    struct MemTree(BTreeMap<String, Vec<u8>>);

    impl TreeView for MemTree {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
            Ok(self.0.get(path).cloned())
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            Ok(self
                .0
                .keys()
                .filter(|p| p.starts_with(&prefix))
                .cloned()
                .collect())
        }
    }

    impl MemTree {
        fn apply(&mut self, updates: Vec<PathUpdate>) {
            for u in updates {
                match u.content {
                    Some(c) => self.0.insert(u.path, c),
                    None => self.0.remove(&u.path),
                };
            }
        }
        fn text(&self, path: &str) -> String {
            String::from_utf8(self.0.get(path).cloned().unwrap_or_default()).expect("utf-8")
        }
    }

    struct Setup {
        planner: YamlPlanner,
        map: EncryptionMap,
        clock: Arc<ManualClock>,
        secret_key: String,
        recipient: String,
    }

    fn setup() -> Setup {
        let mut rng = StdRng::seed_from_u64(1);
        let (secret_key, recipient) = generate_identity(&mut rng);
        let kinds = KindMap::new();
        kinds.insert(GroupResource::new("", "secrets"), "Secret");
        kinds.insert(GroupResource::new("", "configmaps"), "ConfigMap");
        let map = EncryptionMap::new();
        let clock = Arc::new(ManualClock::new(
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ));
        let planner = YamlPlanner::new(kinds).with_encryption(
            map.clone(),
            clock.clone(),
            StdRng::seed_from_u64(2),
        );
        Setup {
            planner,
            map,
            clock,
            secret_key: secret_key.to_string(),
            recipient,
        }
    }

    fn secret_key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "secrets"), "web", name)
    }

    fn secret(name: &str, password: &str, label: &str) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "web", "labels": {"tier": label}},
            "type": "Opaque",
            "data": {"password": password},
        })
    }

    fn put(
        s: &Setup,
        tree: &MemTree,
        name: &str,
        password: &str,
        label: &str,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        s.planner.plan(
            tree,
            &Intent::put("live", secret_key(name), secret(name, password, label)),
        )
    }

    #[test]
    fn a_folder_that_holds_nothing_is_bootstrapped_and_one_that_exists_is_left_alone() {
        let s = setup();
        let mut tree = MemTree::default();
        tree.apply(
            s.planner
                .plan(&tree, &Intent::bootstrap("apps"))
                .expect("planned"),
        );
        let files: Vec<&String> = tree.0.keys().collect();
        assert_eq!(files, ["apps/.gittargetignore", "apps/README.md"]);
        // With encryption the folder gets its .sops.yaml too.
        s.map.set(
            "vault",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );
        tree.apply(
            s.planner
                .plan(&tree, &Intent::bootstrap("vault"))
                .expect("planned"),
        );
        assert!(tree.text("vault/.sops.yaml").contains(&s.recipient));
        // A person removed the README of a folder that exists: it stays removed.
        tree.0.remove("apps/README.md");
        let again = s
            .planner
            .plan(&tree, &Intent::bootstrap("apps"))
            .expect("planned");
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn secrets_without_encryption_are_refused() {
        let s = setup();
        let err = put(&s, &MemTree::default(), "db", "aHVudGVy", "a").expect_err("refused");
        assert!(err.to_string().contains("spec.encryption"), "{err}");
        let plain = YamlPlanner::new(KindMap::new());
        let err = plain
            .plan(
                &MemTree::default(),
                &Intent::put("live", secret_key("db"), secret("db", "aHVudGVy", "a")),
            )
            .expect_err("refused");
        assert!(err.to_string().contains("never in plain text"), "{err}");
    }

    #[test]
    fn secrets_are_encrypted_into_their_own_file_and_replanning_is_stable() {
        let s = setup();
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );
        let mut tree = MemTree::default();
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"));
        let path = "live/web/secrets/db.sops.yaml";
        let file = tree.text(path);
        assert!(!file.contains("aHVudGVy"), "{file}");
        assert!(file.contains("ENC[AES256_GCM"), "{file}");
        assert!(file.contains("name: db"), "metadata stays in clear: {file}");
        let config = tree.text("live/.sops.yaml");
        assert!(
            config.contains(&s.recipient) && config.contains("encrypted_regex"),
            "{config}"
        );
        assert!(tree.0.contains_key("live/README.md"));
        let ids = parse_identities(&s.secret_key).expect("identity");
        // A new file leaves out what the API server fills in (`type: Opaque`).
        let mut written = secret("db", "aHVudGVy", "a");
        written.as_object_mut().map(|o| o.remove("type"));
        assert_eq!(decrypt_document(&file, &ids).expect("decrypts"), written);

        // Unchanged: nothing to write, even later.
        s.clock.advance(Duration::from_secs(60));
        assert_eq!(
            put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"),
            vec![]
        );

        // A label change keeps every data ciphertext.
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "b").expect("planned"));
        let relabeled = tree.text(path);
        let enc_lines = |t: &str| {
            t.lines()
                .filter(|l| l.contains("password: ENC["))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(enc_lines(&file), enc_lines(&relabeled));
        assert_ne!(file, relabeled);

        // A planner built after a restart (no key in memory) with the identity is stable too.
        let restarted = setup();
        restarted.map.set(
            "live",
            Arc::new(
                Encryptor::new([&s.recipient])
                    .expect("recipient")
                    .with_identities(ids.clone()),
            ),
        );
        assert_eq!(
            put(&restarted, &tree, "db", "aHVudGVy", "b").expect("planned"),
            vec![]
        );

        // Deletes remove the file.
        let updates = s
            .planner
            .plan(&tree, &Intent::delete("live", secret_key("db")))
            .expect("planned");
        assert_eq!(updates, vec![PathUpdate::remove(path)]);
    }

    /// A type made sensitive by configuration keeps its secrets outside `data`: everything but
    /// the identity is encrypted, nested keys named like identity fields included.
    #[test]
    fn other_sensitive_types_encrypt_everything_but_their_identity() {
        let s = setup();
        let creds = GroupResource::new("example.com", "credentials");
        s.planner.kinds.insert(creds.clone(), "Credential");
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );
        s.map.set_sensitive("live", vec![creds.clone()]);
        let object = json!({
            "apiVersion": "example.com/v1",
            "kind": "Credential",
            "metadata": {"name": "registry", "namespace": "web"},
            "spec": {
                "password": "pw-spec-7731",
                "source": {"kind": "kind-nested-4410", "apiVersion": "api-nested-9921"},
                "template": {"metadata": {"annotations": {"token": "tok-nested-3318"}}},
            },
            "extra": ["list-item-6620"],
        });
        let key = ObjectKey::new(creds, "web", "registry");
        let mut tree = MemTree::default();
        tree.apply(
            s.planner
                .plan(&tree, &Intent::put("live", key.clone(), object.clone()))
                .expect("planned"),
        );
        let file = tree.text("live/web/example.com/credentials/registry.sops.yaml");
        for plain in [
            "pw-spec-7731",
            "kind-nested-4410",
            "api-nested-9921",
            "tok-nested-3318",
            "list-item-6620",
        ] {
            assert!(!file.contains(plain), "{plain} in clear:\n{file}");
        }
        assert!(file.contains("name: registry"), "metadata in clear: {file}");
        assert!(
            file.contains("encrypted_regex: \"^(extra|spec)$\""),
            "{file}"
        );
        let ids = parse_identities(&s.secret_key).expect("identity");
        assert_eq!(decrypt_document(&file, &ids).expect("decrypts"), object);
        assert_eq!(
            s.planner
                .plan(&tree, &Intent::put("live", key, object))
                .expect("planned"),
            vec![],
            "unchanged: nothing to write"
        );
    }

    #[test]
    fn sops_config_follows_recipients_but_not_a_persons_own() {
        let s = setup();
        let mut rng = StdRng::seed_from_u64(9);
        let (_, other) = generate_identity(&mut rng);
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );
        let mut tree = MemTree::default();
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"));
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient, &other]).expect("recipients")),
        );
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"));
        assert!(tree.text("live/.sops.yaml").contains(&other));
        assert!(tree.text("live/web/secrets/db.sops.yaml").contains(&other));

        tree.0
            .insert("live/.sops.yaml".into(), b"creation_rules: []\n".to_vec());
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"));
        assert_eq!(tree.text("live/.sops.yaml"), "creation_rules: []\n");
    }

    #[test]
    fn plaintext_and_shared_files_are_refused() {
        let s = setup();
        s.map.set(
            "live",
            Arc::new(Encryptor::new([&s.recipient]).expect("recipient")),
        );

        // A Secret Git holds in plain text (pushed so) moves to its encrypted file with its
        // next write: merged with what Git held, the plain text removed.
        let mut tree = MemTree::default();
        tree.0.insert(
            "live/web/secrets/db.yaml".into(),
            render(&secret("db", "aHVudGVy", "a")).into_bytes(),
        );
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "b").expect("planned"));
        assert!(
            !tree.0.contains_key("live/web/secrets/db.yaml"),
            "the plain text is gone"
        );
        let sealed = tree.text("live/web/secrets/db.sops.yaml");
        assert!(!sealed.contains("aHVudGVy"), "{sealed}");
        let ids = parse_identities(&s.secret_key).expect("identity");
        let opened = decrypt_document(&sealed, &ids).expect("decrypts");
        assert_eq!(opened["data"]["password"], "aHVudGVy", "{opened:#}");
        // In a file with other documents, only its document goes.
        let mut tree = MemTree::default();
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "web"}});
        tree.0.insert(
            "live/web/bundle.yaml".into(),
            format!(
                "{}---\n{}",
                render(&other),
                render(&secret("db", "aHVudGVy", "a"))
            )
            .into_bytes(),
        );
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "b").expect("planned"));
        assert_eq!(tree.text("live/web/bundle.yaml"), render(&other));
        assert!(tree.0.contains_key("live/web/secrets/db.sops.yaml"));

        // A secret is never appended to an existing file.
        let mut tree = MemTree::default();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "web"}});
        tree.0.insert(
            "live/web/secrets/db.sops.yaml".into(),
            render(&cm).into_bytes(),
        );
        let err = put(&s, &tree, "db", "aHVudGVy", "a").expect_err("refused");
        assert!(err.to_string().contains("never appended"), "{err}");

        // Plain text is never routed at an encrypted file.
        let mut tree = MemTree::default();
        tree.apply(put(&s, &tree, "db", "aHVudGVy", "a").expect("planned"));
        let file = tree.text("live/web/secrets/db.sops.yaml");
        tree.0
            .insert("live/web/configmaps/db.yaml".into(), file.into_bytes());
        tree.0.remove("live/web/secrets/db.sops.yaml");
        let cm_key = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "db");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db", "namespace": "web"}});
        let err = s
            .planner
            .plan(&tree, &Intent::put("live", cm_key, cm))
            .expect_err("refused");
        assert!(err.to_string().contains("SOPS-encrypted"), "{err}");

        // Nor at a plain file named like a SOPS file.
        let tree = MemTree::default();
        let key = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "x.sops");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x.sops", "namespace": "web"}});
        let err = s
            .planner
            .plan(&tree, &Intent::put("live", key, cm))
            .expect_err("refused");
        assert!(err.to_string().contains("SOPS file"), "{err}");
    }

    fn cm_key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), ns, name)
    }

    /// A planner that knows `ConfigMap`s only.
    fn configmap_planner() -> YamlPlanner {
        let kinds = KindMap::new();
        kinds.insert(GroupResource::new("", "configmaps"), "ConfigMap");
        YamlPlanner::new(kinds)
    }

    fn cm(ns: &str, name: &str, v: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"v": v}})
    }

    fn deployment_key() -> ObjectKey {
        ObjectKey::new(GroupResource::new("apps", "deployments"), "web", "api")
    }

    /// A Deployment as a server that defaults stores it, with `replicas`.
    fn live_deployment(replicas: u32) -> Value {
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "api"}},
                "template": {"metadata": {"labels": {"app": "api"}},
                    "spec": {"containers": [{"name": "api", "image": "api:1"}]}}},
        });
        defaults::fill(&mut d);
        d
    }

    /// The first write of a folder names its writer in the owner file; another backflow's
    /// writes are refused, by one intent or many, until the file is deleted.
    #[test]
    fn a_folder_another_backflow_holds_is_not_written() {
        let alpha = FolderOwner {
            instance: "alpha-uid".into(),
            host: "alpha".into(),
        };
        let beta = FolderOwner {
            instance: "beta-uid".into(),
            host: "beta".into(),
        };
        let first = configmap_planner().with_owner(alpha.clone());
        let second = configmap_planner().with_owner(beta.clone());
        let mut tree = MemTree::default();
        tree.apply(
            first
                .plan(
                    &tree,
                    &Intent::put("live", cm_key("web", "a"), cm("web", "a", "1")),
                )
                .expect("planned"),
        );
        assert_eq!(tree.text("live/.backflow-owner"), alpha.render());
        let again = first
            .plan(
                &tree,
                &Intent::put("live", cm_key("web", "a"), cm("web", "a", "2")),
            )
            .expect("planned");
        assert_eq!(again.len(), 1, "the owner file is not written again");

        let intents = [
            Intent::put("live", cm_key("web", "b"), cm("web", "b", "1")),
            Intent::put("live", cm_key("web", "a"), cm("web", "a", "3")),
        ];
        let refs: Vec<&Intent> = intents.iter().collect();
        for planned in second.plan_all(&tree, &refs) {
            let err = planned.expect_err("refused");
            assert!(err.to_string().contains("alpha-uid"), "{err}");
        }
        assert!(tree.text("live/web/configmaps/b.yaml").is_empty());
        // Another folder is the second one's to take.
        let other = second
            .plan(
                &tree,
                &Intent::put("team", cm_key("web", "b"), cm("web", "b", "1")),
            )
            .expect("planned");
        assert!(other.iter().any(|u| u.path == "team/.backflow-owner"));

        // A person hands the folder over by deleting the file.
        tree.0.remove("live/.backflow-owner");
        let results = second.plan_all(&tree, &refs);
        let mut written = Vec::new();
        for planned in results {
            written.extend(planned.expect("planned"));
        }
        let claims = written
            .iter()
            .filter(|u| u.path == "live/.backflow-owner")
            .count();
        assert_eq!(claims, 1, "claimed once in one build");
        tree.apply(written);
        assert_eq!(tree.text("live/.backflow-owner"), beta.render());
        assert!(tree.text("live/web/configmaps/a.yaml").contains('3'));
    }

    #[test]
    fn git_gets_no_default_it_did_not_hold_and_keeps_those_it_did() {
        let planner = YamlPlanner::new(KindMap::new());
        let mut tree = MemTree::default();
        let plan = |tree: &MemTree, object: Value| {
            planner
                .plan(tree, &Intent::put("live", deployment_key(), object))
                .expect("planned")
        };
        tree.apply(plan(&tree, live_deployment(1)));
        let path = "live/web/apps/deployments/api.yaml";
        let text = tree.text(path);
        assert!(text.contains("image: api:1"), "{:?}", tree.0.keys());
        for default in [
            "replicas",
            "progressDeadlineSeconds",
            "strategy",
            "dnsPolicy",
            "imagePullPolicy",
        ] {
            assert!(!text.contains(default), "{default} in a new file:\n{text}");
        }
        assert!(
            plan(&tree, live_deployment(1)).is_empty(),
            "nothing to write"
        );

        // A person writes a default into the file: it stays while the live value matches it.
        let held = text.replace("  selector:", "  revisionHistoryLimit: 10\n  selector:");
        tree.0.insert(path.into(), held.clone().into_bytes());
        assert!(plan(&tree, live_deployment(1)).is_empty(), "{held}");

        // A value that is not the default lands; the held default is still there.
        tree.apply(plan(&tree, live_deployment(3)));
        let text = tree.text(path);
        assert!(text.contains("replicas: 3"), "{text}");
        assert!(text.contains("revisionHistoryLimit: 10"), "{text}");
        assert!(!text.contains("progressDeadlineSeconds"), "{text}");
    }

    /// Files a write creates are kept in the parse cache under their blob id: the next write's
    /// index finds them there.
    #[test]
    fn planned_files_are_kept_in_the_parse_cache() {
        let planner = configmap_planner();
        let mut tree = MemTree::default();
        let intents = [
            Intent::put("live", cm_key("default", "a"), cm("default", "a", "1")),
            Intent::put("live", cm_key("default", "b"), cm("default", "b", "2")),
        ];
        let refs: Vec<&Intent> = intents.iter().collect();
        for planned in planner.plan_all(&tree, &refs) {
            tree.apply(planned.expect("planned"));
        }
        let folders = planner.folders();
        let cache = &folders.get("live").expect("a cache for the folder").parsed;
        for name in ["a", "b"] {
            let path = format!("live/default/configmaps/{name}.yaml");
            let (id, entries) = cache.get(&path).expect("cached");
            assert_eq!(*id, backflow_branch::blob_id(tree.text(&path).as_bytes()));
            assert_eq!(entries.as_ref().expect("parsed").len(), 1);
        }
    }

    /// An edited file is parsed twice (as it was, and as edited to check that it reads back),
    /// and the index takes that second parse rather than a third: the next edit of the folder,
    /// in the same write or the next one, parses nothing else.
    #[test]
    fn an_edited_file_is_not_parsed_again_to_index_it() {
        let planner = configmap_planner();
        let mut tree = MemTree::default();
        let put = |name: &str, value: &str| {
            Intent::put("live", cm_key("default", name), cm("default", name, value))
        };
        let created = [put("a", "1"), put("b", "1")];
        for planned in planner.plan_all(&tree, &created.iter().collect::<Vec<_>>()) {
            tree.apply(planned.expect("planned"));
        }
        let parses = |tree: &mut MemTree, intents: &[Intent]| {
            let before = crate::document::PARSES.with(std::cell::Cell::get);
            for planned in planner.plan_all(&*tree, &intents.iter().collect::<Vec<_>>()) {
                tree.apply(planned.expect("planned"));
            }
            crate::document::PARSES.with(std::cell::Cell::get) - before
        };
        // a's and b's files were rendered, so indexing them parsed nothing.
        assert_eq!(parses(&mut tree, &[put("a", "2"), put("b", "2")]), 4);
        assert_eq!(parses(&mut tree, &[put("a", "3")]), 2);
        assert!(
            tree.text("live/default/configmaps/a.yaml")
                .contains("v: \"3\"")
        );
        // What the index holds is what a fresh parse of the folder finds.
        let cached = planner.take_index(&tree, "live").expect("indexed");
        let fresh = FolderIndex::build(&tree, "live").expect("indexed");
        let all = |i: &FolderIndex| {
            i.iter()
                .map(|(id, at)| (id.clone(), at.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(all(cached.index()), all(&fresh));
    }

    /// A resync of every object of a file of many documents, none of them changed, parses the
    /// file once: parsed per object, a restart with one file of 2,000 documents took minutes.
    #[test]
    fn a_resync_of_one_large_file_parses_it_once() {
        let planner = configmap_planner();
        let mut tree = MemTree::default();
        let mut text = String::new();
        for i in 0..300 {
            text.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n  namespace: default\ndata:\n  v: \"{i}\"\n"
            ));
        }
        tree.0
            .insert("live/default/bundle.yaml".into(), text.clone().into_bytes());
        let intents: Vec<Intent> = (0..300)
            .map(|i| {
                let name = format!("c{i}");
                Intent::put(
                    "live",
                    cm_key("default", &name),
                    cm("default", &name, &i.to_string()),
                )
            })
            .collect();
        let before = crate::document::PARSES.with(std::cell::Cell::get);
        for planned in planner.plan_all(&tree, &intents.iter().collect::<Vec<_>>()) {
            assert_eq!(planned.expect("planned"), Vec::new(), "nothing changed");
        }
        let parses = crate::document::PARSES.with(std::cell::Cell::get) - before;
        assert!(parses <= 2, "{parses} parses");
        // One object changed among them: written, the rest still read from the first parse.
        let mut changed = intents.clone();
        changed[7] = Intent::put(
            "live",
            cm_key("default", "c7"),
            cm("default", "c7", "seven"),
        );
        for planned in planner.plan_all(&tree, &changed.iter().collect::<Vec<_>>()) {
            tree.apply(planned.expect("planned"));
        }
        let bundle = tree.text("live/default/bundle.yaml");
        assert!(bundle.contains("v: \"seven\""), "{bundle}");
        assert_eq!(bundle.len(), text.len() + 4, "only c7's value changed");
    }

    /// Planning a write at once (one index, refreshed per file) gives exactly what planning its
    /// intents one by one on the growing tree gives.
    #[test]
    fn plan_all_matches_planning_one_by_one() {
        let planner = configmap_planner();
        let mut base = MemTree::default();
        base.0.insert(
            "live/default/bundle.yaml".into(),
            b"# hand-written\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\ndata:\n  v: \"1\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: default\ndata:\n  v: \"2\"\n".to_vec(),
        );
        let mut keep = std::collections::BTreeSet::new();
        keep.insert(("default".to_string(), "a".to_string()));
        keep.insert(("default".to_string(), "c".to_string()));
        let intents = [
            Intent::put("live", cm_key("default", "a"), cm("default", "a", "one")),
            Intent::put("live", cm_key("default", "c"), cm("default", "c", "3")),
            Intent::put("live", cm_key("other", "d"), cm("other", "d", "4")),
            Intent::put("live", cm_key("default", "c"), cm("default", "c", "three")),
            Intent::delete("live", cm_key("other", "d")),
            Intent::put(
                "live",
                cm_key("default", "../x"),
                cm("default", "../x", "bad"),
            ),
            Intent::sweep(
                "live",
                SweepScope {
                    resource: GroupResource::new("", "configmaps"),
                    namespace: Some("default".into()),
                    keep,
                    removable: None,
                },
            ),
        ];
        let refs: Vec<&Intent> = intents.iter().collect();
        let batched = planner.plan_all(&base, &refs);

        let mut tree = MemTree(base.0.clone());
        for (intent, got) in intents.iter().zip(&batched) {
            let want = planner.plan(&tree, intent);
            match (&want, got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{intent:?}"),
                (Err(w), Err(g)) => assert_eq!(w.to_string(), g.to_string(), "{intent:?}"),
                _ => panic!("one by one gave {want:?}, at once gave {got:?} for {intent:?}"),
            }
            if let Ok(updates) = want {
                tree.apply(updates);
            }
        }
        assert!(batched[5].is_err(), "a name escaping the folder is refused");
        let bundle = String::from_utf8(tree.0["live/default/bundle.yaml"].clone()).expect("utf-8");
        assert!(
            bundle.starts_with("# hand-written\n")
                && bundle.contains("v: \"one\"")
                && !bundle.contains("name: b"),
            "{bundle}"
        );
    }

    #[test]
    fn a_live_edit_with_its_baseline_keeps_the_fields_git_changed_since() {
        let planner = configmap_planner();
        let mut tree = MemTree::default();
        let path = "live/web/configmaps/conf.yaml";
        // A person's file: a comment, and `b` changed in Git since the live side read it.
        let file = "# owned by the platform team\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n  namespace: web\ndata:\n  a: \"1\"\n  b: git # pushed\n";
        tree.0.insert(path.into(), file.as_bytes().to_vec());
        let obj = |a: &str, b: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": "web"}, "data": {"a": a, "b": b}});
        let before = Arc::new(ObjectJson::new(&obj("1", "1")));
        let edit = Intent::put("live", cm_key("web", "conf"), obj("live", "1")).edit_of(before);
        let updates = planner.plan(&tree, &edit).expect("planned");
        tree.apply(updates);
        assert_eq!(
            tree.text(path),
            file.replace("a: \"1\"", "a: \"live\""),
            "only the field the live edit changed is written"
        );
        // Without a baseline the whole object is written: Git's `b` goes back.
        let whole = Intent::put("live", cm_key("web", "conf"), obj("live", "1"));
        tree.apply(planner.plan(&tree, &whole).expect("planned"));
        assert!(tree.text(path).contains("b: \"1\""), "{}", tree.text(path));
    }

    #[test]
    fn a_document_git_removed_stays_removed_when_the_live_object_reads_as_the_commit_it_held() {
        let planner = configmap_planner();
        let tree = MemTree::default();
        let obj = |a: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": "web"}, "data": {"a": a}});
        let held = |live: &str| {
            let mut intent = Intent::put("live", cm_key("web", "conf"), obj(live));
            intent.baseline = Some(Baseline::Held(Arc::new(ObjectJson::new(&obj("1")))));
            intent
        };
        // Unchanged live since the commit the live side held: Git's removal stands.
        assert!(planner.plan(&tree, &held("1")).expect("planned").is_empty());
        // Changed live: the live side wins, and the document is written again.
        assert!(
            !planner
                .plan(&tree, &held("live"))
                .expect("planned")
                .is_empty()
        );
        // What the stream last saw (a relist) is no such commit: the object is written back.
        let seen = Intent::put("live", cm_key("web", "conf"), obj("1"))
            .edit_of(Arc::new(ObjectJson::new(&obj("1"))));
        assert!(!planner.plan(&tree, &seen).expect("planned").is_empty());
    }

    /// What a [`MergeReport`] was told.
    #[derive(Default)]
    struct Told(Mutex<Vec<(String, String, Vec<String>)>>);

    impl MergeReport for Told {
        fn overridden(&self, folder: &str, object: &ObjectKey, fields: &[String]) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((folder.to_string(), object.to_string(), fields.to_vec()));
        }
    }

    #[test]
    fn an_override_is_reported_once_however_often_the_write_is_planned() {
        let told = Arc::new(Told::default());
        let planner = configmap_planner().with_merge_report(told.clone());
        let mut tree = MemTree::default();
        let obj = |a: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "namespace": "web"}, "data": {"a": a}});
        tree.apply(
            planner
                .plan(
                    &tree,
                    &Intent::put("live", cm_key("web", "conf"), obj("git")),
                )
                .expect("planned"),
        );
        let before = Arc::new(ObjectJson::new(&obj("1")));
        let edit = Intent::put("live", cm_key("web", "conf"), obj("live")).edit_of(before);
        for _ in 0..3 {
            let updates = planner.plan(&tree, &edit).expect("planned");
            assert!(!updates.is_empty(), "the live value is written");
        }
        let told = told
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert_eq!(
            *told,
            vec![(
                "live".to_string(),
                "configmaps/web/conf".to_string(),
                vec!["data.a".to_string()]
            )]
        );
    }

    #[test]
    fn a_live_edit_of_a_secret_keeps_what_a_push_changed_in_its_encrypted_file() {
        let s = setup();
        let ids = parse_identities(&s.secret_key).expect("identity");
        // With the folder's identity: the file a person re-encrypted can be opened.
        s.map.set(
            "live",
            Arc::new(
                Encryptor::new([&s.recipient])
                    .expect("recipient")
                    .with_identities(ids.clone()),
            ),
        );
        let mut tree = MemTree::default();
        tree.apply(put(&s, &tree, "db", "b2xk", "a").expect("planned"));
        // A push: the label changed in Git.
        tree.apply(put(&s, &tree, "db", "b2xk", "git").expect("planned"));
        // The live side changed the password of the object as it read before the push.
        let before = Arc::new(ObjectJson::new(&secret("db", "b2xk", "a")));
        let edit = Intent::put("live", secret_key("db"), secret("db", "bmV3", "a")).edit_of(before);
        tree.apply(s.planner.plan(&tree, &edit).expect("planned"));
        let file = tree.text("live/web/secrets/db.sops.yaml");
        let plain = decrypt_document(&file, &ids).expect("decrypts");
        assert_eq!(plain["data"]["password"], "bmV3", "{plain}");
        assert_eq!(plain["metadata"]["labels"]["tier"], "git", "{plain}");
        // What the commit held is read back the same way (a start-up resync's baseline).
        let held = s
            .planner
            .held(
                &tree,
                &[&Intent::put(
                    "live",
                    secret_key("db"),
                    secret("db", "x", "y"),
                )],
            )
            .expect("read");
        assert!(
            matches!(&held[..], [Held::Object(Some(v))] if v["data"]["password"] == "bmV3"),
            "{held:?}"
        );
    }

    // One story over one tree (edit, patch, refusal, delete, a second overlay), each step
    // depending on the tree the last left: read whole rather than split.
    /// A kustomize layout in the folder: a live edit of an object its overlay builds lands in
    /// the document responsible (here the base, under the overlay's prefix), comments kept;
    /// an edit no document can take alone, and a delete, are refused for that object; the
    /// overlay's patch is no object of the folder (it used to refuse the whole folder as a
    /// second document of `settings`).
    #[test]
    fn an_edit_of_an_object_a_layout_builds_lands_in_the_layout() {
        let s = setup();
        let mut tree = MemTree::default();
        for (path, text) in [
            (
                "live/apps/base/kustomization.yaml",
                "resources: [settings.yaml]\n",
            ),
            (
                "live/apps/base/settings.yaml",
                "# the team's settings\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue # house colour\n  size: small\n",
            ),
            (
                "live/apps/prod/kustomization.yaml",
                "namePrefix: prod-\ncommonLabels: {env: prod}\nresources: [../base]\npatches: [{path: bigger.yaml}]\n",
            ),
            (
                "live/apps/prod/bigger.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  size: large\n",
            ),
        ] {
            tree.0.insert(path.into(), text.as_bytes().to_vec());
        }
        let key = ObjectKey::new(
            GroupResource::new("", "configmaps"),
            "default",
            "prod-settings",
        );
        let live = |color: &str, size: &str, env: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "prod-settings", "namespace": "default", "labels": {"env": env}},
                "data": {"color": color, "size": size}})
        };
        let unchanged = s.planner.plan(
            &tree,
            &Intent::put("live", key.clone(), live("blue", "large", "prod")),
        );
        assert_eq!(
            unchanged.expect("planned"),
            Vec::new(),
            "the object as the layout builds it"
        );
        let updates = s
            .planner
            .plan(
                &tree,
                &Intent::put("live", key.clone(), live("green", "large", "prod")),
            )
            .expect("placed");
        tree.apply(updates);
        let base = tree.text("live/apps/base/settings.yaml");
        assert!(
            base.contains("color: green # house colour")
                && base.starts_with("# the team's settings"),
            "{base}"
        );
        let patched = s
            .planner
            .plan(
                &tree,
                &Intent::put("live", key.clone(), live("green", "huge", "prod")),
            )
            .expect("placed");
        tree.apply(patched);
        assert!(
            tree.text("live/apps/prod/bigger.yaml")
                .contains("size: huge")
        );
        assert!(
            tree.text("live/apps/base/settings.yaml")
                .contains("size: small")
        );
        let refused = s.planner.plan(
            &tree,
            &Intent::put("live", key.clone(), live("green", "huge", "staging")),
        );
        let said = refused.expect_err("refused").to_string();
        assert!(
            said.contains("the kustomize layout \"live/apps/prod\" cannot take this live edit")
                && said.contains("/metadata/labels/env"),
            "{said}"
        );
        let deleted = s.planner.plan(&tree, &Intent::delete("live", key.clone()));
        let said = deleted.expect_err("refused").to_string();
        assert!(
            said.contains("a patch of live/apps/prod/kustomization.yaml still changes it"),
            "{said}"
        );
        // A second overlay of the same base: a base value is no longer prod's alone.
        tree.0.insert(
            "live/apps/staging/kustomization.yaml".into(),
            b"namePrefix: staging-\nresources: [../base]\n".to_vec(),
        );
        let shared = s.planner.plan(
            &tree,
            &Intent::put("live", key.clone(), live("red", "huge", "prod")),
        );
        let said = shared.expect_err("refused").to_string();
        assert!(
            said.contains("would also change what live/apps/staging builds"),
            "{said}"
        );
        let own = s
            .planner
            .plan(
                &tree,
                &Intent::put("live", key, live("green", "tiny", "prod")),
            )
            .expect("prod's own patch");
        assert!(
            own.iter().any(|u| u.path == "live/apps/prod/bigger.yaml"),
            "{own:?}"
        );
    }

    /// A live create in a folder that is a layout: written with the name the layout's prefix
    /// gives back, listed in its kustomization, so the layout builds it as it is live; a name
    /// the layout cannot give is refused.
    #[test]
    fn a_live_create_in_a_layout_is_listed_in_its_kustomization() {
        let s = setup();
        let mut tree = MemTree::default();
        tree.0.insert(
            "apps/prod/kustomization.yaml".into(),
            b"# prod\nnamePrefix: prod-\nresources:\n- settings.yaml\n".to_vec(),
        );
        tree.0.insert(
            "apps/prod/settings.yaml".into(),
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: b\n"
                .to_vec(),
        );
        let created = |tree: &MemTree, name: &str| {
            let key = ObjectKey::new(GroupResource::new("", "configmaps"), "default", name);
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}});
            s.planner.plan(tree, &Intent::put("apps/prod", key, object))
        };
        let updates = created(&tree, "prod-extra").expect("placed");
        tree.apply(updates);
        let kustomization = tree.text("apps/prod/kustomization.yaml");
        assert!(
            kustomization.starts_with("# prod")
                && kustomization.contains("- default/configmaps/prod-extra.yaml"),
            "{kustomization}"
        );
        let file = tree.text("apps/prod/default/configmaps/prod-extra.yaml");
        assert!(
            file.contains("name: extra") && !file.contains("namespace"),
            "{file}"
        );
        assert_eq!(
            created(&tree, "prod-extra").expect("known now"),
            Vec::new(),
            "built as it is live"
        );
        let refused = created(&tree, "other").expect_err("no prefix");
        assert!(refused.to_string().contains("prod-…"), "{refused}");
        // Deleted live: its file goes, and its entry with it.
        let key = ObjectKey::new(
            GroupResource::new("", "configmaps"),
            "default",
            "prod-extra",
        );
        let deleted = s
            .planner
            .plan(&tree, &Intent::delete("apps/prod", key))
            .expect("deleted");
        tree.apply(deleted);
        assert!(
            !tree
                .0
                .contains_key("apps/prod/default/configmaps/prod-extra.yaml")
        );
        let kustomization = tree.text("apps/prod/kustomization.yaml");
        assert!(
            kustomization.starts_with("# prod") && !kustomization.contains("prod-extra"),
            "{kustomization}"
        );
        // A layout that does not build: nothing new is placed in its folder, saying why.
        tree.0.insert(
            "apps/prod/kustomization.yaml".into(),
            b"namePrefix: prod-\nresources: [settings.yaml]\nhelmCharts: []\n".to_vec(),
        );
        let refused = created(&tree, "prod-more").expect_err("the layout does not build");
        let said = refused.to_string();
        assert!(
            said.contains("does not build") && said.contains("helmCharts"),
            "{said}"
        );
    }
}
