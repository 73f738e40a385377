//! Real Git hosts over SSH: a real `sshd` serving bare repositories through `git-shell`, reached
//! with a deploy key from a Secret, its host key always checked.

use std::path::Path;

use backflow_testkit::ssh::{SshKey, SshServer};
use base64::Engine as _;

use crate::common::{World, run_bounded, wait_for};

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A bare repository `name` under `dir` with branch `main`.
fn bare(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut cmd = std::process::Command::new("git");
    cmd.args(["init", "-q", "--bare", "--initial-branch=main"])
        .arg(&path);
    let out = run_bounded("git init --bare", cmd);
    assert_eq!(out.code, Some(0), "{out}");
    path
}

/// The file `path` on `main` of the bare repository `repo`, if there.
fn show(repo: &Path, path: &str) -> Option<String> {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--git-dir")
        .arg(repo)
        .args(["show", &format!("main:{path}")]);
    let out = run_bounded("git show", cmd);
    (out.code == Some(0)).then_some(out.stdout)
}

/// The Secret, provider, target and rule of a folder `team/<name>` mirrored to `url`.
fn folder(name: &str, url: &str, secret_data: &[(&str, &str)]) -> String {
    let data: Vec<String> = secret_data
        .iter()
        .map(|(k, v)| format!("  {k}: {}\n", b64(v)))
        .collect();
    let data = data.concat();
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: {name}-ssh, namespace: team}}
data:
{data}---
apiVersion: backflow.dev/v1alpha1
kind: GitProvider
metadata: {{name: {name}, namespace: team}}
spec: {{url: "{url}", secretRef: {{name: {name}-ssh}}, push: {{commitWindow: 0s}}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: {name}, namespace: team}}
spec: {{providerRef: {{name: {name}}}, branch: main, path: {name}}}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: {name}, namespace: team}}
spec: {{targetRef: {{name: {name}}}, rules: [{{apiGroups: [""], resources: [configmaps]}}]}}
"#
    )
}

/// Waits until `GitProvider` team/`name` reports Ready=`status` with `reason`; returns the
/// message.
fn wait_provider(w: &World, name: &str, status: &str, reason: &str) -> String {
    wait_for(
        &format!("GitProvider team/{name} Ready={status} {reason}"),
        || w.get_json(&["gitprovider", name, "-n", "team"])["status"].to_string(),
        || {
            let provider = w.get_json(&["gitprovider", name, "-n", "team"]);
            let conditions = provider["status"]["conditions"].as_array()?.clone();
            let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
            (ready["status"] == status && ready["reason"] == reason)
                .then(|| ready["message"].as_str().unwrap_or_default().to_string())
        },
    )
}

#[test]
fn a_deploy_key_pushes_over_ssh_a_wrong_host_key_is_refused_and_a_rotated_key_is_taken() {
    let keys = tempfile::tempdir().unwrap();
    let deploy = SshKey::generate(keys.path(), "deploy", None);
    let rotated = SshKey::generate(keys.path(), "rotated", Some("correct horse"));
    let stranger = SshKey::generate(keys.path(), "stranger-host", None);
    let sshd = SshServer::start(&[&deploy]);
    let repos = tempfile::tempdir().unwrap();
    let good = bare(repos.path(), "config.git");
    let other = bare(repos.path(), "other.git");

    let w = World::start(&["--commit-window", "0s", "--no-apply"]);
    w.kubectl(&["create", "namespace", "team"]);
    let known_hosts = sshd.known_hosts();
    w.apply(&folder(
        "apps",
        &sshd.url(&good),
        &[
            ("identity", &deploy.private_text()),
            ("known_hosts", &known_hosts),
        ],
    ));
    w.kubectl(&[
        "create",
        "configmap",
        "one",
        "-n",
        "team",
        "--from-literal=k=1",
    ]);
    wait_for(
        "the ConfigMap pushed over SSH",
        || "nothing".to_string(),
        || show(&good, "apps/team/configmaps/one.yaml"),
    );
    wait_provider(&w, "apps", "True", "Succeeded");

    // A known_hosts that names another key for the host: refused, never accepted.
    let wrong_hosts = format!(
        "[127.0.0.1]:{} {}\n",
        sshd.port,
        stranger.public.rsplit_once(' ').map_or("", |(k, _)| k)
    );
    w.apply(&folder(
        "other",
        &sshd.url(&other),
        &[
            ("identity", &deploy.private_text()),
            ("known_hosts", &wrong_hosts),
        ],
    ));
    let message = wait_provider(&w, "other", "False", "HostKeyUnknown");
    assert!(message.contains("ost key"), "{message}");
    assert_eq!(show(&other, "other/team/configmaps/one.yaml"), None);
    // No known_hosts at all is said before anything is tried.
    w.apply(&folder(
        "other",
        &sshd.url(&other),
        &[("identity", &deploy.private_text())],
    ));
    let message = wait_provider(&w, "other", "False", "HostKeyUnknown");
    assert!(message.contains("known_hosts"), "{message}");

    // The host now lets in only the rotated key (with a passphrase): pushes fail…
    sshd.authorize(&[&rotated]);
    w.kubectl(&[
        "create",
        "configmap",
        "two",
        "-n",
        "team",
        "--from-literal=k=2",
    ]);
    let message = wait_provider(&w, "apps", "False", "AuthenticationFailed");
    assert!(
        message.to_lowercase().contains("permission denied"),
        "{message}"
    );
    // …until the Secret holds it: taken without a restart, and nothing was lost meanwhile.
    w.apply(&folder(
        "apps",
        &sshd.url(&good),
        &[
            ("identity", &rotated.private_text()),
            ("identity.passphrase", "correct horse"),
            ("known_hosts", &known_hosts),
        ],
    ));
    wait_for(
        "the ConfigMap made while the key was refused, pushed with the rotated key",
        || "nothing".to_string(),
        || show(&good, "apps/team/configmaps/two.yaml"),
    );
    wait_provider(&w, "apps", "True", "Succeeded");
}
