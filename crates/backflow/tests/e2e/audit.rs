//! The audit log in kube-apiserver's format: one `audit.k8s.io/v1` Event per line, as the policy
//! asks — who, what, the object, the answer's code, the bodies at `RequestResponse`, a denied
//! request with its 403, the commit that carried a write — and a Secret's data never in it
//! under the usual policy (`Metadata` for Secrets).

use serde_json::Value;

use crate::common::{World, wait_for};

const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ['/healthz*', /version, /readyz, /livez, '/api*', '/openapi*']
- level: Metadata
  resources: [{group: '', resources: [secrets]}]
- level: RequestResponse
  resources: [{group: '', resources: [configmaps]}]
  namespaces: [team-a]
- level: Metadata
";

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not one JSON event per line ({e}): {l}"))
        })
        .collect()
}

#[test]
fn each_request_is_audited_as_the_policy_asks_with_the_commit_that_carried_it() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "t-alice,alice,1001,\"team-a-devs\"\n").unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.path().join("audit").join("audit.log");
    let w = World::start(&[
        "--token-auth-file",
        tokens.to_str().unwrap(),
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
        "--commit-window",
        "0s",
        "--no-apply",
    ]);
    w.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n");
    w.kubectl(&[
        "create",
        "rolebinding",
        "devs-edit",
        "-n",
        "team-a",
        "--clusterrole=edit",
        "--group=team-a-devs",
    ]);
    w.kubectl(&[
        "create",
        "secret",
        "generic",
        "db",
        "-n",
        "team-b",
        "--from-literal=password=hunter2",
    ]);
    let made = w.kubectl_run(&[
        "--token",
        "t-alice",
        "create",
        "configmap",
        "by-alice",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    assert_eq!(made.code, Some(0), "{made}");
    let denied = w.kubectl_run(&["--token", "t-alice", "get", "secret", "db", "-n", "team-b"]);
    assert_eq!(denied.code, Some(1), "{denied}");
    let path = "live/team-a/configmaps/by-alice.yaml";
    w.wait_present(path);
    let commit = w
        .git(&["log", "-1", "--format=%H", "main", "--", path])
        .trim()
        .to_string();

    let created = wait_for(
        "the create's event, with its commit",
        || std::fs::read_to_string(&log).unwrap_or_default(),
        || {
            events(&log).into_iter().find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["name"] == "by-alice"
                    && e["annotations"]["backflow.dev/commit"].is_string()
            })
        },
    );
    assert_eq!(created["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["level"], "RequestResponse");
    assert_eq!(created["stage"], "ResponseComplete");
    assert_eq!(created["user"]["username"], "alice");
    assert!(
        created["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&"team-a-devs".into())
    );
    assert_eq!(created["objectRef"]["resource"], "configmaps");
    assert_eq!(created["objectRef"]["namespace"], "team-a");
    assert_eq!(created["responseStatus"]["code"], 201);
    assert_eq!(created["requestObject"]["data"]["k"], "v");
    assert_eq!(created["responseObject"]["metadata"]["name"], "by-alice");
    assert_eq!(
        created["annotations"]["backflow.dev/commit"],
        commit.as_str()
    );
    assert!(
        created["sourceIPs"][0]
            .as_str()
            .is_some_and(|ip| ip == "127.0.0.1"),
        "{created}"
    );
    assert!(
        created["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubectl")),
        "{created}"
    );

    let all = events(&log);
    let forbidden = all
        .iter()
        .find(|e| e["objectRef"]["resource"] == "secrets" && e["user"]["username"] == "alice")
        .unwrap_or_else(|| panic!("no event of alice's denied read: {all:#?}"));
    assert_eq!(forbidden["responseStatus"]["code"], 403);
    assert_eq!(forbidden["verb"], "get");
    assert_eq!(forbidden["level"], "Metadata");
    assert!(
        all.iter().all(|e| e["stage"] != "RequestReceived"),
        "omitted stage written"
    );
    assert!(
        all.iter().all(|e| e["requestURI"] != "/version"),
        "a None rule writes nothing"
    );
    // The Secret was written at Metadata: its data is nowhere in the log.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        all.iter()
            .any(|e| e["objectRef"]["resource"] == "secrets" && e["verb"] == "create"),
        "the Secret's create is audited"
    );
    assert!(
        !text.contains("hunter2") && !text.contains("aHVudGVyMg"),
        "{text}"
    );
}

/// Backflow's own requests are audited too, as kube-apiserver audits its controllers': a push
/// applied by a claim acting as its service account is an event of `system:backflow`
/// impersonating that account, naming the object, written at once (no mirror commit carries
/// an apply: the claim's operation names the commit applied).
#[test]
fn a_push_applied_is_audited_as_backflow_acting_as_the_claims_account() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources: [{group: '', resources: [configmaps]}]\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let w = World::start(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
    ]);
    crate::apply::wait_acting(&w);
    w.apply(
        "apiVersion: v1
kind: ServiceAccount
metadata: {name: deployer, namespace: backflow-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: deployer-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: deployer, namespace: backflow-system}]
",
    );
    w.kubectl(&[
        "patch",
        "nativeclaim",
        "default",
        "-n",
        "backflow-system",
        "--type=merge",
        "-p",
        r#"{"spec":{"serviceAccountName":"deployer"}}"#,
    ]);
    // The account and its binding are mirrored first: bob's clone holds them.
    w.wait_settled();
    let clone = w.clone_origin("bob");
    let dir = clone.join("live/default/configmaps");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("from-git.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-git\n  namespace: default\ndata:\n  k: v\n",
    )
    .unwrap();
    let pushed = w.commit_all_and_push_rebasing(&clone, "bob adds from-git");
    crate::apply::wait_applied(&w, &pushed);
    let applied = wait_for(
        "the applier's write audited",
        || std::fs::read_to_string(&log).unwrap_or_default(),
        || {
            events(&log)
                .into_iter()
                .find(|e| e["objectRef"]["name"] == "from-git" && e["verb"] == "patch")
        },
    );
    assert_eq!(
        applied["user"]["username"], "system:backflow",
        "{applied:#}"
    );
    assert_eq!(
        applied["impersonatedUser"]["username"], "system:serviceaccount:backflow-system:deployer",
        "{applied:#}"
    );
    assert_eq!(applied["responseStatus"]["code"], 201, "{applied:#}");
    assert!(applied.get("annotations").is_none(), "{applied:#}");
}
