//! The decoder on hostile input: random bytes and mutated real files must produce an error or
//! a value, never a panic. The cargo-fuzz target (`fuzz/`) explores further; this keeps CI
//! covering the same entry point without it.

use backflow_sops::{Rules, decrypt_document};
use rand::{Rng, RngCore};
use serde_json::Value;

use crate::interop::rich_secret;
use crate::support::{encrypt, identity, rng};

#[test]
fn random_bytes_never_panic() {
    let (_, _, id) = identity(40);
    let ids = std::slice::from_ref(&id);
    let mut r = rng(41);
    for _ in 0..3000 {
        let len = r.random_range(0..512);
        let mut bytes = vec![0u8; len];
        r.fill_bytes(&mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        let _ = decrypt_document(&text, ids);
    }
}

#[test]
fn mutated_files_never_panic_and_never_pass_as_other_content() {
    let (_, recipient, id) = identity(42);
    let ids = std::slice::from_ref(&id);
    let plain = rich_secret();
    let file = encrypt(&[&recipient], &plain, &Rules::default(), None);
    let alphabet = b"AZaz09+/=:,[]{}\"' \n-#&*!|>ENCsop";
    let mut r = rng(43);
    for _ in 0..1500 {
        let mut bytes = file.clone().into_bytes();
        for _ in 0..r.random_range(1..4) {
            let at = r.random_range(0..bytes.len());
            match r.random_range(0..3) {
                0 => bytes[at] = alphabet[r.random_range(0..alphabet.len())],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        // Either refused, or the values (what the MAC covers) are the original ones. Keys
        // above unencrypted values are not authenticated in the SOPS format, so a mutation
        // may rename those; it can never change, add or remove a value.
        if let Ok(value) = decrypt_document(&text, ids) {
            assert_eq!(
                leaves(&value),
                leaves(&plain),
                "a value changed undetected:\n{text}"
            );
        }
    }
}

/// The non-null leaves in document order, as the MAC sees them.
fn leaves(value: &Value) -> Vec<Value> {
    match value {
        Value::Null => vec![],
        Value::Array(items) => items.iter().flat_map(leaves).collect(),
        Value::Object(map) => map.values().flat_map(leaves).collect(),
        leaf => vec![leaf.clone()],
    }
}

/// The fuzz target's identity (seed 0) and its seed file, kept in step with the codec: rewrite
/// the seed with `BACKFLOW_WRITE_FUZZ_SEED=1`.
#[test]
fn fuzz_seed_decrypts_with_the_fuzz_identity() {
    let id = backflow_sops::Identity::generate(&mut rng(0));
    let seed_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/corpus/decode/seed-secret.yaml"
    );
    if std::env::var_os("BACKFLOW_WRITE_FUZZ_SEED").is_some() {
        let recipient = id.recipient().to_string();
        let file = encrypt(&[&recipient], &rich_secret(), &Rules::default(), None);
        std::fs::write(seed_path, file).expect("write the fuzz seed");
    }
    let seed = std::fs::read_to_string(seed_path).expect("the fuzz seed exists");
    assert_eq!(
        decrypt_document(&seed, std::slice::from_ref(&id)).unwrap(),
        rich_secret()
    );
    // The other seeds were written by the real sops (default rule, `unencrypted_regex`) to the
    // same identity, so the fuzzer starts from sops' own layout too.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/decode");
    let mut sops_seeds = 0;
    for entry in std::fs::read_dir(dir).expect("the seed folder") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if !name.starts_with("seed-sops-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a seed");
        let plain = decrypt_document(&text, std::slice::from_ref(&id))
            .unwrap_or_else(|e| panic!("{name} does not decrypt: {e}"));
        assert_eq!(plain["spec"]["password"], "hunter2", "{name}");
        sops_seeds += 1;
    }
    assert_eq!(sops_seeds, 2, "both sops-written seeds are checked");
}
