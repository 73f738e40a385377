//! `configMapGenerator` and `secretGenerator`: objects made from literals, files and env
//! files, each named with kustomize's hash of its content unless told not to.

use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::build::{Resource, add};
use super::file::{entries, string_map, strings};
use super::{Files, KustomizeError, join};

/// Which generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generated {
    ConfigMap,
    Secret,
}

impl Generated {
    fn kind(self) -> &'static str {
        match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        }
    }
}

/// Runs the kustomization's generators over `resources` (a `behavior: merge` or `replace`
/// entry changes the object a base made).
pub(super) fn run(
    files: &Files,
    dir: &str,
    file: &str,
    k: &Value,
    resources: &mut Vec<Resource>,
) -> Result<(), KustomizeError> {
    let defaults = k.get("generatorOptions").cloned().unwrap_or(Value::Null);
    for (field, what) in [
        ("configMapGenerator", Generated::ConfigMap),
        ("secretGenerator", Generated::Secret),
    ] {
        for entry in entries(k, field, file)? {
            let made = generate(files, dir, file, entry, what, &defaults)?;
            place(resources, made, entry, file)?;
        }
    }
    Ok(())
}

/// Adds a generated object, or lays it over the one it merges into or replaces.
fn place(
    resources: &mut Vec<Resource>,
    made: Resource,
    entry: &Value,
    file: &str,
) -> Result<(), KustomizeError> {
    let behavior = entry["behavior"].as_str().unwrap_or("create");
    let existing = resources.iter_mut().find(|r| {
        r.kind() == made.kind()
            && r.was_called(made.name())
            && (made.namespace().is_empty() || r.was_in(made.namespace()))
    });
    match (behavior, existing) {
        ("create", _) => add(resources, made, file),
        ("merge", Some(old)) => {
            merge_generated(old, &made);
            Ok(())
        }
        ("replace", Some(old)) => {
            let name = old.name().to_string();
            let namespace = old.namespace().to_string();
            old.value = made.value;
            if let Some(meta) = old.value.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), json!(name));
                if !namespace.is_empty() {
                    meta.insert("namespace".into(), json!(namespace));
                }
            }
            old.needs_hash = made.needs_hash;
            Ok(())
        }
        (b @ ("merge" | "replace"), None) => Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!(
                "{} generator {:?} has behavior {b}, but no base makes a {0} of that name",
                made.kind(),
                made.name()
            ),
        }),
        (other, _) => Err(KustomizeError::Invalid {
            file: file.to_string(),
            reason: format!("generator behavior {other:?}: expected create, merge or replace"),
        }),
    }
}

/// `made` laid over `old` (`behavior: merge`): data, labels and annotations added to.
fn merge_generated(old: &mut Resource, made: &Resource) {
    let extend = |into: Option<&mut Value>, from: Option<&Value>| {
        if let (Some(Value::Object(into)), Some(Value::Object(from))) = (into, from) {
            into.extend(from.clone());
        }
    };
    for field in ["data", "binaryData"] {
        if old.value.get(field).is_none()
            && let (Some(map), Some(new)) = (old.value.as_object_mut(), made.value.get(field))
        {
            map.insert(field.into(), new.clone());
            continue;
        }
        extend(old.value.get_mut(field), made.value.get(field));
    }
    for field in ["labels", "annotations"] {
        let from = made.value["metadata"].get(field);
        match old.value.get_mut("metadata").and_then(Value::as_object_mut) {
            Some(meta) if meta.get(field).is_none() => {
                if let Some(new) = from {
                    meta.insert(field.into(), new.clone());
                }
            }
            Some(meta) => extend(meta.get_mut(field), from),
            None => {}
        }
    }
    old.needs_hash = old.needs_hash && made.needs_hash;
}

