//! Tests of the SOPS codec: conformance with the real `sops` and `age` programs in both
//! directions, tamper detection, stable re-encryption, and a decoder that never panics.

mod codec;
mod decoder_noise;
mod interop;
mod property;
mod support;
