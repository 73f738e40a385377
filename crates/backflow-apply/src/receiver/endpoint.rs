//! The HTTP side of the receiver: `POST /git-push/<hash>`.
//!
//! Evaluation order, each answered at once: not POST → 405; no receiver for the path → 404;
//! over 3 MiB → 413; suspended → 503; signature or token wrong → 404 (the same answer as an
//! unknown path, the log says which); ping or another event → 200; a body that is not a push
//! backflow can read → 400; otherwise 202, and the delivery is dispatched after the answer
//! (GitHub gives up on a reply slower than 10 s).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use backflow_api::config::ReceiverType;
use http::{HeaderMap, Method, StatusCode, Uri, header};
use http_body_util::{BodyExt, Limited};
use tokio::sync::mpsc;

use super::deliveries::DeliveryLog;
use super::delivery::{DeliveryError, PushDelivery};
use super::metrics::{Outcome, ReceiverMetrics};
use super::path::PATH_PREFIX;
use super::signature::{Event, verify};

/// The largest body read (Flux's receiver cap): GitHub's push payloads stay under 25 MB only
/// because of their commit lists, which backflow never reads.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A `GitReceiver` as the endpoint serves it.
#[derive(Clone)]
pub struct ReceiverEntry {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// How its deliveries are verified.
    pub kind: ReceiverType,
    /// The webhook secret.
    pub token: Arc<[u8]>,
    /// Answer 503 instead of acting.
    pub suspended: bool,
}

impl std::fmt::Debug for ReceiverEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiverEntry")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("suspended", &self.suspended)
            .finish_non_exhaustive()
    }
}

/// Every receiver served, by webhook path; replaced whole by the receiver controller.
#[derive(Debug, Default)]
pub struct ReceiverTable {
    by_path: RwLock<BTreeMap<String, ReceiverEntry>>,
}

impl ReceiverTable {
    /// Serves exactly `entries` from now on.
    pub fn replace(&self, entries: BTreeMap<String, ReceiverEntry>) {
        *self
            .by_path
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entries;
    }

    /// The receiver at `path`.
    #[must_use]
    pub fn get(&self, path: &str) -> Option<ReceiverEntry> {
        self.by_path
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(path)
            .cloned()
    }
}

/// A delivery that verified and names a push, waiting to be dispatched.
#[derive(Debug)]
pub struct VerifiedPush {
    /// The receiver's `namespace/name`.
    pub receiver: String,
    /// The receiver's type (for metrics).
    pub kind: ReceiverType,
    /// What it names.
    pub delivery: PushDelivery,
}

/// What the endpoint's handler needs.
#[derive(Clone)]
pub struct EndpointState {
    /// The receivers served.
    pub table: Arc<ReceiverTable>,
    /// Counters.
    pub metrics: ReceiverMetrics,
    /// Where verified pushes go.
    pub pushes: mpsc::Sender<VerifiedPush>,
    /// What became of each delivery to a known receiver.
    pub deliveries: Arc<DeliveryLog>,
}

/// The receiver's routes: everything under `/git-push/`; anything else is 404.
pub fn router(state: EndpointState) -> axum::Router {
    axum::Router::new()
        .route(
            &format!("{PATH_PREFIX}{{hash}}"),
            axum::routing::any(receive),
        )
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state(state)
}

/// A short prefix of a path, for logs (the whole path is as good as the token).
fn shown(path: &str) -> String {
    let cut = path.len().min(PATH_PREFIX.len() + 8);
    format!("{}…", path.get(..cut).unwrap_or(PATH_PREFIX))
}

