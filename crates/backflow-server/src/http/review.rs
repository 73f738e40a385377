//! Who am I, and what may I do: `kubectl auth whoami` (`SelfSubjectReview`), `kubectl auth
//! can-i` (`SelfSubjectAccessReview`; `SelfSubjectRulesReview` for `--list`), and the reviews
//! about somebody else a controller or an admin asks (`SubjectAccessReview`,
//! `LocalSubjectAccessReview`), answered by the same RBAC policy that authorizes requests.
//!
//! Where the server does not authorize (no authentication, or `AlwaysAllow`), every review
//! says everything is allowed, and why.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::authorize::subject_of;
use super::resources::{object_body, read_body};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::rbac::{Attributes, PolicyRule, Subject};

/// Why everything is allowed, as the reviews' `reason` says it.
const NO_AUTHORIZATION: &str = "backflow authorizes no request here (no authentication, or --authorization-mode AlwaysAllow): every user may do everything";

const API: &str = "authorization.k8s.io/v1";

/// A posted review: its body (JSON, or protobuf as kubectl sends it), checked to be of `kind`,
/// and who posted it.
async fn posted(
    req: Request<Body>,
    api_version: &str,
    kind: &str,
) -> Result<(Value, Subject, Option<UserInfo>), ApiError> {
    let user = req.extensions().get::<UserInfo>().cloned();
    let subject = req
        .extensions()
        .get::<Arc<Subject>>()
        .map_or_else(|| subject_of(user.as_ref()), |s| (**s).clone());
    let headers = req.headers().clone();
    let bytes = read_body(req.into_body()).await?;
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        object_body(&headers, &bytes)?
    };
    let given = body.get("kind").and_then(Value::as_str).unwrap_or(kind);
    if given != kind || !body.is_object() {
        return Err(ApiError::BadRequest(format!(
            "expected a {kind} of {api_version}, got {given}"
        )));
    }
    Ok((body, subject, user))
}

fn created(api_version: &str, kind: &str, body: &Value, status: Value) -> Response {
    let mut answer = json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": body.get("metadata").cloned().unwrap_or(json!({"creationTimestamp": null})),
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
    let (body, subject, user) = match posted(req, &api, "SelfSubjectReview").await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let mut info = json!({"username": subject.name, "groups": subject.groups});
    if let Some(u) = user.filter(|u| !u.uid.is_empty()) {
        info["uid"] = json!(u.uid);
    }
    created(&api, "SelfSubjectReview", &body, json!({"userInfo": info}))
}

/// What a review's `spec` asks about: `resourceAttributes` or `nonResourceAttributes`.
fn asked(spec: &Value) -> Attributes {
    if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        let text = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("");
        let resource = if text("subresource").is_empty() {
            text("resource").to_string()
        } else {
            format!("{}/{}", text("resource"), text("subresource"))
        };
        return Attributes::resource(
            text("verb"),
            text("group"),
            &resource,
            Some(text("namespace")),
            Some(text("name")),
        );
    }
    let n = &spec["nonResourceAttributes"];
    Attributes::non_resource(
        n["verb"].as_str().unwrap_or(""),
        n["path"].as_str().unwrap_or(""),
    )
}

/// The answer to whether `who` may do `a`.
fn decision(s: &AppState, who: &Subject, a: &Attributes) -> Value {
    if !s.rbac {
        return json!({"allowed": true, "reason": NO_AUTHORIZATION});
    }
    if s.policies.current(s.engine.store()).allows(who, a) {
        json!({"allowed": true, "reason": "RBAC: allowed"})
    } else {
        json!({"allowed": false})
    }
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: may I?
pub async fn can_i(State(s): State<AppState>, req: Request<Body>) -> Response {
    match posted(req, API, "SelfSubjectAccessReview").await {
        Ok((body, subject, _)) => {
            let status = decision(&s, &subject, &asked(&body["spec"]));
            created(API, "SelfSubjectAccessReview", &body, status)
        }
        Err(e) => e.into_response(),
    }
}

/// The subject a `SubjectAccessReview`'s spec names (`user`, `groups`).
fn reviewed_subject(spec: &Value) -> Subject {
    Subject {
        name: spec["user"].as_str().unwrap_or("").to_string(),
        groups: spec["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: may they?
pub async fn subject_access(State(s): State<AppState>, req: Request<Body>) -> Response {
    match posted(req, API, "SubjectAccessReview").await {
        Ok((body, _, _)) => {
            let spec = &body["spec"];
            let status = decision(&s, &reviewed_subject(spec), &asked(spec));
            created(API, "SubjectAccessReview", &body, status)
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews`: may they,
/// in this namespace?
pub async fn local_subject_access(
    State(s): State<AppState>,
    axum::extract::Path(namespace): axum::extract::Path<String>,
    req: Request<Body>,
) -> Response {
    let (mut body, _, _) = match posted(req, API, "LocalSubjectAccessReview").await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let given = body
        .pointer("/spec/resourceAttributes/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !given.is_empty() && given != namespace {
        return ApiError::BadRequest(format!(
            "spec.resourceAttributes.namespace must match namespace: {namespace}"
        ))
        .into_response();
    }
    if let Some(r) = body
        .pointer_mut("/spec/resourceAttributes")
        .and_then(Value::as_object_mut)
    {
        r.insert("namespace".into(), json!(namespace));
    }
    let spec = &body["spec"];
    let status = decision(&s, &reviewed_subject(spec), &asked(spec));
    created(API, "LocalSubjectAccessReview", &body, status)
}

fn rule_json(r: &PolicyRule) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if r.non_resource_urls.is_empty()
        && let Some(o) = v.as_object_mut()
    {
        o.entry("apiGroups").or_insert(json!([]));
        o.entry("resources").or_insert(json!([]));
    }
    v
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: what may I do in a namespace?
pub async fn rules(State(s): State<AppState>, req: Request<Body>) -> Response {
    let (body, subject, _) = match posted(req, API, "SelfSubjectRulesReview").await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if !s.rbac {
        return created(
            API,
            "SelfSubjectRulesReview",
            &body,
            json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
                "evaluationError": NO_AUTHORIZATION,
            }),
        );
    }
    let namespace = body
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let held = s
        .policies
        .current(s.engine.store())
        .rules_for(&subject, namespace);
    let (non_resource, resource): (Vec<&PolicyRule>, Vec<&PolicyRule>) =
        held.iter().partition(|r| !r.non_resource_urls.is_empty());
    created(
        API,
        "SelfSubjectRulesReview",
        &body,
        json!({
            "resourceRules": resource.into_iter().map(rule_json).collect::<Vec<_>>(),
            "nonResourceRules": non_resource.into_iter().map(rule_json).collect::<Vec<_>>(),
            "incomplete": false,
        }),
    )
}
