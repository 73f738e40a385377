//! The YAML planner driving a real branch worker (window 0) against a bare repository, with the
//! results read back through the `git` program.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backflow_api::{GroupResource, ManualClock, ObjectKey};
use backflow_branch::{Intent, SweepScope};
use backflow_git::BranchMetrics;
use backflow_git::{BranchWorker, FileRemote, Identity, LocalRepo, WorkerConfig, WorkerEvent};
use backflow_manifest::{KindMap, YamlPlanner, render};
use serde_json::{Value, json};

use backflow_testkit::git_out as git;

struct Setup {
    dir: tempfile::TempDir,
    worker: BranchWorker,
    kinds: KindMap,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(
            dir.path(),
            &["init", "--quiet", "--bare", "-b", "main", "remote.git"],
        );
        let kinds = KindMap::new();
        kinds.insert(GroupResource::new("", "configmaps"), "ConfigMap");
        kinds.insert(GroupResource::new("apps", "deployments"), "Deployment");
        let clock = Arc::new(ManualClock::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        ));
        let mut cfg = WorkerConfig::new("main");
        cfg.timing.window = Duration::ZERO;
        cfg.committer = Identity::new("backflow test", "backflow@example.com");
        cfg.seed = 1;
        let repo = LocalRepo::open_or_init(&dir.path().join("cache.git")).expect("cache");
        let url = format!("file://{}", dir.path().join("remote.git").display());
        let worker = BranchWorker::new(
            cfg,
            repo,
            Box::new(FileRemote::new(&url)),
            Box::new(YamlPlanner::new(kinds.clone())),
            clock,
            BranchMetrics::disabled(),
        );
        Self { dir, worker, kinds }
    }

    fn remote(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    fn submit(&mut self, intent: Intent) -> Vec<WorkerEvent> {
        self.worker.submit(intent);
        self.worker.poll();
        self.worker.take_events()
    }

    fn files(&self) -> BTreeSet<String> {
        git(self.remote(), &["ls-tree", "-r", "--name-only", "main"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn show(&self, path: &str) -> String {
        git(self.remote(), &["show", &format!("main:{path}")])
    }

    /// The branch's tip.
    fn tip(&self) -> String {
        git(self.remote(), &["rev-parse", "main"])
            .trim()
            .to_string()
    }

    /// `conf` written with `a: 1`, then `a: 2`: the commit before the edit (the one a force-push
    /// goes back to) and the edit's, which the live side held in full.
    fn conf_held_then_edited(&mut self) -> (String, backflow_branch::CommitId) {
        self.submit(Intent::put(
            "live",
            cm_key("web", "conf"),
            sanitized_conf("1"),
        ));
        let before = self.tip();
        self.submit(Intent::put(
            "live",
            cm_key("web", "conf"),
            sanitized_conf("2"),
        ));
        let edited = self.tip().parse().expect("a commit id");
        (before, edited)
    }

    /// Somebody force-pushes the branch back to `commit`.
    fn rewind_to(&self, commit: &str) {
        git(self.remote(), &["update-ref", "refs/heads/main", commit]);
    }

    /// The worker reads the remote and reports that the branch lost its commits.
    fn notice_divergence(&mut self) {
        self.worker.notify_remote_moved();
        self.worker.poll();
        let diverged = self.worker.take_events();
        assert!(
            diverged
                .iter()
                .any(|e| matches!(e, WorkerEvent::Diverged(_))),
            "{diverged:?}"
        );
    }

    /// As the controller after a divergence: the streams list again, then the worker is told
    /// it recovered.
    fn resync_after_divergence(&mut self, intents: Vec<Intent>) {
        self.worker.submit_resync("live", intents);
        self.worker.resync_complete("live".into());
        self.worker.recovered();
    }

    /// Pushes the removal of `path` as a person would, through a clone.
    fn push_by_hand_removal(&self, path: &str) {
        let work = self.work();
        git(&work, &["rm", "--quiet", path]);
        git(&work, &["commit", "--quiet", "-m", "removed by hand"]);
        git(
            &work,
            &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        );
    }

    /// A person's clone of the remote, up to date with its branch.
    fn work(&self) -> PathBuf {
        let work = self.dir.path().join("work");
        if !work.exists() {
            git(
                self.dir.path(),
                &[
                    "clone",
                    "--quiet",
                    self.remote().to_str().expect("utf8"),
                    "work",
                ],
            );
        }
        if !git(self.remote(), &["branch", "--list", "main"])
            .trim()
            .is_empty()
        {
            git(&work, &["fetch", "--quiet", "origin", "main"]);
            git(&work, &["reset", "--quiet", "--hard", "FETCH_HEAD"]);
        }
        work
    }

    /// Pushes files as a person would, through a clone.
    fn push_by_hand(&self, files: &[(&str, &str)]) {
        let work = self.work();
        for (path, content) in files {
            let p = work.join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, content).expect("write");
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "--quiet", "-m", "by hand"]);
        git(
            &work,
            &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        );
    }
}

fn cm_key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "configmaps"), ns, name)
}

