//! The `git` program behind the same trait: SSH with a key and `known_hosts`, HTTPS with a
//! bearer token or a CA of its own, and anything else libgit2 cannot do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use git2::Oid;

use super::{
    Credentials, ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteErrorKind, RemoteOp,
};
use crate::repo::{LocalRepo, strip_credentials, tracking_ref};

/// A remote served by running `git`.
///
/// Credentials never appear on a command line: HTTP basic and bearer authentication are passed
/// as an `http.extraHeader` through `GIT_CONFIG_*` variables (a CA file as `GIT_SSL_CAINFO`), an SSH key through `GIT_SSH_COMMAND` with `StrictHostKeyChecking=yes` against the
/// configured `known_hosts`. Proxies come from the usual `https_proxy`/`http_proxy`/`no_proxy`
/// variables, which `git` reads itself.
pub struct CliRemote {
    url: String,
    display: String,
    credentials: Credentials,
    ca_file: Option<PathBuf>,
    program: String,
}

impl CliRemote {
    /// A remote at `url` using the `git` found on `PATH`.
    #[must_use]
    pub fn new(url: &str, credentials: Credentials) -> Self {
        Self {
            url: url.to_string(),
            display: strip_credentials(url),
            credentials,
            ca_file: None,
            program: "git".into(),
        }
    }

    /// The same remote, trusting only the CA certificates in `ca_file` (PEM) for HTTPS.
    #[must_use]
    pub fn with_ca_file(mut self, ca_file: Option<PathBuf>) -> Self {
        self.ca_file = ca_file;
        self
    }

    fn command(&self, repo: &LocalRepo) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--git-dir").arg(repo.path());
        cmd.stdin(Stdio::null());
        // Never wait for a password prompt; messages in English so they can be classified.
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        // Configuration through the environment, never on the command line (where `ps` shows it).
        let mut config: Vec<(&str, String)> = Vec::new();
        if let Some(ca) = &self.ca_file {
            // The variable, not `http.sslCAInfo`: a GIT_SSL_CAINFO in backflow's environment
            // would win over the configuration.
            cmd.env("GIT_SSL_CAINFO", ca);
        }
        match &self.credentials {
            Credentials::None => {}
            Credentials::Basic { username, password } => {
                let token = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                config.push(("http.extraHeader", format!("Authorization: Basic {token}")));
            }
            Credentials::Bearer { token } => {
                config.push(("http.extraHeader", format!("Authorization: Bearer {token}")));
            }
            Credentials::SshKey {
                private_key,
                known_hosts,
                passphrase_file,
            } => ssh_command(
                &mut cmd,
                private_key,
                known_hosts,
                passphrase_file.as_deref(),
            ),
        }
        cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
        for (i, (key, value)) in config.into_iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        cmd
    }

    fn run(&self, op: RemoteOp, mut cmd: Command) -> Result<Output, RemoteError> {
        cmd.output().map_err(|e| {
            RemoteError::new(
                op,
                &self.display,
                RemoteErrorKind::Local,
                format!("running {}: {e}", self.program),
            )
        })
    }

    fn failure(&self, op: RemoteOp, out: &Output) -> RemoteError {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let lower = stderr.to_ascii_lowercase();
        let kind = if lower.contains("host key verification failed")
            || lower.contains("host key is known")
            || lower.contains("remote host identification has changed")
        {
            RemoteErrorKind::HostKey
        } else if lower.contains("authentication")
            || lower.contains("could not read username")
            || lower.contains("permission denied")
        {
            RemoteErrorKind::Auth
        } else {
            RemoteErrorKind::Unreachable
        };
        RemoteError::new(op, &self.display, kind, stderr)
    }
}

/// Points `git` at `ssh` with this key, checking the host's key strictly against
/// `known_hosts`, and never asking anything but the key's passphrase (from `passphrase_file`,
/// through an askpass script, so it never appears on a command line).
fn ssh_command(
    cmd: &mut Command,
    private_key: &Path,
    known_hosts: &Path,
    passphrase_file: Option<&Path>,
) {
    let mut ssh = format!(
        "ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={} -o GlobalKnownHostsFile=/dev/null -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no",
        shell_quote(private_key),
        shell_quote(known_hosts)
    );
    match passphrase_file {
        Some(file) => {
            cmd.env("SSH_ASKPASS", askpass_script(file))
                .env("SSH_ASKPASS_REQUIRE", "force");
        }
        None => ssh.push_str(" -o BatchMode=yes"),
    }
    cmd.env("GIT_SSH_COMMAND", ssh);
}

