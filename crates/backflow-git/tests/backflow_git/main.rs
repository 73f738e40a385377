//! Tests of the publication engine against real remotes: bare repositories over `file://`,
//! smart HTTP through `git http-backend`, and foreign writers using the `git` program.

mod concurrent;
mod driver;
mod http;
mod outage;
mod property;
mod recovery;
mod support;
mod worker;
