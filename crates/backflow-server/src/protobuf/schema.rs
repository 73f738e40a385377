//! The shape of every built-in type on the wire and in JSON, read from `schema.txt`, which
//! `scripts/protobuf-schema.py` generates from Kubernetes' own `generated.proto` files and the Go
//! types they were generated from (see that script for the format).

use std::collections::HashMap;
use std::sync::LazyLock;

/// How a field repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Label {
    /// One value.
    Optional,
    /// A list.
    Repeated,
    /// A map with string keys (entries are messages `{1: key, 2: value}`).
    Map,
}

/// One field of a message.
#[derive(Debug, Clone)]
pub(super) struct FieldDef {
    /// Its name in JSON.
    pub json: String,
    /// One value, a list or a map.
    pub label: Label,
    /// A scalar name (string, bytes, bool, int32, int64, double) or a full message name; for a
    /// map, the values' type.
    pub ty: String,
    /// Its fields belong to the parent object in JSON (`json:",inline"`).
    pub inline: bool,
    /// A zero value is a value (a Go pointer, or no `omitempty`): kept, not taken for unset.
    pub zero: bool,
}

/// One message.
#[derive(Debug, Clone, Default)]
pub(super) struct MessageDef {
    /// It is a list of strings in JSON (`type ExtraValue []string`).
    pub list: bool,
    /// Its fields by number.
    pub fields: HashMap<u64, FieldDef>,
}

/// Every message, and which package serves each group version.
#[derive(Debug, Default)]
pub(super) struct Schema {
    packages: HashMap<(String, String), String>,
    messages: HashMap<String, MessageDef>,
}

/// A line of `schema.txt` that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("schema.txt line {line}: {text:?} does not parse")]
pub(super) struct SchemaError {
    line: usize,
    text: String,
}

impl Schema {
    /// The schema built into the server.
    pub(super) fn builtin() -> &'static Schema {
        static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
            Schema::parse(include_str!("schema.txt")).unwrap_or_else(|e| {
                // A build whose generated file is broken decodes no protobuf body (each
                // answers 415 naming the type) rather than failing every request.
                tracing::error!(error = %e, "the built-in protobuf schema does not parse");
                Schema::default()
            })
        });
        &SCHEMA
    }

    /// Parses the generated text.
    pub(super) fn parse(text: &str) -> Result<Self, SchemaError> {
        let mut schema = Self::default();
        let mut current: Option<(String, MessageDef)> = None;
        for (i, line) in text.lines().enumerate() {
            let fail = || SchemaError {
                line: i + 1,
                text: line.to_string(),
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                [first, ..] if first.starts_with('#') => {}
                ["G", group, version, package] => {
                    let group = if *group == "-" { "" } else { group };
                    schema.packages.insert(
                        (group.to_string(), (*version).to_string()),
                        (*package).to_string(),
                    );
                }
                ["M", name, rest @ ..] => {
                    if let Some((n, m)) = current.take() {
                        schema.messages.insert(n, m);
                    }
                    let message = MessageDef {
                        list: rest == ["list"],
                        fields: HashMap::new(),
                    };
                    current = Some(((*name).to_string(), message));
                }
                [number, json, label, ty, flags @ ..] => {
                    let (_, message) = current.as_mut().ok_or_else(fail)?;
                    let number: u64 = number.parse().map_err(|_| fail())?;
                    let label = match *label {
                        "o" => Label::Optional,
                        "r" => Label::Repeated,
                        "m" => Label::Map,
                        _ => return Err(fail()),
                    };
                    let field = FieldDef {
                        json: (*json).to_string(),
                        label,
                        ty: (*ty).to_string(),
                        inline: flags.contains(&"inline"),
                        zero: flags.contains(&"zero"),
                    };
                    message.fields.insert(number, field);
                }
                _ => return Err(fail()),
            }
        }
        if let Some((n, m)) = current {
            schema.messages.insert(n, m);
        }
        Ok(schema)
    }

    /// The message of `kind` in `api_version` (`v1`, `apps/v1`), if it is a built-in type.
    pub(super) fn object(&self, api_version: &str, kind: &str) -> Option<String> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let package = self
            .packages
            .get(&(group.to_string(), version.to_string()))?;
        let name = format!("{package}.{kind}");
        self.messages.contains_key(&name).then_some(name)
    }

    /// One message by its full name.
    pub(super) fn message(&self, name: &str) -> Option<&MessageDef> {
        self.messages.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_schema_parses_whole() {
        let schema = Schema::parse(include_str!("schema.txt")).expect("parses");
        assert!(schema.messages.len() > 1_000, "{}", schema.messages.len());
        let job = schema.object("batch/v1", "Job").expect("batch/v1 Job");
        let spec = &schema.message(&job).expect("Job").fields[&2];
        assert_eq!(
            (spec.json.as_str(), spec.ty.as_str()),
            ("spec", "k8s.io.api.batch.v1.JobSpec")
        );
        assert_eq!(
            schema.object("v1", "ConfigMap").as_deref(),
            Some("k8s.io.api.core.v1.ConfigMap")
        );
        assert_eq!(
            schema
                .object("rbac.authorization.k8s.io/v1", "Role")
                .as_deref(),
            Some("k8s.io.api.rbac.v1.Role")
        );
        assert_eq!(schema.object("example.com/v1", "Widget"), None);
    }

    #[test]
    fn a_broken_line_is_named() {
        let err = Schema::parse("M a.B\n1 name x string\n").expect_err("label x");
        assert_eq!(
            err.to_string(),
            "schema.txt line 2: \"1 name x string\" does not parse"
        );
    }
}
