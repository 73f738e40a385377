//! What a push may not do to the live side, with `serve`'s default `NativeClaim` and real `git`
//! pushes: wipe it (a mass prune waits for a person), change backflow's own configuration (an
//! age recipient added by a pusher never encrypts a Secret), or stop the applier with one file
//! it cannot read.

use std::process::Command;

use serde_json::Value;

use crate::apply::{claim, cm_value, create_adopted, live_absent, wait_acting, wait_applied};
use crate::common::*;
use crate::secrets::sops_bin;

/// Condition `type_` of the default claim, if it has one.
fn claim_condition(w: &World, type_: &str) -> Option<Value> {
    claim(w)["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// The Events recorded about the default claim, as (reason, message).
fn claim_events(w: &World) -> Vec<(String, String)> {
    let list = w.get_json(&["events", "-n", "backflow-system"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["kind"] == "NativeClaim")
        .map(|e| {
            let text = |f: &str| e[f].as_str().unwrap_or_default().to_string();
            (text("reason"), text("message"))
        })
        .collect()
}

/// Sets `key: value` in the data of live `ConfigMap` `name`, as a person would with kubectl.
fn patch_data(w: &World, name: &str, key: &str, value: &str) {
    let patch = serde_json::json!({"data": {key: value}}).to_string();
    w.kubectl(&["patch", "configmap", name, "--type=merge", "-p", &patch]);
}

/// A server whose default claim acts, with `ConfigMaps` `names` (each holding `v: <name>`)
/// created through the API, pushed and adopted.
pub(crate) fn started_with(names: &[&str]) -> World {
    let w = World::start(&[]);
    wait_acting(&w);
    for name in names {
        create_adopted(&w, name, name);
    }
    w
}

/// `git rm -r` of the whole folder, pushed: nothing is deleted until a person confirms the
/// commit, backflow's own configuration and the system namespaces survive even then, and the
/// server goes on mirroring meanwhile.
#[test]
fn a_push_removing_the_whole_folder_is_held_until_a_person_confirms_it() {
    let w = started_with(&["a", "b", "c"]);
    let clone = w.clone_origin("mallory");
    w.git_in(Some(&clone), &["rm", "-r", "-q", "live"]);
    let wipe = w.commit_all_and_push(&clone, "mallory removes everything");

    let held = wait_for(
        "the prune to be held",
        || format!("{:#}", claim(&w)),
        || {
            let status = claim(&w);
            (status["pruneHeld"]["commit"] == wipe.as_str()).then_some(status)
        },
    );
    assert_eq!(held["pruneHeld"]["pruning"], 3, "{held:#}");
    for name in ["a", "b", "c"] {
        assert_eq!(
            cm_value(&w, name, "v").as_deref(),
            Some(name),
            "{name} is kept"
        );
    }
    let ready = claim_condition(&w, "Ready").expect("Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("PruneHeld"))
    );
    let message = claim_condition(&w, "PruneHeld").expect("PruneHeld")["message"].to_string();
    assert!(
        message.contains(&wipe) && message.contains("backflow.dev/confirm-prune"),
        "{message}"
    );
    wait_for(
        "an Event naming the held commit",
        || format!("{:?}", claim_events(&w)),
        || {
            claim_events(&w)
                .into_iter()
                .find(|(r, m)| r == "PruneHeld" && m.contains(&wipe))
        },
    );
    let refused = held["refusedChanges"].to_string();
    assert!(
        refused.contains("removed in Git") && refused.contains("which stay"),
        "{refused}"
    );

    // Meanwhile the mirror goes on.
    w.apply(&configmap("default", "later", &[("v", "later")]));
    w.wait_present("live/default/configmaps/later.yaml");

    w.kubectl(&[
        "annotate",
        "nativeclaim",
        "default",
        "-n",
        "backflow-system",
        &format!("backflow.dev/confirm-prune={wipe}"),
    ]);
    wait_for(
        "the confirmed prune",
        || format!("{:#}", claim(&w)),
        || {
            ["a", "b", "c"]
                .iter()
                .all(|n| live_absent(&w, n))
                .then_some(())
        },
    );
    assert_eq!(
        cm_value(&w, "later", "v").as_deref(),
        Some("later"),
        "what Git declares stays"
    );
    for ns in ["default", "kube-system", "kube-public", "backflow-system"] {
        assert_eq!(
            w.kubectl_run(&["get", "namespace", ns]).code,
            Some(0),
            "namespace {ns}"
        );
    }
    for kept in [
        vec!["get", "gittarget", "default", "-n", "backflow-system"],
        vec!["get", "nativeclaim", "default", "-n", "backflow-system"],
        vec!["get", "gitprovider", "default", "-n", "backflow-system"],
        vec!["get", "crd", "gittargets.backflow.dev"],
    ] {
        let out = w.kubectl_run(&kept);
        assert_eq!(out.code, Some(0), "{kept:?} is kept:\n{out}");
    }
    wait_for(
        "the claim to be Ready again",
        || format!("{:#}", claim(&w)),
        || {
            let status = claim(&w);
            (status["pruneHeld"].is_null()
                && claim_condition(&w, "PruneHeld").is_none()
                && claim_condition(&w, "Ready").is_some_and(|c| c["status"] == "True"))
            .then_some(())
        },
    );
    assert!(
        claim_events(&w).iter().any(|(r, _)| r == "PruneConfirmed"),
        "{:?}",
        claim_events(&w)
    );
}

/// A push that adds an age recipient to the `GitTarget` (and a claim of its own) changes
/// nothing live: Secrets written afterwards stay unreadable to the pusher's key (checked with
/// the real `sops`), and the claim says what it refused.
#[test]
fn a_pushed_recipient_never_reads_a_secret() {
    let w = World::start(&[]);
    wait_acting(&w);
    let (secret_key, recipient) = backflow_sops::generate_identity(&mut rand::rng());
    let key_file = w.dirs.work.join("mallory.agekey");
    std::fs::write(&key_file, secret_key.as_bytes()).expect("write the key");

    let clone = w.clone_origin("mallory");
    let target = "live/backflow-system/backflow.dev/gittargets/default.yaml";
    let text = std::fs::read_to_string(clone.join(target)).expect("the target's file");
    assert!(text.contains("recipients:\n"), "{text}");
    let with_mine = text.replace(
        "recipients:\n",
        &format!("recipients:\n        - {recipient}\n"),
    );
    std::fs::write(clone.join(target), with_mine).expect("edit");
    let claim_file = clone.join("live/backflow-system/backflow.dev/nativeclaims/mine.yaml");
    std::fs::write(
        &claim_file,
        "apiVersion: backflow.dev/v1alpha1\nkind: NativeClaim\nmetadata:\n  name: mine\n  namespace: backflow-system\nspec: {}\n",
    )
    .expect("write");
    let push = w.commit_all_and_push(&clone, "mallory adds her key");
    let op = wait_applied(&w, &push);
    let status = claim(&w);
    let refused = status["refusedChanges"].to_string();
    assert!(
        refused.contains("gittargets/default.yaml") && refused.contains("nativeclaims/mine.yaml"),
        "{op:#}\n{status:#}"
    );
    let condition = claim_condition(&w, "GitChangesRefused").expect("GitChangesRefused");
    assert_eq!(condition["status"], "True");
    let live = w.get_json(&["gittarget", "default", "-n", "backflow-system"]);
    assert!(!live["spec"].to_string().contains(&recipient), "{live:#}");
    assert_ne!(
        w.kubectl_run(&["get", "nativeclaim", "mine", "-n", "backflow-system"])
            .code,
        Some(0)
    );

    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=token=hunter2",
    ]);
    let file = w.wait_present("live/default/secrets/token.sops.yaml");
    let sealed = w.dirs.work.join("token.sops.yaml");
    std::fs::write(&sealed, &file).expect("write");
    let decrypt = |key: &std::path::Path| {
        let mut cmd = Command::new(sops_bin());
        cmd.args(["-d", "--input-type", "yaml", "--output-type", "json"])
            .arg(&sealed)
            .current_dir(&w.dirs.work)
            .env("HOME", &w.dirs.home)
            .env_remove("SOPS_AGE_KEY")
            .env("SOPS_AGE_KEY_FILE", key);
        run_bounded("sops -d", cmd)
    };
    let mallory = decrypt(&key_file);
    assert_ne!(
        mallory.code,
        Some(0),
        "the pusher's key reads the Secret:\n{mallory}"
    );
    let server = decrypt(&w.dirs.data.join("age.key"));
    assert_eq!(server.code, Some(0), "{server}");
}

/// A pushed file the applier cannot read blocks only what it declared: the rest of the commit
/// is applied and pruned, the claim names the file, and the fix is applied when pushed.
#[test]
fn a_file_the_applier_cannot_read_blocks_only_itself() {
    let w = started_with(&["a", "b", "c"]);
    let clone = w.clone_origin("bob");
    let a = "live/default/configmaps/a.yaml";
    let good = std::fs::read_to_string(clone.join(a)).expect("a's file");
    std::fs::write(clone.join(a), "apiVersion: v1\nkind: ConfigMap\ndata: [\n").expect("break a");
    std::fs::remove_file(clone.join("live/default/configmaps/b.yaml")).expect("remove b");
    std::fs::write(
        clone.join("live/default/configmaps/d.yaml"),
        configmap("default", "d", &[("v", "d")]),
    )
    .expect("add d");
    let push = w.commit_all_and_push(&clone, "bob breaks a, removes b, adds d");
    let op = wait_applied(&w, &push);
    assert_eq!(cm_value(&w, "d", "v").as_deref(), Some("d"), "{op:#}");
    wait_for(
        "b to be pruned",
        || format!("{:#}", claim(&w)),
        || live_absent(&w, "b").then_some(()),
    );
    assert_eq!(
        cm_value(&w, "a", "v").as_deref(),
        Some("a"),
        "a is left as it was"
    );
    let status = claim(&w);
    assert!(
        status["unreadableFiles"].to_string().contains(a),
        "{status:#}"
    );
    let condition = claim_condition(&w, "FilesUnreadable").expect("FilesUnreadable");
    assert!(
        condition["message"].to_string().contains(a),
        "{condition:#}"
    );
    assert!(
        status["inventory"]
            .to_string()
            .contains("default_a__ConfigMap"),
        "still owned"
    );

    std::fs::write(clone.join(a), good.replace("v: a", "v: fixed")).expect("fix a");
    let fixed = w.commit_all_and_push_rebasing(&clone, "bob fixes a");
    wait_applied(&w, &fixed);
    wait_for(
        "a's fix to be applied",
        || format!("{:#}", claim(&w)),
        || (cm_value(&w, "a", "v").as_deref() == Some("fixed")).then_some(()),
    );
    wait_for(
        "the claim to stop naming the file",
        || format!("{:#}", claim(&w)),
        || {
            (claim(&w)["unreadableFiles"].is_null()
                && claim_condition(&w, "FilesUnreadable").is_none())
            .then_some(())
        },
    );
}

/// A 1.3 MB file whose hundred thousand aliases would expand to gigabytes is refused before it
/// is expanded: the server's memory barely grows, the file is named, and the rest of the push
/// is applied.
#[test]
fn an_alias_bomb_is_refused_before_it_is_expanded() {
    let w = started_with(&["a"]);
    let before = w.server_rss();
    let clone = w.clone_origin("mallory");
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n  namespace: default\ndata: {}\nx: &a [",
    );
    bomb.push_str(&vec!["\"0123456789abcdef\""; 256].join(", "));
    bomb.push_str("]\ny:\n");
    for _ in 0..100_000 {
        bomb.push_str("  - *a\n");
    }
    assert!(bomb.len() > 700_000, "{}", bomb.len());
    let path = "live/default/configmaps/bomb.yaml";
    std::fs::write(clone.join(path), &bomb).expect("write the bomb");
    std::fs::write(
        clone.join("live/default/configmaps/fine.yaml"),
        configmap("default", "fine", &[("v", "fine")]),
    )
    .expect("write");
    let push = w.commit_all_and_push(&clone, "mallory pushes a bomb");
    wait_applied(&w, &push);
    assert_eq!(cm_value(&w, "fine", "v").as_deref(), Some("fine"));
    let status = claim(&w);
    let unreadable = status["unreadableFiles"].to_string();
    assert!(
        unreadable.contains(path) && unreadable.contains("aliases"),
        "{status:#}"
    );
    // The mirror reads the folder too: a live edit is judged on the tip holding the bomb.
    patch_data(&w, "a", "v", "edited");
    w.wait_file("live/default/configmaps/a.yaml", |t| t.contains("edited"));
    let grown = w.server_rss().saturating_sub(before);
    assert!(grown < 50 << 20, "the server grew by {} MiB", grown >> 20);
}

/// A pushed file the mirror cannot read (invalid YAML where an object lives, a symlink, YAML
/// that is no manifest) blocks only the live writes that must change it: other objects are
/// written as usual, the refused edit waits, and the push that fixes the file brings it into
/// Git merged with the fix, and the fix onto the live side, without a restart.
#[test]
fn a_bad_file_blocks_only_its_own_writes_and_they_arrive_after_the_fix() {
    let w = started_with(&["a", "b"]);
    let clone = w.clone_origin("bob");
    let a = "live/default/configmaps/a.yaml";
    let good = std::fs::read_to_string(clone.join(a)).expect("a's file");
    std::fs::write(clone.join(a), "apiVersion: v1\nkind: ConfigMap\ndata: [\n").expect("break a");
    std::os::unix::fs::symlink(
        "/etc/passwd",
        clone.join("live/default/configmaps/passwd.yaml"),
    )
    .expect("symlink");
    std::fs::write(clone.join("live/notes.yaml"), "todo: write manifests\n").expect("notes");
    let broken = w.commit_all_and_push(&clone, "bob breaks a, links passwd, writes notes");
    wait_applied(&w, &broken);
    let unreadable = claim(&w)["unreadableFiles"].to_string();
    for path in [a, "live/default/configmaps/passwd.yaml", "live/notes.yaml"] {
        assert!(unreadable.contains(path), "{path}: {unreadable}");
    }

    patch_data(&w, "a", "live", "edit");
    patch_data(&w, "b", "live", "edit");
    w.wait_file("live/default/configmaps/b.yaml", |t| {
        t.contains("live: edit")
    });
    let refused = wait_for(
        "the target to report the refused write",
        || format!("{:?}", w.target_condition("default", "GitPathAccepted")),
        || {
            w.target_condition("default", "GitPathAccepted")
                .filter(|c| c.status == "False")
        },
    );
    assert!(refused.message.contains(a), "{refused:?}");
    assert_eq!(
        w.show(a).as_deref(),
        Some("apiVersion: v1\nkind: ConfigMap\ndata: [\n")
    );

    // The fix adds a key of its own; the live edit is not in it.
    std::fs::write(clone.join(a), good.replace("v: a", "v: a\n  fixed: by-git")).expect("fix a");
    let fix = w.commit_all_and_push_rebasing(&clone, "bob fixes a");
    assert!(
        w.show_at(&fix, a)
            .is_some_and(|t| !t.contains("live: edit"))
    );
    let file = w.wait_file(a, |t| t.contains("live: edit"));
    assert!(file.contains("fixed: by-git"), "Git's fix is kept: {file}");
    wait_for(
        "the fix to reach the live side beside the edit",
        || format!("{:?}", w.get_json(&["configmap", "a"])["data"]),
        || {
            let data = w.get_json(&["configmap", "a"])["data"].clone();
            (data["fixed"] == "by-git" && data["live"] == "edit").then_some(())
        },
    );
    wait_for(
        "the refusal to clear",
        || format!("{:?}", w.target_condition("default", "GitPathAccepted")),
        || {
            w.target_condition("default", "GitPathAccepted")
                .filter(|c| c.status == "True")
        },
    );
}

/// `sops -e` of `plain` to `recipient` alone (the real binary, outside any folder's
/// `.sops.yaml`), with the rule Flux's guide uses: only `data` and `stringData` encrypted.
fn sops_encrypt_to(w: &World, plain: &str, recipient: &str) -> String {
    let file = w.dirs.work.join("elsewhere.sops.yaml");
    std::fs::write(&file, plain).expect("write");
    let mut cmd = Command::new(sops_bin());
    cmd.args([
        "-e",
        "-i",
        "--encrypted-regex",
        "^(data|stringData)$",
        "--age",
        recipient,
    ])
    .arg(&file)
    .current_dir(&w.dirs.work)
    .env("HOME", &w.dirs.home)
    .env_remove("SOPS_AGE_KEY")
    .env_remove("SOPS_AGE_KEY_FILE")
    .env_remove("SOPS_AGE_RECIPIENTS");
    let out = run_bounded("sops -e", cmd);
    assert_eq!(out.code, Some(0), "sops -e failed:\n{out}");
    std::fs::read_to_string(&file).expect("read")
}

/// A Secret pushed encrypted to a key backflow lacks blocks only itself (prunes of other
/// objects go on); a Secret pushed in plain text is applied, reported, and moved to an
/// encrypted file by the next live write of it.
#[test]
fn secrets_pushed_to_another_key_or_in_plain_text_block_nothing() {
    let w = started_with(&["a", "b"]);
    let (_, theirs) = backflow_sops::generate_identity(&mut rand::rng());
    let secret = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: default\ntype: Opaque\ndata:\n  password: aHVudGVyMg==\n"
        )
    };
    let clone = w.clone_origin("carol");
    std::fs::create_dir_all(clone.join("live/default/secrets")).expect("mkdir");
    let sealed = "live/default/secrets/theirs.sops.yaml";
    std::fs::write(
        clone.join(sealed),
        sops_encrypt_to(&w, &secret("theirs"), &theirs),
    )
    .expect("write");
    let plain = "live/default/secrets/plain.yaml";
    std::fs::write(clone.join(plain), secret("plain")).expect("write");
    std::fs::remove_file(clone.join("live/default/configmaps/b.yaml")).expect("remove b");
    let push = w.commit_all_and_push(&clone, "carol pushes two secrets and removes b");
    wait_applied(&w, &push);
    wait_for(
        "b to be pruned",
        || format!("{:#}", claim(&w)),
        || live_absent(&w, "b").then_some(()),
    );
    let status = claim(&w);
    let unreadable = status["unreadableFiles"].to_string();
    assert!(
        unreadable.contains(sealed) && unreadable.contains("decrypt"),
        "{status:#}"
    );
    assert!(
        status["plaintextSecrets"].to_string().contains(plain),
        "{status:#}"
    );
    assert_eq!(
        claim_condition(&w, "PlaintextSecrets").map(|c| c["status"].clone()),
        Some(Value::from("True"))
    );
    let live = w.get_json(&["secret", "plain"]);
    assert_eq!(
        live["data"]["password"], "aHVudGVyMg==",
        "applied as Flux would"
    );

    // The next live write moves it: encrypted, merged, the plain text gone from the tip.
    w.kubectl(&["label", "secret", "plain", "rotated=soon"]);
    let moved = w.wait_present("live/default/secrets/plain.sops.yaml");
    assert!(!moved.contains("aHVudGVyMg=="), "{moved}");
    assert!(moved.contains("ENC["), "{moved}");
    assert!(moved.contains("rotated: soon"), "{moved}");
    w.wait_absent(plain);
}

