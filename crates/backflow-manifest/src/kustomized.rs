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
use crate::kustomize::{self, Files, KustomizeError};

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

/// What the layouts of a folder say of one object.
pub(crate) enum Found {
    /// A layout builds it.
    Built(Built),
    /// No layout that builds does, but this one (folder, why) does not build.
    Unbuildable(String, String),
    /// No layout builds it.
    Nothing,
}

/// The transforming layout of folder `target` that builds `identity`, if any.
pub(crate) fn building(
    tree: &dyn TreeView,
    target: &str,
    identity: &Identity,
) -> Result<Found, TreeError> {
    let listed = tree.list(target)?;
    let kustomizations: Vec<&String> = listed
        .iter()
        .filter(|p| kustomize::is_kustomization(p))
        .collect();
    if kustomizations.is_empty() {
        return Ok(Found::Nothing);
    }
    let dir_of = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string())
    };
    let dirs: Vec<String> = kustomizations.iter().map(|p| dir_of(p)).collect();
    // The kustomizations first: a folder of ten thousand plain files beside one overlay reads
    // only the overlay's files (and what its build sends for) at each write.
    let mut files = Files::new();
    for path in &kustomizations {
        if let Some(bytes) = tree.read(path)? {
            files.insert((*path).clone(), bytes);
        }
    }
    let layouts = transforming_layouts(&dirs, &files);
    for dir in &layouts {
        read_under(tree, &listed, dir, &mut files)?;
    }
    // Every layout is rendered (not only up to the one that builds the object): what each
    // reads is then in `files` when an edit is checked against the others.
    let mut broken = None;
    let mut found = None;
    for dir in &layouts {
        let objects = match render_loading(tree, &mut files, dir)? {
            Ok(objects) => objects,
            Err(error) => {
                tracing::debug!(folder = %dir, %error, "a kustomize layout does not build");
                broken.get_or_insert(((*dir).clone(), error));
                continue;
            }
        };
        if found.is_none()
            && let Some(object) = objects
                .into_iter()
                .find(|o| Identity::of(o).is_ok_and(|i| same(&i, identity)))
        {
            found = Some(((*dir).clone(), object));
        }
    }
    if let Some((dir, object)) = found {
        let others = layouts
            .iter()
            .filter(|d| ***d != dir)
            .map(|d| (*d).clone())
            .collect();
        return Ok(Found::Built(Built {
            dir,
            files,
            object,
            others,
        }));
    }
    Ok(broken.map_or(Found::Nothing, |(dir, error)| {
        Found::Unbuildable(dir, error)
    }))
}

/// Reads into `files` every file of `listed` under folder `dir`.
fn read_under(
    tree: &dyn TreeView,
    listed: &[String],
    dir: &str,
    files: &mut Files,
) -> Result<(), TreeError> {
    for path in listed
        .iter()
        .filter(|p| dir.is_empty() || p.starts_with(&format!("{dir}/")))
    {
        if !files.contains_key(path)
            && let Some(bytes) = tree.read(path)?
        {
            files.insert(path.clone(), bytes);
        }
    }
    Ok(())
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

/// The build points among the kustomizations' folders `dirs` (their files in `files`) whose
/// build transforms what it lists.
fn transforming_layouts<'a>(dirs: &'a [String], files: &Files) -> Vec<&'a String> {
    dirs.iter()
        .filter(|d| is_build_point(d, dirs))
        .filter(|dir| {
            files
                .iter()
                .filter(|(k, _)| kustomize::is_kustomization(k))
                .filter(|(k, _)| dir.is_empty() || k.starts_with(&format!("{dir}/")))
                .any(|(k, b)| !kustomize::transforms(k, b).is_empty())
        })
        .collect()
}

/// Whether `dir` holds the first kustomization on its path (no folder above it in `dirs`).
fn is_build_point(dir: &str, dirs: &[String]) -> bool {
    !dirs
        .iter()
        .any(|d| d != dir && (d.is_empty() || dir.starts_with(&format!("{d}/"))))
}

/// The build of `dir`, reading files outside the folder as it asks for them; the inner error
/// says why the layout does not build.
fn render_loading(
    tree: &dyn TreeView,
    files: &mut Files,
    dir: &str,
) -> Result<Result<Vec<Value>, String>, TreeError> {
    for _ in 0..MAX_LOADS {
        match kustomize::render(files, dir) {
            Ok(objects) => return Ok(Ok(objects)),
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
                    return Ok(Err(format!("{path} is not in the repository")));
                }
            }
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    Ok(Err(
        "it names files outside its folder too many layers deep".into(),
    ))
}

