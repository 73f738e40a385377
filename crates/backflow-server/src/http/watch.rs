//! Watch streams: newline-delimited JSON events, from the event log, filtered per request.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use backflow_api::Clock;

use backflow_api::ObjectKey;

use crate::engine::{ListOptions, at_version};
use crate::list::Served;
use crate::registry::ResourceType;
use crate::store::{EventType, Store, StoredObject, WatchEvent};
use crate::table::{self, IncludeObject};

/// A watch that asked for `as=Table` (`kubectl get -w`): each event's object is a one-row
/// Table, as the API server sends, so kubectl keeps printing the same columns it printed for the
/// list. The first event carries the column definitions; later ones omit them.
#[derive(Clone)]
pub struct TableEvents {
    /// `includeObject` of the request.
    pub include: IncludeObject,
    /// Where the Age cells are measured from.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for TableEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableEvents")
            .field("include", &self.include)
            .finish_non_exhaustive()
    }
}

/// What a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The type watched (its version shapes every event).
    pub resource_type: ResourceType,
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// Label and field selectors.
    pub filter: ListOptions,
    /// `resourceVersion`: `None`/`0` means "current state first".
    pub resource_version: Option<u64>,
    /// `sendInitialEvents=true`: current state first, then the `initial-events-end` bookmark.
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `timeoutSeconds`; `None` keeps the stream open until the client or the server leaves.
    pub timeout: Option<Duration>,
    /// The shape of each event's object.
    pub objects: EventObjects,
}

/// What each event of a watch carries.
#[derive(Debug, Clone)]
pub enum EventObjects {
    /// The object at the watched version.
    Whole,
    /// A one-row Table (`as=Table`).
    Table(TableEvents),
    /// Its metadata alone (`as=PartialObjectMetadata`).
    Metadata,
}

/// Where a watch stands between events.
struct WatchState {
    req: WatchRequest,
    store: Store,
    /// The initial state still to send (`ADDED` each), serialized one by one as the client
    /// reads, so a watch of a hundred thousand objects never holds them all as JSON at once.
    /// Sent before `pending`.
    initial: VecDeque<StoredObject>,
    pending: VecDeque<Bytes>,
    last: u64,
    latest: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
    deadline: Option<Instant>,
    next_bookmark: Instant,
    bookmark_interval: Duration,
    done: bool,
    /// Whether a Table event already carried the column definitions.
    sent_columns: bool,
}

fn line(event_type: &str, object: &Value) -> Bytes {
    framed(event_type, 256, |out| {
        // Serializing a `Value` into memory cannot fail.
        let _ = serde_json::to_writer(out, object);
    })
}

/// One event line around an object written by `write_object` (directly rather than through
/// `json!`, which would copy the object first).
fn framed(event_type: &str, object_len: usize, write_object: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut out = Vec::with_capacity(object_len + 40);
    out.extend_from_slice(b"{\"type\":");
    let _ = serde_json::to_writer(&mut out, event_type);
    out.extend_from_slice(b",\"object\":");
    write_object(&mut out);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn bookmark(t: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": t.kind, "apiVersion": t.api_version(), "metadata": meta}),
    )
}

/// The in-stream 410 a client gets for a resourceVersion older than the history kept.
fn expired(requested: u64, oldest: u64) -> Bytes {
    line(
        "ERROR",
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {requested} ({oldest})"),
                "reason": "Expired", "code": 410}),
    )
}

/// One ADDED/MODIFIED/DELETED event line: its object at the watched version (copied as stored
/// when it is served so), or a one-row Table when the client asked for that.
fn event_line(
    event_type: &str,
    t: &ResourceType,
    objects: &EventObjects,
    sent_columns: &mut bool,
    obj: &StoredObject,
) -> Bytes {
    let tbl = match objects {
        EventObjects::Whole => {
            return match Served::as_type(obj, t) {
                Served::Stored(o) => framed(event_type, o.len(), |out| {
                    out.extend_from_slice(o.json());
                }),
                Served::Converted(v) => line(event_type, &v),
            };
        }
        EventObjects::Metadata => return line(event_type, &crate::partial::object(&obj.value())),
        EventObjects::Table(tbl) => tbl,
    };
    let obj = at_version(&obj.value(), t);
    let meta = json!({"resourceVersion": crate::object::resource_version(&obj)});
    let mut table = table::table(t, &[obj], meta, tbl.include, tbl.clock.now());
    if std::mem::replace(sent_columns, true)
        && let Some(m) = table.as_object_mut()
    {
        m.remove("columnDefinitions");
    }
    line(event_type, &table)
}

impl WatchState {
    fn in_scope(&self, key: &ObjectKey, obj: &StoredObject) -> bool {
        let ns_ok = self
            .req
            .namespace
            .as_deref()
            .is_none_or(|ns| key.namespace == ns);
        ns_ok && self.req.filter.selects(obj)
    }

