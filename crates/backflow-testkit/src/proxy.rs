//! An HTTP forward proxy on loopback, as a corporate proxy in front of a Git host: it takes
//! absolute-form requests (`GET http://host:port/path HTTP/1.1`), connects to that host, and
//! relays the connection. It counts the connections it relayed, so a test can tell the proxy was
//! used.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// A running forward proxy.
pub struct ForwardProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    relayed: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl ForwardProxy {
    /// Starts the proxy on a free loopback port.
    #[must_use]
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("addr");
        let relayed = Arc::new(AtomicUsize::new(0));
        let counter = relayed.clone();
        runtime.spawn(async move {
            let listener = TcpListener::from_std(std_listener).expect("listener");
            while let Ok((client, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(relay(client, counter));
            }
        });
        Self {
            addr,
            relayed,
            runtime: Some(runtime),
        }
    }

    /// The URL to put in `http_proxy`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections it relayed to a host.
    #[must_use]
    pub fn relayed(&self) -> usize {
        self.relayed.load(Ordering::SeqCst)
    }
}

/// Reads the first request's head, connects to the host its absolute URI names (counting it in
/// `relayed`), sends the head on in origin form, then copies both ways. `None` when the request
/// was not one to relay.
async fn relay(mut client: TcpStream, relayed: Arc<AtomicUsize>) -> Option<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await.ok()? == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let (line, rest) = text.split_once("\r\n")?;
    let mut parts = line.splitn(3, ' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let after_scheme = target.strip_prefix("http://")?;
    let (authority, path) = match after_scheme.find('/') {
        Some(at) => after_scheme.split_at(at),
        None => (after_scheme, "/"),
    };
    let mut upstream = TcpStream::connect(authority).await.ok()?;
    relayed.fetch_add(1, Ordering::SeqCst);
    let forwarded = format!("{method} {path} {version}\r\n{rest}");
    upstream.write_all(forwarded.as_bytes()).await.ok()?;
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    Some(())
}
