//! Kustomize layouts rendered as `kubectl kustomize` renders them, for the features real
//! repositories use: `resources` (files and nested kustomizations), `namespace`,
//! `namePrefix`/`nameSuffix`, `labels`/`commonLabels`, `commonAnnotations`, `images`,
//! `replicas`, `patches` (strategic merge and JSON 6902, with targets),
//! `patchesStrategicMerge`, `patchesJson6902`, `configMapGenerator`/`secretGenerator` (with
//! their hash suffixes, and the references to what they generate rewritten).
//!
//! Anything else a kustomization may say (remote bases, Helm charts, plugins, components,
//! replacements, …) is refused with [`KustomizeError::Unsupported`], never guessed at.
//!
//! - `file.rs`: a `kustomization.yaml` read, and what it may hold;
//! - `build.rs`: one kustomization's build: its resources, generators, patches, transformers;
//! - `generate.rs`: the `ConfigMap` and `Secret` generators, and kustomize's name hash;
//! - `transform.rs`: namespace, prefixes and suffixes, labels, annotations, images, replicas;
//! - `patch.rs`: the patches and what they target;
//! - `refs.rs`: references to renamed objects, rewritten after the build;
//! - `project.rs`: a live edit traced back to the documents responsible for its fields.

mod build;
mod file;
mod generate;
mod patch;
mod project;
mod refs;
mod transform;

use std::collections::BTreeMap;

use serde_json::Value;

pub use file::KUSTOMIZATION_FILE_NAMES;
pub use project::{Deletion, DocumentEdit, Unplaceable, deletion, project, with_edits};

/// Why a kustomization does not render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KustomizeError {
    /// It uses a feature backflow does not render: the folder is applied or edited by nobody
    /// rather than guessed at.
    #[error("{file}: `{feature}` is not supported by backflow's kustomize rendering ({why})")]
    Unsupported {
        /// The kustomization file.
        file: String,
        /// The field or form it uses.
        feature: String,
        /// What backflow renders instead, or why not.
        why: String,
    },
    /// A file or folder it names is not in the tree.
    #[error("{file}: {what} {path:?} is not in the repository")]
    Missing {
        /// The kustomization file.
        file: String,
        /// What it is (`resource`, `patch`, `file`, …).
        what: &'static str,
        /// The path as resolved.
        path: String,
    },
    /// A file does not read as what it should be.
    #[error("{file}: {reason}")]
    Invalid {
        /// The file concerned.
        file: String,
        /// What is wrong, for a person.
        reason: String,
    },
    /// Kustomizations that include each other.
    #[error("{file}: includes itself through {path}")]
    Cycle {
        /// The kustomization file.
        file: String,
        /// The folder that closes the cycle.
        path: String,
    },
}

/// The repository's files, by path from its root (`apps/base/deployment.yaml`).
pub type Files = BTreeMap<String, Vec<u8>>;

/// The objects the kustomization in folder `dir` of `files` renders, in the order
/// `kubectl kustomize` prints them.
pub fn render(files: &Files, dir: &str) -> Result<Vec<Value>, KustomizeError> {
    let mut objects: Vec<Value> = built(files, dir)?.into_iter().map(|r| r.value).collect();
    sort_legacy(&mut objects);
    Ok(objects)
}

/// The build's objects with where each came from, before sorting.
fn built(files: &Files, dir: &str) -> Result<Vec<build::Resource>, KustomizeError> {
    let mut resources = build::build(files, &normalize(dir), &mut Vec::new())?;
    generate::add_hashes(&mut resources);
    refs::fix_references(&mut resources);
    Ok(resources)
}

/// What makes the build of kustomization `text` (at `path`) more than the files it lists:
/// the fields that transform, patch or generate, and resources from outside its folder. Empty
/// when applying its folder's files as they are gives the same objects.
#[must_use]
pub fn transforms(path: &str, text: &[u8]) -> Vec<String> {
    let Ok(k) = file::first_document(path, text) else {
        return vec!["(not a readable kustomization)".into()];
    };
    let Some(fields) = k.as_object() else {
        return Vec::new();
    };
    let mut out: Vec<String> = fields
        .keys()
        .filter(|f| {
            !matches!(
                f.as_str(),
                "apiVersion" | "kind" | "metadata" | "resources" | "bases" | "sortOptions"
            )
        })
        .cloned()
        .collect();
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let inside = |entry: &str| {
        !is_remote(entry)
            && join(dir, entry).is_some_and(|p| dir.is_empty() || p.starts_with(&format!("{dir}/")))
    };
    for field in ["resources", "bases"] {
        for entry in k[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !inside(entry) {
                out.push(format!("{field}: {entry}"));
            }
        }
    }
    out
}

/// The files kustomization `text` (at `path`) reads besides its resources — patch files and
/// generator sources — by path from the repository's root: documents of the layout, not
/// objects, wherever they are.
#[must_use]
pub fn named_files(path: &str, text: &[u8]) -> Vec<String> {
    let Ok(k) = file::first_document(path, text) else {
        return Vec::new();
    };
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut named: Vec<&str> = Vec::new();
    fn strings(v: &Value) -> Vec<&str> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }
    named.extend(
        strings(&k["patchesStrategicMerge"])
            .into_iter()
            .filter(|e| !e.contains('\n')),
    );
    for field in ["patches", "patchesJson6902"] {
        named.extend(
            k[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["path"].as_str()),
        );
    }
    for field in ["configMapGenerator", "secretGenerator"] {
        for entry in k[field].as_array().into_iter().flatten() {
            for source in strings(&entry["files"]) {
                named.push(source.split_once('=').map_or(source, |(_, p)| p));
            }
            named.extend(strings(&entry["envs"]));
            named.extend(entry["env"].as_str());
        }
    }
    named.into_iter().filter_map(|rel| join(dir, rel)).collect()
}

