//! backflow in this process, wired the way `backflow serve` wires it: the API server on
//! 127.0.0.1:0 with its own data directory, the backflow.dev CRDs installed through the in-process
//! router, then (when asked) the default configuration and the mirror, with the mirror's tracker
//! answering `X-Backflow-Wait: pushed`. Also the helpers that read what a remote holds.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backflow_api::SystemClock;
use backflow_mirror::defaults::DefaultSetup;
use backflow_mirror::{Mirror, MirrorOptions};
use backflow_server::RunningServer;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::json;

use crate::client::Conn;
use crate::git::{BRANCH, path_str};

/// The request header that makes a write wait until its commit is on the remote.
pub const WAIT: &str = "x-backflow-wait";
/// The response header naming that commit.
pub const COMMIT: &str = "x-backflow-commit";
/// The folder of the default `GitTarget` (`backflow serve --path`).
pub const FOLDER: &str = "live";
/// Where the default `GitTarget` puts the `ConfigMaps` of namespace `default`.
pub const CONFIGMAPS: &str = "live/default/configmaps";

/// A running server, and its mirror once started.
pub struct Live {
    pub server: RunningServer,
    client: kube::Client,
    mirror: Option<Mirror>,
    claims: Option<backflow_apply::claims::Claims>,
    data: PathBuf,
    /// The bare repository the default `GitTarget` pushes to.
    pub remote: PathBuf,
}

impl Live {
    /// Starts the server with its data in `dir/data` and creates the bare remote `dir/origin.git`
    /// (empty, HEAD naming the branch); the mirror is off.
    pub async fn start(dir: &Path) -> Result<Self, String> {
        let data = dir.join("data");
        let mut config = backflow_server::ServerConfig::new(&data);
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let server = backflow_server::start(config)
            .await
            .map_err(|e| e.to_string())?;
        let client = kube::Client::new(server.internal_router.clone(), "default");
        backflow_mirror::defaults::install_crds(&client)
            .await
            .map_err(|e| format!("cannot install the backflow.dev CRDs: {e}"))?;
        let remote = dir.join("origin.git");
        backflow_git::LocalRepo::init_remote(&remote, BRANCH)
            .map_err(|e| format!("cannot create {}: {e}", remote.display()))?;
        Ok(Self {
            server,
            client,
            mirror: None,
            claims: None,
            data,
            remote,
        })
    }

    /// A client of the API that never crosses a socket.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The running mirror, once started.
    pub fn mirror(&self) -> Option<&Mirror> {
        self.mirror.as_ref()
    }

    /// The address clients reach the server on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    /// Applies the default configuration (every namespace into `live/` of branch `main` of the
    /// remote, with this commit window) and starts the mirror.
    pub async fn start_mirror(&mut self, commit_window: &str) -> Result<(), String> {
        self.start_mirror_with(
            commit_window,
            backflow_mirror::DEFAULT_REFRESH_INTERVAL,
            None,
            false,
        )
        .await
    }

    /// [`Live::start_mirror`] with the branch workers' periodic refresh at `refresh_interval`,
    /// with `receiver_token` the default `GitReceiver` `serve` creates, and with `apply` the
    /// default `NativeClaim` and the claims acting (`serve --apply`).
    pub async fn start_mirror_with(
        &mut self,
        commit_window: &str,
        refresh_interval: Duration,
        receiver_token: Option<&str>,
        apply: bool,
    ) -> Result<(), String> {
        let url = format!("file://{}", path_str(&self.remote)?);
        let setup = DefaultSetup {
            url,
            branch: BRANCH.into(),
            path: FOLDER.into(),
            commit_window: commit_window.into(),
            // `serve` also encrypts Secrets to a generated age key; the benchmarks write only
            // ConfigMaps, which are never encrypted, so no key is made.
            recipients: Vec::new(),
            receiver_token: receiver_token.map(str::to_string),
            apply,
            first_contact: backflow_api::config::FirstContact::default(),
        };
        backflow_mirror::defaults::ensure(&self.client, &setup)
            .await
            .map_err(|e| format!("cannot apply the default configuration: {e}"))?;
        let mirror = Mirror::start(
            self.client.clone(),
            MirrorOptions {
                refresh_interval,
                data_dir: self.data.join("git"),
                identities: Vec::new(),
                shutdown_grace: backflow_mirror::DEFAULT_SHUTDOWN_GRACE,
                authors: Some(self.server.engine.store().authors().clone()),
                owner: None,
            },
            Arc::new(SystemClock),
        );
        let _ = self.server.extensions.waiter.set(Arc::new(mirror.waiter()));
        if apply {
            let metrics = mirror.register_metrics(backflow_apply::claims::ApplyMetrics::register);
            self.claims = Some(backflow_apply::claims::Claims::start(
                self.client.clone(),
                backflow_apply::act_as::ActingAs::new(
                    backflow_apply::act_as::through_router(self.server.internal_router.clone()),
                    None,
                ),
                mirror.branches(),
                Vec::new(),
                metrics,
                Arc::new(SystemClock),
            ));
        }
        self.mirror = Some(mirror);
        Ok(())
    }