/// A claim on a folder inside the default claim's folder would apply and prune objects the
/// default claim applies: it is refused, naming the claim that owns the folder.
#[test]
fn a_claim_inside_another_claims_folder_is_refused() {
    let w = World::start(&[]);
    wait_acting(&w);
    w.apply(
        r"apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {name: inner, namespace: backflow-system}
spec: {}
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: inner, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: live/team
  applierClaimRef: {kind: NativeClaim, name: inner}
",
    );
    let condition = wait_for(
        "the nested claim to be refused",
        || {
            format!(
                "{:#}",
                w.get_json(&["nativeclaim", "inner", "-n", "backflow-system"])
            )
        },
        || {
            let claim = w.get_json(&["nativeclaim", "inner", "-n", "backflow-system"]);
            claim["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "ApplierClaimReady" && c["reason"] == "FolderNested")
                .cloned()
        },
    );
    assert_eq!(condition["status"], "False");
    assert!(
        condition["message"]
            .to_string()
            .contains("NativeClaim backflow-system/default"),
        "{condition:#}"
    );
    // The default claim goes on (its adoption of the new objects may be in flight meanwhile).
    wait_for(
        "the default claim Ready",
        || format!("{:#}", claim(&w)),
        || claim_condition(&w, "Ready").filter(|c| c["status"] == "True"),
    );
}

/// A claim applying more objects than its status should hold keeps its inventory in
/// `ConfigMaps` beside it, which are never mirrored into Git; its status is recorded at every
/// operation, and after a restart a push removing files prunes them.
#[test]
fn a_large_inventory_lives_beside_the_claim() {
    let mut w = World::start(&[]);
    wait_acting(&w);
    let clone = w.clone_origin("bulk");
    let dir = clone.join("live/default/configmaps");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for i in 0..1200 {
        std::fs::write(
            dir.join(format!("bulk-{i}.yaml")),
            configmap("default", &format!("bulk-{i}"), &[("i", &i.to_string())]),
        )
        .expect("write");
    }
    let bulk = w.commit_all_and_push(&clone, "1,200 objects");
    wait_applied(&w, &bulk);
    let status = claim(&w);
    assert!(
        status["inventory"].is_null(),
        "{:#}",
        status["inventoryStore"]
    );
    let stored = status["inventoryStore"].clone();
    assert!(
        stored["entries"].as_u64().is_some_and(|n| n >= 1200),
        "{stored:#}"
    );
    let chunks = w.get_json(&[
        "configmaps",
        "-n",
        "backflow-system",
        "-l",
        "backflow.dev/record-of=backflow-system.default",
    ]);
    let names: Vec<String> = chunks["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        names.len() as u64,
        stored["configMaps"].as_u64().unwrap_or(0),
        "{names:?}"
    );
    w.wait_settled();
    let files = w.files();
    assert!(
        !files.iter().any(|f| f.contains("default-inventory")),
        "never mirrored"
    );

    w.restart(&[]);
    wait_acting(&w);
    std::fs::remove_file(dir.join("bulk-7.yaml")).expect("remove");
    std::fs::remove_file(dir.join("bulk-8.yaml")).expect("remove");
    let removal = w.commit_all_and_push_rebasing(&clone, "two fewer");
    wait_applied(&w, &removal);
    wait_for(
        "the removed objects to be pruned",
        || format!("{:#}", claim(&w)["operation"]),
        || (live_absent(&w, "bulk-7") && live_absent(&w, "bulk-8")).then_some(()),
    );
    assert_eq!(cm_value(&w, "bulk-9", "i").as_deref(), Some("9"));
    let after = claim(&w)["inventoryStore"]["entries"].as_u64().unwrap_or(0);
    assert_eq!(
        after,
        stored["entries"].as_u64().unwrap_or(0) - 2,
        "{:#}",
        claim(&w)
    );
}

/// The uid of the live side's `kube-system` Namespace: the instance a folder's owner file names.
fn instance(w: &World) -> String {
    w.kubectl(&[
        "get",
        "namespace",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ])
}

/// A second `serve` (its own data dir) on the repository and folder a first one writes: the
/// folder's owner file names the first, so the second writes nothing there (its `.sops.yaml`
/// recipients stay the first's), applies nothing from it, and says who holds it. Once the first
/// is stopped and a person deletes the owner file, the second takes the folder over without a
/// restart: its refused writes land and the folder's objects reach its live side.
#[test]
fn a_second_backflow_on_one_folder_is_refused_until_it_is_handed_over() {
    let mut first = started_with(&["alpha"]);
    let owner = first.wait_present("live/.backflow-owner");
    let holder = instance(&first);
    assert!(owner.contains(&format!("instance: {holder}")), "{owner}");
    let recipients = first
        .show("live/.sops.yaml")
        .expect("the first's .sops.yaml");

    let url = format!("file://{}", first.origin().display());
    let second = World::start(&["--repo", &url, "--git-refresh-interval", "1s"]);
    second.apply(&configmap("default", "beta", &[("v", "beta")]));
    let refused = wait_for(
        "the second's target to be refused",
        || {
            format!(
                "{:?}",
                second.target_condition("default", "GitPathAccepted")
            )
        },
        || {
            second
                .target_condition("default", "GitPathAccepted")
                .filter(|c| c.status == "False" && c.message.contains("another backflow"))
        },
    );
    assert!(refused.message.contains(&holder), "{}", refused.message);
    let ready = second.target_condition("default", "Ready").expect("Ready");
    assert_eq!(ready.status, "False", "{}", ready.message);
    wait_for(
        "the second's claim to apply nothing and say why",
        || format!("{:#}", claim(&second)),
        || {
            format!("{:#}", claim(&second))
                .contains(&holder)
                .then_some(())
        },
    );
    assert!(
        live_absent(&second, "alpha"),
        "nothing applied from the folder"
    );
    assert_eq!(
        first.show("live/.sops.yaml").as_deref(),
        Some(recipients.as_str())
    );
    assert_eq!(first.show("live/default/configmaps/beta.yaml"), None);
    assert_eq!(
        first.show("live/.backflow-owner").as_deref(),
        Some(owner.as_str())
    );

    // The hand-over: the first is stopped, a person deletes the owner file.
    first.stop();
    let clone = first.clone_origin("handover");
    first.git_in(Some(&clone), &["rm", "-q", "live/.backflow-owner"]);
    first.commit_all_and_push(&clone, "hand live/ to the second backflow");
    let taken = first.wait_file("live/.backflow-owner", |t| {
        t.contains(&format!("instance: {}", instance(&second)))
    });
    assert!(!taken.contains(&holder), "{taken}");
    first.wait_present("live/default/configmaps/beta.yaml");
    wait_for(
        "the folder's objects on the second's live side",
        || format!("{:?}", cm_value(&second, "alpha", "v")),
        || cm_value(&second, "alpha", "v").filter(|v| v == "alpha"),
    );
}

/// `spec.pruneLimitPercent` is the claim's own: a push removing six of its eight `ConfigMaps`
/// is held under the default (a quarter), and raising the limit to 90 lets that same prune
/// through without a confirmation.
#[test]
fn raising_the_prune_limit_lets_a_held_prune_through() {
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let w = started_with(&names);
    let clone = w.clone_origin("cleanup");
    for name in &names[..6] {
        w.git_in(
            Some(&clone),
            &["rm", "-q", &format!("live/default/configmaps/{name}.yaml")],
        );
    }
    let cleanup = w.commit_all_and_push(&clone, "remove six of eight");
    let held = wait_for(
        "the prune to be held under the default limit",
        || format!("{:#}", claim(&w)),
        || {
            let status = claim(&w);
            (status["pruneHeld"]["commit"] == cleanup.as_str()).then_some(status)
        },
    );
    assert_eq!(held["pruneHeld"]["pruning"], 6, "{held:#}");
    assert_eq!(cm_value(&w, "a", "v").as_deref(), Some("a"));

    w.kubectl(&[
        "patch",
        "nativeclaim",
        "default",
        "-n",
        "backflow-system",
        "--type=merge",
        "-p",
        r#"{"spec":{"pruneLimitPercent":90}}"#,
    ]);
    wait_for(
        "the prune under the raised limit",
        || format!("{:#}", claim(&w)),
        || names[..6].iter().all(|n| live_absent(&w, n)).then_some(()),
    );
    for kept in &names[6..] {
        assert_eq!(cm_value(&w, kept, "v").as_deref(), Some(*kept));
    }
    wait_for(
        "the hold to clear",
        || format!("{:#}", claim(&w)),
        || claim(&w)["pruneHeld"].is_null().then_some(()),
    );
}
