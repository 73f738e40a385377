//! Helpers shared by the integration tests of the `backflow` binary: starting and stopping the
//! real `backflow serve`, running child processes (kubectl, git) in an isolated environment,
//! polling with a hang guard, and small HTTP requests.
//!
//! Every test module of the `e2e` crate uses it, so it compiles once.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any wait or child process may take before the test is declared hung.
pub const HANG_GUARD: Duration = Duration::from_secs(30);
/// How often [`wait_for`] looks again.
pub const POLL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

/// What a finished command printed.
#[derive(Debug)]
pub struct Out {
    /// `None` when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
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
pub fn run_bounded(what: &str, mut cmd: Command) -> Out {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    // Both pipes are drained on their own threads so a chatty child never blocks on a full one.
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
pub fn wait_for<T>(
    what: &str,
    state: impl Fn() -> String,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "hung: {what} did not happen within {HANG_GUARD:?}\n{}",
            state()
        );
        std::thread::sleep(POLL);
    }
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// A running `backflow serve` on a free loopback port, stopped by its own PID: explicitly with
/// [`Server::kill`], [`Server::terminate`] or [`Server::stop`], otherwise (SIGTERM, then
/// SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// The URL it serves, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// The push receiver's URL (no path), unless it runs none.
    pub receiver: Option<String>,
    /// The kubeconfig it wrote into its data dir.
    pub kubeconfig: PathBuf,
    /// How long starting and stopping may take.
    hang_guard: Duration,
}

