//! Shared proptest strategies.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Strings that stress quoting: YAML 1.1 hazards, indicators, whitespace, line breaks, unicode.
pub fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "y",
            "N",
            "yes",
            "No",
            "on",
            "OFF",
            "true",
            "False",
            "null",
            "~",
            "",
            " ",
            "1_000",
            "0x1F",
            "0777",
            "1e3",
            "12:30",
            "2024-01-01",
            "-1",
            "+1",
            ".5",
            ".inf",
            "-",
            "- a",
            "#x",
            "a #b",
            "a: b",
            "a:",
            "*x",
            "&x",
            "!x",
            "%x",
            "@x",
            "[",
            "]",
            "{",
            "}",
            "|",
            ">",
            "'",
            "\"",
            "---",
            "...",
            "=",
            "<<",
            "\t",
            "a\tb",
            "line\n",
            "a\nb",
            "a\n\n",
            "\n",
            "\n\na",
            " a\nb",
            "a\n b",
            "a \nb",
            "é",
            "\u{2028}",
            "\u{85}",
            "\u{feff}x",
            "x\r\ny",
            "\u{7f}",
            "--flag=1",
            "nginx:1.25",
            "a,b",
            "a b",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,12}",
        "[a-z \\n#:'\"-]{0,16}",
        any::<String>().prop_map(|s| s.chars().take(10).collect()),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        tricky_string().prop_map(Value::String),
    ]
}

/// Arbitrary JSON-like values.
pub fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(tricky_string(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// An object-shaped document with a manifest header and an arbitrary body.
pub fn manifest() -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..5),
        prop::collection::btree_map(tricky_string(), tricky_string(), 0..3),
    )
        .prop_map(|(body, labels)| {
            let mut top = Map::new();
            top.insert("apiVersion".into(), "v1".into());
            top.insert("kind".into(), "ConfigMap".into());
            let mut meta = Map::new();
            meta.insert("name".into(), "x".into());
            if !labels.is_empty() {
                meta.insert(
                    "labels".into(),
                    Value::Object(
                        labels
                            .into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect(),
                    ),
                );
            }
            top.insert("metadata".into(), Value::Object(meta));
            for (k, v) in body {
                top.insert(k, v);
            }
            Value::Object(top)
        })
}
