//! A `kustomization.yaml` read, and what it may hold.

use serde_json::Value;

use super::{Files, KustomizeError};

/// The names kustomize looks for in a folder, in its order.
pub const KUSTOMIZATION_FILE_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Fields rendered.
const RENDERED: [&str; 17] = [
    "resources",
    "bases",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "images",
    "replicas",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "sortOptions",
];

/// Fields that say nothing about the objects.
const IGNORED: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// What backflow says of each field it does not render.
fn why_not(field: &str) -> &'static str {
    match field {
        "helmCharts" | "helmGlobals" | "helmChartInflationGenerator" => {
            "Helm charts are rendered by a chart tool; commit the rendered manifests instead"
        }
        "components" => "components are not rendered yet",
        "generators" | "transformers" | "validators" => "plugins run code backflow does not run",
        "replacements" | "vars" => "values copied between objects cannot be traced back",
        "crds" | "openapi" | "configurations" => "custom transformer configuration is not read",
        "buildMetadata" => "build annotations are not written",
        _ => "not a field backflow knows",
    }
}

/// How many kustomization files folder `dir` holds.
pub(super) fn count(files: &Files, dir: &str) -> usize {
    KUSTOMIZATION_FILE_NAMES
        .iter()
        .filter(|name| {
            let path = if dir.is_empty() {
                (**name).to_string()
            } else {
                format!("{dir}/{name}")
            };
            files.contains_key(&path)
        })
        .count()
}

/// The kustomization file of folder `dir`, if it has one.
pub(super) fn find<'a>(files: &'a Files, dir: &str) -> Option<(String, &'a [u8])> {
    KUSTOMIZATION_FILE_NAMES.iter().find_map(|name| {
        let path = if dir.is_empty() {
            (*name).to_string()
        } else {
            format!("{dir}/{name}")
        };
        files.get(&path).map(|bytes| (path, bytes.as_slice()))
    })
}

/// The kustomization at `path`, checked to use only what is rendered.
pub(super) fn read(path: &str, bytes: &[u8]) -> Result<Value, KustomizeError> {
    let invalid = |reason: String| KustomizeError::Invalid {
        file: path.to_string(),
        reason,
    };
    let value = first_document(path, bytes)?;
    let value = if value.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        value
    };
    let Some(fields) = value.as_object() else {
        return Err(invalid("a kustomization is a map of fields".into()));
    };
    for field in fields.keys() {
        if !RENDERED.contains(&field.as_str()) && !IGNORED.contains(&field.as_str()) {
            return Err(KustomizeError::Unsupported {
                file: path.to_string(),
                feature: field.clone(),
                why: why_not(field).into(),
            });
        }
    }
    if let Some(kind) = value.get("kind").and_then(Value::as_str)
        && kind != "Kustomization"
    {
        return Err(KustomizeError::Unsupported {
            file: path.to_string(),
            feature: format!("kind: {kind}"),
            why: "only a Kustomization is built (a Component is included by one)".into(),
        });
    }
    Ok(value)
}

/// Every document of a file (an empty one is null), read within the limits every manifest is
/// read with (size, documents, alias expansion), numbered as in-place edits number them.
pub(super) fn documents_of(path: &str, bytes: &[u8]) -> Result<Vec<Value>, KustomizeError> {
    let parsed = crate::document::parse_file(path, bytes).map_err(|e| KustomizeError::Invalid {
        file: path.to_string(),
        reason: e.to_string(),
    })?;
    Ok(parsed.docs.into_iter().map(|d| d.value).collect())
}

/// The first document of a file that is not empty ([`documents_of`]).
pub(super) fn first_document(path: &str, bytes: &[u8]) -> Result<Value, KustomizeError> {
    Ok(documents_of(path, bytes)?
        .into_iter()
        .find(|v| !v.is_null())
        .unwrap_or(Value::Null))
}

/// The strings of list field `field` (a missing field is an empty list).
pub(super) fn strings(k: &Value, field: &str, file: &str) -> Result<Vec<String>, KustomizeError> {
    match k.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| KustomizeError::Invalid {
                        file: file.to_string(),
                        reason: format!("{field}: every entry is a string, found {i}"),
                    })
            })
            .collect(),
        Some(other) => Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("{field} is a list, found {other}"),
        }),
    }
}

/// The entries of list field `field` (a missing field is an empty list).
pub(super) fn entries<'a>(
    k: &'a Value,
    field: &str,
    file: &str,
) -> Result<&'a [Value], KustomizeError> {
    match k.get(field) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("{field} is a list, found {other}"),
        }),
    }
}

/// A map of strings (labels, annotations), missing as empty.
pub(super) fn string_map(
    v: Option<&Value>,
    what: &str,
    file: &str,
) -> Result<Vec<(String, String)>, KustomizeError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => Ok(m
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect()),
        Some(other) => Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("{what} is a map of strings, found {other}"),
        }),
    }
}
