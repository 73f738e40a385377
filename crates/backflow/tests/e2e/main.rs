//! The `backflow` binary end to end, in one test crate so the shared helpers compile once:
//! durability across SIGKILL and SIGTERM (`durability`), kubectl of every version on the
//! machine (`kubectl`), the mirror (`mirror`), secrets through the real `sops` (`secrets`), and
//! the operator against another API server (`operator`), push webhooks (`receiver`), Git → live
//! (`apply`) and its apply window (`window`), the held Flux and Argo CD appliers (`flux`, `argo`)
//! and the scenarios every applier passes (`drivers`), clients people use (`clients`), and
//! commits authored by the users who made the changes (`authorship`), and what Git holds that
//! the live side lacks when backflow starts (`restart`), and what a push may not do
//! (`push_guard`), the install's manifests (`install`), and what the command writes for people and programs (`cli`).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod apply;
mod argo;
mod audit;
mod authorship;
mod both_sides;
mod cli;
mod clients;
mod common;
mod drivers;
mod durability;
mod face;
mod flux;
mod install;
mod kubectl;
mod kustomize;
mod mirror;
mod operator;
mod push_guard;
mod rbac;
mod receiver;
mod restart;
mod secrets;
mod ssh;
mod status;
mod web;
mod window;
