//! The receiver endpoint with real payloads and real signers: GitHub's example push deliveries
//! (npm `@octokit/webhooks-examples`) signed by GitHub's own `@octokit/webhooks-methods`,
//! Gitea-style deliveries signed by `openssl dgst -hmac`, GitLab token deliveries. Every bad
//! variant is answered with its code and wakes nobody — checked through the metrics and the
//! branches that were told.
#![allow(clippy::unwrap_used, reason = "tests fail loudly on the unexpected")]

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use backflow_api::config::ReceiverType;
use backflow_apply::receiver::{
    MAX_BODY, Outcome, PushTargets, ReceiverEntry, ReceiverMetrics, ReceiverTable, WrittenBranch,
    endpoint, webhook_path,
};
use backflow_testkit::octokit;
use http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

const SECRET: &str = "It's a Secret to Everybody";
const NS: &str = "team-a";

/// Records which branches were told, and whether they were woken.
#[derive(Default)]
struct Told {
    written: Vec<WrittenBranch>,
    notices: Mutex<Vec<(WrittenBranch, bool)>>,
}

impl PushTargets for Told {
    fn branches(&self) -> Vec<WrittenBranch> {
        self.written.clone()
    }
    fn notice(&self, branch: &WrittenBranch, wake: bool) {
        self.notices.lock().unwrap().push((branch.clone(), wake));
    }
}

/// A header list as a test builds it.
type Headers = Vec<(&'static str, String)>;

struct Harness {
    router: axum::Router,
    metrics: ReceiverMetrics,
    told: Arc<Told>,
}

impl Harness {
    /// One receiver of each type, named after its type, all with [`SECRET`]; the branches
    /// written are `master` of GitHub's example repository (by its SSH URL) and `main` of a
    /// GitLab project.
    fn start() -> Self {
        let table = Arc::new(ReceiverTable::default());
        let mut entries = BTreeMap::new();
        for kind in [
            ReceiverType::GitHub,
            ReceiverType::GitLab,
            ReceiverType::Gitea,
            ReceiverType::GenericHmac,
        ] {
            entries.insert(
                path(kind),
                ReceiverEntry {
                    namespace: NS.into(),
                    name: kind.as_str().into(),
                    kind,
                    token: SECRET.as_bytes().into(),
                    suspended: false,
                },
            );
        }
        table.replace(entries);
        let told = Arc::new(Told {
            written: vec![
                WrittenBranch {
                    url: "git@github.com:Codertocat/Hello-World.git".into(),
                    branch: "master".into(),
                },
                WrittenBranch {
                    url: "https://gitlab.example.com/group/project".into(),
                    branch: "main".into(),
                },
            ],
            ..Told::default()
        });
        let metrics = ReceiverMetrics::default();
        let deliveries = Arc::new(backflow_apply::receiver::DeliveryLog::new(Arc::new(
            backflow_api::SystemClock,
        )));
        let (router, _dispatcher) = endpoint(table, told.clone(), metrics.clone(), deliveries);
        Self {
            router,
            metrics,
            told,
        }
    }

    async fn post(&self, path: &str, headers: &Headers, body: Vec<u8>) -> StatusCode {
        self.request("POST", path, headers, body).await
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &Headers,
        body: Vec<u8>,
    ) -> StatusCode {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = self
            .router
            .clone()
            .oneshot(req.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        resp.status()
    }

    fn count(&self, kind: ReceiverType, outcome: Outcome) -> u64 {
        self.metrics.total(kind.as_str(), outcome)
    }

    /// Waits for the dispatcher to count `n` deliveries of `kind` ended with `outcome`.
    async fn settle(&self, kind: ReceiverType, outcome: Outcome, n: u64) {
        for _ in 0..500 {
            if self.count(kind, outcome) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "{} {} stayed at {} (wanted {n})",
            kind.as_str(),
            outcome.as_str(),
            self.count(kind, outcome)
        );
    }

    fn woken(&self) -> Vec<String> {
        self.told
            .notices
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, wake)| *wake)
            .map(|(b, _)| format!("{}@{}", b.url, b.branch))
            .collect()
    }

    fn notices(&self) -> usize {
        self.told.notices.lock().unwrap().len()
    }
}

fn path(kind: ReceiverType) -> String {
    webhook_path(SECRET.as_bytes(), kind.as_str(), NS)
}

fn github_headers(signature: String, event: &str) -> Headers {
    vec![
        ("x-github-event", event.to_string()),
        (
            "x-github-delivery",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
        ),
        ("x-hub-signature-256", signature),
        ("content-type", "application/json".into()),
    ]
}