/// A live write in folder `target` when one of its layouts does not build: refused where it
/// would be placed as a new object (it may be one the broken layout builds) — never a guess.
pub(crate) fn unbuildable(key: &str, layout: &str, error: &str) -> TreeError {
    ManifestError::KustomizeUnplaceable {
        object: key.to_string(),
        layout: layout.to_string(),
        reason: format!(
            "the layout does not build ({error}), so backflow cannot tell whether it builds this object: nothing new is placed in the folder until it builds"
        ),
    }
    .into()
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

/// The kustomization files of `listed` above `path` (their folder holds it), deepest first.
fn kustomizations_above<'a>(listed: &'a [String], path: &str) -> Vec<&'a String> {
    let mut above: Vec<&String> = listed
        .iter()
        .filter(|p| kustomize::is_kustomization(p))
        .filter(|k| {
            let dir = k.rsplit_once('/').map_or("", |(d, _)| d);
            dir.is_empty() || path.starts_with(&format!("{dir}/"))
        })
        .collect();
    above.sort_by_key(|k| std::cmp::Reverse(k.len()));
    above
}

/// `kustomization` (its bytes) with `relative` added to its `resources`; `None` when it lists
/// it already.
fn listing(
    kustomization: &str,
    bytes: &[u8],
    relative: &str,
) -> Result<Option<Vec<u8>>, TreeError> {
    let parsed = crate::document::parse_file(kustomization, bytes)?;
    let Some(document) = parsed.docs.iter().position(|d| !d.value.is_null()) else {
        return Ok(None);
    };
    let listed = parsed.docs[document].value["resources"]
        .as_array()
        .is_some_and(|r| r.iter().any(|e| e.as_str() == Some(relative)));
    if listed {
        return Ok(None);
    }
    let edited = edit_parsed(kustomization, bytes, document, |current| {
        let mut k = current.clone();
        if let Some(map) = k.as_object_mut() {
            let resources = map
                .entry("resources")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = resources.as_array_mut() {
                list.push(Value::String(relative.to_string()));
            }
        }
        k
    })?;
    Ok(edited.map(|e| e.bytes))
}

/// The file `placed` (a live create's new document) listed in the nearest kustomization above
/// it, so what a kustomization lists stays what its folder holds; `None` when none is above.
pub(crate) fn list_new_file(
    tree: &dyn TreeView,
    target: &str,
    path: &str,
) -> Result<Option<PathUpdate>, TreeError> {
    let listed = tree.list(target)?;
    let Some(nearest) = kustomizations_above(&listed, path)
        .first()
        .map(|k| (*k).clone())
    else {
        return Ok(None);
    };
    let dir = nearest.rsplit_once('/').map_or("", |(d, _)| d);
    let relative = path.strip_prefix(&format!("{dir}/")).unwrap_or(path);
    let bytes = tree.read(&nearest)?.unwrap_or_default();
    Ok(listing(&nearest, &bytes, relative)?.map(|b| PathUpdate::write(nearest.clone(), b)))
}

/// A live create placed at `path`, inside a layout: the new document written with the name and
/// namespace the layout's own transformers give back (its prefix and suffix taken off, its
/// namespace left to it), listed in the nearest kustomization, and checked by rendering the
/// layout again: it must build the object as it is live and change nothing else; otherwise the
/// create is refused for that object.
pub(crate) fn create(
    tree: &dyn TreeView,
    target: &str,
    layout: &str,
    path: &str,
    object: &Value,
) -> Result<Vec<PathUpdate>, TreeError> {
    let key = format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("")
    );
    let refuse = |reason: String| -> TreeError {
        ManifestError::KustomizeUnplaceable {
            object: key.clone(),
            layout: layout.to_string(),
            reason,
        }
        .into()
    };
    let listed = tree.list(target)?;
    let mut files = Files::new();
    for p in listed.iter().filter(|p| kustomize::is_kustomization(p)) {
        if let Some(bytes) = tree.read(p)? {
            files.insert(p.clone(), bytes);
        }
    }
    read_under(tree, &listed, layout, &mut files)?;
    if listed.iter().any(|p| p == path) {
        return Err(refuse(format!("{path} exists already")));
    }
    let before = render_loading(tree, &mut files, layout)?
        .map_err(|e| refuse(format!("the layout does not build: {e}")))?;
    let Some(nearest) = kustomizations_above(&listed, path)
        .first()
        .map(|k| (*k).clone())
    else {
        return Err(refuse(format!("no kustomization above {path} lists it")));
    };
    let dir = nearest.rsplit_once('/').map_or("", |(d, _)| d);
    let new_file = NewFile {
        path,
        relative: path
            .strip_prefix(&format!("{dir}/"))
            .unwrap_or(path)
            .to_string(),
        nearest: nearest.clone(),
    };
    let (doc, expected) = source_document(&files, layout, &new_file, object).map_err(refuse)?;
    let with = |files: &Files, doc: &Value| new_file.with(files, doc);
    let edited = with(&files, &doc)?;
    let after = kustomize::render(&edited, layout).map_err(|e| refuse(e.to_string()))?;
    match kustomize::project(&edited, layout, &expected) {
        Ok(edits) if edits.is_empty() => {}
        Ok(_) | Err(_) => {
            return Err(refuse(format!(
                "written to {path}, the layout would not build the object as it is live"
            )));
        }
    }
    if after.len() != before.len() + 1 || before.iter().any(|o| !after.contains(o)) {
        return Err(refuse(format!(
            "listing {path} would change other objects the layout builds"
        )));
    }
    let mut updates = vec![PathUpdate::write(
        path.to_string(),
        edited.get(path).cloned().unwrap_or_default(),
    )];
    if let Some(bytes) = edited.get(&nearest)
        && files.get(&nearest) != Some(bytes)
    {
        updates.push(PathUpdate::write(nearest.clone(), bytes.clone()));
    }
    Ok(updates)
}

