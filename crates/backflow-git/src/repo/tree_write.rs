//! Path updates turned into trees by this crate: each tree the updates touch is read once,
//! edited, serialized as git does and handed to a writer (in a build, the staging area's memory,
//! straight).
//!
//! libgit2's tree builder writes through `git_odb_write`, which first asks every backend whether
//! it holds the object and, on a miss (every new tree is one), lists the cache's pack folder
//! again: one folder listing per tree built.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::Write as _;

use git2::{ObjectType, Oid, Repository};

/// A tree entry's mode for a subtree, as git writes it in a tree (`40000`).
const TREE_MODE: i32 = 0o040_000;
/// A tree entry's mode for a regular, non-executable file.
const BLOB_MODE: i32 = 0o100_644;

/// Writes one object and returns its id.
pub(super) type PutObject<'a> = dyn Fn(ObjectType, &[u8]) -> Result<Oid, git2::Error> + 'a;

/// One file's update, its path relative to the tree being rebuilt: `Some(blob)` writes the
/// file as a regular file, `None` removes it (nothing when it is not there).
type Change<'p> = (&'p [u8], Option<Oid>);

/// One entry of a tree being rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    mode: i32,
    id: Oid,
}

/// Applies `updates` (path → `Some(blob)` to write that file, `None` to remove it) to the tree
/// `base` of `repo` and returns the new root tree. Subtrees emptied are dropped; an emptied root
/// is the empty tree. Other entries keep their modes (an executable stays executable unless
/// written). A path whose parent is a file, or with an empty, `.`, `..` or `.git` component, is
/// refused and nothing of the call is kept by the caller.
pub(super) fn write_updated(
    repo: &Repository,
    put: &PutObject<'_>,
    base: Oid,
    updates: &BTreeMap<String, Option<Oid>>,
) -> Result<Oid, git2::Error> {
    let changes: Vec<Change<'_>> = updates
        .iter()
        .map(|(path, blob)| check_path(path).map(|()| (path.as_bytes(), *blob)))
        .collect::<Result<_, _>>()?;
    match rebuild(repo, put, Some(base), &changes)? {
        Some(tree) => Ok(tree),
        None => put(ObjectType::Tree, &[]),
    }
}

/// Refuses a path git would refuse in a tree (or that would leave its folder).
fn check_path(path: &str) -> Result<(), git2::Error> {
    let bad = path.split('/').any(|part| {
        part.is_empty() || part == "." || part == ".." || part.eq_ignore_ascii_case(".git")
    }) || path.contains('\0');
    if bad {
        return Err(git2::Error::from_str(&format!(
            "cannot write {path:?} into a tree: empty, `.`, `..` or `.git` component"
        )));
    }
    Ok(())
}