/// A script next to `passphrase_file` that prints it, for `SSH_ASKPASS`; written (owner only)
/// when missing.
fn askpass_script(passphrase_file: &Path) -> PathBuf {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    let script = passphrase_file.with_extension("askpass");
    let text = format!("#!/bin/sh\nexec cat {}\n", shell_quote(passphrase_file));
    if std::fs::read_to_string(&script).is_ok_and(|t| t == text) {
        return script;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o700);
    let written = opts
        .open(&script)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        // ssh then fails to read the passphrase, which the fetch reports.
        tracing::warn!(script = %script.display(), error = %e, "cannot write the SSH askpass script");
    }
    script
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

impl GitRemote for CliRemote {
    fn display_url(&self) -> &str {
        &self.display
    }

    fn ls_remote(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let op = RemoteOp::LsRemote;
        let name = format!("refs/heads/{branch}");
        let mut cmd = self.command(repo);
        cmd.args(["ls-remote", "--", &self.url, &name]);
        let out = self.run(op, cmd)?;
        if !out.status.success() {
            return Err(self.failure(op, &out));
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some((oid, refname)) = line.split_once('\t')
                && refname == name
            {
                return Oid::from_str(oid).map(Some).map_err(|e| {
                    RemoteError::new(
                        op,
                        &self.display,
                        RemoteErrorKind::Protocol,
                        format!("bad oid {oid:?}: {e}"),
                    )
                });
            }
        }
        Ok(None)
    }

    fn fetch(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let op = RemoteOp::Fetch;
        let Some(advertised) = self.ls_remote(repo, branch)? else {
            repo.remove_ref(&tracking_ref(branch))
                .map_err(|e| RemoteError::local(op, &self.display, &e))?;
            return Ok(None);
        };
        let local_err = |e: crate::error::RepoError| RemoteError::local(op, &self.display, &e);
        if repo.has_object(advertised) {
            repo.set_ref(&tracking_ref(branch), advertised)
                .map_err(local_err)?;
            return Ok(Some(advertised));
        }
        let spec = format!("+refs/heads/{branch}:{}", tracking_ref(branch));
        let mut cmd = self.command(repo);
        cmd.args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            &self.url,
            &spec,
        ]);
        let out = self.run(op, cmd)?;
        if !out.status.success() {
            return Err(self.failure(op, &out));
        }
        repo.read_ref(&tracking_ref(branch)).map_err(local_err)
    }

    fn push(
        &mut self,
        repo: &LocalRepo,
        branch: &str,
        new: Oid,
        expected: ExpectedTip,
    ) -> Result<PushOutcome, RemoteError> {
        let op = RemoteOp::Push;
        let dst = format!("refs/heads/{branch}");
        // An empty expectation means "must not exist yet".
        let lease = format!(
            "--force-with-lease={dst}:{}",
            expected.oid().map(|o| o.to_string()).unwrap_or_default()
        );
        let mut cmd = self.command(repo);
        cmd.args([
            "push",
            "--porcelain",
            "--no-verify",
            &lease,
            "--",
            &self.url,
            &format!("{new}:{dst}"),
        ]);
        let out = self.run(op, cmd)?;
        // Porcelain lines are "<flag>\t<from>:<to>\t<summary>"; only our ref's line decides.
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut parts = line.splitn(3, '\t');
            let (Some(flag), Some(refs), summary) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !refs.ends_with(&format!(":{dst}")) {
                continue;
            }
            return Ok(match flag {
                "!" => PushOutcome::Rejected {
                    reason: summary.unwrap_or("rejected").to_string(),
                },
                " " | "+" | "*" | "=" => PushOutcome::Accepted,
                other => {
                    return Err(RemoteError::new(
                        op,
                        &self.display,
                        RemoteErrorKind::Protocol,
                        format!("unknown push status {other:?}: {line}"),
                    ));
                }
            });
        }
        Err(self.failure(op, &out))
    }
}
