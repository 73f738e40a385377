//! The decoder must return a value or an error for any input, never panic.
//!
//! The identity is fixed so that inputs derived from a file encrypted to it (see the seed in
//! `corpus/decode/`) get past the key unwrapping into value decryption and MAC checks.
#![no_main]

use std::sync::LazyLock;

use backflow_sops::{Identity, decrypt_document};
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;

static IDENTITY: LazyLock<Identity> =
    LazyLock::new(|| Identity::generate(&mut rand::rngs::StdRng::seed_from_u64(0)));

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = decrypt_document(&text, std::slice::from_ref(&IDENTITY));
});