/// The object one generator entry makes.
fn generate(
    files: &Files,
    dir: &str,
    file: &str,
    entry: &Value,
    what: Generated,
    defaults: &Value,
) -> Result<Resource, KustomizeError> {
    let invalid = |reason: String| KustomizeError::Invalid {
        file: file.to_string(),
        reason,
    };
    let Some(name) = entry["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(invalid(format!(
            "a {} generator entry needs a name",
            what.kind()
        )));
    };
    let pairs = sources(files, dir, file, entry)?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some((key, _)) = pairs.iter().find(|(k, _)| !seen.insert(k.as_str())) {
        return Err(invalid(format!(
            "{} generator {name:?} has the key {key:?} twice (kustomize refuses it)",
            what.kind()
        )));
    }
    // Either level turning a switch on turns it on (kustomize ORs them).
    let option = |field: &str| {
        [entry["options"].get(field), defaults.get(field)]
            .into_iter()
            .flatten()
            .any(|v| v.as_bool() == Some(true))
    };
    let mut object = json!({"apiVersion": "v1", "kind": what.kind(), "metadata": {"name": name}});
    if let Some(ns) = entry["namespace"].as_str() {
        object["metadata"]["namespace"] = json!(ns);
    }
    for field in ["labels", "annotations"] {
        let mut all = string_map(defaults.get(field), field, file)?;
        all.extend(string_map(entry["options"].get(field), field, file)?);
        if !all.is_empty() {
            object["metadata"][field] =
                Value::Object(all.into_iter().map(|(k, v)| (k, json!(v))).collect());
        }
    }
    fill(&mut object, what, pairs, entry);
    if option("immutable") {
        object["immutable"] = json!(true);
    }
    let mut r = Resource::new(object);
    r.needs_hash = !option("disableNameSuffixHash");
    Ok(r)
}

/// The keys and contents an entry's `literals`, `files` and `envs` give, in that order.
fn sources(
    files: &Files,
    dir: &str,
    file: &str,
    entry: &Value,
) -> Result<Vec<(String, Vec<u8>)>, KustomizeError> {
    let invalid = |reason: String| KustomizeError::Invalid {
        file: file.to_string(),
        reason,
    };
    let mut pairs: Vec<(String, Vec<u8>)> = Vec::new();
    for literal in strings(entry, "literals", file)? {
        let Some((key, value)) = literal.split_once('=') else {
            return Err(invalid(format!("literal {literal:?} is not KEY=VALUE")));
        };
        pairs.push((key.to_string(), unquoted(value).as_bytes().to_vec()));
    }
    for source in strings(entry, "files", file)? {
        let (key, rel) = match source.split_once('=') {
            Some((key, rel)) => (key.to_string(), rel.to_string()),
            None => (
                source.rsplit('/').next().unwrap_or(&source).to_string(),
                source.clone(),
            ),
        };
        pairs.push((key, read(files, dir, file, &rel)?.to_vec()));
    }
    let mut env_files = strings(entry, "envs", file)?;
    if let Some(env) = entry["env"].as_str() {
        env_files.push(env.to_string());
    }
    for rel in env_files {
        let text = String::from_utf8_lossy(read(files, dir, file, &rel)?).into_owned();
        for line in text.lines() {
            let line = line.trim_start().trim_end_matches('\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(invalid(format!(
                    "{rel}: {line:?} takes its value from the environment of the build, which backflow does not have"
                )));
            };
            pairs.push((key.to_string(), value.as_bytes().to_vec()));
        }
    }
    Ok(pairs)
}

