//! The same files through backflow and through the real `sops` (Go) and `age` programs.

use backflow_sops::{Encryptor, Rules, SopsError, decrypt_document, parse_identities};
use serde_json::{Value, json};

use crate::support::{Scratch, encrypt, identity, rng, t0};

/// A Secret with every kind of value the format must carry, including strings that a careless
/// writer would emit unquoted and sops would then read as numbers, booleans or timestamps.
pub fn rich_secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db-credentials",
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/name": "db", "tier": "1"},
            "annotations": {"note": "2024-01-01", "count": "1_000", "flag": "yes", "hex": "0x10"},
        },
        "type": "Opaque",
        "data": {
            "password": "aHVudGVyMg==",
            "empty": "",
            "tls.crt": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUI=",
            ".dockerconfigjson": "eyJhdXRocyI6e319",
        },
        "stringData": {
            "plain": "hunter2",
            "yes": "no",
            "date": "2024-01-01",
            "number-like": "1_000",
            "multi": "line one\nline two\n",
            "multi-odd": "  leading\n\ttab\r\nno newline",
            "quotes": "she said \"hi\" \\ ' # : - ? [ ] { } , & * ! | > % @ `",
            "unicode": "grüße 🚀 \u{2028} \u{0}",
            "int": 42,
            "negative": -7,
            "float": 1.5,
            "big-float": 1e300,
            "true": true,
            "false": false,
            "null": null,
            "nested": {
                "list": ["one", {"two": 2, "three": [3, "three"]}, null, [], {}],
                "deeper": {"a": {"b": {"c": "d"}}},
            },
        },
    })
}

fn rule_variants() -> Vec<Rules> {
    vec![
        Rules::default(),
        Rules::UnencryptedSuffix("_unencrypted".to_owned()),
        Rules::EncryptedSuffix("word".to_owned()),
        Rules::UnencryptedRegex("^(apiVersion|kind|metadata|type)$".to_owned()),
    ]
}

#[test]
fn every_file_backflow_writes_decrypts_with_sops() {
    let scratch = Scratch::new();
    let (ours_secret, ours_recipient, _) = identity(1);
    // One recipient from the reference `age-keygen`, to prove the key formats agree.
    let (go_keys, go_recipient) = scratch.age_keygen("go-key.txt");
    let plain = rich_secret();
    for (i, rules) in rule_variants().iter().enumerate() {
        let file = encrypt(&[&ours_recipient, &go_recipient], &plain, rules, None);
        if !matches!(rules, Rules::EncryptedSuffix(_)) {
            assert!(!file.contains("hunter2"), "plaintext leaked:\n{file}");
        }
        let path = scratch.write(&format!("ours-{i}.sops.yaml"), &file);
        for keys in [&ours_secret, &go_keys] {
            assert_eq!(
                scratch.sops_decrypt(keys, &path),
                plain,
                "sops disagrees for rule {rules:?}; file:\n{file}"
            );
        }
    }
}

#[test]
fn data_key_entries_open_with_the_reference_age() {
    let scratch = Scratch::new();
    let (_, go_recipient) = scratch.age_keygen("go-key.txt");
    let file = encrypt(&[&go_recipient], &rich_secret(), &Rules::default(), None);
    let doc: Value = yaml_serde::from_str(&file).unwrap();
    let enc = doc["sops"]["age"][0]["enc"].as_str().unwrap();
    assert!(enc.starts_with("-----BEGIN AGE ENCRYPTED FILE-----\n"));
    let key = scratch.age_decrypt(&scratch.path("go-key.txt"), enc);
    assert_eq!(key.len(), 32, "the wrapped data key is 32 bytes");
}

#[test]
fn the_output_has_sops_layout() {
    let (_, recipient, _) = identity(1);
    let file = encrypt(&[&recipient], &rich_secret(), &Rules::default(), None);
    let doc: Value = yaml_serde::from_str(&file).unwrap();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "apiVersion",
            "kind",
            "metadata",
            "type",
            "data",
            "stringData",
            "sops"
        ]
    );
    let meta: Vec<&str> = doc["sops"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        meta,
        ["age", "lastmodified", "mac", "encrypted_regex", "version"]
    );
    assert_eq!(doc["sops"]["lastmodified"], "2026-01-01T00:00:00Z");
    assert_eq!(doc["sops"]["encrypted_regex"], "^(data|stringData)$");
    assert_eq!(
        doc["metadata"]["name"], "db-credentials",
        "metadata stays readable"
    );
    assert_eq!(
        doc["data"]["empty"], "",
        "empty strings stay empty, like sops"
    );
    assert!(doc["stringData"]["null"].is_null());
    assert!(
        doc["stringData"]["int"]
            .as_str()
            .unwrap()
            .ends_with(",type:int]")
    );
    assert!(file.contains("\n      enc: |\n        -----BEGIN AGE ENCRYPTED FILE-----\n"));
}

