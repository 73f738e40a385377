//! Why an object looks as it does (`backflow why`): for each field, the last writer and how
//! the value got there — a live edit (and the commit that carried it to Git, if one did) or a
//! push (and the apply that wrote it). Pure: read from the live object's managedFields and its
//! story.

use backflow_decision::APPLIER_MANAGERS;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fields::{fields_of, owns};
use crate::render::short_commit;
use crate::story::{Entry, EntryKind, Story, whole_seconds};

/// One field's last writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldWriter {
    /// The field (`data`, `spec`, `metadata.labels`, …).
    pub field: String,
    /// Who: a user, a field manager or a commit's author.
    pub writer: String,
    /// When (RFC 3339), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// How the value got there, for a person.
    pub how: String,
    /// The commit that holds the value, if one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// Each field's last writer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Why {
    /// The object's story the answer was read from.
    pub story: Story,
    /// One line per field of the live object, by field name.
    pub fields: Vec<FieldWriter>,
}

/// One managedFields entry, as far as it matters here.
struct Owner<'a> {
    manager: &'a str,
    time: &'a str,
    fields: &'a Value,
}

fn owners(live: &Value) -> Vec<Owner<'_>> {
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    entries
        .iter()
        .filter(|e| e.get("subresource").is_none())
        .filter_map(|e| {
            Some(Owner {
                manager: e.get("manager")?.as_str()?,
                time: e.get("time").and_then(Value::as_str).unwrap_or_default(),
                fields: e.get("fieldsV1")?,
            })
        })
        .collect()
}

impl Why {
    /// Each field of `live` with its last writer, read from its managedFields and `story`.
    #[must_use]
    pub fn of(live: &Value, story: Story) -> Self {
        let owners = owners(live);
        // The fields Git sees: an applier's stamp or the server's bookkeeping is nobody's.
        let sanitized = backflow_manifest::sanitize(live);
        let fields = fields_of(&sanitized)
            .into_iter()
            .map(|(field, value)| writer_of(&field, value, &owners, &story.entries))
            .collect();
        Self { story, fields }
    }
}

