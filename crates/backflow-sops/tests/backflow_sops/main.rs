//! Tests of the SOPS codec: conformance with the real `sops` and `age` programs in both
//! directions, tamper detection, stable re-encryption, and a decoder that never panics.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod codec;
mod decoder_noise;
mod interop;
mod property;
mod support;
