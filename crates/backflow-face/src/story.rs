//! An object's story both ways (`backflow history`): its live writes (who, when, how), the
//! commits that carried them, the commits somebody else pushed that changed it, the applies
//! that wrote those, and what backflow repaired, kept or refused — one timeline, newest first.
//! Pure: built from what the sources read.

use backflow_api::{RecordedWrite, WriteVerb};
use backflow_decision::APPLIER_MANAGERS;
use backflow_git::{FolderChange, FolderHistory};
use backflow_manifest::declared_objects;
use backflow_sops::Identity as AgeIdentity;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fields::changed_fields;
use crate::object::ObjectRef;

/// What happened, in the story's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryKind {
    /// Somebody (or a controller) wrote the object through the live API.
    LiveWrite,
    /// An applier (backflow's, Flux's, Argo CD's) wrote it from Git.
    Applied,
    /// backflow committed a live change of it to Git.
    Committed,
    /// Somebody else pushed a commit that changed it.
    Pushed,
    /// An apply wrote over a live edit; Git kept the edit and a repair applies it back.
    Repaired,
    /// The object changed live and in Git at once; the live value was kept.
    LiveValueKept,
    /// The folder refused a live edit of it.
    Refused,
    /// Something else backflow reported about it.
    Noted,
}

/// One step of the story.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When (RFC 3339, whole seconds).
    pub at: String,
    /// What happened.
    pub kind: EntryKind,
    /// Who: a user, a field manager or a commit's author.
    pub who: String,
    /// For a person.
    pub summary: String,
    /// The commit, for a commit or an apply of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The resourceVersion a live write gave the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<u64>,
    /// The `GitTarget` whose folder the commit changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The fields a commit changed (see `fields_of`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// The object as the commit left it (absent: removed, or not readable), for the object
    /// page's diff between two points. Never a Secret's values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<Value>,
}

impl Entry {
    /// The summary, with the fields a commit changed.
    #[must_use]
    pub fn detail(&self) -> String {
        if self.fields.is_empty() {
            self.summary.clone()
        } else {
            format!("{}; fields: {}", self.summary, self.fields.join(", "))
        }
    }
}

/// An object's story.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Story {
    /// The object.
    pub object: ObjectRef,
    /// Newest first.
    pub entries: Vec<Entry>,
    /// What could not be read, for a person (a folder whose branch is not running, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
}

/// A `GitTarget`'s folder history.
#[derive(Debug, Clone)]
pub struct TargetHistory {
    /// `namespace/name`.
    pub target: String,
    /// The commits that changed its folder.
    pub history: FolderHistory,
}

/// A Kubernetes Event backflow wrote about the object (or about a `GitTarget`, naming it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// When it last happened (RFC 3339).
    pub at: String,
    /// Its reason (`ApplierOverwroteEdit`, `LiveValueKept`, …).
    pub reason: String,
    /// Its note.
    pub message: String,
    /// Who reported it (the reporting controller).
    pub by: String,
}

/// What a story is built from.
#[derive(Debug, Clone, Copy)]
pub struct StoryInputs<'a> {
    /// The object.
    pub object: &'a ObjectRef,
    /// The record's writes of it.
    pub writes: &'a [RecordedWrite],
    /// The histories of the folders that may hold it.
    pub histories: &'a [TargetHistory],
    /// backflow's Events about it.
    pub notes: &'a [EventNote],
    /// Keys to read SOPS documents with (values are compared, never shown).
    pub identities: &'a [AgeIdentity],
}

impl Story {
    /// The story `inputs` tell, newest first.
    #[must_use]
    pub fn tell(inputs: StoryInputs<'_>) -> Self {
        let mut entries: Vec<(Order, Entry)> = Vec::new();
        entries.extend(inputs.writes.iter().map(|w| {
            let entry = live_entry(w);
            let order = Order::Live {
                applied: entry.kind == EntryKind::Applied,
                rv: w.resource_version,
            };
            (order, entry)
        }));
        for target in inputs.histories {
            for (age, change) in target.history.changes.iter().enumerate() {
                if let Some(entry) = commit_entry(inputs, target, change) {
                    entries.push((Order::Commit { age }, entry));
                }
            }
        }
        entries.extend(inputs.notes.iter().map(|n| (Order::Note, note_entry(n))));
        // Newest first. Times are whole seconds on both sides, so within a second the causal
        // order stands in: a person's write before the commit carrying it, commits in the
        // branch's order, an applier's write after the commit it applies, backflow's report
        // last.
        entries.sort_by(|(oa, a), (ob, b)| {
            (b.at.as_str(), ob.rank()).cmp(&(a.at.as_str(), oa.rank()))
        });
        let mut entries: Vec<Entry> = entries.into_iter().map(|(_, e)| e).collect();
        name_applied_commits(&mut entries);
        Self {
            object: inputs.object.clone(),
            entries,
            gaps: Vec::new(),
        }
    }
}

