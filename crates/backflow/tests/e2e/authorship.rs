//! Real people: users of a `--token-auth-file` edit through kubectl, and the remote's history
//! names each change's author (seed 004 attributes each commit to the requesting user).

use std::path::{Path, PathBuf};

use crate::common::{World, configmap, run_bounded};

/// Writes a token file in kube-apiserver's format for alice and bob; returns its path.
fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("tokens.csv");
    std::fs::write(
        &path,
        "# who may use the API\nt-alice-5521,alice,1001,\"dev,ops\"\nt-bob-7734,bob,1002\n",
    )
    .expect("write the token file");
    path
}

/// A server whose users are alice and bob, with a window long enough (3 s) that both users'
/// changes fall into one; the token file's directory lives as long as the world. Under RBAC,
/// the admin lets them edit every namespace (`ClusterRole` `edit`).
fn world_with_users() -> (World, tempfile::TempDir) {
    let tokens = tempfile::tempdir().unwrap();
    let file = token_file(tokens.path());
    let w = World::start(&[
        "--token-auth-file",
        file.to_str().unwrap(),
        "--commit-window",
        "3s",
        "--no-apply",
    ]);
    w.kubectl(&[
        "create",
        "clusterrolebinding",
        "people-edit",
        "--clusterrole=edit",
        "--user=alice",
        "--user=bob",
        "--group=ops",
    ]);
    w.wait_settled();
    (w, tokens)
}

/// Runs kubectl as the user of `token` and asserts success.
fn kubectl_as(w: &World, token: &str, args: &[&str]) -> String {
    let mut all = vec!["--token", token];
    all.extend_from_slice(args);
    w.kubectl(&all)
}

/// The commits of the remote, newest first, as (author, email, files).
fn commits(w: &World) -> Vec<(String, String, Vec<String>)> {
    let log = w.git(&["log", "--format=%x01%an|%ae", "--name-only", "main"]);
    log.split('\u{1}')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            let mut lines = c.lines();
            let head = lines.next().unwrap_or_default();
            let (name, email) = head.split_once('|').unwrap_or((head, ""));
            let files = lines
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            (name.to_string(), email.to_string(), files)
        })
        .collect()
}

/// The one commit that holds `file`, as (author, email, files).
fn commit_of(w: &World, file: &str) -> (String, String, Vec<String>) {
    let holding: Vec<_> = commits(w)
        .into_iter()
        .filter(|(_, _, files)| files.iter().any(|f| f == file))
        .collect();
    assert_eq!(holding.len(), 1, "one commit holds {file}: {holding:?}");
    holding.into_iter().next().unwrap()
}