/// Hand-written YAML as a person would give it to `sops -e`: unquoted timestamps and
/// numbers (which sops normalises), anchors, comments, binary-looking data.
const HAND_WRITTEN: &str = r#"# a comment sops keeps (encrypted)
apiVersion: v1
kind: Secret
metadata:
  name: from-sops
  annotations:
    when: 2024-01-01
    size: 1_000
data:
  password: aHVudGVyMg==
  blob: AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=
stringData:
  anchor: &a shared
  alias: *a
  yes: no
  n: 12
  f: 1.5e3
  t: true
  stamp: 2001-12-14T21:59:43.10-05:00
  empty: ""
  nothing: ~
  multi: |
    line one
    line two
  nested:
    list:
      - one
      - two: 2
        three: [3, "three"]
      - - inner
      - null
    map: {a: {b: c}}
  secret_unencrypted: visible
"#;

#[test]
fn files_sops_writes_decrypt_with_backflow() {
    let scratch = Scratch::new();
    let (ours_secret, ours_recipient, ours) = identity(2);
    let (go_keys, go_recipient) = scratch.age_keygen("go-key.txt");
    let go = parse_identities(&go_keys).unwrap();
    let input = scratch.write("plain.yaml", HAND_WRITTEN);
    let recipients = format!("{ours_recipient},{go_recipient}");
    // `mac_only_encrypted` is only reachable through a configuration file.
    let mac_only = format!(
        "creation_rules:\n  - path_regex: .*\n    encrypted_regex: ^(data|stringData)$\n    \
         mac_only_encrypted: true\n    age: {recipients}\n"
    );
    for (extra, config) in [
        (vec!["--age", &recipients], None),
        (
            vec![
                "--age",
                &recipients,
                "--encrypted-regex",
                "^(data|stringData)$",
            ],
            None,
        ),
        (
            vec![
                "--age",
                &recipients,
                "--unencrypted-regex",
                "^(kind|apiVersion)$",
            ],
            None,
        ),
        (vec![], Some(&mac_only)),
    ] {
        let config_path = scratch.path(".sops.yaml");
        match config {
            Some(config) => std::fs::write(&config_path, config).unwrap(),
            None => drop(std::fs::remove_file(&config_path)),
        }
        let mut args = vec!["encrypt"];
        args.extend(extra.iter().copied());
        args.push(input.to_str().unwrap());
        let file = scratch.sops_ok(&ours_secret, &args);
        if config.is_some() {
            assert!(file.contains("mac_only_encrypted: true"));
        }
        let path = scratch.write("theirs.sops.yaml", &file);
        // What sops itself reads back is the reference.
        let expected = scratch.sops_decrypt(&go_keys, &path);
        assert_eq!(
            expected["stringData"]["stamp"],
            "2001-12-14T21:59:43.1-05:00"
        );
        for identities in [std::slice::from_ref(&ours), go.as_slice()] {
            let got = decrypt_document(&file, identities)
                .unwrap_or_else(|e| panic!("{extra:?}: {e}\n{file}"));
            assert_eq!(
                numbers_as_floats(got),
                numbers_as_floats(expected.clone()),
                "{extra:?}"
            );
        }
    }
}

#[test]
fn binary_data_from_sops_decrypts() {
    let scratch = Scratch::new();
    let (keys, recipient, ours) = identity(3);
    // Every byte value that is valid UTF-8 on its own, plus multi-byte characters.
    let mut blob: Vec<u8> = (0u8..0x80).collect();
    blob.extend("äöü€🚀\r\n\n".as_bytes());
    let input = scratch.write("blob.bin", &blob);
    let file = scratch.sops_ok(
        &keys,
        &[
            "encrypt",
            "--age",
            &recipient,
            "--input-type",
            "binary",
            "--output-type",
            "yaml",
            input.to_str().unwrap(),
        ],
    );
    let got = decrypt_document(&file, std::slice::from_ref(&ours)).unwrap();
    assert_eq!(got, json!({"data": String::from_utf8(blob).unwrap()}));

    // Bytes that are not UTF-8 cannot become a JSON string: refused, not mangled, no panic.
    let input = scratch.write("raw.bin", [0xff, 0xfe, 0x00, 0x80]);
    let file = scratch.sops_ok(
        &keys,
        &[
            "encrypt",
            "--age",
            &recipient,
            "--input-type",
            "binary",
            "--output-type",
            "yaml",
            input.to_str().unwrap(),
        ],
    );
    assert!(matches!(
        decrypt_document(&file, std::slice::from_ref(&ours)),
        Err(SopsError::MalformedValue { .. })
    ));
}

