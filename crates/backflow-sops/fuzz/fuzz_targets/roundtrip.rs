//! Any document backflow encrypts decrypts back to itself, and re-encrypting it over its own file
//! reproduces the file byte for byte. Keys and strings are arbitrary, so this explores the YAML
//! emitter's quoting as much as the codec.
#![no_main]

use std::sync::LazyLock;
use std::time::{Duration, UNIX_EPOCH};

use arbitrary::{Result, Unstructured};
use backflow_sops::{Encryptor, Identity, Rules, decrypt_document};
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use serde_json::{Map, Value};

static IDENTITY: LazyLock<Identity> =
    LazyLock::new(|| Identity::generate(&mut rand::rngs::StdRng::seed_from_u64(0)));

static ENCRYPTOR: LazyLock<Encryptor> = LazyLock::new(|| {
    Encryptor::new([IDENTITY.recipient().to_string()])
        .expect("the identity's own recipient")
        .with_identities(vec![IDENTITY.clone()])
});

fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let choices = if depth == 0 { 5 } else { 7 };
    Ok(match u.int_in_range(0..=choices - 1)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => {
            let f: f64 = u.arbitrary()?;
            // JSON has no NaN or infinity.
            if f.is_finite() { Value::from(f) } else { Value::from(0.5) }
        }
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=4)?;
            Value::Array((0..n).map(|_| value(u, depth - 1)).collect::<Result<_>>()?)
        }
        _ => Value::Object(map(u, depth - 1)?),
    })
}

fn map(u: &mut Unstructured<'_>, depth: u32) -> Result<Map<String, Value>> {
    let n = u.int_in_range(0..=4)?;
    let mut m = Map::new();
    for _ in 0..n {
        let key: String = u.arbitrary()?;
        m.insert(key, value(u, depth)?);
    }
    Ok(m)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(mut doc) = map(&mut u, 3) else { return };
    // `sops` is the metadata key: refused on input by design.
    doc.remove("sops");
    let rules = match u.int_in_range(0..=2).unwrap_or(0) {
        0 => Rules::default(),
        1 => Rules::encrypt_all_but(&doc, &["apiVersion", "kind", "metadata"]).unwrap_or_default(),
        _ => Rules::UnencryptedSuffix("_unencrypted".to_owned()),
    };
    let doc = Value::Object(doc);
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let file = ENCRYPTOR
        .encrypt_document(&doc, &rules, None, now, &mut rng)
        .expect("every mapping without a `sops` key encrypts");
    let back = decrypt_document(&file, std::slice::from_ref(&*IDENTITY))
        .unwrap_or_else(|e| panic!("our own file does not decrypt: {e}\n{file}"));
    assert_eq!(back, doc, "round trip changed the document:\n{file}");
    let again = ENCRYPTOR
        .encrypt_document(&doc, &rules, Some(&file), now + Duration::from_secs(60), &mut rng)
        .expect("re-encrypts");
    assert_eq!(again, file, "an unchanged document changed its file");
});
