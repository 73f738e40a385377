//! Kubernetes Events about what backflow did, written as client-go's `tools/events` recorder
//! writes them: an `events.k8s.io/v1` Event on the object concerned (its uid included, so
//! `kubectl describe` lists it), and the same event seen again within ten minutes counted on
//! the first one as a `series` (`count`, `lastObservedTime`) rather than written again. The
//! API serves it as a core Event too: `kubectl get events` and `kubectl events` show it once,
//! with how often it happened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

/// How long a repeated event is counted on the first one.
const SERIES: Duration = Duration::from_secs(600);

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regarding {
    /// `v1`, `backflow.dev/v1alpha1`, …
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace (`None`: cluster-scoped; the Event goes to `default`).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// Whether an event reports something done or something to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something done.
    Normal,
    /// Something a person should look at.
    Warning,
}

/// One event to record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Note {
    /// What it is about.
    pub regarding: Regarding,
    /// Normal or Warning.
    pub kind: EventType,
    /// CamelCase reason (`LiveValueKept`, `ApplyFailed`, `LeaderElection`, …).
    pub reason: String,
    /// What was done or failed (`Apply`, `Prune`, `Merge`, `Elect`, …).
    pub action: String,
    /// For a person.
    pub message: String,
}

/// What to write for a note (the correlator's decision, pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// A new Event.
    Create,
    /// Count it on the Event `name` already written: `count` times in all.
    Count {
        /// The Event's name.
        name: String,
        /// How many times it happened.
        count: i32,
    },
}

/// Which notes were written lately, and as which Event.
#[derive(Debug, Default)]
pub struct Correlator {
    seen: HashMap<Note, Seen>,
}

#[derive(Debug)]
struct Seen {
    name: Option<String>,
    count: i32,
    first: Instant,
}

impl Correlator {
    /// Whether `note`, seen at `now`, is a new Event or one more of a recent one.
    pub fn observe(&mut self, note: &Note, now: Instant) -> Write {
        self.seen
            .retain(|_, s| now.saturating_duration_since(s.first) < SERIES);
        if let Some(Seen {
            name: Some(name),
            count,
            ..
        }) = self.seen.get_mut(note)
        {
            *count += 1;
            return Write::Count {
                name: name.clone(),
                count: *count,
            };
        }
        // Being written, or never: a new one (a burst before the first write lands writes
        // twice rather than waiting).
        self.seen.insert(
            note.clone(),
            Seen {
                name: None,
                count: 1,
                first: now,
            },
        );
        Write::Create
    }

    /// `note` was written as the Event `name`.
    pub fn written(&mut self, note: &Note, name: String) {
        if let Some(seen) = self.seen.get_mut(note) {
            seen.name = Some(name);
        }
    }

    /// The Event of `note` is gone (expired): the next one is written anew.
    pub fn forget(&mut self, note: &Note) {
        self.seen.remove(note);
    }
}

