//! What the command writes for people and programs: stdout a reader may close early, log lines
//! a collector reads, and addresses written as Go programs write them.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{HANG_GUARD, Sandbox};

/// `backflow crds | head -1`: the reader closes the pipe after one line; the command ends
/// quietly (it panicked on the closed pipe before, exit 101).
#[test]
fn crds_piped_into_head_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .arg("crds")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn backflow crds");
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    out.read_line(&mut first).expect("the first line");
    assert_eq!(first.trim(), "{");
    drop(out);
    let done = child.wait_with_output().expect("backflow crds ends");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{:?}: {stderr}", done.status);
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
}

/// Runs `backflow serve --no-mirror` with `flags`, its log in a file, until it wrote its
/// kubeconfig; returns the log.
fn serve_log(flags: &[&str]) -> String {
    serve_log_in(&Sandbox::new(), flags)
}

/// [`serve_log`] in `sandbox`'s data dir.
fn serve_log_in(sandbox: &Sandbox, flags: &[&str]) -> String {
    let log = sandbox.work.join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "serve",
            "--no-mirror",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&sandbox.data)
        .args(flags)
        .env("BACKFLOW_LOG", "info")
        .env("HOME", &sandbox.home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create the log file"))
        .spawn()
        .expect("spawn backflow serve");
    let deadline = Instant::now() + HANG_GUARD;
    while !sandbox.data.join("kubeconfig").exists() && Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("backflow serve exited: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    std::fs::read_to_string(&log).expect("read the log")
}

/// `--log-format json`: every log line is one JSON object a collector reads (level, message,
/// structured fields); the default text written to a file carries no colour codes.
#[test]
fn log_lines_are_json_when_asked_and_plain_text_in_a_file() {
    let json = serve_log(&["--log-format", "json"]);
    let lines: Vec<&str> = json.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "the server logged at info level");
    for line in &lines {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(value["level"].is_string(), "{line}");
        assert!(value["fields"].is_object(), "{line}");
    }
    let text = serve_log(&[]);
    assert!(!text.trim().is_empty(), "the server logged at info level");
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes in a file: {text}"
    );
}

/// `:port` is every interface, as Go programs and the docs write it: accepted by each address
/// flag, and a bad one is refused with a message that says how to write it.
#[test]
fn addresses_may_be_written_as_a_port_alone() {
    let refused = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "operator",
            "--kubeconfig",
            "/nonexistent",
            "--receiver-bind-address",
            "9292",
        ])
        .output()
        .expect("run backflow operator");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(":port for every interface"), "{stderr}");
    let accepted = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "operator",
            "--kubeconfig",
            "/nonexistent",
            "--receiver-bind-address",
            ":9292",
        ])
        .output()
        .expect("run backflow operator");
    let stderr = String::from_utf8_lossy(&accepted.stderr);
    // The flag is taken; the operator then fails on the kubeconfig it cannot read.
    assert_eq!(accepted.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/nonexistent"), "{stderr}");
}

/// A store file damaged on disk (here its second half zeroed) is refused at start with a message
/// naming the file and the way back, and nothing else: no panic, the file left as it was.
#[test]
fn a_damaged_store_is_refused_with_the_way_back_and_no_panic() {
    let sandbox = Sandbox::new();
    serve_log_in(&sandbox, &[]);
    let store = sandbox.data.join("store.redb");
    let mut bytes = std::fs::read(&store).expect("the store");
    let half = bytes.len() / 2;
    bytes[half..].fill(0);
    std::fs::write(&store, &bytes).expect("damage the store");
    let done = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "serve",
            "--no-mirror",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&sandbox.data)
        .env("HOME", &sandbox.home)
        .stdin(Stdio::null())
        .output()
        .expect("run backflow serve");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(!done.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("the store {} is damaged", store.display()))
            && stderr.contains("backflow serve --initialize"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read(&store).expect("the store"),
        bytes,
        "left as it was"
    );
}
