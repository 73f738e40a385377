//! Patches: strategic merge (`patchesStrategicMerge`, and `patches` entries that are not a
//! list of operations) and JSON 6902 (`patchesJson6902`, and `patches` entries that are), each
//! applied to the objects its target selects.

use serde_json::{Map, Value};

use super::build::{Layer, Origin, Resource};
use super::file::{entries, strings};
use super::{Files, KustomizeError, join};

/// Which objects a patch applies to (`target:`), kustomize's selector.
#[derive(Debug, Default)]
struct Target {
    group: Option<regex::Regex>,
    version: Option<regex::Regex>,
    kind: Option<regex::Regex>,
    name: Option<regex::Regex>,
    namespace: Option<regex::Regex>,
    label_selector: Option<String>,
    annotation_selector: Option<String>,
}

impl Target {
    fn read(v: &Value, file: &str) -> Result<Self, KustomizeError> {
        let text = |f: &str| v[f].as_str().map(str::to_string);
        let pattern = |f: &str| -> Result<Option<regex::Regex>, KustomizeError> {
            text(f)
                .map(|p| {
                    regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| KustomizeError::Invalid {
                        file: file.to_string(),
                        reason: format!("target {f} {p:?} is not a regular expression: {e}"),
                    })
                })
                .transpose()
        };
        Ok(Self {
            group: pattern("group")?,
            version: pattern("version")?,
            kind: pattern("kind")?,
            name: pattern("name")?,
            namespace: pattern("namespace")?,
            label_selector: text("labelSelector"),
            annotation_selector: text("annotationSelector"),
        })
    }

    fn selects(&self, r: &Resource) -> bool {
        let version = r.api_version().rsplit('/').next().unwrap_or("");
        let names = std::iter::once(r.name()).chain(r.previous_names.iter().map(String::as_str));
        let namespaces =
            std::iter::once(r.namespace()).chain(r.previous_namespaces.iter().map(String::as_str));
        // kustomize reads every field of a target as a regular expression, and an object
        // without a namespace as one in `default`.
        let namespaces = namespaces.map(|n| if n.is_empty() { "default" } else { n });
        self.group.as_ref().is_none_or(|re| re.is_match(r.group()))
            && self.version.as_ref().is_none_or(|re| re.is_match(version))
            && self.kind.as_ref().is_none_or(|re| re.is_match(r.kind()))
            && self
                .name
                .as_ref()
                .is_none_or(|re| names.clone().any(|n| re.is_match(n)))
            && self
                .namespace
                .as_ref()
                .is_none_or(|re| namespaces.clone().any(|n| re.is_match(n)))
            && self
                .label_selector
                .as_deref()
                .is_none_or(|s| selector_matches(s, &r.value["metadata"]["labels"]))
            && self
                .annotation_selector
                .as_deref()
                .is_none_or(|s| selector_matches(s, &r.value["metadata"]["annotations"]))
    }
}

/// A Kubernetes label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) against `labels`.
fn selector_matches(selector: &str, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|t| {
            let set = |rest: &str| -> Vec<String> {
                rest.trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect()
            };
            if let Some((k, rest)) = t.split_once(" notin ") {
                return get(k.trim()).is_none_or(|v| !set(rest).iter().any(|s| s == v));
            }
            if let Some((k, rest)) = t.split_once(" in ") {
                return get(k.trim()).is_some_and(|v| set(rest).iter().any(|s| s == v));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return get(k.trim()) != Some(v.trim());
            }
            if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                return get(k.trim()) == Some(v.trim());
            }
            match t.strip_prefix('!') {
                Some(k) => get(k.trim()).is_none(),
                None => get(t).is_some(),
            }
        })
}

/// A patch's text, and the file it is in (`None`: inline in the kustomization).
fn patch_text(
    files: &Files,
    dir: &str,
    file: &str,
    entry: &Value,
) -> Result<(String, Option<String>), KustomizeError> {
    if let Some(inline) = entry["patch"].as_str() {
        return Ok((inline.to_string(), None));
    }
    let Some(rel) = entry["path"].as_str() else {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("a patch has a path or an inline patch, found {entry}"),
        });
    };
    let path = join(dir, rel).ok_or_else(|| KustomizeError::Invalid {
        file: file.to_string(),
        reason: format!("patch {rel:?} leaves the repository"),
    })?;
    let bytes = files.get(&path).ok_or(KustomizeError::Missing {
        file: file.to_string(),
        what: "patch",
        path: path.clone(),
    })?;
    let text = String::from_utf8(bytes.clone()).map_err(|e| KustomizeError::Invalid {
        file: path.clone(),
        reason: format!("not UTF-8: {e}"),
    })?;
    Ok((text, Some(path)))
}

/// Where document `document` of a patch is, as a layer records it.
fn at(file: Option<&String>, document: usize) -> Option<Origin> {
    file.map(|path| Origin {
        path: path.clone(),
        document,
    })
}

