//! What Git holds that the live side lacks when backflow starts: a repository that already holds
//! manifests, met by an empty store (first contact: restore from Git), a push made while
//! backflow was stopped, and an apply cut short by a crash. The start-up resync publishes only
//! what changed live since the commit the live side last held (`status.inStepCommit`).

use std::path::Path;

use serde_json::Value;

use crate::apply::{claim, record_running_operation, suspend_default_claim, wait_acting};
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
    assert_eq!(
        cluster_file(&w),
        file,
        "the file stays as the person wrote it"
    );
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

/// A started world where `ConfigMap` `default/demo` (`greeting: hello`) was created live,
/// mirrored and adopted by the default claim; and the path of its file.
fn a_demo_adopted() -> (World, &'static str) {
    let w = World::start(&[]);
    wait_acting(&w);
    w.apply(&configmap("default", "demo", &[("greeting", "hello")]));
    let path = "live/default/configmaps/demo.yaml";
    w.wait_file(path, |t| t.contains("hello"));
    wait_adopted(&w, "demo");
    (w, path)
}

/// Issue case 2: an edit of an existing file and a new file, pushed while backflow was stopped,
/// both reach the live side when it starts, and the edit stays in Git: the start-up resync does
/// not write the live side's older value over it.
#[test]
fn an_edit_pushed_while_backflow_was_stopped_is_applied_not_reverted() {
    let (mut w, path) = a_demo_adopted();
    w.stop();
    w.push_edit(path, "hello", "edited-while-down");
    w.push_new_configmap("live", "default", "fresh", "pushed-while-down");
    w.restart(&[]);
    wait_live(&w, "default", "demo", "greeting", "edited-while-down");
    wait_live(&w, "default", "fresh", "greeting", "pushed-while-down");
    w.wait_settled();
    let file = w.show(path).expect("the file");
    assert!(
        file.contains("edited-while-down"),
        "Git keeps the push:\n{file}"
    );
}

/// `kubectl patch` of `demo`'s greeting to `edited-live`, then a wait until `path` holds it.
fn edit_demo_live_and_wait_mirrored(w: &World, path: &str) {
    w.kubectl(&[
        "patch",
        "configmap",
        "demo",
        "-p",
        r#"{"data":{"greeting":"edited-live"}}"#,
    ]);
    w.wait_file(path, |t| t.contains("edited-live"));
}

/// A live edit mirrored into Git, then a push on top of it changing the same field while
/// backflow was stopped: the pusher saw the live edit in Git and changed it, so the push is the
/// newer edit and wins on both sides. (The start-up resync reads the live value against the
/// commit the live side last applied, which predates backflow's own commit of the edit: it took
/// the edit for a change made while down, and wrote it back over the push.)
#[test]
fn a_push_over_a_mirrored_live_edit_made_while_backflow_was_stopped_wins() {
    let (mut w, path) = a_demo_adopted();
    edit_demo_live_and_wait_mirrored(&w, path);
    w.wait_settled();
    w.stop();
    w.push_edit(path, "edited-live", "edited-in-git");
    w.restart(&[]);
    wait_live(&w, "default", "demo", "greeting", "edited-in-git");
    w.wait_settled();
    let file = w.show(path).expect("the file");
    assert!(
        file.contains("edited-in-git"),
        "Git keeps the push:\n{file}"
    );
    let data = live_data(&w, "default", "demo");
    assert_eq!(
        data.as_ref().map(|d| d["greeting"].clone()),
        Some("edited-in-git".into())
    );
}

/// A live edit mirrored, a push over it that the claim has not applied (suspended), then another
/// live edit mirrored on top of that push, and the process stops: the start-up resync reads the
/// object against the branch's commits since the one the live side held in full — backflow's
/// commit of the edit holds it, so it did not change live since, and the push wins on both
/// sides. (Read against that commit and backflow's *last* push only, neither of which holds the
/// edit, it was taken for a change made while down and written back over the push.)
#[test]
fn a_push_over_a_mirrored_live_edit_stands_though_backflow_pushed_again_since() {
    let (mut w, path) = a_demo_adopted();
    suspend_default_claim(&w, true);
    edit_demo_live_and_wait_mirrored(&w, path);
    w.push_edit(path, "edited-live", "edited-in-git");
    w.apply(&configmap("default", "other", &[("greeting", "later")]));
    w.wait_file("live/default/configmaps/other.yaml", |t| {
        t.contains("later")
    });
    w.wait_settled();
    assert!(w.show(path).is_some_and(|t| t.contains("edited-in-git")));
    w.stop();
    w.restart(&[]);
    suspend_default_claim(&w, false);
    wait_live(&w, "default", "demo", "greeting", "edited-in-git");
    w.wait_settled();
    let file = w.show(path).expect("the file");
    assert!(
        file.contains("edited-in-git"),
        "Git keeps the push:\n{file}"
    );
}