    /// Writes probe `ConfigMaps` with `X-Backflow-Wait: pushed` until one is answered with a commit:
    /// the mirror then watches `ConfigMaps` and its branch worker pushes.
    pub async fn wait_mirroring(&self) -> Result<Duration, String> {
        let t0 = Instant::now();
        let mut conn = Conn::open(self.addr()).await?;
        for k in 0.. {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": format!("bench-probe-{k}")}, "data": {"probe": "1"}});
            let (status, headers, _) = conn
                .send_with(
                    Method::POST,
                    "/api/v1/namespaces/default/configmaps",
                    "application/json",
                    &[(WAIT, "pushed;timeout=5s")],
                    Bytes::from(body.to_string()),
                )
                .await?;
            if status == StatusCode::CREATED && headers.get(COMMIT).is_some_and(is_sha) {
                return Ok(t0.elapsed());
            }
            // A hang guard: a restart over a hundred thousand objects is timed, not bounded.
            if t0.elapsed() > Duration::from_secs(600) {
                return Err(format!(
                    "the mirror did not push a probe within 600 s (last answer {status}, {COMMIT}: {:?})",
                    headers.get(COMMIT)
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        unreachable!("the probe loop only ends by returning")
    }

    /// Stops the mirror (pending writes are pushed), then the server.
    pub async fn stop(self) {
        if let Some(claims) = self.claims {
            claims.shutdown().await;
        }
        if let Some(mirror) = self.mirror {
            mirror.shutdown().await;
        }
        self.server.shutdown().await;
    }
}

/// Whether a `X-Backflow-Commit` value names a commit (40 hex digits).
pub fn is_sha(v: &http::HeaderValue) -> bool {
    v.to_str()
        .is_ok_and(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The files under `folder` on the remote's branch, by file name (without the folder), with their
/// contents, read with the git CLI (`git ls-tree -r`, then `git cat-file --batch`) so the check does
/// not go through the library backflow writes with.
pub fn remote_files(remote: &Path, folder: &str) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let p = path_str(remote)?;
    let branch = format!("refs/heads/{BRANCH}");
    if crate::git::git(&["-C", p, "rev-parse", "--verify", "--quiet", &branch]).is_err() {
        return Ok(BTreeMap::new());
    }
    let listing = crate::git::git(&[
        "-C",
        p,
        "ls-tree",
        "-r",
        &branch,
        "--",
        &format!("{folder}/"),
    ])?;
    let mut names = Vec::new();
    let mut shas = String::new();
    for line in listing.lines() {
        let Some((meta, path)) = line.split_once('\t') else {
            continue;
        };
        let Some(sha) = meta.split_whitespace().nth(2) else {
            continue;
        };
        let name = path
            .strip_prefix(folder)
            .map_or(path, |s| s.trim_start_matches('/'))
            .to_string();
        names.push(name);
        shas.push_str(sha);
        shas.push('\n');
    }
    let mut child = Command::new("git")
        .args(["-C", p, "cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git cat-file: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("git cat-file without stdin")?;
    let feeder = std::thread::spawn(move || stdin.write_all(shas.as_bytes()));
    let mut out = BufReader::new(child.stdout.take().ok_or("git cat-file without stdout")?);
    let mut files = BTreeMap::new();
    for name in names {
        let mut header = String::new();
        out.read_line(&mut header).map_err(|e| e.to_string())?;
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("git cat-file answered {header:?}"))?;
        let mut content = vec![0u8; size + 1];
        out.read_exact(&mut content).map_err(|e| e.to_string())?;
        content.truncate(size);
        files.insert(name, content);
    }
    let _ = feeder.join();
    let _ = child.wait();
    Ok(files)
}

/// A `ConfigMap` file the way a person (or the baseline) writes it: about 1 KiB.
pub fn configmap_yaml(name: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  token: {token}\n  v: {}\n",
        filler()
    )
}

/// A write of `ConfigMap` `name` in `default` carrying `token`: a create (POST, 201) or a merge
/// patch of the token (PATCH, 200), as (method, path, content type, body, expected status).
pub fn configmap_write(
    name: &str,
    token: &str,
    create: bool,
) -> (
    http::Method,
    String,
    &'static str,
    serde_json::Value,
    http::StatusCode,
) {
    if create {
        (
            http::Method::POST,
            "/api/v1/namespaces/default/configmaps".to_string(),
            "application/json",
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                               "data": {"token": token, "v": filler()}}),
            http::StatusCode::CREATED,
        )
    } else {
        (
            http::Method::PATCH,
            format!("/api/v1/namespaces/default/configmaps/{name}"),
            "application/merge-patch+json",
            serde_json::json!({"data": {"token": token}}),
            http::StatusCode::OK,
        )
    }
}

/// The 1,000-byte value every benchmark object carries.
pub fn filler() -> String {
    "x".repeat(1000)
}

/// A field of `/proc/<pid>/status` (`VmHWM`, `VmRSS`) in KiB; `None` for this process.
pub fn proc_kib(pid: Option<u32>, field: &str) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = std::fs::read_to_string(path).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

/// The load averages over 1, 5 and 15 minutes, for the notes.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").ok().map_or_else(
        || "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// One write sent with `X-Backflow-Wait: pushed`, as a client waiting for Git sees it.
pub struct PushedWrite {
    /// When it was sent.
    pub sent: Instant,
    /// Send → answer.
    pub took: Duration,
    /// The commit the answer named; `None` when the write failed or named none.
    pub commit: Option<String>,
}

/// Writes `ConfigMap` `name` carrying `token` ([`configmap_write`]: a create or a merge patch)
/// and waits for the push holding it.
pub async fn pushed_write(conn: &mut Conn, name: &str, token: &str, create: bool) -> PushedWrite {
    let (method, uri, ct, body, want) = configmap_write(name, token, create);
    let sent = Instant::now();
    let answer = conn
        .send_with(
            method,
            &uri,
            ct,
            &[(WAIT, "pushed;timeout=60s")],
            bytes::Bytes::from(body.to_string()),
        )
        .await;
    let took = sent.elapsed();
    let commit = match answer {
        Ok((status, headers, _)) if status == want => headers
            .get(COMMIT)
            .filter(|v| is_sha(v))
            .and_then(|v| v.to_str().ok().map(str::to_string)),
        _ => None,
    };
    PushedWrite { sent, took, commit }
}
