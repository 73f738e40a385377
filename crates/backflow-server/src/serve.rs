//! Running the server: data directory, security defaults, listener, graceful stop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::{Clock, SystemClock};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::{CertificateUser, Tokens};
use crate::engine::Engine;
use crate::http::{AppState, Extensions, router};
use crate::kubeconfig::{ClientAccess, render};
use crate::service_account::ServiceAccountTokens;
use crate::store::StoreError;
use crate::tls::{self, TlsError, TlsMaterial};

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the store, kubeconfig, token and certificates live.
    pub data_dir: PathBuf,
    /// Address to listen on; anything but loopback requires TLS and a token (and a token, on
    /// any address, turns TLS on: clients send tokens only over TLS).
    pub listen: SocketAddr,
    /// File holding the bearer token clients must send (generated into the data dir when a
    /// non-loopback listener needs one and none is given).
    pub token_file: Option<PathBuf>,
    /// A token file in kube-apiserver's format (`token,user,uid,"groups"` per line): each
    /// line's user may use the API, and commits name them as the authors of their changes.
    /// With it, authentication is on even on loopback.
    pub token_auth_file: Option<PathBuf>,
    /// Serving certificate (PEM); generated with a CA into the data dir when absent and TLS is needed.
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of `tls_cert_file` (PEM).
    pub tls_key_file: Option<PathBuf>,
    /// How many changes a watch can resume across.
    pub watch_history: usize,
    /// About how many bytes of objects that history may hold (a few large objects must not
    /// keep hundreds of megabytes alive).
    pub watch_cache_bytes: usize,
    /// How often idle watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// Start with an empty store even though the data dir has history (a lost store).
    pub initialize: bool,
    /// How long a connection may take to send its first byte and a request's headers (and a
    /// TLS client its handshake), and a request body may pause, before it is closed: a client
    /// that sends nothing or trickles bytes holds no connection forever.
    pub header_read_timeout: Duration,
    /// How requests are authorized once the server authenticates them.
    pub authorization: AuthorizationMode,
    /// The audit policy (`--audit-policy-file`); with `audit_log`, requests are audited.
    pub audit_policy_file: Option<PathBuf>,
    /// Where audit events go and how the file rotates (`--audit-log-path`, `-maxsize`,
    /// `-maxbackup`).
    pub audit_log: Option<crate::audit::LogSettings>,
}

/// How authenticated requests are authorized (kube-apiserver's `--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Kubernetes RBAC: Roles, `ClusterRoles` and their bindings; `system:masters` may do
    /// everything. Applies whenever the server authenticates (with tokens or certificates);
    /// without authentication there is no one to tell apart.
    #[default]
    Rbac,
    /// Every authenticated user may do everything.
    AlwaysAllow,
}
/// The bytes of objects the watch history keeps, unless configured: 128 MiB.
pub const DEFAULT_WATCH_CACHE_BYTES: usize = 128 * 1024 * 1024;

/// How long a client may take to send its request headers or TLS handshake, by default
/// (kube-apiserver allows 32 s).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

impl ServerConfig {
    /// Defaults: `./backflow-data`, `127.0.0.1:6443`, no TLS, no token.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            token_file: None,
            token_auth_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            watch_history: 100_000,
            watch_cache_bytes: DEFAULT_WATCH_CACHE_BYTES,
            bookmark_interval: Duration::from_secs(60),
            initialize: false,
            header_read_timeout: HEADER_READ_TIMEOUT,
            authorization: AuthorizationMode::Rbac,
            audit_policy_file: None,
            audit_log: None,
        }
    }
}

