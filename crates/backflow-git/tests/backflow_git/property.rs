//! Random interleavings of intents and foreign commits, checked against a model.
//!
//! The model of the remote: foreign commits land when made; at each publication the pending
//! intents are written on top of the remote, except those that changed nothing in the tree the
//! worker knew when it first planned them, if the worker read that tree from the remote after
//! they were submitted (they are dropped for good, so they never overwrite a later foreign
//! change). An intent submitted after the worker's last read is judged on the tip the
//! publication ends on (an accepted push, or a fetch confirming the tip). Every value written
//! is unique, so "changed nothing" can only come from deleting a file that is already absent.

use std::collections::BTreeMap;

use backflow_branch::IntentSeq;
use backflow_git::{FileRemote, LocalRepo};
use git2::Oid;
use proptest::prelude::*;

use crate::support::*;

#[derive(Debug, Clone)]
enum Op {
    /// The API writes object `obj` (None: deletes it).
    Submit { obj: u8, put: bool },
    /// A foreign commit writes (or removes) an API path or a path of its own.
    Foreign { api_path: bool, obj: u8, put: bool },
    /// A push webhook: the worker looks at the remote on its next poll.
    Notify,
    /// The worker does what is due.
    Poll,
    /// Flush, then poll.
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, prop::bool::weighted(0.8)).prop_map(|(obj, put)| Op::Submit { obj, put }),
        3 => (any::<bool>(), 0u8..4, prop::bool::weighted(0.7)).prop_map(|(api_path, obj, put)| Op::Foreign { api_path, obj, put }),
        1 => Just(Op::Notify),
        3 => Just(Op::Poll),
        1 => Just(Op::Flush),
    ]
}

type Tree = BTreeMap<String, Vec<u8>>;

/// An intent submitted and not yet published: the `index`-th submitted, writing `value` (or
/// removing the file) at `path`.
struct Submitted {
    index: usize,
    path: String,
    value: Option<Vec<u8>>,
}

fn set(tree: &mut Tree, path: &str, value: &Option<Vec<u8>>) {
    match value {
        Some(v) => tree.insert(path.to_string(), v.clone()),
        None => tree.remove(path),
    };
}

/// Commits straight into the bare repository, as a foreign pusher would (with the same ref
/// lock). Returns the commit, or `None` when it would change nothing.
fn foreign_commit(remote: &LocalRepo, path: &str, value: &Option<Vec<u8>>) -> Option<Oid> {
    let tip = remote.read_ref("refs/heads/main").expect("read tip");
    let base = match tip {
        Some(t) => remote.commit_tree(t).expect("tree"),
        None => remote.empty_tree().expect("empty"),
    };
    let mut up = BTreeMap::new();
    up.insert(path.to_string(), value.clone());
    let tree = remote.apply_updates(base, &up).expect("apply");
    if tree == base {
        return None;
    }
    let who = backflow_git::Identity::new("bob", "bob@example.com");
    let c = remote
        .write_commit(tree, tip, &who, &who, start_time(), "foreign")
        .expect("commit");
    match tip {
        Some(t) => remote
            .git2()
            .reference_matching("refs/heads/main", c, true, t, "foreign")
            .expect("cas"),
        None => remote
            .git2()
            .reference("refs/heads/main", c, false, "foreign")
            .expect("create"),
    };
    Some(c)
}

