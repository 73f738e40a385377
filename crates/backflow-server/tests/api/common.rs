//! A server under test, reached through a kube-rs client in-process or over TCP.

use std::future::Future;
use std::time::Duration;

use backflow_server::{InProcess, RunningServer, ServerConfig, start};
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config};
use serde_json::Value;
use tempfile::TempDir;

/// How long any single wait may take before the test is declared hung.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test if it does not finish within [`HANG_GUARD`].
pub async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("hung: {what} did not finish within {HANG_GUARD:?}"),
    }
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Requests handed straight to the router.
    InProcess,
    /// A real listener on 127.0.0.1, reached through the kubeconfig it writes.
    Tcp,
}

enum Handle {
    InProcess(InProcess),
    Tcp(Box<RunningServer>),
}

/// One server with its own data directory.
pub struct TestServer {
    /// A client of the server, default namespace `default`.
    pub client: Client,
    handle: Handle,
    _dir: TempDir,
}

impl TestServer {
    /// Starts a server with default settings.
    pub async fn start(transport: Transport) -> Self {
        Self::start_with(transport, |_| {}).await
    }

    /// Starts a server, letting `tweak` adjust the configuration first.
    pub async fn start_with(transport: Transport, tweak: impl FnOnce(&mut ServerConfig)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig::new(dir.path().join("data"));
        config.listen = "127.0.0.1:0".parse().expect("address");
        tweak(&mut config);
        match transport {
            Transport::InProcess => {
                let server = InProcess::open(&config)
                    .await
                    .expect("open in-process server");
                let client = Client::new(server.router.clone(), "default");
                Self {
                    client,
                    handle: Handle::InProcess(server),
                    _dir: dir,
                }
            }
            Transport::Tcp => {
                let server = start(config).await.expect("start server");
                let client = client_from_kubeconfig(&server.kubeconfig_path).await;
                Self {
                    client,
                    handle: Handle::Tcp(Box::new(server)),
                    _dir: dir,
                }
            }
        }
    }

    /// Stops the server (ends open watches).
    pub async fn stop(self) {
        match self.handle {
            Handle::InProcess(s) => s.shutdown(),
            Handle::Tcp(s) => guard("server shutdown", (*s).shutdown()).await,
        }
    }
}

/// A client built from a kubeconfig file, as a user of the server would build it.
pub async fn client_from_kubeconfig(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config from kubeconfig");
    Client::try_from(config).expect("client")
}

/// The `Status` of a failed call; panics if the call succeeded or failed some other way.
pub fn status_of<T: std::fmt::Debug>(r: kube::Result<T>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error Status, got {other:?}"),
    }
}

/// The store's current resourceVersion, as a list reports it (any committed change moves it).
pub async fn store_rv(client: &Client) -> String {
    let list = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list configmaps");
    list.metadata
        .resource_version
        .expect("lists carry a resourceVersion")
}

/// GETs `uri` asking for `accept`; answers the status code and the JSON body.
pub async fn raw_accept(client: &Client, uri: &str, accept: &str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .expect("request");
    send(client, uri, req).await
}

/// Sends one raw request and answers the status code and the JSON body.
pub async fn raw(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("request");
    send(client, uri, req).await
}

async fn send(client: &Client, uri: &str, req: Request<kube::client::Body>) -> (StatusCode, Value) {
    let resp = client.send(req).await.expect("send request");
    let code = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("read response body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "response to {uri} is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (code, value)
}

/// Generates one test per transport for each listed `async fn name(Transport)`.
#[macro_export]
macro_rules! both_transports {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::common::Transport::InProcess).await
                }
            )*
        }
        mod tcp {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::common::Transport::Tcp).await
                }
            )*
        }
    };
}
