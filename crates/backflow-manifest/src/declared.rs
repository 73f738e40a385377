//! The objects a folder declares, as an applier applies them: every document of every manifest
//! file, SOPS files decrypted, companions (README, kustomization, `.sops.yaml`) skipped.

use std::collections::HashMap;

use backflow_sops::{Identity as AgeIdentity, decrypt_document};
use serde_json::Value;
use sha2::{Digest, Sha256};

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
    declare(files, folders, identities, None)
}

/// [`declared_objects_within`], parsing only the files `cache` has not seen with the same
/// content: an applier reads the folders at the commit it applies and at the last one it
/// applied, push after push, and most files are the same each time.
#[must_use]
pub fn declared_objects_cached(
    files: &[(String, Vec<u8>)],
    folders: &[String],
    identities: &[AgeIdentity],
    cache: &mut DeclarationCache,
) -> Declared {
    declare(files, folders, identities, Some(cache))
}

fn declare(
    files: &[(String, Vec<u8>)],
    folders: &[String],
    identities: &[AgeIdentity],
    mut cache: Option<&mut DeclarationCache>,
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
        let file = match cache.as_deref_mut() {
            Some(cache) => cache.file(path, bytes, identities),
            None => declared_in_file(path, bytes, identities),
        };
        out.objects.extend(file.objects);
        out.problems.extend(file.problems);
    }
    out.objects = last_of_each(std::mem::take(&mut out.objects));
    out
}

/// What one manifest file declares.
#[derive(Debug, Default)]
struct FileDeclares {
    objects: Vec<DeclaredObject>,
    problems: Vec<DeclarationProblem>,
    /// Whether it holds a SOPS-encrypted document (then it is never cached).
    encrypted: bool,
}

/// Reads the objects of one manifest file, decrypting SOPS documents with `identities`.
fn declared_in_file(path: &str, bytes: &[u8], identities: &[AgeIdentity]) -> FileDeclares {
    let mut out = FileDeclares::default();
    let problem = |reason: String, identity: Option<Identity>| DeclarationProblem {
        path: path.to_string(),
        reason,
        identity,
    };
    let parsed = match parse_file(path, bytes) {
        Ok(p) => p,
        Err(e) => {
            out.problems.push(problem(e.to_string(), None));
            return out;
        }
    };
    for (i, doc) in parsed.docs.iter().enumerate() {
        if doc.value.is_null() {
            continue;
        }
        let encrypted = doc.value.get("sops").is_some();
        out.encrypted |= encrypted;
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
            Ok(identity) => out.objects.push(DeclaredObject {
                identity,
                value,
                path: path.to_string(),
                encrypted,
            }),
            Err(reason) => out.problems.push(problem(
                format!("document {i} is not an object: {reason}"),
                None,
            )),
        }
    }
    out
}

/// What each manifest file declared when last read, by path and a digest of its content, so
/// an unchanged file is not parsed again. Objects are kept as compact JSON text (a parsed
/// value takes several times the memory); a file holding an encrypted document is never kept,
/// so no decrypted value outlives the read that needed it.
#[derive(Debug, Default)]
pub struct DeclarationCache {
    files: HashMap<String, CachedFile>,
    /// Counts [`DeclarationCache::sweep`]s: an entry not read since the last one goes.
    generation: u64,
}

#[derive(Debug)]
struct CachedFile {
    digest: [u8; 32],
    /// Each object's identity and its value as JSON text.
    objects: Vec<(Identity, Box<str>)>,
    problems: Vec<DeclarationProblem>,
    used: u64,
}

impl DeclarationCache {
    /// Forgets the files no read asked for since the last sweep: the cache holds what the
    /// folders held at the commits read lately, not every version ever read.
    pub fn sweep(&mut self) {
        let generation = self.generation;
        self.files.retain(|_, f| f.used == generation);
        self.generation += 1;
    }

    /// Files held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether it holds no file.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// What the file at `path` with `bytes` declares: from the cache when it holds the same
    /// content, parsed (and kept) otherwise.
    fn file(&mut self, path: &str, bytes: &[u8], identities: &[AgeIdentity]) -> FileDeclares {
        let digest: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(cached) = self.files.get_mut(path).filter(|c| c.digest == digest) {
            cached.used = self.generation;
            if let Some(objects) = cached.restored(path) {
                return FileDeclares {
                    objects,
                    problems: cached.problems.clone(),
                    encrypted: false,
                };
            }
        }
        let read = declared_in_file(path, bytes, identities);
        if read.encrypted {
            self.files.remove(path);
            return read;
        }
        let objects = read
            .objects
            .iter()
            .filter_map(|o| {
                let text = serde_json::to_string(&o.value).ok()?;
                Some((o.identity.clone(), text.into_boxed_str()))
            })
            .collect::<Vec<_>>();
        if objects.len() != read.objects.len() {
            return read;
        }
        let cached = CachedFile {
            digest,
            objects,
            problems: read.problems,
            used: self.generation,
        };
        // Read back from the text as a later hit would be, so both agree to the last digit of a
        // float.
        let restored = FileDeclares {
            objects: cached.restored(path).unwrap_or(read.objects),
            problems: cached.problems.clone(),
            encrypted: false,
        };
        self.files.insert(path.to_string(), cached);
        restored
    }
}