fn cm(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "7"}, "data": data})
}

/// Where `conf` lives.
const CONF: &str = "live/web/configmaps/conf.yaml";

/// `conf` sanitized, as the mirror submits it: it reads exactly as a commit's document.
fn sanitized_conf(a: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "conf", "namespace": "web"}, "data": {"a": a}})
}

fn refused(events: &[WorkerEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            WorkerEvent::Refused { error, .. } => Some(error.to_string()),
            _ => None,
        })
        .collect()
}

const HAND_WRITTEN: &str = "\
# Everything team web runs, by hand.
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings # read at start-up
  namespace: web
data:
  mode: fast   # or slow
  level: 'debug'
---
# second
apiVersion: v1
kind: ConfigMap
metadata:
  name: flags
  namespace: web
data:
  beta: \"yes\"
";

#[test]
fn create_edit_delete_and_sweep_through_a_real_worker() {
    let mut s = Setup::new();

    // Create: canonical file at the layout path, sanitized, with bootstrap files.
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "app"),
        cm("web", "app", json!({"a": "y"})),
    ));
    assert!(refused(&events).is_empty(), "{events:?}");
    assert_eq!(
        s.files(),
        BTreeSet::from([
            "apps/.gittargetignore".to_string(),
            "apps/README.md".to_string(),
            "apps/web/configmaps/app.yaml".to_string(),
        ])
    );
    assert_eq!(
        s.show("apps/web/configmaps/app.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: web\ndata:\n  a: \"y\"\n"
    );

    // A person bundles two objects in one commented file elsewhere in the folder.
    s.push_by_hand(&[("apps/bundle.yaml", HAND_WRITTEN)]);
    let readme_before = s.show("apps/README.md");

    // Update in place: only the changed value moves; the other document is untouched.
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "settings"),
        cm("web", "settings", json!({"mode": "slow", "level": "debug"})),
    ));
    assert!(refused(&events).is_empty(), "{events:?}");
    assert_eq!(
        s.show("apps/bundle.yaml"),
        HAND_WRITTEN.replace("mode: fast   # or slow", "mode: slow   # or slow")
    );
    assert!(!s.files().contains("apps/web/configmaps/settings.yaml"));
    assert_eq!(s.show("apps/README.md"), readme_before);

    // Delete one document of the bundle: the other stays byte for byte.
    let events = s.submit(Intent::delete("apps", cm_key("web", "settings")));
    assert!(refused(&events).is_empty(), "{events:?}");
    let second = &HAND_WRITTEN[HAND_WRITTEN.find("# second").expect("doc 1")..];
    assert_eq!(s.show("apps/bundle.yaml"), second);

    // Deleting the last document removes the file.
    s.submit(Intent::delete("apps", cm_key("web", "flags")));
    assert!(!s.files().contains("apps/bundle.yaml"));

    // Sweep: only configmaps in namespace web, not in keep; db and the deployment stay.
    for (ns, name) in [("web", "keep"), ("web", "gone"), ("db", "other")] {
        s.submit(Intent::put(
            "apps",
            cm_key(ns, name),
            cm(ns, name, json!({"k": "v"})),
        ));
    }
    let deploy_key = ObjectKey::new(GroupResource::new("apps", "deployments"), "web", "gone");
    s.submit(Intent::put(
        "apps",
        deploy_key,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "gone", "namespace": "web"}, "spec": {"replicas": 1}}),
    ));
    let events = s.submit(Intent::sweep(
        "apps",
        SweepScope {
            resource: GroupResource::new("", "configmaps"),
            namespace: Some("web".into()),
            keep: BTreeSet::from([
                ("web".to_string(), "keep".to_string()),
                ("web".to_string(), "app".to_string()),
            ]),
            removable: None,
        },
    ));
    assert!(refused(&events).is_empty(), "{events:?}");
    let files = s.files();
    assert!(
        !files.contains("apps/web/configmaps/gone.yaml"),
        "{files:?}"
    );
    for kept in [
        "apps/web/configmaps/keep.yaml",
        "apps/web/configmaps/app.yaml",
        "apps/db/configmaps/other.yaml",
        "apps/web/apps/deployments/gone.yaml",
        "apps/README.md",
        "apps/.gittargetignore",
    ] {
        assert!(
            files.contains(kept),
            "{kept} must survive the sweep: {files:?}"
        );
    }

    // A name that would leave the folder is refused and nothing is written.
    let tip = git(s.remote(), &["rev-parse", "main"]);
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "../x"),
        cm("web", "../x", json!({})),
    ));
    let reasons = refused(&events);
    assert_eq!(reasons.len(), 1, "{events:?}");
    assert!(reasons[0].contains("../x"), "{reasons:?}");
    assert_eq!(git(s.remote(), &["rev-parse", "main"]), tip);

    // A delete of a type whose kind is unknown falls back to the layout path.
    let unknown = ObjectKey::new(GroupResource::new("example.com", "widgets"), "web", "w");
    s.submit(Intent::put(
        "apps",
        unknown.clone(),
        json!({"apiVersion": "example.com/v1",
        "kind": "Widget", "metadata": {"name": "w", "namespace": "web"}}),
    ));
    assert!(s.files().contains("apps/web/example.com/widgets/w.yaml"));
    s.submit(Intent::delete("apps", unknown));
    assert!(!s.files().contains("apps/web/example.com/widgets/w.yaml"));
    // Once the kind is known, a sweep of that type works; without it, a sweep is refused.
    let sweep = |resource: &str| {
        Intent::sweep(
            "apps",
            SweepScope {
                resource: GroupResource::new("example.com", resource),
                namespace: None,
                keep: BTreeSet::new(),
                removable: None,
            },
        )
    };
    let reasons = refused(&s.submit(sweep("gadgets")));
    assert!(
        reasons.iter().any(|r| r.contains("kind is unknown")),
        "{reasons:?}"
    );
    s.kinds
        .insert(GroupResource::new("example.com", "widgets"), "Widget");
    assert!(refused(&s.submit(sweep("widgets"))).is_empty());
}

