//! `backflow operator` mirrors another Kubernetes API: here a `backflow serve --no-mirror`
//! stands in for the cluster (a real one cannot run here), reached over TCP through its
//! kubeconfig exactly as a cluster would be.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{HANG_GUARD, Sandbox, Server, run_bounded, wait_for};

/// The operator process, stopped by its own PID.
struct Operator(Child);

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

#[test]
fn operator_mirrors_another_api_configured_with_kubectl() {
    let sandbox = Sandbox::new();
    let cluster = Server::start_with(&sandbox.data, Some(&sandbox.home), &["--no-mirror"]);
    let kubeconfig = sandbox.data.join("kubeconfig");
    let origin = sandbox.work.join("origin.git");
    git(&[
        "init",
        "-q",
        "--bare",
        "--initial-branch=main",
        &origin.to_string_lossy(),
    ])
    .expect("git init --bare");

    let operator_data = sandbox.work.join("operator");
    let operator = Operator::start(&sandbox, &kubeconfig, &operator_data);

    let kubectl =
        |args: &[&str]| run_bounded("kubectl", sandbox.kubectl("kubectl", &kubeconfig, args));
    // The operator installs the backflow.dev CRDs into the API it mirrors.
    wait_for("the operator to install its CRDs", String::new, || {
        let out = kubectl(&["get", "crd", "gittargets.backflow.dev", "-o", "name"]);
        (out.code == Some(0)).then_some(())
    });
    let config = format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: team}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitProvider
