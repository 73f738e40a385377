//! The codec on its own: API contracts that need no external program.

use backflow_sops::{
    Encryptor, Identity, Rules, SopsError, decrypt_document, generate_identity, parse_identities,
};
use serde_json::json;

use crate::interop::rich_secret;
use crate::support::{encrypt, identity, rng, t0};

#[test]
fn round_trips_every_rule() {
    let (_, recipient, id) = identity(20);
    let plain = rich_secret();
    for rules in [
        Rules::default(),
        Rules::UnencryptedSuffix("_unencrypted".to_owned()),
        Rules::EncryptedSuffix("word".to_owned()),
        Rules::UnencryptedRegex("^metadata$".to_owned()),
    ] {
        let file = encrypt(&[&recipient], &plain, &rules, None);
        assert_eq!(
            decrypt_document(&file, std::slice::from_ref(&id)).unwrap(),
            plain
        );
    }
}

#[test]
fn a_secret_is_never_written_without_a_recipient() {
    let none: [&str; 0] = [];
    assert_eq!(Encryptor::new(none).unwrap_err(), SopsError::NoRecipients);
    assert!(matches!(
        Encryptor::new(["age1notakey"]),
        Err(SopsError::InvalidRecipient { .. })
    ));
}

#[test]
fn recipients_are_sorted_and_deduplicated() {
    let (_, a, _) = identity(21);
    let (_, b, _) = identity(22);
    let e = Encryptor::new([&b, &a, &b]).unwrap();
    let mut expected = vec![a, b];
    expected.sort();
    let got: Vec<String> = e
        .recipients()
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn documents_that_cannot_be_files_are_refused() {
    let (_, recipient, _) = identity(23);
    let e = Encryptor::new([&recipient]).unwrap();
    let mut r = rng(1);
    let mut enc = |v| e.encrypt_document(&v, &Rules::default(), None, t0(), &mut r);
    assert_eq!(enc(json!(["a"])).unwrap_err(), SopsError::NotAMapping);
    assert_eq!(enc(json!({"sops": 1})).unwrap_err(), SopsError::ReservedKey);
    assert!(matches!(
        enc(json!({"data": {"n": u64::MAX}})),
        Err(SopsError::UnsupportedValue { .. })
    ));
    let bad = Rules::EncryptedRegex("(".to_owned());
    assert!(matches!(
        e.encrypt_document(&json!({}), &bad, None, t0(), &mut rng(1)),
        Err(SopsError::InvalidRule { .. })
    ));
    let empty = Rules::UnencryptedSuffix(String::new());
    assert!(matches!(
        e.encrypt_document(&json!({}), &empty, None, t0(), &mut rng(1)),
        Err(SopsError::InvalidRule { .. })
    ));
}

#[test]
fn wrong_identity_names_the_recipients() {
    let (_, recipient, _) = identity(24);
    let (_, _, other) = identity(25);
    let file = encrypt(&[&recipient], &rich_secret(), &Rules::default(), None);
    assert_eq!(
        decrypt_document(&file, &[other]).unwrap_err(),
        SopsError::NoMatchingIdentity {
            recipients: vec![recipient]
        }
    );
    assert!(matches!(
        decrypt_document(&file, &[]),
        Err(SopsError::NoMatchingIdentity { .. })
    ));
}

#[test]
fn plain_yaml_is_not_a_sops_file() {
    assert_eq!(
        decrypt_document("a: b\n", &[]).unwrap_err(),
        SopsError::MissingMetadata
    );
    assert_eq!(
        decrypt_document("- a\n", &[]).unwrap_err(),
        SopsError::NotAMapping
    );
    assert!(matches!(
        decrypt_document("a: [", &[]),
        Err(SopsError::Yaml(_))
    ));
}

#[test]
fn errors_never_show_plaintext_or_secret_keys() {
    let (secret, recipient, id) = identity(26);
    let file = encrypt(&[&recipient], &rich_secret(), &Rules::default(), None);
    let tampered = file.replace("db-credentials", "other");
    let err = decrypt_document(&tampered, std::slice::from_ref(&id)).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("hunter2") && !shown.contains("aHVudGVyMg"));
    let bad_key = secret.replace("AGE-SECRET-KEY-1", "AGE-SECRET-KEY-1Q");
    let err = parse_identities(&bad_key).unwrap_err();
    assert!(!format!("{err} {err:?}").contains(&secret[20..40]));
    assert!(!format!("{id:?}").contains("AGE-SECRET-KEY"));
}

#[test]
fn identities_come_from_the_injected_randomness() {
    let (s1, r1) = generate_identity(&mut rng(30));
    let (s2, r2) = generate_identity(&mut rng(30));
    let (s3, _) = generate_identity(&mut rng(31));
    assert_eq!((s1.as_str(), &r1), (s2.as_str(), &r2));
    assert_ne!(s1.as_str(), s3.as_str());
    assert!(s1.starts_with("AGE-SECRET-KEY-1") && r1.starts_with("age1"));
    let parsed: Identity = s1.parse().unwrap();
    assert_eq!(parsed.recipient().to_string(), r1);
    let file = format!("# created: now\n# public key: {r1}\n{}\n\n", s1.as_str());
    assert_eq!(parse_identities(&file).unwrap().len(), 1);
}

#[test]
fn the_same_seed_gives_the_same_file_for_the_same_previous() {
    // Randomness is injected: with a previous file the output is a pure function of the inputs.
    let (_, recipient, id) = identity(27);
    let plain = rich_secret();
    let first = encrypt(&[&recipient], &plain, &Rules::default(), None);
    let mut edited = plain.clone();
    edited["stringData"]["plain"] = json!("changed");
    let run = || {
        Encryptor::new([&recipient])
            .unwrap()
            .with_identities(vec![id.clone()])
            .encrypt_document(&edited, &Rules::default(), Some(&first), t0(), &mut rng(99))
            .unwrap()
    };
    assert_eq!(run(), run());
}

#[test]
fn a_changed_rule_reencrypts_with_the_new_rule() {
    let (_, recipient, id) = identity(28);
    let plain = rich_secret();
    let e = Encryptor::new([&recipient]).unwrap();
    let first = e
        .encrypt_document(&plain, &Rules::default(), None, t0(), &mut rng(1))
        .unwrap();
    let suffix = Rules::UnencryptedSuffix("_unencrypted".to_owned());
    let second = e
        .encrypt_document(&plain, &suffix, Some(&first), t0(), &mut rng(2))
        .unwrap();
    assert!(second.contains("unencrypted_suffix: _unencrypted"));
    assert!(
        !second.contains("name: db-credentials"),
        "metadata is encrypted now"
    );
    assert_eq!(
        decrypt_document(&second, std::slice::from_ref(&id)).unwrap(),
        plain
    );
}

#[test]
fn one_encryptor_serves_many_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Encryptor>();
    shareable::<Identity>();
}
