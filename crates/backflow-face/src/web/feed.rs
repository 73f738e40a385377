//! The live activity feed: the newest writes of the record, rendered in the page and then
//! pushed to it as they happen (server-sent events, no reload).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use backflow_api::{RecordedWrite, WriteRecord, WriteVerb};
use serde::Serialize;

use super::page::esc;

/// How often the stream looks for new writes: the record is in memory, so a look is cheap.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One write as the feed shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedItem {
    /// When (RFC 3339).
    pub at: String,
    /// The resourceVersion it gave the object (the stream resumes after it).
    pub resource_version: u64,
    /// `configmaps default/demo`.
    pub object: String,
    /// What happened and who did it, for a person.
    pub text: String,
    /// The object's page.
    pub href: String,
}

impl FeedItem {
    /// `write` as the feed shows it.
    #[must_use]
    pub fn of(write: &RecordedWrite) -> Self {
        let key = &write.key;
        let resource = if key.resource.group.is_empty() {
            key.resource.resource.clone()
        } else {
            format!("{}.{}", key.resource.resource, key.resource.group)
        };
        let object = if key.namespace.is_empty() {
            format!("{resource} {}", key.name)
        } else {
            format!("{resource} {}/{}", key.namespace, key.name)
        };
        let verb = match write.verb {
            WriteVerb::Create => "created",
            WriteVerb::Update => "changed",
            WriteVerb::Delete => "deleted",
        };
        let who = match (&write.user, &write.manager) {
            (Some(user), Some(manager)) => format!(" by {user} ({manager})"),
            (Some(user), None) => format!(" by {user}"),
            (None, Some(manager)) => format!(" by {manager}"),
            (None, None) => String::new(),
        };
        let href = format!(
            "/ui/object?{}",
            form_urlencoded::Serializer::new(String::new())
                .append_pair("group", &key.resource.group)
                .append_pair("plural", &key.resource.resource)
                .append_pair("namespace", &key.namespace)
                .append_pair("name", &key.name)
                .finish()
        );
        Self {
            at: write.at.clone(),
            resource_version: write.resource_version,
            object,
            text: format!("{verb}{who}"),
            href,
        }
    }

    /// As a list item of the page.
    #[must_use]
    pub fn html(&self) -> String {
        format!(
            "<li data-rv=\"{}\"><time>{}</time> <a href=\"{}\">{}</a> {}</li>",
            self.resource_version,
            esc(&self.at),
            esc(&self.href),
            esc(&self.object),
            esc(&self.text)
        )
    }
}

/// Whether the feed shows `write`: not backflow's own bookkeeping (its statuses, defaults and
/// the server's bootstrap, written as `backflow` or `backflow-…` field managers or with none), which would drown what people and
/// appliers did. The applier's writes stay.
fn shown(write: &RecordedWrite) -> bool {
    match write.manager.as_deref() {
        None | Some("unknown") => write.user.is_some(),
        Some(manager) => {
            manager == "backflow-applier"
                || !(manager == "backflow" || manager.starts_with("backflow-"))
        }
    }
}

/// How many recorded writes the feed looks back through to find what it shows.
const LOOK_BACK: usize = 2_000;

/// The newest `limit` writes the feed shows, newest first.
#[must_use]
pub fn newest(record: &WriteRecord, limit: usize) -> Vec<FeedItem> {
    let mut items: Vec<FeedItem> = record
        .after(0, LOOK_BACK)
        .iter()
        .rev()
        .filter(|w| shown(w))
        .take(limit)
        .map(FeedItem::of)
        .collect();
    items.truncate(limit);
    items
}