/// A file removed by a push while backflow was stopped stays removed, and its object goes from
/// the live side: the start-up resync reads the unchanged live object as Git's to decide.
#[test]
fn a_removal_pushed_while_backflow_was_stopped_is_applied_not_reverted() {
    let (mut w, path) = a_demo_adopted();
    w.wait_settled();
    w.stop();
    let clone = w.clone_origin("remover");
    w.git_in(Some(&clone), &["rm", "-q", path]);
    w.commit_all_and_push_rebasing(&clone, "remove demo");
    w.restart(&[]);
    wait_for(
        "ConfigMap default/demo deleted live",
        || format!("{:?}", live_data(&w, "default", "demo")),
        || live_data(&w, "default", "demo").is_none().then_some(()),
    );
    w.wait_settled();
    assert_eq!(w.show(path), None, "Git keeps the removal");
}

/// Issue case 3: an apply cut short. A push changed every file of a folder; the applier had
/// written half of them when the process was killed (its operation still `Running`). The
/// restart's resync must not write the other half's older live values over the push, and the
/// next apply carries the rest to the live side.
#[test]
fn an_apply_cut_short_by_a_crash_is_finished_not_reverted() {
    const N: usize = 12;
    let mut w = World::start(&[]);
    wait_acting(&w);
    for i in 0..N {
        w.apply(&configmap("default", &format!("cfg-{i}"), &[("v", "old")]));
    }
    for i in 0..N {
        w.wait_file(&format!("live/default/configmaps/cfg-{i}.yaml"), |t| {
            t.contains("old")
        });
    }
    for i in 0..N {
        wait_adopted(&w, &format!("cfg-{i}"));
    }
    // Held, so the push is not applied by itself: this test plays the applier's part.
    suspend_default_claim(&w, true);
    let clone = w.clone_origin("person");
    for i in 0..N {
        let file = clone.join(format!("live/default/configmaps/cfg-{i}.yaml"));
        let text = std::fs::read_to_string(&file).expect("the file");
        std::fs::write(&file, text.replace("old", "new")).expect("write");
    }
    let pushed = w.commit_all_and_push_rebasing(&clone, "every setting is new");
    // Half applied, as backflow's applier writes (server-side apply), then the process dies
    // with the operation recorded in flight.
    for i in 0..N / 2 {
        w.apply_as_applier(&clone.join(format!("live/default/configmaps/cfg-{i}.yaml")));
    }
    record_running_operation(&w, 90, &pushed);
    w.crash_and_restart(&[]);
    w.wait_settled();
    let reverted = not_in_git(&w, "cfg", N, "new");
    assert!(
        reverted.is_empty(),
        "the restart's resync wrote the live side over unapplied files {reverted:?}"
    );
    suspend_default_claim(&w, false);
    for i in 0..N {
        wait_live(&w, "default", &format!("cfg-{i}"), "v", "new");
    }
    let file = w
        .show("live/default/configmaps/cfg-0.yaml")
        .expect("the file");
    assert!(file.contains("new"), "{file}");
}

/// Waits until the default claim's inventory holds `ConfigMap` `default/name` (adopted).
fn wait_adopted(w: &World, name: &str) {
    let id = format!("default_{name}__ConfigMap");
    wait_for(
        &format!("{name} to be adopted"),
        || format!("{:#}", claim(w)),
        || {
            let status = claim(w);
            let done = status["operation"]["phase"] == "Succeeded";
            (done && status["inventory"].to_string().contains(&id)).then_some(())
        },
    );
}

