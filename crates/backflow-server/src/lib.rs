//! backflow's embedded Kubernetes-compatible API server.
//!
//! It is the live side backflow mirrors into Git: a durable store (redb) with one global
//! resourceVersion, watches that resume from a bounded history, discovery, CRUD, patches and
//! `CustomResourceDefinitions`, spoken over the Kubernetes REST protocol so kubectl and kube-rs
//! drive it unmodified. It knows nothing about Git.

mod apply;
pub mod audit;
mod auth;
mod builtin;
mod cel_rules;
mod convert;
mod crd;
mod data_dir;
mod decode;
mod engine;
mod error;
mod http;
mod kubeconfig;
mod list;
mod managed_fields;
mod object;
mod openapi;
mod partial;
mod patch;
mod protobuf;
mod publication;
pub mod rbac;
mod registry;
mod schema;
mod selector;
mod serve;
mod service_account;
mod stall;
mod store;
mod table;
mod tls;
mod validation;

pub use auth::{ADMIN_USER, TokenFileError, Tokens, UserInfo};
pub use engine::Engine;
pub use error::{ApiError, ApiResult};
pub use http::Extensions;
pub use kubeconfig::render_for_certificate;
pub use serve::{
    AuthorizationMode, InProcess, Listener, RunningServer, ServerConfig, StartError,
    kubeconfig_path, start, start_with_clock,
};
pub use store::Store;
pub use tls::{
    ClientCertificate, TlsError, TlsMaterial, generated as generate_certificate,
    issue_client_certificate,
};
