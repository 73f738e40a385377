//! The in-process kustomize render equals the real one (`kubectl kustomize`, kustomize built
//! into kubectl), object for object and in the same order, for every folder with a
//! kustomization in the corpus `tests/kustomize/` and every kubectl version installed.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on the unexpected")]

mod kustomize_corpus_files;

use std::path::Path;
use std::process::Command;

use backflow_manifest::kustomize::render;
use serde_json::Value;

/// What real kustomize renders for `dir`.
fn kubectl_kustomize(version: &str, dir: &Path) -> Result<Vec<Value>, String> {
    let out = Command::new(backflow_testkit::kubectl::binary(version))
        .args(["kustomize", &dir.to_string_lossy()])
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(yaml_serde::Deserializer::from_str(&text)
        .map(|de| <Value as serde::Deserialize>::deserialize(de).unwrap())
        .filter(|v| !v.is_null())
        .collect())
}

/// Where two renders part, for a person.
fn difference(ours: &[Value], theirs: &[Value]) -> String {
    let name = |v: &Value| format!("{} {}", v["kind"], v["metadata"]["name"]);
    if ours.len() != theirs.len() {
        return format!(
            "{} objects, kustomize {}: ours {:?}, kustomize {:?}",
            ours.len(),
            theirs.len(),
            ours.iter().map(name).collect::<Vec<_>>(),
            theirs.iter().map(name).collect::<Vec<_>>()
        );
    }
    ours.iter()
        .zip(theirs)
        .find(|(a, b)| a != b)
        .map_or_else(String::new, |(a, b)| {
            format!(
                "first difference at {}:\nours:\n{}\nkustomize:\n{}",
                name(b),
                serde_json::to_string_pretty(a).unwrap(),
                serde_json::to_string_pretty(b).unwrap()
            )
        })
}

#[test]
fn every_layout_renders_as_kubectl_kustomize_does_for_every_version() {
    let root = kustomize_corpus_files::root();
    let files = kustomize_corpus_files::corpus();
    let mut points: Vec<String> = files
        .keys()
        .filter(|f| f.ends_with("/kustomization.yaml"))
        .map(|f| f.trim_end_matches("/kustomization.yaml").to_string())
        .collect();
    points.sort();
    let layouts: std::collections::BTreeSet<&str> =
        points.iter().filter_map(|p| p.split('/').next()).collect();
    assert!(
        layouts.len() >= 20,
        "{} layouts: {layouts:?}",
        layouts.len()
    );
    let wrong: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = backflow_testkit::kubectl::VERSIONS
            .iter()
            .map(|version| {
                let (files, points, root) = (&files, &points, &root);
                scope.spawn(move || {
                    let mut wrong = Vec::new();
                    for point in points {
                        let theirs = match kubectl_kustomize(version, &root.join(point)) {
                            Ok(objects) => objects,
                            Err(e) => {
                                wrong.push(format!("kubectl {version} cannot build {point}: {e}"));
                                continue;
                            }
                        };
                        match render(files, point) {
                            Ok(ours) if ours == theirs => {}
                            Ok(ours) => wrong.push(format!(
                                "{point} (kubectl {version}): {}",
                                difference(&ours, &theirs)
                            )),
                            Err(e) => wrong.push(format!("{point}: refused: {e}")),
                        }
                    }
                    wrong
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        wrong.is_empty(),
        "{} of {} renders differ:\n{}",
        wrong.len(),
        points.len() * backflow_testkit::kubectl::VERSIONS.len(),
        wrong.join("\n\n")
    );
}
