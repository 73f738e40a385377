//! The objects a folder declares, as an applier applies them: every document of every manifest
//! file, SOPS files decrypted, companions (README, kustomization, `.sops.yaml`) skipped.

use backflow_sops::{Identity as AgeIdentity, decrypt_document};
use serde_json::Value;

use crate::document::parse_file;
use crate::identity::Identity;
use crate::index::{FileClass, classify};

/// One object a folder declares.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredObject {
    /// Which object.
    pub identity: Identity,
    /// The object as Git holds it (decrypted).
    pub value: Value,
    /// The file it is in.
    pub path: String,
    /// Whether Git holds it SOPS-encrypted.
    pub encrypted: bool,
}

/// A file or document that declares nothing usable, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationProblem {
    /// The file.
    pub path: String,
    /// What is wrong, for a person.
    pub reason: String,
    /// The object the document declares, when that much could be read (an encrypted document
    /// whose key backflow lacks still names its object): an applier leaves it as it is.
    pub identity: Option<Identity>,
}

/// What a folder declares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// The objects, in file order; the last document wins for an identity declared twice.
    pub objects: Vec<DeclaredObject>,
    /// What could not be read; the rest is still applied.
    pub problems: Vec<DeclarationProblem>,
}

/// Reads the objects of `files` (path, bytes), decrypting SOPS documents with `identities`.
#[must_use]
pub fn declared_objects(files: &[(String, Vec<u8>)], identities: &[AgeIdentity]) -> Declared {
    declared_objects_within(files, &[], identities)
}

/// [`declared_objects`] of the files under `folders` (all of them when `folders` is empty):
/// the other files are read only as what a kustomize layout of those folders builds from (a
/// base outside the claim's folder), never as objects of their own.
#[must_use]
pub fn declared_objects_within(
    files: &[(String, Vec<u8>)],
    folders: &[String],
    identities: &[AgeIdentity],
) -> Declared {
    let mut out = Declared::default();
    let within = |path: &str| {
        folders.is_empty()
            || folders
                .iter()
                .any(|d| d.is_empty() || path.starts_with(&format!("{d}/")))
    };
    let layouts = built_layouts(files, &within, &mut out);
    for (path, bytes) in files {
        if classify(path) != FileClass::Manifests || !within(path) {
            continue;
        }
        if let Some(layout) = layouts.iter().find(|l| l.holds(path)) {
            if let Some(why) = &layout.failed {
                out.problems.push(DeclarationProblem {
                    path: path.clone(),
                    reason: why.clone(),
                    identity: None,
                });
            }
            continue;
        }
        let problem = |reason: String, identity: Option<Identity>| DeclarationProblem {
            path: path.clone(),
            reason,
            identity,
        };
        let parsed = match parse_file(path, bytes) {
            Ok(p) => p,
            Err(e) => {
                out.problems.push(problem(e.to_string(), None));
                continue;
            }
        };
        for (i, doc) in parsed.docs.iter().enumerate() {
            if doc.value.is_null() {
                continue;
            }
            let encrypted = doc.value.get("sops").is_some();
            let value = if encrypted {
                let text = parsed.text.get(doc.range.clone()).unwrap_or_default();
                match decrypt_document(text, identities) {
                    Ok(v) => v,
                    Err(e) => {
                        out.problems.push(problem(
                            format!("document {i}: cannot decrypt: {e}"),
                            Identity::of(&doc.value).ok(),
                        ));
                        continue;
                    }
                }
            } else {
                doc.value.clone()
            };
            match Identity::of(&value) {
                Ok(identity) => {
                    out.objects.push(DeclaredObject {
                        identity,
                        value,
                        path: path.clone(),
                        encrypted,
                    });
                }
                Err(reason) => out.problems.push(problem(
                    format!("document {i} is not an object: {reason}"),
                    None,
                )),
            }
        }
    }
    out.objects = last_of_each(std::mem::take(&mut out.objects));
    out
}

/// A kustomize layout of the files, and why its build could not be read (then its files are
/// reported and its objects left as they are).
struct BuiltLayout {
    layout: crate::kustomize::Layout,
    failed: Option<String>,
}

impl BuiltLayout {
    fn holds(&self, path: &str) -> bool {
        self.layout.holds(path)
    }
}

/// The objects every kustomize layout among `files` builds, added to `out` (the objects
/// Flux's kustomize-controller would apply for the same folder; encrypted documents in a build
/// are reported, not decrypted).
fn built_layouts(
    files: &[(String, Vec<u8>)],
    within: &dyn Fn(&str) -> bool,
    out: &mut Declared,
) -> Vec<BuiltLayout> {
    let kustomizations: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(path, _)| within(path))
        .filter(|(path, _)| crate::kustomize::is_kustomization(path))
        .cloned()
        .collect();
    let layouts = crate::kustomize::layouts(&kustomizations);
    if layouts.is_empty() {
        return Vec::new();
    }
    let tree: crate::kustomize::Files = files.iter().cloned().collect();
    layouts
        .into_iter()
        .map(|layout| {
            let failed = match crate::kustomize::render(&tree, &layout.dir) {
                Ok(objects) => {
                    for value in objects {
                        let identity = match Identity::of(&value) {
                            Ok(i) => i,
                            Err(reason) => {
                                out.problems.push(DeclarationProblem {
                                    path: layout.kustomization.clone(),
                                    reason: format!("its build makes something that is not an object: {reason}"),
                                    identity: None,
                                });
                                continue;
                            }
                        };
                        if value.get("sops").is_some() {
                            out.problems.push(DeclarationProblem {
                                path: layout.kustomization.clone(),
                                reason: "its build holds a SOPS-encrypted document, which backflow does not decrypt inside a kustomize build".into(),
                                identity: Some(identity),
                            });
                            continue;
                        }
                        out.objects.push(DeclaredObject {
                            identity,
                            value,
                            path: layout.kustomization.clone(),
                            encrypted: false,
                        });
                    }
                    None
                }
                Err(e) => Some(format!(
                    "{} builds its folder with kustomize ({}), and the build cannot be read: {e}; backflow leaves the objects of {} as they are",
                    layout.kustomization,
                    layout.transforms.join(", "),
                    if layout.dir.is_empty() { "the folder" } else { &layout.dir }
                )),
            };
            BuiltLayout { layout, failed }
        })
        .collect()
}

