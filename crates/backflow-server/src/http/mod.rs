//! The HTTP face of the server: routes, authentication, and the non-resource endpoints.

mod audit;
mod authorize;
mod discovery;
mod path;
mod resources;
mod review;
mod token;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, header};
use serde_json::json;

use crate::auth::{CertificateUser, Tokens, UserInfo};
use crate::engine::Engine;
use crate::error::ApiError;
use crate::service_account::ServiceAccountTokens;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The object semantics.
    pub engine: Engine,
    /// The bearer tokens requests must carry and the users they stand for; `None`:
    /// authentication is off (loopback without tokens, and backflow's own in-process client).
    pub tokens: Option<Arc<Tokens>>,
    /// Issues service account tokens (`kubectl create token`) and knows them again.
    pub service_accounts: ServiceAccountTokens,
    /// Flips to `true` when the server stops, ending open watches.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// How often idle watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `host:port` clients reach the server at (legacy discovery reports it).
    pub server_address: String,
    /// What other parts of backflow plug in after the server started.
    pub extensions: Arc<Extensions>,
    /// Whether requests are authorized under RBAC (else every authenticated user may do
    /// everything).
    pub rbac: bool,
    /// Where requests are audited, when an audit log is configured.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// The RBAC policy, built again only when an RBAC object changed.
    pub policies: Arc<crate::rbac::PolicyCache>,
    /// Serves backflow's own requests (its mirror and appliers, in this process): audited as
    /// [`UserInfo::backflow`], where a listener's requests carry who sent them.
    pub in_process: bool,
}

pub use audit::Peer;

/// Hooks installed once, after start: the mirror's publication waiter and metrics.
#[derive(Default)]
pub struct Extensions {
    /// Answers `X-Backflow-Wait: pushed`.
    pub waiter: std::sync::OnceLock<Arc<dyn crate::publication::PublicationWaiter>>,
    /// Renders the `OpenMetrics` text served at `/metrics`.
    pub metrics: std::sync::OnceLock<Arc<dyn Fn() -> String + Send + Sync>>,
    /// Answers `/backflow/…` (what people see of backflow: `backflow history`, `why`,
    /// `diff`) and the web view under `/ui/`, behind the API's authentication and
    /// authorization.
    pub face: std::sync::OnceLock<Router>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("waiter", &self.waiter.get().is_some())
            .field("metrics", &self.metrics.get().is_some())
            .field("face", &self.face.get().is_some())
            .finish()
    }
}

