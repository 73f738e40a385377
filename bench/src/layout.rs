//! Where the `snapshot` scenario's N objects live: all in one folder (`ConfigMaps` in `default`),
//! or spread as a real cluster's are, over 100 namespaces and 5 kinds.

use std::collections::BTreeMap;
use std::path::Path;

use git2::Repository;
use serde_json::{Value, json};

use crate::live::{CONFIGMAPS, configmap_yaml, filler};

/// How many namespaces the spread layout uses.
pub const NAMESPACES: usize = 100;

/// One type of the spread layout: its API path segment, its folder under a namespace in Git, and
/// its object without name, namespace and filler.
struct ObjectType {
    api: &'static str,
    folder: &'static str,
    api_version: &'static str,
    kind: &'static str,
    body: fn() -> Value,
}

const KINDS: [ObjectType; 5] = [
    ObjectType {
        api: "/api/v1",
        folder: "configmaps",
        api_version: "v1",
        kind: "ConfigMap",
        body: || json!({"data": {"v": "1"}}),
    },
    ObjectType {
        api: "/api/v1",
        folder: "serviceaccounts",
        api_version: "v1",
        kind: "ServiceAccount",
        body: || json!({}),
    },
    ObjectType {
        api: "/apis/rbac.authorization.k8s.io/v1",
        folder: "rbac.authorization.k8s.io/roles",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        body: || json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    },
    ObjectType {
        api: "/api/v1",
        folder: "limitranges",
        api_version: "v1",
        kind: "LimitRange",
        body: || json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}}),
    },
    ObjectType {
        api: "/api/v1",
        folder: "resourcequotas",
        api_version: "v1",
        kind: "ResourceQuota",
        body: || json!({"spec": {"hard": {"pods": "10"}}}),
    },
];

/// Where the N objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `ConfigMaps` in `default`: one folder of N files.
    Folder,
    /// Object `i` in namespace `spread-<i mod 100>`, of kind `i / 100 mod 5`.
    Spread,
}

impl Layout {
    /// Its name on the command line and in the results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Folder => "folder",
            Self::Spread => "spread",
        }
    }

    /// The layout named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Folder, Self::Spread]
            .into_iter()
            .find(|l| l.name() == s)
    }

    /// The namespaces to create before the objects.
    pub fn namespaces(self) -> Vec<String> {
        match self {
            Self::Folder => Vec::new(),
            Self::Spread => (0..NAMESPACES).map(namespace).collect(),
        }
    }

    /// Object `i` (named `name`, carrying `token` and ~1 KiB of filler): where it is created
    /// and its JSON.
    pub fn object(self, i: usize, name: &str, token: &str) -> (String, Value) {
        match self {
            Self::Folder => (
                "/api/v1/namespaces/default/configmaps".into(),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                       "data": {"token": token, "v": filler()}}),
            ),
            Self::Spread => {
                let (ns, kind) = (
                    namespace(i % NAMESPACES),
                    &KINDS[(i / NAMESPACES) % KINDS.len()],
                );
                let mut body = (kind.body)();
                body["apiVersion"] = json!(kind.api_version);
                body["kind"] = json!(kind.kind);
                body["metadata"] = json!({"name": name, "annotations": {"bench/token": token, "bench/filler": filler()}});
                let plural = kind.folder.rsplit('/').next().unwrap_or(kind.folder);
                (format!("{}/namespaces/{ns}/{plural}", kind.api), body)
            }
        }
    }

    /// Object `i`'s file in Git, and content of about the size the mirror writes.
    pub fn file(self, i: usize, name: &str, token: &str) -> (String, String) {
        match self {
            Self::Folder => (
                format!("{CONFIGMAPS}/{name}.yaml"),
                configmap_yaml(name, token),
            ),
            Self::Spread => {
                let (ns, kind) = (
                    namespace(i % NAMESPACES),
                    &KINDS[(i / NAMESPACES) % KINDS.len()],
                );
                let content = format!(
                    "apiVersion: {}\nkind: {}\nmetadata:\n  name: {name}\n  namespace: {ns}\n  annotations:\n    bench/token: {token}\n    bench/filler: {}\n",
                    kind.api_version,
                    kind.kind,
                    filler()
                );
                (format!("live/{ns}/{}/{name}.yaml", kind.folder), content)
            }
        }
    }

    /// How many of the N objects' files the tree of commit `tip` holds.
    pub fn count(self, repo: &Repository, tip: git2::Oid) -> usize {
        let Ok(tree) = repo.find_commit(tip).and_then(|c| c.tree()) else {
            return 0;
        };
        match self {
            Self::Folder => tree
                .get_path(Path::new(CONFIGMAPS))
                .and_then(|e| repo.find_tree(e.id()))
                .map_or(0, |t| t.len()),
            Self::Spread => (0..NAMESPACES)
                .map(|n| {
                    KINDS
                        .iter()
                        .map(|k| {
                            let folder = format!("live/{}/{}", namespace(n), k.folder);
                            tree.get_path(Path::new(&folder))
                                .and_then(|e| repo.find_tree(e.id()))
                                .map_or(0, |t| t.len())
                        })
                        .sum::<usize>()
                })
                .sum(),
        }
    }
}

fn namespace(n: usize) -> String {
    format!("spread-{n:02}")
}

/// Writes the tree holding `files` (path → blob), one tree per directory; returns its id.
pub fn write_tree(
    repo: &Repository,
    files: &[(String, git2::Oid)],
) -> Result<git2::Oid, git2::Error> {
    #[derive(Default)]
    struct Dir {
        dirs: BTreeMap<String, Dir>,
        blobs: Vec<(String, git2::Oid)>,
    }
    fn write(repo: &Repository, dir: &Dir) -> Result<git2::Oid, git2::Error> {
        let mut b = repo.treebuilder(None)?;
        for (name, blob) in &dir.blobs {
            b.insert(name, *blob, 0o100_644)?;
        }
        for (name, sub) in &dir.dirs {
            b.insert(name, write(repo, sub)?, 0o040_000)?;
        }
        b.write()
    }
    let mut root = Dir::default();
    for (path, blob) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let file = parts.pop().unwrap_or_default();
        let mut dir = &mut root;
        for p in parts {
            dir = dir.dirs.entry(p.to_string()).or_default();
        }
        dir.blobs.push((file.to_string(), *blob));
    }
    write(repo, &root)
}
