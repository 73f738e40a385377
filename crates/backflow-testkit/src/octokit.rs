//! GitHub's own webhook tooling, for tests of the push receiver: `@octokit/webhooks-methods`
//! signs bodies exactly as GitHub does, `@octokit/webhooks-examples` holds real delivery
//! payloads. `scripts/test.sh` installs both (npm); see [`crate::node`].

use std::io::Write;
use std::process::{Command, Stdio};

/// `sha256=<hex>`: `@octokit/webhooks-methods`' `sign(secret, body)`, the value GitHub puts in
/// `X-Hub-Signature-256`.
///
/// # Panics
/// When node cannot run or the package fails.
#[must_use]
pub fn sign(secret: &str, body: &[u8]) -> String {
    let script = "import { sign } from '@octokit/webhooks-methods'; \
        const chunks = []; process.stdin.on('data', d => chunks.push(d)); \
        process.stdin.on('end', async () => \
          process.stdout.write(await sign(process.env.SECRET, Buffer.concat(chunks).toString('utf8'))));";
    let mut child = Command::new("node")
        .args(["--input-type=module", "-e", script])
        .current_dir(crate::node::dir())
        .env("SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("node is needed to sign webhook bodies: {e}"));
    child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(body))
        .transpose()
        .unwrap_or_else(|e| panic!("writing to node: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    assert!(
        out.status.success(),
        "@octokit/webhooks-methods sign failed"
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Every example body of `event` (e.g. `push`) in `@octokit/webhooks-examples`.
///
/// # Panics
/// When the package's index cannot be read.
#[must_use]
pub fn examples(event: &str) -> Vec<serde_json::Value> {
    let index = crate::node::dir()
        .join("node_modules/@octokit/webhooks-examples/api.github.com/index.json");
    let text = std::fs::read_to_string(&index)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", index.display()));
    let all: Vec<serde_json::Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", index.display()));
    all.into_iter()
        .filter(|e| e["name"] == event)
        .flat_map(|e| e["examples"].as_array().cloned().unwrap_or_default())
        .collect()
}
