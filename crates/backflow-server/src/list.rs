//! A list answer, written from the stored objects' JSON wherever an object is served as stored.
//!
//! A list of a hundred thousand objects built as one `Value` would parse every object into the
//! heap at once (about 4.5 KiB for a 1 KiB `ConfigMap`); written from the stored JSON, it costs
//! the answer's bytes and nothing else.

use backflow_api::{GroupResource, ObjectKey};
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::{ListOptions, at_version};
use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::registry::ResourceType;
use crate::store::StoredObject;

/// About how many bytes each chunk of a list answer holds.
const CHUNK_BYTES: usize = 64 * 1024;

/// One item of a list (or one watch event's object).
#[derive(Debug, Clone)]
pub enum Served {
    /// Served as stored: its JSON is copied, never parsed.
    Stored(StoredObject),
    /// Relabelled or converted for the requested version.
    Converted(Value),
}

impl Served {
    /// `obj` as a client of `t` reads it: as stored when it already carries `t`'s apiVersion
    /// and kind and `t` converts nothing; parsed and brought to `t` otherwise.
    #[must_use]
    pub fn as_type(obj: &StoredObject, t: &ResourceType) -> Self {
        if !crate::convert::converts(t) && obj.is_typed(&t.api_version(), &t.kind) {
            Self::Stored(obj.clone())
        } else {
            Self::Converted(at_version(&obj.value(), t))
        }
    }

    /// Appends its JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Self::Stored(o) => out.extend_from_slice(o.json()),
            // Serializing a `Value` into memory cannot fail.
            Self::Converted(v) => {
                let _ = serde_json::to_writer(out, v);
            }
        }
    }

    /// The object, parsed.
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Stored(o) => o.value(),
            Self::Converted(v) => v,
        }
    }
}

/// A list of one type: `apiVersion`, `kind`, `metadata` and the items.
#[derive(Debug, Clone)]
pub struct ObjectList {
    /// The list's apiVersion (the type's).
    pub api_version: String,
    /// The list kind (`ConfigMapList`).
    pub kind: String,
    /// `resourceVersion`, and `continue` / `remainingItemCount` for a page.
    pub metadata: Value,
    /// The objects, in order.
    pub items: Vec<Served>,
}

impl ObjectList {
    /// The list as JSON in chunks of about 64 KiB, each written when the client reads it: a
    /// list of a million objects never exists whole in memory.
    #[must_use]
    pub fn into_json_chunks(self) -> JsonChunks {
        let head =
            json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata});
        // `{"apiVersion":…,"metadata":{…}}` with its closing brace replaced by the items.
        let mut start = Vec::with_capacity(CHUNK_BYTES);
        let _ = serde_json::to_writer(&mut start, &head);
        start.pop();
        start.extend_from_slice(b",\"items\":[");
        JsonChunks {
            start: Some(start),
            items: self.items.into_iter(),
            written: 0,
            done: false,
        }
    }

    /// The list as one `Value` (what a Table is built from).
    #[must_use]
    pub fn into_value(self) -> Value {
        let items: Vec<Value> = self.items.into_iter().map(Served::into_value).collect();
        json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": self.metadata, "items": items})
    }
}
/// Where the next page of a list starts, as the `continue` token carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// The resourceVersion of the list's first page, which every page answers with.
    #[serde(rename = "rv")]
    pub resource_version: u64,
    /// `namespace/name` of the previous page's last object.
    #[serde(rename = "start")]
    pub position: String,
    /// How many objects followed the previous page (without a selector), so the next page
    /// need not count them again: counting what follows every page of a million objects would
    /// walk the read model once per page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<usize>,
}

impl ContinueToken {
    /// The token as a client sends it back.
    #[must_use]
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Reads a token a client sent; 400 when it is not one of ours.
    pub fn decode(token: &str) -> ApiResult<Self> {
        let bad = || {
            ApiError::BadRequest(format!(
                "continue key is not valid: {token:?}; restart the list without `continue`"
            ))
        };
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| bad())?;
        serde_json::from_slice(&bytes).map_err(|_| bad())
    }

    /// The key of the previous page's last object, for a list of `resource`.
    #[must_use]
    pub fn after(&self, resource: &GroupResource) -> ObjectKey {
        let (namespace, name) = self
            .position
            .split_once('/')
            .unwrap_or(("", &self.position));
        ObjectKey::new(resource.clone(), namespace, name)
    }
}

/// The objects a list page is chosen from, read under the store's lock.
#[derive(Debug)]
pub struct Candidates {
    /// Without a selector and with a limit, only the page's own objects; otherwise every object
    /// from the page's start, for the selectors to choose from.
    objects: Vec<StoredObject>,
    /// Objects after the page already known to follow it (without a selector).
    remaining: usize,
    /// The resourceVersion the objects were read at.
    pub resource_version: u64,
}