/// sops prints the float `1500.0` as `1500`, which then reads back as an integer; compare
/// numbers by value.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map_or(Value::Number(n), Value::from),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Which error a tampered file must produce.
type Expect = fn(&SopsError) -> bool;

fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in file");
    text.replacen(from, to, 1)
}

/// Flips one base64 character inside the `data:` of the value on the line starting `key:`.
fn flip_ciphertext(text: &str, key: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{key}: ENC[")))
        .unwrap_or_else(|| panic!("no encrypted {key}"));
    let start = line.find("data:").unwrap() + 5;
    let mut tampered = line.to_owned();
    let c = tampered.as_bytes()[start];
    let flipped = if c == b'A' { "B" } else { "A" };
    tampered.replace_range(start..=start, flipped);
    replace_once(text, line, &tampered)
}

/// The whole line holding `key: …`.
fn value_line<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key}"))
}

/// `key: value` without indentation, comparable across sops' and backflow's layouts.
fn entry<'a>(text: &'a str, key: &str) -> &'a str {
    value_line(text, key).trim_start()
}

#[test]
fn tampering_is_refused_by_backflow_and_by_sops() {
    let scratch = Scratch::new();
    let (keys, recipient, ours) = identity(4);
    let ids = std::slice::from_ref(&ours);
    let plain = rich_secret();
    let ours_file = encrypt(&[&recipient], &plain, &Rules::default(), None);
    let sops_input = scratch.write("plain.yaml", HAND_WRITTEN);
    let theirs_file = scratch.sops_ok(
        &keys,
        &[
            "encrypt",
            "--age",
            &recipient,
            "--encrypted-regex",
            "^(data|stringData)$",
            sops_input.to_str().unwrap(),
        ],
    );

    for (origin, file) in [("backflow", &ours_file), ("sops", &theirs_file)] {
        assert!(decrypt_document(file, ids).is_ok(), "{origin} file reads");
        let password = value_line(file, "password");
        let removed_line = value_line(file, "multi").to_owned();
        let cases: Vec<(&str, String, Expect)> = vec![
            (
                "flipped ciphertext",
                flip_ciphertext(file, "password"),
                |e| matches!(e, SopsError::Authentication { .. }),
            ),
            (
                "value moved to another key",
                replace_once(file, password, &password.replacen("password", "token", 1)),
                |e| matches!(e, SopsError::Authentication { .. }),
            ),
            (
                "clear metadata changed",
                replace_once(file, "name: ", "name: x"),
                |e| matches!(e, SopsError::MacMismatch),
            ),
            (
                "encrypted value removed",
                replace_once(file, &format!("{removed_line}\n"), ""),
                |e| matches!(e, SopsError::MacMismatch),
            ),
            (
                "lastmodified changed",
                replace_once(file, "lastmodified: \"20", "lastmodified: \"19"),
                |e| matches!(e, SopsError::MacMismatch),
            ),
            (
                "mac replaced",
                {
                    let other = if origin == "sops" {
                        &ours_file
                    } else {
                        &theirs_file
                    };
                    replace_once(file, entry(file, "mac"), entry(other, "mac"))
                },
                |e| matches!(e, SopsError::MacMismatch),
            ),
            ("mac flipped", flip_ciphertext(file, "mac"), |e| {
                matches!(e, SopsError::MacMismatch)
            }),
        ];
        for (what, tampered, expected) in cases {
            let err = decrypt_document(&tampered, ids).expect_err(what);
            assert!(expected(&err), "{origin}, {what}: wrong error {err:?}");
            let path = scratch.write("tampered.sops.yaml", &tampered);
            let out = scratch.sops(
                &keys,
                &["decrypt", "--input-type", "yaml", path.to_str().unwrap()],
            );
            assert!(
                !out.status.success(),
                "{origin}, {what}: sops accepted it too?"
            );
        }
    }
}

