//! The YAML planner: intents become in-place edits of the target folder's manifests.
//!
//! - `Present(object)`: the document with the object's identity, wherever it is in the folder,
//!   is edited in place; with none, the object goes to its layout path. If a file already sits
//!   at that path, the object is appended to it as a new document (the file's other documents
//!   are kept byte for byte), since a person may have bundled objects there on purpose.
//! - `Absent`: the document is found by identity (the resource type's kind comes from the
//!   [`KindMap`]) and removed; without a known kind, the layout path is checked instead. A file
//!   whose last document goes is removed.
//! - `Sweep(scope)`: every document of the scope's type in exactly its namespace scope whose
//!   name is not kept is removed. Without a known kind the sweep is refused: guessing could
//!   remove objects of another type.
//!
//! Every intent first indexes the whole folder, which refuses folders holding foreign or
//! ambiguous content; bootstrap files are added with any write that creates or edits a
//! document. The planner reads only the tree it is handed.

use std::collections::BTreeMap;

use backflow_api::ObjectKey;
use backflow_git::{Intent, ObjectState, PathUpdate, Planner, SweepScope, TreeError, TreeView};
use serde_json::Value;

use crate::bootstrap;
use crate::edit::{append_document, edit_document, remove_document};
use crate::error::ManifestError;
use crate::identity::Identity;
use crate::index::FolderIndex;
use crate::kinds::KindMap;
use crate::layout::{check_key, normalize_target, object_path};
use crate::sanitize::sanitize;
use crate::yaml::render;

/// Plans intents as edits of YAML manifests. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct YamlPlanner {
    kinds: KindMap,
}

impl YamlPlanner {
    /// A planner that looks kinds up in `kinds` (shared with whoever fills it).
    pub fn new(kinds: KindMap) -> Self {
        Self { kinds }
    }

    /// The kind map this planner reads.
    pub fn kinds(&self) -> &KindMap {
        &self.kinds
    }

    fn present(
        &self,
        tree: &dyn TreeView,
        target: &str,
        key: &ObjectKey,
        object: &Value,
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
        let index = FolderIndex::build(tree, target)?;
        let mut updates = Vec::new();
        if let Some(found) = index.get(&identity) {
            if found.encrypted {
                return Err(ManifestError::EncryptedDocument {
                    path: found.path.clone(),
                    doc: found.doc,
                }
                .into());
            }
            let bytes = tree.read(&found.path)?.unwrap_or_default();
            let edited = edit_document(&found.path, &bytes, found.doc, &object)?;
            if edited == bytes {
                return Ok(Vec::new());
            }
            updates.push(PathUpdate::write(found.path.clone(), edited));
        } else {
            let path = object_path(target, key)?;
            let content = match tree.read(&path)? {
                Some(existing) => append_document(&existing, &object),
                None => render(&object).into_bytes(),
            };
            updates.push(PathUpdate::write(path, content));
        }
        updates.extend(bootstrap::missing(tree, target)?);
        Ok(updates)
    }

    fn absent(
        &self,
        tree: &dyn TreeView,
        target: &str,
        key: &ObjectKey,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        check_key(key)?;
        let index = FolderIndex::build(tree, target)?;
        let found = match self.kinds.kind_of(&key.resource) {
            Some(kind) => index
                .get(&Identity {
                    group: key.resource.group.clone(),
                    kind,
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                })
                .cloned(),
            None => {
                // No kind known: only a document at the layout path with this group,
                // namespace and name can be this object.
                let path = object_path(target, key)?;
                index
                    .iter()
                    .filter(|(id, at)| {
                        at.path == path
                            && id.group == key.resource.group
                            && id.namespace == key.namespace
                            && id.name == key.name
                    })
                    .map(|(_, at)| at.clone())
                    .next()
            }
        };
        let Some(found) = found else {
            return Ok(Vec::new());
        };
        let bytes = tree.read(&found.path)?.unwrap_or_default();
        Ok(vec![
            match remove_document(&found.path, &bytes, found.doc)? {
                Some(rest) => PathUpdate::write(found.path, rest),
                None => PathUpdate::remove(found.path),
            },
        ])
    }

    fn sweep(
        &self,
        tree: &dyn TreeView,
        target: &str,
        scope: &SweepScope,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        let Some(kind) = self.kinds.kind_of(&scope.resource) else {
            return Err(ManifestError::InvalidObject {
                object: scope.resource.to_string(),
                reason: "its kind is unknown, so the sweep cannot tell its documents apart; nothing was removed".into(),
            }
            .into());
        };
        let index = FolderIndex::build(tree, target)?;
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
                doomed.entry(at.path.clone()).or_default().push(at.doc);
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

impl Planner for YamlPlanner {
    fn plan(&self, tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError> {
        let target = normalize_target(&intent.target)?;
        match &intent.state {
            ObjectState::Present(object) => self.present(tree, &target, &intent.key, object),
            ObjectState::Absent => self.absent(tree, &target, &intent.key),
            ObjectState::Sweep(scope) => self.sweep(tree, &target, scope),
        }
    }
}
