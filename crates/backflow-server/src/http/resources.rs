//! The resource endpoints: translate an HTTP request into an [`Engine`] call and its answer.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::AppState;
use super::path::{self, ResourcePath};
use super::watch::{self, WatchRequest};
use crate::engine::{DeleteOptions, Engine, ListOptions, Part, WriteOptions, Written};
use crate::error::{ApiError, ApiResult, success_status};
use crate::list::Served;
use crate::patch::{self, PatchType};
use crate::publication::{COMMIT_HEADER, Publication, WAIT_HEADER, parse_wait_header};
use crate::registry::ResourceType;
use crate::schema::FieldValidation;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::{self, IncludeObject};
use backflow_api::ObjectKey;

/// Request bodies larger than this are refused with 413, as the API server does (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

type Query = HashMap<String, String>;

fn parse_query(q: Option<&str>) -> Query {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn flag(q: &Query, name: &str) -> bool {
    q.get(name)
        .is_some_and(|v| matches!(v.as_str(), "true" | "1" | "t" | "T" | "TRUE" | "True"))
}

/// Whether the request's `Accept` header satisfies `asks`.
fn accept_is(headers: &HeaderMap, asks: fn(&str) -> bool) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(asks)
}

fn wants_table(headers: &HeaderMap) -> bool {
    accept_is(headers, table::wants_table)
}

fn wants_metadata(headers: &HeaderMap) -> bool {
    accept_is(headers, crate::partial::wanted)
}

pub(super) fn json_ok(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

pub(super) async fn read_body(body: Body) -> ApiResult<Bytes> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::RequestEntityTooLarge(format!(
                "limit is {MAX_BODY_BYTES} bytes"
            )))
        }
        Err(e) => Err(ApiError::BadRequest(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

pub(super) fn parse_json(bytes: &[u8], what: &str) -> ApiResult<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::BadRequest(format!("the {what} is not valid JSON: {e}")))
}

pub(super) fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
}

/// Object bodies are JSON, or protobuf for the kinds kubectl ≥ 1.32 `create <kind>` sends that way.
pub(super) fn object_body(headers: &HeaderMap, bytes: &[u8]) -> ApiResult<Value> {
    let ct = content_type(headers);
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "application/json" | "" | "*/*" => parse_json(bytes, "request body"),
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(bytes),
        other => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format ({other}) - accepted media types include: application/json, application/vnd.kubernetes.protobuf"
        ))),
    }
}

/// The field manager: `fieldManager`, else the User-Agent's product name, as the API server does.
fn field_manager(q: &Query, headers: &HeaderMap) -> ApiResult<String> {
    if let Some(m) = q.get("fieldManager") {
        if m.len() > 128 {
            return Err(ApiError::BadRequest(
                "fieldManager must be at most 128 characters".into(),
            ));
        }
        return Ok(m.clone());
    }
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    let product = ua.split('/').next().unwrap_or("unknown");
    Ok(product.chars().take(128).collect())
}

/// Who makes a request: the authenticated user (`None`: anonymous, or backflow itself), and
/// under RBAC what they may grant.
#[derive(Debug, Clone, Default)]
pub struct User {
    /// The user's name.
    pub name: Option<std::sync::Arc<str>>,
    /// What an RBAC object they write may grant.
    pub grantor: Option<std::sync::Arc<crate::rbac::Grantor>>,
}

fn write_options(q: &Query, headers: &HeaderMap, user: &User) -> ApiResult<WriteOptions> {
    Ok(WriteOptions {
        user: user.name.clone(),
        grantor: user.grantor.clone(),
        dry_run: dry_run(q)?,
        field_manager: field_manager(q, headers)?,
        force: flag(q, "force"),
        field_validation: FieldValidation::parse(q.get("fieldValidation").map(String::as_str))?,
    })
}

/// A `Warning` header per message, which kubectl prints as `Warning: …`.
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The answer to a write: 201 when it created the object, with any warnings.
fn written(t: &ResourceType, w: &Written) -> Response {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let resp = with_warnings(json_ok(code, &w.object), &w.warnings);
    stored(resp, t, &w.object)
}

/// Marks a write's answer with what it stored, so a `X-Backflow-Wait` request can wait for it.
fn stored(mut resp: Response, t: &ResourceType, obj: &Value) -> Response {
    if let Ok(rv) = crate::object::resource_version(obj).parse::<u64>() {
        let key = ObjectKey::new(
            t.group_resource(),
            crate::object::namespace(obj),
            crate::object::name(obj),
        );
        resp.extensions_mut().insert(StoredWrite {
            key,
            resource_version: rv,
        });
    }
    resp
}