impl Candidates {
    /// Takes what a page needs from `objects` (those after the page's start, in order).
    /// `known` is how many followed the previous page, when its token said so.
    pub fn gather<'a>(
        mut objects: impl Iterator<Item = &'a StoredObject>,
        resource_version: u64,
        opts: &ListOptions,
        known: Option<usize>,
    ) -> Self {
        if opts.selects_all() && opts.limit > 0 {
            let page: Vec<StoredObject> = objects.by_ref().take(opts.limit).cloned().collect();
            let remaining = match known {
                // Objects created or deleted since the first page make the carried count
                // approximate; whether any follow is always exact.
                Some(k) if objects.next().is_some() => k.saturating_sub(page.len()).max(1),
                Some(_) => 0,
                None => objects.count(),
            };
            return Self {
                objects: page,
                remaining,
                resource_version,
            };
        }
        Self {
            objects: objects.cloned().collect(),
            remaining: 0,
            resource_version,
        }
    }

    /// The page: the selected objects up to the limit, served as `t`, answered at
    /// resourceVersion `rv`, with a continue token when more follow.
    #[must_use]
    pub fn into_list(self, t: &ResourceType, opts: &ListOptions, rv: u64) -> ObjectList {
        let mut remaining = self.remaining;
        let mut items = Vec::new();
        let mut last = None;
        for v in self.objects.iter().filter(|v| opts.selects(v)) {
            if opts.limit > 0 && items.len() >= opts.limit {
                remaining += 1;
                continue;
            }
            items.push(Served::as_type(v, t));
            last = Some(v);
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if remaining > 0
            && let Some(last) = last.map(StoredObject::value)
        {
            let token = ContinueToken {
                resource_version: rv,
                position: format!("{}/{}", object::namespace(&last), object::name(&last)),
                remaining: opts.selects_all().then_some(remaining),
            };
            metadata["continue"] = json!(token.encode());
            // As kube-apiserver: the count only when no selector chose the items (with one,
            // what follows is not counted as the selector would see it).
            if opts.selects_all() {
                metadata["remainingItemCount"] = json!(remaining);
            }
        }
        ObjectList {
            api_version: t.api_version(),
            kind: t.list_kind.clone(),
            metadata,
            items,
        }
    }
}

/// The chunks of a list answer (see [`ObjectList::into_json_chunks`]).
#[derive(Debug)]
pub struct JsonChunks {
    /// The list's head, until the first chunk is written.
    start: Option<Vec<u8>>,
    items: std::vec::IntoIter<Served>,
    /// Items written so far.
    written: usize,
    done: bool,
}

impl Iterator for JsonChunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = self
            .start
            .take()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES));
        while out.len() < CHUNK_BYTES {
            let Some(item) = self.items.next() else {
                out.extend_from_slice(b"]}");
                self.done = true;
                break;
            };
            if self.written > 0 {
                out.push(b',');
            }
            item.write_json(&mut out);
            self.written += 1;
        }
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_maps() -> ResourceType {
        crate::registry::Registry::builtin()
            .get("", "v1", "configmaps")
            .cloned()
            .expect("ConfigMaps are built in")
    }

    #[test]
    fn a_page_carries_what_follows_it_and_the_next_page_does_not_count_again() {
        let objects: Vec<StoredObject> = (0..5)
            .map(|i| {
                StoredObject::new(&json!({"metadata": {"name": format!("c{i}"), "namespace": "d"}}))
            })
            .collect();
        let opts = ListOptions {
            limit: 2,
            ..ListOptions::default()
        };
        let first = Candidates::gather(objects.iter(), 9, &opts, None);
        assert_eq!(first.remaining, 3, "counted once");
        // The next page starts after c1 and is told three follow: it does not walk the rest.
        let second = Candidates::gather(objects[2..].iter(), 9, &opts, Some(3));
        assert_eq!(second.remaining, 1);
        // A count gone stale (objects deleted since) still says more follow while they do…
        let stale = Candidates::gather(objects[2..].iter(), 9, &opts, Some(2));
        assert_eq!(stale.remaining, 1);
        // …and nothing once none do.
        let last = Candidates::gather(objects[4..].iter(), 9, &opts, Some(1));
        assert_eq!(last.remaining, 0);
        let token = ContinueToken::decode(
            first.into_list(&config_maps(), &opts, 9).metadata["continue"]
                .as_str()
                .expect("a continue token"),
        )
        .expect("ours");
        // With a selector a page says that more follow, not how many.
        let selected = ListOptions {
            limit: 2,
            labels: crate::selector::LabelSelector::parse("!gone").expect("selector"),
            ..ListOptions::default()
        };
        let page = Candidates::gather(objects.iter(), 9, &selected, None).into_list(
            &config_maps(),
            &selected,
            9,
        );
        assert!(page.metadata["continue"].is_string());
        assert!(
            page.metadata.get("remainingItemCount").is_none(),
            "{}",
            page.metadata
        );
        assert_eq!(
            token,
            ContinueToken {
                resource_version: 9,
                position: "d/c1".into(),
                remaining: Some(3)
            }
        );
    }

    #[test]
    fn a_list_in_chunks_is_the_list() {
        let data = "x".repeat(1000);
        let objects: Vec<Value> = (0..300)
            .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}, "data": {"k": data}}))
            .collect();
        for n in [0, 1, 300] {
            let list = ObjectList {
                api_version: "v1".into(),
                kind: "ConfigMapList".into(),
                metadata: json!({"resourceVersion": "7"}),
                items: objects[..n]
                    .iter()
                    .enumerate()
                    .map(|(i, o)| {
                        // Both kinds of item, in turn.
                        if i % 2 == 0 {
                            Served::Stored(StoredObject::new(o))
                        } else {
                            Served::Converted(o.clone())
                        }
                    })
                    .collect(),
            };
            let chunks: Vec<Bytes> = list.clone().into_json_chunks().collect();
            let (last, full) = chunks.split_last().expect("at least one chunk");
            assert!(
                full.iter()
                    .all(|c| (CHUNK_BYTES..CHUNK_BYTES + 2048).contains(&c.len())),
                "chunks near their size"
            );
            assert!(last.len() < CHUNK_BYTES + 2048);
            assert_eq!(chunks.len() > 1, n == 300, "{n} objects");
            let whole: Vec<u8> = chunks.concat();
            let parsed: Value = serde_json::from_slice(&whole).expect("one JSON document");
            assert_eq!(parsed, list.into_value());
        }
    }
}
