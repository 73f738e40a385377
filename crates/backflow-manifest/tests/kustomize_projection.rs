//! Live edits projected back through kustomize builds of the corpus (`tests/kustomize/`): each
//! field goes to the document responsible for it, and the real `kubectl kustomize` of the
//! edited layout (every kubectl version installed) gives the live object and moves nothing
//! else; an edit no document can take is refused, naming why.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on the unexpected")]

mod kustomize_corpus_files;

use kustomize_corpus_files::corpus;

use std::process::Command;

use backflow_manifest::kustomize::{Files, Unplaceable, project, render, with_edits};
use serde_json::{Value, json};

/// What real kustomize renders for `dir` of `files`, written out.
fn kubectl_kustomize(version: &str, files: &Files, dir: &str) -> Vec<Value> {
    let root = tempfile::tempdir().unwrap();
    for (path, bytes) in files {
        let at = root.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, bytes).unwrap();
    }
    let out = Command::new(backflow_testkit::kubectl::binary(version))
        .args(["kustomize", &root.path().join(dir).to_string_lossy()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    yaml_serde::Deserializer::from_str(&text)
        .map(|de| <Value as serde::Deserialize>::deserialize(de).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// One live edit of a built object, and the file it must land in.
struct Case {
    dir: &'static str,
    kind: &'static str,
    name: &'static str,
    edit: fn(&mut Value),
    lands_in: &'static str,
}

const CASES: &[Case] = &[
    Case {
        dir: "07-images",
        kind: "Deployment",
        name: "app",
        edit: |o| {
            o["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("registry.example.com/mirror/nginx:1.28.0");
        },
        lands_in: "07-images/kustomization.yaml",
    },
    Case {
        dir: "08-replicas",
        kind: "Deployment",
        name: "web",
        edit: |o| o["spec"]["replicas"] = json!(7),
        lands_in: "08-replicas/kustomization.yaml",
    },
    Case {
        dir: "09-psm/overlay",
        kind: "Deployment",
        name: "web",
        edit: |o| {
            o["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"]["memory"] =
                json!("512Mi");
        },
        lands_in: "09-psm/overlay/resources.yaml",
    },
    Case {
        dir: "09-psm/overlay",
        kind: "Deployment",
        name: "web",
        edit: |o| {
            o["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPort"] =
                json!(8080);
        },
        lands_in: "09-psm/base/deployment.yaml",
    },
    Case {
        dir: "11-json6902",
        kind: "Deployment",
        name: "web",
        edit: |o| o["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28"),
        lands_in: "11-json6902/ops.yaml",
    },
    Case {
        dir: "02-overlay/overlays/prod",
        kind: "Deployment",
        name: "prod-web-v1",
        edit: |o| {
            o["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = json!("tuned");
        },
        lands_in: "02-overlay/base/deployment.yaml",
    },
    Case {
        dir: "03-nested/top",
        kind: "Deployment",
        name: "top-mid-web",
        edit: |o| o["metadata"]["labels"]["release"] = json!("canary"),
        lands_in: "03-nested/base/deployment.yaml",
    },
    Case {
        dir: "10-patch-target",
        kind: "Deployment",
        name: "api",
        edit: |o| o["spec"]["replicas"] = json!(6),
        lands_in: "10-patch-target/replicas-patch.yaml",
    },
];

#[test]
fn each_edit_lands_in_the_document_responsible_and_kustomize_renders_it_live() {
    let files = corpus();
    let mut wrong = Vec::new();
    for case in CASES {
        let before = render(&files, case.dir).unwrap();
        let mut live = find(&before, case.kind, case.name).clone();
        (case.edit)(&mut live);
        let edits = match project(&files, case.dir, &live) {
            Ok(edits) => edits,
            Err(e) => {
                wrong.push(format!("{} {}: refused: {e}", case.dir, case.name));
                continue;
            }
        };
        let paths: Vec<&str> = edits.iter().map(|e| e.path.as_str()).collect();
        if paths != [case.lands_in] {
            wrong.push(format!(
                "{} {}: landed in {paths:?}, expected {}",
                case.dir, case.name, case.lands_in
            ));
            continue;
        }
        let edited = with_edits(&files, &edits).unwrap();
        for version in backflow_testkit::kubectl::VERSIONS {
            let theirs = kubectl_kustomize(version, &edited, case.dir);
            if find(&theirs, case.kind, case.name) != &live {
                wrong.push(format!(
                    "{} {} (kubectl {version}): the build is not the live object",
                    case.dir, case.name
                ));
            }
            let others_moved = before
                .iter()
                .filter(|o| !(o["kind"] == case.kind && o["metadata"]["name"] == case.name))
                .any(|o| !theirs.contains(o));
            if others_moved {
                wrong.push(format!(
                    "{} {} (kubectl {version}): another object moved",
                    case.dir, case.name
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_edit_no_document_can_take_alone_is_refused_saying_why() {
    let files = corpus();
    let refused = |dir: &str, kind: &str, name: &str, edit: &dyn Fn(&mut Value)| -> Unplaceable {
        let before = render(&files, dir).unwrap();
        let mut live = find(&before, kind, name).clone();
        edit(&mut live);
        project(&files, dir, &live).expect_err("refused")
    };
    // A label every object gets from commonLabels: placing it would move the others.
    let label = refused("04-common-labels", "Service", "web", &|o| {
        o["metadata"]["labels"]["team"] = json!("billing");
    });
    assert!(
        label.to_string().contains("would also change")
            || label.to_string().contains("another layer"),
        "{label}"
    );
    // A generated ConfigMap: its data comes from the generator's sources.
    let generated = refused(
        "13-cm-generator",
        "ConfigMap",
        "labelled-4h2mbtbbt6",
        &|o| {
            o["data"]["a"] = json!("c");
        },
    );
    assert!(generated.to_string().contains("generated"), "{generated}");
    // A name is the layout's: a rename is not projected.
    let renamed = refused("02-overlay/overlays/prod", "Service", "prod-web-v1", &|o| {
        o["metadata"]["name"] = json!("prod-web-v2");
    });
    assert!(matches!(renamed, Unplaceable::NotBuilt { .. }), "{renamed}");
    // An object the build does not make.
    let unknown = project(
        &files,
        "01-plain",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope"}}),
    );
    assert!(
        matches!(unknown, Err(Unplaceable::NotBuilt { .. })),
        "{unknown:?}"
    );
}

#[test]
fn an_object_as_the_build_makes_it_needs_no_edit() {
    let files = corpus();
    for dir in [
        "02-overlay/overlays/prod",
        "16-generator-refs",
        "20-smp-delete/overlay",
    ] {
        for object in render(&files, dir).unwrap() {
            assert_eq!(
                project(&files, dir, &object),
                Ok(Vec::new()),
                "{dir}: {object}"
            );
        }
    }
}

/// An edit of a live object; `false` when the object has nothing it edits.
type LiveEdit = fn(&mut Value) -> bool;

/// Edits a person makes live — an image, the replica count, a data value, a new label — on
/// every object of every layout of the corpus: each either lands so that real kustomize
/// builds the object exactly as it is live and every other object as before, or is refused
/// with a reason. Never a wrong value in Git.
#[test]
fn every_edit_of_every_layout_lands_exactly_or_is_refused() {
    let files = corpus();
    let mut points: Vec<String> = files
        .keys()
        .filter(|f| f.ends_with("/kustomization.yaml"))
        .map(|f| f.trim_end_matches("/kustomization.yaml").to_string())
        .collect();
    points.sort();
    let edits: [(&str, LiveEdit); 4] = [
        ("image", |o| {
            let Some(c) = o.pointer_mut("/spec/template/spec/containers/0") else {
                return false;
            };
            c["image"] = json!("registry.example.com/edited:9");
            true
        }),
        ("replicas", |o| {
            let Some(n) = o.pointer("/spec/replicas").and_then(Value::as_i64) else {
                return false;
            };
            o["spec"]["replicas"] = json!(n + 1);
            true
        }),
        ("data", |o| {
            let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) else {
                return false;
            };
            let Some(first) = data.keys().next().cloned() else {
                return false;
            };
            data.insert(first, json!("edited live"));
            true
        }),
        ("label", |o| {
            let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
                return false;
            };
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            labels["edited-by"] = json!("a-person");
            true
        }),
    ];
    let (mut placed, mut refused, mut wrong) = (0, 0, Vec::new());
    for point in &points {
        let before = render(&files, point).unwrap();
        for object in &before {
            for (what, edit) in &edits {
                let mut live = object.clone();
                if !edit(&mut live) {
                    continue;
                }
                let label = format!(
                    "{point} {} {} ({what})",
                    live["kind"], live["metadata"]["name"]
                );
                match project(&files, point, &live) {
                    Err(e) => {
                        assert!(!e.to_string().is_empty(), "{label}");
                        refused += 1;
                    }
                    Ok(edits) => {
                        placed += 1;
                        let edited = with_edits(&files, &edits).unwrap();
                        let theirs = kubectl_kustomize("1.33", &edited, point);
                        let name = live["metadata"]["name"].as_str().unwrap();
                        let kind = live["kind"].as_str().unwrap();
                        if theirs
                            .iter()
                            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                            != Some(&live)
                        {
                            wrong.push(format!("{label}: kustomize does not build it as live"));
                        }
                        let moved = before
                            .iter()
                            .filter(|o| !(o["kind"] == kind && o["metadata"]["name"] == name))
                            .any(|o| !theirs.contains(o));
                        if moved {
                            wrong.push(format!("{label}: another object moved"));
                        }
                    }
                }
            }
        }
    }
    eprintln!("placed {placed} edits, refused {refused}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        placed >= 40 && refused >= 5,
        "placed {placed}, refused {refused}: the corpus no longer exercises both"
    );
}