/// The tree `base` (`None`: an empty one) with `changes` (sorted, relative to it) applied;
/// `None` when nothing is left in it. An unchanged tree is not written again.
fn rebuild(
    repo: &Repository,
    put: &PutObject<'_>,
    base: Option<Oid>,
    changes: &[Change<'_>],
) -> Result<Option<Oid>, git2::Error> {
    let mut entries: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
    if let Some(base) = base {
        for entry in &repo.find_tree(base)? {
            let kept = Entry {
                mode: entry.filemode_raw(),
                id: entry.id(),
            };
            entries.insert(entry.name_bytes().to_vec(), kept);
        }
    }
    let mut changed = false;
    let mut rest = changes;
    while let Some(&(path, blob)) = rest.first() {
        let Some(slash) = path.iter().position(|b| *b == b'/') else {
            changed |= set_file(&mut entries, path, blob);
            rest = &rest[1..];
            continue;
        };
        // Every change under `dir/` is next to this one: the paths are sorted.
        let dir = &path[..slash];
        let inside = rest
            .iter()
            .take_while(|(p, _)| p.len() > slash && p[..slash] == *dir && p[slash] == b'/')
            .count();
        let sub: Vec<Change<'_>> = rest[..inside]
            .iter()
            .map(|(p, blob)| (&p[slash + 1..], *blob))
            .collect();
        rest = &rest[inside..];
        changed |= set_dir(repo, put, &mut entries, dir, &sub)?;
    }
    if !changed {
        return Ok(base);
    }
    if entries.is_empty() {
        return Ok(None);
    }
    put(ObjectType::Tree, &serialize(&entries)).map(Some)
}

/// Writes or removes one file of a tree; returns whether the tree changed.
fn set_file(entries: &mut BTreeMap<Vec<u8>, Entry>, name: &[u8], blob: Option<Oid>) -> bool {
    match blob {
        Some(id) => {
            let new = Entry {
                mode: BLOB_MODE,
                id,
            };
            entries.insert(name.to_vec(), new) != Some(new)
        }
        None => entries.remove(name).is_some(),
    }
}

/// Applies `sub` to the subtree `name` of a tree; returns whether the tree changed.
fn set_dir(
    repo: &Repository,
    put: &PutObject<'_>,
    entries: &mut BTreeMap<Vec<u8>, Entry>,
    name: &[u8],
    sub: &[Change<'_>],
) -> Result<bool, git2::Error> {
    let removes_only = sub.iter().all(|(_, blob)| blob.is_none());
    let base = match entries.get(name) {
        Some(entry) if entry.mode == TREE_MODE => Some(entry.id),
        // Nothing is under a file, or under a folder that is not there, to remove.
        Some(_) | None if removes_only => return Ok(false),
        Some(_) => {
            return Err(git2::Error::from_str(&format!(
                "cannot write under {:?}: it is a file",
                String::from_utf8_lossy(name)
            )));
        }
        None => None,
    };
    let rebuilt = rebuild(repo, put, base, sub)?;
    Ok(match rebuilt {
        Some(id) if Some(id) == base => false,
        Some(id) => {
            entries.insert(
                name.to_vec(),
                Entry {
                    mode: TREE_MODE,
                    id,
                },
            );
            true
        }
        None => entries.remove(name).is_some(),
    })
}

/// A tree's bytes as git writes them: entries in git's order (a subtree sorts as if its name
/// ended in `/`), each `<octal mode> <name>\0<20-byte id>`.
fn serialize(entries: &BTreeMap<Vec<u8>, Entry>) -> Vec<u8> {
    let mut sorted: Vec<(&Vec<u8>, &Entry)> = entries.iter().collect();
    sorted.sort_by(|(a, ea), (b, eb)| git_order(a, ea.mode, b, eb.mode));
    let mut out = Vec::with_capacity(entries.len() * 48);
    for (name, entry) in sorted {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{:o} ", entry.mode);
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(entry.id.as_bytes());
    }
    out
}

/// git's order of tree entries: by name, a subtree's name read with a trailing `/`.
fn git_order(a: &[u8], a_mode: i32, b: &[u8], b_mode: i32) -> Ordering {
    let common = a.len().min(b.len());
    a[..common].cmp(&b[..common]).then_with(|| {
        let end = |name: &[u8], mode: i32| {
            name.get(common)
                .copied()
                .unwrap_or(if mode == TREE_MODE { b'/' } else { 0 })
        };
        end(a, a_mode).cmp(&end(b, b_mode))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes loose objects through the object database, as libgit2 would.
    fn odb_put(repo: &Repository) -> impl Fn(ObjectType, &[u8]) -> Result<Oid, git2::Error> + '_ {
        move |kind, data| repo.odb()?.write(kind, data)
    }

    /// A bare repository in a temporary folder, and its empty tree.
    fn bare_with_empty_tree() -> (tempfile::TempDir, Repository, Oid) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path()).expect("init");
        let empty = repo.treebuilder(None).expect("tb").write().expect("empty");
        (dir, repo, empty)
    }

    fn blob(repo: &Repository, text: &str) -> Oid {
        repo.blob(text.as_bytes()).expect("blob")
    }

    /// What libgit2's tree updater makes of the same updates.
    fn by_libgit2(repo: &Repository, base: Oid, updates: &BTreeMap<String, Option<Oid>>) -> Oid {
        let base_tree = repo.find_tree(base).expect("base");
        let mut builder = git2::build::TreeUpdateBuilder::new();
        for (path, blob) in updates {
            match blob {
                Some(id) => {
                    builder.upsert(path.as_str(), *id, git2::FileMode::Blob);
                }
                None if base_tree.get_path(std::path::Path::new(path)).is_ok() => {
                    builder.remove(path.as_str());
                }
                None => {}
            }
        }
        builder.create_updated(repo, &base_tree).expect("libgit2")
    }

    /// Rounds of updates (names that sort differently as files and as folders, nested
    /// creations, removals that empty folders, an executable left alone) give the tree ids
    /// libgit2 gives, and `git fsck --strict` accepts every tree.
    #[test]
    fn trees_are_the_ones_libgit2_writes() {
        let (dir, repo, empty) = bare_with_empty_tree();
        let put = odb_put(&repo);
        let (one, two) = (blob(&repo, "one"), blob(&repo, "two"));
        let mut exec = repo.treebuilder(None).expect("tb");
        exec.insert("run", one, 0o100_755).expect("insert");
        exec.insert("a.b", two, 0o100_644).expect("insert");
        let with_exec = exec.write().expect("tree");
        let rounds: Vec<Vec<(&str, Option<Oid>)>> = vec![
            vec![
                ("a/b/c.yaml", Some(one)),
                ("a.yaml", Some(two)),
                ("a-b", Some(one)),
            ],
            vec![
                ("a0", Some(one)),
                ("a/b/d.yaml", Some(two)),
                ("z/y/x", Some(one)),
            ],
            vec![
                ("a/b/c.yaml", Some(two)),
                ("missing/gone", None),
                ("a.yaml", None),
            ],
            vec![
                ("a/b/c.yaml", None),
                ("a/b/d.yaml", None),
                ("z/y/x", Some(one)),
            ],
            vec![("z/y/x", None), ("a0", None), ("a-b", None)],
        ];
        for start in [empty, with_exec] {
            let (mut ours, mut theirs) = (start, start);
            for round in &rounds {
                let updates: BTreeMap<String, Option<Oid>> =
                    round.iter().map(|(p, b)| (p.to_string(), *b)).collect();
                ours = write_updated(&repo, &put, ours, &updates).expect("ours");
                theirs = by_libgit2(&repo, theirs, &updates);
                assert_eq!(ours, theirs, "after {round:?}");
            }
        }
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--strict", "--no-dangling"])
            .current_dir(dir.path())
            .output()
            .expect("git fsck");
        assert!(fsck.status.success(), "{fsck:?}");
    }

    /// Paths git would refuse, and a file under a file, are refused; removing under a file is
    /// nothing.
    #[test]
    fn paths_git_refuses_are_refused() {
        let (_dir, repo, empty) = bare_with_empty_tree();
        let put = odb_put(&repo);
        let one = blob(&repo, "one");
        let file = |path: &str, blob: Option<Oid>| BTreeMap::from([(path.to_string(), blob)]);
        for bad in ["a//b", "../x", "a/./b", ".git/config", "a/.GIT/x", "a/"] {
            assert!(
                write_updated(&repo, &put, empty, &file(bad, Some(one))).is_err(),
                "{bad}"
            );
        }
        let top = write_updated(&repo, &put, empty, &file("f", Some(one))).expect("tree");
        assert!(write_updated(&repo, &put, top, &file("f/x", Some(one))).is_err());
        assert_eq!(
            write_updated(&repo, &put, top, &file("f/x", None)).expect("tree"),
            top
        );
    }
}
