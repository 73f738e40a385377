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

#[test]
fn what_kustomize_refuses_is_refused() {
    let twice = files(&[(
        "k/kustomization.yaml",
        "configMapGenerator:\n- name: c\n  literals: [a=1, a=2]\n",
    )]);
    assert!(
        matches!(render(&twice, "k"), Err(KustomizeError::Invalid { reason, .. }) if reason.contains("twice")),
    );
    let two_files = files(&[
        ("k/kustomization.yaml", "resources: []\n"),
        ("k/kustomization.yml", "resources: []\n"),
    ]);
    assert!(matches!(
        render(&two_files, "k"),
        Err(KustomizeError::Invalid { .. })
    ));
}

/// Objects of odd shapes pass through untouched where a transformer has nothing to change,
/// and a kustomization of the wrong shape is an error — never a panic (they panicked).
#[test]
fn odd_shapes_are_errors_or_left_alone_never_a_panic() {
    let render_one = |kustomization: &str, resource: &str| {
        let tree = files(&[
            ("k/kustomization.yaml", kustomization),
            ("k/r.yaml", resource),
        ]);
        render(&tree, "k")
    };
    let scaled = render_one(
        "replicas: [{name: d, count: 2}]\nresources: [r.yaml]\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: 3\n",
    );
    assert_eq!(scaled.expect("renders")[0]["spec"], json!(3));
    let hpa = render_one(
        "namePrefix: p-\nresources: [r.yaml]\n",
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: [1]\n",
    );
    assert_eq!(hpa.expect("renders")[0]["spec"], json!([1]));
    let binding = render_one(
        "namePrefix: p-\nresources: [r.yaml]\n",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b}\nroleRef: x\nsubjects: 3\n",
    );
    assert_eq!(binding.expect("renders")[0]["roleRef"], json!("x"));
    let images = render_one(
        "images: 3\nresources: [r.yaml]\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    assert!(
        matches!(images, Err(KustomizeError::Invalid { .. })),
        "{images:?}"
    );
}

#[test]
fn strategic_merge_directives_not_rendered_are_refused() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: x}]\n      tolerations: [{key: k}]\n";
    for patch in [
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - {$patch: replace}\n      - {name: b, image: y}\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      tolerations:\n      - {$patch: replace}\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      $setElementOrder/containers: [{name: a}]\n",
    ] {
        let tree = files(&[
            (
                "k/kustomization.yaml",
                "resources: [d.yaml]\npatches: [{path: p.yaml}]\n",
            ),
            ("k/d.yaml", deployment),
            ("k/p.yaml", patch),
        ]);
        assert!(
            matches!(render(&tree, "k"), Err(KustomizeError::Unsupported { .. })),
            "{patch}"
        );
    }
}