/// An applier's write names the push it followed, the commit it applied: the newest push
/// before it with no other write of the object between them (an apply that only stamped an
/// object a person created names none).
fn name_applied_commits(entries: &mut [Entry]) {
    for at in 0..entries.len() {
        if entries[at].kind != EntryKind::Applied || entries[at].commit.is_some() {
            continue;
        }
        let pushed = entries[at + 1..]
            .iter()
            .find(|e| {
                matches!(
                    e.kind,
                    EntryKind::Pushed
                        | EntryKind::LiveWrite
                        | EntryKind::Applied
                        | EntryKind::Committed
                )
            })
            .filter(|e| e.kind == EntryKind::Pushed)
            .and_then(|e| e.commit.clone());
        if let Some(commit) = pushed {
            let short = crate::render::short_commit(&commit);
            entries[at].summary = format!("{} applying {short}", entries[at].summary);
            entries[at].commit = Some(commit);
        }
    }
}

/// Where an entry goes among those of the same second.
#[derive(Debug, Clone, Copy)]
enum Order {
    /// A write of the record: by an applier or not, and its resourceVersion.
    Live { applied: bool, rv: u64 },
    /// A commit, `age` commits back from the tip of its history.
    Commit { age: usize },
    /// One of backflow's Events.
    Note,
}

impl Order {
    /// Ascending within a second: oldest first.
    fn rank(self) -> (u8, u64) {
        match self {
            Self::Live { applied: false, rv } => (1, rv),
            Self::Commit { age } => (2, u64::MAX - age as u64),
            Self::Live { applied: true, rv } => (3, rv),
            Self::Note => (4, 0),
        }
    }
}

fn live_entry(write: &RecordedWrite) -> Entry {
    let manager = write.manager.as_deref();
    let applied = manager.is_some_and(|m| APPLIER_MANAGERS.contains(&m));
    let who = match (&write.user, manager) {
        (Some(user), _) => user.to_string(),
        (None, Some(manager)) => manager.to_string(),
        (None, None) => "unknown".to_string(),
    };
    let verb = match write.verb {
        WriteVerb::Create => "created",
        WriteVerb::Update => "changed",
        WriteVerb::Delete => "deleted",
    };
    let summary = match (applied, manager, &write.user) {
        (true, Some(m), _) => format!("{verb} live by the applier ({m})"),
        (false, Some(m), Some(_)) => format!("{verb} live (field manager {m})"),
        _ => format!("{verb} live"),
    };
    Entry {
        at: write.at.clone(),
        kind: if applied {
            EntryKind::Applied
        } else {
            EntryKind::LiveWrite
        },
        who,
        summary,
        commit: None,
        resource_version: Some(write.resource_version),
        target: None,
        fields: Vec::new(),
        document: None,
    }
}

/// The object as the files of one side of a change declare it: `None` when they do not, and
/// its value (`Null` when it cannot be read) when they do.
fn declared_in(inputs: StoryInputs<'_>, files: &[(String, Vec<u8>)]) -> Option<Value> {
    let declared = declared_objects(files, inputs.identities);
    if let Some(found) = declared
        .objects
        .into_iter()
        .find(|o| inputs.object.is(&o.identity))
    {
        return Some(found.value);
    }
    declared
        .problems
        .iter()
        .any(|p| p.identity.as_ref().is_some_and(|i| inputs.object.is(i)))
        .then_some(Value::Null)
}