/// The YAML documents of a patch (read as every manifest is, within its limits), each with
/// its place among the file's documents.
fn documents(text: &str, file: &str) -> Result<Vec<(usize, Value)>, KustomizeError> {
    Ok(super::file::documents_of(file, text.as_bytes())?
        .into_iter()
        .enumerate()
        .filter(|(_, d)| !d.is_null())
        .collect())
}

/// `patchesStrategicMerge`, then `patches` (kustomize's order).
pub(super) fn strategic_patches(
    files: &Files,
    dir: &str,
    file: &str,
    k: &Value,
    resources: &mut Vec<Resource>,
) -> Result<(), KustomizeError> {
    for entry in strings(k, "patchesStrategicMerge", file)? {
        let found = join(dir, &entry).filter(|p| files.contains_key(p));
        let text = match found.as_ref().and_then(|p| files.get(p)) {
            Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            None if entry.contains('\n') || entry.contains(':') => entry.clone(),
            None => {
                return Err(KustomizeError::Missing {
                    file: file.to_string(),
                    what: "patch",
                    path: join(dir, &entry).unwrap_or(entry),
                });
            }
        };
        for (document, patch) in documents(&text, file)? {
            let layer = Layer::Strategic {
                at: at(found.as_ref(), document),
                kustomization: file.to_string(),
            };
            strategic_by_own_identity(&patch, &layer, file, resources)?;
        }
    }
    for entry in entries(k, "patches", file)? {
        let (text, source) = patch_text(files, dir, file, entry)?;
        let target = match entry.get("target") {
            Some(t) => Some(Target::read(t, file)?),
            None => None,
        };
        for (document, patch) in documents(&text, file)? {
            let place = at(source.as_ref(), document);
            match (&patch, &target) {
                (Value::Array(_), Some(t)) => {
                    let layer = Layer::Json6902 {
                        at: place,
                        kustomization: file.to_string(),
                    };
                    json6902(&patch, t, &layer, file, resources)?;
                }
                (Value::Array(_), None) => {
                    return Err(KustomizeError::Invalid {
                        file: file.to_string(),
                        reason: "a JSON 6902 patch needs a target".into(),
                    });
                }
                (_, Some(t)) => {
                    let layer = Layer::Strategic {
                        at: place,
                        kustomization: file.to_string(),
                    };
                    for r in resources.iter_mut().filter(|r| t.selects(r)) {
                        strategic(r, &patch, file)?;
                        r.layers.push(layer.clone());
                    }
                    resources.retain(|r| !r.value.is_null());
                }
                (_, None) => {
                    let layer = Layer::Strategic {
                        at: place,
                        kustomization: file.to_string(),
                    };
                    strategic_by_own_identity(&patch, &layer, file, resources)?;
                }
            }
        }
    }
    Ok(())
}

/// `patchesJson6902`.
pub(super) fn json6902_patches(
    files: &Files,
    dir: &str,
    file: &str,
    k: &Value,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    for entry in entries(k, "patchesJson6902", file)? {
        let target = Target::read(&entry["target"], file)?;
        let (text, source) = patch_text(files, dir, file, entry)?;
        for (document, patch) in documents(&text, file)? {
            let layer = Layer::Json6902 {
                at: at(source.as_ref(), document),
                kustomization: file.to_string(),
            };
            json6902(&patch, &target, &layer, file, resources)?;
        }
    }
    Ok(())
}

/// A strategic merge patch applied to the object its own apiVersion, kind and name select.
fn strategic_by_own_identity(
    patch: &Value,
    layer: &Layer,
    file: &str,
    resources: &mut Vec<Resource>,
) -> Result<(), KustomizeError> {
    let kind = patch["kind"].as_str().unwrap_or("");
    let name = patch["metadata"]["name"].as_str().unwrap_or("");
    let namespace = patch["metadata"]["namespace"].as_str();
    let group = patch["apiVersion"]
        .as_str()
        .and_then(|a| a.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let found = resources.iter_mut().find(|r| {
        r.kind() == kind
            && r.group() == group
            && r.was_called(name)
            && namespace.is_none_or(|ns| r.was_in(ns))
    });
    let Some(r) = found else {
        return Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("no object of the build is {kind} {name:?}, which a patch changes"),
        });
    };
    strategic(r, patch, file)?;
    r.layers.push(layer.clone());
    resources.retain(|r| !r.value.is_null());
    Ok(())
}

/// One strategic merge patch on `r` (its name and namespace stay the object's own).
fn strategic(r: &mut Resource, patch: &Value, file: &str) -> Result<(), KustomizeError> {
    let mut patch = patch.clone();
    if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("name");
        meta.remove("namespace");
    }
    let builtin = !r.group().contains('.') || r.group().ends_with(".k8s.io");
    let kind = r.kind().to_string();
    merge_at(
        &mut r.value,
        &patch,
        &Path {
            kind: &kind,
            builtin,
        },
        file,
    )
}

/// Which object a merge is in, for the list merge keys of built-in kinds.
struct Path<'a> {
    kind: &'a str,
    builtin: bool,
}

