//! Golden tests: `tests/golden/sanitize/<case>.in.yaml` sanitized and rendered must equal
//! `<case>.out.yaml` byte for byte.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;

use backflow_manifest::{render, sanitize};

#[test]
fn sanitize_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/sanitize");
    let mut cases = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .collect();
    entries.sort();
    for input in entries {
        let expected_path = input.to_string_lossy().replace(".in.yaml", ".out.yaml");
        let text = std::fs::read_to_string(&input).expect("read input");
        let expected = std::fs::read_to_string(&expected_path).expect("read expected");
        let value: serde_json::Value = yaml_serde::from_str(&text).expect("input parses");
        let once = sanitize(&value);
        assert_eq!(render(&once), expected, "{}", input.display());
        assert_eq!(
            sanitize(&once),
            once,
            "sanitize is idempotent: {}",
            input.display()
        );
        cases += 1;
    }
    assert!(cases >= 5, "golden cases found: {cases}");
}