impl Server {
    /// Spawns `backflow serve` on `127.0.0.1:0`. With `home`, the server gets that `HOME` and
    /// no system Git config, so the mirror's Git runs isolated from the machine's.
    fn spawn(data_dir: &Path, home: Option<&Path>, flags: &[&str], stdout: Stdio) -> Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
        cmd.arg("serve").arg("--data-dir").arg(data_dir);
        Self::spawn_command(cmd, home, flags, stdout)
    }

    /// `cmd` (`backflow serve` and where its data is) run as [`Server::spawn`] runs it.
    fn spawn_command(
        mut cmd: Command,
        home: Option<&Path>,
        flags: &[&str],
        stdout: Stdio,
    ) -> Child {
        if !flags.contains(&"--receiver-bind-address") {
            // Tests run side by side: never the fixed default port.
            cmd.env("BACKFLOW_RECEIVER_BIND_ADDRESS", "127.0.0.1:0");
        }
        cmd.args(["--listen", "127.0.0.1:0"])
            .args(flags)
            // `BACKFLOW_TEST_LOG` (a `BACKFLOW_LOG` filter) shows more of a failing test's server.
            .env(
                "BACKFLOW_LOG",
                std::env::var("BACKFLOW_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            );
        if let Some(home) = home {
            cmd.env("HOME", home).env("GIT_CONFIG_NOSYSTEM", "1");
        }
        cmd.stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn backflow serve")
    }

    /// Starts the binary with a `HOME` of its own when given (see [`Server::spawn`]) and extra
    /// flags, and waits until it reports where it listens (which it does once the mirror, unless
    /// `--no-mirror`, has been set up).
    pub fn start_with(data_dir: &Path, home: Option<&Path>, flags: &[&str]) -> Self {
        let child = Self::spawn(data_dir, home, flags, Stdio::piped());
        Self::started(child, data_dir)
    }

    /// Starts `backflow serve` as the README does: in `cwd`, with no `--data-dir`, so its data
    /// is the relative `./backflow-data`.
    pub fn start_in(cwd: &Path, home: Option<&Path>, flags: &[&str]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
        cmd.arg("serve").current_dir(cwd);
        let child = Self::spawn_command(cmd, home, flags, Stdio::piped());
        Self::started(child, &cwd.join("backflow-data"))
    }

    /// Waits until `child` reports where it listens (see [`Server::start_with`]).
    fn started(mut child: Child, data_dir: &Path) -> Self {
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        // Keep draining stdout so the server never blocks on a full pipe. The banner ends with
        // its `try:` line.
        std::thread::spawn(move || {
            let (mut url, mut receiver) = (None, None);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(u) = line.split("listening on ").nth(1) {
                    url = Some(u.trim().to_string());
                }
                if let Some(r) = line.trim().strip_prefix("receiver:") {
                    receiver = r.split_whitespace().next().map(str::to_string);
                }
                if let Some(url) = url.take_if(|_| line.trim().starts_with("try:")) {
                    let _ = tx.send((url, receiver.take()));
                }
            }
        });
        match rx.recv_timeout(HANG_GUARD) {
            Ok((url, receiver)) => Self {
                child,
                url,
                receiver,
                kubeconfig: data_dir.join("kubeconfig"),
                hang_guard: HANG_GUARD,
            },
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the server did not report its address ({e}); exit: {status:?}");
            }
        }
    }

    /// Starts the binary with `flags` and waits (up to `hang_guard`) for its kubeconfig, which
    /// holds the real URL, and then for `/readyz` to answer 200, without reading its stdout.
    pub fn start_until_ready(data_dir: &Path, flags: &[&str], hang_guard: Duration) -> Self {
        let mut child = Self::spawn(data_dir, None, flags, Stdio::null());
        let kubeconfig = data_dir.join("kubeconfig");
        let deadline = Instant::now() + hang_guard;
        let mut wait = |what: &str| {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("backflow serve exited ({status}) while waiting for {what}");
            }
            assert!(
                Instant::now() < deadline,
                "hung: no {what} within {hang_guard:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let addr = loop {
            let text = std::fs::read_to_string(&kubeconfig).unwrap_or_default();
            let server = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("server: http://"))
                .map(str::to_string);
            // The whole file is there once its last key is.
            if let Some(addr) = server.filter(|_| text.contains("current-context:")) {
                break addr;
            }
            wait("kubeconfig");
        };
        while !ready(&addr) {
            wait("/readyz");
        }
        Self {
            child,
            url: format!("http://{addr}"),
            receiver: None,
            kubeconfig,
            hang_guard,
        }
    }

    /// `host:port` of [`Server::url`].
    pub fn addr(&self) -> &str {
        self.url
            .strip_prefix("http://")
            .or_else(|| self.url.strip_prefix("https://"))
            .unwrap_or_else(|| panic!("not an HTTP URL: {}", self.url))
            .trim_end_matches('/')
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL the server");
        let status = self.child.wait().expect("reap the server");
        assert!(!status.success(), "a killed server does not exit cleanly");
    }

    /// SIGTERM by the child's own id, then waits (bounded) for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM could not be sent to {pid}");
        let deadline = Instant::now() + self.hang_guard;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop within {:?} of SIGTERM",
                self.hang_guard
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`Server::terminate`], asserting a clean exit.
    pub fn stop(self) {
        let status = self.terminate();
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
        // SIGTERM first so the server can close its store; SIGKILL if it does not go.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + self.hang_guard;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `GET /readyz` answers 200.
pub fn ready(addr: &str) -> bool {
    let Ok(mut conn) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    conn.write_all(request.as_bytes()).is_ok()
        && conn.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
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
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    // Longer than the hang guard, so a request the server holds (a wait) fails on its side first.
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
    let (status, headers, rest) = parse_head(&raw, method, path);
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

/// The status, headers (names lowercased) and the rest of a raw HTTP/1.1 answer.
fn parse_head<'a>(
    raw: &'a [u8],
    method: &str,
    path: &str,
) -> (u16, Vec<(String, String)>, &'a [u8]) {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "{method} {path}: no header end in {:?}",
                String::from_utf8_lossy(raw)
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
    (status, headers, &raw[split + 4..])
}

// ---------------------------------------------------------------------------------------------
// An isolated environment for the clients
// ---------------------------------------------------------------------------------------------

/// A private temp directory holding a `HOME`, a kubectl `--cache-dir` and a working directory,
/// and room for a server's data dir; removed when dropped, so drop the server first.
pub struct Sandbox {
    /// The server's data dir (the server creates it).
    pub data: PathBuf,
    pub home: PathBuf,
    pub cache: PathBuf,
    pub work: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = |name: &str| {
            let d = tmp.path().join(name);
            std::fs::create_dir_all(&d).expect("create a temp subdirectory");
            d
        };
        let (home, cache, work) = (dir("home"), dir("cache"), dir("work"));
        Self {
            data: tmp.path().join("data"),
            home,
            cache,
            work,
            _tmp: tmp,
        }
    }

    /// A kubectl command run in the working directory with this `HOME`, `--cache-dir` (kubectl
    /// caches discovery on disk) and `kubeconfig`, so nothing of the machine's leaks in.
    pub fn kubectl(&self, bin: impl AsRef<OsStr>, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .current_dir(&self.work)
            .env("HOME", &self.home)
            .env("KUBECONFIG", kubeconfig);
        cmd
    }
}

