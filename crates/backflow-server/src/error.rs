//! API errors, answered as Kubernetes `Status` objects.
//!
//! Every failure a client can cause maps to the reason and code a real API server would use, so
//! kubectl and kube-rs print and classify it as they would against a cluster.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

/// One field-level problem inside an `Invalid` (422) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: &'static str,
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl Cause {
    /// A value that breaks a rule (`FieldValueInvalid`).
    pub fn invalid(field: impl Into<String>, value: &str, why: impl AsRef<str>) -> Self {
        Self::invalid_value(field, &json!(value), why)
    }

    /// A value that breaks a rule, shown as JSON (`FieldValueInvalid`).
    pub fn invalid_value(field: impl Into<String>, value: &Value, why: impl AsRef<str>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {}", why.as_ref()),
        }
    }

    /// A missing value (`FieldValueRequired`).
    pub fn required(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }

    /// A value over its size limit (`FieldValueTooLong`).
    pub fn too_long(field: impl Into<String>, limit: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be more than {limit} bytes"),
        }
    }

    /// A value that may not be changed or set (`FieldValueForbidden`).
    pub fn forbidden(field: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {}", why.into()),
        }
    }
}

/// An error answered to an API client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404: the object does not exist. `resource` is the plural (with group: `widgets.example.com`).
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// API group of the type (empty for the core group).
        group: String,
        /// Plural resource name (with its group when it has one).
        resource: String,
        /// Name of the object concerned.
        name: String,
    },
    /// 404: no such path or resource type.
    #[error("the server could not find the requested resource")]
    UnknownResource,
    /// 409: create of an existing name.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// API group of the type (empty for the core group).
        group: String,
        /// Plural resource name (with its group when it has one).
        resource: String,
        /// Name of the object concerned.
        name: String,
    },
    /// 409: stale resourceVersion or failed precondition.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// API group of the type (empty for the core group).
        group: String,
        /// Plural resource name (with its group when it has one).
        resource: String,
        /// Name of the object concerned.
        name: String,
        /// What went wrong, for a person.
        message: String,
    },
    /// 409: server-side apply found fields another manager owns; `message` lists them.
    #[error("{message}")]
    ApplyConflict {
        /// API group of the type (empty for the core group).
        group: String,
        /// Plural resource name (with its group when it has one).
        resource: String,
        /// Name of the object concerned.
        name: String,
        /// What went wrong, for a person.
        message: String,
        /// The fields at fault.
        causes: Vec<Cause>,
    },
    /// 422: the object breaks validation; `kind` is the Kind as kubectl prints it.
    #[error("{kind} \"{name}\" is invalid: {}", causes_text(.causes))]
    Invalid {
        /// API group of the type (empty for the core group).
        group: String,
        /// Kind of the object, as kubectl prints it.
        kind: String,
        /// Name of the object concerned.
        name: String,
        /// The fields at fault.
        causes: Vec<Cause>,
    },
    /// 400: the request itself is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 401: missing or wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403: the request is refused (e.g. a namespace being terminated).
    #[error("{0}")]
    Forbidden(String),
    /// 403: the authorizer refused the request; the Status's details name the resource and
    /// object asked for, as kube-apiserver's do.
    #[error("{message}")]
    Denied {
        /// API group of the resource asked for.
        group: String,
        /// Resource asked for, without its subresource (empty for a non-resource URL).
        resource: String,
        /// Name of the object asked for (empty when none was named).
        name: String,
        /// Why, worded as kube-apiserver words it.
        message: String,
    },
    /// 405: the verb is not allowed on this resource.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 406: the response format asked for is not served.
    #[error("{0}")]
    NotAcceptable(String),
    /// 413: the body exceeds the request size limit.
    #[error("the request is too large: {0}")]
    RequestEntityTooLarge(String),
    /// 415: the body's media type is not accepted here.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 410: a resourceVersion older than the history kept.
    #[error("{0}")]
    Expired(String),
    /// 504: a resourceVersion newer than the store's (kube-apiserver waits, then gives up).
    #[error("{0}")]
    Timeout(String),
    /// 500: the server failed; the message names what failed.
    #[error("{0}")]
    Internal(String),
    /// 503: the server is shutting down.
    #[error("{0}")]
    ServiceUnavailable(String),
}

fn causes_text(causes: &[Cause]) -> String {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ApiError {
    /// The HTTP status code of this error.
    #[must_use]
    pub fn code(&self) -> StatusCode {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => StatusCode::NOT_FOUND,
            Self::AlreadyExists { .. } | Self::Conflict { .. } | Self::ApplyConflict { .. } => {
                StatusCode::CONFLICT
            }
            Self::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::Denied { .. } => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::RequestEntityTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Expired(_) => StatusCode::GONE,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The `Status.reason` Kubernetes uses for this error.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } | Self::ApplyConflict { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden(_) | Self::Denied { .. } => "Forbidden",
            Self::MethodNotAllowed(_) => "MethodNotAllowed",
            Self::NotAcceptable(_) => "NotAcceptable",
            Self::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::Expired(_) => "Expired",
            Self::Timeout(_) => "Timeout",
            Self::Internal(_) => "InternalError",
            Self::ServiceUnavailable(_) => "ServiceUnavailable",
        }
    }

    /// A conflict on a stale resourceVersion, worded as the real API server words it.
    #[must_use]
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::Conflict {
            group: group.into(),
            resource: resource.into(),
            name: name.into(),
            message: "the object has been modified; please apply your changes to the latest version and try again"
                .into(),
        }
    }

    /// The `Status` object for this error.
    // Long on purpose: one arm per variant, so the mapping of every error to its Status
    // (reason, code, details) reads whole.
    #[must_use]
    pub fn to_status(&self) -> Value {
        let details = match self {
            Self::NotFound {
                group,
                resource,
                name,
            }
            | Self::AlreadyExists {
                group,
                resource,
                name,
            }
            | Self::Conflict {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = json!({"name": name, "kind": resource});
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            Self::ApplyConflict {
                group,
                resource,
                name,
                causes,
                ..
            } => {
                let mut d = json!({
                    "name": name,
                    "kind": resource,
                    "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>(),
                });
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            Self::Invalid {
                group,
                kind,
                name,
                causes,
            } => {
                let mut d = json!({
                    "name": name,
                    "kind": kind,
                    "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>(),
                });
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            Self::Denied {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = json!({});
                for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
                    if !value.is_empty() {
                        d[key] = json!(value);
                    }
                }
                Some(d)
            }
            _ => None,
        };
        let message = match self {
            Self::NotFound {
                group,
                resource,
                name,
            } if !group.is_empty() => {
                format!("{resource}.{group} \"{name}\" not found")
            }
            Self::AlreadyExists {
                group,
                resource,
                name,
            } if !group.is_empty() => {
                format!("{resource}.{group} \"{name}\" already exists")
            }
            Self::Conflict {
                group,
                resource,
                name,
                message,
            } if !group.is_empty() => {
                format!("Operation cannot be fulfilled on {resource}.{group} \"{name}\": {message}")
            }
            Self::Invalid {
                group,
                kind,
                name,
                causes,
            } if !group.is_empty() => {
                format!(
                    "{kind}.{group} \"{name}\" is invalid: {}",
                    causes_text(causes)
                )
            }
            other => other.to_string(),
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.to_status().to_string();
        let mut resp = (
            self.code(),
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

/// Result type of API operations.
pub type ApiResult<T> = Result<T, ApiError>;

/// The `Status` a successful delete answers when there is no object to return.
#[must_use]
pub fn success_status(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": resource, "uid": uid});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}