    /// Turns one committed change into what this watcher should see: a change that moves an
    /// object into or out of the selection is an ADDED or DELETED for this watcher.
    fn translate(&mut self, e: &WatchEvent) -> Option<Bytes> {
        if e.key.resource != self.req.resource_type.group_resource() {
            return None;
        }
        let now = self.in_scope(&e.key, &e.object);
        let before = e
            .previous
            .as_ref()
            .is_some_and(|p| self.in_scope(&e.key, p));
        let t = &self.req.resource_type;
        let kind = match e.event_type {
            EventType::Added if now => EventType::Added,
            EventType::Modified if now && before => EventType::Modified,
            EventType::Modified if now => EventType::Added,
            EventType::Modified if before => EventType::Deleted,
            EventType::Deleted if before || now => EventType::Deleted,
            _ => return None,
        };
        Some(event_line(
            kind.as_str(),
            t,
            &self.req.objects,
            &mut self.sent_columns,
            &e.object,
        ))
    }

    fn collect(&mut self) {
        match self.store.events().since(self.last) {
            Ok(events) => {
                for e in events {
                    if let Some(b) = self.translate(&e) {
                        self.pending.push_back(b);
                    }
                    self.last = e.resource_version;
                }
            }
            Err(x) => {
                self.pending.push_back(expired(x.requested, x.oldest));
                self.done = true;
            }
        }
    }
}

/// Starts a watch: the initial events (if asked for) and then every matching change.
pub fn stream(
    store: Store,
    req: WatchRequest,
    shutdown: watch::Receiver<bool>,
    bookmark_interval: Duration,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let mut latest = store.events().subscribe();
    latest.borrow_and_update();
    let mut pending = VecDeque::new();
    let mut initial_objects = VecDeque::new();
    let mut done = false;
    let mut sent_columns = false;
    let initial = req.send_initial_events || req.resource_version.is_none_or(|rv| rv == 0);
    let last = if initial {
        let t = req.resource_type.clone();
        let gr = t.group_resource();
        let ns = if t.namespaced() {
            req.namespace.clone()
        } else {
            None
        };
        let (objects, rv): (Vec<StoredObject>, u64) = store.read(|s| {
            let objs = s
                .list(&gr, ns.as_deref())
                .filter(|(_, v)| req.filter.selects(v))
                .map(|(_, v)| v.clone())
                .collect();
            (objs, s.resource_version())
        });
        if matches!(req.objects, EventObjects::Table(_)) {
            // Table watches (humans) are small, and the first row must carry the columns
            // before any change collected below: serialized now, in order.
            for o in objects {
                let added = event_line("ADDED", &t, &req.objects, &mut sent_columns, &o);
                pending.push_back(added);
            }
        } else {
            initial_objects = objects.into();
        }
        if req.send_initial_events {
            pending.push_back(bookmark(&t, rv, true));
        }
        rv
    } else {
        let rv = req.resource_version.unwrap_or(0);
        if let Err(x) = store.events().since(rv) {
            pending.push_back(expired(x.requested, x.oldest));
            done = true;
        }
        rv
    };
    let now = Instant::now();
    let mut state = WatchState {
        deadline: req.timeout.map(|t| now + t),
        req,
        store,
        initial: initial_objects,
        pending,
        last,
        latest,
        shutdown,
        next_bookmark: now + bookmark_interval,
        bookmark_interval,
        done,
        sent_columns,
    };
    if !state.done {
        state.collect();
    }
    futures::stream::unfold(state, |mut s| async move {
        s.next_line().await.map(|b| (Ok(b), s))
    })
}

impl WatchState {
    /// The next line to send: the initial objects first, then what was collected; otherwise it
    /// waits for a change, a bookmark, the timeout or shutdown. `None` when the watch ends.
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if let Some(o) = self.initial.pop_front() {
                return Some(event_line(
                    "ADDED",
                    &self.req.resource_type,
                    &self.req.objects,
                    &mut self.sent_columns,
                    &o,
                ));
            }
            if let Some(b) = self.pending.pop_front() {
                return Some(b);
            }
            if self.done {
                return None;
            }
            let deadline = self.deadline;
            tokio::select! {
                () = async move {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => self.done = true,
                r = self.shutdown.changed() => {
                    if r.is_err() || *self.shutdown.borrow() {
                        self.done = true;
                    }
                }
                r = self.latest.changed() => {
                    if r.is_err() {
                        self.done = true;
                    } else {
                        self.collect();
                    }
                }
                () = tokio::time::sleep_until(self.next_bookmark) => {
                    self.next_bookmark = Instant::now() + self.bookmark_interval;
                    if self.req.bookmarks {
                        let b = bookmark(&self.req.resource_type, self.last, false);
                        self.pending.push_back(b);
                    }
                }
            }
        }
    }
}
