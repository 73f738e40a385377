//! In-place edits: exact bytes for a hand-written file, and properties for arbitrary objects.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod support;

use backflow_manifest::{ManifestError, append_document, edit_document, remove_document, render};
use proptest::prelude::*;
use serde_json::{Value, json};

const BUNDLE: &str = "\
# Team web's workloads. Edited by hand too.
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings   # the app reads this
  namespace: web
data:
  mode: 'fast'
  script: |
    echo one
    ---
    echo two
---
# The API deployment.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: web
  labels: {app: api, tier: \"backend\"}
spec:
  replicas: 2 # scaled by hand
  template:
    spec:
      containers:
        # the main container
        - name: api
          image: api:1.0
          env:
            - name: A
              value: \"1\"
        - name: sidecar
          image: proxy:2
---
apiVersion: v1
kind: Service
metadata:
  name: api
  namespace: web
spec:
  ports:
  - port: 80
";

fn docs(text: &str) -> Vec<Value> {
    yaml_serde::Deserializer::from_str(text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).expect("doc"))
        .collect()
}

fn deployment(replicas: u64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "web", "labels": {"app": "api", "tier": "backend"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "api", "image": image, "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "y"}]},
            {"name": "sidecar", "image": "proxy:2"},
        ]}}},
    })
}

#[test]
fn edit_changes_only_the_fields_that_differ() {
    let out =
        edit_document("b.yaml", BUNDLE.as_bytes(), 1, &deployment(3, "api:1.1")).expect("edit");
    let out = String::from_utf8(out).expect("utf8");
    let expected = BUNDLE
        .replace(
            "replicas: 2 # scaled by hand",
            "replicas: 3 # scaled by hand",
        )
        .replace("image: api:1.0", "image: api:1.1")
        .replace(
            "              value: \"1\"\n",
            "              value: \"1\"\n            - name: B\n              value: \"y\"\n",
        );
    assert_eq!(out, expected);
    assert_eq!(docs(&out)[1], deployment(3, "api:1.1"));
    // Writing the same object again is a byte-stable no-op.
    let again =
        edit_document("b.yaml", out.as_bytes(), 1, &deployment(3, "api:1.1")).expect("edit");
    assert_eq!(again, out.as_bytes());
}

#[test]
fn removed_keys_and_items_take_their_lines() {
    let mut want = deployment(2, "api:1.0");
    want["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "api", "image": "api:1.0", "env": [{"name": "A", "value": "1"}]},
    ]);
    want["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    let out = edit_document("b.yaml", BUNDLE.as_bytes(), 1, &want).expect("edit");
    let out = String::from_utf8(out).expect("utf8");
    let expected = BUNDLE
        .replacen(
            "  namespace: web\n  labels: {app: api",
            "  labels: {app: api",
            1,
        )
        .replace("        - name: sidecar\n          image: proxy:2\n", "");
    assert_eq!(out, expected);
}

#[test]
fn other_documents_stay_byte_for_byte() {
    let mut cm = docs(BUNDLE)[0].clone();
    cm["data"]["mode"] = json!("slow");
    cm["data"]["extra"] = json!("on");
    let out = edit_document("b.yaml", BUNDLE.as_bytes(), 0, &cm).expect("edit");
    let out = String::from_utf8(out).expect("utf8");
    let expected = BUNDLE
        .replace("mode: 'fast'", "mode: 'slow'")
        .replace("    echo two\n---", "    echo two\n  extra: \"on\"\n---");
    assert_eq!(out, expected);
}

