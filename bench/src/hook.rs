//! The push receiver as `serve` runs it, in process, and the notice `serve`'s post-receive hook
//! posts to it: what the `push-notice` and `foreign-push` scenarios drive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backflow_api::SystemClock;
use backflow_apply::receiver::{Receiver, ReceiverMetrics, sign_sha256, webhook_path};
use backflow_server::Listener;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::json;

use crate::client::Conn;
use crate::git::{BRANCH, path_str};
use crate::live::Live;

/// The default receiver's token in the benchmarks (`Live::start_mirror_with`).
pub const TOKEN: &str = "bench-receiver-token";

/// A receiver listening on loopback, and a connection posting to it as the hook does.
pub struct HookReceiver {
    receiver: Receiver,
    listener: Listener,
    conn: Conn,
    path: String,
    repository: String,
}

impl HookReceiver {
    /// Starts the receiver for `live`'s mirror (started with [`TOKEN`]) and waits until its
    /// controller serves the default receiver's path.
    pub async fn start(live: &Live) -> Result<Self, String> {
        let mirror = live.mirror().ok_or("the mirror is not running")?;
        let metrics = mirror.register_metrics(ReceiverMetrics::register);
        let receiver = Receiver::start(
            live.client(),
            Arc::new(mirror.branches()),
            metrics,
            Arc::new(SystemClock),
        );
        let listener = Listener::bind(([127, 0, 0, 1], 0).into(), receiver.router(), None)
            .await
            .map_err(|e| e.to_string())?;
        let conn = Conn::open(listener.addr).await?;
        let path = webhook_path(
            TOKEN.as_bytes(),
            backflow_mirror::defaults::NAME,
            backflow_mirror::defaults::NAMESPACE,
        );
        let repository = format!("file://{}", path_str(&live.remote)?);
        let mut hook = Self {
            receiver,
            listener,
            conn,
            path,
            repository,
        };
        let t0 = Instant::now();
        while hook.post(b"{}".to_vec()).await? == StatusCode::NOT_FOUND {
            if t0.elapsed() > Duration::from_secs(30) {
                return Err("the receiver never served its path".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(hook)
    }

    async fn post(&mut self, body: Vec<u8>) -> Result<StatusCode, String> {
        let signature = sign_sha256(TOKEN.as_bytes(), &body);
        let (status, _, _) = self
            .conn
            .send_with(
                Method::POST,
                &self.path,
                "application/json",
                &[("x-signature", &signature)],
                Bytes::from(body),
            )
            .await?;
        Ok(status)
    }

    /// Posts the notice `serve`'s hook posts for a push of `sha` to the branch.
    pub async fn notify(&mut self, sha: &str) -> Result<(), String> {
        let body = json!({"ref": format!("refs/heads/{BRANCH}"), "after": sha,
                          "repository": {"clone_url": self.repository}});
        match self.post(body.to_string().into_bytes()).await? {
            StatusCode::ACCEPTED => Ok(()),
            status => Err(format!("the receiver answered {status}")),
        }
    }

    /// Stops the listener and the receiver.
    pub async fn stop(self) {
        self.listener.shutdown().await;
        self.receiver.shutdown().await;
    }
}
