//! `backflow operator` mirrors another Kubernetes API: here a `backflow serve --no-mirror`
//! stands in for the cluster (a real one cannot run here), reached over TCP through its
//! kubeconfig exactly as a cluster would be.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{HANG_GUARD, Out, Sandbox, Server, run_bounded, wait_for};

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

    fn stop(self) {
        self.cluster.stop();
    }
}

/// The namespace `team`, its `GitProvider` (window 0) for the fixture's repository, and the
/// `WatchRule` of its `ConfigMap`s; `target` is the `GitTarget` `team/team`'s spec, `more` any
/// further objects.
fn team_config(f: &Fixture, target: &str, more: &str) -> String {
    format!(
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
    let created = f.kubectl(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team",
        "--from-literal=mode=fast",
    ]);
    assert_eq!(created.code, Some(0), "{created}");

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