// ---------------------------------------------------------------------------------------------
// One test's world: a data dir, a server, kubectl and git
// ---------------------------------------------------------------------------------------------

/// The files and tools of one test. The server is started and stopped explicitly.
pub struct World {
    pub dirs: Sandbox,
    server: Option<Server>,
}

impl World {
    /// The resident memory of the running server, in bytes (from `/proc`).
    pub fn server_rss(&self) -> u64 {
        let pid = self.server.as_ref().expect("a running server").child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS")
            * 1024
    }

    /// A fresh world with a server started with `flags`.
    pub fn start(flags: &[&str]) -> Self {
        let mut world = Self {
            dirs: Sandbox::new(),
            server: None,
        };
        world.restart(flags);
        world
    }

    /// A fresh world with no server yet: [`World::restart`] starts it (after the test prepared
    /// what it finds at start).
    pub fn unstarted() -> Self {
        Self {
            dirs: Sandbox::new(),
            server: None,
        }
    }

    /// A fresh world whose server is started as the README starts it: no `--data-dir`, so its
    /// data is `./backflow-data` of the directory it runs in.
    pub fn start_as_readme(flags: &[&str]) -> Self {
        let mut dirs = Sandbox::new();
        let cwd = dirs
            .data
            .parent()
            .expect("the sandbox's root")
            .to_path_buf();
        dirs.data = cwd.join("backflow-data");
        let server = Server::start_in(&cwd, Some(&dirs.home), flags);
        Self {
            dirs,
            server: Some(server),
        }
    }

    /// Starts the server again on the same data dir (stopping a running one first).
    pub fn restart(&mut self, flags: &[&str]) {
        self.stop();
        self.server = Some(Server::start_with(
            &self.dirs.data,
            Some(&self.dirs.home),
            flags,
        ));
    }

    /// Kills the server (SIGKILL: nothing pending is pushed) and starts it again with `flags`.
    pub fn crash_and_restart(&mut self, flags: &[&str]) {
        self.crash();
        self.restart(flags);
    }

    /// Kills the server (SIGKILL: nothing pending is pushed) and leaves it down.
    pub fn crash(&mut self) {
        if let Some(server) = self.server.take() {
            server.kill();
        }
    }

