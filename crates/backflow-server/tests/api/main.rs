//! The API server driven by a real kube-rs client, in-process and over TCP: the behaviour kubectl
//! and controllers rely on (CRUD, CRDs, conflicts, watches, finalizers, selectors, pagination,
//! dry-run, error Status objects, authentication).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;
mod crud;
mod damaged_store;
mod errors;
mod faults;
mod listing;
mod security;
mod watch;
