//! Test helpers: hermetic `git`, bare remotes, a smart-HTTP server around `git http-backend`,
//! and worker construction.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use backflow_api::{GroupResource, ManualClock, ObjectKey};
use backflow_branch::FilePerObjectPlanner;
use backflow_git::BranchMetrics;
use backflow_git::{BranchWorker, GitRemote, Identity, Intent, LocalRepo, WorkerConfig};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};

pub use backflow_testkit::{git as git_cmd, git_ok, git_out as git};

/// A bare repository in a temporary directory, with branch `main` absent until the first push.
pub struct Bare {
    pub dir: tempfile::TempDir,
}

impl Bare {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(
            dir.path(),
            &["init", "--quiet", "--bare", "-b", "main", "remote.git"],
        );
        // Every ref update is logged, so tests can check each one was a fast-forward.
        git(
            dir.path().join("remote.git"),
            &["config", "core.logAllRefUpdates", "always"],
        );
        Self { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    /// The tip of `main`, via `git rev-parse`.
    pub fn tip(&self) -> Option<String> {
        let out = git_cmd(self.path())
            .args(["rev-parse", "--verify", "--quiet", "refs/heads/main"])
            .output()
            .expect("git");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Every file at `rev`, with its content, via `git ls-tree` and `git cat-file`.
    pub fn files(&self, rev: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for line in git(self.path(), &["ls-tree", "-r", "--name-only", rev]).lines() {
            let content = git(self.path(), &["cat-file", "blob", &format!("{rev}:{line}")]);
            out.insert(line.to_string(), content);
        }
        out
    }

    /// Commit subjects on `main`, newest first.
    pub fn subjects(&self) -> Vec<String> {
        git(self.path(), &["log", "--format=%s", "main"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Whether `ancestor` is in the history of `main`.
    pub fn contains(&self, ancestor: &str) -> bool {
        git_ok(
            self.path(),
            &["merge-base", "--is-ancestor", ancestor, "main"],
        )
    }

    /// Checks from the reflog that every update of `main` was a fast-forward.
    pub fn assert_only_fast_forwards(&self) {
        let log = git(
            self.path(),
            &["reflog", "show", "--format=%H", "refs/heads/main"],
        );
        let tips: Vec<&str> = log.lines().collect();
        assert!(!tips.is_empty(), "reflog is empty");
        for pair in tips.windows(2) {
            let (newer, older) = (pair[0], pair[1]);
            assert!(
                git_ok(self.path(), &["merge-base", "--is-ancestor", older, newer]),
                "update {older} -> {newer} was not a fast-forward"
            );
        }
    }
}

/// A working clone used by a foreign writer, with the `git` program.
pub struct ForeignClone {
    pub dir: tempfile::TempDir,
}

impl ForeignClone {
    pub fn new(url: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "--quiet", "-b", "main", "w"]);
        let c = Self { dir };
        git(c.work(), &["remote", "add", "origin", url]);
        c
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("w")
    }

    /// Writes files (None removes) on top of the remote's tip and pushes, retrying on a race
    /// with `fetch` + `reset` like a careful human. Returns the pushed commit.
    pub fn commit_and_push(&self, files: &[(&str, Option<&str>)], message: &str) -> String {
        let w = self.work();
        for _ in 0..200 {
            if git_ok(&w, &["fetch", "--quiet", "origin", "main"]) {
                git(&w, &["reset", "--quiet", "--hard", "FETCH_HEAD"]);
            }
            for (path, content) in files {
                let p = w.join(path);
                match content {
                    Some(c) => {
                        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                        std::fs::write(&p, c).expect("write");
                    }
                    None => {
                        let _ = std::fs::remove_file(&p);
                    }
                }
            }
            git(&w, &["add", "-A"]);
            git(&w, &["commit", "--quiet", "--allow-empty", "-m", message]);
            let sha = git(&w, &["rev-parse", "HEAD"]).trim().to_string();
            if git_ok(&w, &["push", "--quiet", "origin", "HEAD:refs/heads/main"]) {
                return sha;
            }
        }
        panic!("foreign push kept failing");
    }
}

pub fn key(name: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
}

/// The path [`FilePerObjectPlanner`] writes `key(name)` of target `apps` to.
pub fn path_of(name: &str) -> String {
    FilePerObjectPlanner::path_of(&Intent::delete("apps", key(name)))
}

pub fn put(name: &str, value: &str) -> Intent {
    Intent::put("apps", key(name), serde_json::json!({ "value": value }))
}

/// What [`FilePerObjectPlanner`] writes for `put(name, value)`.
pub fn rendered(value: &str) -> String {
    String::from_utf8(FilePerObjectPlanner::render(
        &serde_json::json!({ "value": value }),
    ))
    .expect("utf8")
}

pub fn start_time() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A worker with a manual clock, window 0 and a tight backoff.
pub fn worker(
    cache: &Path,
    remote: Box<dyn GitRemote>,
    tune: impl FnOnce(&mut WorkerConfig),
) -> (BranchWorker, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(start_time()));
    let mut cfg = WorkerConfig::new("main");
    cfg.timing.window = Duration::ZERO;
    cfg.committer = Identity::new("backflow test", "backflow@example.com");
    cfg.seed = 1;
    tune(&mut cfg);
    let repo = LocalRepo::open_or_init(&cache.join("cache.git")).expect("cache");
    let w = BranchWorker::new(
        cfg,
        repo,
        remote,
        Box::new(FilePerObjectPlanner),
        clock.clone(),
        BranchMetrics::disabled(),
    );
    (w, clock)
}

/// `git http-backend` served over HTTP/1.1 on loopback, with optional basic authentication and
/// a switch that makes it answer 503 (an outage).
pub struct HttpServer {
    pub addr: SocketAddr,
    pub down: Arc<AtomicBool>,
    runtime: Option<tokio::runtime::Runtime>,
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
    pub fn start(root: &Path, basic: Option<(&str, &str)>) -> Self {
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
        let expected_auth = basic.map(|(u, p)| {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        });
        let expected_auth = Arc::new(expected_auth);
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
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (root, backend, auth, down) =
                            (root.clone(), backend.clone(), auth.clone(), down.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                serve(req, &root, &backend, &auth, &down).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            down,
            runtime: Some(runtime),
        }
    }

    pub fn url(&self, repo: &str) -> String {
        format!("http://{}/{repo}", self.addr)
    }

    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

fn plain(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r
}

async fn serve(
    req: Request<hyper::body::Incoming>,
    root: &Path,
    backend: &Path,
    auth: &Option<String>,
    down: &AtomicBool,
) -> Response<Full<Bytes>> {
    if down.load(Ordering::SeqCst) {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "down for maintenance");
    }
    if let Some(expected) = auth {
        let given = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            let mut r = plain(StatusCode::UNAUTHORIZED, "who are you");
            r.headers_mut().insert(
                "www-authenticate",
                "Basic realm=\"test\"".parse().expect("header"),
            );
            return r;
        }
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
