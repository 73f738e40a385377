//! `backflow operator` mirrors another Kubernetes API: here a `backflow serve --no-mirror`
//! stands in for the cluster (a real one cannot run here), reached over TCP through its
//! kubeconfig exactly as a cluster would be.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{HANG_GUARD, Out, Sandbox, Server, http, ready, run_bounded, wait_for};

/// The operator process, stopped by its own PID.
pub(crate) struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + HANG_GUARD;
        while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Operator {
    /// A replica as the install's HA Deployment runs it (probes on a free port; the Lease's
    /// timings short, so a test sees a takeover within seconds), keeping its data in `data`;
    /// with where its probes answer.
    fn replica(sandbox: &Sandbox, kubeconfig: &Path, data: &Path) -> (Self, String) {
        let data = data.to_string_lossy();
        let args = [
            "operator",
            "--data-dir",
            &data,
            "--leader-elect-lease-duration",
            "4s",
            "--leader-elect-renew-deadline",
            "3s",
            "--leader-elect-retry-period",
            "1s",
        ];
        Self::with_args(sandbox, kubeconfig, &args)
    }

    /// `backflow` with `args` (an `operator` command line) against the API `kubeconfig` names,
    /// its probes on a free port; with where they answer.
    pub(crate) fn with_args(sandbox: &Sandbox, kubeconfig: &Path, args: &[&str]) -> (Self, String) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .env("HOME", &sandbox.home)
            .env("BACKFLOW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn backflow operator");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.trim().strip_prefix("probes:") {
                    let addr = url.trim().trim_start_matches("http://");
                    let addr = addr.split('/').next().unwrap_or_default().to_string();
                    let _ = tx.send(addr);
                }
            }
        });
        let probes = rx
            .recv_timeout(HANG_GUARD)
            .expect("the operator reports where its probes answer");
        (Self(child), probes)
    }

    /// Kills it with SIGKILL, as a node lost or an OOM kill does.
    fn kill_9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// `backflow operator` against the API `kubeconfig` names, keeping its data in `data`.
    fn start(sandbox: &Sandbox, kubeconfig: &Path, data: &Path) -> Self {
        Self(
            Command::new(env!("CARGO_BIN_EXE_backflow"))
                .args(["operator", "--kubeconfig"])
                .arg(kubeconfig)
                .arg("--data-dir")
                .arg(data)
                .env("HOME", &sandbox.home)
                .env("BACKFLOW_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn backflow operator"),
        )
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = backflow_testkit::git(std::env::temp_dir())
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A cluster (a `serve --no-mirror`, reached through its kubeconfig as a cluster would be), an
/// empty bare repository for the operator to write, and the operator's data dir.
struct Fixture {
    sandbox: Sandbox,
    cluster: Server,
    kubeconfig: PathBuf,
    origin: String,
    operator_data: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let sandbox = Sandbox::new();
        let cluster = Server::start_with(&sandbox.data, Some(&sandbox.home), &["--no-mirror"]);
        let kubeconfig = sandbox.data.join("kubeconfig");
        let origin = sandbox
            .work
            .join("origin.git")
            .to_string_lossy()
            .to_string();
        git(&["init", "-q", "--bare", "--initial-branch=main", &origin]).expect("git init --bare");
        let operator_data = sandbox.work.join("operator");
        Self {
            sandbox,
            cluster,
            kubeconfig,
            origin,
            operator_data,
        }
    }

    fn kubectl(&self, args: &[&str]) -> Out {
        run_bounded(
            "kubectl",
            self.sandbox.kubectl("kubectl", &self.kubeconfig, args),
        )
    }

    /// Starts the operator and waits until it installed the backflow.dev CRDs into the API
    /// it mirrors.
    fn operator(&self) -> Operator {
        let operator = Operator::start(&self.sandbox, &self.kubeconfig, &self.operator_data);
        wait_for("the operator to install its CRDs", String::new, || {
            let out = self.kubectl(&["get", "crd", "nativeclaims.backflow.dev", "-o", "name"]);
            (out.code == Some(0)).then_some(())
        });
        operator
    }

    /// `kubectl apply -f` of `yaml`, which must succeed.
    fn apply(&self, yaml: &str) {
        let path = self.sandbox.work.join("config.yaml");
        std::fs::write(&path, yaml).expect("write the configuration");
        let applied = self.kubectl(&["apply", "-f", &path.to_string_lossy()]);
        assert_eq!(applied.code, Some(0), "{applied}");
    }

    /// git on the bare repository.
    fn git(&self, args: &[&str]) -> Option<String> {
        let mut all = vec!["--git-dir", self.origin.as_str()];
        all.extend_from_slice(args);
        git(&all)
    }

    /// `path` at the tip of `main`.
    fn show(&self, path: &str) -> Option<String> {
        self.git(&["show", &format!("main:{path}")])
    }

    /// Patches `ConfigMap` `team/settings` as the manager `ops-dashboard` (a cluster's watch
    /// does not say who wrote; the commit names the newest field manager).
    fn patch_settings(&self, patch: &str) {
        let patched = self.kubectl(&[
            "patch",
            "configmap",
            "settings",
            "-n",
            "team",
            "--field-manager=ops-dashboard",
            "-p",
            patch,
        ]);
        assert_eq!(patched.code, Some(0), "{patched}");
    }

    /// Creates `ConfigMap` `team/settings` with `mode: fast`.
    fn create_settings(&self) {
        let created = self.kubectl(&[
            "create",
            "configmap",
            "settings",
            "-n",
            "team",
            "--from-literal=mode=fast",
        ]);
        assert_eq!(created.code, Some(0), "{created}");
    }

    fn stop(self) {
        self.cluster.stop();
    }
}