fn commit_entry(
    inputs: StoryInputs<'_>,
    target: &TargetHistory,
    change: &FolderChange,
) -> Option<Entry> {
    let side = |after: bool| -> Vec<(String, Vec<u8>)> {
        change
            .files
            .iter()
            .filter_map(|f| {
                let bytes = if after { &f.after } else { &f.before };
                bytes.as_ref().map(|b| (f.path.clone(), b.clone()))
            })
            .collect()
    };
    let before = declared_in(inputs, &side(false));
    let after = declared_in(inputs, &side(true));
    if before.is_none() && after.is_none() {
        return None;
    }
    if before == after {
        // The commit changed the file, not this object (another document of it).
        return None;
    }
    let fields = changed_fields(before.as_ref(), after.as_ref());
    let ours = change.committer == target.history.backflow;
    let subject = change
        .message
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let what = match (&before, &after) {
        (None, _) => "added",
        (_, None) => "removed",
        _ => "changed",
    };
    let (kind, who, summary) = if ours {
        let by: Vec<&str> = change
            .message
            .lines()
            .filter_map(|l| l.strip_prefix("Changed-by: "))
            .collect();
        let via = if by.is_empty() {
            String::new()
        } else {
            format!(" (changed by {})", by.join(", "))
        };
        (
            EntryKind::Committed,
            change.author.name.clone(),
            format!("backflow committed the live change ({what} in Git){via}"),
        )
    } else {
        (
            EntryKind::Pushed,
            format!("{} <{}>", change.author.name, change.author.email),
            format!("pushed: {subject} ({what} in Git)"),
        )
    };
    let secret = inputs.object.is_secret();
    Some(Entry {
        at: seconds(change.time),
        kind,
        who,
        summary,
        commit: Some(change.commit.to_string()),
        resource_version: None,
        target: Some(target.target.clone()),
        fields,
        document: after.filter(|v| !v.is_null() && !secret),
    })
}

fn note_entry(note: &EventNote) -> Entry {
    let kind = match note.reason.as_str() {
        "ApplierOverwroteEdit" => EntryKind::Repaired,
        "LiveValueKept" => EntryKind::LiveValueKept,
        "WriteRefused" => EntryKind::Refused,
        _ => EntryKind::Noted,
    };
    Entry {
        at: whole_seconds(&note.at),
        kind,
        who: note.by.clone(),
        summary: format!("{}: {}", note.reason, note.message),
        commit: None,
        resource_version: None,
        target: None,
        fields: Vec::new(),
        document: None,
    }
}

