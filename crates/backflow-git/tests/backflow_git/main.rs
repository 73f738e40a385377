//! Tests of the publication engine against real remotes: bare repositories over `file://`,
//! smart HTTP through `git http-backend`, and foreign writers using the `git` program.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
#![allow(
    clippy::ref_option,
    reason = "fixtures pass optional file contents by reference"
)]

mod concurrent;
mod driver;
mod http;
mod outage;
mod property;
mod recovery;
mod support;
mod worker;
