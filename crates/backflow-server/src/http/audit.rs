//! Every request audited as the policy asks: its `RequestReceived` event written at once, its
//! `ResponseComplete` (for a watch, `ResponseStarted`) once answered — after the commit that
//! carried a write, when the write is mirrored, so the event can name it.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use super::AppState;
use super::authorize::{Impersonation, attributes_of, subject_of};
use super::resources::{StoredWrite, object_body, read_body};
use crate::audit::{COMMIT_ANNOTATION, Level, Recorded, Stage, now_micro};
use crate::auth::UserInfo;

/// How long a write's event waits for the commit that carries it.
const COMMIT_WAIT: Duration = Duration::from_secs(60);

/// The address a request came from.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// The middleware.
pub(super) async fn audit(State(s): State<AppState>, req: Request<Body>, next: Next) -> Response {
    let Some(auditor) = s.audit.clone() else {
        return next.run(req).await;
    };
    let user = req
        .extensions()
        .get::<UserInfo>()
        .cloned()
        .or_else(|| s.in_process.then(UserInfo::backflow));
    let subject = subject_of(user.as_ref());
    let attributes = attributes_of(req.method(), req.uri());
    let decision = auditor.policy.decide(&subject, &attributes);
    if decision.level == Level::None {
        return next.run(req).await;
    }
    let mut recorded = Recorded {
        id: uuid::Uuid::new_v4().to_string(),
        level: decision.level,
        request_uri: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), ToString::to_string),
        attributes,
        user: subject,
        uid: user.map(|u| u.uid),
        impersonated: Impersonation::of(req.headers()).map(|i| i.user_info()),
        source_ip: req.extensions().get::<Peer>().map(|p| p.0.ip().to_string()),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        received: now_micro(),
        request_object: None,
    };
    let req = match with_request_object(&mut recorded, req).await {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    if !decision.omit.contains(&Stage::RequestReceived) {
        auditor.log.write(&recorded.event(
            Stage::RequestReceived,
            &recorded.received,
            None,
            None,
            Map::new(),
        ));
    }
    let watch = recorded.attributes.verb == "watch";
    let resp = next.run(req).await;
    let stage = if watch {
        Stage::ResponseStarted
    } else {
        Stage::ResponseComplete
    };
    if decision.omit.contains(&stage) {
        return resp;
    }
    let (resp, body) = with_response_object(&recorded, resp).await;
    let answered = Answered {
        stage,
        code: resp.status().as_u16(),
        body,
        stored: resp.extensions().get::<StoredWrite>().cloned(),
    };
    // Backflow's own writes are its applier's (from Git: the claim's operation names the commit
    // applied) or status it keeps: no commit of the mirror carries them.
    let waiter = s.extensions.waiter.get().cloned().filter(|_| !s.in_process);
    write_answered(auditor, recorded, answered, waiter);
    resp
}

/// The request, its body read into `recorded` first when the level records bodies.
async fn with_request_object(
    recorded: &mut Recorded,
    req: Request<Body>,
) -> Result<Request<Body>, crate::error::ApiError> {
    if !recorded.records_bodies() || req.method().is_safe() {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let bytes = read_body(body).await?;
    recorded.request_object = object_body(&parts.headers, &bytes).ok();
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// The response, and its body when the level records it (never a watch's).
async fn with_response_object(recorded: &Recorded, resp: Response) -> (Response, Option<Value>) {
    if recorded.level != Level::RequestResponse || recorded.attributes.verb == "watch" {
        return (resp, None);
    }
    let (parts, body) = resp.into_parts();
    let bytes = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let value: Option<Value> = serde_json::from_slice(&bytes).ok();
    (Response::from_parts(parts, Body::from(bytes)), value)
}

/// How a request was answered, as its last event records it.
struct Answered {
    stage: Stage,
    code: u16,
    body: Option<Value>,
    /// The write it stored, if any.
    stored: Option<StoredWrite>,
}

/// Writes the answer's event: at once, or — for a write the mirror carries — once `waiter`
/// knows the commit that carried it.
fn write_answered(
    auditor: std::sync::Arc<crate::audit::Auditor>,
    mut recorded: Recorded,
    answered: Answered,
    waiter: Option<std::sync::Arc<dyn crate::publication::PublicationWaiter>>,
) {
    let Answered {
        stage,
        code,
        body,
        stored,
    } = answered;
    // A create names its object in the body: the event names what was stored.
    if let (Some(stored), Some(r)) = (&stored, recorded.attributes.resource.as_mut())
        && r.name.is_none()
    {
        r.name = Some(stored.key.name.clone());
    }
    let dry_run = recorded.request_uri.contains("dryRun=All");
    let write = move |annotations: Map<String, Value>| {
        let event = recorded.event(stage, &now_micro(), Some(code), body.as_ref(), annotations);
        auditor.log.write(&event);
    };
    match (stored, waiter) {
        (Some(stored), Some(waiter)) if !dry_run => {
            tokio::spawn(async move {
                let outcome = waiter
                    .wait(stored.key, stored.resource_version, COMMIT_WAIT)
                    .await;
                let mut annotations = Map::new();
                annotations.insert(COMMIT_ANNOTATION.into(), json!(outcome.header_value()));
                write(annotations);
            });
        }
        _ => write(Map::new()),
    }
}