#[test]
fn each_users_change_is_committed_under_their_name_and_a_stranger_is_refused() {
    let (w, _tokens) = world_with_users();

    kubectl_as(
        &w,
        "t-alice-5521",
        &["create", "configmap", "by-alice", "--from-literal=k=a"],
    );
    kubectl_as(
        &w,
        "t-bob-7734",
        &["create", "configmap", "by-bob", "--from-literal=k=b"],
    );
    w.wait_present("live/default/configmaps/by-alice.yaml");
    w.wait_present("live/default/configmaps/by-bob.yaml");
    let alice = commit_of(&w, "live/default/configmaps/by-alice.yaml");
    let bob = commit_of(&w, "live/default/configmaps/by-bob.yaml");
    assert_eq!(
        (alice.0.as_str(), alice.1.as_str(), alice.2.len()),
        ("alice", "alice@users.backflow.local", 1),
        "{alice:?}"
    );
    assert_eq!(
        (bob.0.as_str(), bob.1.as_str(), bob.2.len()),
        ("bob", "bob@users.backflow.local", 1),
        "{bob:?}"
    );
    // The committer stays backflow.
    let committers = w.git(&["log", "-2", "--format=%cn", "main"]);
    assert_eq!(
        committers.lines().collect::<Vec<_>>(),
        ["backflow", "backflow"]
    );

    // The kubeconfig's own token is the admin user.
    w.apply(&configmap("default", "by-admin", &[("k", "admin")]));
    w.wait_present("live/default/configmaps/by-admin.yaml");
    assert_eq!(
        commit_of(&w, "live/default/configmaps/by-admin.yaml").0,
        "admin"
    );

    // kubectl says who is asking, and that they may (backflow does not authorize).
    let who = kubectl_as(
        &w,
        "t-alice-5521",
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert_eq!(who.trim(), r#"alice ["dev","ops","system:authenticated"]"#);
    assert_eq!(
        kubectl_as(&w, "t-bob-7734", &["auth", "can-i", "delete", "secrets"]).trim(),
        "yes"
    );

    // A token nobody was given is refused, by kubectl and on the wire.
    let out = w.kubectl_run(&["--token", "t-mallory", "get", "configmaps"]);
    assert_ne!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("Unauthorized"), "{out}");
    let answer = w.request(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("Authorization", "Bearer t-mallory")],
        "",
    );
    assert_eq!(answer.status, 401, "{answer:?}");

    // A write that waits for the push is answered with the commit that holds it: bob's.
    let answer = w.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[
            ("Authorization", "Bearer t-bob-7734"),
            ("Content-Type", "application/json"),
            ("X-Backflow-Wait", "pushed"),
        ],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"waited"},"data":{"k":"w"}}"#,
    );
    assert_eq!(answer.status, 201, "{answer:?}");
    let sha = answer.header("x-backflow-commit").unwrap().to_string();
    assert_eq!(sha.len(), 40, "{answer:?}");
    assert_eq!(w.git(&["log", "-1", "--format=%an", &sha]).trim(), "bob");

    // A client certificate the server's CA signed (`backflow kubeconfig --user`) names its user.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_backflow"));
    cmd.args([
        "kubeconfig",
        "--user",
        "carol",
        "--group",
        "ops",
        "--data-dir",
    ])
    .arg(&w.dirs.data);
    let issued = run_bounded("backflow kubeconfig --user carol", cmd);
    assert_eq!(issued.code, Some(0), "{issued}");
    assert!(
        issued.stdout.contains("client-certificate-data:"),
        "{issued}"
    );
    let carol = w.dirs.work.join("carol.kubeconfig");
    std::fs::write(&carol, &issued.stdout).unwrap();
    let created = run_bounded(
        "kubectl as carol",
        w.dirs.kubectl(
            "kubectl",
            &carol,
            &["create", "configmap", "by-carol", "--from-literal=k=c"],
        ),
    );
    assert_eq!(created.code, Some(0), "{created}");
    w.wait_present("live/default/configmaps/by-carol.yaml");
    assert_eq!(
        commit_of(&w, "live/default/configmaps/by-carol.yaml").0,
        "carol"
    );
}