fn remote_tree(remote: &LocalRepo) -> Tree {
    let Some(tip) = remote.read_ref("refs/heads/main").expect("tip") else {
        return Tree::new();
    };
    let tree = remote.commit_tree(tip).expect("tree");
    remote
        .list_files(tree, "")
        .expect("list")
        .into_iter()
        .map(|p| {
            let content = remote.read_file(tree, &p).expect("read").expect("file");
            (p, content)
        })
        .collect()
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let bare = tempfile::tempdir().expect("tempdir");
    let remote_path = bare.path().join("remote.git");
    let remote = LocalRepo::open_or_init(&remote_path).expect("bare");
    let cache = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", remote_path.display());
    let (mut w, _clock) = worker(cache.path(), Box::new(FileRemote::new(&url)), |_| {});
    w.poll();

    let mut model = Tree::new();
    // What the worker last saw of the remote.
    let mut view = Tree::new();
    let mut will_fetch = false;
    let mut pending: Vec<Submitted> = Vec::new();
    let mut foreign_commits = Vec::new();
    let mut last_seq = IntentSeq(0);
    let mut counter = 0u32;
    let mut submitted = 0;

    // How many intents were submitted when the worker last read the remote.
    let mut read_after = 0;
    let publish = |w: &mut backflow_git::BranchWorker,
                   model: &mut Tree,
                   view: &mut Tree,
                   read_after: &mut usize,
                   pending: &mut Vec<Submitted>,
                   will_fetch: &mut bool| {
        w.poll();
        let submitted = pending.last().map_or(*read_after, |p| p.index);
        if std::mem::take(will_fetch) {
            *view = model.clone();
            *read_after = submitted;
        }
        let mut seen = view.clone();
        let mut kept = Vec::new();
        for p in pending.drain(..) {
            // Judged on the view only if the view was read after it; otherwise written on
            // the tip the publication ends on (where "unchanged" writes nothing anyway).
            let judged = p.index <= *read_after;
            if !judged || seen.get(&p.path) != p.value.as_ref() {
                set(&mut seen, &p.path, &p.value);
                kept.push(p);
            }
        }
        if !kept.is_empty() {
            for p in &kept {
                set(model, &p.path, &p.value);
            }
            *view = model.clone();
            *read_after = submitted;
        }
    };

    for op in ops {
        match op {
            Op::Submit { obj, put: is_put } => {
                counter += 1;
                let name = format!("o{obj}");
                let value = format!("api-{counter}");
                let intent = if is_put {
                    put(&name, &value)
                } else {
                    backflow_branch::Intent::delete("apps", key(&name))
                };
                last_seq = w.submit(intent);
                submitted += 1;
                pending.push(Submitted {
                    index: submitted,
                    path: path_of(&name),
                    value: is_put.then(|| rendered(&value).into_bytes()),
                });
            }
            Op::Foreign {
                api_path,
                obj,
                put: is_put,
            } => {
                counter += 1;
                let path = if api_path {
                    path_of(&format!("o{obj}"))
                } else {
                    format!("other/{obj}.txt")
                };
                let value = is_put.then(|| format!("foreign-{counter}\n").into_bytes());
                if let Some(c) = foreign_commit(&remote, &path, &value) {
                    foreign_commits.push(c);
                    set(&mut model, &path, &value);
                }
            }
            Op::Notify => {
                w.notify_remote_moved();
                will_fetch = true;
            }
            Op::Poll => publish(
                &mut w,
                &mut model,
                &mut view,
                &mut read_after,
                &mut pending,
                &mut will_fetch,
            ),
            Op::Flush => {
                w.flush();
                publish(
                    &mut w,
                    &mut model,
                    &mut view,
                    &mut read_after,
                    &mut pending,
                    &mut will_fetch,
                );
            }
        }
        prop_assert_eq!(
            remote_tree(&remote),
            model.clone(),
            "remote diverged from the model"
        );
    }
    w.flush();
    publish(
        &mut w,
        &mut model,
        &mut view,
        &mut read_after,
        &mut pending,
        &mut will_fetch,
    );
    prop_assert!(!w.has_unpublished(), "writes left unpublished");
    prop_assert_eq!(w.published_through(), last_seq, "an intent was lost");
    prop_assert_eq!(remote_tree(&remote), model, "final tree");
    let tip = remote.read_ref("refs/heads/main").expect("tip");
    for c in foreign_commits {
        let kept =
            tip.is_some_and(|t| t == c || remote.git2().graph_descendant_of(t, c).unwrap_or(false));
        prop_assert!(kept, "foreign commit {} vanished from history", c);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_every_write_and_every_foreign_commit(ops in prop::collection::vec(op(), 1..24)) {
        run(ops)?;
    }
}
