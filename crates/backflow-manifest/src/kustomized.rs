//! Live edits of objects a kustomize layout in the folder builds: projected back through the
//! build into the documents responsible ([`crate::kustomize::project`]), written in place
//! (comments and layout kept), or refused for that object alone.
//!
//! A layout counts when its kustomization transforms what it lists (patches, prefixes,
//! generators, images, bases from elsewhere); one that only lists its files reads as plain
//! manifests, as before. The build points are the first kustomization on each path down the
//! folder, as Flux's kustomize-controller finds them.

use backflow_branch::{PathUpdate, TreeError, TreeView};
use serde_json::Value;

use crate::ManifestError;
use crate::edit::edit_parsed;
use crate::identity::Identity;
use crate::kustomize::{self, Files, KUSTOMIZATION_FILE_NAMES, KustomizeError};

/// A layout of the folder that builds the object.
pub(crate) struct Built {
    /// The folder of its kustomization.
    dir: String,
    /// The files its build reads.
    files: Files,
    /// The object as the build makes it.
    pub object: Value,
    /// The folder's other layouts: an edit must not change what they build (a base shared by
    /// two overlays takes an edit only if the other overlay's build stays as it was).
    others: Vec<String>,
}

/// How many times a build may send for files outside the folder (bases elsewhere).
const MAX_LOADS: usize = 16;

/// The transforming layout of folder `target` that builds `identity`, if any.
pub(crate) fn building(
    tree: &dyn TreeView,
    target: &str,
    identity: &Identity,
) -> Result<Option<Built>, TreeError> {
    let listed = tree.list(target)?;
    let kustomizations: Vec<&String> = listed
        .iter()
        .filter(|p| KUSTOMIZATION_FILE_NAMES.contains(&p.rsplit('/').next().unwrap_or(p)))
        .collect();
    if kustomizations.is_empty() {
        return Ok(None);
    }
    let dir_of = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string())
    };
    let dirs: Vec<String> = kustomizations.iter().map(|p| dir_of(p)).collect();
    let mut files = Files::new();
    for path in &listed {
        if let Some(bytes) = tree.read(path)? {
            files.insert(path.clone(), bytes);
        }
    }
    let layouts: Vec<&String> = dirs
        .iter()
        .filter(|d| is_build_point(d, &dirs))
        .filter(|dir| {
            kustomizations
                .iter()
                .filter(|k| dir.is_empty() || k.starts_with(&format!("{dir}/")))
                .any(|k| {
                    files
                        .get(*k)
                        .is_some_and(|b| !kustomize::transforms(k, b).is_empty())
                })
        })
        .collect();
    for dir in &layouts {
        let Some(objects) = render_loading(tree, &mut files, dir)? else {
            continue;
        };
        if let Some(object) = objects
            .into_iter()
            .find(|o| Identity::of(o).is_ok_and(|i| same(&i, identity)))
        {
            let others = layouts
                .iter()
                .filter(|d| *d != dir)
                .map(|d| (*d).clone())
                .collect();
            return Ok(Some(Built {
                dir: (*dir).clone(),
                files,
                object,
                others,
            }));
        }
    }
    Ok(None)
}

/// Whether the object a layout declares as `built` is the live one `live` names: a layout
/// that sets no namespace leaves it to the one applying it, `default` here.
fn same(built: &Identity, live: &Identity) -> bool {
    built.group == live.group
        && built.kind == live.kind
        && built.name == live.name
        && (built.namespace == live.namespace
            || built.namespace.is_empty() && live.namespace == "default")
}

/// Whether `dir` holds the first kustomization on its path (no folder above it in `dirs`).
fn is_build_point(dir: &str, dirs: &[String]) -> bool {
    !dirs
        .iter()
        .any(|d| d != dir && (d.is_empty() || dir.starts_with(&format!("{d}/"))))
}