/// Server-sent events: each write after resourceVersion `after` as an event `write` whose data
/// is a [`FeedItem`] in JSON and whose id is its resourceVersion, as it is recorded.
pub fn stream(record: Arc<WriteRecord>, after: u64) -> Response {
    let events = futures::stream::unfold((record, after), |(record, mut after)| async move {
        let mut idle = Duration::ZERO;
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            let new = record.after(after, 100);
            if let Some(last) = new.last().map(|w| w.resource_version) {
                let mut text = String::new();
                for write in new.iter().filter(|w| shown(w)) {
                    let data = serde_json::to_string(&FeedItem::of(write)).unwrap_or_default();
                    // The id is what a reconnecting browser sends back as Last-Event-ID.
                    let rv = write.resource_version;
                    let _ = write!(text, "id: {rv}\nevent: write\ndata: {data}\n\n");
                }
                if !text.is_empty() {
                    return Some((Ok::<_, Infallible>(text), (record, last)));
                }
                after = last;
                continue;
            }
            idle += LOOK_EVERY;
            if idle >= KEEP_ALIVE {
                return Some((Ok(": still here\n\n".to_string()), (record, after)));
            }
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// The page's script: follow the stream, newest first, from the newest write shown.
pub const FEED_SCRIPT: &str = "
(function(){
  var feed=document.getElementById('feed');if(!feed||!window.EventSource)return;
  var first=feed.querySelector('li');var after=first?first.getAttribute('data-rv'):'0';
  var source=new EventSource('/ui/feed?after='+encodeURIComponent(after));
  source.addEventListener('write',function(e){
    var item=JSON.parse(e.data);var li=document.createElement('li');li.setAttribute('data-rv',item.resourceVersion);
    var time=document.createElement('time');time.textContent=item.at;li.appendChild(time);li.appendChild(document.createTextNode(' '));
    var a=document.createElement('a');a.href=item.href;a.textContent=item.object;li.appendChild(a);
    li.appendChild(document.createTextNode(' '+item.text));feed.insertBefore(li,feed.firstChild);
    while(feed.children.length>100){feed.removeChild(feed.lastChild);}
  });
})();
";

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::{GroupResource, ObjectKey};
    use http_body_util::BodyExt;

    fn write(rv: u64, manager: &str) -> RecordedWrite {
        RecordedWrite {
            key: ObjectKey::new(GroupResource::new("", "configmaps"), "default", "demo"),
            resource_version: rv,
            user: None,
            manager: Some(manager.into()),
            verb: WriteVerb::Update,
            at: "2027-01-15T08:00:00Z".into(),
        }
    }

    #[test]
    fn backflows_bookkeeping_is_not_activity_and_the_applier_is() {
        let record = WriteRecord::default();
        for (rv, manager) in [
            (1, "kubectl-edit"),
            (2, "backflow-mirror"),
            (3, "backflow"),
            (4, "backflow-applier"),
            (5, "unknown"),
        ] {
            record.record(write(rv, manager));
        }
        let shown: Vec<u64> = newest(&record, 10)
            .iter()
            .map(|i| i.resource_version)
            .collect();
        assert_eq!(shown, [4, 1], "newest first, bookkeeping left out");
        assert_eq!(newest(&record, 1).len(), 1);
        let item = FeedItem::of(&write(7, "kubectl-edit"));
        assert_eq!(
            item.href,
            "/ui/object?group=&plural=configmaps&namespace=default&name=demo"
        );
        assert!(
            item.html().contains("changed by kubectl-edit"),
            "{}",
            item.html()
        );
    }

    #[tokio::test]
    async fn the_stream_sends_what_comes_after_with_resource_versions_as_ids() {
        let record = Arc::new(WriteRecord::default());
        record.record(write(1, "kubectl-edit"));
        let response = stream(record.clone(), 1);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        record.record(write(2, "backflow-mirror"));
        record.record(write(3, "kubectl-patch"));
        let mut body = response.into_body();
        let frame = body.frame().await.expect("an event").expect("a frame");
        let text = String::from_utf8(frame.into_data().expect("data").to_vec()).expect("utf8");
        assert!(text.starts_with("id: 3\nevent: write\ndata: {"), "{text}");
        assert!(
            !text.contains("\"resourceVersion\":1") && !text.contains("backflow-mirror"),
            "{text}"
        );
    }
}
