//! `POST …/serviceaccounts/NAME/token` (`kubectl create token NAME`): a `TokenRequest`
//! answered with a signed token for the service account.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};

use super::AppState;
use super::resources::{json_ok, object_body, read_body};
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceType;
use crate::service_account::{DEFAULT_EXPIRATION, MAX_EXPIRATION, MIN_EXPIRATION, TokenClaims};

/// Issues a token for service account `ns`/`name` of type `t`, for the life the request asks
/// (`spec.expirationSeconds`, in JSON or in the protobuf kubectl sends: 10 minutes at least, 48
/// hours at most, an hour when it asks none).
pub async fn token_request(
    state: &AppState,
    method: &Method,
    t: &ResourceType,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed(format!(
            "{method} is not supported on serviceaccounts/token; create a TokenRequest with POST"
        )));
    }
    let account = state.engine.get(t, ns, name)?;
    let bytes = read_body(body).await?;
    // JSON, or the protobuf kubectl sends (its `TokenRequestSpec` is decoded).
    let asked: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        object_body(headers, &bytes)?
    };
    let seconds = asked
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .map_or(DEFAULT_EXPIRATION.as_secs(), |s| s.max(0).unsigned_abs());
    if seconds < MIN_EXPIRATION.as_secs() {
        return Err(ApiError::Invalid {
            group: "authentication.k8s.io".into(),
            kind: "TokenRequest".into(),
            name: name.into(),
            causes: vec![Cause::invalid(
                "spec.expirationSeconds",
                &seconds.to_string(),
                "may not specify a duration less than 10 minutes",
            )],
        });
    }
    let life = std::time::Duration::from_secs(seconds).min(MAX_EXPIRATION);
    let now = state.engine.now();
    let claims = TokenClaims {
        namespace: ns.to_string(),
        name: name.to_string(),
        uid: crate::object::uid(&account).to_string(),
    };
    let token = state.service_accounts.issue(&claims, now + life);
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns,
                     "creationTimestamp": humantime::format_rfc3339_seconds(now).to_string()},
        "spec": {"audiences": asked.pointer("/spec/audiences").cloned().unwrap_or(json!([])),
                 "expirationSeconds": life.as_secs()},
        "status": {"token": token,
                   "expirationTimestamp": humantime::format_rfc3339_seconds(now + life).to_string()},
    });
    Ok(json_ok(StatusCode::CREATED, &answer))
}
