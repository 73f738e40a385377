//! Smart HTTP through `git http-backend` on loopback, with basic authentication, for the
//! libgit2 transport and the `git` program.

use backflow_branch::IntentSeq;
use backflow_git::{
    Credentials, RemoteErrorKind, RemoteSpec, TransportChoice, WorkerEvent, open_remote,
};
use backflow_testkit::HttpAuth;

use crate::support::*;

fn spec(url: String, cli: bool, password: &str) -> RemoteSpec {
    RemoteSpec {
        url,
        credentials: Credentials::Basic {
            username: "alice".into(),
            password: password.into(),
        },
        ca_file: None,
        transport: if cli {
            TransportChoice::Cli
        } else {
            TransportChoice::Auto
        },
    }
}

#[test]
fn publishes_and_replays_over_smart_http() {
    for cli in [false, true] {
        let bare = Bare::new();
        let server = HttpServer::start(bare.dir.path(), Some(("alice", "s3cret")));
        let url = server.url("remote.git");
        let cache = tempfile::tempdir().expect("tempdir");
        let (mut w, _clock) = worker(cache.path(), open_remote(&spec(url, cli, "s3cret")), |_| {});
        w.submit(put("a", "1"));
        w.poll();
        assert!(bare.tip().is_some(), "cli={cli}: first push over HTTP");
        // A foreign push straight into the bare repository moves the branch under the worker.
        let foreign_clone = ForeignClone::new(&bare.url());
        let f = foreign_clone.commit_and_push(
            &[
                (path_of("a").as_str(), Some("theirs")),
                ("theirs.txt", Some("t")),
            ],
            "theirs",
        );
        w.submit(put("a", "2"));
        w.poll();
        let events = w.take_events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, WorkerEvent::Foreign(c) if c.tip.to_string() == f)),
            "cli={cli}"
        );
        assert!(
            events.iter().any(
                |e| matches!(e, WorkerEvent::Published { through, .. } if *through == IntentSeq(2))
            ),
            "cli={cli}: {events:?}"
        );
        assert_eq!(w.stats().replays, 1, "cli={cli}");
        assert!(bare.contains(&f));
        let files = bare.files("main");
        assert_eq!(files.get(&path_of("a")), Some(&rendered("2")));
        assert_eq!(files.get("theirs.txt").map(String::as_str), Some("t"));
        bare.assert_only_fast_forwards();
    }
}

#[test]
fn wrong_credentials_are_a_transient_auth_failure() {
    for cli in [false, true] {
        let bare = Bare::new();
        let server = HttpServer::start(bare.dir.path(), Some(("alice", "s3cret")));
        let cache = tempfile::tempdir().expect("tempdir");
        let mut remote = open_remote(&spec(server.url("remote.git"), cli, "wrong"));
        let repo =
            backflow_git::LocalRepo::open_or_init(&cache.path().join("c.git")).expect("cache");
        let err = remote.ls_remote(&repo, "main").expect_err("refused");
        assert_eq!(err.kind, RemoteErrorKind::Auth, "cli={cli}: {err}");
        assert!(
            !err.to_string().contains("wrong"),
            "the password never shows: {err}"
        );
        // The worker keeps the write and schedules a retry.
        let (mut w, _clock) = worker(cache.path(), remote, |_| {});
        w.submit(put("a", "1"));
        w.poll();
        assert!(
            w.take_events()
                .iter()
                .any(|e| matches!(e, WorkerEvent::Failed { .. }))
        );
        assert_eq!(w.pending_writes().len(), 1);
        assert_eq!(bare.tip(), None);
    }
}

#[test]
fn a_per_ref_refusal_over_http_is_not_success() {
    // `Remote::push` returns Ok even when the server refuses the ref; only the per-ref status
    // tells. A pre-receive hook refuses everything until it is removed.
    for cli in [false, true] {
        let bare = Bare::new();
        let hook = bare.path().join("hooks").join("pre-receive");
        std::fs::write(&hook, "#!/bin/sh\necho 'branch is frozen' >&2\nexit 1\n").expect("hook");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let server = HttpServer::start(bare.dir.path(), None);
        let cache = tempfile::tempdir().expect("tempdir");
        let spec = RemoteSpec {
            transport: if cli {
                TransportChoice::Cli
            } else {
                TransportChoice::Auto
            },
            ..RemoteSpec::new(server.url("remote.git"))
        };
        let (mut w, clock) = worker(cache.path(), open_remote(&spec), |_| {});
        w.submit(put("a", "1"));
        let wake = w.poll();
        let events = w.take_events();
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, WorkerEvent::Published { .. })),
            "cli={cli}: {events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, WorkerEvent::Failed { .. })),
            "cli={cli}: {events:?}"
        );
        assert_eq!(w.stats().pushes_rejected, 1, "cli={cli}");
        assert_eq!(bare.tip(), None);
        std::fs::remove_file(&hook).expect("unhook");
        clock.advance(wake.duration_since(start_time()).expect("later"));
        w.poll();
        assert!(
            w.take_events().iter().any(
                |e| matches!(e, WorkerEvent::Published { through, .. } if *through == IntentSeq(1))
            ),
            "cli={cli}"
        );
        assert!(bare.tip().is_some());
    }
}

