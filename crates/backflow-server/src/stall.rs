//! What a connection may not do: hold the server without sending. A connection that sends no
//! byte is closed after the header-read timeout, as one that trickles its headers is (hyper
//! times headers only once their first byte came, and the HTTP/1-or-2 detection waits for that
//! byte); a request body that pauses that long is cut, its request answered as failed and the
//! connection closed (kube-apiserver ends such a request by its request timeout).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Whether `stream` sends its first byte within `limit` (false: it sent none, or closed).
pub(crate) async fn sends_within(stream: &TcpStream, limit: Duration) -> bool {
    let mut first = [0u8; 1];
    matches!(
        tokio::time::timeout(limit, stream.peek(&mut first)).await,
        Ok(Ok(n)) if n > 0
    )
}

/// `app` with every request body cut when it pauses longer than `limit`.
pub(crate) fn guard_bodies(app: axum::Router, limit: Duration) -> axum::Router {
    app.layer(tower::util::MapRequestLayer::new(
        move |req: http::Request<Body>| req.map(|body| Body::new(StallGuard::new(body, limit))),
    ))
}

/// Why a body was cut.
#[derive(Debug, thiserror::Error)]
#[error("the request body paused for more than {0:?}; the connection is closed")]
struct BodyStalled(Duration);

/// A request body that fails once no frame arrived for `limit`.
struct StallGuard {
    inner: Body,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl StallGuard {
    fn new(inner: Body, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }
}

impl HttpBody for StallGuard {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + self.limit;
                self.deadline.as_mut().reset(next);
                Poll::Ready(frame)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Some(Err(axum::Error::new(BodyStalled(self.limit)))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
