//! Who am I, and what may I do: `kubectl auth whoami` (`SelfSubjectReview`) and `kubectl auth
//! can-i` (`SelfSubjectAccessReview`, `SelfSubjectRulesReview` for `--list`).
//!
//! backflow authenticates but does not authorize: every authenticated user (and, where
//! authentication is off, everyone) may do everything, and the reviews say so instead of
//! answering 404.

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

use super::resources::{content_type, parse_json, read_body};
use crate::auth::UserInfo;
use crate::error::ApiError;

/// Why everything is allowed, as the reviews' `reason` says it.
const NO_AUTHORIZATION: &str =
    "backflow has no authorization: every authenticated user may do everything";

/// The review object a request posted, checked to be of `kind`. kubectl posts reviews as
/// protobuf: nothing in one changes the answer, so a body that is not JSON is taken as an empty
/// review (and the answer, in JSON, which kubectl accepts, has an empty `spec`).
async fn posted(
    req: Request<Body>,
    api_version: &str,
    kind: &str,
) -> Result<(Value, Option<UserInfo>), ApiError> {
    let user = req.extensions().get::<UserInfo>().cloned();
    let json = content_type(req.headers()).starts_with("application/json");
    // Read with the server's body limit, as every other request is.
    let bytes = read_body(req.into_body()).await?;
    let body: Value = if !json || bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        parse_json(&bytes, &format!("{kind} body"))?
    };
    let given = body.get("kind").and_then(Value::as_str).unwrap_or(kind);
    if given != kind || !body.is_object() {
        return Err(ApiError::BadRequest(format!(
            "expected a {kind} of {api_version}, got {given}"
        )));
    }
    Ok((body, user))
}

fn created(api_version: &str, kind: &str, body: &Value, status: Value) -> Response {
    let mut answer = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"creationTimestamp": null},
        "spec": body.get("spec").cloned().unwrap_or(json!({})),
        "status": status,
    });
    if kind == "SelfSubjectReview"
        && let Some(o) = answer.as_object_mut()
    {
        o.remove("spec");
    }
    (
        StatusCode::CREATED,
        [(http::header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

/// `POST /apis/authentication.k8s.io/{v1,v1beta1,v1alpha1}/selfsubjectreviews`: the
/// request's user (kubectl 1.27 asks the alpha version, 1.28 the beta, later ones v1).
pub async fn whoami(
    axum::extract::Path(version): axum::extract::Path<String>,
    req: Request<Body>,
) -> Response {
    if !matches!(version.as_str(), "v1" | "v1beta1" | "v1alpha1") {
        return ApiError::UnknownResource.into_response();
    }
    let api = format!("authentication.k8s.io/{version}");
    let (body, user) = match posted(req, &api, "SelfSubjectReview").await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let info = match user {
        Some(u) => {
            let mut groups = u.groups.clone();
            groups.push("system:authenticated".into());
            json!({"username": &*u.name, "uid": u.uid, "groups": groups})
        }
        None => json!({"username": "system:anonymous", "groups": ["system:unauthenticated"]}),
    };
    created(&api, "SelfSubjectReview", &body, json!({"userInfo": info}))
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: allowed.
pub async fn can_i(req: Request<Body>) -> Response {
    const API: &str = "authorization.k8s.io/v1";
    match posted(req, API, "SelfSubjectAccessReview").await {
        Ok((body, _)) => created(
            API,
            "SelfSubjectAccessReview",
            &body,
            json!({"allowed": true, "reason": NO_AUTHORIZATION}),
        ),
        Err(e) => e.into_response(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: every verb on everything.
pub async fn rules(req: Request<Body>) -> Response {
    const API: &str = "authorization.k8s.io/v1";
    match posted(req, API, "SelfSubjectRulesReview").await {
        Ok((body, _)) => created(
            API,
            "SelfSubjectRulesReview",
            &body,
            json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
                "evaluationError": NO_AUTHORIZATION,
            }),
        ),
        Err(e) => e.into_response(),
    }
}
