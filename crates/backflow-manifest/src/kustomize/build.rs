//! One kustomization's build, as kustomize accumulates it: the resources (files, and nested
//! kustomizations built first), then the generators, then the transformers in kustomize's
//! fixed order — patches, namespace, prefix and suffix, labels, annotations, JSON 6902
//! patches, replicas, images.

use serde_json::Value;

use super::file::{self, strings};
use super::{Files, KustomizeError, generate, join, patch, transform};

/// The document an object of a build was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    /// The file.
    pub path: String,
    /// Its document, counted from 0 as the file's documents are parsed.
    pub document: usize,
}

/// A layer of the build that changed an object after it was read, in the order applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Layer {
    /// A strategic merge patch: the document of a patch file, or inline in `kustomization`.
    Strategic {
        at: Option<Origin>,
        kustomization: String,
    },
    /// A JSON 6902 patch: the document of a patch file, or inline in `kustomization`.
    Json6902 {
        at: Option<Origin>,
        kustomization: String,
    },
    /// Entry `entry` of `kustomization`'s `images:` set the image at `container` (a pointer).
    Image {
        kustomization: String,
        entry: usize,
        container: String,
    },
    /// Entry `entry` of `kustomization`'s `replicas:`.
    Replicas { kustomization: String, entry: usize },
}

/// One object of a build, with what references to it may still call it.
#[derive(Debug, Clone)]
pub(super) struct Resource {
    /// The object as built so far.
    pub value: Value,
    /// Every name it had before the last rename (the declared one first).
    pub previous_names: Vec<String>,
    /// Every namespace it had before the last change.
    pub previous_namespaces: Vec<String>,
    /// A generated object that gets kustomize's content hash appended to its name.
    pub needs_hash: bool,
    /// Where it was read from (`None`: generated, or an item of a `List`).
    pub origin: Option<Origin>,
    /// What changed it after, in order.
    pub layers: Vec<Layer>,
}

impl Resource {
    pub fn new(value: Value) -> Self {
        Self {
            value,
            previous_names: Vec::new(),
            previous_namespaces: Vec::new(),
            needs_hash: false,
            origin: None,
            layers: Vec::new(),
        }
    }

    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }

    pub fn api_version(&self) -> &str {
        self.value["apiVersion"].as_str().unwrap_or("")
    }

    /// The API group (`""`: core).
    pub fn group(&self) -> &str {
        self.api_version()
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }

    pub fn namespace(&self) -> &str {
        self.value["metadata"]["namespace"].as_str().unwrap_or("")
    }

    /// Renames it, remembering the name references may still use.
    pub fn rename(&mut self, name: String) {
        let old = self.name().to_string();
        if old != name
            && let Some(meta) =
                field_mut(&mut self.value, &["metadata"]).and_then(Value::as_object_mut)
        {
            meta.insert("name".into(), Value::String(name));
            self.previous_names.push(old);
        }
    }

    /// Moves it to `namespace`, remembering the one references may still use.
    pub fn set_namespace(&mut self, namespace: &str) {
        let old = self.namespace().to_string();
        if old != namespace
            && let Some(meta) =
                field_mut(&mut self.value, &["metadata"]).and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::String(namespace.into()));
            self.previous_namespaces.push(old);
        }
    }

    /// Whether it is (or was) called `name`.
    pub fn was_called(&self, name: &str) -> bool {
        self.name() == name || self.previous_names.iter().any(|n| n == name)
    }

    /// Whether it is (or was) in `namespace`.
    pub fn was_in(&self, namespace: &str) -> bool {
        self.namespace() == namespace || self.previous_namespaces.iter().any(|n| n == namespace)
    }
}

/// The value at `path` of `value` through maps only: `None` where a step is missing or is not
/// a map (an object's fields come from the repository; indexing them for writing would panic
/// on a string where a map was expected).
pub(super) fn field_mut<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut at = value;
    for step in path {
        at = at.as_object_mut()?.get_mut(*step)?;
    }
    Some(at)
}

