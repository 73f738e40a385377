//! Wiring of the push receiver: its listener, `serve`'s default receiver token and repository
//! hook, and the `push-notice` command that hook runs.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::SystemClock;
use backflow_apply::receiver::{
    ReceiverMetrics, RefUpdate, post_receive_script, sign_sha256, token_from, webhook_path,
};
use backflow_mirror::Mirror;
use backflow_server::{Listener, TlsMaterial};

/// A receiver serving on its own listener.
pub struct RunningReceiver {
    receiver: backflow_apply::receiver::Receiver,
    listener: Listener,
}

impl RunningReceiver {
    /// The URL deliveries go to, without the path.
    pub fn base_url(&self) -> String {
        let scheme = if self.listener.tls { "https" } else { "http" };
        let addr = self.listener.addr;
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else if addr.is_ipv6() {
            format!("[{}]", addr.ip())
        } else {
            addr.ip().to_string()
        };
        format!("{scheme}://{host}:{}", addr.port())
    }

    /// Whether deliveries can be posted in plain HTTP (the hook speaks nothing else).
    pub fn is_plain(&self) -> bool {
        !self.listener.tls
    }

    /// Stops the listener, then the receiver's tasks.
    pub async fn shutdown(self) {
        self.listener.shutdown().await;
        self.receiver.shutdown().await;
    }
}

/// Starts the receiver for `mirror`'s branches on `addr`, over TLS with `tls`.
pub async fn start(
    client: kube::Client,
    mirror: &Mirror,
    addr: SocketAddr,
    tls: Option<&TlsMaterial>,
) -> Result<RunningReceiver, String> {
    let metrics = mirror.register_metrics(ReceiverMetrics::register);
    let receiver = backflow_apply::receiver::Receiver::start(
        client,
        Arc::new(mirror.branches()),
        metrics,
        Arc::new(SystemClock),
    );
    let listener = Listener::bind(addr, receiver.router(), tls)
        .await
        .map_err(|e| format!("push receiver (--receiver-bind-address): {e}"))?;
    tracing::info!(addr = %listener.addr, tls = listener.tls, "push receiver listening");
    Ok(RunningReceiver { receiver, listener })
}

/// `<data-dir>/receiver-token`: the default `GitReceiver`'s secret, generated on first start
/// (mode 0600).
pub fn receiver_token(data_dir: &Path) -> Result<(PathBuf, String), String> {
    let path = data_dir.join("receiver-token");
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok((path, text.trim().to_string())),
        Ok(_) => Err(format!(
            "{} is empty; remove it to generate a new one",
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let bytes: [u8; 32] = rand::random();
            let token = token_from(&bytes);
            crate::write_private(&path, &format!("{token}\n"))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok((path, token))
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Installs the `post-receive` hook of `serve`'s own bare repository: every push to it is
/// posted, signed with the default receiver's token, to `receiver_url`.
pub fn install_hook(
    origin: &Path,
    repository_url: &str,
    receiver_url: &str,
    token: &str,
    token_file: &Path,
) -> Result<(), String> {
    let backflow = std::env::current_exe()
        .map_err(|e| format!("cannot find the backflow binary for the repository hook: {e}"))?;
    // Git runs the hook inside the repository: a path relative to where serve started (the
    // default `./backflow-data`) would name nothing there.
    let token_file = std::path::absolute(token_file)
        .map_err(|e| format!("cannot make {} absolute: {e}", token_file.display()))?;
    let path = webhook_path(
        token.as_bytes(),
        backflow_mirror::defaults::NAME,
        backflow_mirror::defaults::NAMESPACE,
    );
    let script = post_receive_script(
        &backflow,
        &format!("{receiver_url}{path}"),
        &token_file,
        repository_url,
    );
    let hooks = origin.join("hooks");
    std::fs::create_dir_all(&hooks)
        .map_err(|e| format!("cannot create {}: {e}", hooks.display()))?;
    let hook = hooks.join("post-receive");
    std::fs::write(&hook, script).map_err(|e| format!("cannot write {}: {e}", hook.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", hook.display()))?;
    }
    Ok(())
}

/// `backflow push-notice`: reads a `post-receive` hook's input and posts one signed delivery
/// per updated ref. Never fails: a notice that cannot be delivered is reported on stderr (the
/// pusher sees it as `remote:`) and the push is seen at the next refresh.
pub fn push_notice(url: &str, token_file: &Path, repository: &str) {
    let token = match std::fs::read_to_string(token_file) {
        Ok(t) => t.trim().to_string(),
        Err(e) => {
            eprintln!(
                "backflow: push notice not sent: cannot read {}: {e}",
                token_file.display()
            );
            return;
        }
    };
    let mut input = String::new();
    let _ = std::io::stdin().lock().read_to_string(&mut input);
    for update in input.lines().filter_map(RefUpdate::parse) {
        let body = update.body(repository);
        let signature = sign_sha256(token.as_bytes(), &body);
        if let Err(e) = post(url, &signature, &body) {
            eprintln!(
                "backflow: push notice for {} not delivered ({e}); backflow sees the push at its next refresh",
                update.name
            );
        }
    }
}

/// Why a notice was not delivered.
#[derive(Debug, thiserror::Error)]
enum PostError {
    #[error("only http:// receiver URLs are supported: {0}")]
    Scheme(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the receiver answered {0}")]
    Status(String),
}

/// POSTs `body` to a plain-HTTP `url` with a generic-hmac signature (2 s per step at most).
fn post(url: &str, signature: &str, body: &[u8]) -> Result<(), PostError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| PostError::Scheme(url.to_string()))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let timeout = Duration::from_secs(2);
    let addr = authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{authority} resolves to nothing")))?;
    let mut conn = TcpStream::connect_timeout(&addr, timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nX-Signature: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    let mut status = String::new();
    std::io::BufReader::new(conn).read_line(&mut status)?;
    let code = status.split_whitespace().nth(1).unwrap_or_default();
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(PostError::Status(status.trim().to_string()))
    }
}