#[test]
fn flow_maps_and_type_changes_rewrite_only_their_entry() {
    let mut want = deployment(2, "api:1.0");
    want["spec"]["template"]["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    want["metadata"]["labels"]["tier"] = json!("no");
    let out = edit_document("b.yaml", BUNDLE.as_bytes(), 1, &want).expect("edit");
    let out = String::from_utf8(out).expect("utf8");
    assert!(
        out.contains("  labels:\n    app: api\n    tier: \"no\"\n"),
        "{out}"
    );
    assert!(out.contains("  replicas: 2 # scaled by hand\n"), "{out}");
    assert_eq!(docs(&out)[1], want);
}

#[test]
fn removing_documents() {
    let first = remove_document("b.yaml", BUNDLE.as_bytes(), 0)
        .expect("remove")
        .expect("file stays");
    let first = String::from_utf8(first).expect("utf8");
    let tail = &BUNDLE[BUNDLE.find("---\n# The API").expect("doc 1")..];
    assert_eq!(first, tail.strip_prefix("---\n").expect("marker"));
    let middle = remove_document("b.yaml", BUNDLE.as_bytes(), 1)
        .expect("remove")
        .expect("file stays");
    let middle = String::from_utf8(middle).expect("utf8");
    assert_eq!(docs(&middle).len(), 2);
    assert!(middle.starts_with("# Team web's workloads."));
    assert!(middle.contains("    echo two\n---\napiVersion: v1\nkind: Service"));
    let single =
        render(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}));
    assert_eq!(
        remove_document("x.yaml", single.as_bytes(), 0).expect("remove"),
        None
    );
    assert!(matches!(
        remove_document("x.yaml", single.as_bytes(), 3),
        Err(ManifestError::NoSuchDocument { .. })
    ));
}

#[test]
fn anchors_are_refused_for_edits() {
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: &v 1\n  b: *v\n";
    let want = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 2, "b": 1}});
    let err = edit_document("x.yaml", text.as_bytes(), 0, &want).expect_err("refused");
    assert!(err.to_string().contains("anchors"), "{err}");
    // Removing it whole is still safe.
    assert_eq!(
        remove_document("x.yaml", text.as_bytes(), 0).expect("remove"),
        None
    );
}

#[test]
fn invalid_yaml_is_refused() {
    let err = edit_document("x.yaml", b"a: [1, 2\nb: }\n", 0, &json!({})).expect_err("refused");
    assert!(matches!(err, ManifestError::InvalidYaml { .. }), "{err}");
}

#[test]
fn crlf_files_keep_their_line_ends() {
    let text =
        "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: x\r\ndata:\r\n  a: \"1\"\r\n";
    let want = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "2", "b": "3"}});
    let out = edit_document("x.yaml", text.as_bytes(), 0, &want).expect("edit");
    let out = String::from_utf8(out).expect("utf8");
    assert_eq!(
        out,
        "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: x\r\ndata:\r\n  a: \"2\"\r\n  b: \"3\"\r\n"
    );
}

#[test]
fn append_adds_a_document() {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}});
    let out = append_document(b"a: 1", &obj);
    assert_eq!(
        String::from_utf8(out).expect("utf8"),
        format!("a: 1\n---\n{}", render(&obj))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// From a canonical file, any edit reads back exactly and is then a byte-stable no-op.
    #[test]
    fn edits_read_back_and_settle(from in support::manifest(), to in support::manifest()) {
        let file = format!("# head\n{}---\n{}", render(&from), render(&to));
        let out = edit_document("p.yaml", file.as_bytes(), 0, &to)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let text = String::from_utf8(out.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let parsed = docs(&text);
        prop_assert_eq!(&parsed[0], &to, "{}", text);
        // The other document and the head comment are untouched.
        prop_assert!(text.starts_with("# head\n"));
        prop_assert!(text.ends_with(&format!("---\n{}", render(&to))), "{}", text);
        let again = edit_document("p.yaml", &out, 0, &to)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again, out);
    }

    /// Edits of the hand-written deployment with arbitrary values read back exactly.
    #[test]
    fn hand_written_edits_read_back(replicas in any::<u64>(), image in support::tricky_string(),
                                    extra in support::json_value()) {
        let mut want = deployment(replicas, &image);
        want["spec"]["extra"] = extra;
        let out = edit_document("b.yaml", BUNDLE.as_bytes(), 1, &want)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let text = String::from_utf8(out.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let parsed = docs(&text);
        prop_assert_eq!(&parsed[1], &want, "{}", text);
        let before = docs(BUNDLE);
        prop_assert_eq!(&parsed[0], &before[0]);
        prop_assert_eq!(&parsed[2], &before[2]);
        prop_assert!(text.starts_with(&BUNDLE[..BUNDLE.find("# The API").expect("doc 1")]));
        prop_assert!(text.ends_with(&BUNDLE[BUNDLE.find("---\napiVersion: v1\nkind: Service").expect("doc 2")..]));
        let again = edit_document("b.yaml", &out, 1, &want)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again, out);
    }
}