/// A store that holds `ConfigMap` `shop/conf` with `colour: red` (written while backflow ran
/// one way, `--no-apply`), and a repository whose folder holds it with `colour: blue`: the
/// first contact of the default claim with that repository, under `--first-contact rule`.
/// Returns the world (started) and the path of the repository's file in its clone.
fn first_contact_with_different_content(rule: &str) -> World {
    let mut w = World::start(&["--no-apply"]);
    w.kubectl(&["create", "namespace", "shop"]);
    w.apply(&configmap("shop", "conf", &[("colour", "red")]));
    w.wait_settled();
    w.stop();
    let bare = w.dirs.work.join("cluster.git");
    a_cluster_repository(&w, &bare);
    let url = format!("file://{}", bare.display());
    w.restart(&["--repo", &url, "--path", "live", "--first-contact", rule]);
    w
}

/// The file `live/shop/conf.yaml` at the tip of the repository [`a_cluster_repository`] made.
fn cluster_file(w: &World) -> String {
    let bare = w.dirs.work.join("cluster.git");
    w.git_in(
        Some(&w.dirs.work),
        &[
            "--git-dir",
            &bare.to_string_lossy(),
            "show",
            "main:live/shop/conf.yaml",
        ],
    )
}

/// The rule the default claim reports for its first contact, once it reports one.
fn first_contact_rule(w: &World) -> String {
    wait_for(
        "the claim to report its first contact",
        || format!("{:#}", claim(w)),
        || {
            claim(w)["firstContact"]["rule"]
                .as_str()
                .map(str::to_string)
        },
    )
}

/// `--first-contact git-wins`: the file is applied over the differing live object (restore a
/// cluster from its repository), and the file stays as the person wrote it.
#[test]
fn at_first_contact_git_wins_applies_the_file_over_the_live_object() {
    let w = first_contact_with_different_content("git-wins");
    wait_live(&w, "shop", "conf", "colour", "blue");
    assert_eq!(first_contact_rule(&w), "GitWins");
    w.wait_settled();
    let file = cluster_file(&w);
    assert!(
        file.starts_with("# the shop's settings") && file.contains("blue"),
        "{file}"
    );
}

/// The default, `live-wins`: the live object is published over the differing file (capture a
/// cluster into a repository), and the claim's status says so.
#[test]
fn at_first_contact_live_wins_publishes_the_live_object_over_the_file() {
    let w = first_contact_with_different_content("live-wins");
    assert_eq!(first_contact_rule(&w), "LiveWins");
    wait_for(
        "the live value in the file",
        || cluster_file(&w),
        || cluster_file(&w).contains("red").then_some(()),
    );
    wait_live(&w, "shop", "conf", "colour", "red");
}

/// Issue case 3 as a person meets it: a push changes many files, and backflow is killed
/// (`kill -9`) while its applier carries them to the live side. Wherever the kill lands, the
/// restarted process finishes the apply and Git keeps every change.
#[test]
fn a_push_of_many_files_survives_a_kill_during_its_apply() {
    many_files_survive_a_stop_during_their_apply(Stop::Kill);
}

/// The same with SIGTERM: the process stops cleanly in the middle of the apply.
#[test]
fn a_push_of_many_files_survives_a_stop_during_its_apply() {
    many_files_survive_a_stop_during_their_apply(Stop::Term);
}

/// How the process ends in the middle of an apply.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Kill,
    Term,
}

/// How many `ConfigMap`s `many-*` read `v` live.
fn value_of(w: &World, v: &str) -> usize {
    let list = w.get_json(&["configmaps"]);
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|cm| {
                    cm["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("many-"))
                })
                .filter(|cm| cm["data"]["v"] == v)
                .count()
        })
        .unwrap_or_default()
}

/// `n` `ConfigMap`s `many-*` = `old` created live, mirrored and adopted by the claim.
fn many_adopted(n: usize) -> World {
    let w = World::start(&[]);
    wait_acting(&w);
    let all: Vec<String> = (0..n)
        .map(|i| configmap("default", &format!("many-{i}"), &[("v", "old")]))
        .collect();
    w.apply(&all.join("---\n"));
    for i in 0..n {
        w.wait_file(&format!("live/default/configmaps/many-{i}.yaml"), |_| true);
    }
    wait_for(
        "every object adopted",
        || format!("{:#}", claim(&w)["operation"]),
        || {
            let status = claim(&w);
            // Beyond a few dozen entries the inventory is kept beside the claim.
            let inventory = status["inventory"].as_array().map_or(0, Vec::len);
            let stored = status["inventoryStore"]["entries"].as_u64().unwrap_or(0);
            let counted = usize::try_from(stored).unwrap_or(0).max(inventory);
            (status["operation"]["phase"] == "Succeeded" && counted >= n).then_some(())
        },
    );
    w
}