impl CachedFile {
    /// The objects as first read; `None` if a value's text no longer reads (never expected).
    fn restored(&self, path: &str) -> Option<Vec<DeclaredObject>> {
        self.objects
            .iter()
            .map(|(identity, text)| {
                Some(DeclaredObject {
                    identity: identity.clone(),
                    value: serde_json::from_str(text).ok()?,
                    path: path.to_string(),
                    encrypted: false,
                })
            })
            .collect()
    }
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

    fn parses() -> usize {
        crate::document::PARSES.with(std::cell::Cell::get)
    }

    fn configmap(name: &str, v: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  v: \"{v}\"\n  ratio: 0.1\n"
        )
    }

    /// The cache declares what a read without it declares, problems included, and parses an
    /// unchanged file once however often it is read.
    #[test]
    fn a_cached_read_declares_the_same_and_parses_each_content_once() {
        let files = vec![
            file(
                "live/a.yaml",
                &format!("{}---\n{}", configmap("a", "1"), configmap("b", "1")),
            ),
            file("live/bad.yaml", "key: [unclosed\n"),
            file("live/list.yaml", "- 1\n- 2\n"),
            file("live/c.yaml", &configmap("c", "1")),
        ];
        let folders = vec!["live".to_string()];
        let plain = declared_objects_within(&files, &folders, &[]);
        let mut cache = DeclarationCache::default();
        let before = parses();
        let first = declared_objects_cached(&files, &folders, &[], &mut cache);
        let second = declared_objects_cached(&files, &folders, &[], &mut cache);
        assert_eq!(first, plain);
        assert_eq!(second, plain);
        assert_eq!(parses() - before, files.len(), "each file parsed once");
        assert!(!plain.problems.is_empty(), "the bad files are reported");

        // A changed file is read again, and only it.
        let mut changed = files.clone();
        changed[3] = file("live/c.yaml", &configmap("c", "2"));
        let before = parses();
        let third = declared_objects_cached(&changed, &folders, &[], &mut cache);
        assert_eq!(parses() - before, 1);
        assert_eq!(third, declared_objects_within(&changed, &folders, &[]));
        let c = third.objects.iter().find(|o| o.identity.name == "c");
        assert_eq!(c.map(|o| o.value["data"]["v"].clone()), Some("2".into()));
    }

    /// A sweep forgets the files no read asked for since the last sweep.
    #[test]
    fn a_sweep_forgets_files_not_read_since_the_last() {
        let folders: Vec<String> = Vec::new();
        let one = vec![file("live/a.yaml", &configmap("a", "1"))];
        let two = vec![file("live/b.yaml", &configmap("b", "1"))];
        let mut cache = DeclarationCache::default();
        assert!(cache.is_empty());
        let _ = declared_objects_cached(&one, &folders, &[], &mut cache);
        let _ = declared_objects_cached(&two, &folders, &[], &mut cache);
        assert_eq!(cache.len(), 2);
        assert!(!cache.is_empty());
        cache.sweep();
        assert_eq!(cache.len(), 2, "both were read since the last sweep");
        let _ = declared_objects_cached(&two, &folders, &[], &mut cache);
        cache.sweep();
        assert_eq!(cache.len(), 1, "a.yaml was not read since");
        let before = parses();
        let _ = declared_objects_cached(&two, &folders, &[], &mut cache);
        assert_eq!(parses(), before, "b.yaml is still held");
    }

    /// A file holding an encrypted document is read every time, never kept.
    #[test]
    fn a_file_with_an_encrypted_document_is_never_kept() {
        let sops = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: default\ndata:\n  v: ENC[AES256_GCM,data:abc=,iv:abc=,tag:abc=,type:str]\nsops:\n  age: []\n  mac: ENC[AES256_GCM,data:abc=,iv:abc=,tag:abc=,type:str]\n  version: 3.9.0\n";
        let files = vec![
            file("live/s.sops.yaml", sops),
            file("live/a.yaml", &configmap("a", "1")),
        ];
        let mut cache = DeclarationCache::default();
        let declared = declared_objects_cached(&files, &[], &[], &mut cache);
        assert!(
            declared
                .problems
                .iter()
                .any(|p| p.path == "live/s.sops.yaml"),
            "{declared:?}"
        );
        assert_eq!(cache.len(), 1, "only the plain file is kept");
        let before = parses();
        let _ = declared_objects_cached(&files, &[], &[], &mut cache);
        assert_eq!(parses() - before, 1, "the encrypted file is parsed again");
    }

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