async fn receive(
    State(state): State<EndpointState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let path = uri.path();
    if method != Method::POST {
        state.metrics.count("unknown", Outcome::BadMethod);
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    let Some(entry) = state.table.get(path) else {
        state.metrics.count("unknown", Outcome::UnknownPath);
        tracing::warn!(path = %shown(path), "push delivery refused: no GitReceiver has this path (answered 404)");
        return StatusCode::NOT_FOUND.into_response();
    };
    let kind = entry.kind.as_str();
    let receiver = format!("{}/{}", entry.namespace, entry.name);
    let bytes = match read_body(&headers, body).await {
        Ok(bytes) => bytes,
        Err(BodyRefusal::TooLarge) => {
            state.metrics.count(kind, Outcome::TooLarge);
            state.deliveries.record(
                &receiver,
                "refused",
                format!("the body is over {MAX_BODY} bytes (answered 413)"),
            );
            tracing::warn!(%receiver, limit = MAX_BODY, "push delivery refused: body over the limit (answered 413)");
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        }
        Err(BodyRefusal::Unreadable(e)) => {
            tracing::debug!(%receiver, error = %e, "push delivery body unreadable");
            state.metrics.count(kind, Outcome::Malformed);
            return StatusCode::BAD_REQUEST.into_response();
        }
    };
    if let Err(answered) = verified_push(&state, &entry, &receiver, &headers, &bytes) {
        return answered.into_response();
    }
    queue_push(&state, &entry, receiver, &headers, &bytes)
}

/// `Ok` when the delivery is a push the receiver takes (not suspended, verified); otherwise
/// the answer it gets, counted and recorded.
fn verified_push(
    state: &EndpointState,
    entry: &ReceiverEntry,
    receiver: &str,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<(), StatusCode> {
    let kind = entry.kind.as_str();
    if entry.suspended {
        state.metrics.count(kind, Outcome::Unavailable);
        state.deliveries.record(
            receiver,
            "refused",
            "the GitReceiver is suspended (answered 503)".into(),
        );
        tracing::info!(%receiver, "push delivery refused: the GitReceiver is suspended (answered 503)");
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    let event = match verify(entry.kind, &entry.token, headers, bytes) {
        Ok(event) => event,
        Err(why) => {
            state.metrics.count(kind, Outcome::BadSignature);
            state.deliveries.record(
                receiver,
                "refused",
                format!("it does not verify: {why} (answered 404)"),
            );
            tracing::warn!(%receiver, reason = %why, "push delivery refused: it does not verify (answered 404)");
            return Err(StatusCode::NOT_FOUND);
        }
    };
    match event {
        Event::Push => {}
        Event::Ping => {
            state.metrics.count(kind, Outcome::Ignored);
            state.deliveries.record(receiver, "ping", "verified".into());
            tracing::info!(%receiver, "ping delivery verified");
            return Err(StatusCode::OK);
        }
        Event::Other(name) => {
            state.metrics.count(kind, Outcome::Ignored);
            state
                .deliveries
                .record(receiver, "ignored", format!("event {name}: not a push"));
            tracing::debug!(%receiver, event = %name, "delivery verified; not a push, nothing to do");
            return Err(StatusCode::OK);
        }
    }
    Ok(())
}

/// Reads the verified push and hands it to the dispatcher: 202, or 503 when too many wait.
fn queue_push(
    state: &EndpointState,
    entry: &ReceiverEntry,
    receiver: String,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Response {
    let kind = entry.kind.as_str();
    let parsed = if is_form(headers) {
        PushDelivery::from_form(bytes)
    } else {
        PushDelivery::from_json(bytes)
    };
    let delivery = match parsed {
        Ok(d) => d,
        Err(e) => return unreadable(state, kind, &receiver, &e),
    };
    let push = VerifiedPush {
        receiver: receiver.clone(),
        kind: entry.kind,
        delivery,
    };
    if state.pushes.try_send(push).is_err() {
        state.metrics.count(kind, Outcome::Unavailable);
        state.deliveries.record(
            &receiver,
            "dropped",
            "too many deliveries waiting (answered 503)".into(),
        );
        tracing::warn!(%receiver, "push delivery dropped: too many deliveries waiting (answered 503); the periodic refresh will see the push");
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    StatusCode::ACCEPTED.into_response()
}

/// Why a body was not read.
enum BodyRefusal {
    /// Over [`MAX_BODY`], declared or read.
    TooLarge,
    /// The connection failed while reading.
    Unreadable(String),
}

/// The body, at most [`MAX_BODY`] bytes (a larger declared length is refused unread).
async fn read_body(headers: &HeaderMap, body: Body) -> Result<bytes::Bytes, BodyRefusal> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(BodyRefusal::TooLarge);
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyRefusal::TooLarge),
        Err(e) => Err(BodyRefusal::Unreadable(e.to_string())),
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';').next().is_some_and(|t| {
                t.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        })
}

/// 400 with the reason as the body (the delivery verified, so the sender may read why).
fn unreadable(state: &EndpointState, kind: &str, receiver: &str, e: &DeliveryError) -> Response {
    state.metrics.count(kind, Outcome::Malformed);
    state.deliveries.record(
        receiver,
        "refused",
        format!("not a push backflow can read: {e} (answered 400)"),
    );
    tracing::warn!(%receiver, reason = %e, "push delivery refused: not a push backflow can read (answered 400)");
    (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response()
}