/// The build of `dir`, reading files outside the folder as it asks for them; `None` when the
/// layout does not render (its files are then read as plain manifests, as before).
fn render_loading(
    tree: &dyn TreeView,
    files: &mut Files,
    dir: &str,
) -> Result<Option<Vec<Value>>, TreeError> {
    for _ in 0..MAX_LOADS {
        match kustomize::render(files, dir) {
            Ok(objects) => return Ok(Some(objects)),
            Err(KustomizeError::Missing { path, .. }) if !files.contains_key(&path) => {
                let mut found = false;
                for p in tree.list(&path)? {
                    if let Some(bytes) = tree.read(&p)? {
                        files.insert(p, bytes);
                        found = true;
                    }
                }
                if let Some(bytes) = tree.read(&path)? {
                    files.insert(path.clone(), bytes);
                    found = true;
                }
                if !found {
                    return Ok(None);
                }
            }
            Err(e) => {
                tracing::debug!(folder = dir, error = %e, "a kustomize layout does not render; its files read as plain manifests");
                return Ok(None);
            }
        }
    }
    Ok(None)
}

/// Refuses `edits` when they change the build of another kustomization of the folder.
fn others_unchanged(
    built: &Built,
    key: &str,
    edits: &[kustomize::DocumentEdit],
) -> Result<(), TreeError> {
    let refused = |reason: String| -> TreeError {
        ManifestError::KustomizeUnplaceable {
            object: key.to_string(),
            layout: built.dir.clone(),
            reason,
        }
        .into()
    };
    let edited = kustomize::with_edits(&built.files, edits).map_err(|e| refused(e.to_string()))?;
    for other in &built.others {
        let Ok(before) = kustomize::render(&built.files, other) else {
            continue;
        };
        if kustomize::render(&edited, other).ok().as_ref() != Some(&before) {
            let files: Vec<&str> = edits.iter().map(|e| e.path.as_str()).collect();
            return Err(refused(format!(
                "editing {} would also change what {other} builds",
                files.join(", ")
            )));
        }
    }
    Ok(())
}

/// A live delete of an object a layout builds: not projected (the object would have to leave
/// a base or a generator), so refused.
pub(crate) fn refuse_delete(built: &Built, key: &str) -> TreeError {
    ManifestError::KustomizeUnplaceable {
        object: key.to_string(),
        layout: built.dir.clone(),
        reason: "a live delete of an object the layout builds is not written back (remove it from the layout, or give it a patch with `$patch: delete`)".into(),
    }
    .into()
}

/// The writes that make the layout build `object` (live, defaults the layout does not set
/// left out), or why it cannot.
pub(crate) fn project(
    built: &Built,
    key: &str,
    object: &Value,
) -> Result<Vec<PathUpdate>, TreeError> {
    let mut object = object.clone();
    if built.object["metadata"].get("namespace").is_none()
        && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("namespace");
    }
    tracing::debug!(object = key, layout = %built.dir, "projecting a live edit into a kustomize layout");
    let edits = kustomize::project(&built.files, &built.dir, &object).map_err(|e| {
        ManifestError::KustomizeUnplaceable {
            object: key.to_string(),
            layout: built.dir.clone(),
            reason: e.to_string(),
        }
    })?;
    tracing::debug!(object = key, edits = ?edits.iter().map(|e| &e.path).collect::<Vec<_>>(), "projected");
    if !edits.is_empty() {
        others_unchanged(built, key, &edits)?;
    }
    let mut updates: Vec<PathUpdate> = Vec::new();
    let mut texts: std::collections::BTreeMap<String, Vec<u8>> = std::collections::BTreeMap::new();
    for edit in edits {
        let bytes = match texts.get(&edit.path) {
            Some(b) => b.clone(),
            None => built.files.get(&edit.path).cloned().unwrap_or_default(),
        };
        let value = edit.value.clone();
        if let Some(edited) = edit_parsed(&edit.path, &bytes, edit.document, |_| value)? {
            texts.insert(edit.path.clone(), edited.bytes);
        }
    }
    for (path, bytes) in texts {
        updates.push(PathUpdate::write(path, bytes));
    }
    Ok(updates)
}
