//! A minimal HTTP/1.1 client over one kept-alive connection, so client overhead stays small and
//! identical for backflow and its baselines.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// One connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Opens a connection to `addr`.
    pub async fn open(addr: SocketAddr) -> Result<Self, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self {
            sender,
            host: addr.to_string(),
        })
    }

    /// Sends a request and reads the whole answer.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), String> {
        let (status, _, body) = self
            .send_with(method, path, content_type, &[], body)
            .await?;
        Ok((status, body))
    }

    /// Sends a request with extra headers and reads the whole answer, headers included.
    pub async fn send_with(
        &mut self,
        method: Method,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Bytes), String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.host)
            .header(http::header::CONTENT_TYPE, content_type);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, headers, body))
    }

    /// Opens a streaming GET (a watch) and returns its body.
    pub async fn stream(mut self, path: &str) -> Result<hyper::body::Incoming, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(http::header::HOST, &self.host)
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        if resp.status() != StatusCode::OK {
            return Err(format!("watch answered {}", resp.status()));
        }
        Ok(resp.into_body())
    }
}