metadata: {{name: git, namespace: team}}
spec: {{url: "file://{}", push: {{commitWindow: 0s}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: team, namespace: team}}
spec: {{providerRef: {{name: git}}, branch: main, path: clusters/dev}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: config, namespace: team}}
spec: {{targetRef: {{name: team}}, rules: [{{apiGroups: [""], resources: [configmaps]}}]}}
"#,
        origin.display()
    );
    let path = sandbox.work.join("config.yaml");
    std::fs::write(&path, config).expect("write the configuration");
    let applied = kubectl(&["apply", "-f", &path.to_string_lossy()]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let created = kubectl(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team",
        "--from-literal=mode=fast",
    ]);
    assert_eq!(created.code, Some(0), "{created}");

    let file = wait_for(
        "the operator to push team's ConfigMap",
        || {
            git(&[
                "--git-dir",
                &origin.to_string_lossy(),
                "ls-tree",
                "-r",
                "--name-only",
                "main",
            ])
            .unwrap_or_default()
        },
        || {
            git(&[
                "--git-dir",
                &origin.to_string_lossy(),
                "show",
                "main:clusters/dev/team/configmaps/settings.yaml",
            ])
        },
    );
    assert!(
        file.contains("mode: fast") && !file.contains("resourceVersion"),
        "{file}"
    );
    // Only what the WatchRule selects: the namespace object itself is not mirrored.
    let files = git(&[
        "--git-dir",
        &origin.to_string_lossy(),
        "ls-tree",
        "-r",
        "--name-only",
        "main",
    ])
    .unwrap_or_default();
    assert!(!files.contains("_cluster"), "{files}");
    // The operator reports on the target in the API it mirrors (written once a second).
    wait_for("GitTarget team/team Ready=True", String::new, || {
        let ready = kubectl(&[
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
    let patched = kubectl(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "team",
        "--field-manager=ops-dashboard",
        "-p",
        r#"{"data":{"mode":"safe"}}"#,
    ]);
    assert_eq!(patched.code, Some(0), "{patched}");
    let git_dir = origin.to_string_lossy();
    let message = wait_for(
        "the operator to push the patch",
        || git(&["--git-dir", &git_dir, "log", "-1", "--format=%B", "main"]).unwrap_or_default(),
        || {
            let shown = git(&[
                "--git-dir",
                &git_dir,
                "show",
                "main:clusters/dev/team/configmaps/settings.yaml",
            ])?;
            shown.contains("mode: safe").then(|| {
                git(&[
                    "--git-dir",
                    &git_dir,
                    "log",
                    "-1",
                    "--format=%an%n%B",
                    "main",
                ])
            })?
        },
    );
    assert!(message.starts_with("backflow\n"), "{message}");
    assert!(
        message.lines().any(|l| l == "Changed-by: ops-dashboard"),
        "{message}"
    );

    drop(operator);
    cluster.stop();
}

/// Issue case 2 in operator mode, and the rule for an object changed on both sides while
/// backflow was down: the cluster keeps running while the operator is stopped; a person patches
/// field `a` live and pushes a change of field `b`. When the operator starts again, both reach
/// both sides: the start-up resync publishes only what changed live since the commit the live
/// side last held (`a`), and the converge applies the push (`b`).
#[test]
fn an_object_changed_on_both_sides_while_the_operator_was_down_keeps_both_changes() {
    let sandbox = Sandbox::new();
    let cluster = Server::start_with(&sandbox.data, Some(&sandbox.home), &["--no-mirror"]);
    let kubeconfig = sandbox.data.join("kubeconfig");
    let origin = sandbox.work.join("origin.git");
    let origin_dir = origin.to_string_lossy().to_string();
    git(&["init", "-q", "--bare", "--initial-branch=main", &origin_dir]).expect("git init --bare");
    let operator_data = sandbox.work.join("operator");
    let operator = Operator::start(&sandbox, &kubeconfig, &operator_data);
    let kubectl =
        |args: &[&str]| run_bounded("kubectl", sandbox.kubectl("kubectl", &kubeconfig, args));
    wait_for("the operator to install its CRDs", String::new, || {
        let out = kubectl(&["get", "crd", "nativeclaims.backflow.dev", "-o", "name"]);
        (out.code == Some(0)).then_some(())
    });
    let config = format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: team}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitProvider
metadata: {{name: git, namespace: team}}
spec: {{url: "file://{origin_dir}", push: {{commitWindow: 0s}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {{name: apply, namespace: team}}
spec: {{}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: team, namespace: team}}
spec:
  providerRef: {{name: git}}
  branch: main
  path: clusters/dev
  applierClaimRef: {{kind: NativeClaim, name: apply}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: config, namespace: team}}
spec: {{targetRef: {{name: team}}, rules: [{{apiGroups: [""], resources: [configmaps]}}]}}
"#
    );
    let path = sandbox.work.join("config.yaml");
    std::fs::write(&path, config).expect("write the configuration");
    let applied = kubectl(&["apply", "-f", &path.to_string_lossy()]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let created = kubectl(&[
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
    let show = || {
        git(&[
            "--git-dir",
            &origin_dir,
            "show",
            &format!("main:{file_path}"),
        ])
    };
    wait_for("the ConfigMap in Git", String::new, || {
        show().filter(|t| t.contains("b: \"1\""))
    });
    let claim = || {
        let out = kubectl(&["get", "nativeclaim", "apply", "-n", "team", "-o", "json"]);
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

    let patched = kubectl(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "team",
        "--field-manager=ops-dashboard",
        "-p",
        r#"{"data":{"a":"live"}}"#,
    ]);
    assert_eq!(patched.code, Some(0), "{patched}");
    let clone = sandbox.work.join("clone");
    git(&["clone", "-q", &origin_dir, &clone.to_string_lossy()]).expect("clone");
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

    let operator = Operator::start(&sandbox, &kubeconfig, &operator_data);
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
        let out = kubectl(&["get", "configmap", "settings", "-n", "team", "-o", "json"]);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap_or_default()["data"].clone()
    };
    wait_for(
        "both changes live",
        || format!("{}", live()),
        || (live() == serde_json::json!({"a": "live", "b": "git"})).then_some(()),
    );
    drop(operator);
    cluster.stop();
}