/// A kustomize layout of a folder: the first kustomization on its path down, when it (or one
/// below it) builds more than it lists — as Flux's kustomize-controller finds what to build
/// in a folder with no kustomization at its top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Its folder.
    pub dir: String,
    /// Its kustomization file.
    pub kustomization: String,
    /// What makes its build more than its files (see [`transforms`]).
    pub transforms: Vec<String>,
    /// Files its kustomizations read from elsewhere (patches, generator sources).
    pub named: Vec<String>,
}

impl Layout {
    /// Whether `path` is one of its documents (not an object of the folder).
    #[must_use]
    pub fn holds(&self, path: &str) -> bool {
        self.dir.is_empty()
            || path.starts_with(&format!("{}/", self.dir))
            || self.named.iter().any(|n| n == path)
    }
}

/// The layouts among `kustomizations` (each file's path and bytes: every kustomization file of
/// a folder).
#[must_use]
pub fn layouts(kustomizations: &[(String, Vec<u8>)]) -> Vec<Layout> {
    let dir_of = |p: &str| {
        p.rsplit_once('/')
            .map_or(String::new(), |(d, _)| d.to_string())
    };
    let under = |d: &str, p: &str| d.is_empty() || p.starts_with(&format!("{d}/"));
    let dirs: Vec<String> = kustomizations.iter().map(|(p, _)| dir_of(p)).collect();
    let mut out = Vec::new();
    for (path, _) in kustomizations {
        let dir = dir_of(path);
        if dirs.iter().any(|o| *o != dir && under(o, &dir)) {
            continue;
        }
        let mut transforms_all = Vec::new();
        let mut named = Vec::new();
        for (inner, bytes) in kustomizations.iter().filter(|(p, _)| under(&dir, p)) {
            let t = transforms(inner, bytes);
            if !t.is_empty() {
                named.extend(named_files(inner, bytes));
                transforms_all.extend(t);
            }
        }
        if !transforms_all.is_empty() {
            out.push(Layout {
                dir,
                kustomization: path.clone(),
                transforms: transforms_all,
                named,
            });
        }
    }
    out
}

/// Whether `path` is a kustomization file (by its name).
#[must_use]
pub fn is_kustomization(path: &str) -> bool {
    KUSTOMIZATION_FILE_NAMES.contains(&path.rsplit('/').next().unwrap_or(path))
}

/// Whether a `resources` entry names something fetched at build time (a Git repository or an
/// URL), not a path of the repository.
fn is_remote(entry: &str) -> bool {
    entry.contains("://") || entry.starts_with("github.com/") || entry.starts_with("git@")
}

/// What the kustomizations among `files` read that `files` do not hold: folders and files
/// outside the folders already read (`inside`), by path from the repository's root — what an
/// applier reading only its claim's folders must read besides to build them.
#[must_use]
pub fn outside_paths(files: &[(String, Vec<u8>)], inside: &[String]) -> Vec<String> {
    let held = |p: &str| {
        inside
            .iter()
            .any(|d| d.is_empty() || p == d || p.starts_with(&format!("{d}/")))
            || files.iter().any(|(f, _)| f == p)
    };
    let mut out: Vec<String> = Vec::new();
    for (path, bytes) in files {
        if !is_kustomization(path) {
            continue;
        }
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        let Ok(k) = file::first_document(path, bytes) else {
            continue;
        };
        let listed = ["resources", "bases"]
            .into_iter()
            .flat_map(|f| k[f].as_array().cloned().unwrap_or_default())
            .filter_map(|e| e.as_str().map(str::to_string))
            .filter(|e| !is_remote(e))
            .filter_map(|e| join(dir, &e));
        for wanted in listed.chain(named_files(path, bytes)) {
            if !held(&wanted) && !out.contains(&wanted) {
                out.push(wanted);
            }
        }
    }
    out
}

/// `dir` without `.`/empty segments or a trailing slash (`""`: the root).
fn normalize(dir: &str) -> String {
    dir.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// `rel` from folder `dir`, with `..` resolved; `None` when it leaves the repository.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if rel.starts_with('/') {
        Vec::new()
    } else {
        dir.split('/').filter(|s| !s.is_empty()).collect()
    };
    for segment in rel.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// kustomize's default ("legacy") order: kinds others depend on first, webhooks last; then
/// by kind, namespace and name.
fn sort_legacy(objects: &mut [Value]) {
    const FIRST: [&str; 22] = [
        "Namespace",
        "ResourceQuota",
        "StorageClass",
        "CustomResourceDefinition",
        "ServiceAccount",
        "PodSecurityPolicy",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "Secret",
        "Endpoints",
        "Service",
        "LimitRange",
        "PriorityClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Deployment",
        "StatefulSet",
        "CronJob",
        "PodDisruptionBudget",
    ];
    const LAST: [&str; 2] = [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    let rank = |o: &Value| {
        let kind = o["kind"].as_str().unwrap_or("");
        match (
            FIRST.iter().position(|k| *k == kind),
            LAST.iter().position(|k| *k == kind),
        ) {
            (Some(i), _) => i,
            (None, Some(i)) => FIRST.len() + 1 + i,
            (None, None) => FIRST.len(),
        }
    };
    let text = |o: &Value, pointer: &str| {
        o.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    objects.sort_by_key(|o| {
        (
            rank(o),
            text(o, "/kind"),
            text(o, "/apiVersion"),
            text(o, "/metadata/namespace"),
            text(o, "/metadata/name"),
        )
    });
}

#[cfg(test)]
mod tests;