/// The data of the generated object: a `ConfigMap`'s text in `data` (other bytes in
/// `binaryData`), a Secret's everything base64 in `data`, with its `type`.
fn fill(object: &mut Value, what: Generated, pairs: Vec<(String, Vec<u8>)>, entry: &Value) {
    let b64 = |b: &[u8]| wrapped_base64(b);
    let mut data = Map::new();
    let mut binary = Map::new();
    for (key, bytes) in pairs {
        match (what, String::from_utf8(bytes)) {
            (Generated::ConfigMap, Ok(text)) => {
                data.insert(key, json!(text));
            }
            (Generated::ConfigMap, Err(e)) => {
                binary.insert(key, json!(b64(e.as_bytes())));
            }
            (Generated::Secret, Ok(text)) => {
                data.insert(key, json!(b64(text.as_bytes())));
            }
            (Generated::Secret, Err(e)) => {
                data.insert(key, json!(b64(e.as_bytes())));
            }
        }
    }
    if !data.is_empty() {
        object["data"] = Value::Object(data);
    }
    if !binary.is_empty() {
        object["binaryData"] = Value::Object(binary);
    }
    if what == Generated::Secret {
        object["type"] = json!(entry["type"].as_str().unwrap_or("Opaque"));
    }
}

/// Base64 as kustomize writes a Secret's values: more than one line of 70 characters is
/// written as lines, each ended by a newline.
fn wrapped_base64(bytes: &[u8]) -> String {
    const LINE: usize = 70;
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    if text.len() < LINE {
        return text;
    }
    let mut out = String::with_capacity(text.len() + text.len() / LINE + 1);
    for chunk in text.as_bytes().chunks(LINE) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out
}

/// A literal's value without the quotes around it.
fn unquoted(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

fn read<'a>(
    files: &'a Files,
    dir: &str,
    file: &str,
    rel: &str,
) -> Result<&'a [u8], KustomizeError> {
    let path = join(dir, rel).ok_or_else(|| KustomizeError::Invalid {
        file: file.to_string(),
        reason: format!("{rel:?} leaves the repository"),
    })?;
    files
        .get(&path)
        .map(Vec::as_slice)
        .ok_or(KustomizeError::Missing {
            file: file.to_string(),
            what: "generator source",
            path,
        })
}

/// Appends kustomize's content hash to every generated object's name, as the last step of
/// a build (after prefixes and suffixes).
pub(super) fn add_hashes(resources: &mut [Resource]) {
    for r in resources.iter_mut().filter(|r| r.needs_hash) {
        let hash = content_hash(&r.value);
        let name = format!("{}-{hash}", r.name());
        r.rename(name);
    }
}

/// kustomize's hash: SHA-256 of the JSON Go writes of the kind, data and type (keys sorted,
/// HTML characters escaped; its `name` field is written empty: the hash depends on the
/// content alone), its first ten hex digits with `0`, `1`, `3`, `a`, `e` replaced so the
/// suffix never reads as a word or a number.
fn content_hash(object: &Value) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("kind", go_json(&object["kind"])),
        ("name", go_json(&json!(""))),
        (
            "data",
            go_json(&object.get("data").cloned().unwrap_or_else(|| json!({}))),
        ),
    ];
    if object["kind"] == "Secret" {
        fields.push(("type", go_json(&object["type"])));
    } else if let Some(binary) = object.get("binaryData") {
        fields.push(("binaryData", go_json(binary)));
    }
    if let Some(immutable) = object.get("immutable") {
        fields.push(("immutable", go_json(immutable)));
    }
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let body: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{}:{v}", go_json(&json!(k))))
        .collect();
    let encoded = format!("{{{}}}", body.join(","));
    let digest = Sha256::digest(encoded.as_bytes());
    digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(10)
        .map(|nibble| match nibble {
            0 => 'g',
            1 => 'h',
            3 => 'k',
            10 => 'm',
            14 => 't',
            n => char::from_digit(u32::from(n), 16).unwrap_or('x'),
        })
        .collect()
}

/// `value` as Go's `encoding/json` writes it: object keys sorted, `<`, `>`, `&`, U+2028 and
/// U+2029 escaped.
fn go_json(value: &Value) -> String {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_json(&json!(k)), go_json(&m[k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_json).collect::<Vec<_>>().join(",")
        ),
        other => other
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029"),
    }
}
