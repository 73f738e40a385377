//! A real OpenSSH server on loopback serving bare repositories through `git-shell`, as a Git host
//! serves deploy keys: its own host key, only the keys it is told to let in, nothing but Git.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `sshd` (Debian's openssh-server), started on a free loopback port with a configuration and
/// host key of its own, stopped by its own PID when dropped.
pub struct SshServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The user keys log in as (the one running the tests).
    pub user: String,
    dir: tempfile::TempDir,
    child: Child,
}

/// An SSH key pair made by `ssh-keygen`.
pub struct SshKey {
    /// The private key file (OpenSSH format).
    pub private: PathBuf,
    /// The public key line (`ssh-ed25519 AAAA… comment`).
    pub public: String,
}

impl SshKey {
    /// A new ed25519 key in `dir/name`, encrypted with `passphrase` when given.
    #[must_use]
    pub fn generate(dir: &Path, name: &str, passphrase: Option<&str>) -> Self {
        let private = dir.join(name);
        let status = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-C",
                name,
                "-N",
                passphrase.unwrap_or(""),
                "-f",
            ])
            .arg(&private)
            .stdin(Stdio::null())
            .status()
            .expect("run ssh-keygen (openssh-client)");
        assert!(status.success(), "ssh-keygen failed for {name}");
        let public = std::fs::read_to_string(private.with_extension("pub"))
            .expect("read the public key")
            .trim()
            .to_string();
        Self { private, public }
    }

    /// The private key's text.
    #[must_use]
    pub fn private_text(&self) -> String {
        std::fs::read_to_string(&self.private).expect("read the private key")
    }
}

fn sshd() -> PathBuf {
    let path = PathBuf::from("/usr/sbin/sshd");
    assert!(
        path.exists(),
        "the SSH tests need a real sshd: install openssh-server (apt-get install -y openssh-server)"
    );
    path
}

impl SshServer {
    /// Starts `sshd` letting in `authorized` keys (each limited to `git-shell`).
    #[must_use]
    pub fn start(authorized: &[&SshKey]) -> Self {
        let dir = tempfile::tempdir().expect("sshd dir");
        let host_key = SshKey::generate(dir.path(), "host_key", None);
        let port = free_port();
        let user = whoami();
        // Privilege separation needs its directory when sshd runs as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\nAuthorizedKeysFile {keys}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowUsers {user}\nLogLevel ERROR\n",
                host = host_key.private.display(),
                pid = dir.path().join("sshd.pid").display(),
                keys = dir.path().join("authorized_keys").display(),
            ),
        )
        .expect("write sshd_config");
        let server = Self {
            port,
            user,
            child: Command::new(sshd())
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start sshd"),
            dir,
        };
        server.authorize(authorized);
        server.wait_listening();
        server
    }

    /// Lets in exactly `keys` from now on (each limited to `git-shell`), as a host's deploy-key
    /// settings do; a key left out is refused.
    pub fn authorize(&self, keys: &[&SshKey]) {
        let restrictions = "command=\"git-shell -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty";
        let lines: String = keys
            .iter()
            .flat_map(|k| [restrictions, " ", k.public.as_str(), "\n"])
            .collect();
        std::fs::write(self.dir.path().join("authorized_keys"), lines).expect("authorized_keys");
    }

    /// The `known_hosts` line of this server's host key.
    #[must_use]
    pub fn known_hosts(&self) -> String {
        let public =
            std::fs::read_to_string(self.dir.path().join("host_key.pub")).expect("host key");
        let mut fields = public.split_whitespace();
        let (kind, key) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        format!("[127.0.0.1]:{} {kind} {key}\n", self.port)
    }

    /// The `ssh://` URL of the repository at `path` (absolute) on this server.
    #[must_use]
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