#[test]
fn https_with_a_ca_of_its_own_and_basic_or_bearer_authentication() {
    let bearer = |t: &str| Credentials::Bearer { token: t.into() };
    let basic = |p: &str| Credentials::Basic {
        username: "alice".into(),
        password: p.into(),
    };
    let cases: [(HttpAuth, Credentials, Credentials); 2] = [
        (
            HttpAuth::Bearer("glpat-7a1c9e".into()),
            bearer("glpat-7a1c9e"),
            bearer("glpat-wrong"),
        ),
        (
            HttpAuth::Basic("alice".into(), "s3cret-9".into()),
            basic("s3cret-9"),
            basic("glpat-wrong"),
        ),
    ];
    for (auth, right, wrong) in cases {
        let bare = Bare::new();
        let server = HttpServer::start_with(bare.dir.path(), &auth, true);
        let url = server.url("remote.git");
        assert!(url.starts_with("https://"), "{url}");
        let repo_dir = tempfile::tempdir().expect("tempdir");
        let repo =
            backflow_git::LocalRepo::open_or_init(&repo_dir.path().join("c.git")).expect("cache");
        let remote = |credentials: &Credentials, ca: bool| {
            open_remote(&RemoteSpec {
                url: url.clone(),
                credentials: credentials.clone(),
                ca_file: ca.then(|| server.ca_file.clone().expect("a CA")),
                transport: TransportChoice::Auto,
            })
        };
        // Without the CA the certificate is not trusted: nothing is sent.
        let err = remote(&right, false)
            .ls_remote(&repo, "main")
            .expect_err("an unknown CA");
        assert_eq!(err.kind, RemoteErrorKind::Unreachable, "{auth:?}: {err}");
        assert!(err.message.to_lowercase().contains("certificate"), "{err}");
        // A wrong secret is an authentication failure that never shows the secret.
        let err = remote(&wrong, true)
            .ls_remote(&repo, "main")
            .expect_err("a wrong secret");
        assert_eq!(err.kind, RemoteErrorKind::Auth, "{auth:?}: {err}");
        assert!(!err.to_string().contains("glpat"), "{err}");
        // With both, the worker publishes.
        let cache = tempfile::tempdir().expect("tempdir");
        let (mut w, _clock) = worker(cache.path(), remote(&right, true), |_| {});
        w.submit(put("a", "1"));
        w.poll();
        assert_eq!(
            bare.files("main").get(&path_of("a")),
            Some(&rendered("1")),
            "{auth:?}: published over HTTPS"
        );
    }
}

#[test]
fn http_remotes_go_through_the_proxy_the_environment_names() {
    let proxy = backflow_testkit::proxy::ForwardProxy::start();
    // SAFETY: nextest runs every test in a process of its own, and nothing else in this one
    // reads the environment while it is set.
    unsafe {
        std::env::set_var("http_proxy", proxy.url());
        std::env::remove_var("no_proxy");
        std::env::remove_var("NO_PROXY");
    }
    for cli in [false, true] {
        let bare = Bare::new();
        let server = HttpServer::start(bare.dir.path(), Some(("alice", "s3cret")));
        let before = proxy.relayed();
        let cache = tempfile::tempdir().expect("tempdir");
        let remote = open_remote(&spec(server.url("remote.git"), cli, "s3cret"));
        let (mut w, _clock) = worker(cache.path(), remote, |_| {});
        w.submit(put("a", "1"));
        w.poll();
        assert_eq!(
            bare.files("main").get(&path_of("a")),
            Some(&rendered("1")),
            "cli={cli}: published through the proxy"
        );
        assert!(
            proxy.relayed() > before,
            "cli={cli}: the proxy relayed the remote's requests"
        );
    }
}