    /// Stops the server (SIGTERM; it pushes what is pending first).
    pub fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }

    pub fn addr(&self) -> &str {
        self.server.as_ref().expect("a running server").addr()
    }

    /// The push receiver's URL as the banner prints it.
    pub fn receiver_url(&self) -> &str {
        self.server
            .as_ref()
            .expect("a running server")
            .receiver
            .as_deref()
            .expect("a push receiver")
    }

    /// `host:port` of the push receiver.
    pub fn receiver(&self) -> &str {
        self.server
            .as_ref()
            .expect("a running server")
            .receiver
            .as_deref()
            .and_then(|r| r.strip_prefix("http://"))
            .expect("a push receiver on plain HTTP")
    }

    /// The default mirror's remote (a bare repository).
    pub fn origin(&self) -> PathBuf {
        self.dirs.data.join("origin.git")
    }

    // --- kubectl -----------------------------------------------------------------------------

    pub fn kubectl_run(&self, args: &[&str]) -> Out {
        let cmd = self
            .dirs
            .kubectl("kubectl", &self.dirs.data.join("kubeconfig"), args);
        run_bounded(&format!("kubectl {}", args.join(" ")), cmd)
    }

    /// Runs kubectl, asserts success, returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
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
    pub fn apply(&self, yaml: &str) -> String {
        let file = self.dirs.work.join("manifest.yaml");
        std::fs::write(&file, yaml).expect("write a manifest");
        self.kubectl(&["apply", "-f", "manifest.yaml"])
    }

    /// `kubectl apply --server-side` of the manifest at `file` as backflow's applier writes
    /// (its field manager, forcing conflicts).
    pub fn apply_as_applier(&self, file: &Path) {
        self.kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=backflow-applier",
            "-f",
            &file.to_string_lossy(),
        ]);
    }

    /// `-o json` of one object.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json"]);
        let out = self.kubectl(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
    }

    // --- git ---------------------------------------------------------------------------------

    /// git on the remote (`None`) or in a work tree, with this world's `HOME`, no system or
    /// user config of the machine's, and a fixed identity.
    pub fn git_command(&self, dir: Option<&Path>, args: &[&str]) -> Command {
        let mut cmd = backflow_testkit::git(dir.unwrap_or(&self.dirs.work));
        if dir.is_none() {
            cmd.arg("--git-dir").arg(self.origin());
        }
        cmd.args(args)
            .env("HOME", &self.dirs.home)
            .env("GIT_CONFIG_GLOBAL", self.dirs.home.join(".gitconfig"));
        cmd
    }

    /// Runs git on the remote (`None`) or in a work tree, asserts success, returns stdout.
    pub fn git_in(&self, dir: Option<&Path>, args: &[&str]) -> String {
        let out = run_bounded(
            &format!("git {}", args.join(" ")),
            self.git_command(dir, args),
        );
        assert_eq!(out.code, Some(0), "git {} failed:\n{out}", args.join(" "));
        out.stdout
    }

    /// Runs git on the remote, asserts success, returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(None, args)
    }

    /// Clones the remote into `name` in the working directory, as a person would.
    pub fn clone_origin(&self, name: &str) -> PathBuf {
        self.git_in(
            Some(&self.dirs.work),
            &["clone", "-q", &self.origin().to_string_lossy(), name],
        );
        self.dirs.work.join(name)
    }

    /// A person pushes a new file `{folder}/{ns}/configmaps/{name}.yaml` declaring `ConfigMap`
    /// `ns/name` with `greeting` (from a clone named `person`); returns the commit pushed.
    pub fn push_new_configmap(&self, folder: &str, ns: &str, name: &str, greeting: &str) -> String {
        let clone = self.clone_origin("person");
        std::fs::write(
            clone.join(format!("{folder}/{ns}/configmaps/{name}.yaml")),
            configmap(ns, name, &[("greeting", greeting)]),
        )
        .expect("write the new file");
        self.commit_all_and_push_rebasing(&clone, &format!("a new ConfigMap {ns}/{name}"))
    }

    /// Commits everything in `clone` with `message`, pushes it to the remote's `main`, and
    /// returns the commit.
    pub fn commit_all_and_push(&self, clone: &Path, message: &str) -> String {
        self.git_in(Some(clone), &["add", "-A"]);
        self.git_in(Some(clone), &["commit", "-q", "-m", message]);
        self.git_in(Some(clone), &["push", "-q", "origin", "HEAD:main"]);
        self.git_in(Some(clone), &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    }

    /// Commits everything in `clone` with `message` and pushes it, pulling with rebase first as
    /// a person would while the mirror keeps committing; returns the commit pushed.
    pub fn commit_all_and_push_rebasing(&self, clone: &Path, message: &str) -> String {
        self.git_in(Some(clone), &["add", "-A"]);
        self.git_in(Some(clone), &["commit", "-q", "-m", message]);
        wait_for("the push to land", String::new, || {
            self.git_in(Some(clone), &["pull", "-q", "--rebase", "origin", "main"]);
            let out = run_bounded(
                "git push",
                self.git_command(Some(clone), &["push", "-q", "origin", "HEAD:main"]),
            );
            (out.code == Some(0)).then(|| {
                self.git_in(Some(clone), &["rev-parse", "HEAD"])
                    .trim()
                    .to_string()
            })
        })
    }

    /// The default `GitProvider`'s URL: what an applier must read to apply the default branch.
    pub fn provider_url(&self) -> String {
        self.get_json(&["gitprovider", "default", "-n", "backflow-system"])["spec"]["url"]
            .as_str()
            .expect("the default provider's URL")
            .to_string()
    }

    /// Waits until each of `crds` (by name) is established.
    pub fn wait_established(&self, crds: &[&str]) {
        for crd in crds {
            self.kubectl(&["wait", "--for=condition=Established", &format!("crd/{crd}")]);
        }
    }

    /// Whether `commit` is `ancestor` or descends from it, in the remote.
    pub fn is_ancestor(&self, ancestor: &str, commit: &str) -> bool {
        !commit.is_empty()
            && run_bounded(
                "git merge-base",
                self.git_command(None, &["merge-base", "--is-ancestor", ancestor, commit]),
            )
            .code
                == Some(0)
    }

    /// Bob replaces `from` with `to` in the remote's `path` and pushes (rebasing as a person
    /// would while the mirror commits); returns his commit.
    pub fn push_edit(&self, path: &str, from: &str, to: &str) -> String {
        let clone = self.clone_origin(&format!("bob-{to}"));
        let file = clone.join(path);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        std::fs::write(&file, text.replace(from, to)).expect("write");
        self.commit_all_and_push_rebasing(&clone, &format!("bob sets {to}"))
    }

    /// The remote's `main`, if it exists.
    pub fn tip(&self) -> Option<String> {
        let out = run_bounded(
            "git rev-parse",
            self.git_command(None, &["rev-parse", "--verify", "-q", "refs/heads/main"]),
        );
        (out.code == Some(0)).then(|| out.stdout.trim().to_string())
    }

    /// A file of the remote's `rev`, if present.
    pub fn show_at(&self, rev: &str, path: &str) -> Option<String> {
        let spec = format!("{rev}:{path}");
        let out = run_bounded("git show", self.git_command(None, &["show", &spec]));
        (out.code == Some(0)).then_some(out.stdout)
    }

    /// A file of the remote's `main`, if present.
    pub fn show(&self, path: &str) -> Option<String> {
        self.show_at("main", path)
    }

    /// Every file of the remote's `main`.
    pub fn files(&self) -> Vec<String> {
        let out = run_bounded(
            "git ls-tree",
            self.git_command(None, &["ls-tree", "-r", "--name-only", "main"]),
        );
        out.stdout.lines().map(str::to_string).collect()
    }

    /// The remote's tip and files, for failure messages.
    pub fn describe_remote(&self) -> String {
        format!(
            "remote main: {:?}\nfiles:\n{}",
            self.tip(),
            self.files().join("\n")
        )
    }

    /// Waits until `path` on the remote satisfies `pred`, and returns its content.
    pub fn wait_file(&self, path: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(
            &format!("{path} on the remote"),
            || self.describe_remote(),
            || self.show(path).filter(|c| pred(c)),
        )
    }

    /// Waits until `path` is on the remote, and returns its content.
    pub fn wait_present(&self, path: &str) -> String {
        self.wait_file(path, |_| true)
    }

    /// Waits until `path` is gone from the remote (which must exist).
    pub fn wait_absent(&self, path: &str) {
        wait_for(
            &format!("{path} gone from the remote"),
            || self.describe_remote(),
            || (self.tip().is_some() && self.show(path).is_none()).then_some(()),
        );
    }

    // --- the API -----------------------------------------------------------------------------

    /// The server's own token, when its kubeconfig carries one (authentication is on).
    pub fn admin_token(&self) -> Option<String> {
        let kubeconfig = std::fs::read_to_string(self.dirs.data.join("kubeconfig")).ok()?;
        kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .map(str::to_string)
    }

    /// A request to the API, over TLS (through curl, trusting the server's CA) when the server
    /// speaks it.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let url = &self.server.as_ref().expect("a running server").url;
        if url.starts_with("http://") {
            return http(self.addr(), method, path, headers, body);
        }
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-i", "--http1.1", "-X", method, "--cacert"])
            .arg(self.dirs.data.join("tls").join("ca.crt"));
        for (k, v) in headers {
            cmd.arg("-H").arg(format!("{k}: {v}"));
        }
        if !body.is_empty() {
            cmd.arg("--data-binary").arg(body);
        }
        cmd.arg(format!("{}{path}", url.trim_end_matches('/')));
        let out = run_bounded(&format!("curl {method} {path}"), cmd);
        assert_eq!(out.code, Some(0), "curl {method} {path}:\n{out}");
        let (status, headers, body) = parse_head(out.stdout.as_bytes(), method, path);
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(body).into_owned(),
        }
    }

    pub fn metrics(&self) -> String {
        let bearer = self.admin_token().map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("Authorization", b.as_str()))
            .collect();
        let a = self.request("GET", "/metrics", &headers, "");
        assert_eq!(a.status, 200, "GET /metrics: {a:?}");
        a.body
    }

    /// Waits until every watch stream of the mirror has published its initial snapshot and
    /// nothing submitted is still unpublished.
    pub fn wait_settled(&self) {
        self.wait_mirror("the mirror settling", true);
    }

    /// Waits until every watch stream of the mirror has read its list and submitted it (it may
    /// not be published yet).
    pub fn wait_lists_read(&self) {
        self.wait_mirror("the mirror's streams to read their lists", false);
    }

    /// Waits until every stream submitted its list and, when `published`, nothing submitted is
    /// still unpublished.
    fn wait_mirror(&self, what: &str, published: bool) {
        wait_for(
            what,
            || self.metrics(),
            || {
                let m = self.metrics();
                let streams = metric_sum(&m, "backflow_mirror_streams", &[]);
                let resyncs = metric_sum(&m, "backflow_mirror_resyncs_total", &[]);
                let in_flight = metric_sum(&m, "backflow_mirror_in_flight", &[]);
                let settled = !published || in_flight == 0.0;
                (streams > 0.0 && resyncs >= streams && settled).then_some(())
            },
        );
    }

    /// Waits until the mirror has handled `n` more watch events with `outcome` than `before`.
    pub fn wait_events(&self, outcome: &str, before: f64, n: f64) {
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

    /// Locks the remote's `main` (its ref's lock file, as a concurrent `git push` holds it), so
    /// every push to it fails until [`World::unlock_branch`]; returns how many of backflow's
    /// pushes had failed so far.
    pub fn lock_branch(&self) -> f64 {
        std::fs::write(self.origin().join("refs/heads/main.lock"), "").expect("lock the branch");
        self.failed_pushes()
    }

    /// Removes the lock [`World::lock_branch`] took.
    pub fn unlock_branch(&self) {
        std::fs::remove_file(self.origin().join("refs/heads/main.lock")).expect("unlock");
    }

    /// backflow's pushes that failed or were refused.
    pub fn failed_pushes(&self) -> f64 {
        let m = self.metrics();
        metric_sum(&m, "backflow_git_pushes_total", &["result=\"error\""])
            + metric_sum(&m, "backflow_git_pushes_total", &["result=\"rejected\""])
    }

    /// Waits until more of backflow's pushes failed than `before`.
    pub fn wait_push_failed(&self, before: f64) {
        wait_for(
            "a push to fail",
            || self.metrics(),
            || (self.failed_pushes() > before).then_some(()),
        );
    }

    /// How many watch events the mirror has handled with `outcome`.
    pub fn events(&self, outcome: &str) -> f64 {
        metric_sum(
            &self.metrics(),
            "backflow_mirror_events_total",
            &[&format!("outcome=\"{outcome}\"")],
        )
    }

    /// A JSON merge patch of `GitProvider` `name` in backflow-system, as `kubectl patch` sends it.
    pub fn patch_provider(&self, name: &str, patch: &str) {
        self.patch_config("gitprovider", name, patch);
    }

    /// A JSON merge patch of `GitTarget` `name` in backflow-system, as `kubectl patch` sends it.
    pub fn patch_target(&self, name: &str, patch: &str) {
        self.patch_config("gittarget", name, patch);
    }

    /// A JSON merge patch of the `kind` object `name` in backflow-system.
    fn patch_config(&self, kind: &str, name: &str, patch: &str) {
        self.kubectl(&[
            "patch",
            kind,
            name,
            "-n",
            "backflow-system",
            "--type",
            "merge",
            "-p",
            patch,
        ]);
    }

    /// Condition `type_` of `GitTarget` `name` in backflow-system, if it has one.
    pub fn target_condition(&self, name: &str, type_: &str) -> Option<Cond> {
        let t = self.get_json(&["gittarget", name, "-n", "backflow-system"]);
        let c = t["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)?
            .clone();
        let text = |field: &str| c[field].as_str().unwrap_or_default().to_string();
        Some(Cond {
            status: text("status"),
            reason: text("reason"),
            message: text("message"),
        })
    }

    /// Waits until the `GitTarget`'s status describes its current generation and says Ready.
    pub fn wait_target_ready(&self, name: &str) {
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

/// A status condition, as a test reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// For a person.
    pub message: String,
}

impl Cond {
    /// Status and reason, for comparisons.
    pub fn state(&self) -> (&str, &str) {
        (&self.status, &self.reason)
    }
}

/// The sum of the samples of `name` whose label set contains every one of `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
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

/// Makes a live edit and waits until the stream of `target` (a `GitTarget` in
/// `backflow-system`) submitted it to the branch worker: from then on a flush includes it.
/// Another folder mirroring the same namespace may see the edit first.
pub fn edit_and_wait_submitted(w: &World, target: &str, edit: impl FnOnce()) {
    let target = format!("target=\"backflow-system/{target}\"");
    let submitted = || {
        metric_sum(
            &w.metrics(),
            "backflow_mirror_events_total",
            &["outcome=\"submitted\"", &target],
        )
    };
    let before = submitted();
    edit();
    wait_for(
        "the target's stream to submit the edit",
        || w.metrics(),
        || (submitted() > before).then_some(()),
    );
}

/// A `ConfigMap` manifest with string `data`.
pub fn configmap(ns: &str, name: &str, data: &[(&str, &str)]) -> String {
    let mut s = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n"
    );
    for (k, v) in data {
        s.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    s
}

/// A namespaced `CustomResourceDefinition` `{plural}.{group}` served at `v1`, whose schema keeps
/// every field.
pub fn schemaless_crd(group: &str, plural: &str, singular: &str, kind: &str) -> String {
    schemaless_crd_at(group, "v1", plural, singular, kind)
}

/// [`schemaless_crd`] serving `version`.
pub fn schemaless_crd_at(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
) -> String {
    format!(
        r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: {plural}
    singular: {singular}
    kind: {kind}
    listKind: {kind}List
  versions:
  - name: {version}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"
    )
}
