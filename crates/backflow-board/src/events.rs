//! Kubernetes Events about what backflow did, written as client-go's `record` package writes
//! them: a `core/v1` Event on the object concerned, and the same event seen again within ten
//! minutes counted on the first one (`count`, `lastTimestamp`) rather than written again, so
//! `kubectl get events` and `kubectl describe` show it once with how often it happened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
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
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        if let Write::Count { name, count } = &decision {
            let patch = json!({"count": count, "lastTimestamp": now});
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
        match api
            .create(&PostParams::default(), &self.event(&note, &now))
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

    fn correlator(&self) -> std::sync::MutexGuard<'_, Correlator> {
        self.correlator
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn event(&self, note: &Note, now: &str) -> Event {
        let r = &note.regarding;
        let value = json!({
            "metadata": {
                "generateName": format!("{}.", r.name),
                "namespace": r.namespace.clone().unwrap_or_else(|| "default".into()),
            },
            "involvedObject": {
                "apiVersion": r.api_version,
                "kind": r.kind,
                "name": r.name,
                "namespace": r.namespace,
            },
            "reason": note.reason,
            "message": note.message,
            "type": match note.kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
            "source": {"component": "backflow", "host": self.host},
            "reportingComponent": "backflow",
            "reportingInstance": self.host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        serde_json::from_value(value).unwrap_or_default()
    }
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
            message: message.into(),
        }
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