#[test]
fn a_bad_file_blocks_only_itself_and_duplicates_refuse_the_folder() {
    let mut s = Setup::new();
    s.submit(Intent::put(
        "apps",
        cm_key("web", "a"),
        cm("web", "a", json!({"x": "1"})),
    ));
    s.submit(Intent::put(
        "apps",
        cm_key("web", "b"),
        cm("web", "b", json!({"x": "1"})),
    ));
    // A foreign file and a file that is not valid YAML where b lives.
    s.push_by_hand(&[
        ("apps/run.sh", "echo hi\n"),
        ("apps/web/configmaps/b.yaml", "data: [\n"),
    ]);
    let tip = git(s.remote(), &["rev-parse", "main"]);
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "b"),
        cm("web", "b", json!({"x": "2"})),
    ));
    let reasons = refused(&events);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("apps/web/configmaps/b.yaml")),
        "a write of the blocked file waits: {reasons:?}"
    );
    assert_eq!(
        git(s.remote(), &["rev-parse", "main"]),
        tip,
        "nothing changed"
    );
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "a"),
        cm("web", "a", json!({"x": "2"})),
    ));
    assert!(refused(&events).is_empty(), "{events:?}");
    let a = render(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "web"}, "data": {"x": "2"}}),
    );
    assert_eq!(
        s.show("apps/web/configmaps/a.yaml"),
        a,
        "the rest of the folder is written"
    );
    assert_eq!(
        s.show("apps/run.sh"),
        "echo hi\n",
        "the foreign file is untouched"
    );
    assert_eq!(s.show("apps/web/configmaps/b.yaml"), "data: [\n");

    let mut s = Setup::new();
    s.push_by_hand(&[("apps/one.yaml", &a), ("apps/two.yaml", &a)]);
    let events = s.submit(Intent::put(
        "apps",
        cm_key("web", "a"),
        cm("web", "a", json!({"x": "2"})),
    ));
    let reasons = refused(&events);
    assert!(
        reasons.iter().any(|r| r.contains("defined twice")),
        "{reasons:?}"
    );
}

