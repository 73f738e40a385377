//! `backflow operator` mirrors another Kubernetes API: here a `backflow serve --no-mirror`
//! stands in for the cluster (a real one cannot run here), reached over TCP through its
//! kubeconfig exactly as a cluster would be.

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
    let operator = Operator(
        Command::new(env!("CARGO_BIN_EXE_backflow"))
            .args(["operator", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--data-dir")
            .arg(&operator_data)
            .env("HOME", &sandbox.home)
            .env("BACKFLOW_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn backflow operator"),
    );

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