#[test]
fn co_authored_targets_keep_one_commit_and_excluded_users_are_not_mirrored() {
    let (w, _tokens) = world_with_users();
    w.patch_target("default", r#"{"spec":{"commitAuthors":"CoAuthored"}}"#);
    w.wait_target_ready("default");

    kubectl_as(
        &w,
        "t-alice-5521",
        &["create", "configmap", "one", "--from-literal=k=1"],
    );
    kubectl_as(
        &w,
        "t-bob-7734",
        &["create", "configmap", "two", "--from-literal=k=2"],
    );
    w.wait_present("live/default/configmaps/one.yaml");
    w.wait_present("live/default/configmaps/two.yaml");
    let one = commit_of(&w, "live/default/configmaps/one.yaml");
    assert_eq!(one.0, "alice", "the first user authors the commit: {one:?}");
    assert_eq!(one.2.len(), 2, "both changes in one commit: {one:?}");
    let body = w.git(&["log", "-1", "--format=%b", "main"]);
    assert!(
        body.lines()
            .any(|l| l == "Co-authored-by: bob <bob@users.backflow.local>"),
        "{body}"
    );

    // bob's changes are not mirrored once the folder excludes him; alice's still are.
    w.patch_target(
        "default",
        r#"{"spec":{"commitAuthors":null,"exclude":{"users":["bob"]}}}"#,
    );
    w.wait_target_ready("default");
    w.wait_settled();
    let before = w.events("excluded");
    let tip = w.tip();
    kubectl_as(
        &w,
        "t-bob-7734",
        &["patch", "configmap", "one", "-p", r#"{"data":{"k":"bob"}}"#],
    );
    w.wait_events("excluded", before, 1.0);
    w.wait_settled();
    assert_eq!(w.tip(), tip, "bob's change made no commit");
    kubectl_as(&w, "t-bob-7734", &["delete", "configmap", "two"]);
    w.wait_events("excluded", before, 2.0);
    w.wait_settled();
    assert!(
        w.show("live/default/configmaps/two.yaml").is_some(),
        "bob's delete is not mirrored"
    );
    kubectl_as(
        &w,
        "t-alice-5521",
        &[
            "patch",
            "configmap",
            "one",
            "-p",
            r#"{"data":{"by":"alice"}}"#,
        ],
    );
    let text = w.wait_file("live/default/configmaps/one.yaml", |t| t.contains("alice"));
    assert!(
        text.contains("k: \"bob\""),
        "alice's write carries the object whole: {text}"
    );
    assert_eq!(
        w.git(&["log", "-1", "--format=%an", "main"]).trim(),
        "alice"
    );
}

#[test]
fn provider_commit_and_push_settings_take_effect_without_a_restart() {
    let w = World::start(&["--commit-window", "0s", "--no-apply"]);
    w.wait_settled();
    w.apply(&configmap("default", "before", &[("k", "1")]));
    w.wait_present("live/default/configmaps/before.yaml");
    assert_eq!(
        w.git(&["log", "-1", "--format=%cn", "main"]).trim(),
        "backflow"
    );
    w.patch_provider(
        "default",
        r#"{"spec":{"commit":{"committer":{"name":"platform-bot","email":"bot@example.com"},"message":{"eventTemplate":"config: {verb} {object}"}}}}"#,
    );
    // The worker takes the new settings at the next reconcile; poll with fresh objects.
    let mut n = 0;
    crate::common::wait_for(
        "a commit by the new committer",
        || w.git(&["log", "-3", "--format=%cn %s", "main"]),
        || {
            n += 1;
            let name = format!("after-{n}");
            w.apply(&configmap("default", &name, &[("k", "2")]));
            w.wait_present(&format!("live/default/configmaps/{name}.yaml"));
            let last = w.git(&["log", "-1", "--format=%cn|%ce|%s", "main"]);
            (last.trim()
                == format!("platform-bot|bot@example.com|config: update configmaps/default/{name}"))
            .then_some(())
        },
    );
}

#[test]
fn a_service_account_token_from_kubectl_create_token_authors_its_changes_until_the_account_goes() {
    let (w, _tokens) = world_with_users();
    w.kubectl(&["create", "serviceaccount", "deployer"]);
    w.kubectl(&[
        "create",
        "rolebinding",
        "deployer-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:deployer",
    ]);
    let too_short = w.kubectl_run(&["create", "token", "deployer", "--duration", "5m"]);
    assert_ne!(too_short.code, Some(0), "{too_short}");
    assert!(
        too_short.stderr.contains("less than 10 minutes"),
        "{too_short}"
    );
    let token = w.kubectl(&["create", "token", "deployer", "--duration", "20m"]);
    let token = token.trim();
    let who = kubectl_as(
        &w,
        token,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(who.trim(), "system:serviceaccount:default:deployer");
    kubectl_as(
        &w,
        token,
        &["create", "configmap", "by-robot", "--from-literal=k=r"],
    );
    w.wait_present("live/default/configmaps/by-robot.yaml");
    let (author, email, _) = commit_of(&w, "live/default/configmaps/by-robot.yaml");
    assert_eq!(
        (author.as_str(), email.as_str()),
        (
            "system:serviceaccount:default:deployer",
            "system-serviceaccount-default-deployer@users.backflow.local"
        )
    );
    // The token dies with its service account.
    w.kubectl(&["delete", "serviceaccount", "deployer"]);
    let refused = w.kubectl_run(&["--token", token, "get", "configmaps"]);
    assert_ne!(refused.code, Some(0), "{refused}");
    assert!(refused.stderr.contains("Unauthorized"), "{refused}");
}