/// Where a live create's document goes: its file and the kustomization that lists it.
struct NewFile<'a> {
    path: &'a str,
    /// The file's path from that kustomization's folder.
    relative: String,
    nearest: String,
}

impl NewFile<'_> {
    /// `files` with `doc` written as the new file, listed in the nearest kustomization.
    fn with(&self, files: &Files, doc: &Value) -> Result<Files, TreeError> {
        let mut out = files.clone();
        out.insert(self.path.to_string(), crate::yaml::render(doc).into_bytes());
        let bytes = files.get(&self.nearest).cloned().unwrap_or_default();
        if let Some(listed) = listing(&self.nearest, &bytes, &self.relative)? {
            out.insert(self.nearest.clone(), listed);
        }
        Ok(out)
    }
}

/// The document a live create is written as — the name and namespace the layout's own
/// transformers give back, read off a probe it builds — and the object the layout must then
/// build (`object` as the layout names its namespace); why not, when it cannot come from it.
fn source_document(
    files: &Files,
    layout: &str,
    new_file: &NewFile<'_>,
    object: &Value,
) -> Result<(Value, Value), String> {
    const PROBE: &str = "backflow-probe-7c1e";
    let probe = serde_json::json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "metadata": {"name": PROBE}});
    let probed = kustomize::render(
        &new_file.with(files, &probe).map_err(|e| e.to_string())?,
        layout,
    )
    .map_err(|e| e.to_string())?;
    let Some(built_probe) = probed.iter().find(|o| {
        o["kind"] == object["kind"]
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.contains(PROBE))
    }) else {
        return Err("the layout does not build an object of this kind from a new file".into());
    };
    let built_name = built_probe["metadata"]["name"].as_str().unwrap_or(PROBE);
    let (prefix, suffix) = built_name.split_once(PROBE).unwrap_or(("", ""));
    let live_name = object["metadata"]["name"].as_str().unwrap_or("");
    let Some(name) = live_name
        .strip_prefix(prefix)
        .and_then(|n| n.strip_suffix(suffix))
        .filter(|n| !n.is_empty())
    else {
        return Err(format!(
            "the layout names what it builds {prefix}…{suffix}: {live_name:?} cannot come from it"
        ));
    };
    let layout_namespace = built_probe["metadata"].get("namespace").is_some();
    let in_default = object["metadata"]["namespace"] == "default";
    let mut doc = object.clone();
    let mut expected = object.clone();
    if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), Value::String(name.to_string()));
        if layout_namespace || in_default {
            meta.remove("namespace");
        }
    }
    if !layout_namespace
        && in_default
        && let Some(meta) = expected.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("namespace");
    }
    Ok((doc, expected))
}

/// A live delete of an object a layout builds: its document removed (and, with its file, the
/// file's entry in the kustomization listing it), or refused when a patch or a generator still
/// needs it or another layout would change.
pub(crate) fn delete(built: &Built, key: &str) -> Result<Vec<PathUpdate>, TreeError> {
    let deletion = kustomize::deletion(&built.files, &built.dir, &built.object).map_err(|e| {
        ManifestError::KustomizeUnplaceable {
            object: key.to_string(),
            layout: built.dir.clone(),
            reason: e.to_string(),
        }
    })?;
    others_unchanged(built, key, &deletion.edits())?;
    let bytes = built.files.get(&deletion.path).cloned().unwrap_or_default();
    let mut updates =
        vec![
            match crate::edit::remove_document(&deletion.path, &bytes, deletion.document)? {
                Some(rest) if !deletion.emptied => PathUpdate::write(deletion.path.clone(), rest),
                _ => PathUpdate::remove(deletion.path.clone()),
            },
        ];
    if let Some(unlisted) = &deletion.unlisted {
        let bytes = built.files.get(&unlisted.path).cloned().unwrap_or_default();
        let value = unlisted.value.clone();
        if let Some(edited) = edit_parsed(&unlisted.path, &bytes, unlisted.document, |_| value)? {
            updates.push(PathUpdate::write(unlisted.path.clone(), edited.bytes));
        }
    }
    Ok(updates)
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