/// The merge key of list field `field` of a built-in kind (kustomize reads them from the API's
/// schema; a custom resource's lists are replaced).
fn merge_key(path: &Path<'_>, field: &str) -> Option<&'static str> {
    if !path.builtin {
        return None;
    }
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "secrets"
        | "resourceClaims" => Some("name"),
        "ports" if path.kind == "Service" => Some("port"),
        "ports" => Some("containerPort"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        "conditions" => Some("type"),
        _ => None,
    }
}

// Long on purpose: the strategic-merge directives act on one map in a fixed order. Not the
// API server's merge (`backflow-server`'s `patch.rs`): kustomize puts a merged list's patch
// items first, merges a Service's ports by `port` and replaces a custom resource's lists.
fn merge_at(
    target: &mut Value,
    patch: &Value,
    path: &Path<'_>,
    file: &str,
) -> Result<(), KustomizeError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = p.clone();
            replaced.remove("$patch");
            *target = Value::Object(replaced);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) if other != "merge" => {
            return Err(KustomizeError::Invalid {
                file: file.to_string(),
                reason: format!("unknown patch directive $patch: {other}"),
            });
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return Ok(());
    };
    if let Some(retain) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") {
            return Err(unsupported_directive(k, file));
        }
        if k.starts_with('$') {
            if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/")
                && let (Some(Value::Array(items)), Some(gone)) = (t.get_mut(list), v.as_array())
            {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let existing = t.entry(k.clone()).or_insert(Value::Null);
        match (v, merge_key(path, k)) {
            (Value::Array(items), Some(key)) if items.iter().all(Value::is_object) => {
                *existing = Value::Array(merge_list(existing, items, key, path, file)?);
            }
            (Value::Object(_), _) => {
                merge_at(existing, v, path, file)?;
                if existing.is_null() {
                    t.remove(k);
                }
            }
            (Value::Array(items), _) if items.iter().any(|i| i.get("$patch").is_some()) => {
                return Err(unsupported_directive(
                    "$patch in a list without a merge key",
                    file,
                ));
            }
            (other, _) => *existing = other.clone(),
        }
    }
    Ok(())
}

/// `ops` as kustomize applies them: a `replace` of a path that is not there adds it.
fn lenient(ops: &json_patch::Patch, value: &Value) -> json_patch::Patch {
    let mut out = Vec::new();
    let mut current = value.clone();
    for op in &ops.0 {
        let op = match op {
            json_patch::PatchOperation::Replace(r)
                if current.pointer(r.path.as_str()).is_none() =>
            {
                json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: r.path.clone(),
                    value: r.value.clone(),
                })
            }
            other => other.clone(),
        };
        let _ = json_patch::patch(&mut current, std::slice::from_ref(&op));
        out.push(op);
    }
    json_patch::Patch(out)
}

/// A strategic-merge directive backflow does not render, refused rather than rendered
/// otherwise than kustomize would.
fn unsupported_directive(what: &str, file: &str) -> KustomizeError {
    KustomizeError::Unsupported {
        file: file.to_string(),
        feature: what.to_string(),
        why: "this strategic-merge directive is not rendered".into(),
    }
}

/// A list merged by `key` as kustomize merges it: the patch's items first, in its order (each
/// merged into the item of the same key), then the items the patch does not name; an item
/// with `$patch: delete` removes its match.
fn merge_list(
    existing: &Value,
    items: &[Value],
    key: &str,
    path: &Path<'_>,
    file: &str,
) -> Result<Vec<Value>, KustomizeError> {
    let mut rest: Vec<Value> = existing.as_array().cloned().unwrap_or_default();
    let mut merged = Vec::new();
    for item in items {
        if matches!(item.get("$patch").and_then(Value::as_str), Some(d) if d != "delete") {
            return Err(unsupported_directive("$patch in a list item", file));
        }
        let id = item.get(key);
        let pos = rest.iter().position(|m| id.is_some() && m.get(key) == id);
        let mut slot = pos.map_or(Value::Null, |i| rest.remove(i));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            continue;
        }
        merge_at(&mut slot, item, path, file)?;
        merged.push(slot);
    }
    merged.extend(rest);
    Ok(merged)
}

/// A JSON 6902 patch (a list of operations) on every object `target` selects.
fn json6902(
    patch: &Value,
    target: &Target,
    layer: &Layer,
    file: &str,
    resources: &mut [Resource],
) -> Result<(), KustomizeError> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("not a JSON 6902 patch: {e}"),
        })?;
    for r in resources.iter_mut().filter(|r| target.selects(r)) {
        let before_name = r.name().to_string();
        let ops = lenient(&ops, &r.value);
        json_patch::patch(&mut r.value, &ops).map_err(|e| KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!(
                "the JSON 6902 patch does not apply to {} {before_name:?}: {e}",
                r.kind()
            ),
        })?;
        if r.name() != before_name {
            r.previous_names.push(before_name);
        }
        r.layers.push(layer.clone());
    }
    Ok(())
}
