//! `meta.k8s.io/v1` Table answers for `kubectl get`, with the columns a cluster prints.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::registry::ResourceType;

mod autoscaling;
mod cluster;
mod format;
mod pods;
mod workloads;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Reads `includeObject`; unknown values fall back to the default.
    #[must_use]
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// Whether an Accept header asks for a Table.
#[must_use]
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
}

/// The columns of a kind and the cells of one object under them.
type Printed = (Vec<Column>, Vec<Value>);

struct Column {
    name: String,
    kind: String,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

fn col(name: &str, kind: &str, priority: u8, description: &'static str) -> Column {
    Column {
        name: name.into(),
        kind: kind.into(),
        format: "",
        priority,
        description,
    }
}

fn name_column() -> Column {
    Column {
        format: "name",
        ..col(
            "Name",
            "string",
            0,
            "Name must be unique within a namespace. Cannot be updated.",
        )
    }
}

/// Columns from `(name, type, priority)`: `Name` is the name column, `Age` carries its
/// description; kubectl prints only names and hides priority 1 without `-o wide`.
fn columns(specs: &[(&str, &str, u8)]) -> Vec<Column> {
    specs
        .iter()
        .map(|(name, kind, priority)| match *name {
            "Name" => name_column(),
            "Age" => col("Age", kind, *priority, AGE_DESCRIPTION),
            _ => col(name, kind, *priority, ""),
        })
        .collect()
}

const AGE_DESCRIPTION: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

/// Formats a duration as Go's `duration.HumanDuration` does (kubectl's AGE column).
#[must_use]
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rest = s % 60;
        return if rest == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rest}s")
        };
    }
    let h = m / 60;
    if h < 3 {
        return format!("{m}m");
    }
    if h < 8 {
        let rest = m % 60;
        return if rest == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rest}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let days = h / 24;
    if h < 24 * 8 {
        let rest = h % 24;
        return if rest == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{rest}h")
        };
    }
    if days < 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if days < 365 * 8 {
        let rest = days % 365;
        return if rest == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{rest}d")
        };
    }
    format!("{years}y")
}

fn age(obj: &Value, now: SystemTime) -> String {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| humantime::parse_rfc3339(s).ok());
    match created {
        Some(t) => human_duration(now.duration_since(t).unwrap_or_default()),
        None => "<unknown>".into(),
    }
}

/// An Event's columns, as kube-apiserver's printer declares them.
fn event_columns() -> Vec<Column> {
    vec![
        col(
            "Last Seen",
            "string",
            0,
            "The time the event was last seen.",
        ),
        col("Type", "string", 0, "Type of this event."),
        col(
            "Reason",
            "string",
            0,
            "Short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col(
            "Object",
            "string",
            0,
            "The object that this event is about.",
        ),
        col(
            "Subobject",
            "string",
            1,
            "The field of the object this event is about.",
        ),
        col("Source", "string", 1, "The component reporting this event."),
        col(
            "Message",
            "string",
            0,
            "A human-readable description of the status of this operation.",
        ),
        col(
            "First Seen",
            "string",
            1,
            "The time the event was first seen.",
        ),
        col(
            "Count",
            "string",
            1,
            "The number of times this event has occurred.",
        ),
        Column {
            priority: 1,
            ..name_column()
        },
    ]
}