/// The example push to `master` of GitHub's examples, as GitHub sends it.
fn branch_push() -> Value {
    octokit::examples("push")
        .into_iter()
        .find(|e| e["ref"] == "refs/heads/master")
        .expect("a branch push among the examples")
}

#[tokio::test]
async fn githubs_example_pushes_signed_by_octokit_wake_exactly_the_branch_they_name() {
    let h = Harness::start();
    let examples = octokit::examples("push");
    assert!(
        examples.len() >= 2,
        "the examples hold branch and tag pushes"
    );
    let (mut branches, mut others) = (0, 0);
    for example in &examples {
        let body = serde_json::to_vec(example).unwrap();
        let signature = octokit::sign(SECRET, &body);
        let status = h
            .post(
                &path(ReceiverType::GitHub),
                &github_headers(signature, "push"),
                body,
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{}", example["ref"]);
        if example["ref"] == "refs/heads/master" {
            branches += 1;
        } else {
            others += 1;
        }
    }
    assert!(branches >= 1 && others >= 1);
    h.settle(ReceiverType::GitHub, Outcome::Ignored, others)
        .await;
    // The example branch pushes share one tip: the first wakes, the rest are redeliveries.
    h.settle(ReceiverType::GitHub, Outcome::Accepted, 1).await;
    h.settle(ReceiverType::GitHub, Outcome::Duplicate, branches - 1)
        .await;
    assert_eq!(
        h.woken(),
        vec!["git@github.com:Codertocat/Hello-World.git@master".to_string()],
        "named by its clone URL, matched to the provider's SSH URL, woken once"
    );
}

/// A signed GitHub delivery of `body` to the github receiver.
async fn github_post(h: &Harness, body: Vec<u8>) -> StatusCode {
    let signed = octokit::sign(SECRET, &body);
    h.post(
        &path(ReceiverType::GitHub),
        &github_headers(signed, "push"),
        body,
    )
    .await
}

#[tokio::test]
async fn every_bad_variant_is_answered_with_its_code_and_wakes_nobody() {
    let h = Harness::start();
    let gh = ReceiverType::GitHub;
    let body = serde_json::to_vec(&branch_push()).unwrap();
    let good = octokit::sign(SECRET, &body);
    let wrong_secret = octokit::sign("another secret", &body);
    let rejected: Vec<(&str, String, Headers, Vec<u8>)> = vec![
        (
            "wrong secret",
            path(gh),
            github_headers(wrong_secret, "push"),
            body.clone(),
        ),
        (
            "wrong path",
            webhook_path(b"guess", "github", NS),
            github_headers(good.clone(), "push"),
            body.clone(),
        ),
        (
            "SHA-1 only",
            path(gh),
            vec![
                ("x-github-event", "push".into()),
                ("x-hub-signature", "sha1=0000".into()),
            ],
            body.clone(),
        ),
        (
            "no signature",
            path(gh),
            vec![("x-github-event", "push".into())],
            body.clone(),
        ),
        (
            "changed body",
            path(gh),
            github_headers(good.clone(), "push"),
            [&body[..], b" "].concat(),
        ),
    ];
    for (what, p, headers, b) in rejected {
        assert_eq!(
            h.post(&p, &headers, b).await,
            StatusCode::NOT_FOUND,
            "{what}"
        );
    }
    assert_eq!(
        github_post(&h, vec![b' '; MAX_BODY + 1]).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        github_post(&h, body[..body.len() / 2].to_vec()).await,
        StatusCode::BAD_REQUEST
    );
    let mut sha256 = branch_push();
    sha256["after"] = json!("a".repeat(64));
    assert_eq!(
        github_post(&h, serde_json::to_vec(&sha256).unwrap()).await,
        StatusCode::BAD_REQUEST,
        "SHA-256 object ids are refused, not mis-parsed"
    );
    assert_eq!(
        h.request("GET", &path(gh), &Vec::new(), Vec::new()).await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    let ping = br#"{"zen":"Design for failure.","hook_id":1}"#.to_vec();
    let signed = octokit::sign(SECRET, &ping);
    assert_eq!(
        h.post(&path(gh), &github_headers(signed, "ping"), ping)
            .await,
        StatusCode::OK
    );

    assert_eq!(h.count(gh, Outcome::BadSignature), 4);
    assert_eq!(h.metrics.total("unknown", Outcome::UnknownPath), 1);
    assert_eq!(h.count(gh, Outcome::TooLarge), 1);
    assert_eq!(h.count(gh, Outcome::Malformed), 2);
    assert_eq!(h.count(gh, Outcome::Ignored), 1, "the ping");
    assert_eq!(h.metrics.total("unknown", Outcome::BadMethod), 1);
    assert_eq!(h.notices(), 0, "nothing rejected reached a branch");

    // Verified, but naming another repository or another branch: accepted, nobody woken.
    for (field, value) in [
        (
            "repository",
            json!({"clone_url": "https://github.com/Codertocat/Fork.git"}),
        ),
        ("ref", json!("refs/heads/feature")),
    ] {
        let mut other = branch_push();
        other[field] = value;
        assert_eq!(
            github_post(&h, serde_json::to_vec(&other).unwrap()).await,
            StatusCode::ACCEPTED
        );
    }
    h.settle(gh, Outcome::NoMatch, 2).await;
    assert_eq!(h.notices(), 0);

    // The good one wakes; its redelivery (same id, same content) is dropped.
    for _ in 0..2 {
        let headers = github_headers(good.clone(), "push");
        assert_eq!(
            h.post(&path(gh), &headers, body.clone()).await,
            StatusCode::ACCEPTED
        );
    }
    h.settle(gh, Outcome::Duplicate, 1).await;
    assert_eq!(h.count(gh, Outcome::Accepted), 1);
    assert_eq!(h.woken().len(), 1);
}

/// `openssl dgst -sha256 -hmac <secret>`: bare hex, as Gitea signs.
fn openssl_hmac(secret: &str, body: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", secret])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl signs the Gitea deliveries");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    text.rsplit(' ').next().unwrap().trim().to_string()
}

#[tokio::test]
async fn gitea_deliveries_signed_by_openssl_and_gitlab_token_deliveries_wake_their_branch() {
    let h = Harness::start();
    let mut gitea = branch_push();
    gitea["repository"]["object_format_name"] = json!("sha1");
    let gitea = serde_json::to_vec(&gitea).unwrap();
    let headers = vec![
        ("x-gitea-event", "push".to_string()),
        ("x-gitea-signature", openssl_hmac(SECRET, &gitea)),
        // Gitea also sends GitHub's headers; its own decide.
        ("x-github-event", "push".to_string()),
    ];
    let gitea_path = path(ReceiverType::Gitea);
    assert_eq!(
        h.post(&gitea_path, &headers, gitea.clone()).await,
        StatusCode::ACCEPTED
    );
    h.settle(ReceiverType::Gitea, Outcome::Accepted, 1).await;
    let forged = vec![
        ("x-gitea-event", "push".to_string()),
        ("x-gitea-signature", openssl_hmac("nope", &gitea)),
    ];
    assert_eq!(
        h.post(&gitea_path, &forged, gitea).await,
        StatusCode::NOT_FOUND
    );

    let gitlab = serde_json::to_vec(&json!({
        "object_kind": "push",
        "ref": "refs/heads/main",
        "before": "0".repeat(40),
        "after": "95790bf891e76fee5e1747ab589903a6a1f80f22",
        "checkout_sha": "95790bf891e76fee5e1747ab589903a6a1f80f22",
        "project": {
            "path_with_namespace": "group/project",
            "git_http_url": "https://gitlab.example.com/group/project.git",
            "git_ssh_url": "git@gitlab.example.com:group/project.git",
        },
        "commits": [],
        "total_commits_count": 0,
    }))
    .unwrap();
    let token = |t: &str| -> Headers {
        vec![
            ("x-gitlab-event", "Push Hook".to_string()),
            ("x-gitlab-token", t.to_string()),
        ]
    };
    let gitlab_path = path(ReceiverType::GitLab);
    assert_eq!(
        h.post(&gitlab_path, &token(SECRET), gitlab.clone()).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.post(&gitlab_path, &token("wrong"), gitlab).await,
        StatusCode::NOT_FOUND
    );
    h.settle(ReceiverType::GitLab, Outcome::Accepted, 1).await;
    assert_eq!(h.count(ReceiverType::GitLab, Outcome::BadSignature), 1);
    assert_eq!(h.count(ReceiverType::Gitea, Outcome::BadSignature), 1);
    let mut woken = h.woken();
    woken.sort();
    assert_eq!(
        woken,
        vec![
            "git@github.com:Codertocat/Hello-World.git@master".to_string(),
            "https://gitlab.example.com/group/project@main".to_string(),
        ]
    );
}