/// A start-up resync published as changes of the commit the live side last held: a file a
/// push changed after it keeps the push's fields, and a sweep leaves alone a file added after
/// it (the applier creates it); an object the commit did not hold is written whole.
#[test]
fn a_resync_since_a_commit_keeps_what_git_gained_after_it() {
    let mut s = Setup::new();
    let path = "live/web/configmaps/conf.yaml";
    s.submit(Intent::put(
        "live",
        cm_key("web", "conf"),
        cm("web", "conf", json!({"a": "1", "b": "1"})),
    ));
    let held: backflow_branch::CommitId = git(s.remote(), &["rev-parse", "main"])
        .trim()
        .parse()
        .unwrap();
    let added = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: added\n  namespace: web\n";
    s.push_by_hand(&[
        (path, &s.show(path).replace("b: \"1\"", "b: git")),
        ("live/web/configmaps/added.yaml", added),
    ]);
    s.worker.notify_remote_moved();
    // The live side still reads as the held commit, with `a` edited, and a new object.
    let resync = vec![
        Intent::put(
            "live",
            cm_key("web", "conf"),
            cm("web", "conf", json!({"a": "live", "b": "1"})),
        )
        .since(held),
        Intent::put(
            "live",
            cm_key("web", "other"),
            cm("web", "other", json!({"c": "1"})),
        )
        .since(held),
        Intent::sweep(
            "live",
            SweepScope {
                resource: GroupResource::new("", "configmaps"),
                namespace: Some("web".into()),
                keep: BTreeSet::from([
                    ("web".to_string(), "conf".to_string()),
                    ("web".to_string(), "other".to_string()),
                ]),
                removable: None,
            },
        )
        .since(held),
    ];
    s.worker.submit_resync("live", resync);
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    let conf = s.show(path);
    assert!(
        conf.contains("a: \"live\"") && conf.contains("b: git"),
        "both sides' fields:\n{conf}"
    );
    assert!(
        s.files().contains("live/web/configmaps/added.yaml"),
        "{:?}",
        s.files()
    );
    assert!(
        s.show("live/web/configmaps/other.yaml")
            .contains("c: \"1\"")
    );
}

/// A resync at start-up of an object backflow pushed a live edit of after the commit the live
/// side last held in full (`b`), edited live again since (`a`), while somebody pushed another
/// value of `b`: `b` reads as backflow's push held it, so it did not change live since and
/// Git's later value stands; `a` is the live side's. (Read against the held commit alone, `b`
/// looked changed on both sides and the live value was written over the push.)
#[test]
fn a_resync_keeps_a_fields_later_push_when_the_live_side_held_it_since() {
    let mut s = Setup::new();
    let path = "live/web/configmaps/conf.yaml";
    let conf = |a: &str, b: &str| cm("web", "conf", json!({"a": a, "b": b}));
    s.submit(Intent::put("live", cm_key("web", "conf"), conf("1", "1")));
    let held: backflow_branch::CommitId = git(s.remote(), &["rev-parse", "main"])
        .trim()
        .parse()
        .unwrap();
    let before = Arc::new(backflow_branch::ObjectJson::new(&conf("1", "1")));
    s.submit(Intent::put("live", cm_key("web", "conf"), conf("1", "2")).edit_of(before));
    assert!(s.show(path).contains("b: \"2\""), "{}", s.show(path));
    s.push_by_hand(&[(path, &s.show(path).replace("b: \"2\"", "b: git"))]);
    s.worker.notify_remote_moved();
    let resync = vec![Intent::put("live", cm_key("web", "conf"), conf("live", "2")).since(held)];
    s.worker.submit_resync("live", resync);
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    let conf = s.show(path);
    assert!(
        conf.contains("a: \"live\"") && conf.contains("b: git"),
        "both sides' fields:\n{conf}"
    );
}

