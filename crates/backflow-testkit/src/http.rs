//! A smart-HTTP Git server: `git http-backend` behind a small hyper server on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};

use crate::git_out as git;

/// `git http-backend` served over HTTP/1.1 on loopback, with optional basic or bearer
/// authentication, optionally over TLS with a certificate from a CA of its own, and a switch
/// that makes it answer 503 (an outage).
pub struct HttpServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Answer 503 to everything while true.
    pub down: Arc<AtomicBool>,
    /// With TLS: the PEM file of the CA its certificate chains to.
    pub ca_file: Option<PathBuf>,
    runtime: Option<tokio::runtime::Runtime>,
    _tls_dir: Option<tempfile::TempDir>,
}

/// What a client must send to be let in.
#[derive(Debug, Clone)]
pub enum HttpAuth {
    /// Nothing.
    None,
    /// HTTP basic authentication with this user and password.
    Basic(String, String),
    /// `Authorization: Bearer` with this token.
    Bearer(String),
}

impl HttpAuth {
    fn expected_header(&self) -> Option<String> {
        use base64::Engine as _;
        match self {
            Self::None => None,
            Self::Basic(u, p) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )),
            Self::Bearer(t) => Some(format!("Bearer {t}")),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn http_backend() -> PathBuf {
    let exec = git(Path::new("."), &["--exec-path"]);
    PathBuf::from(exec.trim()).join("git-http-backend")
}

impl HttpServer {
    /// Serves every repository under `root` at `http://addr/<name>`.
    #[must_use]
    pub fn start(root: &Path, basic: Option<(&str, &str)>) -> Self {
        let auth = basic.map_or(HttpAuth::None, |(u, p)| HttpAuth::Basic(u.into(), p.into()));
        Self::start_with(root, &auth, false)
    }

    /// Serves every repository under `root` at `http(s)://addr/<name>`, letting in only what
    /// `auth` asks for; with `tls`, over HTTPS with a certificate for `127.0.0.1` signed by a
    /// CA of its own ([`HttpServer::ca_file`]).
    #[must_use]
    pub fn start_with(root: &Path, auth: &HttpAuth, tls: bool) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let down = Arc::new(AtomicBool::new(false));
        // Bound with std so the server can be started from inside another runtime (async tests).
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("addr");
        let root = Arc::new(root.to_path_buf());
        let backend = Arc::new(http_backend());
        let expected_auth = Arc::new(auth.expected_header());
        let tls_dir = tls.then(|| tempfile::tempdir().expect("tls dir"));
        let acceptor = tls_dir.as_ref().map(|d| tls_acceptor(d.path()));
        let ca_file = tls_dir.as_ref().map(|d| d.path().join("ca.pem"));
        let down2 = down.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (root, backend, auth, down) = (
                    root.clone(),
                    backend.clone(),
                    expected_auth.clone(),
                    down2.clone(),
                );
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (root, backend, auth, down) =
                            (root.clone(), backend.clone(), auth.clone(), down.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                serve(req, &root, &backend, auth.as_ref().as_ref(), &down).await,
                            )
                        }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    if let Some(acceptor) = acceptor {
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let io = hyper_util::rt::TokioIo::new(tls);
                        let _ = http.serve_connection(io, service).await;
                    } else {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = http.serve_connection(io, service).await;
                    }
                });
            }
        });
        Self {
            addr,
            down,
            ca_file,
            runtime: Some(runtime),
            _tls_dir: tls_dir,
        }
    }

    /// The URL of repository `repo` under the root.
    pub fn url(&self, repo: &str) -> String {
        let scheme = if self.ca_file.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/{repo}", self.addr)
    }

    /// Starts or ends an outage.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

/// A CA and a certificate for `127.0.0.1` and `localhost` signed by it; the CA's PEM is
/// written to `dir/ca.pem`.
fn tls_acceptor(dir: &Path) -> tokio_rustls::TlsAcceptor {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("ca key");
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write ca.pem");
    let issuer = Issuer::new(ca_params, ca_key);
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("params");
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &issuer).expect("cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone(), ca.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("certificate");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r
}

/// The 401 for a request without the `Authorization` header `expected`, if it lacks it.
fn unauthorized(
    req: &Request<hyper::body::Incoming>,
    expected: &str,
) -> Option<Response<Full<Bytes>>> {
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if given == Some(expected) {
        return None;
    }
    let mut r = plain(StatusCode::UNAUTHORIZED, "who are you");
    let scheme = if expected.starts_with("Bearer") {
        "Bearer realm=\"test\""
    } else {
        "Basic realm=\"test\""
    };
    r.headers_mut()
        .insert("www-authenticate", scheme.parse().expect("header"));
    Some(r)
}

async fn serve(
    req: Request<hyper::body::Incoming>,
    root: &Path,
    backend: &Path,
    auth: Option<&String>,
    down: &AtomicBool,
) -> Response<Full<Bytes>> {
    if down.load(Ordering::SeqCst) {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "down for maintenance");
    }
    if let Some(refused) = auth.and_then(|expected| unauthorized(&req, expected)) {
        return refused;
    }
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (content_type, encoding, protocol) = (
        header("content-type"),
        header("content-encoding"),
        header("git-protocol"),
    );
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return plain(StatusCode::BAD_REQUEST, "body"),
    };
    let (root, backend) = (root.to_path_buf(), backend.to_path_buf());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(backend)
            .env_clear()
            .env("GIT_PROJECT_ROOT", root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("REMOTE_USER", "tester")
            .env("REMOTE_ADDR", "127.0.0.1")
            .env("REQUEST_METHOD", method)
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("CONTENT_TYPE", content_type)
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_CONTENT_ENCODING", encoding)
            .env("GIT_PROTOCOL", protocol)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(&body);
        });
        let out = child.wait_with_output()?;
        let _ = writer.join();
        Ok::<_, std::io::Error>(out.stdout)
    })
    .await;
    let Ok(Ok(raw)) = output else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "backend");
    };
    cgi_response(&raw)
}

/// The HTTP answer a CGI program's output stands for: headers (`Status:` among them), a blank
/// line, the body.
fn cgi_response(raw: &[u8]) -> Response<Full<Bytes>> {
    // CGI output: headers, a blank line, the body.
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((at, sep)) = split else {
        return plain(StatusCode::BAD_GATEWAY, "cgi");
    };
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(&raw[at + sep..])));
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u16>().ok())
                .unwrap_or(500);
            *resp.status_mut() =
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        } else if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            value.parse(),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}