/// Records Events through a client, best effort: a failure is logged, never fatal.
pub struct EventRecorder {
    client: Client,
    /// The runtime it was made in: a note may come from a thread outside it (a branch
    /// worker's merge report).
    runtime: tokio::runtime::Handle,
    /// Who reports (`source.host`): this replica.
    host: String,
    correlator: Mutex<Correlator>,
    /// The resource of each kind an event was about, found once by discovery (for its uid).
    resources: tokio::sync::Mutex<HashMap<(String, String), Option<ApiResource>>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder writing through `client`, reporting as `host`.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    #[must_use]
    pub fn new(client: Client, host: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            client,
            runtime: tokio::runtime::Handle::current(),
            host: host.into(),
            correlator: Mutex::default(),
            resources: tokio::sync::Mutex::default(),
        })
    }

    /// Records `note` in the background (from any thread).
    pub fn record(self: &Arc<Self>, note: Note) {
        let recorder = self.clone();
        self.runtime
            .spawn(async move { recorder.write(note).await });
    }

    /// Records `note` and waits until it is written (or failed).
    pub async fn write(&self, note: Note) {
        let decision = self
            .correlator
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .observe(&note, Instant::now());
        let namespace = note
            .regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api = Api::<Event>::namespaced(self.client.clone(), &namespace);
        let now = micro_time(k8s_openapi::jiff::Timestamp::now());
        if let Write::Count { name, count } = &decision {
            let patch = json!({"series": {"count": count, "lastObservedTime": now}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    tracing::debug!(event = %name, error = %e, "cannot count an event on its first; writing it anew");
                    self.correlator().forget(&note);
                }
            }
        }
        let uid = self.uid_of(&note.regarding).await;
        match api
            .create(&PostParams::default(), &self.event(&note, uid, &now))
            .await
        {
            Ok(created) => {
                if let Some(name) = created.metadata.name {
                    self.correlator().written(&note, name);
                }
            }
            Err(e) => {
                tracing::warn!(reason = %note.reason, object = %note.regarding.name, error = %e, "cannot record an event");
                self.correlator().forget(&note);
            }
        }
    }

    /// The uid of the object `r` names, if it can be read (best effort: an Event without one
    /// is still listed, only not by `kubectl describe`).
    async fn uid_of(&self, r: &Regarding) -> Option<String> {
        let (group, version) = r
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &r.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
        let resource = {
            let mut known = self.resources.lock().await;
            let key = (r.api_version.clone(), r.kind.clone());
            if let Some(found) = known.get(&key) {
                found.clone()
            } else {
                let found = kube::discovery::pinned_kind(&self.client, &gvk)
                    .await
                    .map(|(resource, _)| resource)
                    .ok();
                known.insert(key, found.clone());
                found
            }
        }?;
        let api = match &r.namespace {
            Some(ns) => Api::<DynamicObject>::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::<DynamicObject>::all_with(self.client.clone(), &resource),
        };
        api.get_opt(&r.name).await.ok().flatten()?.metadata.uid
    }

    fn correlator(&self) -> std::sync::MutexGuard<'_, Correlator> {
        self.correlator
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn event(&self, note: &Note, uid: Option<String>, now: &str) -> Event {
        let r = &note.regarding;
        // client-go's name: the object's, then the time in nanoseconds, in hex.
        let nanos = k8s_openapi::jiff::Timestamp::now().as_nanosecond();
        let value = json!({
            "metadata": {
                "name": format!("{}.{:x}", r.name, nanos),
                "namespace": r.namespace.clone().unwrap_or_else(|| "default".into()),
            },
            "regarding": {
                "apiVersion": r.api_version,
                "kind": r.kind,
                "name": r.name,
                "namespace": r.namespace,
                "uid": uid,
            },
            "eventTime": now,
            "reason": note.reason,
            "action": note.action,
            "note": clipped(&note.message),
            "type": match note.kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
            "reportingController": "backflow",
            "reportingInstance": self.host,
        });
        serde_json::from_value(value).unwrap_or_default()
    }
}

/// `message` as a note kube-apiserver takes: at most 1 KiB, cut at a character.
fn clipped(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// `t` as a `MicroTime` (`eventTime`, `series.lastObservedTime`): microseconds, in UTC.
fn micro_time(t: k8s_openapi::jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(message: &str) -> Note {
        Note {
            regarding: Regarding {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("web".into()),
                name: "conf".into(),
            },
            kind: EventType::Normal,
            reason: "LiveValueKept".into(),
            action: "Merge".into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_long_message_is_clipped_to_a_note_at_a_character() {
        assert_eq!(clipped("short"), "short");
        let long = "é".repeat(700);
        let note = clipped(&long);
        assert!(note.len() <= 1024 && note.ends_with('…'), "{}", note.len());
        assert!(note.len() > 1000);
    }

    #[test]
    fn event_times_are_micro_times_in_utc() {
        let t: k8s_openapi::jiff::Timestamp = "2026-12-06T10:00:00.123456789+02:00"
            .parse()
            .expect("a time");
        assert_eq!(micro_time(t), "2026-12-06T08:00:00.123456Z");
    }

    #[test]
    fn the_same_event_within_ten_minutes_is_counted_on_the_first() {
        let mut c = Correlator::default();
        let start = Instant::now();
        let a = note("field a kept");
        assert_eq!(c.observe(&a, start), Write::Create);
        c.written(&a, "conf.1".into());
        assert_eq!(
            c.observe(&a, start + Duration::from_secs(60)),
            Write::Count {
                name: "conf.1".into(),
                count: 2
            }
        );
        assert_eq!(
            c.observe(&a, start + Duration::from_secs(120)),
            Write::Count {
                name: "conf.1".into(),
                count: 3
            }
        );
        // Another message is another event.
        assert_eq!(c.observe(&note("field b kept"), start), Write::Create);
        // Past ten minutes after the first: a new event.
        assert_eq!(
            c.observe(&a, start + Duration::from_secs(601)),
            Write::Create
        );
        // An Event gone (expired) is written anew.
        c.written(&a, "conf.2".into());
        c.forget(&a);
        assert_eq!(
            c.observe(&a, start + Duration::from_secs(602)),
            Write::Create
        );
    }
}