/// `objects` with only the last of each identity, in order. Done once at the end: removing
/// the earlier one at each document compared every object with every other (a folder of 15,000
/// objects spent 35 s of each apply there).
fn last_of_each(objects: Vec<DeclaredObject>) -> Vec<DeclaredObject> {
    let mut seen = std::collections::BTreeSet::new();
    let mut kept: Vec<DeclaredObject> = objects
        .into_iter()
        .rev()
        .filter(|o| seen.insert(o.identity.clone()))
        .collect();
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> (String, Vec<u8>) {
        (path.to_string(), text.as_bytes().to_vec())
    }

    /// An object declared twice is the last document's, at its place; the others keep order.
    #[test]
    fn the_last_document_of_an_identity_wins() {
        let cm = |name: &str, v: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  v: {v}\n"
            )
        };
        let files = vec![
            file(
                "live/1.yaml",
                &format!("{}---\n{}", cm("a", "one"), cm("b", "one")),
            ),
            file(
                "live/2.yaml",
                &format!("{}---\n{}", cm("a", "two"), cm("c", "one")),
            ),
        ];
        let declared = declared_objects(&files, &[]);
        let got: Vec<(String, String, String)> = declared
            .objects
            .iter()
            .map(|o| {
                (
                    o.identity.name.clone(),
                    o.value["data"]["v"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    o.path.clone(),
                )
            })
            .collect();
        let want = [
            ("b", "one", "live/1.yaml"),
            ("a", "two", "live/2.yaml"),
            ("c", "one", "live/2.yaml"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(n, v, p)| ((*n).to_string(), (*v).to_string(), (*p).to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_document_of_every_manifest_and_nothing_else() {
        let files = vec![
            file("live/README.md", "# hello\n"),
            file("live/.sops.yaml", "creation_rules: []\n"),
            file(
                "live/default/configmaps/a.yaml",
                "# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\ndata:\n  k: v\n",
            ),
            file(
                "live/all.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team\n",
            ),
            file("live/bad.yaml", "apiVersion: v1\nkind: ConfigMap\n"),
            file("live/broken.yaml", "a: [\n"),
        ];
        let d = declared_objects(&files, &[]);
        let names: Vec<String> = d
            .objects
            .iter()
            .map(|o| format!("{}/{}", o.identity.kind, o.identity.name))
            .collect();
        assert_eq!(names, ["ConfigMap/a", "Namespace/team", "Deployment/web"]);
        assert_eq!(d.problems.len(), 2, "{:?}", d.problems);
        assert!(d.problems.iter().any(|p| p.path == "live/bad.yaml"));
        assert!(d.problems.iter().any(|p| p.path == "live/broken.yaml"));
    }

    /// A kustomize overlay declares what its build makes, as Flux would apply it (its patch is
    /// no Deployment of its own); a base whose kustomization only lists its files reads as
    /// before; an overlay whose build cannot be read is reported, file by file, and declares
    /// nothing.
    #[test]
    fn an_overlay_declares_its_build_and_its_files_are_not_objects() {
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: 1\n";
        let patch =
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n";
        let mut files = vec![
            file(
                "apps/base/kustomization.yaml",
                "resources: [deployment.yaml]\n",
            ),
            file("apps/base/deployment.yaml", deployment),
            file(
                "apps/prod/kustomization.yaml",
                "namePrefix: prod-\nresources: [../base]\npatches: [{path: replicas.yaml}, {path: ../patches/more.yaml}]\n",
            ),
            file("apps/prod/replicas.yaml", patch),
            file("apps/patches/more.yaml", patch),
        ];
        let d = declared_objects(&files, &[]);
        let got: Vec<(String, String, Value)> = d
            .objects
            .iter()
            .map(|o| {
                (
                    o.identity.name.clone(),
                    o.path.clone(),
                    o.value["spec"]["replicas"].clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "prod-web".to_string(),
                    "apps/prod/kustomization.yaml".to_string(),
                    Value::from(3)
                ),
                (
                    "web".to_string(),
                    "apps/base/deployment.yaml".to_string(),
                    Value::from(1)
                ),
            ]
        );
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        files.retain(|(p, _)| !p.starts_with("apps/base/"));
        let d = declared_objects(&files, &[]);
        assert!(d.objects.is_empty(), "{:?}", d.objects);
        assert_eq!(d.problems.len(), 2, "{:?}", d.problems);
        assert!(
            d.problems[0].reason.contains("namePrefix")
                && d.problems[0].reason.contains("the build cannot be read"),
            "{}",
            d.problems[0].reason
        );
    }
}