fn writer_of(field: &str, value: &Value, owners: &[Owner<'_>], entries: &[Entry]) -> FieldWriter {
    let newest = owners
        .iter()
        .filter(|o| owns(o.fields, field, value))
        .max_by(|a, b| a.time.cmp(b.time));
    let changed_in = |kind: EntryKind, before: Option<&str>, after: Option<&str>| {
        entries.iter().find(|e| {
            e.kind == kind
                && e.fields.iter().any(|f| f == field)
                && before.is_none_or(|t| e.at.as_str() <= t)
                && after.is_none_or(|t| e.at.as_str() >= t)
        })
    };
    let Some(owner) = newest else {
        // No manager owns it (an object created before managedFields, or only in Git): the
        // newest change the story knows.
        return match entries.iter().find(|e| e.fields.iter().any(|f| f == field)) {
            Some(e) => FieldWriter {
                field: field.to_string(),
                writer: e.who.clone(),
                at: Some(e.at.clone()),
                how: e.summary.clone(),
                commit: e.commit.clone(),
            },
            None => FieldWriter {
                field: field.to_string(),
                writer: "unknown".into(),
                at: None,
                how: "no field manager owns it and no recorded change names it".into(),
                commit: None,
            },
        };
    };
    let at = Some(owner.time.to_string()).filter(|t| !t.is_empty());
    let time = whole_seconds(owner.time);
    if APPLIER_MANAGERS.contains(&owner.manager) {
        let push = changed_in(EntryKind::Pushed, Some(&time), None)
            .or_else(|| changed_in(EntryKind::Committed, Some(&time), None));
        return match push {
            Some(p) => FieldWriter {
                field: field.to_string(),
                writer: p.who.clone(),
                at,
                how: format!("changed in Git, applied by {}", owner.manager),
                commit: p.commit.clone(),
            },
            None => FieldWriter {
                field: field.to_string(),
                writer: owner.manager.to_string(),
                at,
                how: "applied from Git (the commit is older than the history read)".into(),
                commit: None,
            },
        };
    }
    let user = entries
        .iter()
        .find(|e| e.kind == EntryKind::LiveWrite && e.at == time && e.resource_version.is_some())
        .map(|e| e.who.clone())
        .filter(|who| who != owner.manager);
    let carried = changed_in(EntryKind::Committed, None, Some(&time));
    let writer = match user {
        Some(user) => format!("{user} ({})", owner.manager),
        None => owner.manager.to_string(),
    };
    FieldWriter {
        field: field.to_string(),
        writer,
        at,
        how: match carried {
            Some(c) => format!(
                "live edit, committed to Git by backflow ({})",
                c.commit.as_deref().map(short_commit).unwrap_or_default()
            ),
            None => "live edit, not in a commit the history read".into(),
        },
        commit: carried.and_then(|c| c.commit.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::story::tests::{history, tell, write};
    use serde_json::json;

    fn story(writes: &[backflow_api::RecordedWrite]) -> Story {
        tell(writes, &history(), &[])
    }

    #[test]
    fn a_field_an_applier_wrote_names_the_pushs_author_and_a_live_edit_its_user_and_commit() {
        let live = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "demo", "namespace": "default",
                "labels": {"team": "a", "backflow.dev/applier": "backflow-system.default"},
                "managedFields": [
                    {"manager": "backflow-applier", "operation": "Apply", "time": "2027-01-15T08:00:20Z",
                     "fieldsV1": {"f:data": {"f:greeting": {}}, "f:metadata": {"f:labels": {"f:backflow.dev/applier": {}}}}},
                    {"manager": "kubectl-label", "operation": "Update", "time": "2027-01-15T08:00:04Z",
                     "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}}
                ]},
            "data": {"greeting": "git"}
        });
        let writes = [write(
            7,
            "2027-01-15T08:00:04Z",
            Some("alice"),
            "kubectl-label",
        )];
        let why = Why::of(&live, story(&writes));
        let by_field: Vec<(&str, &str)> = why
            .fields
            .iter()
            .map(|f| (f.field.as_str(), f.writer.as_str()))
            .collect();
        assert_eq!(
            by_field,
            [
                ("data", "bob <bob@example.com>"),
                ("metadata.labels", "alice (kubectl-label)"),
            ]
        );
        assert!(
            why.fields[0].how.contains("applied by backflow-applier"),
            "{:?}",
            why.fields[0]
        );
        let push = why
            .story
            .entries
            .iter()
            .find(|e| e.kind == EntryKind::Pushed);
        assert_eq!(
            why.fields[0].commit,
            push.and_then(|p| p.commit.clone()),
            "the push's commit"
        );
        assert!(
            why.fields[1].how.starts_with("live edit"),
            "{:?}",
            why.fields[1]
        );
    }

    fn owner(manager: &str, time: &str, fields: serde_json::Value) -> serde_json::Value {
        json!({"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields})
    }

    fn live_with(owners: Vec<serde_json::Value>) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "demo", "namespace": "default", "managedFields": owners,
                         "annotations": {"note": "x"}},
            "data": {"greeting": "git"}, "binaryData": {"b": "AA=="}
        })
    }

    #[test]
    fn an_apply_names_the_push_it_followed_not_a_later_one_nor_one_of_another_field() {
        // Pushes of data at :20 (history) and of binaryData later; the applier wrote data at :20.
        let mut story = story(&[]);
        let mut later = story.entries[0].clone();
        later.at = "2027-01-15T08:00:40Z".into();
        later.commit = Some("0404040404040404040404040404040404040404".into());
        story.entries.insert(0, later.clone());
        let mut other = later;
        other.at = "2027-01-15T08:00:10Z".into();
        other.fields = vec!["binaryData".into()];
        other.commit = Some("0505050505050505050505050505050505050505".into());
        story.entries.insert(2, other);
        let live = live_with(vec![owner(
            "backflow-applier",
            "2027-01-15T08:00:20Z",
            json!({"f:data": {}, "f:binaryData": {}}),
        )]);
        let why = Why::of(&live, story);
        let data = why.fields.iter().find(|f| f.field == "data").expect("data");
        assert_eq!(
            data.commit.as_deref(),
            Some("0303030303030303030303030303030303030303"),
            "{data:?}"
        );
        assert_eq!(data.at.as_deref(), Some("2027-01-15T08:00:20Z"));
        let binary = why
            .fields
            .iter()
            .find(|f| f.field == "binaryData")
            .expect("binaryData");
        assert_eq!(
            binary.commit.as_deref(),
            Some("0505050505050505050505050505050505050505"),
            "{binary:?}"
        );
    }

    #[test]
    fn a_field_no_manager_owns_is_the_newest_change_that_names_it_and_a_time_less_owner_has_no_time()
     {
        let live = live_with(vec![owner(
            "kubectl-annotate",
            "",
            json!({"f:metadata": {"f:annotations": {"f:note": {}}}}),
        )]);
        let why = Why::of(&live, story(&[]));
        let data = why.fields.iter().find(|f| f.field == "data").expect("data");
        assert_eq!(data.writer, "bob <bob@example.com>", "{data:?}");
        assert_eq!(
            data.commit.as_deref(),
            Some("0303030303030303030303030303030303030303")
        );
        let binary = why
            .fields
            .iter()
            .find(|f| f.field == "binaryData")
            .expect("binaryData");
        assert_eq!(binary.writer, "unknown");
        let note = why
            .fields
            .iter()
            .find(|f| f.field == "metadata.annotations")
            .expect("annotations");
        assert_eq!(note.at, None, "{note:?}");
    }

    #[test]
    fn a_live_edit_names_its_user_only_from_its_own_second_and_the_commit_that_carried_it() {
        let live = live_with(vec![owner(
            "kubectl-edit",
            "2027-01-15T08:00:04Z",
            json!({"f:data": {}}),
        )]);
        let writes = [write(
            7,
            "2027-01-15T08:00:03Z",
            Some("alice"),
            "kubectl-edit",
        )];
        let why = Why::of(&live, story(&writes));
        let data = why.fields.iter().find(|f| f.field == "data").expect("data");
        assert_eq!(
            data.writer, "kubectl-edit",
            "alice wrote in another second: {data:?}"
        );
        assert_eq!(
            data.how,
            "live edit, committed to Git by backflow (010101010101)"
        );
        let writes = [write(
            7,
            "2027-01-15T08:00:04Z",
            Some("alice"),
            "kubectl-edit",
        )];
        let why = Why::of(&live, story(&writes));
        assert_eq!(
            why.fields
                .iter()
                .find(|f| f.field == "data")
                .map(|f| f.writer.as_str()),
            Some("alice (kubectl-edit)")
        );
    }
}