fn dry_run(q: &Query) -> ApiResult<bool> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "unsupported dryRun value {other:?}; the only supported value is \"All\""
        ))),
    }
}

fn list_options(q: &Query, t: &ResourceType) -> ApiResult<ListOptions> {
    let limit = match q.get("limit") {
        Some(l) if !l.is_empty() => l.parse::<usize>().map_err(|_| {
            ApiError::BadRequest(format!("limit must be a non-negative integer, got {l:?}"))
        })?,
        _ => 0,
    };
    Ok(ListOptions {
        labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(
            q.get("fieldSelector").map_or("", String::as_str),
            &t.group,
            &t.kind,
        )?,
        limit,
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        exact: match q.get("resourceVersionMatch").map(String::as_str) {
            Some("Exact") => Some(resource_version_param(q)?.ok_or_else(|| {
                ApiError::BadRequest(
                    "resourceVersionMatch=Exact needs a resourceVersion to list at".into(),
                )
            })?),
            _ => None,
        },
    })
}

fn resource_version_param(q: &Query) -> ApiResult<Option<u64>> {
    match q.get("resourceVersion").map(String::as_str) {
        None | Some("") => Ok(None),
        Some(rv) => rv.parse::<u64>().map(Some).map_err(|_| {
            ApiError::BadRequest(format!(
                "invalid resourceVersion {rv:?}: must be an integer"
            ))
        }),
    }
}

/// Serves one request on a resource path.
pub async fn serve(
    state: AppState,
    method: Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Body,
    user: User,
) -> Response {
    let wait = match parse_wait_header(headers.get(WAIT_HEADER).and_then(|v| v.to_str().ok())) {
        Ok(w) => w,
        Err(e) => return ApiError::BadRequest(e).into_response(),
    };
    let mut resp = match route(&state, &method, &uri, &headers, body, &user).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let dry_run = uri.query().is_some_and(|q| q.contains("dryRun=All"));
    if let (Some(timeout), Some(write)) = (wait, resp.extensions().get::<StoredWrite>().cloned())
        && !dry_run
    {
        let outcome = match state.extensions.waiter.get() {
            Some(waiter) => {
                waiter
                    .wait(write.key, write.resource_version, timeout)
                    .await
            }
            None => Publication::NotMirrored,
        };
        if let Ok(v) = http::HeaderValue::from_str(outcome.header_value()) {
            resp.headers_mut().insert(COMMIT_HEADER, v);
        }
        if let Some(warning) = outcome.warning() {
            resp = with_warnings(resp, &[warning]);
        }
    }
    resp
}

/// The object a write stored, carried on its response.
#[derive(Debug, Clone)]
pub(super) struct StoredWrite {
    pub(super) key: ObjectKey,
    pub(super) resource_version: u64,
}

async fn route(
    state: &AppState,
    method: &Method,
    uri: &http::Uri,
    headers: &HeaderMap,
    body: Body,
    user: &User,
) -> ApiResult<Response> {
    let decoded = percent_decoded(uri.path())?;
    let p = path::parse(&decoded).ok_or(ApiError::UnknownResource)?;
    let engine = &state.engine;
    let t = engine
        .resource_type(&p.group, &p.version, &p.plural)
        .ok_or(ApiError::UnknownResource)?;
    if p.namespace.is_some() && !t.namespaced() {
        return Err(ApiError::UnknownResource);
    }
    if t.behavior == crate::registry::KindBehavior::Review {
        return Err(ApiError::MethodNotAllowed(format!(
            "{} can only be created: POST one to ask",
            t.plural
        )));
    }
    let q = parse_query(uri.query());
    check_query(&q)?;
    let ns = p.namespace.clone().unwrap_or_default();
    let Some(name) = &p.name else {
        return collection(state, method, &t, &p, &q, headers, body, user).await;
    };
    let part = match p.subresource.as_deref() {
        None => Part::Main,
        Some("status") if t.status_subresource => Part::Status,
        Some("token") if t.group.is_empty() && t.plural == "serviceaccounts" => {
            return super::token::token_request(state, method, &t, &ns, name, headers, body).await;
        }
        Some("scale") if t.scale.is_some() => {
            return scale(engine, method, &t, &ns, name, &q, headers, body, user).await;
        }
        Some(_) => return Err(ApiError::UnknownResource),
    };
    object(engine, method, &t, &ns, name, part, &q, headers, body, user).await
}