/// The version the server reports: minor 32 makes kubectl's dispatcher pick kubectl 1.32.
#[must_use]
pub fn version_info() -> serde_json::Value {
    json!({
        "major": "1", "minor": "32",
        "gitVersion": format!("v1.32.0-backflow.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "0", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

fn json_response(body: serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Builds the router for a server.
pub fn router(state: AppState) -> Router {
    let routes = routes(state);
    // Discovery answers with or without a trailing slash, as kube-apiserver does (kr8s asks for
    // `/version/`): the path is trimmed before routing, authentication included.
    Router::new().fallback_service(
        tower::ServiceBuilder::new()
            .map_request(trim_discovery_slash)
            .service(routes),
    )
}

/// A discovery path ending in `/` (`/version/`, `/api/`, `/apis/apps/v1/`) without it; every
/// other request unchanged.
fn trim_discovery_slash(mut req: Request<Body>) -> Request<Body> {
    let path = req.uri().path();
    let Some(trimmed) = path.strip_suffix('/').filter(|p| is_discovery(p)) else {
        return req;
    };
    let rebuilt = match req.uri().query() {
        Some(q) => format!("{trimmed}?{q}"),
        None => trimmed.to_string(),
    };
    if let Ok(uri) = rebuilt.parse() {
        *req.uri_mut() = uri;
    }
    req
}

/// Whether `path` is one of the discovery, version or health paths.
fn is_discovery(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    match segments.as_slice() {
        ["version" | "healthz" | "livez" | "readyz" | "api" | "apis"] => true,
        ["api", version] => !version.is_empty(),
        ["apis", group] => !group.is_empty(),
        ["apis", group, version] => !group.is_empty() && !version.is_empty(),
        ["openapi", "v2" | "v3"] => true,
        _ => false,
    }
}

/// Every route, behind authentication.
fn routes(state: AppState) -> Router {
    Router::new()
        .route("/version", get(|| async { json_response(version_info()) }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/api", get(api))
        .route("/apis", get(apis))
        .route(
            "/api/v1",
            get(|State(s): State<AppState>| async move {
                into(discovery::resource_list(&s.engine.registry(), "", "v1"))
            }),
        )
        .route("/apis/{group}", get(group))
        .route("/apis/{group}/{version}", get(group_version))
        .route(
            "/apis/authentication.k8s.io/{version}/selfsubjectreviews",
            post(review::whoami),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            post(review::can_i),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            post(review::rules),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(review::subject_access),
        )
        .route(
            "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews",
            post(review::local_subject_access),
        )
        .route("/metrics", get(metrics))
        .route("/backflow/{*rest}", get(face))
        .route("/ui", get(face))
        .route("/ui/", get(face))
        .route("/ui/{*rest}", get(face))
        .route("/openapi/v2", get(openapi_v2))
        .route(
            "/openapi/v3",
            get(|State(s): State<AppState>| async move {
                json_response(crate::openapi::index(&s.engine.registry()))
            }),
        )
        .route("/openapi/v3/{*group_version}", get(openapi_document))
        .fallback(fallback)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            authorize::authorize,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), audit::audit))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

fn into(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn api(State(s): State<AppState>, headers: HeaderMap) -> Response {
    discovery::api(&s.engine.registry(), &headers, &s.server_address)
}

async fn apis(State(s): State<AppState>, headers: HeaderMap) -> Response {
    discovery::apis(&s.engine.registry(), &headers)
}

async fn group(
    State(s): State<AppState>,
    axum::extract::Path(group): axum::extract::Path<String>,
) -> Response {
    into(discovery::group(&s.engine.registry(), &group))
}

async fn group_version(
    State(s): State<AppState>,
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
) -> Response {
    into(discovery::resource_list(
        &s.engine.registry(),
        &group,
        &version,
    ))
}

/// `/openapi/v2`: every served kind's schema as JSON ([`crate::openapi::swagger`]); asked for as
/// protobuf, a document with no definitions. kubectl before 1.29 reads the protobuf form before
/// any apply and gives up on a 404; with no definition for a type, it validates that type on the
/// server (`fieldValidation`) and builds client-side apply patches from its compiled-in types.
async fn openapi_v2(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let protobuf = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("protobuf"));
    if protobuf {
        // openapi_v2.Document { swagger: "2.0" } in protobuf: field 1, length-delimited.
        return (
            [(
                header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            vec![0x0a, 0x03, b'2', b'.', b'0'],
        )
            .into_response();
    }
    json_response(crate::openapi::swagger(&s.engine.registry()))
}

async fn openapi_document(
    State(s): State<AppState>,
    axum::extract::Path(gv): axum::extract::Path<String>,
) -> Response {
    let segs: Vec<&str> = gv.split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return ApiError::UnknownResource.into_response(),
    };
    match crate::openapi::document(&s.engine.registry(), group, version) {
        Some(doc) => json_response(doc),
        None => ApiError::UnknownResource.into_response(),
    }
}

async fn metrics(State(s): State<AppState>) -> Response {
    let body = s
        .extensions
        .metrics
        .get()
        .map_or_else(|| "# EOF\n".to_string(), |render| render());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `/backflow/…` and `/ui/…`: the face's answer, once one is installed.
async fn face(State(s): State<AppState>, req: Request<Body>) -> Response {
    match s.extensions.face.get() {
        Some(face) => {
            let face = face.clone();
            match tower::ServiceExt::oneshot(face, req).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
        None => ApiError::NotFound {
            group: String::new(),
            resource: "backflow".into(),
            name: req.uri().path().to_string(),
        }
        .into_response(),
    }
}

async fn fallback(State(s): State<AppState>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let user = resources::User {
        name: parts.extensions.get::<UserInfo>().map(|u| u.name.clone()),
        grantor: parts.extensions.get::<Arc<crate::rbac::Grantor>>().cloned(),
    };
    resources::serve(s, parts.method, parts.uri, parts.headers, body, user).await
}

/// Ready while the store commits: after a failed commit (a full disk) it answers 503 naming
/// the error, until a commit succeeds again.
async fn readyz(State(s): State<AppState>) -> Response {
    match s.engine.store().health().problem() {
        None => "ok".into_response(),
        Some(problem) => (
            http::StatusCode::SERVICE_UNAVAILABLE,
            format!("[-]store failed: {problem}\nreadyz check failed\n"),
        )
            .into_response(),
    }
}

/// Paths anyone may read, as on a cluster (`system:public-info-viewer`).
fn is_public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

async fn authenticate(State(s): State<AppState>, mut req: Request<Body>, next: Next) -> Response {
    if let Some(CertificateUser(user)) = req.extensions().get::<CertificateUser>().cloned() {
        // The TLS handshake verified the certificate against backflow's CA.
        req.extensions_mut().insert(user);
        return next.run(req).await;
    }
    if let Some(tokens) = &s.tokens {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .unwrap_or("");
        match tokens
            .user(given)
            .cloned()
            .or_else(|| service_account_user(&s, given))
        {
            Some(user) => {
                req.extensions_mut().insert(user);
            }
            None if is_public(req.uri().path()) => {}
            None => {
                tracing::warn!(path = %req.uri().path(), "request refused: missing or wrong bearer token");
                return ApiError::Unauthorized.into_response();
            }
        }
    }
    next.run(req).await
}

/// The service account a token this server issued names, while the token has not expired and
/// the service account still exists with the UID it was issued for.
fn service_account_user(s: &AppState, token: &str) -> Option<UserInfo> {
    let claims = s.service_accounts.verify(token, s.engine.now())?;
    let t = s.engine.resource_type("", "v1", "serviceaccounts")?;
    let account = s.engine.get(&t, &claims.namespace, &claims.name).ok()?;
    (crate::object::uid(&account) == claims.uid).then(|| claims.user())
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is case-insensitive
/// (RFC 9110 §11.1), as kube-apiserver reads it.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc"), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    fn trimmed(path: &str) -> String {
        let req = Request::builder().uri(path).body(Body::empty()).unwrap();
        trim_discovery_slash(req).uri().to_string()
    }

    #[test]
    fn discovery_paths_lose_a_trailing_slash_and_nothing_else_changes() {
        assert_eq!(trimmed("/version/"), "/version");
        assert_eq!(trimmed("/api/"), "/api");
        assert_eq!(trimmed("/apis/"), "/apis");
        assert_eq!(trimmed("/api/v1/"), "/api/v1");
        assert_eq!(
            trimmed("/apis/apps/v1/?timeout=32s"),
            "/apis/apps/v1?timeout=32s"
        );
        assert_eq!(trimmed("/apis/apps/"), "/apis/apps");
        assert_eq!(trimmed("/api/v1/namespaces/"), "/api/v1/namespaces/");
        assert_eq!(trimmed("/"), "/");
        assert_eq!(trimmed("/api//"), "/api//");
    }
}
