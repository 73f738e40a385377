//! The mirror's controller against the embedded API server in process: configuration goes in
//! through a kube `Client`, statuses and the repository's content come out.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use backflow_api::{Clock, SystemClock};
use backflow_mirror::{Mirror, MirrorOptions};
use backflow_server::{InProcess, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// A configuration kind of `backflow.dev/v1alpha1`.
fn kind(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "backflow.dev".into(),
        version: "v1alpha1".into(),
        api_version: "backflow.dev/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The API in process, a client of it, and a bare repository for the mirror to write.
struct World {
    client: Client,
    server: InProcess,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> Self {
        Self::start_with_clock(Arc::new(SystemClock)).await
    }

    /// The world, its API server reading the time from `clock`.
    async fn start_with_clock(clock: Arc<dyn Clock>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = ServerConfig::new(dir.path().join("api"));
        config.listen = "127.0.0.1:0".parse().expect("address");
        let server = InProcess::open_with_clock(&config, clock)
            .await
            .expect("server");
        let client = Client::new(server.router.clone(), "default");
        backflow_mirror::defaults::install_crds(&client)
            .await
            .expect("CRDs");
        backflow_testkit::git_out(
            dir.path(),
            &["init", "-q", "--bare", "-b", "main", "origin.git"],
        );
        Self {
            client,
            server,
            dir,
        }
    }

    fn url(&self) -> String {
        format!("file://{}", self.dir.path().join("origin.git").display())
    }

    fn api(&self, kind_name: &str, plural: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "team", &kind(kind_name, plural))
    }

    async fn create(&self, kind_name: &str, plural: &str, body: Value) {
        let ar = kind(kind_name, plural);
        let mut object: DynamicObject = serde_json::from_value(body).expect("object");
        object.types = Some(kube::core::TypeMeta {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        });
        self.api(kind_name, plural)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {kind_name}: {e}"));
    }

    /// Namespace `team`, `GitProvider` `p` (its spec: the remote's URL and `provider`),
    /// `GitTarget` `t` writing folder `live` of `main`, no claim coordinating it, and a
    /// `WatchRule` for the `ConfigMaps` of every namespace; then the mirror, its data in `data`.
    async fn mirror_configmaps(&self, provider: Value, data: &std::path::Path) -> Mirror {
        self.configure(provider, json!({})).await;
        self.start_mirror(data)
    }

    /// The configuration [`World::mirror_configmaps`] starts the mirror on, `GitTarget` `t`'s
    /// spec given `target`'s fields too.
    async fn configure(&self, provider: Value, target: Value) {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("namespace");
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace team");
        let mut spec = provider;
        spec["url"] = json!(self.url());
        self.create(
            "GitProvider",
            "gitproviders",
            json!({"metadata": {"name": "p"}, "spec": spec}),
        )
        .await;
        let mut spec = json!({"providerRef": {"name": "p"}, "branch": "main", "path": "live"});
        if let (Some(spec), Some(fields)) = (spec.as_object_mut(), target.as_object()) {
            spec.extend(fields.clone());
        }
        self.create(
            "GitTarget",
            "gittargets",
            json!({"metadata": {"name": "t"}, "spec": spec}),
        )
        .await;
        self.create(
            "WatchRule",
            "watchrules",
            json!({"metadata": {"name": "r"},
                   "spec": {"targetRef": {"name": "t"},
                            "rules": [{"apiGroups": [""], "resources": ["configmaps"]}]}}),
        )
        .await;
    }

    /// The mirror, its data in `data`.
    fn start_mirror(&self, data: &std::path::Path) -> Mirror {
        Mirror::start(
            self.client.clone(),
            MirrorOptions {
                refresh_interval: backflow_mirror::DEFAULT_REFRESH_INTERVAL,
                data_dir: data.to_path_buf(),
                identities: Vec::new(),
                shutdown_grace: backflow_mirror::DEFAULT_SHUTDOWN_GRACE,
                authors: None,
                owner: None,
            },
            Arc::new(SystemClock),
        )
    }

    /// The `Ready` condition of `GitTarget` `team/t` as (status, reason, message), once it has one.
    async fn target_ready(&self) -> Option<(String, String, String)> {
        let t = self.api("GitTarget", "gittargets").get("t").await.ok()?;
        let conditions = t.data.pointer("/status/conditions")?.as_array()?.clone();
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
        Some((
            ready["status"].as_str()?.to_string(),
            ready["reason"].as_str()?.to_string(),
            ready["message"].as_str()?.to_string(),
        ))
    }

    /// Annotates the `GitProvider`, which wakes the controller at once (it does not watch
    /// Secrets).
    async fn touch_provider(&self, n: u32) {
        let stamp = json!({"metadata": {"annotations": {"test/touched": n.to_string()}}});
        self.api("GitProvider", "gitproviders")
            .patch("p", &PatchParams::default(), &Patch::Merge(&stamp))
            .await
            .expect("touch the provider");
    }
}

/// Polls `check` until it gives a value, for at most 30 s.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "hung: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_problems_are_reported_on_the_target_until_fixed_then_it_mirrors() {
    let w = World::start().await;
    let data = tempfile::tempdir().expect("data dir");
    let provider = json!({"secretRef": {"name": "creds"}, "push": {"commitWindow": "0s"}});
    let mirror = w.mirror_configmaps(provider, data.path()).await;

    let (status, _, message) = eventually("the missing Secret reported", || async {
        w.target_ready().await.filter(|r| r.1 == "SecretNotFound")
    })
    .await;
    assert_eq!(status, "False");
    assert_eq!(
        message,
        "Secret team/creds named by spec.secretRef does not exist"
    );

    // A Secret without the keys credentials are read from.
    let secrets: Api<Secret> = Api::namespaced(w.client.clone(), "team");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"}, "stringData": {"token": "t0ken"}}))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    w.touch_provider(1).await;
    eventually("the incomplete Secret reported", || async {
        w.target_ready().await.filter(|r| {
            r.1 == "SecretInvalid"
                && r.2
                    .contains("must hold `username` and `password`, or `bearerToken`")
        })
    })
    .await;

    // Fixed: the worker starts and the folder follows the namespace.
    let fixed = json!({"stringData": {"username": "git", "password": "secret"}});
    secrets
        .patch("creds", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .expect("fix the secret");
    w.touch_provider(2).await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "settings"}, "data": {"color": "blue"}}))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(w.client.clone(), "team")
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    let origin = w.dir.path().join("origin.git");
    let file = eventually("the ConfigMap in Git", || async {
        let out = backflow_testkit::git(&origin)
            .args(["show", "main:live/team/configmaps/settings.yaml"])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert!(file.contains("color: blue"), "{file}");
    eventually("the target Ready", || async {
        w.target_ready().await.filter(|r| r.0 == "True")
    })
    .await;
    mirror.shutdown().await;
    w.server.shutdown();
}

/// The content of `path` on the remote's `main`, if it is there.
fn show(origin: &std::path::Path, path: &str) -> Option<String> {
    let out = backflow_testkit::git(origin)
        .args(["show", &format!("main:{path}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A folder no claim coordinates is never judged against apply windows: a window it kept from
/// when a claim did does not withhold an applier's write from it (taken for a collision with an
/// edit seen in that window, it never reached Git).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_way_folder_mirrors_an_appliers_write_whatever_windows_it_kept() {
    let w = World::start().await;
    let data = tempfile::tempdir().expect("data dir");
    let provider = json!({"push": {"commitWindow": "0s"}});
    let mirror = w.mirror_configmaps(provider, data.path()).await;
    let origin = w.dir.path().join("origin.git");
    let path = "live/team/configmaps/x.yaml";
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), "team");
    let as_person = PatchParams::apply("kubectl-edit").force();
    let set = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"v": v}});
    cms.patch("x", &as_person, &Patch::Apply(set("person")))
        .await
        .expect("create");
    eventually("the ConfigMap in Git", || async {
        show(&origin, path).filter(|t| t.contains("v: person"))
    })
    .await;
    // A window of the folder, as a claim that coordinated it would have left one; a person's
    // edit seen while it is open, then an applier's write over it.
    mirror.branches().apply_windows().open(
        &[("team".to_string(), "t".to_string())],
        std::time::SystemTime::now(),
    );
    cms.patch("x", &as_person, &Patch::Apply(set("edit")))
        .await
        .expect("edit");
    eventually("the edit in Git", || async {
        show(&origin, path).filter(|t| t.contains("v: edit"))
    })
    .await;
    let as_applier = PatchParams::apply("backflow-applier").force();
    cms.patch("x", &as_applier, &Patch::Apply(set("applied")))
        .await
        .expect("apply");
    eventually("the applier's write in Git", || async {
        show(&origin, path).filter(|t| t.contains("v: applied"))
    })
    .await;
    mirror.shutdown().await;
    w.server.shutdown();
}

