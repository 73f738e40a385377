//! Round trips over generated documents.

use backflow_sops::{Encryptor, Rules, decrypt_document};
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::support::{identity, rng, t0};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Finite floats only: JSON has no NaN or infinity.
        (-1e15f64..1e15).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[a-z0-9 :#\\-\"'\\n]{0,12}".prop_map(Value::String),
    ]
}

fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn document() -> impl Strategy<Value = Value> {
    (tree(), tree(), any::<String>()).prop_map(|(data, meta, name)| {
        let mut doc = Map::new();
        doc.insert(
            "metadata".to_owned(),
            serde_json::json!({ "name": name, "x": meta }),
        );
        doc.insert("data".to_owned(), data);
        Value::Object(doc)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn encrypt_then_decrypt_is_identity(doc in document(), seed in any::<u64>()) {
        let (_, recipient, id) = identity(50);
        let e = Encryptor::new([&recipient]).unwrap();
        let file = e.encrypt_document(&doc, &Rules::default(), None, t0(), &mut rng(seed)).unwrap();
        prop_assert_eq!(&decrypt_document(&file, std::slice::from_ref(&id)).unwrap(), &doc);
        let again = e.encrypt_document(&doc, &Rules::default(), Some(&file), t0(), &mut rng(seed ^ 1)).unwrap();
        prop_assert_eq!(again, file);
    }
}