/// The path as kube-apiserver routes it: percent-encoded bytes decoded (`my%2Dapp` is `my-app`).
fn percent_decoded(path: &str) -> ApiResult<String> {
    if !path.contains('%') {
        return Ok(path.to_string());
    }
    let bad = || ApiError::BadRequest(format!("invalid percent-encoding in the path {path:?}"));
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = path.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// The query parameters every request shares, checked as kube-apiserver decodes them: a
/// boolean that is not one (400), a `resourceVersionMatch` it does not know (422).
fn check_query(q: &Query) -> ApiResult<()> {
    for name in ["watch", "allowWatchBookmarks", "sendInitialEvents"] {
        if let Some(v) = q.get(name)
            && !matches!(
                v.as_str(),
                "" | "1"
                    | "t"
                    | "T"
                    | "true"
                    | "TRUE"
                    | "True"
                    | "0"
                    | "f"
                    | "F"
                    | "false"
                    | "FALSE"
                    | "False"
            )
        {
            return Err(ApiError::BadRequest(format!(
                "invalid value {v:?} for the query parameter {name}: must be true or false"
            )));
        }
    }
    match q.get("resourceVersionMatch").map(String::as_str) {
        None | Some("" | "Exact" | "NotOlderThan") => Ok(()),
        Some(other) => Err(ApiError::Invalid {
            group: "meta.k8s.io".into(),
            kind: "ListOptions".into(),
            name: String::new(),
            causes: vec![crate::error::Cause::invalid(
                "resourceVersionMatch",
                other,
                "supported values: \"Exact\", \"NotOlderThan\"",
            )],
        }),
    }
}

/// A watch of the collection, answered as a stream of events.
fn start_watch(
    state: &AppState,
    t: &ResourceType,
    p: &ResourcePath,
    q: &Query,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let engine = &state.engine;
    let send_initial_events = flag(q, "sendInitialEvents");
    if send_initial_events {
        check_streaming_list(q)?;
    }
    let timeout = match q.get("timeoutSeconds") {
        Some(s) if !s.is_empty() => Some(Duration::from_secs(s.parse::<u64>().map_err(|_| {
            ApiError::BadRequest(format!("timeoutSeconds must be an integer, got {s:?}"))
        })?)),
        _ => None,
    };
    let req = WatchRequest {
        resource_type: t.clone(),
        namespace: p.namespace.clone(),
        filter: list_options(q, t)?,
        resource_version: resource_version_param(q)?,
        send_initial_events,
        bookmarks: flag(q, "allowWatchBookmarks"),
        timeout,
        objects: if wants_table(headers) {
            watch::EventObjects::Table(watch::TableEvents {
                include: IncludeObject::parse(q.get("includeObject").map(String::as_str)),
                clock: engine.clock(),
            })
        } else if wants_metadata(headers) {
            watch::EventObjects::Metadata
        } else {
            watch::EventObjects::Whole
        },
    };
    let s = watch::stream(
        engine.store().clone(),
        req,
        state.shutdown.clone(),
        state.bookmark_interval,
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(s))
        .map_err(|e| ApiError::Internal(format!("cannot build the watch response: {e}")))
}

/// A streaming list (`sendInitialEvents`) needs `resourceVersionMatch=NotOlderThan` and
/// bookmarks, as on kube-apiserver (422 `ListOptions` otherwise).
fn check_streaming_list(q: &Query) -> ApiResult<()> {
    let mut causes = Vec::new();
    if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        causes.push(crate::error::Cause::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !flag(q, "allowWatchBookmarks") {
        causes.push(crate::error::Cause::forbidden(
            "allowWatchBookmarks",
            "sendInitialEvents requires setting allowWatchBookmarks to true",
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        group: String::new(),
        kind: "ListOptions".into(),
        name: String::new(),
        causes,
    })
}

#[allow(clippy::too_many_arguments)]
async fn collection(
    state: &AppState,
    method: &Method,
    t: &ResourceType,
    p: &ResourcePath,
    q: &Query,
    headers: &HeaderMap,
    body: Body,
    user: &User,
) -> ApiResult<Response> {
    let engine = &state.engine;
    match *method {
        Method::GET if flag(q, "watch") => start_watch(state, t, p, q, headers),
        Method::GET => {
            resource_version_param(q)?;
            let list = engine.list(t, p.namespace.as_deref(), &list_options(q, t)?)?;
            if wants_table(headers) {
                let meta = list.metadata.clone();
                let items: Vec<Value> = list.items.into_iter().map(Served::into_value).collect();
                let include = IncludeObject::parse(q.get("includeObject").map(String::as_str));
                return Ok(json_ok(
                    StatusCode::OK,
                    &table::table(t, &items, meta, include, engine.now()),
                ));
            }
            if wants_metadata(headers) {
                return Ok((
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    crate::partial::list(&list.metadata, &list.items),
                )
                    .into_response());
            }
            let chunks = futures::stream::iter(list.into_json_chunks().map(Ok::<_, Infallible>));
            Ok((
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                Body::from_stream(chunks),
            )
                .into_response())
        }
        Method::POST => {
            if t.namespaced() && p.namespace.is_none() {
                return Err(ApiError::MethodNotAllowed(format!(
                    "create of {} requires a namespace: POST /…/namespaces/NAMESPACE/{}",
                    t.plural, t.plural
                )));
            }
            let bytes = read_body(body).await?;
            let obj = object_body(headers, &bytes)?;
            let opts = write_options(q, headers, user)?;
            let w = engine
                .create(t, p.namespace.as_deref().unwrap_or(""), obj, &opts)
                .await?;
            Ok(written(t, &w))
        }
        Method::DELETE => {
            let bytes = read_body(body).await?;
            let opts = delete_options(q, &bytes, user)?;
            let list = engine
                .delete_collection(t, p.namespace.as_deref(), &list_options(q, t)?, &opts)
                .await?;
            Ok(json_ok(StatusCode::OK, &list))
        }
        _ => Err(ApiError::MethodNotAllowed(format!(
            "{method} is not supported on the {} collection",
            t.plural
        ))),
    }
}

fn delete_options(q: &Query, bytes: &[u8], user: &User) -> ApiResult<DeleteOptions> {
    let mut opts = DeleteOptions {
        dry_run: dry_run(q)?,
        user: user.name.clone(),
        ..Default::default()
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(opts);
    }
    let body = parse_json(bytes, "DeleteOptions body")?;
    if let Some(dr) = body.get("dryRun").and_then(Value::as_array) {
        for v in dr {
            match v.as_str() {
                Some("All") => opts.dry_run = true,
                other => {
                    return Err(ApiError::BadRequest(format!(
                        "unsupported dryRun value {other:?}; the only supported value is \"All\""
                    )));
                }
            }
        }
    }
    opts.uid = body
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .map(str::to_string);
    opts.resource_version = body
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(opts)
}

/// A PATCH's type (from its content type) and body: an apply configuration (YAML or JSON, with
/// a field manager) or a JSON patch document.
fn patch_request(
    t: &ResourceType,
    q: &Query,
    headers: &HeaderMap,
    bytes: &[u8],
) -> ApiResult<(PatchType, Value)> {
    let pt = PatchType::from_content_type(content_type(headers))
        .ok_or_else(|| patch::unsupported(!t.custom))?;
    let body = if pt == PatchType::Apply {
        if !q.contains_key("fieldManager") {
            return Err(ApiError::BadRequest(
                "fieldManager is required for apply requests".into(),
            ));
        }
        crate::apply::parse_body(bytes)?
    } else {
        parse_json(bytes, "patch")?
    };
    Ok((pt, body))
}

/// One object, as stored (its bytes copied) or as a one-row Table.
fn get_object(
    engine: &Engine,
    t: &ResourceType,
    ns: &str,
    name: &str,
    q: &Query,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    resource_version_param(q)?;
    let served = engine.get_served(t, ns, name)?;
    if wants_table(headers) {
        let obj = served.into_value();
        let meta = json!({"resourceVersion": crate::object::resource_version(&obj)});
        let include = IncludeObject::parse(q.get("includeObject").map(String::as_str));
        return Ok(json_ok(
            StatusCode::OK,
            &table::table(t, &[obj], meta, include, engine.now()),
        ));
    }
    if wants_metadata(headers) {
        return Ok(json_ok(
            StatusCode::OK,
            &crate::partial::object(&served.into_value()),
        ));
    }
    let mut body = Vec::new();
    served.write_json(&mut body);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

#[allow(clippy::too_many_arguments)]
async fn object(
    engine: &Engine,
    method: &Method,
    t: &ResourceType,
    ns: &str,
    name: &str,
    part: Part,
    q: &Query,
    headers: &HeaderMap,
    body: Body,
    user: &User,
) -> ApiResult<Response> {
    if t.namespaced() && ns.is_empty() {
        return Err(ApiError::UnknownResource);
    }
    match *method {
        Method::GET => get_object(engine, t, ns, name, q, headers),
        Method::PUT => {
            let bytes = read_body(body).await?;
            let obj = object_body(headers, &bytes)?;
            let opts = write_options(q, headers, user)?;
            let w = engine.update(t, ns, name, part, obj, &opts).await?;
            Ok(written(t, &w))
        }
        Method::PATCH => {
            let bytes = read_body(body).await?;
            let (pt, patch_body) = patch_request(t, q, headers, &bytes)?;
            let opts = write_options(q, headers, user)?;
            let w = engine
                .patch(t, ns, name, part, pt, patch_body, &opts)
                .await?;
            Ok(written(t, &w))
        }
        Method::DELETE if part == Part::Main => {
            let bytes = read_body(body).await?;
            let opts = delete_options(q, &bytes, user)?;
            let obj = engine.delete(t, ns, name, &opts).await?;
            // An object held by finalizers is answered as it now stands (202 like the API server);
            // a removed one as its last state.
            let still_there = crate::object::is_deleting(&obj)
                && !opts.dry_run
                && engine.get(t, ns, name).is_ok();
            let code = if still_there {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            if obj.is_object() {
                Ok(stored(json_ok(code, &obj), t, &obj))
            } else {
                Ok(json_ok(
                    code,
                    &success_status(&t.group, &t.plural, name, ""),
                ))
            }
        }
        _ => Err(ApiError::MethodNotAllowed(format!(
            "{method} is not supported here"
        ))),
    }
}

fn pointer_of(json_path: &str) -> String {
    json_path
        .trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, s| format!("{acc}/{s}"))
}

fn scale_of(t: &ResourceType, obj: &Value) -> Value {
    let paths = t
        .scale
        .clone()
        .unwrap_or_else(|| crate::registry::ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        });
    let spec = obj
        .pointer(&pointer_of(&paths.spec_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let status = obj
        .pointer(&pointer_of(&paths.status_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let keep = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ];
    let meta: serde_json::Map<String, Value> = meta
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut status_obj = json!({"replicas": status});
    let selector = match &paths.label_selector {
        Some(p) => obj
            .pointer(&pointer_of(p))
            .and_then(Value::as_str)
            .map(str::to_string),
        None => obj
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            }),
    };
    if let Some(s) = selector {
        status_obj["selector"] = json!(s);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": {"replicas": spec}, "status": status_obj})
}

#[allow(clippy::too_many_arguments)]
async fn scale(
    engine: &Engine,
    method: &Method,
    t: &ResourceType,
    ns: &str,
    name: &str,
    q: &Query,
    headers: &HeaderMap,
    body: Body,
    user: &User,
) -> ApiResult<Response> {
    let current = engine.get(t, ns, name)?;
    let mut s = scale_of(t, &current);
    match *method {
        Method::GET => return Ok(json_ok(StatusCode::OK, &s)),
        Method::PUT => {
            let bytes = read_body(body).await?;
            s = object_body(headers, &bytes)?;
        }
        Method::PATCH => {
            let bytes = read_body(body).await?;
            let pt = PatchType::from_content_type(content_type(headers))
                .ok_or_else(|| patch::unsupported(true))?;
            let p = parse_json(&bytes, "patch")?;
            match pt {
                PatchType::Json => patch::json_patch(&mut s, &p)?,
                PatchType::Strategic => patch::strategic(&mut s, &p)?,
                _ => patch::merge(&mut s, &p),
            }
        }
        _ => {
            return Err(ApiError::MethodNotAllowed(format!(
                "{method} is not supported on scale"
            )));
        }
    }
    let replicas = s
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::Invalid {
            group: "autoscaling".into(),
            kind: "Scale".into(),
            name: name.into(),
            causes: vec![crate::error::Cause::required("spec.replicas")],
        })?;
    if replicas < 0 {
        return Err(ApiError::Invalid {
            group: "autoscaling".into(),
            kind: "Scale".into(),
            name: name.into(),
            causes: vec![crate::error::Cause::invalid(
                "spec.replicas",
                &replicas.to_string(),
                "must be greater than or equal to 0",
            )],
        });
    }
    let spec_path = t
        .scale
        .as_ref()
        .map_or_else(|| ".spec.replicas".into(), |p| p.spec_replicas.clone());
    let mut merge = json!(replicas);
    for seg in spec_path.trim_start_matches('.').split('.').rev() {
        merge = json!({ seg: merge });
    }
    if let Some(rv) = s
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
    {
        merge["metadata"] = json!({"resourceVersion": rv});
    }
    let opts = write_options(q, headers, user)?;
    let w = engine
        .patch(t, ns, name, Part::Main, PatchType::Merge, merge, &opts)
        .await?;
    Ok(json_ok(StatusCode::OK, &scale_of(t, &w.object)))
}