#[test]
fn key_rotation_by_sops_is_read() {
    let scratch = Scratch::new();
    let (a_keys, a_recipient, a) = identity(5);
    let (b_keys, b_recipient, b) = identity(6);
    let (_, c_recipient, c) = identity(7);
    let all_keys = format!("{a_keys}\n{b_keys}\n");
    let plain = rich_secret();
    let file = encrypt(&[&a_recipient], &plain, &Rules::default(), None);
    let path = scratch.write("secret.sops.yaml", &file);

    // updatekeys: the configuration now names B and C instead of A.
    scratch.write(
        ".sops.yaml",
        format!("creation_rules:\n  - path_regex: .*\n    age: {b_recipient},{c_recipient}\n"),
    );
    scratch.sops_ok(&a_keys, &["updatekeys", "-y", path.to_str().unwrap()]);
    let updated = scratch.read("secret.sops.yaml");
    assert!(updated.contains(&c_recipient) && !updated.contains(&a_recipient));
    assert_eq!(
        decrypt_document(&updated, std::slice::from_ref(&b)).unwrap(),
        plain
    );
    assert_eq!(
        decrypt_document(&updated, std::slice::from_ref(&c)).unwrap(),
        plain
    );
    assert!(matches!(
        decrypt_document(&updated, std::slice::from_ref(&a)),
        Err(SopsError::NoMatchingIdentity { .. })
    ));

    // rotate: a new data key, every value re-encrypted, A added back.
    scratch.sops_ok(
        &all_keys,
        &[
            "rotate",
            "-i",
            "--add-age",
            &a_recipient,
            path.to_str().unwrap(),
        ],
    );
    let rotated = scratch.read("secret.sops.yaml");
    assert_ne!(entry(&rotated, "password"), entry(&updated, "password"));
    for id in [&a, &b, &c] {
        assert_eq!(
            decrypt_document(&rotated, std::slice::from_ref(id)).unwrap(),
            plain
        );
    }
}

fn changed_lines(a: &str, b: &str) -> Vec<String> {
    assert_eq!(a.lines().count(), b.lines().count(), "same shape");
    a.lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .map(|(_, y)| y.split(':').next().unwrap_or("").trim().to_owned())
        .collect()
}

#[test]
fn reencrypting_keeps_unchanged_ciphertext_and_sops_agrees() {
    let scratch = Scratch::new();
    let (keys, recipient, id) = identity(8);
    let plain = rich_secret();
    let encryptor = Encryptor::new([&recipient]).unwrap();
    let rules = Rules::default();
    let first = encryptor
        .encrypt_document(&plain, &rules, None, t0(), &mut rng(1))
        .unwrap();

    // Unchanged: byte-identical, even with another clock reading and other randomness.
    let later = t0() + std::time::Duration::from_secs(3600);
    let same = encryptor
        .encrypt_document(&plain, &rules, Some(&first), later, &mut rng(2))
        .unwrap();
    assert_eq!(same, first);

    // After a restart the key is opened with the identity instead of the in-memory cache.
    let restarted = Encryptor::new([&recipient])
        .unwrap()
        .with_identities(vec![id.clone()]);
    let same = restarted
        .encrypt_document(&plain, &rules, Some(&first), later, &mut rng(3))
        .unwrap();
    assert_eq!(same, first);

    // One value changed: only it, lastmodified and the MAC change.
    let mut edited = plain.clone();
    edited["data"]["password"] = json!("bmV3LXBhc3N3b3Jk");
    let second = encryptor
        .encrypt_document(&edited, &rules, Some(&first), later, &mut rng(4))
        .unwrap();
    assert_eq!(
        changed_lines(&first, &second),
        ["password", "lastmodified", "mac"]
    );
    let path = scratch.write("secret.sops.yaml", &second);
    assert_eq!(scratch.sops_decrypt(&keys, &path), edited);

    // Without an identity and without memory of the file, nothing can be reused: a fresh key.
    let stranger = Encryptor::new([&recipient]).unwrap();
    let fresh = stranger
        .encrypt_document(&plain, &rules, Some(&first), later, &mut rng(5))
        .unwrap();
    assert_ne!(entry(&fresh, "plain"), entry(&first, "plain"));

    // sops edits our file and keeps our ciphertext for what it did not touch...
    scratch.sops_ok(
        &keys,
        &[
            "set",
            path.to_str().unwrap(),
            r#"["stringData"]["plain"]"#,
            r#""changed""#,
        ],
    );
    let by_sops = scratch.read("secret.sops.yaml");
    assert_eq!(entry(&by_sops, "password"), entry(&second, "password"));
    // ...and we keep sops' ciphertext for what we do not touch.
    let mut expected = edited.clone();
    expected["stringData"]["plain"] = json!("changed");
    assert_eq!(
        decrypt_document(&by_sops, std::slice::from_ref(&id)).unwrap(),
        expected
    );
    let back = restarted
        .encrypt_document(&expected, &rules, Some(&by_sops), later, &mut rng(6))
        .unwrap();
    assert_eq!(entry(&back, "plain"), entry(&by_sops, "plain"));
    assert_eq!(entry(&back, "password"), entry(&second, "password"));
    let path = scratch.write("secret.sops.yaml", &back);
    assert_eq!(scratch.sops_decrypt(&keys, &path), expected);
}