/// A commit's time as the record writes times.
fn seconds(unix: i64) -> String {
    let at =
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(unix).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A time (micro- or whole seconds) in whole seconds, so entries sort and compare as text.
pub(crate) fn whole_seconds(at: &str) -> String {
    humantime::parse_rfc3339_weak(at.trim_end_matches('Z')).map_or_else(
        |_| at.to_string(),
        |t| humantime::format_rfc3339_seconds(t).to_string(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use backflow_api::{GroupResource, ObjectKey};
    use backflow_git::{ChangedFile, Identity};

    pub(crate) fn demo() -> ObjectRef {
        ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespace: "default".into(),
            name: "demo".into(),
        }
    }

    pub(crate) fn write(rv: u64, at: &str, user: Option<&str>, manager: &str) -> RecordedWrite {
        RecordedWrite {
            key: ObjectKey::new(GroupResource::new("", "configmaps"), "default", "demo"),
            resource_version: rv,
            user: user.map(Into::into),
            manager: Some(manager.into()),
            verb: WriteVerb::Update,
            at: at.into(),
        }
    }

    fn file(path: &str, before: Option<&str>, after: Option<&str>) -> ChangedFile {
        ChangedFile {
            path: path.into(),
            before: before.map(|t| t.as_bytes().to_vec()),
            after: after.map(|t| t.as_bytes().to_vec()),
        }
    }

    fn doc(name: &str, greeting: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  greeting: {greeting}\n"
        )
    }

    /// A change at `time` (seconds since the epoch) by `who`, committed by `committer`.
    pub(crate) fn change(
        commit: u8,
        time: i64,
        who: &str,
        committer: &str,
        message: &str,
        files: Vec<ChangedFile>,
    ) -> FolderChange {
        FolderChange {
            commit: format!("{commit:02x}").repeat(20).parse().expect("id"),
            author: Identity::new(who, format!("{who}@example.com")),
            time,
            committer: Identity::new(committer, "c@example.com"),
            message: message.into(),
            files,
        }
    }

    /// `demo`'s story from these inputs.
    pub(crate) fn tell(
        writes: &[RecordedWrite],
        histories: &[TargetHistory],
        notes: &[EventNote],
    ) -> Story {
        Story::tell(StoryInputs {
            object: &demo(),
            writes,
            histories,
            notes,
            identities: &[],
        })
    }

    /// `1_800_000_000` is 2027-01-15T08:00:00Z.
    const T: i64 = 1_800_000_000;

    pub(crate) fn history() -> Vec<TargetHistory> {
        let path = "live/default/configmaps/demo.yaml";
        vec![TargetHistory {
            target: "backflow-system/default".into(),
            history: FolderHistory {
                backflow: Identity::new("backflow", "c@example.com"),
                changes: vec![
                    change(
                        3,
                        T + 20,
                        "bob",
                        "bob",
                        "bob's change",
                        vec![file(
                            path,
                            Some(&doc("demo", "hi")),
                            Some(&doc("demo", "git")),
                        )],
                    ),
                    change(
                        2,
                        T + 10,
                        "other",
                        "other",
                        "unrelated",
                        vec![file(
                            "live/default/configmaps/x.yaml",
                            None,
                            Some(&doc("x", "a")),
                        )],
                    ),
                    change(
                        1,
                        T + 5,
                        "alice",
                        "backflow",
                        "backflow: update\n\nChanged-by: kubectl-patch",
                        vec![file(path, None, Some(&doc("demo", "hi")))],
                    ),
                ],
            },
        }]
    }

    #[test]
    fn a_live_edit_its_commit_a_push_and_its_apply_read_newest_first() {
        let writes = [
            write(7, "2027-01-15T08:00:04Z", Some("alice"), "kubectl-patch"),
            write(9, "2027-01-15T08:00:20Z", None, "backflow-applier"),
        ];
        let notes = [EventNote {
            at: "2027-01-15T08:00:30.123456Z".into(),
            reason: "LiveValueKept".into(),
            message: "configmaps/default/demo: data.greeting changed both live and in Git".into(),
            by: "backflow".into(),
        }];
        let story = tell(&writes, &history(), &notes);
        let told: Vec<(EntryKind, &str, &str)> = story
            .entries
            .iter()
            .map(|e| (e.kind, e.who.as_str(), e.at.as_str()))
            .collect();
        assert_eq!(
            told,
            [
                (EntryKind::LiveValueKept, "backflow", "2027-01-15T08:00:30Z"),
                (
                    EntryKind::Applied,
                    "backflow-applier",
                    "2027-01-15T08:00:20Z"
                ),
                (
                    EntryKind::Pushed,
                    "bob <bob@example.com>",
                    "2027-01-15T08:00:20Z"
                ),
                (EntryKind::Committed, "alice", "2027-01-15T08:00:05Z"),
                (EntryKind::LiveWrite, "alice", "2027-01-15T08:00:04Z"),
            ],
            "the unrelated commit is left out; a push before its apply in the same second"
        );
        let applied = &story.entries[1];
        assert_eq!(
            applied.commit, story.entries[2].commit,
            "the apply names the push it applied"
        );
        assert_eq!(story.entries[2].fields, ["data"]);
        assert!(
            story.entries[3].summary.contains("kubectl-patch"),
            "{:?}",
            story.entries[3]
        );
        assert_eq!(
            story.entries[2]
                .document
                .as_ref()
                .and_then(|d| d.pointer("/data/greeting")),
            Some(&Value::from("git")),
            "the object as the push left it"
        );
    }

    #[test]
    fn a_secrets_documents_are_never_in_its_story() {
        let path = "live/default/secrets/demo.yaml";
        let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: demo\n  namespace: default\ndata:\n  password: c2VjcmV0\n";
        let histories = [TargetHistory {
            target: "t/t".into(),
            history: FolderHistory {
                backflow: Identity::new("backflow", "c@example.com"),
                changes: vec![change(
                    1,
                    T,
                    "bob",
                    "bob",
                    "add",
                    vec![file(path, None, Some(secret))],
                )],
            },
        }];
        let object = ObjectRef {
            kind: "Secret".into(),
            plural: "secrets".into(),
            ..demo()
        };
        let story = Story::tell(StoryInputs {
            object: &object,
            writes: &[],
            histories: &histories,
            notes: &[],
            identities: &[],
        });
        assert_eq!(story.entries.len(), 1);
        assert_eq!(story.entries[0].fields, ["data"]);
        let json = serde_json::to_string(&story).expect("json");
        assert!(!json.contains("c2VjcmV0"), "{json}");
    }

    #[test]
    fn an_apply_after_a_live_write_names_no_push() {
        let writes = [
            write(7, "2027-01-15T08:00:21Z", Some("alice"), "kubectl-patch"),
            write(9, "2027-01-15T08:00:22Z", None, "backflow-applier"),
        ];
        let story = tell(&writes, &history(), &[]);
        assert_eq!(story.entries[0].kind, EntryKind::Applied);
        assert_eq!(story.entries[0].commit, None, "{:?}", story.entries[0]);
    }

    #[test]
    fn within_one_second_a_write_comes_before_its_commit_commits_keep_the_branchs_order_and_an_apply_comes_last()
     {
        let second = "2027-01-15T08:00:00Z";
        let path = "live/default/configmaps/demo.yaml";
        let histories = [TargetHistory {
            target: "t/t".into(),
            history: FolderHistory {
                backflow: Identity::new("backflow", "c@example.com"),
                changes: vec![
                    change(
                        2,
                        T,
                        "bob",
                        "bob",
                        "bob's",
                        vec![file(path, Some(&doc("demo", "a")), Some(&doc("demo", "b")))],
                    ),
                    change(
                        1,
                        T,
                        "alice",
                        "backflow",
                        "ours",
                        vec![file(path, None, Some(&doc("demo", "a")))],
                    ),
                ],
            },
        }];
        let writes = [
            write(9, second, None, "backflow-applier"),
            write(7, second, Some("alice"), "kubectl-create"),
        ];
        let story = tell(&writes, &histories, &[]);
        let kinds: Vec<EntryKind> = story.entries.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EntryKind::Applied,
                EntryKind::Pushed,
                EntryKind::Committed,
                EntryKind::LiveWrite
            ],
            "newest first"
        );
        assert_eq!(
            story.entries[0].summary,
            "changed live by the applier (backflow-applier) applying 020202020202"
        );
        assert_eq!(
            story.entries[3].summary,
            "changed live (field manager kubectl-create)"
        );
        assert!(
            story.entries[2].summary.contains("(added in Git)"),
            "{:?}",
            story.entries[2]
        );
        assert!(
            story.entries[1].summary.contains("(changed in Git)"),
            "{:?}",
            story.entries[1]
        );
        assert_eq!(
            story.entries[3].commit, None,
            "a person's write names no commit"
        );
    }

    #[test]
    fn a_removal_is_told_and_a_change_to_another_document_of_the_same_file_is_not_the_objects() {
        let path = "live/default/configmaps/both.yaml";
        let two = |a: &str, b: &str| format!("{}---\n{}", doc("demo", a), doc("other", b));
        let histories = [TargetHistory {
            target: "t/t".into(),
            history: FolderHistory {
                backflow: Identity::new("backflow", "c@example.com"),
                changes: vec![
                    change(
                        3,
                        T + 2,
                        "bob",
                        "bob",
                        "remove",
                        vec![file(path, Some(&two("x", "z")), Some(&doc("other", "z")))],
                    ),
                    change(
                        2,
                        T + 1,
                        "bob",
                        "bob",
                        "other only",
                        vec![file(path, Some(&two("x", "y")), Some(&two("x", "z")))],
                    ),
                    change(
                        1,
                        T,
                        "bob",
                        "bob",
                        "add",
                        vec![file(path, None, Some(&two("x", "y")))],
                    ),
                ],
            },
        }];
        let story = tell(&[], &histories, &[]);
        let summaries: Vec<&str> = story.entries.iter().map(|e| e.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "pushed: remove (removed in Git)",
                "pushed: add (added in Git)"
            ],
            "the commit that changed only the other document is not in demo's story"
        );
        assert_eq!(story.entries[0].document, None, "removed: no document");
    }

    #[test]
    fn a_live_write_right_after_a_push_is_not_taken_for_its_apply() {
        let writes = [write(
            7,
            "2027-01-15T08:00:21Z",
            Some("alice"),
            "kubectl-patch",
        )];
        let story = tell(&writes, &history(), &[]);
        assert_eq!(story.entries[0].kind, EntryKind::LiveWrite);
        assert_eq!(story.entries[0].commit, None, "{:?}", story.entries[0]);
    }

    #[test]
    fn backflows_events_are_told_by_their_reason() {
        let note = |reason: &str| EventNote {
            at: "2027-01-15T08:00:30Z".into(),
            reason: reason.into(),
            message: "m".into(),
            by: "backflow".into(),
        };
        let notes = [
            note("ApplierOverwroteEdit"),
            note("WriteRefused"),
            note("LiveValueKept"),
            note("Adopted"),
        ];
        let story = tell(&[], &[], &notes);
        let mut kinds: Vec<EntryKind> = story.entries.iter().map(|e| e.kind).collect();
        kinds.sort_by_key(|k| format!("{k:?}"));
        assert_eq!(
            kinds,
            [
                EntryKind::LiveValueKept,
                EntryKind::Noted,
                EntryKind::Refused,
                EntryKind::Repaired
            ]
        );
        assert_eq!(story.entries[0].summary.split(':').nth(1), Some(" m"));
    }
}