/// A wall clock stopped in one second (the monotonic one runs): every write the API server
/// records is dated in that second, as writes made within one second are.
#[derive(Debug)]
struct OneSecond(SystemTime);

impl Clock for OneSecond {
    fn now(&self) -> SystemTime {
        self.0
    }

    fn monotonic(&self) -> Duration {
        SystemClock.monotonic()
    }
}

/// An object the mirror first read in a list (its start), then written by the applier in the
/// second of the person's create while an apply window is open: the managedFields tie, and the
/// listed writers show the applier's entry is the new one, so the write is the apply landing
/// and not mirrored as an edit (mirrored, it would be written over a push made since the
/// applied commit: the applier here writes a value Git does not hold to stand for that push).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_in_the_second_of_a_listed_create_is_the_appliers_landing() {
    let since_epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    let second = SystemTime::UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs());
    let w = World::start_with_clock(Arc::new(OneSecond(second + Duration::from_millis(500)))).await;
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), "team");
    let set = |name: &str, v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}});
    let data = tempfile::tempdir().expect("data dir");
    let provider = json!({"push": {"commitWindow": "0s"}});
    let claim = json!({"applierClaimRef": {"kind": "NativeClaim", "name": "c"}});
    w.configure(provider, claim).await;
    let as_person = PatchParams::apply("kubectl-edit").force();
    // A field of the person's own stays theirs: their entry outlives the apply, as kubectl's
    // last-applied annotation keeps kubectl's.
    let mut created = set("x", "person");
    created["metadata"]["labels"] = json!({"owner": "person"});
    cms.patch("x", &as_person, &Patch::Apply(created))
        .await
        .expect("create");
    let mirror = w.start_mirror(data.path());
    let origin = w.dir.path().join("origin.git");
    let path = "live/team/configmaps/x.yaml";
    eventually("the listed ConfigMap in Git", || async {
        show(&origin, path).filter(|t| t.contains("v: person"))
    })
    .await;
    mirror
        .branches()
        .apply_windows()
        .open(&[("team".to_string(), "t".to_string())], second);
    let as_applier = PatchParams::apply("backflow-applier").force();
    cms.patch("x", &as_applier, &Patch::Apply(set("x", "applied")))
        .await
        .expect("apply");
    // A person's create after it, on the same watch: once it is in Git, x's event was judged.
    cms.patch("y", &as_person, &Patch::Apply(set("y", "later")))
        .await
        .expect("create y");
    eventually("the later edit in Git", || async {
        show(&origin, "live/team/configmaps/y.yaml").filter(|t| t.contains("v: later"))
    })
    .await;
    let x = show(&origin, path).unwrap();
    assert!(
        x.contains("v: person"),
        "the applier's write was mirrored as an edit:\n{x}"
    );
    mirror.shutdown().await;
    w.server.shutdown();
}
