//! Test helpers: hermetic `git`, bare remotes, the testkit's smart-HTTP server, and worker
//! construction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backflow_api::{GroupResource, ManualClock, ObjectKey};
use backflow_branch::FilePerObjectPlanner;
use backflow_branch::Intent;
use backflow_git::BranchMetrics;
use backflow_git::{BranchWorker, GitRemote, Identity, LocalRepo, WorkerConfig};
pub use backflow_testkit::HttpServer;
pub use backflow_testkit::{git as git_cmd, git_ok, git_out as git};

/// A bare repository in a temporary directory, with branch `main` absent until the first push.
pub struct Bare {
    pub dir: tempfile::TempDir,
}

impl Bare {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(
            dir.path(),
            &["init", "--quiet", "--bare", "-b", "main", "remote.git"],
        );
        // Every ref update is logged, so tests can check each one was a fast-forward.
        git(
            dir.path().join("remote.git"),
            &["config", "core.logAllRefUpdates", "always"],
        );
        Self { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.path().display())
    }

    /// The tip of `main`, via `git rev-parse`.
    pub fn tip(&self) -> Option<String> {
        let out = git_cmd(self.path())
            .args(["rev-parse", "--verify", "--quiet", "refs/heads/main"])
            .output()
            .expect("git");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Every file at `rev`, with its content, via `git ls-tree` and `git cat-file`.
    pub fn files(&self, rev: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for line in git(self.path(), &["ls-tree", "-r", "--name-only", rev]).lines() {
            let content = git(self.path(), &["cat-file", "blob", &format!("{rev}:{line}")]);
            out.insert(line.to_string(), content);
        }
        out
    }

    /// Commit subjects on `main`, newest first.
    pub fn subjects(&self) -> Vec<String> {
        git(self.path(), &["log", "--format=%s", "main"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Whether `ancestor` is in the history of `main`.
    pub fn contains(&self, ancestor: &str) -> bool {
        git_ok(
            self.path(),
            &["merge-base", "--is-ancestor", ancestor, "main"],
        )
    }

    /// Checks from the reflog that every update of `main` was a fast-forward.
    pub fn assert_only_fast_forwards(&self) {
        let log = git(
            self.path(),
            &["reflog", "show", "--format=%H", "refs/heads/main"],
        );
        let tips: Vec<&str> = log.lines().collect();
        assert!(!tips.is_empty(), "reflog is empty");
        for pair in tips.windows(2) {
            let (newer, older) = (pair[0], pair[1]);
            assert!(
                git_ok(self.path(), &["merge-base", "--is-ancestor", older, newer]),
                "update {older} -> {newer} was not a fast-forward"
            );
        }
    }
}

/// A working clone used by a foreign writer, with the `git` program.
pub struct ForeignClone {
    pub dir: tempfile::TempDir,
}

impl ForeignClone {
    pub fn new(url: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "--quiet", "-b", "main", "w"]);
        let c = Self { dir };
        git(c.work(), &["remote", "add", "origin", url]);
        c
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("w")
    }

    /// Writes files (None removes) on top of the remote's tip and pushes, retrying on a race
    /// with `fetch` + `reset` like a careful human. Returns the pushed commit.
    pub fn commit_and_push(&self, files: &[(&str, Option<&str>)], message: &str) -> String {
        let w = self.work();
        for _ in 0..200 {
            if git_ok(&w, &["fetch", "--quiet", "origin", "main"]) {
                git(&w, &["reset", "--quiet", "--hard", "FETCH_HEAD"]);
            }
            for (path, content) in files {
                let p = w.join(path);
                match content {
                    Some(c) => {
                        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                        std::fs::write(&p, c).expect("write");
                    }
                    None => {
                        let _ = std::fs::remove_file(&p);
                    }
                }
            }
            git(&w, &["add", "-A"]);
            git(&w, &["commit", "--quiet", "--allow-empty", "-m", message]);
            let sha = git(&w, &["rev-parse", "HEAD"]).trim().to_string();
            if git_ok(&w, &["push", "--quiet", "origin", "HEAD:refs/heads/main"]) {
                return sha;
            }
        }
        panic!("foreign push kept failing");
    }
}

pub fn key(name: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
}

/// The path [`FilePerObjectPlanner`] writes `key(name)` of target `apps` to.
pub fn path_of(name: &str) -> String {
    FilePerObjectPlanner::path_of(&Intent::delete("apps", key(name)))
}

pub fn put(name: &str, value: &str) -> Intent {
    Intent::put("apps", key(name), serde_json::json!({ "value": value }))
}

/// What [`FilePerObjectPlanner`] writes for `put(name, value)`.
pub fn rendered(value: &str) -> String {
    String::from_utf8(FilePerObjectPlanner::render(
        &serde_json::json!({ "value": value }),
    ))
    .expect("utf8")
}

pub fn start_time() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A worker with a manual clock, window 0 and a tight backoff.
pub fn worker(
    cache: &Path,
    remote: Box<dyn GitRemote>,
    tune: impl FnOnce(&mut WorkerConfig),
) -> (BranchWorker, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(start_time()));
    let mut cfg = WorkerConfig::new("main");
    cfg.timing.window = Duration::ZERO;
    cfg.committer = Identity::new("backflow test", "backflow@example.com");
    cfg.seed = 1;
    tune(&mut cfg);
    let repo = LocalRepo::open_or_init(&cache.join("cache.git")).expect("cache");
    let w = BranchWorker::new(
        cfg,
        repo,
        remote,
        Box::new(FilePerObjectPlanner),
        clock.clone(),
        BranchMetrics::disabled(),
    );
    (w, clock)
}