/// An Event's row, as kube-apiserver prints it: when it was last seen, its type and reason, the
/// object it is about (`kind/name`, lower-case kind) and its message.
fn event_row(obj: &Value, now: SystemTime) -> Printed {
    let since = |ptrs: &[&str]| {
        ptrs.iter()
            .find_map(|p| obj.pointer(p).and_then(Value::as_str))
            .and_then(|s| humantime::parse_rfc3339(s).ok())
            .map_or_else(
                || "<unknown>".to_string(),
                |t| human_duration(now.duration_since(t).unwrap_or_default()),
            )
    };
    let last_seen = since(&[
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]);
    let first_seen = since(&[
        "/firstTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]);
    let object = format!(
        "{}/{}",
        str_at(obj, "/involvedObject/kind").to_lowercase(),
        str_at(obj, "/involvedObject/name")
    );
    let source = [
        str_at(obj, "/source/component"),
        str_at(obj, "/source/host"),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join(", ");
    // As kubectl prints it: a series' count over the deprecated one.
    let count = obj
        .pointer("/series/count")
        .or_else(|| obj.get("count"))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    (
        event_columns(),
        vec![
            json!(last_seen),
            json!(str_at(obj, "/type")),
            json!(str_at(obj, "/reason")),
            json!(object),
            json!(str_at(obj, "/involvedObject/fieldPath")),
            json!(source),
            json!(str_at(obj, "/message")),
            json!(first_seen),
            json!(count.to_string()),
            json!(crate::object::name(obj)),
        ],
    )
}

fn count(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_object).map_or(0, |m| m.len() as i64)
}

fn str_at(obj: &Value, ptr: &str) -> String {
    obj.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn containers(obj: &Value, field: &str) -> String {
    obj.pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| c.get(field).and_then(Value::as_str).unwrap_or(""))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn ports(obj: &Value) -> String {
    let ps = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ps.is_empty() {
        return "<none>".into();
    }
    ps.iter()
        .map(|p| {
            let port = p
                .get("port")
                .map(std::string::ToString::to_string)
                .unwrap_or_default();
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort") {
                Some(n) => format!("{port}:{n}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn or_none(s: String) -> Value {
    if s.is_empty() {
        json!("<none>")
    } else {
        json!(s)
    }
}

/// One step of a printer column's `JSONPath`.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    /// `[?(@.key=="value")]`: the first item whose `key` equals `value`.
    Filter(String, String),
}

fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                out.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            let inner = r[..end].trim();
            if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                if let Some((k, v)) = f.split_once("==") {
                    out.push(Step::Filter(
                        k.trim().to_string(),
                        v.trim().trim_matches(['"', '\'']).to_string(),
                    ));
                }
            } else if let Ok(i) = inner.parse() {
                out.push(Step::Index(i));
            }
            rest = &r[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            out.push(Step::Field(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    out
}

/// Evaluates a printer column's `JSONPath`: fields, indexes and `[?(@.key=="value")]` filters
/// (what `kubectl` and CRDs use for conditions).
fn json_path(obj: &Value, path: &str) -> Value {
    let mut cur = obj;
    for step in steps(path) {
        let next = match &step {
            Step::Field(f) => cur.get(f),
            Step::Index(i) => cur.get(*i),
            Step::Filter(k, v) => cur.as_array().and_then(|items| {
                items
                    .iter()
                    .find(|i| i.get(k).and_then(Value::as_str) == Some(v))
            }),
        };
        match next {
            Some(n) => cur = n,
            None => return Value::Null,
        }
    }
    cur.clone()
}

// Long on purpose: one arm per kind, each the columns kubectl prints for it, so the whole table
// of kinds reads in one place as the API server's printers list it.
fn columns_and_cells(t: &ResourceType, obj: &Value, now: SystemTime) -> Printed {
    if t.plural == "pods" && t.group.is_empty() {
        return pods::row(obj, now);
    }
    if let Some(row) = workloads::row(&t.group, &t.plural, obj, now)
        .or_else(|| cluster::row(&t.group, &t.plural, obj, now))
    {
        return row;
    }
    let name = json!(crate::object::name(obj));
    let age_col = || col("Age", "string", 0, AGE_DESCRIPTION);
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "configmaps") => (
            vec![
                name_column(),
                col(
                    "Data",
                    "integer",
                    0,
                    "Data contains the configuration data.",
                ),
                age_col(),
            ],
            vec![
                name,
                json!(count(obj.get("data")) + count(obj.get("binaryData"))),
                json!(age(obj, now)),
            ],
        ),
        ("", "secrets") => (
            vec![
                name_column(),
                col("Type", "string", 0, "The type of the secret"),
                col(
                    "Data",
                    "integer",
                    0,
                    "The number of entries in the secret data",
                ),
                age_col(),
            ],
            vec![
                name,
                json!(str_at(obj, "/type")),
                json!(count(obj.get("data"))),
                json!(age(obj, now)),
            ],
        ),
        ("", "namespaces") => (
            vec![
                name_column(),
                col("Status", "string", 0, "The status of the namespace"),
                age_col(),
            ],
            vec![
                name,
                json!(if crate::object::is_deleting(obj) {
                    "Terminating".to_string()
                } else {
                    str_at(obj, "/status/phase")
                }),
                json!(age(obj, now)),
            ],
        ),
        ("", "services") => (
            vec![
                name_column(),
                col("Type", "string", 0, "The type of the service."),
                col("Cluster-IP", "string", 0, "The cluster IP of the service."),
                col(
                    "External-IP",
                    "string",
                    0,
                    "The external IPs of the service.",
                ),
                col("Port(s)", "string", 0, "The ports of the service."),
                age_col(),
                col(
                    "Selector",
                    "string",
                    1,
                    "The label selector of the service.",
                ),
            ],
            vec![
                name,
                json!(
                    obj.pointer("/spec/type")
                        .and_then(Value::as_str)
                        .unwrap_or("ClusterIP")
                ),
                or_none(str_at(obj, "/spec/clusterIP")),
                json!("<none>"),
                json!(ports(obj)),
                json!(age(obj, now)),
                json!(format::labels(obj.pointer("/spec/selector"))),
            ],
        ),
        ("apps", "deployments") => {
            let want = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = obj
                .pointer("/status/readyReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            (
                vec![
                    name_column(),
                    col("Ready", "string", 0, "Number of the pod with ready state"),
                    col(
                        "Up-to-date",
                        "string",
                        0,
                        "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    ),
                    col(
                        "Available",
                        "string",
                        0,
                        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    ),
                    age_col(),
                    col(
                        "Containers",
                        "string",
                        1,
                        "Names of each container in the template.",
                    ),
                    col(
                        "Images",
                        "string",
                        1,
                        "Images referenced by each container in the template.",
                    ),
                    col("Selector", "string", 1, "Label selector for pods."),
                ],
                vec![
                    name,
                    json!(format!("{ready}/{want}")),
                    json!(
                        obj.pointer("/status/updatedReplicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    ),
                    json!(
                        obj.pointer("/status/availableReplicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    ),
                    json!(age(obj, now)),
                    json!(containers(obj, "name")),
                    json!(containers(obj, "image")),
                    json!(format::label_selector(obj.pointer("/spec/selector"))),
                ],
            )
        }
        ("", "events") => event_row(obj, now),
        ("apiextensions.k8s.io", "customresourcedefinitions") => (
            vec![name_column(), col("Created At", "date", 0, AGE_DESCRIPTION)],
            vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))],
        ),
        _ if !t.printer_columns.is_empty() => {
            let mut cols = vec![name_column()];
            let mut cells = vec![name];
            for c in &t.printer_columns {
                let kind = c.get("type").and_then(Value::as_str).unwrap_or("string");
                let priority = c
                    .get("priority")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .min(u64::from(u8::MAX)) as u8;
                cols.push(col(
                    c.get("name").and_then(Value::as_str).unwrap_or(""),
                    kind,
                    priority,
                    "",
                ));
                let v = json_path(obj, c.get("jsonPath").and_then(Value::as_str).unwrap_or(""));
                cells.push(if kind == "date" {
                    match v.as_str().and_then(|s| humantime::parse_rfc3339(s).ok()) {
                        Some(t) => json!(human_duration(now.duration_since(t).unwrap_or_default())),
                        None => v,
                    }
                } else {
                    v
                });
            }
            if !t.printer_columns.iter().any(|c| {
                c.get("jsonPath").and_then(Value::as_str) == Some(".metadata.creationTimestamp")
            }) {
                cols.push(age_col());
                cells.push(json!(age(obj, now)));
            }
            (cols, cells)
        }
        _ => (
            vec![name_column(), age_col()],
            vec![name, json!(age(obj, now))],
        ),
    }
}

fn row(
    t: &ResourceType,
    obj: &Value,
    include: IncludeObject,
    now: SystemTime,
) -> (Vec<Column>, Value) {
    let (cols, cells) = columns_and_cells(t, obj, now);
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))});
        }
        IncludeObject::Object => row["object"] = obj.clone(),
    }
    (cols, row)
}

