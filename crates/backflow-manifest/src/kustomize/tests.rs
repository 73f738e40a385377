use serde_json::json;

use super::*;

fn files(entries: &[(&str, &str)]) -> Files {
    entries
        .iter()
        .map(|(p, t)| ((*p).to_string(), t.as_bytes().to_vec()))
        .collect()
}

/// The name `kubectl kustomize` (v5.0.1 to v5.6.0) gave these generated objects.
#[test]
fn generated_names_carry_kustomizes_own_hash() {
    let tree = files(&[(
        "a/kustomization.yaml",
        "namespace: prod\nnamePrefix: p-\nconfigMapGenerator:\n- name: cfg\n  literals: [A=1, \"B=<x&y>\"]\nsecretGenerator:\n- name: sec\n  literals: [P=hunter2]\n",
    )]);
    let objects = render(&tree, "a").expect("renders");
    let names: Vec<&str> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["p-cfg-kh7f5d858d", "p-sec-77f487d9c2"]);
    assert_eq!(objects[1]["data"]["P"], "aHVudGVyMg==");
}

#[test]
fn what_is_not_rendered_is_refused_with_the_field_named() {
    for (field, said) in [
        ("helmCharts: []", "helmCharts"),
        ("components: [../c]", "components"),
        ("replacements: []", "replacements"),
        ("transformers: [t.yaml]", "transformers"),
        ("frobnicate: 1", "frobnicate"),
    ] {
        let tree = files(&[("k/kustomization.yaml", field)]);
        match render(&tree, "k") {
            Err(KustomizeError::Unsupported { feature, file, .. }) => {
                assert_eq!(feature, said);
                assert_eq!(file, "k/kustomization.yaml");
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    let remote = files(&[(
        "k/kustomization.yaml",
        "resources: [https://github.com/example/repo//base?ref=v1]",
    )]);
    assert!(matches!(
        render(&remote, "k"),
        Err(KustomizeError::Unsupported { .. })
    ));
}

#[test]
fn a_resource_outside_the_repository_missing_or_twice_is_an_error() {
    let escape = files(&[("k/kustomization.yaml", "resources: [../../x.yaml]")]);
    assert!(matches!(
        render(&escape, "k"),
        Err(KustomizeError::Invalid { .. })
    ));
    let missing = files(&[("k/kustomization.yaml", "resources: [gone.yaml]")]);
    assert!(matches!(
        render(&missing, "k"),
        Err(KustomizeError::Missing {
            what: "resource",
            ..
        })
    ));
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
    let twice = files(&[
        ("k/kustomization.yaml", "resources: [a.yaml, b.yaml]"),
        ("k/a.yaml", cm),
        ("k/b.yaml", cm),
    ]);
    assert!(matches!(
        render(&twice, "k"),
        Err(KustomizeError::Invalid { .. })
    ));
    let cycle = files(&[
        ("a/kustomization.yaml", "resources: [../b]"),
        ("b/kustomization.yaml", "resources: [../a]"),
    ]);
    assert!(matches!(
        render(&cycle, "a"),
        Err(KustomizeError::Cycle { .. })
    ));
}

#[test]
fn a_reference_follows_the_object_it_names_through_prefix_and_hash() {
    let tree = files(&[
        (
            "k/kustomization.yaml",
            "namePrefix: x-\nresources: [d.yaml]\nconfigMapGenerator:\n- name: cfg\n  literals: [a=b]\n",
        ),
        (
            "k/d.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: i, envFrom: [{configMapRef: {name: cfg}}, {configMapRef: {name: other}}]}]\n",
        ),
    ]);
    let objects = render(&tree, "k").expect("renders");
    let cm = objects[0]["metadata"]["name"].as_str().expect("named");
    assert!(cm.starts_with("x-cfg-"), "{cm}");
    assert_eq!(
        objects[1]["spec"]["template"]["spec"]["containers"][0]["envFrom"],
        json!([{"configMapRef": {"name": cm}}, {"configMapRef": {"name": "other"}}])
    );
}

#[test]
fn images_match_by_name_and_keep_what_they_do_not_set() {
    use transform::images;
    let k = json!({"images": [{"name": "nginx", "newTag": "1.27"}, {"name": "reg:5000/app", "newName": "mirror/app"}]});
    let mut r = vec![build::Resource::new(
        json!({"kind": "Pod", "spec": {"containers": [
        {"image": "nginx@sha256:0"}, {"image": "reg:5000/app:v2"}, {"image": "nginxinc/nginx:1"}]}}),
    )];
    images(&k, "k", &mut r).expect("applies");
    let got: Vec<&str> = r[0].value["spec"]["containers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert_eq!(got, ["nginx:1.27", "mirror/app:v2", "nginxinc/nginx:1"]);
}
