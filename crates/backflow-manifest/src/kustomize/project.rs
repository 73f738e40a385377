//! A live edit projected back through the build: each changed field goes to the document
//! responsible for it — the `images:` entry for an image, the `replicas:` entry, the patch
//! that sets the field, else the document the object was read from — and the build is
//! rendered again to prove it: the object must come out as it is live, and nothing else may
//! move. Anything else is [`Unplaceable`], for that object alone.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::build::{Layer, Origin, Resource};
use super::transform::parse_image;
use super::{Files, KustomizeError, built};

/// A document to write: its whole new value (an in-place editor keeps the file's comments
/// and layout around the fields that change).
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentEdit {
    /// The file.
    pub path: String,
    /// Its document, counted from 0.
    pub document: usize,
    /// What the document becomes.
    pub value: Value,
}

/// Why a live edit cannot be placed in the layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unplaceable {
    /// The build does not make this object.
    #[error("the kustomize build of {dir:?} makes no {kind} {name:?}")]
    NotBuilt {
        /// The folder built.
        dir: String,
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// A field no document of the layout can take without changing something else.
    #[error("{field}: {reason}")]
    Field {
        /// The field, as a JSON pointer into the object.
        field: String,
        /// Why, naming the files concerned.
        reason: String,
    },
    /// The layout does not render (before or after the edit).
    #[error(transparent)]
    Render(#[from] KustomizeError),
}

/// The edits that make the build of folder `dir` of `files` give `live` (an object the build
/// makes, as it is live, sanitized); empty when it already does.
pub fn project(files: &Files, dir: &str, live: &Value) -> Result<Vec<DocumentEdit>, Unplaceable> {
    let before = built(files, dir)?;
    let Some(object) = before.iter().find(|r| same_object(&r.value, live)) else {
        return Err(Unplaceable::NotBuilt {
            dir: dir.to_string(),
            kind: live["kind"].as_str().unwrap_or("").to_string(),
            name: live["metadata"]["name"].as_str().unwrap_or("").to_string(),
        });
    };
    let mut changes = Vec::new();
    changed_fields(&object.value, live, String::new(), &mut changes);
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    let mut documents = Documents::new(files);
    for (field, value) in &changes {
        place(object, field, value.as_ref(), &mut documents)?;
    }
    let edited = documents.files()?;
    verify(&before, &built(&edited, dir)?, live, &documents.touched())?;
    Ok(documents.edits())
}

/// Whether `a` and `b` are the same object (kind, group, name, namespace).
fn same_object(a: &Value, b: &Value) -> bool {
    let group = |v: &Value| {
        v["apiVersion"]
            .as_str()
            .and_then(|a| a.rsplit_once('/'))
            .map_or("", |(g, _)| g)
            .to_string()
    };
    let ns = |v: &Value| {
        v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    a["kind"] == b["kind"]
        && group(a) == group(b)
        && a["metadata"]["name"] == b["metadata"]["name"]
        && ns(a) == ns(b)
}

/// Every leaf where `built` and `live` differ: its pointer and the live value (`None`: gone
/// live). Lists of different lengths, or of items told apart by a key, differ whole.
fn changed_fields(built: &Value, live: &Value, at: String, out: &mut Vec<(String, Option<Value>)>) {
    match (built, live) {
        (Value::Object(b), Value::Object(l)) => {
            for (k, bv) in b {
                let here = format!("{at}/{}", escape(k));
                match l.get(k) {
                    Some(lv) => changed_fields(bv, lv, here, out),
                    None => out.push((here, None)),
                }
            }
            for (k, lv) in l {
                if !b.contains_key(k) {
                    out.push((format!("{at}/{}", escape(k)), Some(lv.clone())));
                }
            }
        }
        (Value::Array(b), Value::Array(l)) if b.len() == l.len() => {
            for (i, (bv, lv)) in b.iter().zip(l).enumerate() {
                changed_fields(bv, lv, format!("{at}/{i}"), out);
            }
        }
        (b, l) if b != l => out.push((at, Some(l.clone()))),
        _ => {}
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The documents a projection reads and edits, by file and place.
struct Documents<'a> {
    files: &'a Files,
    parsed: BTreeMap<String, Vec<Value>>,
    edited: BTreeMap<(String, usize), Value>,
}

impl<'a> Documents<'a> {
    fn new(files: &'a Files) -> Self {
        Self {
            files,
            parsed: BTreeMap::new(),
            edited: BTreeMap::new(),
        }
    }

    /// Document `document` of `path`, as edited so far.
    fn get(&mut self, at: &Origin) -> Result<Value, Unplaceable> {
        if let Some(v) = self.edited.get(&(at.path.clone(), at.document)) {
            return Ok(v.clone());
        }
        let docs = self.all(&at.path)?;
        docs.get(at.document)
            .cloned()
            .ok_or_else(|| Unplaceable::Field {
                field: String::new(),
                reason: format!("{} has no document {}", at.path, at.document),
            })
    }

    fn all(&mut self, path: &str) -> Result<Vec<Value>, Unplaceable> {
        if let Some(docs) = self.parsed.get(path) {
            return Ok(docs.clone());
        }
        let bytes = self
            .files
            .get(path)
            .ok_or_else(|| KustomizeError::Missing {
                file: path.to_string(),
                what: "file",
                path: path.to_string(),
            })?;
        let docs = super::file::documents_of(path, bytes)?;
        self.parsed.insert(path.to_string(), docs.clone());
        Ok(docs)
    }

    fn set(&mut self, at: &Origin, value: Value) {
        self.edited.insert((at.path.clone(), at.document), value);
    }

    fn touched(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.edited.keys().map(|(p, _)| p.clone()).collect();
        paths.dedup();
        paths
    }

    /// The files with the edits made so far.
    fn files(&self) -> Result<Files, Unplaceable> {
        let edits: Vec<DocumentEdit> = self
            .edited
            .iter()
            .map(|((path, document), value)| DocumentEdit {
                path: path.clone(),
                document: *document,
                value: value.clone(),
            })
            .collect();
        Ok(with_edits(self.files, &edits)?)
    }

    fn edits(self) -> Vec<DocumentEdit> {
        self.edited
            .into_iter()
            .map(|((path, document), value)| DocumentEdit {
                path,
                document,
                value,
            })
            .collect()
    }
}

/// What deleting an object a layout builds takes: its document out of its file and, when that
/// empties the file, the file's entry out of the kustomization listing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deletion {
    /// The file of the object's document.
    pub path: String,
    /// The document.
    pub document: usize,
    /// Whether the file holds nothing else (it goes).
    pub emptied: bool,
    /// The kustomization listing the emptied file, without that entry.
    pub unlisted: Option<DocumentEdit>,
}

impl Deletion {
    /// The deletion as document edits (a removed document reads as null).
    #[must_use]
    pub fn edits(&self) -> Vec<DocumentEdit> {
        let mut edits = vec![DocumentEdit {
            path: self.path.clone(),
            document: self.document,
            value: Value::Null,
        }];
        edits.extend(self.unlisted.clone());
        edits
    }
}

/// The deletion that makes the build of `dir` lose `object` (as the build makes it) and
/// nothing else, checked by rendering again; refused when a patch or a generator still needs
/// the object.
pub fn deletion(files: &Files, dir: &str, object: &Value) -> Result<Deletion, Unplaceable> {
    let before = built(files, dir)?;
    let refuse = |reason: String| Unplaceable::Field {
        field: String::new(),
        reason,
    };
    let Some(found) = before.iter().find(|r| same_object(&r.value, object)) else {
        return Err(Unplaceable::NotBuilt {
            dir: dir.to_string(),
            kind: object["kind"].as_str().unwrap_or("").to_string(),
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        });
    };
    let Some(origin) = &found.origin else {
        return Err(refuse(
            "it is generated: remove its generator in Git".into(),
        ));
    };
    if let Some(patch) = found.layers.iter().find_map(|l| match l {
        Layer::Strategic { kustomization, .. } | Layer::Json6902 { kustomization, .. } => {
            Some(kustomization)
        }
        _ => None,
    }) {
        return Err(refuse(format!(
            "a patch of {patch} still changes it: remove the patch and the object in Git"
        )));
    }
    let mut documents = Documents::new(files);
    let all = documents.all(&origin.path)?;
    let emptied = all
        .iter()
        .enumerate()
        .all(|(i, d)| i == origin.document || d.is_null());
    let unlisted = if emptied {
        listing_without(files, &origin.path)?
    } else {
        None
    };
    let deletion = Deletion {
        path: origin.path.clone(),
        document: origin.document,
        emptied,
        unlisted,
    };
    let after = built(&with_edits(files, &deletion.edits())?, dir)?;
    let others_same = before
        .iter()
        .filter(|r| !same_object(&r.value, object))
        .all(|b| after.iter().any(|a| a.value == b.value));
    if after.len() + 1 != before.len() || !others_same {
        return Err(refuse(format!(
            "removing it from {} would change other objects the layout builds",
            origin.path
        )));
    }
    Ok(deletion)
}

/// The kustomization of `files` whose `resources` list `path`, without that entry.
fn listing_without(files: &Files, path: &str) -> Result<Option<DocumentEdit>, Unplaceable> {
    let mut documents = Documents::new(files);
    for k in files
        .keys()
        .filter(|k| super::KUSTOMIZATION_FILE_NAMES.contains(&k.rsplit('/').next().unwrap_or(k)))
    {
        let dir = k.rsplit_once('/').map_or("", |(d, _)| d);
        let docs = documents.all(k)?;
        let Some(document) = docs.iter().position(|d| !d.is_null()) else {
            continue;
        };
        let mut value = docs[document].clone();
        let Some(resources) = value.get_mut("resources").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = resources.len();
        resources
            .retain(|e| e.as_str().and_then(|rel| super::join(dir, rel)).as_deref() != Some(path));
        if resources.len() != before {
            return Ok(Some(DocumentEdit {
                path: k.clone(),
                document,
                value,
            }));
        }
    }
    Ok(None)
}

/// `files` with `edits` made, each edited file written again as plain YAML (comments and
/// layout are the in-place editor's business; this is for rendering the result).
pub fn with_edits(files: &Files, edits: &[DocumentEdit]) -> Result<Files, KustomizeError> {
    let mut out = files.clone();
    let paths: std::collections::BTreeSet<&str> = edits.iter().map(|e| e.path.as_str()).collect();
    for path in paths {
        let bytes = files.get(path).ok_or_else(|| KustomizeError::Missing {
            file: path.to_string(),
            what: "file",
            path: path.to_string(),
        })?;
        let mut docs = super::file::documents_of(path, bytes)?;
        for e in edits.iter().filter(|e| e.path == path) {
            if let Some(slot) = docs.get_mut(e.document) {
                slot.clone_from(&e.value);
            }
        }
        let text: Vec<String> = docs
            .iter()
            .filter(|d| !d.is_null())
            .map(|d| yaml_serde::to_string(d).unwrap_or_default())
            .collect();
        out.insert(path.to_string(), text.join("---\n").into_bytes());
    }
    Ok(out)
}

/// Places one changed field (`value`: its live value, `None`: removed).
fn place(
    object: &Resource,
    field: &str,
    value: Option<&Value>,
    documents: &mut Documents<'_>,
) -> Result<(), Unplaceable> {
    let refuse = |reason: String| Unplaceable::Field {
        field: field.to_string(),
        reason,
    };
    if field == "/metadata/name"
        || field == "/metadata/namespace"
        || field == "/kind"
        || field == "/apiVersion"
    {
        return Err(refuse(
            "the object's identity comes from the layout's names; rename it in Git".into(),
        ));
    }
    if place_in_layers(object, field, value, documents)? {
        return Ok(());
    }
    let Some(origin) = &object.origin else {
        return Err(refuse(
            "the object is generated (configMapGenerator or secretGenerator): change the generator's sources in Git".into(),
        ));
    };
    let mut doc = documents.get(origin)?;
    let Some((pointer, _)) = locate(&doc, &object.value, field) else {
        return Err(refuse(format!(
            "{} does not hold the list this field is in (a patch adds it)",
            origin.path
        )));
    };
    set(&mut doc, &pointer, value);
    documents.set(origin, doc);
    Ok(())
}

/// Places the field in the layer that set it last (an `images:` or `replicas:` entry, a patch
/// file that holds the field); `false` when no layer did.
fn place_in_layers(
    object: &Resource,
    field: &str,
    value: Option<&Value>,
    documents: &mut Documents<'_>,
) -> Result<bool, Unplaceable> {
    let refuse = |reason: String| Unplaceable::Field {
        field: field.to_string(),
        reason,
    };
    for layer in object.layers.iter().rev() {
        match layer {
            Layer::Image {
                kustomization,
                entry,
                container,
            } if field == format!("{container}/image") => {
                let at = Origin {
                    path: kustomization.clone(),
                    document: 0,
                };
                let mut k = documents.get(&at)?;
                let image = value
                    .and_then(Value::as_str)
                    .ok_or_else(|| refuse("an image cannot be removed".into()))?;
                let slot = k
                    .pointer_mut(&format!("/images/{entry}"))
                    .ok_or_else(|| refuse(format!("{kustomization} changed while it was read")))?;
                retarget(slot, image);
                documents.set(&at, k);
                return Ok(true);
            }
            Layer::Replicas {
                kustomization,
                entry,
            } if field == "/spec/replicas" => {
                let at = Origin {
                    path: kustomization.clone(),
                    document: 0,
                };
                let mut k = documents.get(&at)?;
                let count = value
                    .filter(|v| v.is_i64())
                    .ok_or_else(|| refuse("replicas is a number here".into()))?;
                let slot = k
                    .pointer_mut(&format!("/replicas/{entry}/count"))
                    .ok_or_else(|| refuse(format!("{kustomization} changed while it was read")))?;
                *slot = count.clone();
                documents.set(&at, k);
                return Ok(true);
            }
            Layer::Strategic { at: Some(at), .. } => {
                let mut doc = documents.get(at)?;
                if let Some((pointer, true)) = locate(&doc, &object.value, field) {
                    set(&mut doc, &pointer, value);
                    documents.set(at, doc);
                    return Ok(true);
                }
            }
            Layer::Json6902 { at: Some(at), .. } => {
                let mut ops = documents.get(at)?;
                let found = ops.as_array_mut().and_then(|ops| {
                    ops.iter_mut().find(|op| {
                        matches!(op["op"].as_str(), Some("add" | "replace")) && op["path"] == field
                    })
                });
                if let (Some(op), Some(v)) = (found, value) {
                    op["value"] = v.clone();
                    documents.set(at, ops);
                    return Ok(true);
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

/// `entry` of `images:` changed so that it gives `image`: only the fields whose value changes
/// are written (an in-place edit then keeps the entry's comments and layout).
fn retarget(entry: &mut Value, image: &str) {
    let live = parse_image(image);
    let Some(map) = entry.as_object_mut() else {
        return;
    };
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let wanted = [
        (
            "newName",
            (live.name != name).then(|| live.name.to_string()),
        ),
        (
            "newTag",
            live.digest
                .is_none()
                .then_some(live.tag)
                .flatten()
                .map(str::to_string),
        ),
        ("digest", live.digest.map(str::to_string)),
    ];
    for (field, value) in wanted {
        match value {
            Some(v) if map.get(field).and_then(Value::as_str) != Some(v.as_str()) => {
                map.insert(field.into(), json!(v));
            }
            Some(_) => {}
            None => {
                map.remove(field);
            }
        }
    }
}

/// The pointer in `doc` (a source or patch document) of the built object's `field`, and
/// whether `doc` holds that field: list items are found by their key (`name`,
/// `containerPort`, …), not their place, since patches add and reorder them. `None` when a
/// list on the way is not in `doc`.
fn locate(doc: &Value, built: &Value, field: &str) -> Option<(String, bool)> {
    let mut at_doc = Some(doc);
    let mut at_built = built;
    let mut out = String::new();
    for segment in field.split('/').skip(1) {
        if let Value::Array(items) = at_built {
            let index: usize = segment.parse().ok()?;
            let item = items.get(index)?;
            let list = at_doc?.as_array()?;
            let found = match list_key(item) {
                Some((key, id)) => list.iter().position(|d| d.get(key) == Some(id))?,
                None if index < list.len() => index,
                None => return None,
            };
            out.push_str(&format!("/{found}"));
            at_doc = list.get(found);
            at_built = item;
        } else {
            let key = segment.replace("~1", "/").replace("~0", "~");
            out.push('/');
            out.push_str(segment);
            at_built = at_built.get(&key).unwrap_or(&Value::Null);
            at_doc = at_doc.and_then(|d| d.get(&key));
        }
    }
    Some((out, at_doc.is_some()))
}

/// The key a list item is told apart by, and its value.
fn list_key(item: &Value) -> Option<(&'static str, &Value)> {
    [
        "name",
        "containerPort",
        "port",
        "mountPath",
        "devicePath",
        "ip",
        "topologyKey",
        "type",
    ]
    .into_iter()
    .find_map(|k| item.get(k).map(|v| (k, v)))
}

/// Sets (or with `None` removes) the field at `pointer` of `doc`, creating maps on the way.
fn set(doc: &mut Value, pointer: &str, value: Option<&Value>) {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = segments.split_last() else {
        return;
    };
    let mut at = doc;
    for segment in parents {
        if at.is_null() {
            *at = Value::Object(Map::new());
        }
        at = match at {
            Value::Array(items) => {
                match segment.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(item) => item,
                    None => return,
                }
            }
            Value::Object(map) => map.entry(segment.clone()).or_insert(Value::Null),
            _ => return,
        };
    }
    if at.is_null() && value.is_some() {
        *at = Value::Object(Map::new());
    }
    match (at, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.clone(), v.clone());
        }
        (Value::Object(map), None) => {
            map.remove(last);
        }
        (Value::Array(items), Some(v)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = v.clone();
            }
        }
        (Value::Array(items), None) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < items.len()) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The render after the edits gives `live` for its object and changes no other object.
fn verify(
    before: &[Resource],
    after: &[Resource],
    live: &Value,
    touched: &[String],
) -> Result<(), Unplaceable> {
    let files = touched.join(", ");
    let Some(now) = after.iter().find(|r| same_object(&r.value, live)) else {
        return Err(Unplaceable::Field {
            field: String::new(),
            reason: format!("editing {files} would remove the object from the build"),
        });
    };
    let mut still = Vec::new();
    changed_fields(&now.value, live, String::new(), &mut still);
    if let Some((field, _)) = still.first() {
        return Err(Unplaceable::Field {
            field: field.clone(),
            reason: format!(
                "editing {files} does not give the live value: another layer of the layout sets it"
            ),
        });
    }
    for b in before.iter().filter(|r| !same_object(&r.value, live)) {
        let moved = after
            .iter()
            .find(|a| same_object(&a.value, &b.value))
            .is_none_or(|a| a.value != b.value);
        if moved {
            return Err(Unplaceable::Field {
                field: String::new(),
                reason: format!(
                    "editing {files} would also change {} {:?}, which the edit was not made to",
                    b.kind(),
                    b.name()
                ),
            });
        }
    }
    if after.len() != before.len() {
        return Err(Unplaceable::Field {
            field: String::new(),
            reason: format!("editing {files} would add objects to the build"),
        });
    }
    Ok(())
}