fn column_definitions(cols: &[Column]) -> Value {
    json!(cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect::<Vec<_>>())
}

/// A Table of the objects, with the list's metadata (resourceVersion, continue).
#[must_use]
pub fn table(
    t: &ResourceType,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
    now: SystemTime,
) -> Value {
    let mut cols = columns_and_cells(t, &json!({}), now).0;
    let mut rows = Vec::new();
    for o in objects {
        let (c, r) = row(t, o, include, now);
        cols = c;
        rows.push(r);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata, "columnDefinitions": column_definitions(&cols), "rows": rows})
}

/// The cells `row` prints for an object of `group`/`plural`, an hour into 2026.
#[cfg(test)]
fn cells_at(
    row: fn(&str, &str, &Value, SystemTime) -> Option<Printed>,
    group: &str,
    plural: &str,
    obj: &Value,
) -> Vec<Value> {
    let now = humantime::parse_rfc3339("2026-01-01T01:00:00Z").unwrap_or(SystemTime::UNIX_EPOCH);
    row(group, plural, obj, now)
        .map(|r| r.1)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_column_paths() {
        let o = json!({"spec": {"size": 3}, "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".spec.size"), json!(3));
        assert_eq!(json_path(&o, ".status.conditions[0].type"), json!("Synced"));
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            json!("True")
        );
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type=='Gone')].status"),
            Value::Null
        );
    }

    #[test]
    fn human_durations_match_kubectl() {
        for (secs, want) in [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(Duration::from_secs(secs)), want, "{secs}s");
        }
    }
}