#[test]
fn recipient_changes_rewrap_or_rotate() {
    let (_, a_recipient, a) = identity(9);
    let (_, b_recipient, b) = identity(10);
    let plain = rich_secret();
    let rules = Rules::default();
    let first = encrypt(&[&a_recipient], &plain, &rules, None);
    let with = |recipients: &[&str], previous: &str| {
        Encryptor::new(recipients)
            .unwrap()
            .with_identities(vec![a.clone(), b.clone()])
            .encrypt_document(&plain, &rules, Some(previous), t0(), &mut rng(11))
            .unwrap()
    };

    // Adding B keeps A's wrapping and every ciphertext; B can read.
    let added = with(&[&a_recipient, &b_recipient], &first);
    assert_eq!(entry(&added, "password"), entry(&first, "password"));
    assert_eq!(entry(&added, "mac"), entry(&first, "mac"));
    assert_eq!(
        decrypt_document(&added, std::slice::from_ref(&b)).unwrap(),
        plain
    );

    // Removing A draws a new data key: A must not be able to read what follows.
    let removed = with(&[&b_recipient], &added);
    assert_ne!(entry(&removed, "password"), entry(&added, "password"));
    assert!(matches!(
        decrypt_document(&removed, std::slice::from_ref(&a)),
        Err(SopsError::NoMatchingIdentity { .. })
    ));
    assert_eq!(
        decrypt_document(&removed, std::slice::from_ref(&b)).unwrap(),
        plain
    );
}

/// Hundreds of awkward strings, as keys and values, both in clear metadata (which sops must
/// parse exactly, or the MAC breaks) and in encrypted data: the YAML we write means to sops
/// exactly what it means to us.
#[test]
fn awkward_strings_mean_the_same_to_sops() {
    use rand::Rng;
    let scratch = Scratch::new();
    let (keys, recipient, id) = identity(12);
    let pieces = [
        "a",
        "Z",
        "0",
        "1",
        "9",
        "_",
        "-",
        ".",
        ":",
        ": ",
        " #",
        "#",
        "'",
        "\"",
        "\\",
        "\n",
        "\t",
        "\r",
        " ",
        "  ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&",
        "*",
        "!",
        "|",
        ">",
        "%",
        "@",
        "`",
        "?",
        "~",
        "yes",
        "No",
        "on",
        "null",
        "true",
        "0x1F",
        "1_000",
        "1e3",
        ".inf",
        ".NaN",
        "2024-01-01",
        "12:30:00",
        "0o17",
        "+1",
        "-0",
        "é",
        "ß",
        "日本",
        "🚀",
        "\u{85}",
        "\u{a0}",
        "\u{2028}",
        "\u{2029}",
        "\u{feff}",
        "\u{0}",
        "\u{7}",
        "\u{1b}",
        "\u{7f}",
        "\u{fffd}",
        "---",
        "...",
        "<<",
        "=",
        "ENC[",
        "]",
    ];
    let mut r = rng(13);
    let random_string = |r: &mut rand::rngs::StdRng| -> String {
        (0..r.random_range(0..6))
            .map(|_| pieces[r.random_range(0..pieces.len())])
            .collect()
    };
    let mut annotations = serde_json::Map::new();
    let mut data = serde_json::Map::new();
    for i in 0..300 {
        annotations.insert(
            format!("{i}{}", random_string(&mut r)),
            json!(random_string(&mut r)),
        );
        data.insert(
            format!("{}{i}", random_string(&mut r)),
            json!(random_string(&mut r)),
        );
    }
    for i in 0..50 {
        annotations.insert(format!("int{i}"), json!(r.random::<i64>()));
        let float = f64::from_bits(r.random::<u64>());
        if float.is_finite() {
            annotations.insert(format!("float{i}"), json!(float));
        }
        data.insert(format!("float{i}"), json!(r.random::<f64>() * 1e6));
    }
    let plain = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "awkward", "annotations": annotations},
        "data": data,
    });
    let file = encrypt(&[&recipient], &plain, &Rules::default(), None);
    assert_eq!(
        decrypt_document(&file, std::slice::from_ref(&id)).unwrap(),
        plain
    );
    let path = scratch.write("awkward.sops.yaml", &file);
    assert_eq!(
        numbers_as_floats(scratch.sops_decrypt(&keys, &path)),
        numbers_as_floats(plain)
    );
}
