//! backflow's embedded Kubernetes-compatible API server.
//!
//! It is the live side backflow mirrors into Git: a durable store (redb) with one global
//! resourceVersion, watches that resume from a bounded history, discovery, CRUD, patches and
//! `CustomResourceDefinitions`, spoken over the Kubernetes REST protocol so kubectl and kube-rs
//! drive it unmodified. It knows nothing about Git.

pub mod apply;
pub mod builtin;
pub mod crd;
pub mod engine;
pub mod error;
pub mod http;
pub mod kubeconfig;
pub mod managed_fields;
pub mod object;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod publication;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod serve;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;

pub use engine::Engine;
pub use error::{ApiError, ApiResult};
pub use http::Extensions;
pub use serve::{InProcess, RunningServer, ServerConfig, StartError, start, start_with_clock};
pub use store::Store;