/// The same for an object created live after the commit the live side last held in full: that
/// commit holds none of it, but backflow's push of the create does, so a field that still reads
/// as that push held it keeps what Git gained since. (Written whole, the live value of `b` was
/// put back over the push.)
#[test]
fn a_resync_of_an_object_created_since_keeps_a_fields_later_push() {
    let mut s = Setup::new();
    let path = "live/web/configmaps/conf.yaml";
    let conf = |a: &str, b: &str| cm("web", "conf", json!({"a": a, "b": b}));
    s.submit(Intent::put(
        "live",
        cm_key("web", "other"),
        cm("web", "other", json!({"c": "1"})),
    ));
    let held: backflow_branch::CommitId = git(s.remote(), &["rev-parse", "main"])
        .trim()
        .parse()
        .unwrap();
    s.submit(Intent::put("live", cm_key("web", "conf"), conf("1", "1")));
    s.push_by_hand(&[(path, &s.show(path).replace("b: \"1\"", "b: git"))]);
    s.worker.notify_remote_moved();
    let resync = vec![Intent::put("live", cm_key("web", "conf"), conf("live", "1")).since(held)];
    s.worker.submit_resync("live", resync);
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    let conf = s.show(path);
    assert!(
        conf.contains("a: \"live\"") && conf.contains("b: git"),
        "both sides' fields:\n{conf}"
    );
}

/// Somebody force-pushes the branch back past the commit the live side last held in full, the
/// streams list the live side again, and somebody pushes the removal of an object before that
/// list is built. On a branch rewritten past the commit read, what Git lacks is written back
/// (the rewrite dropped it) — but this document the branch held when the live side was listed:
/// Git removed it after, and the removal stands. (It was written back over the removal.)
#[test]
fn a_removal_pushed_after_the_list_of_a_rewritten_branch_stands() {
    let mut s = Setup::new();
    let (before, in_step) = s.conf_held_then_edited();
    s.rewind_to(&before);
    s.notice_divergence();
    // The live side still holds what the in-step commit (now off the branch) held.
    s.resync_after_divergence(vec![
        Intent::put("live", cm_key("web", "conf"), sanitized_conf("2")).since(in_step),
    ]);
    s.push_by_hand_removal(CONF);
    s.worker.notify_remote_moved();
    s.worker.poll();
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    assert!(
        !s.files().contains(CONF),
        "the removal pushed after the list stands: {:?}",
        s.files()
    );
}

/// The branch force-pushed past the commit the live side last held in full; afterwards backflow
/// pushes a live edit of an object, somebody pushes another value of it, and backflow pushes
/// again. A resync read against the lost commit finds the object as backflow's push of the
/// edit held it among the branch's commits since the rewrite: unchanged live since, so the
/// later push stands. (Nothing was walked on a rewritten branch: the live value was written
/// over the push.)
#[test]
fn a_resync_against_a_lost_commit_keeps_a_push_over_an_edit_made_since_the_rewrite() {
    let mut s = Setup::new();
    let conf = sanitized_conf;
    let (before, in_step) = s.conf_held_then_edited();
    s.rewind_to(&before);
    s.worker.notify_remote_moved();
    s.worker.poll();
    s.resync_after_divergence(vec![
        Intent::put("live", cm_key("web", "conf"), conf("2")).since(in_step),
    ]);
    s.worker.poll();
    s.submit(Intent::put("live", cm_key("web", "conf"), conf("3")));
    assert!(s.show(CONF).contains("a: \"3\""), "{}", s.show(CONF));
    s.push_by_hand(&[(CONF, &s.show(CONF).replace("a: \"3\"", "a: git"))]);
    s.worker.notify_remote_moved();
    s.submit(Intent::put(
        "live",
        cm_key("web", "other"),
        cm("web", "other", json!({"c": "1"})),
    ));
    s.worker.submit_resync(
        "live",
        vec![Intent::put("live", cm_key("web", "conf"), conf("3")).since(in_step)],
    );
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    let conf = s.show(CONF);
    assert!(
        conf.contains("a: git"),
        "the push over the edit stands:\n{conf}"
    );
}

/// The same, with the removal pushed right after the force-push, before the worker noticed
/// either: the tip it knew when the live side was listed already lacked the document, but the
/// last commit the branch shares with the commit read held it — the rewrite kept it, and Git
/// removed it after. The removal stands.
#[test]
fn a_removal_pushed_right_after_a_rewrite_stands() {
    let mut s = Setup::new();
    let (before, in_step) = s.conf_held_then_edited();
    s.rewind_to(&before);
    s.push_by_hand_removal(CONF);
    s.notice_divergence();
    s.resync_after_divergence(vec![
        Intent::put("live", cm_key("web", "conf"), sanitized_conf("2")).since(in_step),
    ]);
    s.worker.poll();
    assert!(refused(&s.worker.take_events()).is_empty());
    assert!(
        !s.files().contains(CONF),
        "the removal pushed after the rewrite stands: {:?}",
        s.files()
    );
}
