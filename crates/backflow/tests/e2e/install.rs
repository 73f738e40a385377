//! The install: `deploy/` rendered by the real `kubectl kustomize`, applied with kubectl to a
//! `backflow serve` standing in for the cluster (a real one cannot run here), and the
//! Deployment's command line run as two operator processes against it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{Sandbox, Server, run_bounded, wait_for};
use crate::operator::{Operator, lease_field, wait_leading, wait_standing_by};

/// `deploy/` in the repository.
fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The documents `kubectl kustomize` renders for `overlay`.
fn render(sandbox: &Sandbox, overlay: &str) -> (String, Vec<Value>) {
    let dir = deploy().join(overlay);
    let out = run_bounded(
        "kubectl kustomize",
        sandbox.kubectl(
            "kubectl",
            Path::new("/nonexistent"),
            &["kustomize", &dir.to_string_lossy()],
        ),
    );
    assert_eq!(out.code, Some(0), "{out}");
    let documents = out
        .stdout
        .split("\n---\n")
        .map(|doc| yaml_serde::from_str::<Value>(doc).expect("a rendered document is YAML"))
        .collect();
    (out.stdout, documents)
}

fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} is rendered"))
}

/// The manifests say what the docs promise: CRDs as `backflow crds -o yaml` prints them, the
/// operator non-root on a read-only root file system with probes, only read access to
/// everything, and two replicas in the HA overlay.
#[test]
fn the_manifests_render_and_hold_what_the_install_promises() {
    let sandbox = Sandbox::new();
    let (_, base) = render(&sandbox, "base");
    let (_, ha) = render(&sandbox, "overlays/ha");
    let crds = std::process::Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args(["crds", "-o", "yaml"])
        .output()
        .expect("backflow crds");
    let printed = String::from_utf8_lossy(&crds.stdout);
    let kept = std::fs::read_to_string(deploy().join("base/crds.yaml")).expect("crds.yaml");
    assert_eq!(
        kept, printed,
        "deploy/base/crds.yaml is what `backflow crds -o yaml` prints (regenerate it)"
    );
    let deployment = find(&base, "Deployment", "backflow");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(find(&ha, "Deployment", "backflow")["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["args"][0], "operator");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The dashboard queries only metrics backflow documents (docs/configuration.md lists what
    // /metrics serves; docs/operator.md adds the operator's own).
    let documented = ["docs/configuration.md", "docs/operator.md"]
        .iter()
        .map(|doc| std::fs::read_to_string(deploy().join("..").join(doc)).expect("the docs"))
        .collect::<String>();
    for name in dashboard_metrics() {
        assert!(
            documented.contains(&name),
            "deploy/grafana queries {name}, which no doc lists"
        );
    }
    let role = find(&base, "ClusterRole", "backflow-operator");
    for rule in role["rules"].as_array().expect("rules") {
        if rule["resources"] == serde_json::json!(["*"]) {
            assert_eq!(
                rule["verbs"],
                serde_json::json!(["get", "list", "watch"]),
                "only reads on every type: {rule}"
            );
        }
    }
}

/// `kubectl apply` of the HA overlay to a `serve` standing in for the cluster (enforcing RBAC,
/// as a cluster does), then the Deployment's command line as two replicas, each with a token of
/// the install's `ServiceAccount` `backflow` (what the pod's service account gives it) and its own
/// data dir and probe port, as two pods have: the CRDs come from the manifests, the install's
/// grants are enough for what the operator does (leading, labelling its Pod, Events), one
/// replica acts and the other stands by.
#[test]
fn the_ha_install_applies_and_its_replicas_take_turns() {
    let sandbox = Sandbox::new();
    let admin_token = sandbox.work.join("admin-token");
    std::fs::write(&admin_token, "install-test-admin-token").expect("write the admin token");
    let cluster = Server::start_with(
        &sandbox.data,
        Some(&sandbox.home),
        &[
            "--no-mirror",
            "--token-file",
            &admin_token.to_string_lossy(),
        ],
    );
    let kubeconfig = sandbox.data.join("kubeconfig");
    let (rendered, documents) = render(&sandbox, "overlays/ha");
    let file = sandbox.work.join("install.yaml");
    std::fs::write(&file, &rendered).expect("write the rendered install");
    let kubectl =
        |args: &[&str]| run_bounded("kubectl", sandbox.kubectl("kubectl", &kubeconfig, args));
    let applied = kubectl(&["apply", "-f", &file.to_string_lossy()]);
    assert_eq!(applied.code, Some(0), "{applied}");
    let got = kubectl(&[
        "get",
        "deployment",
        "backflow",
        "-n",
        "backflow-system",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(got.stdout, "2", "{got}");
    let container =
        &find(&documents, "Deployment", "backflow")["spec"]["template"]["spec"]["containers"][0];
    // Two processes on one machine: each its own data dir and probe port.
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| {
            !a.starts_with("--data-dir")
                && !a.starts_with("--metrics-bind-address")
                && !a.starts_with("--web-view-bind-address")
        })
        .map(str::to_string)
        .collect();
    assert!(args.iter().any(|a| a == "--install-crds=false"), "{args:?}");
    // Each replica's Pod, as the Deployment would make it (its name reaches the process through
    // the downward API: here, --pod-name).
    for name in ["first", "second"] {
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("backflow-{name}"),
                "namespace": "backflow-system",
                "labels": {"app.kubernetes.io/name": "backflow"},
            },
            "spec": {"containers": [{"name": "operator", "image": "backflow"}]},
        });
        let file = sandbox.work.join(format!("pod-{name}.json"));
        std::fs::write(&file, pod.to_string()).expect("write the Pod");
        let created = kubectl(&["create", "-f", &file.to_string_lossy()]);
        assert_eq!(created.code, Some(0), "{created}");
    }
    // The replicas act as the ServiceAccount, with only what base/rbac.yaml grants it.
    let token = kubectl(&[
        "create",
        "token",
        "backflow",
        "-n",
        "backflow-system",
        "--duration",
        "2h",
    ]);
    assert_eq!(token.code, Some(0), "{token}");
    let admin = std::fs::read_to_string(&kubeconfig).expect("read the kubeconfig");
    assert!(admin.contains("install-test-admin-token"), "{admin}");
    let as_service_account = sandbox.work.join("backflow-sa.kubeconfig");
    std::fs::write(
        &as_service_account,
        admin.replace("install-test-admin-token", token.stdout.trim()),
    )
    .expect("write the service account's kubeconfig");
    let start = |name: &str| {
        let data = format!("--data-dir={}", sandbox.work.join(name).display());
        let pod = format!("--pod-name=backflow-{name}");
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.push(&data);
        all.push(&pod);
        Operator::with_args(&sandbox, &as_service_account, &all)
    };
    // The Pods the receiver's Service selects: the acting replica's only.
    let receivers = || {
        kubectl(&[
            "get",
            "pods",
            "-n",
            "backflow-system",
            "-l",
            "app.kubernetes.io/name=backflow,backflow.dev/leader=true",
            "-o",
            "name",
        ])
        .stdout
    };
    let (first, first_probes) = start("first");
    wait_leading(&first_probes, "the first replica to lead");
    let (second, second_probes) = start("second");
    wait_standing_by(&second_probes, "the second replica to stand by, ready");
    let query = lease_field("holderIdentity");
    let holder = kubectl(&query.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!holder.stdout.is_empty(), "{holder}");
    assert_eq!(
        receivers().trim(),
        "pod/backflow-first",
        "the leader's Pod is labelled"
    );
    // The leadership is told as an Event, which the grants let it write.
    wait_for(
        "the LeaderElection Event",
        || kubectl(&["get", "events", "-n", "backflow-system"]).stdout,
        || {
            kubectl(&["get", "events", "-n", "backflow-system"])
                .stdout
                .contains("LeaderElection")
                .then_some(())
        },
    );
    // A clean stop hands over: the label goes with the Lease.
    drop(first);
    wait_leading(&second_probes, "the second replica to act");
    wait_for(
        "the receiver's Service to follow the leader",
        receivers,
        || (receivers().trim() == "pod/backflow-second").then_some(()),
    );
    drop(second);
    cluster.stop();
}

/// The metric families the Grafana dashboard's queries name (a counter's `_total` and a
/// histogram's `_bucket` are samples of the family).
fn dashboard_metrics() -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(deploy().join("grafana/backflow-dashboard.json"))
        .expect("the dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut names = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("a query");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("backflow_") {
                    let family = word
                        .strip_suffix("_total")
                        .or_else(|| word.strip_suffix("_bucket"))
                        .unwrap_or(word);
                    names.insert(family.to_string());
                }
            }
        }
    }
    assert!(names.len() >= 10, "{names:?}");
    names
}