/// The namespace `team`, its `GitProvider` (window 0) for the fixture's repository, and the
/// `WatchRule` of its `ConfigMap`s; `target` is the `GitTarget` `team/team`'s spec, `more` any
/// further objects. Nothing sends push notices here, so the branch workers read the remote
/// every second: a push that lands after the acting replica last read it (a push held
/// back by a killed pusher's ref lock until the next replica clears it) is learned of then.
fn team_config(f: &Fixture, target: &str, more: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: team}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitProvider
metadata: {{name: git, namespace: team}}
spec: {{url: "file://{}", push: {{commitWindow: 0s}}, refreshInterval: 1s}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: team, namespace: team}}
spec: {target}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: config, namespace: team}}
spec: {{targetRef: {{name: team}}, rules: [{{apiGroups: [""], resources: [configmaps]}}]}}
{more}"#,
        f.origin
    )
}

#[test]
fn operator_mirrors_another_api_configured_with_kubectl() {
    let f = Fixture::new();
    let operator = f.operator();
    f.apply(&team_config(
        &f,
        "{providerRef: {name: git}, branch: main, path: clusters/dev}",
        "",
    ));
    f.create_settings();

    let ls = || {
        f.git(&["ls-tree", "-r", "--name-only", "main"])
            .unwrap_or_default()
    };
    let file = wait_for("the operator to push team's ConfigMap", ls, || {
        f.show("clusters/dev/team/configmaps/settings.yaml")
    });
    assert!(
        file.contains("mode: fast") && !file.contains("resourceVersion"),
        "{file}"
    );
    // Only what the WatchRule selects: the namespace object itself is not mirrored.
    let files = ls();
    assert!(!files.contains("_cluster"), "{files}");
    // The operator reports on the target in the API it mirrors (written once a second).
    wait_for("GitTarget team/team Ready=True", String::new, || {
        let ready = f.kubectl(&[
            "get",
            "gittarget",
            "team",
            "-n",
            "team",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (ready.stdout.trim() == "True").then_some(())
    });

    // A cluster's watch does not say who wrote: the commit names the newest field manager.
    f.patch_settings(r#"{"data":{"mode":"safe"}}"#);
    let message = wait_for(
        "the operator to push the patch",
        || {
            f.git(&["log", "-1", "--format=%B", "main"])
                .unwrap_or_default()
        },
        || {
            let shown = f.show("clusters/dev/team/configmaps/settings.yaml")?;
            shown
                .contains("mode: safe")
                .then(|| f.git(&["log", "-1", "--format=%an%n%B", "main"]))?
        },
    );
    assert!(message.starts_with("backflow\n"), "{message}");
    assert!(
        message.lines().any(|l| l == "Changed-by: ops-dashboard"),
        "{message}"
    );

    drop(operator);
    f.stop();
}

/// Issue case 2 in operator mode, and the rule for an object changed on both sides while
/// backflow was down: the cluster keeps running while the operator is stopped; a person patches
/// field `a` live and pushes a change of field `b`. When the operator starts again, both reach
/// both sides: the start-up resync publishes only what changed live since the commit the live
/// side last held (`a`), and the converge applies the push (`b`).
#[test]
fn an_object_changed_on_both_sides_while_the_operator_was_down_keeps_both_changes() {
    let f = Fixture::new();
    let operator = f.operator();
    f.apply(&team_config(
        &f,
        "{providerRef: {name: git}, branch: main, path: clusters/dev, applierClaimRef: {kind: NativeClaim, name: apply}}",
        "---\napiVersion: backflow.dev/v1alpha1\nkind: NativeClaim\nmetadata: {name: apply, namespace: team}\nspec: {}\n",
    ));
    let created = f.kubectl(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team",
        "--from-literal=a=1",
        "--from-literal=b=1",
    ]);
    assert_eq!(created.code, Some(0), "{created}");
    let file_path = "clusters/dev/team/configmaps/settings.yaml";
    let show = || f.show(file_path);
    wait_for("the ConfigMap in Git", String::new, || {
        show().filter(|t| t.contains("b: \"1\""))
    });
    let claim = || {
        let out = f.kubectl(&["get", "nativeclaim", "apply", "-n", "team", "-o", "json"]);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap_or_default()["status"].clone()
    };
    wait_for(
        "the ConfigMap adopted",
        || format!("{:#}", claim()),
        || {
            let st = claim();
            let adopted = st["inventory"]
                .to_string()
                .contains("team_settings__ConfigMap");
            (adopted && st["operation"]["phase"] == "Succeeded" && st["inStepCommit"].is_string())
                .then_some(())
        },
    );
    drop(operator);

    f.patch_settings(r#"{"data":{"a":"live"}}"#);
    let clone = f.sandbox.work.join("clone");
    git(&["clone", "-q", &f.origin, &clone.to_string_lossy()]).expect("clone");
    let file = clone.join(file_path);
    let text = std::fs::read_to_string(&file).expect("the file");
    std::fs::write(&file, text.replace("b: \"1\"", "b: git")).expect("write");
    let in_clone = |args: &[&str]| {
        let mut all = vec!["-C", clone.to_str().expect("utf-8")];
        all.extend_from_slice(args);
        git(&all).unwrap_or_else(|| panic!("git {args:?} failed"))
    };
    in_clone(&["commit", "-q", "-am", "b is git's"]);
    in_clone(&["push", "-q", "origin", "HEAD:main"]);

    let operator = f.operator();
    let merged = wait_for(
        "both changes in Git",
        || show().unwrap_or_default(),
        || {
            show().filter(|t| {
                t.contains("b: git") && (t.contains("a: live") || t.contains("a: \"live\""))
            })
        },
    );
    assert!(!merged.contains("b: \"1\""), "{merged}");
    let live = || {
        let out = f.kubectl(&["get", "configmap", "settings", "-n", "team", "-o", "json"]);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap_or_default()["data"].clone()
    };
    wait_for(
        "both changes live",
        || format!("{}", live()),
        || (live() == serde_json::json!({"a": "live", "b": "git"})).then_some(()),
    );
    drop(operator);
    f.stop();
}

/// The kubectl arguments reading `field` of the operators' Lease's spec.
pub(crate) fn lease_field(field: &str) -> Vec<String> {
    [
        "get",
        "lease",
        "backflow-operator",
        "-n",
        "backflow-system",
        "-o",
    ]
    .into_iter()
    .map(str::to_string)
    .chain([format!("jsonpath={{.spec.{field}}}")])
    .collect()
}

/// Waits (`what`) until the replica whose probes answer at `probes` acts.
pub(crate) fn wait_leading(probes: &str, what: &str) {
    wait_for(what, String::new, || leads(probes).filter(|l| *l));
}

/// Waits (`what`) until the replica whose probes answer at `probes` stands by, ready.
pub(crate) fn wait_standing_by(probes: &str, what: &str) {
    wait_for(what, String::new, || {
        (ready(probes) && leads(probes) == Some(false)).then_some(())
    });
}

/// `backflow_leader` on a replica's `/metrics`: 1 while it acts, 0 while it stands by.
pub(crate) fn leads(probes: &str) -> Option<bool> {
    let answer = http(probes, "GET", "/metrics", &[], "");
    (answer.status == 200).then_some(())?;
    let line = answer
        .body
        .lines()
        .find(|l| l.starts_with("backflow_leader "))?;
    Some(line.ends_with(" 1"))
}

/// Two replicas with the HA Deployment's flags: one acts, the other stands by (both ready).
/// The leader is killed with SIGKILL in the middle of a stream of API writes and a Git push:
/// the standby takes over once the Lease expires, every acknowledged write reaches Git, the
/// push reaches the API, no object is committed twice, and the Lease shows the transition.
#[test]
fn two_replicas_take_turns_and_a_killed_leader_loses_nothing_acknowledged() {
    let f = Fixture::new();
    let (mut first, first_probes) =
        Operator::replica(&f.sandbox, &f.kubeconfig, &f.operator_data.join("first"));
    wait_leading(&first_probes, "the first replica to lead");
    let (second, second_probes) =
        Operator::replica(&f.sandbox, &f.kubeconfig, &f.operator_data.join("second"));
    wait_standing_by(&second_probes, "the second replica to stand by, ready");
    assert!(ready(&first_probes), "the leader is ready");
    assert_eq!(leads(&first_probes), Some(true), "one leader at a time");
    let lease = |field: &str| {
        let args = lease_field(field);
        f.kubectl(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout
    };
    let first_holder = lease("holderIdentity");
    assert!(!first_holder.is_empty(), "the Lease names its holder");

    f.apply(&team_config(
        &f,
        "{providerRef: {name: git}, branch: main, path: clusters/dev, applierClaimRef: {kind: NativeClaim, name: apply}}",
        "---\napiVersion: backflow.dev/v1alpha1\nkind: NativeClaim\nmetadata: {name: apply, namespace: team}\nspec: {}\n",
    ));
    let create = |i: usize| {
        let created = f.kubectl(&[
            "create",
            "configmap",
            &format!("cm-{i}"),
            "-n",
            "team",
            &format!("--from-literal=n={i}"),
        ]);
        assert_eq!(created.code, Some(0), "{created}");
    };
    for i in 0..8 {
        create(i);
    }
    first.kill_9();
    for i in 8..16 {
        create(i);
    }
    // A push while nobody leads: applied by the replica that takes over.
    let clone = f.sandbox.work.join("clone");
    wait_for("the first writes to reach Git", String::new, || {
        f.show("clusters/dev/team/configmaps/cm-0.yaml")
    });
    git(&["clone", "-q", &f.origin, &clone.to_string_lossy()]).expect("git clone");
    let pushed = clone.join("clusters/dev/team/configmaps/from-git.yaml");
    std::fs::write(
        &pushed,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-git\n  namespace: team\ndata:\n  by: git\n",
    )
    .expect("write the pushed file");
    let in_clone = |args: &[&str]| {
        let mut all = vec!["-C", clone.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        git(&all)
    };
    in_clone(&["add", "-A"]).expect("git add");
    in_clone(&[
        "-c",
        "user.name=bob",
        "-c",
        "user.email=bob@example.com",
        "commit",
        "-q",
        "-m",
        "bob adds from-git",
    ])
    .expect("git commit");
    // The replica that takes over may push first: rebase onto it, never force.
    wait_for("bob's push to land", String::new, || {
        in_clone(&["pull", "-q", "--rebase", "origin", "main"])?;
        in_clone(&["push", "-q", "origin", "HEAD:main"])
    });

    wait_leading(&second_probes, "the standby to take over");
    let ls = || {
        f.git(&["ls-tree", "-r", "--name-only", "main"])
            .unwrap_or_default()
    };
    wait_for("every acknowledged write to reach Git", ls, || {
        (0..16)
            .all(|i| {
                f.show(&format!("clusters/dev/team/configmaps/cm-{i}.yaml"))
                    .is_some()
            })
            .then_some(())
    });
    wait_for("the push to reach the API", String::new, || {
        let got = f.kubectl(&[
            "get",
            "configmap",
            "from-git",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.by}",
        ]);
        (got.stdout == "git").then_some(())
    });
    for i in 0..16 {
        let path = format!("clusters/dev/team/configmaps/cm-{i}.yaml");
        let commits = f
            .git(&["log", "--format=%H", "main", "--", &path])
            .unwrap_or_default();
        assert_eq!(
            commits.lines().count(),
            1,
            "{path} committed once: {commits}"
        );
    }
    assert_ne!(
        lease("holderIdentity"),
        first_holder,
        "the Lease changed hands"
    );
    // Each leader said so on the Lease, as client-go's leader election does.
    let events = f.kubectl(&[
        "get",
        "events",
        "-n",
        "backflow-system",
        "--field-selector",
        "reason=LeaderElection",
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ]);
    let became: Vec<&str> = events
        .stdout
        .lines()
        .filter(|l| l.ends_with("became leader"))
        .collect();
    assert!(
        became.len() >= 2 && became.iter().any(|l| l.starts_with(&first_holder)),
        "{events}"
    );
    let transitions: u32 = lease("leaseTransitions").trim().parse().unwrap_or(0);
    assert!(transitions >= 1, "the Lease counts the transition");
    drop(second);
    // A clean stop released it: nobody holds it, so a new replica would take it at once.
    wait_for(
        "the Lease to be released",
        || lease("holderIdentity"),
        || lease("holderIdentity").is_empty().then_some(()),
    );
    f.stop();
}

/// `operator --web-view-bind-address` on loopback: the web view and what `backflow history`,
/// `why` and `diff --endpoint` ask, reading the cluster (which keeps no record of writes: the
/// story holds the commits, named by field manager). Beyond loopback it refuses to start.
#[test]
fn the_operator_serves_the_web_view_on_loopback_and_the_commands_ask_it() {
    let f = Fixture::new();
    let data = f.operator_data.to_string_lossy().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "operator",
            "--data-dir",
            &data,
            "--web-view-bind-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(&f.kubeconfig)
        .env("HOME", &f.sandbox.home)
        .env("BACKFLOW_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn backflow operator");
    let stdout = child.stdout.take().expect("piped stdout");
    let _operator = Operator(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.trim().strip_prefix("web view:") {
                let addr = rest.trim().trim_start_matches("http://");
                let _ = tx.send(addr.split('/').next().unwrap_or_default().to_string());
            }
        }
    });
    wait_for("the operator to install its CRDs", String::new, || {
        let out = f.kubectl(&["get", "crd", "nativeclaims.backflow.dev", "-o", "name"]);
        (out.code == Some(0)).then_some(())
    });
    f.apply(&team_config(
        &f,
        "{providerRef: {name: git}, branch: main, path: clusters/dev}",
        "",
    ));
    let addr = rx
        .recv_timeout(HANG_GUARD)
        .expect("the operator says where its web view answers");
    f.create_settings();
    wait_for("the create in Git", String::new, || {
        f.show("clusters/dev/team/configmaps/settings.yaml")?
            .contains("mode: fast")
            .then_some(())
    });
    f.patch_settings(r#"{"data":{"mode":"safe"}}"#);
    wait_for("the patch in Git", String::new, || {
        f.show("clusters/dev/team/configmaps/settings.yaml")?
            .contains("mode: safe")
            .then_some(())
    });
    let endpoint = format!("http://{addr}");
    let ask = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_backflow"));
        cmd.args(args)
            .args(["--endpoint", &endpoint, "--kubeconfig"])
            .arg(&f.kubeconfig)
            .env("HOME", &f.sandbox.home);
        run_bounded("backflow", cmd)
    };
    let story = wait_for(
        "the patch's commit in the story",
        || ask(&["history", "configmap/settings", "-n", "team"]).to_string(),
        || {
            let out = ask(&["history", "configmap/settings", "-n", "team", "-o", "json"]);
            let story: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
            let committed = story["entries"].as_array()?.iter().any(|e| {
                e["kind"] == "Committed"
                    && e["summary"]
                        .as_str()
                        .is_some_and(|s| s.contains("ops-dashboard"))
            });
            committed.then_some(story)
        },
    );
    assert!(
        story["gaps"]
            .to_string()
            .contains("embedded API server only"),
        "a cluster keeps no record of writes, and the story says so: {story:#}"
    );
    let why = ask(&["why", "configmap/settings", "-n", "team"]);
    assert_eq!(why.code, Some(0), "{why}");
    assert!(
        why.stdout
            .lines()
            .any(|l| l.starts_with("data") && l.contains("ops-dashboard")),
        "{why}"
    );
    let diff = ask(&["diff", "team/team"]);
    assert_eq!(diff.code, Some(0), "nothing differs at rest: {diff}");
    let page = http(&addr, "GET", "/ui/", &[], "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("team/team"), "{}", page.body);

    let mut wide = Command::new(env!("CARGO_BIN_EXE_backflow"));
    wide.args([
        "operator",
        "--web-view-bind-address",
        "0.0.0.0:0",
        "--kubeconfig",
    ])
    .arg(&f.kubeconfig)
    .env("HOME", &f.sandbox.home);
    let refused = run_bounded("backflow operator", wide);
    assert_eq!(refused.code, Some(1), "{refused}");
    assert!(refused.stderr.contains("kubectl port-forward"), "{refused}");
}
