//! Push webhooks end to end: with the periodic refresh set to an hour, a push is seen only
//! because it was announced — through the post-receive hook of `serve`'s own repository, and
//! through a GitHub delivery (an example payload signed by GitHub's own signer) for a remote
//! served over smart HTTP by `git http-backend`.

use std::path::Path;

use backflow_testkit::{HttpServer, octokit};
use serde_json::{Value, json};

use crate::common::*;

const HOUR: [&str; 2] = ["--git-refresh-interval", "1h"];

/// The `GitBranch` of `name` in `ns`: (tip, lastPushNoticeAt); nothing while it does not exist.
fn branch_status(w: &World, ns: &str, name: &str) -> (Option<String>, Option<String>) {
    let out = w.kubectl_run(&["get", "gitbranch", name, "-n", ns, "-o", "json"]);
    let b: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    let text = |p: &str| b.pointer(p).and_then(Value::as_str).map(str::to_string);
    (text("/status/tip"), text("/status/lastPushNoticeAt"))
}

/// Waits until the `GitBranch` reports `tip` and a push notice.
fn wait_noticed(w: &World, ns: &str, name: &str, tip: &str) {
    wait_for(
        &format!("GitBranch {ns}/{name} to show {tip} and a push notice"),
        || format!("{:?}", branch_status(w, ns, name)),
        || {
            let (seen, noticed) = branch_status(w, ns, name);
            (seen.as_deref() == Some(tip) && noticed.is_some()).then_some(())
        },
    );
}

/// A counter's value (counters are small whole numbers).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "counters are small non-negative whole numbers"
)]
fn counter(w: &World, name: &str, labels: &[&str]) -> u64 {
    metric_sum(&w.metrics(), name, labels).round() as u64
}

fn deliveries(w: &World, type_: &str, outcome: &str) -> u64 {
    counter(
        w,
        "backflow_receiver_deliveries_total",
        &[
            &format!("type=\"{type_}\""),
            &format!("outcome=\"{outcome}\""),
        ],
    )
}

/// Commits a file in `clone` and pushes it, returning the commit and git's stderr.
fn push_a_commit(w: &World, clone: &Path, file: &str) -> (String, String) {
    std::fs::write(clone.join(file), "pushed by a person\n").unwrap();
    w.git_in(Some(clone), &["add", "-A"]);
    w.git_in(Some(clone), &["commit", "-q", "-m", &format!("add {file}")]);
    let out = run_bounded(
        "git push",
        w.git_command(Some(clone), &["push", "origin", "HEAD:main"]),
    );
    assert_eq!(
        out.code,
        Some(0),
        "a push never fails because of backflow: {out}"
    );
    let sha = w
        .git_in(Some(clone), &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    (sha, out.stderr)
}

#[test]
fn a_push_to_the_default_repository_is_noticed_through_its_hook() {
    let mut w = World::start(&HOUR);
    w.wait_settled();
    let clone = w.dirs.work.join("clone");
    w.git_in(
        Some(&w.dirs.work),
        &["clone", "-q", &w.origin().to_string_lossy(), "clone"],
    );
    let (sha, _) = push_a_commit(&w, &clone, "notes.md");
    wait_noticed(&w, "backflow-system", "default-main", &sha);
    assert_eq!(deliveries(&w, "generic-hmac", "accepted"), 1);
    let receiver = w.get_json(&["gitreceiver", "default", "-n", "backflow-system"]);
    assert_eq!(receiver["spec"]["type"], "generic-hmac");
    assert!(
        receiver["status"]["webhookPath"]
            .as_str()
            .is_some_and(|p| p.starts_with("/git-push/") && p.len() == "/git-push/".len() + 64),
        "{receiver:#}"
    );

    // Deleting the branch is announced too (`after` all zeros): the worker finds it gone and
    // recreates it from the live state, with the refresh an hour away.
    w.git(&["config", "receive.denyDeleteCurrent", "ignore"]);
    let out = run_bounded(
        "git push --delete",
        w.git_command(Some(&clone), &["push", "origin", "--delete", "main"]),
    );
    assert_eq!(out.code, Some(0), "{out}");
    wait_for(
        "the deleted branch to be recreated from the live state",
        || format!("{:?}", w.tip()),
        || w.tip().filter(|_| w.show("live/README.md").is_some()),
    );
    assert_eq!(deliveries(&w, "generic-hmac", "accepted"), 2);
    w.git_in(Some(&clone), &["fetch", "-q", "origin"]);
    w.git_in(Some(&clone), &["reset", "-q", "--hard", "origin/main"]);

    // With backflow stopped the push still succeeds, and says why it was not announced.
    w.stop();
    let (_, stderr) = push_a_commit(&w, &clone, "more.md");
    assert!(
        stderr.contains("not delivered") && stderr.contains("next refresh"),
        "the hook tells the pusher: {stderr}"
    );
}

/// The README's quickstart as written: `serve` with its default, relative data dir. Git runs
/// the hook inside `origin.git`, so a relative path in it would name nothing there.
#[test]
fn the_hook_works_with_the_default_relative_data_dir() {
    let w = World::start_as_readme(&HOUR);
    w.wait_settled();
    let clone = w.dirs.work.join("clone");
    w.git_in(
        Some(&w.dirs.work),
        &["clone", "-q", &w.origin().to_string_lossy(), "clone"],
    );
    let (sha, stderr) = push_a_commit(&w, &clone, "notes.md");
    assert!(
        !stderr.contains("backflow:"),
        "the hook announced the push without a complaint: {stderr}"
    );
    wait_noticed(&w, "backflow-system", "default-main", &sha);
    assert_eq!(deliveries(&w, "generic-hmac", "accepted"), 1);
}

/// The example push of GitHub's examples, rewritten to announce `after` on `main` of `url`.
fn github_push(url: &str, before: &str, after: &str) -> Vec<u8> {
    let mut push = octokit::examples("push")
        .into_iter()
        .find(|e| e["ref"] == "refs/heads/master")
        .expect("a branch push among GitHub's examples");
    push["ref"] = json!("refs/heads/main");
    push["before"] = json!(before);
    push["after"] = json!(after);
    let repository = push["repository"].as_object_mut().expect("a repository");
    repository.retain(|_, v| !v.as_str().is_some_and(|s| s.contains("github.com")));
    repository.insert("clone_url".into(), json!(url));
    serde_json::to_vec(&push).unwrap()
}

fn post_github(w: &World, path: &str, secret: &str, body: &[u8]) -> Answer {
    let signature = octokit::sign(secret, body);
    http(
        w.receiver(),
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", "f5d4c9a0-0000-11ef-8000-000000000001"),
            ("X-Hub-Signature-256", &signature),
        ],
        std::str::from_utf8(body).unwrap(),
    )
}

