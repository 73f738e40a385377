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
    let impersonated = Impersonation::of(req.headers()).map(|i| i.user_info());
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
        impersonated,
        source_ip: req.extensions().get::<Peer>().map(|p| p.0.ip().to_string()),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        received: now_micro(),
        request_object: None,
    };
    let req = if recorded.records_bodies() && !req.method().is_safe() {
        let (parts, body) = req.into_parts();
        let bytes = match read_body(body).await {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        };
        recorded.request_object = object_body(&parts.headers, &bytes).ok();
        Request::from_parts(parts, Body::from(bytes))
    } else {
        req
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
    let code = resp.status().as_u16();
    let (resp, body) = if recorded.level == Level::RequestResponse && !watch {
        let (parts, body) = resp.into_parts();
        let bytes = body
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        (Response::from_parts(parts, Body::from(bytes)), value)
    } else {
        (resp, None)
    };
    let stored = resp.extensions().get::<StoredWrite>().cloned();
    // A create names its object in the body: the event names what was stored.
    if let (Some(stored), Some(r)) = (&stored, recorded.attributes.resource.as_mut())
        && r.name.is_none()
    {
        r.name = Some(stored.key.name.clone());
    }
    let dry_run = recorded.request_uri.contains("dryRun=All");
    // Backflow's own writes are its applier's (from Git: the claim's operation names the commit
    // applied) or status it keeps: no commit of the mirror carries them.
    let waiter = s.extensions.waiter.get().cloned().filter(|_| !s.in_process);
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
    resp
}