/// Failures starting the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory could not be created.
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The audit policy or log cannot be used.
    #[error("{0}")]
    Audit(String),
    /// The data dir has history but its store is missing or empty.
    #[error(
        "{path} is missing or empty, but the data directory holds {history} from an earlier start: the store was lost. Restore it from a backup, or start with --initialize to begin with an empty API"
    )]
    StoreMissing {
        /// The store file.
        path: PathBuf,
        /// The files that show history.
        history: String,
    },
    /// The store could not be seeded (initial namespaces, CRDs).
    #[error("cannot initialize the store: {0}")]
    Init(String),
    /// TLS set-up failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The token file could not be read or is empty.
    #[error("cannot use the token file {path}: {message}")]
    Token {
        /// The file or directory concerned.
        path: PathBuf,
        /// What went wrong, for a person.
        message: String,
    },
    /// The token auth file could not be used.
    #[error(transparent)]
    TokenAuthFile(#[from] crate::auth::TokenFileError),
    /// The service account token signing key could not be read or made.
    #[error("cannot use the service account signing key {path}: {source}")]
    ServiceAccountKey {
        /// The key file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Only one of the certificate and key was given.
    #[error("--tls-cert-file and --tls-private-key-file go together; give both or neither")]
    HalfTls,
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address that was asked for.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Another router served the way the API is (HTTP/1 and HTTP/2, optional TLS, graceful
/// stop): backflow's push receiver listens this way.
#[derive(Debug)]
pub struct Listener {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    /// Whether it speaks TLS.
    pub tls: bool,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Listener {
    /// Binds `addr` and serves `app` on it, over TLS with `tls` when given.
    pub async fn bind(
        addr: SocketAddr,
        app: axum::Router,
        tls: Option<&TlsMaterial>,
    ) -> Result<Self, StartError> {
        let acceptor = match tls {
            Some(m) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(m)?)),
            None => None,
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(
            listener,
            app,
            acceptor,
            HEADER_READ_TIMEOUT,
            shutdown_rx,
        ));
        Ok(Self {
            addr: bound,
            tls: tls.is_some(),
            shutdown,
            task,
        })
    }

    /// Stops accepting and waits (bounded) for open requests to finish.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        let _ = self.task.await;
    }
}

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    /// The kubeconfig file written for it.
    pub kubeconfig_path: PathBuf,
    /// How clients reach it.
    pub access: ClientAccess,
    /// The object semantics (for in-process use).
    pub engine: Engine,
    /// The same API without authentication, for clients inside this process (the mirror's
    /// kube-rs client): requests handed to it never cross a socket.
    pub internal_router: axum::Router,
    /// Hooks to install after start (publication waiter, metrics).
    pub extensions: Arc<Extensions>,
    /// The certificate it presents, when it speaks TLS.
    pub tls: Option<TlsMaterial>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// Stops accepting, ends open watches, waits for in-flight requests to finish, then closes
    /// the store so the data directory can be opened again.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        let _ = self.task.await;
        self.engine.store().close().await;
    }
}