/// Pushes `from` → `to` in every file of `many-0 .. n`.
fn push_every_value(w: &World, n: usize, from: &str, to: &str) {
    let clone = w.clone_origin(&format!("pushing-{to}"));
    for i in 0..n {
        let file = clone.join(format!("live/default/configmaps/many-{i}.yaml"));
        let text = std::fs::read_to_string(&file).expect("the file");
        std::fs::write(&file, text.replace(from, to)).expect("write");
    }
    w.commit_all_and_push_rebasing(&clone, &format!("every value is {to}"));
}

/// "No edit lost" case 3 with a push made while backflow is down: an apply of `N` changed
/// files killed part-way, then somebody pushes over every file before backflow starts again.
/// At start an object the cut apply wrote reads as its operation's commit holds it (the
/// claim's `operation.commit`), not as a live change since the commit the live side last held
/// in full: the second push stands everywhere. (Read against the in-step commit alone, the
/// objects the cut apply wrote were written back over the second push.)
#[test]
fn a_push_over_an_apply_cut_short_made_while_backflow_was_down_stands() {
    const N: usize = 200;
    let mut w = many_adopted(N);
    push_every_value(&w, N, "old", "new");
    wait_for(
        "the apply to write some objects",
        || {
            format!(
                "{} new live; {:#}",
                value_of(&w, "new"),
                claim(&w)["operation"]
            )
        },
        || (value_of(&w, "new") > 0).then_some(()),
    );
    w.crash();
    push_every_value(&w, N, "new", "newer");
    w.restart(&[]);
    wait_all_live(&w, N, "newer", "");
    w.wait_settled();
    let stale = not_in_git(&w, "many", N, "newer");
    assert!(
        stale.is_empty(),
        "files written back over the push: {stale:?}"
    );
}

/// Waits until every `ConfigMap` `many-0 .. n` reads `v` live (`context` says why in the log).
fn wait_all_live(w: &World, n: usize, v: &str, context: &str) {
    wait_for(
        &format!("all {n} {v} live{context}"),
        || {
            let in_git = n - not_in_git(w, "many", n, v).len();
            format!(
                "{} {v} live, {in_git} {v} in Git; claim {:#}",
                value_of(w, v),
                claim(w)["operation"]
            )
        },
        || (value_of(w, v) == n).then_some(()),
    );
}

fn many_files_survive_a_stop_during_their_apply(stop: Stop) {
    const N: usize = 120;
    let mut w = many_adopted(N);
    // `kubectl describe` of the claim stays a page: the inventory is summarised, not listed.
    let described = w.kubectl(&[
        "describe",
        "nativeclaim",
        "default",
        "-n",
        "backflow-system",
    ]);
    assert!(
        described.lines().count() < 120 && !described.contains("many-7"),
        "{described}"
    );
    push_every_value(&w, N, "old", "new");
    // Killed as soon as the apply has begun reaching the live side.
    wait_for(
        "the apply to begin",
        || format!("{:#}", claim(&w)["operation"]),
        || (value_of(&w, "new") > 0 || claim(&w)["operation"]["phase"] == "Running").then_some(()),
    );
    let applied_at_kill = value_of(&w, "new");
    match stop {
        Stop::Kill => w.crash_and_restart(&[]),
        Stop::Term => w.restart(&[]),
    }
    let context = format!(" ({stop:?} with {applied_at_kill} applied)");
    wait_all_live(&w, N, "new", &context);
    w.wait_settled();
    let reverted = not_in_git(&w, "many", N, "new");
    assert!(reverted.is_empty(), "files reverted in Git: {reverted:?}");
}

/// Which of the files of `ConfigMap`s `default/{prefix}-0 .. n` do not read `v` in Git.
fn not_in_git(w: &World, prefix: &str, n: usize, v: &str) -> Vec<usize> {
    (0..n)
        .filter(|i| {
            w.show(&format!("live/default/configmaps/{prefix}-{i}.yaml"))
                .is_none_or(|t| !t.contains(v))
        })
        .collect()
}