fn webhook_path(w: &World) -> String {
    wait_for(
        "GitReceiver team-a/github Ready with a path",
        || {
            format!(
                "{:#}",
                w.get_json(&["gitreceiver", "github", "-n", "team-a"])
            )
        },
        || {
            let r = w.get_json(&["gitreceiver", "github", "-n", "team-a"]);
            let ready = r["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            r["status"]["webhookPath"]
                .as_str()
                .filter(|_| ready)
                .map(str::to_string)
        },
    )
}

#[test]
fn a_github_delivery_for_a_smart_http_remote_wakes_its_branch_worker() {
    let w = World::start(&HOUR);
    let srv = w.dirs.work.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let bare = srv.join("team.git");
    w.git_in(
        Some(&w.dirs.work),
        &[
            "init",
            "-q",
            "--bare",
            "--initial-branch=main",
            &bare.to_string_lossy(),
        ],
    );
    let server = HttpServer::start(&srv, None);
    let url = server.url("team.git");
    w.apply(&format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: team-a}}
---
apiVersion: v1
kind: Secret
metadata: {{name: webhook, namespace: team-a}}
stringData: {{token: "first secret"}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitReceiver
metadata: {{name: github, namespace: team-a}}
spec: {{type: github, secretRef: {{name: webhook}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitProvider
metadata: {{name: team, namespace: team-a}}
spec: {{url: "{url}"}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: team, namespace: team-a}}
spec: {{providerRef: {{name: team}}, branch: main, path: apps}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: config, namespace: team-a}}
spec: {{targetRef: {{name: team}}, rules: [{{apiGroups: [""], resources: [configmaps]}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: app, namespace: team-a}}
data: {{color: blue}}
"#
    ));
    let path = webhook_path(&w);
    // backflow's first push over HTTP.
    let ours = wait_for(
        "the first push to the HTTP remote",
        || format!("{:?}", branch_status(&w, "team-a", "team-main")),
        || branch_status(&w, "team-a", "team-main").0,
    );

    // A delivery announcing backflow's own push: the worker reads the remote (once more) and
    // finds nothing foreign.
    let reads = || counter(&w, "backflow_git_remote_reads_total", &[]);
    let foreign = || counter(&w, "backflow_git_foreign_commits_total", &[]);
    let before = reads();
    let own = github_push(&url, &"0".repeat(40), &ours);
    assert_eq!(post_github(&w, &path, "first secret", &own).status, 202);
    wait_for(
        "the worker to read the remote after the notice",
        || format!("{} remote reads", reads()),
        || (reads() > before).then_some(()),
    );
    let (tip, noticed) = branch_status(&w, "team-a", "team-main");
    assert_eq!(tip.as_deref(), Some(ours.as_str()));
    assert!(noticed.is_some(), "the notice is stamped on the GitBranch");
    assert_eq!(foreign(), 0, "backflow's own push is never foreign");

    // Somebody pushes straight into the repository: no hook there, nothing tells backflow.
    let clone = w.dirs.work.join("person");
    w.git_in(
        Some(&w.dirs.work),
        &["clone", "-q", &bare.to_string_lossy(), "person"],
    );
    let (theirs, _) = push_a_commit(&w, &clone, "theirs.md");

    // A delivery signed with the wrong secret is refused and changes nothing.
    let body = github_push(&url, &ours, &theirs);
    let reads_before = reads();
    assert_eq!(post_github(&w, &path, "wrong secret", &body).status, 404);
    assert_eq!(deliveries(&w, "github", "bad_signature"), 1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        (branch_status(&w, "team-a", "team-main"), reads()),
        ((Some(ours.clone()), noticed), reads_before),
        "a rejected delivery triggers nothing"
    );

    // The real one wakes the worker, which reads the remote and sees the push.
    let answer = post_github(&w, &path, "first secret", &body);
    assert_eq!(answer.status, 202, "{answer:?}");
    wait_noticed(&w, "team-a", "team-main", &theirs);
    assert_eq!(deliveries(&w, "github", "accepted"), 2);
    assert_eq!(foreign(), 1);

    // Rotating the token moves the path: the old one is unknown, the new one works.
    w.apply(
        r#"apiVersion: v1
kind: Secret
metadata: {name: webhook, namespace: team-a}
stringData: {token: "second secret"}
"#,
    );
    let moved = wait_for(
        "the webhook path to move with the token",
        || {
            format!(
                "{:#}",
                w.get_json(&["gitreceiver", "github", "-n", "team-a"])
            )
        },
        || {
            let r = w.get_json(&["gitreceiver", "github", "-n", "team-a"]);
            r["status"]["webhookPath"]
                .as_str()
                .filter(|p| *p != path)
                .map(str::to_string)
        },
    );
    assert_eq!(post_github(&w, &path, "second secret", &body).status, 404);
    assert_eq!(deliveries(&w, "unknown", "unknown_path"), 1);
    assert_eq!(post_github(&w, &moved, "second secret", &body).status, 202);
    wait_for(
        "the redelivery to be recognised",
        || w.metrics(),
        || (deliveries(&w, "github", "duplicate") == 1).then_some(()),
    );

    // What became of each, newest first, in the receiver's status: kept across a restart.
    let outcomes = |w: &World| -> Vec<String> {
        let r = w.get_json(&["gitreceiver", "github", "-n", "team-a"]);
        r["status"]["recentDeliveries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["outcome"].as_str().map(str::to_string))
            .collect()
    };
    let kept = wait_for(
        "the deliveries in the receiver's status",
        || format!("{:?}", outcomes(&w)),
        || {
            let seen = outcomes(&w);
            (seen.first().map(String::as_str) == Some("duplicate")).then_some(seen)
        },
    );
    assert_eq!(
        kept,
        ["duplicate", "accepted", "refused", "accepted"],
        "the unknown path names no receiver"
    );
    let mut w = w;
    w.restart(&HOUR);
    assert_eq!(outcomes(&w), kept, "kept across a restart");
}

#[test]
fn beyond_loopback_the_receiver_speaks_tls() {
    let w = World::start(&["--receiver-bind-address", "0.0.0.0:0"]);
    let banner_url = w.receiver_url().to_string();
    assert!(banner_url.starts_with("https://127.0.0.1:"), "{banner_url}");
    let curl = |url: &str, insecure: bool| {
        let mut cmd = std::process::Command::new("curl");
        cmd.args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "--max-time",
            "10",
        ]);
        if insecure {
            cmd.arg("-k");
        }
        cmd.arg(url);
        run_bounded("curl", cmd).stdout
    };
    let path = "/git-push/0000";
    assert_eq!(
        curl(&format!("{banner_url}{path}"), true),
        "404",
        "TLS, unknown path"
    );
    let plain = banner_url.replacen("https://", "http://", 1);
    assert_ne!(
        curl(&format!("{plain}{path}"), true),
        "404",
        "no plain HTTP beyond loopback"
    );
    assert_ne!(
        curl(&format!("{banner_url}{path}"), false),
        "404",
        "a certificate of backflow's own CA"
    );
}
