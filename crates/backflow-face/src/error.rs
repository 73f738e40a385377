//! What can go wrong answering a person, as the API answers it (a Kubernetes `Status`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why the face could not answer.
#[derive(Debug, thiserror::Error)]
pub enum FaceError {
    /// The request does not name what it must.
    #[error("{0}")]
    BadRequest(String),
    /// What it names does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The API could not be read.
    #[error("the API could not be read: {0}")]
    Api(#[from] kube::Error),
    /// The configuration could not be listed.
    #[error("{0}")]
    Listing(String),
    /// A branch's history or folder could not be read.
    #[error("Git could not be read: {0}")]
    Git(String),
}

impl FaceError {
    pub(crate) fn status(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "NotFound"),
            Self::Api(_) | Self::Git(_) | Self::Listing(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable")
            }
        }
    }
}

impl IntoResponse for FaceError {
    fn into_response(self) -> Response {
        let (code, reason) = self.status();
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.to_string(), "reason": reason,
            "code": code.as_u16(),
        });
        (code, axum::Json(body)).into_response()
    }
}
