//! Any request the HTTP layer can be sent is answered, never with a panic and never with a
//! 500: malformed bodies, queries, paths and headers are the client's error (4xx), and a write
//! that is taken goes through the whole path to the store.
//!
//! The input is split on newlines: method selector, path, query, content type, body.
#![no_main]

use std::sync::LazyLock;

use backflow_server::{InProcess, ServerConfig};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt as _;

struct Server {
    runtime: tokio::runtime::Runtime,
    server: InProcess,
    _dir: tempfile::TempDir,
}

static SERVER: LazyLock<Server> = LazyLock::new(|| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("data dir");
    let config = ServerConfig::new(dir.path().join("data"));
    let server = runtime
        .block_on(InProcess::open(&config))
        .expect("in-process server");
    Server {
        runtime,
        server,
        _dir: dir,
    }
});

const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
const PREFIXES: [&str; 6] = [
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/secrets",
    "/apis/apps/v1/namespaces/default/deployments",
    "/api/v1/namespaces",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "",
];
const TYPES: [&str; 6] = [
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
];

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(5, |b| *b == b'\n');
    let selector = parts.next().unwrap_or_default();
    let pick = |i: usize| selector.get(i).copied().unwrap_or(0) as usize;
    let path_tail = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let query = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let content_type = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let body = parts.next().unwrap_or_default().to_vec();
    let method = METHODS[pick(0) % METHODS.len()];
    let uri = format!("{}{path_tail}?{query}", PREFIXES[pick(1) % PREFIXES.len()]);
    let content_type = if pick(2) % 2 == 0 {
        TYPES[pick(3) % TYPES.len()].to_string()
    } else {
        content_type
    };
    let Ok(request) = http::Request::builder()
        .method(method)
        .uri(uri.as_str())
        .header("content-type", content_type)
        .body(axum::body::Body::from(body))
    else {
        // Not a request a client can send (a URI or header hyper would not parse).
        return;
    };
    let server = &*SERVER;
    let response = server
        .runtime
        .block_on(server.server.router.clone().oneshot(request))
        .expect("the router is infallible");
    assert!(
        response.status() != http::StatusCode::INTERNAL_SERVER_ERROR,
        "{method} {uri}: 500"
    );
});