/// The build of the kustomization in `dir` (its path from the repository's root); `stack`
/// holds the folders including it, to refuse a cycle.
pub(super) fn build(
    files: &Files,
    dir: &str,
    stack: &mut Vec<String>,
) -> Result<Vec<Resource>, KustomizeError> {
    if file::count(files, dir) > 1 {
        return Err(KustomizeError::Invalid {
            file: format!("{dir}/kustomization.yaml"),
            reason: "the folder holds more than one kustomization file (kustomization.yaml, kustomization.yml, Kustomization): kustomize refuses to choose".into(),
        });
    }
    let Some((path, bytes)) = file::find(files, dir) else {
        return Err(KustomizeError::Missing {
            file: stack.last().cloned().unwrap_or_default(),
            what: "kustomization in folder",
            path: dir.to_string(),
        });
    };
    if stack.iter().any(|d| d == dir) {
        return Err(KustomizeError::Cycle {
            file: path,
            path: dir.to_string(),
        });
    }
    let k = file::read(&path, bytes)?;
    stack.push(dir.to_string());
    let mut resources = Vec::new();
    let mut listed = strings(&k, "resources", &path)?;
    listed.extend(strings(&k, "bases", &path)?);
    for entry in &listed {
        let found = resource(files, dir, &path, entry, stack)?;
        for r in found {
            add(&mut resources, r, &path)?;
        }
    }
    stack.pop();
    generate::run(files, dir, &path, &k, &mut resources)?;
    patch::strategic_patches(files, dir, &path, &k, &mut resources)?;
    transform::namespace(&k, &path, &mut resources)?;
    transform::prefix_suffix(&k, &mut resources);
    transform::labels(&k, &path, &mut resources)?;
    transform::annotations(&k, &path, &mut resources)?;
    patch::json6902_patches(files, dir, &path, &k, &mut resources)?;
    transform::replicas(&k, &path, &mut resources)?;
    transform::images(&k, &path, &mut resources)?;
    Ok(resources)
}

/// Adds `r`, refusing a second object with the same identity as kustomize does.
pub(super) fn add(
    resources: &mut Vec<Resource>,
    r: Resource,
    file: &str,
) -> Result<(), KustomizeError> {
    if resources.iter().any(|o| {
        o.kind() == r.kind()
            && o.group() == r.group()
            && o.name() == r.name()
            && o.namespace() == r.namespace()
    }) {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!(
                "{} {:?} (namespace {:?}) is declared twice: kustomize refuses an object it already has",
                r.kind(),
                r.name(),
                r.namespace()
            ),
        });
    }
    resources.push(r);
    Ok(())
}

/// What entry `entry` of `resources` (in kustomization `file` of folder `dir`) brings.
fn resource(
    files: &Files,
    dir: &str,
    file: &str,
    entry: &str,
    stack: &mut Vec<String>,
) -> Result<Vec<Resource>, KustomizeError> {
    if super::is_remote(entry) {
        return Err(KustomizeError::Unsupported {
            file: file.to_string(),
            feature: format!("resources: {entry}"),
            why: "a remote base is fetched at build time; vendor it into the repository".into(),
        });
    }
    let Some(path) = join(dir, entry) else {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("resource {entry:?} leaves the repository"),
        });
    };
    if let Some(bytes) = files.get(&path) {
        return objects_of(&path, bytes);
    }
    if file::find(files, &path).is_some() {
        return build(files, &path, stack);
    }
    let prefix = format!("{path}/");
    if files.keys().any(|f| f.starts_with(&prefix)) {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!(
                "resource {entry:?} is a folder without a kustomization (kustomize builds only a folder that has one)"
            ),
        });
    }
    Err(KustomizeError::Missing {
        file: file.to_string(),
        what: "resource",
        path,
    })
}

/// The objects a manifest file declares (a `List` counts as its items).
pub(super) fn objects_of(path: &str, bytes: &[u8]) -> Result<Vec<Resource>, KustomizeError> {
    let mut out = Vec::new();
    for (document, value) in file::documents_of(path, bytes)?.into_iter().enumerate() {
        match value {
            Value::Null => {}
            Value::Object(_) if is_list(&value) => {
                for item in value["items"].as_array().into_iter().flatten() {
                    out.push(checked(path, item.clone())?);
                }
            }
            value => {
                let mut r = checked(path, value)?;
                r.origin = Some(Origin {
                    path: path.to_string(),
                    document,
                });
                out.push(r);
            }
        }
    }
    Ok(out)
}

fn is_list(v: &Value) -> bool {
    v["kind"]
        .as_str()
        .is_some_and(|k| k == "List" || k.ends_with("List"))
        && v["items"].is_array()
}

/// `value` as a resource, when it names its kind and itself.
fn checked(path: &str, value: Value) -> Result<Resource, KustomizeError> {
    let names = value["kind"].is_string()
        && value["apiVersion"].is_string()
        && value["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
    if !names {
        return Err(KustomizeError::Invalid {
            file: path.to_string(),
            reason: "a document without apiVersion, kind and metadata.name is not an object kustomize builds".into(),
        });
    }
    Ok(Resource::new(value))
}
