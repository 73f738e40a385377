//! Canonical rendering reads back as the value it was rendered from.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod support;

use backflow_manifest::render;
use proptest::prelude::*;
use serde_json::{Value, json};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn render_then_parse_is_identity(value in support::json_value()) {
        let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": value});
        let text = render(&doc);
        let back: Value = yaml_serde::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, doc, "{}", text);
    }

    #[test]
    fn any_top_level_value_reads_back(value in support::json_value()) {
        let text = render(&value);
        let back: Value = yaml_serde::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(back, value, "{}", text);
    }

    #[test]
    fn rendering_is_deterministic(value in support::manifest()) {
        prop_assert_eq!(render(&value), render(&value.clone()));
    }
}

#[test]
fn hazards_are_quoted_in_files() {
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": {"a": "y", "b": "1_000", "c": "12:30", "d": "no", "e": "0777", "y": "key"}});
    let text = render(&doc);
    for needle in [
        "a: \"y\"",
        "b: \"1_000\"",
        "c: \"12:30\"",
        "d: \"no\"",
        "e: \"0777\"",
        "\"y\": key",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
}
