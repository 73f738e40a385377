//! What operators watch: `/healthz`, `/readyz` and `/metrics` on `--metrics-bind-address`, as
//! controller-runtime serves them (`:8080` in the install's Deployment).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use backflow_leader::Leadership;
use tokio::sync::watch;

/// Renders metrics as `OpenMetrics` text.
pub(crate) type Renderer = Arc<dyn Fn() -> String + Send + Sync>;

/// What the endpoints read: where this replica stands, and the running mirror's metrics.
#[derive(Clone)]
pub(crate) struct Health {
    leadership: Option<watch::Receiver<Leadership>>,
    metrics: Arc<Mutex<Option<Renderer>>>,
}

impl Health {
    /// Endpoints for a replica in an election (`leadership`), or acting alone (`None`).
    pub(crate) fn new(leadership: Option<watch::Receiver<Leadership>>) -> Self {
        Self {
            leadership,
            metrics: Arc::default(),
        }
    }

    /// The mirror started (this replica leads): `/metrics` renders its metrics from now on.
    pub(crate) fn serve_metrics(&self, renderer: Renderer) {
        *self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(renderer);
    }

    pub(crate) fn router(self) -> Router {
        let ready = self.clone();
        let metrics = self.clone();
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/livez", get(|| async { "ok" }))
            .route("/readyz", get(move || async move { ready.readiness() }))
            .route("/metrics", get(move || async move { metrics.metrics() }))
    }

    /// Ready when it leads or stands by; not when it lost the Lease (it is about to exit).
    fn readiness(&self) -> Response {
        let standing = self.leadership.as_ref().map(|l| l.borrow().clone());
        match standing {
            None | Some(Leadership::Leading) => (StatusCode::OK, "ok: acting").into_response(),
            Some(Leadership::Following { holder }) => (
                StatusCode::OK,
                format!(
                    "ok: standing by ({} holds the Lease)",
                    holder.as_deref().unwrap_or("nobody yet")
                ),
            )
                .into_response(),
            Some(Leadership::Lost(why)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("lost the Lease: {why}"),
            )
                .into_response(),
        }
    }

    /// The mirror's metrics (when it runs), and `backflow_leader`.
    fn metrics(&self) -> Response {
        let leading = match self.leadership.as_ref().map(|l| l.borrow().clone()) {
            None | Some(Leadership::Leading) => 1,
            Some(_) => 0,
        };
        let renderer = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let body = renderer.map(|r| r()).unwrap_or_default();
        let body = body.strip_suffix("# EOF\n").unwrap_or(&body).to_string();
        let text = format!(
            "{body}# HELP backflow_leader Whether this replica acts (holds the Lease, or runs alone): 1, or stands by: 0.\n# TYPE backflow_leader gauge\nbackflow_leader {leading}\n# EOF\n"
        );
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response()
    }
}
