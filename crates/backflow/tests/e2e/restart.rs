//! What Git holds that the live side lacks when backflow starts: a repository that already holds
//! manifests, met by an empty store (first contact: restore from Git), and a push made while
//! backflow was stopped.

use std::path::Path;

use serde_json::Value;

use crate::apply::wait_acting;
use crate::common::*;

/// The data of `ConfigMap` `ns/name`, once it exists live.
fn live_data(w: &World, ns: &str, name: &str) -> Option<Value> {
    let out = w.kubectl_run(&["get", "configmap", name, "-n", ns, "-o", "json"]);
    let cm: Value = serde_json::from_str(&out.stdout).ok()?;
    Some(cm["data"].clone())
}

fn wait_live(w: &World, ns: &str, name: &str, key: &str, value: &str) {
    wait_for(
        &format!("ConfigMap {ns}/{name} live with {key}={value}"),
        || format!("{:?}", live_data(w, ns, name)),
        || (live_data(w, ns, name)?[key] == value).then_some(()),
    );
}

/// A bare repository at `bare` whose `main` holds, in folder `live`, a Namespace `shop` and a
/// `ConfigMap` `shop/conf`, committed by a person.
fn a_cluster_repository(w: &World, bare: &Path) {
    let git = |dir: &Path, args: &[&str]| w.git_in(Some(dir), args);
    git(
        &w.dirs.work,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &bare.to_string_lossy(),
        ],
    );
    let clone = w.dirs.work.join("cluster");
    git(
        &w.dirs.work,
        &["clone", "-q", &bare.to_string_lossy(), "cluster"],
    );
    std::fs::create_dir_all(clone.join("live/shop")).unwrap();
    std::fs::write(
        clone.join("live/shop/namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
    )
    .unwrap();
    std::fs::write(
        clone.join("live/shop/conf.yaml"),
        "# the shop's settings\n".to_string() + &configmap("shop", "conf", &[("colour", "blue")]),
    )
    .unwrap();
    git(&clone, &["checkout", "-q", "-b", "main"]);
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-q", "-m", "the cluster as it was"]);
    git(&clone, &["push", "-q", "origin", "main"]);
}

/// First contact: `serve --repo` on a repository whose folder already holds manifests, with an
/// empty store, creates them live (restore from Git), and leaves the files as they were written.
#[test]
fn a_repository_that_already_holds_manifests_is_restored_into_an_empty_store() {
    let mut w = World::unstarted();
    let bare = w.dirs.work.join("cluster.git");
    a_cluster_repository(&w, &bare);
    let url = format!("file://{}", bare.display());
    w.restart(&["--repo", &url, "--path", "live"]);
    wait_live(&w, "shop", "conf", "colour", "blue");
    let file = w.git_in(
        Some(&w.dirs.work.join("cluster")),
        &["show", "HEAD:live/shop/conf.yaml"],
    );
    let tip = || {
        w.git_in(
            Some(&w.dirs.work),
            &[
                "--git-dir",
                &bare.to_string_lossy(),
                "show",
                "main:live/shop/conf.yaml",
            ],
        )
    };
    assert_eq!(tip(), file, "the file stays as the person wrote it");
}

/// A file pushed while backflow was stopped is created live when it starts again.
#[test]
fn a_file_pushed_while_backflow_was_stopped_is_created_at_start() {
    let mut w = World::start(&[]);
    wait_acting(&w);
    w.apply(&configmap("default", "demo", &[("greeting", "hello")]));
    w.wait_file("live/default/configmaps/demo.yaml", |t| t.contains("hello"));
    w.stop();
    w.push_new_configmap("live", "default", "fresh", "pushed-while-down");
    w.restart(&[]);
    wait_live(&w, "default", "fresh", "greeting", "pushed-while-down");
}