fn read_token(path: &Path) -> Result<String, StartError> {
    let t = std::fs::read_to_string(path).map_err(|e| StartError::Token {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let t = t.trim().to_string();
    if t.is_empty() {
        return Err(StartError::Token {
            path: path.to_path_buf(),
            message: "the file is empty".into(),
        });
    }
    Ok(t)
}

fn generated_token(data_dir: &Path) -> Result<String, StartError> {
    let path = data_dir.join("token");
    if path.exists() {
        return read_token(&path);
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    tls::write_private(&path, token.as_bytes()).map_err(|e| StartError::Token {
        path,
        message: e.to_string(),
    })?;
    Ok(token)
}

/// The path of the kubeconfig the server writes into `data_dir`.
#[must_use]
pub fn kubeconfig_path(data_dir: &Path) -> PathBuf {
    data_dir.join("kubeconfig")
}

/// Opens the store, binds the listener, writes the kubeconfig and starts serving.
pub async fn start(config: ServerConfig) -> Result<RunningServer, StartError> {
    start_with_clock(config, Arc::new(SystemClock)).await
}

/// The certificate the server presents: the one given, or one generated (with its CA) into the
/// data dir when listening beyond loopback or checking tokens; none otherwise.
fn tls_material(
    config: &ServerConfig,
    data_dir: &std::path::Path,
    tokens: bool,
) -> Result<Option<TlsMaterial>, StartError> {
    let loopback = config.listen.ip().is_loopback();
    match (&config.tls_cert_file, &config.tls_key_file) {
        (Some(c), Some(k)) => Ok(Some(TlsMaterial {
            cert_file: c.clone(),
            key_file: k.clone(),
            client_ca_pem: None,
            ca_pem: std::fs::read_to_string(c).map_err(|e| TlsError::Io {
                action: "cannot read",
                path: c.clone(),
                source: e,
            })?,
        })),
        (None, None) if !loopback || tokens => {
            let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
            if !config.listen.ip().is_unspecified() {
                hosts.push(config.listen.ip().to_string());
            }
            Ok(Some(tls::generated(&data_dir.join("tls"), &hosts)?))
        }
        (None, None) => Ok(None),
        _ => Err(StartError::HalfTls),
    }
}

/// The host clients reach a listener bound to `addr` at (loopback for an unspecified address,
/// bracketed for IPv6).
fn client_host(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    }
}

/// The signer of service account tokens, with its key in the data dir (kept across restarts,
/// so tokens issued before stay good).
fn service_account_tokens(data_dir: &Path) -> Result<ServiceAccountTokens, StartError> {
    let path = data_dir.join("sa.key");
    ServiceAccountTokens::load(&path)
        .map_err(|source| StartError::ServiceAccountKey { path, source })
}

/// The auditor `config` asks for: a policy and a log, both or neither.
fn auditor(config: &ServerConfig) -> Result<Option<Arc<crate::audit::Auditor>>, StartError> {
    match (&config.audit_policy_file, &config.audit_log) {
        (None, None) => Ok(None),
        (Some(policy), Some(log)) => {
            let policy = crate::audit::AuditPolicy::read(policy)
                .map_err(|e| StartError::Audit(e.to_string()))?;
            let log = crate::audit::AuditLog::open(log.clone()).map_err(|e| {
                StartError::Audit(format!(
                    "cannot open the audit log {}: {e}",
                    log.path.display()
                ))
            })?;
            Ok(Some(Arc::new(crate::audit::Auditor { policy, log })))
        }
        (Some(_), None) => Err(StartError::Audit(
            "--audit-policy-file needs --audit-log-path: where the events go".into(),
        )),
        (None, Some(_)) => Err(StartError::Audit(
            "--audit-log-path needs --audit-policy-file: which requests to record".into(),
        )),
    }
}

/// Creates the roles and bindings kube-apiserver bootstraps that the store lacks (one a person
/// changed or deleted is left as it is, except a missing one, which comes back as
/// kube-apiserver's does).
async fn bootstrap_rbac(engine: &Engine) -> Result<(), StartError> {
    for object in crate::rbac::bootstrap_objects() {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let plural = if kind == "ClusterRole" {
            "clusterroles"
        } else {
            "clusterrolebindings"
        };
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let t = engine
            .resource_type("rbac.authorization.k8s.io", "v1", plural)
            .ok_or_else(|| StartError::Init(format!("{plural} are not served")))?;
        if engine.get(&t, "", &name).is_ok() {
            continue;
        }
        let opts = crate::engine::WriteOptions {
            field_manager: "backflow".into(),
            ..Default::default()
        };
        engine.create(&t, "", object, &opts).await.map_err(|e| {
            StartError::Init(format!("cannot create the default {kind} {name}: {e}"))
        })?;
    }
    Ok(())
}

/// The listener on `addr`, and the address it got (a port 0 picks one).
async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let bind_error = |source| StartError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}

/// Writes `<data-dir>/kubeconfig` (owner only) for `access`; returns its path.
fn write_kubeconfig(data_dir: &Path, access: &ClientAccess) -> Result<PathBuf, StartError> {
    let path = kubeconfig_path(data_dir);
    tls::write_private(&path, render(access).as_bytes()).map_err(|e| StartError::Kubeconfig {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(path)
}

/// [`start`] with an injected clock.
// Long on purpose: start-up in its order (store, engine, RBAC bootstrap, listener, kubeconfig,
// routers), each step's failure mapped to its `StartError`; not split this session.
pub async fn start_with_clock(
    config: ServerConfig,
    clock: Arc<dyn Clock>,
) -> Result<RunningServer, StartError> {
    let data_dir = config.data_dir.clone();
    let store = crate::data_dir::open_store(&config)?;
    let loopback = config.listen.ip().is_loopback();

    let users = config.token_auth_file.is_some();
    let token = match (&config.token_file, loopback && !users) {
        (Some(f), _) => Some(read_token(f)?),
        (None, false) => Some(generated_token(&data_dir)?),
        (None, true) => None,
    };
    let mut tokens = Tokens::default();
    if let Some(token) = &token {
        tokens.add_admin(token);
    }
    if let Some(file) = &config.token_auth_file {
        tokens.read_file(file)?;
    }
    // kubectl (client-go) never sends a bearer token over plain HTTP, and kube-apiserver
    // authenticates on its secure port only: wherever tokens are checked, TLS is on.
    let tls = tls_material(&config, &data_dir, !tokens.is_empty())?;
    let acceptor = match &tls {
        Some(m) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(m)?)),
        None => None,
    };

    let engine = Engine::new(store, clock)
        .await
        .map_err(|e| StartError::Init(e.to_string()))?;
    // Always, before the kubeconfig says the server is there: an applier acting as a service
    // account is authorized as it even where clients are not.
    bootstrap_rbac(&engine).await?;
    let service_accounts = service_account_tokens(&data_dir)?;

    let (listener, addr) = bind(config.listen).await?;
    let host = client_host(addr);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let access = ClientAccess {
        server_url: format!("{scheme}://{host}:{}", addr.port()),
        ca_pem: tls.as_ref().map(|m| m.ca_pem.clone()),
        token: token.clone(),
    };
    let kubeconfig_path = write_kubeconfig(&data_dir, &access)?;

    let (shutdown, shutdown_rx) = watch::channel(false);
    let extensions = Arc::new(Extensions::default());
    let rbac = !tokens.is_empty() && config.authorization == AuthorizationMode::Rbac;
    let audit = auditor(&config)?;
    let state = AppState {
        rbac,
        audit,
        policies: Arc::default(),
        in_process: false,
        engine: engine.clone(),
        tokens: (!tokens.is_empty()).then(|| Arc::new(tokens)),
        service_accounts,
        shutdown: shutdown_rx.clone(),
        bookmark_interval: config.bookmark_interval,
        server_address: format!("{host}:{}", addr.port()),
        extensions: extensions.clone(),
    };
    // Backflow's own requests are audited too (as kube-apiserver audits its controllers'),
    // under their own name.
    let internal_router = router(AppState {
        tokens: None,
        rbac: false,
        in_process: true,
        ..state.clone()
    });
    let app = router(state);
    let task = tokio::spawn(accept_loop(
        listener,
        app,
        acceptor,
        config.header_read_timeout,
        shutdown_rx,
    ));
    Ok(RunningServer {
        addr,
        kubeconfig_path,
        access,
        engine,
        internal_router,
        extensions,
        tls,
        shutdown,
        task,
    })
}

/// A server without a listener: its router serves requests handed to it directly (kube-rs
/// `Client::new(router, "default")`), for tests and embedding.
#[derive(Debug)]
pub struct InProcess {
    /// The object semantics.
    pub engine: Engine,
    /// The full HTTP router, authentication included.
    pub router: axum::Router,
    /// Hooks to install after start (publication waiter, metrics).
    pub extensions: Arc<Extensions>,
    shutdown: watch::Sender<bool>,
}

impl InProcess {
    /// Opens the store in `config.data_dir` and builds the router (no TLS, no token).
    pub async fn open(config: &ServerConfig) -> Result<Self, StartError> {
        Self::open_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`InProcess::open`], its objects' times (creation, managedFields) read from `clock`.
    pub async fn open_with_clock(
        config: &ServerConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let store = crate::data_dir::open_store(config)?;
        let engine = Engine::new(store, clock)
            .await
            .map_err(|e| StartError::Init(e.to_string()))?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let extensions = Arc::new(Extensions::default());
        let router = router(AppState {
            rbac: false,
            audit: None,
            policies: Arc::default(),
            in_process: true,
            engine: engine.clone(),
            tokens: None,
            service_accounts: service_account_tokens(&config.data_dir)?,
            shutdown: shutdown_rx,
            bookmark_interval: config.bookmark_interval,
            server_address: "in-process".into(),
            extensions: extensions.clone(),
        });
        Ok(Self {
            engine,
            router,
            extensions,
            shutdown,
        })
    }

    /// Ends open watches.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}

/// The router for one TLS connection: a verified client certificate names the user of every
/// request on it, and `peer` where it comes from.
fn with_certificate_user(
    app: axum::Router,
    tls: &tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    peer: SocketAddr,
) -> TowerToHyperService<
    tower::util::MapRequest<
        axum::Router,
        impl FnMut(http::Request<hyper::body::Incoming>) -> http::Request<hyper::body::Incoming>
        + Clone
        + use<>,
    >,
> {
    let user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(tls::certificate_user)
        .map(CertificateUser);
    TowerToHyperService::new(tower::ServiceExt::map_request(
        app,
        move |mut req: http::Request<hyper::body::Incoming>| {
            if let Some(user) = &user {
                req.extensions_mut().insert(user.clone());
            }
            req.extensions_mut().insert(crate::http::Peer(peer));
            req
        },
    ))
}

// Over 80 lines: the plain and TLS arms could be two functions; not split this session (the
// connection timeouts both arms share were added there in session 27).
async fn accept_loop(
    listener: TcpListener,
    app: axum::Router,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    header_read_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let app = crate::stall::guard_bodies(app, header_read_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20));
        match &acceptor {
            None => {
                let watcher = graceful.watcher();
                let app = app.clone();
                tokio::spawn(async move {
                    if !crate::stall::sends_within(&stream, header_read_timeout).await {
                        tracing::debug!(%peer, "connection sent nothing in time; closed");
                        return;
                    }
                    let service = TowerToHyperService::new(tower::ServiceExt::map_request(
                        app,
                        move |mut req: http::Request<hyper::body::Incoming>| {
                            req.extensions_mut().insert(crate::http::Peer(peer));
                            req
                        },
                    ));
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .into_owned();
                    if let Err(e) = watcher.watch(conn).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                let app = app.clone();
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(header_read_timeout, acceptor.accept(stream));
                    let tls = match handshake.await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let service = with_certificate_user(app, &tls, peer);
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(tls), service)
                        .into_owned();
                    if let Err(e) = watcher.watch(conn).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(listener);
    // Watches end on the shutdown signal; give in-flight requests a bounded time to finish.
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(10)) => tracing::warn!("connections still open after 10s; closing them"),
    }
}
