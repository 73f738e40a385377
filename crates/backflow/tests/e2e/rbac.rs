//! Who may do what, as Kubernetes RBAC documents it: a decision table of users, groups, verbs,
//! resources, subresources, names, namespaces, aggregation, impersonation and non-resource
//! URLs, each row asked of the server twice — `kubectl auth can-i` (a
//! `SelfSubjectAccessReview`) and a real request by the official Python client (`dryRun` for
//! writes) — and the answers written from the Kubernetes RBAC documentation, not from the code.
//! Then the escalation rules (a role grants only what its writer holds; `bind` and `escalate`),
//! and alice's day: what `edit` in one namespace lets her do, and that her refused writes
//! leave nothing in the store or in Git.

use serde_json::{Value, json};

use crate::common::{World, wait_for};

/// The users of the token file: token, name, groups.
const USERS: &[(&str, &str, &str)] = &[
    ("t-alice", "alice", "team-a-devs"),
    ("t-bob", "bob", ""),
    ("t-carol", "carol", "auditors"),
    ("t-dave", "dave", ""),
    ("t-erin", "erin", ""),
    ("t-frank", "frank", "system:masters"),
    ("t-gina", "gina", ""),
];

/// The RBAC objects and the objects the rows touch, applied by the admin.
const SETUP: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: devs-edit, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: team-a-devs}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-view, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: auditors-view}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: auditors}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules: [{nonResourceURLs: [/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: carol-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: lease-reader
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules: [{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: public-config, namespace: team-a}
rules: [{apiGroups: [""], resources: [configmaps], resourceNames: [public], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-public, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: public-config}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scaler}
rules: [{apiGroups: [apps], resources: ["*/scale"], verbs: [get, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-scaler, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scaler}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: log-reader}
rules: [{apiGroups: [""], resources: [pods/log], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: erin-logs, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: log-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonator}
rules:
- {apiGroups: [""], resources: [users], resourceNames: [bob], verbs: [impersonate]}
- {apiGroups: [""], resources: [groups], resourceNames: [auditors], verbs: [impersonate]}
- {apiGroups: [authentication.k8s.io], resources: [userextras/scopes], resourceNames: [view], verbs: [impersonate]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dave-impersonator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonator}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: binder, namespace: team-b}
rules:
- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], resourceNames: [view], verbs: [bind]}
- {apiGroups: [rbac.authorization.k8s.io], resources: [rolebindings], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dave-binder, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: binder}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gina-admin, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gina}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-edit, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: robot}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: public, namespace: team-a}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: private, namespace: team-a}
data: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: team-b}
stringData: {password: hunter2}
"#;

/// One row: who asks (a token, maybe impersonating), what, and the documented answer.
struct Row {
    token: &'static str,
    /// `--as` / `Impersonate-User`.
    as_user: Option<&'static str>,
    verb: &'static str,
    /// `group/version/plural[/subresource]`, or a path for a non-resource URL.
    what: &'static str,
    namespace: Option<&'static str>,
    name: Option<&'static str>,
    allowed: bool,
    /// The documented rule the answer follows.
    why: &'static str,
}

const fn row(
    token: &'static str,
    verb: &'static str,
    what: &'static str,
    namespace: Option<&'static str>,
    name: Option<&'static str>,
    allowed: bool,
    why: &'static str,
) -> Row {
    Row {
        token,
        as_user: None,
        verb,
        what,
        namespace,
        name,
        allowed,
        why,
    }
}

const A: Option<&str> = Some("team-a");
const B: Option<&str> = Some("team-b");
const ALL: Option<&str> = None;

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // alice: edit in team-a, through her group.
    row("t-alice", "get", "/v1/configmaps", A, Some("public"), true, "edit reads ConfigMaps in its namespace"),
    row("t-alice", "create", "/v1/configmaps", A, None, true, "edit writes ConfigMaps"),
    row("t-alice", "delete", "/v1/configmaps", A, Some("public"), true, "edit deletes"),
    row("t-alice", "deletecollection", "/v1/configmaps", A, None, true, "edit deletes collections"),
    row("t-alice", "watch", "/v1/configmaps", A, None, true, "edit watches"),
    row("t-alice", "list", "/v1/secrets", A, None, true, "edit reads Secrets"),
    row("t-alice", "get", "/v1/secrets", B, Some("db"), false, "a RoleBinding grants only in its namespace"),
    row("t-alice", "list", "/v1/configmaps", B, None, false, "nothing in team-b"),
    row("t-alice", "list", "/v1/configmaps", ALL, None, false, "a RoleBinding grants nothing across namespaces"),
    row("t-alice", "create", "apps/v1/deployments", A, None, true, "edit writes Deployments"),
    row("t-alice", "patch", "apps/v1/deployments/scale", A, Some("web"), true, "edit scales Deployments"),
    row("t-alice", "create", "rbac.authorization.k8s.io/v1/rolebindings", A, None, false, "edit grants no RBAC writes"),
    row("t-alice", "create", "rbac.authorization.k8s.io/v1/roles", A, None, false, "edit grants no RBAC writes"),
    row("t-alice", "get", "/v1/namespaces", A, Some("team-a"), true, "view (in edit) reads its own Namespace"),
    row("t-alice", "list", "/v1/namespaces", ALL, None, false, "listing Namespaces is cluster-scoped"),
    row("t-alice", "delete", "/v1/namespaces", A, Some("team-a"), false, "edit deletes no Namespace"),
    row("t-alice", "create", "/v1/serviceaccounts/token", A, Some("robot"), true, "edit creates service account tokens"),
    row("t-alice", "impersonate", "/v1/serviceaccounts", A, Some("robot"), true, "edit impersonates service accounts"),
    row("t-alice", "get", "/metrics", ALL, None, false, "no rule names /metrics"),
    row("t-alice", "get", "/backflow/v1/diff", ALL, None, false, "backflow's face is a non-resource URL no role of hers names"),
    row("t-alice", "get", "/apis", ALL, None, true, "system:discovery for every authenticated user"),
    row("t-alice", "get", "/healthz", ALL, None, true, "system:public-info-viewer"),
    // bob: view in team-a.
    row("t-bob", "get", "/v1/configmaps", A, Some("public"), true, "view reads ConfigMaps"),
    row("t-bob", "update", "/v1/configmaps", A, Some("public"), false, "view writes nothing"),
    row("t-bob", "get", "/v1/secrets", A, Some("db"), false, "view does not read Secrets"),
    row("t-bob", "list", "/v1/pods", A, None, true, "view reads Pods"),
    row("t-bob", "get", "/v1/pods/log", A, Some("p"), true, "view reads pod logs"),
    row("t-bob", "list", "coordination.k8s.io/v1/leases", A, None, true, "a ClusterRole labelled aggregate-to-view adds to view"),
    row("t-bob", "list", "coordination.k8s.io/v1/leases", B, None, false, "aggregation does not widen the binding"),
    row("t-bob", "get", "apps/v1/deployments/scale", A, Some("web"), true, "view reads scale"),
    row("t-bob", "update", "apps/v1/deployments/scale", A, Some("web"), false, "view writes no scale"),
    row("t-bob", "list", "rbac.authorization.k8s.io/v1/roles", A, None, false, "view does not read RBAC"),
    row("t-bob", "create", "authorization.k8s.io/v1/selfsubjectaccessreviews", ALL, None, true, "system:basic-user"),
    row("t-bob", "get", "/version", ALL, None, true, "system:public-info-viewer"),
    // carol: view everywhere (her group), /metrics.
    row("t-carol", "list", "/v1/configmaps", ALL, None, true, "a ClusterRoleBinding grants in every namespace"),
    row("t-carol", "get", "/v1/configmaps", B, Some("x"), true, "…team-b included"),
    row("t-carol", "get", "/v1/secrets", B, Some("db"), false, "view does not read Secrets"),
    row("t-carol", "get", "/metrics", ALL, None, true, "a nonResourceURLs rule"),
    row("t-carol", "post", "/metrics", ALL, None, false, "the rule allows get only"),
    row("t-carol", "list", "/v1/namespaces", ALL, None, true, "view reads Namespaces, cluster-wide here"),
    row("t-carol", "delete", "/v1/configmaps", A, Some("public"), false, "view writes nothing"),
    row("t-carol", "list", "rbac.authorization.k8s.io/v1/clusterroles", ALL, None, false, "view does not read RBAC"),
    // erin: one ConfigMap by name, */scale, pods/log.
    row("t-erin", "get", "/v1/configmaps", A, Some("public"), true, "resourceNames: public"),
    row("t-erin", "get", "/v1/configmaps", A, Some("private"), false, "another name"),
    row("t-erin", "list", "/v1/configmaps", A, None, false, "resourceNames never allow a list"),
    row("t-erin", "update", "apps/v1/deployments/scale", A, Some("web"), true, "*/scale"),
    row("t-erin", "get", "apps/v1/statefulsets/scale", A, Some("db"), true, "*/scale, any resource"),
    row("t-erin", "get", "apps/v1/deployments", A, Some("web"), false, "the subresource only"),
    row("t-erin", "get", "/v1/pods/log", A, Some("p"), true, "pods/log"),
    row("t-erin", "get", "/v1/pods", A, Some("p"), false, "the subresource only"),
    row("t-erin", "get", "/v1/pods/log", B, Some("p"), false, "bound in team-a only"),
    // dave: impersonates bob and the auditors; binds view in team-b.
    row("t-dave", "impersonate", "/v1/users", ALL, Some("bob"), true, "resourceNames: bob"),
    row("t-dave", "impersonate", "/v1/users", ALL, Some("alice"), false, "not alice"),
    row("t-dave", "impersonate", "/v1/groups", ALL, Some("auditors"), true, "groups: auditors"),
    row("t-dave", "impersonate", "/v1/groups", ALL, Some("system:masters"), false, "not system:masters"),
    Row { as_user: Some("bob"), ..row("t-dave", "get", "/v1/configmaps", A, Some("public"), true, "as bob: view in team-a") },
    Row { as_user: Some("bob"), ..row("t-dave", "get", "/v1/secrets", A, Some("db"), false, "as bob: no Secrets") },
    Row { as_user: Some("alice"), ..row("t-dave", "get", "/v1/configmaps", A, Some("public"), false, "may not impersonate alice") },
    row("t-dave", "get", "/v1/configmaps", A, Some("public"), false, "dave himself holds nothing there"),
    row("t-dave", "create", "rbac.authorization.k8s.io/v1/rolebindings", B, None, true, "Role binder"),
    row("t-dave", "bind", "rbac.authorization.k8s.io/v1/clusterroles", B, Some("view"), true, "bind, resourceNames: view"),
    row("t-dave", "bind", "rbac.authorization.k8s.io/v1/clusterroles", B, Some("edit"), false, "not edit"),
    // frank: system:masters.
    row("t-frank", "delete", "/v1/namespaces", ALL, Some("team-b"), true, "system:masters may do everything"),
    row("t-frank", "get", "/metrics", ALL, None, true, "…non-resource URLs included"),
    row("t-frank", "get", "/backflow/v1/diff", ALL, None, true, "…backflow's face too"),
    row("t-frank", "escalate", "rbac.authorization.k8s.io/v1/clusterroles", ALL, Some("x"), true, "…and escalate"),
    // gina: admin in team-b.
    row("t-gina", "create", "rbac.authorization.k8s.io/v1/rolebindings", B, None, true, "admin writes RoleBindings"),
    row("t-gina", "create", "authorization.k8s.io/v1/localsubjectaccessreviews", B, None, true, "admin asks about others in its namespace"),
    row("t-gina", "create", "rbac.authorization.k8s.io/v1/rolebindings", A, None, false, "admin in team-b only"),
    row("t-gina", "get", "/v1/resourcequotas", B, Some("q"), true, "admin reads quotas (view)"),
];

/// The server, the users' tokens file, and the setup applied.
fn world() -> (World, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.csv");
    let lines: Vec<String> = USERS
        .iter()
        .enumerate()
        .map(|(i, (token, name, groups))| {
            if groups.is_empty() {
                format!("{token},{name},{}", 2000 + i)
            } else {
                format!("{token},{name},{},\"{groups}\"", 2000 + i)
            }
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let w = World::start(&["--token-auth-file", file.to_str().unwrap(), "--no-apply"]);
    w.apply(SETUP);
    (w, dir)
}

/// `group/version/plural[/sub]` split; `None` for a non-resource path.
struct Resource<'a> {
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    sub: Option<&'a str>,
}

fn resource(what: &str) -> Option<Resource<'_>> {
    let mut parts = what.split('/');
    let group = parts.next()?;
    let version = parts.next()?;
    let plural = parts.next()?;
    if version.is_empty() || plural.is_empty() {
        return None;
    }
    Some(Resource {
        group,
        version,
        plural,
        sub: parts.next(),
    })
}

/// `kubectl auth can-i` of a row: its answer.
fn can_i(w: &World, r: &Row) -> bool {
    let mut args: Vec<String> = vec![
        "--token".into(),
        r.token.into(),
        "auth".into(),
        "can-i".into(),
        r.verb.into(),
    ];
    match resource(r.what) {
        Some(res) => {
            let qualified = if res.group.is_empty() {
                res.plural.to_string()
            } else {
                format!("{}.{}", res.plural, res.group)
            };
            args.push(match r.name {
                Some(n) => format!("{qualified}/{n}"),
                None => qualified,
            });
            if let Some(sub) = res.sub {
                args.push(format!("--subresource={sub}"));
            }
            match r.namespace {
                Some(ns) => args.extend(["-n".into(), ns.into()]),
                None if res.plural != "namespaces" => args.push("--all-namespaces".into()),
                None => {}
            }
        }
        None => args.push(r.what.into()),
    }
    if let Some(user) = r.as_user {
        args.extend(["--as".into(), user.into()]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = w.kubectl_run(&refs);
    match (out.code, out.stdout.trim()) {
        (Some(0), "yes") => true,
        (Some(1), "no") => false,
        // An impersonation refused is an error, not an answer: no.
        (Some(1), _) if r.as_user.is_some() && out.stderr.contains("forbidden") => false,
        _ => panic!("kubectl auth can-i {}: {out}", args.join(" ")),
    }
}

/// The row as kubectl itself would do it (`get`, `list` and a server-side dry-run `delete` of
/// a resource), when it is one of those: whether kubectl was let through (not `Forbidden`).
fn kubectl_did(w: &World, r: &Row) -> Option<bool> {
    let res = resource(r.what)?;
    if res.sub.is_some() || !matches!(r.verb, "get" | "list" | "delete") {
        return None;
    }
    let qualified = if res.group.is_empty() {
        res.plural.to_string()
    } else {
        format!("{}.{}", res.plural, res.group)
    };
    let mut args: Vec<String> = vec!["--token".into(), r.token.into()];
    args.push(if r.verb == "delete" {
        "delete".into()
    } else {
        "get".into()
    });
    args.push(qualified);
    if r.verb != "list" {
        args.push(r.name?.into());
    }
    match r.namespace {
        Some(ns) if res.plural != "namespaces" => args.extend(["-n".into(), ns.into()]),
        None if res.plural != "namespaces" => args.push("--all-namespaces".into()),
        _ => {}
    }
    if r.verb == "delete" {
        args.push("--dry-run=server".into());
    }
    if let Some(user) = r.as_user {
        args.extend(["--as".into(), user.into()]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = w.kubectl_run(&refs);
    Some(!(out.stderr.contains("(Forbidden)") || out.stderr.contains("is forbidden")))
}

/// The real request a row stands for, as the Python client sends it.
fn request(r: &Row) -> Value {
    let Some(res) = resource(r.what) else {
        let method = if r.verb == "post" { "POST" } else { "GET" };
        return json!({"token": r.token, "method": method, "path": r.what});
    };
    let base = if res.group.is_empty() {
        format!("/api/{}", res.version)
    } else {
        format!("/apis/{}/{}", res.group, res.version)
    };
    // A Namespace's own requests name it; everything else sits in its namespace.
    let ns_part = match r.namespace {
        Some(ns) if res.plural != "namespaces" => format!("/namespaces/{ns}"),
        _ => String::new(),
    };
    let collection = format!("{base}{ns_part}/{}", res.plural);
    let item = format!("{collection}/{}", r.name.unwrap_or("x"));
    let item = match res.sub {
        Some(sub) => format!("{item}/{sub}"),
        None => item,
    };
    let body = json!({"metadata": {"name": r.name.unwrap_or("x")}});
    let (method, path, body, impersonate) = match r.verb {
        "get" => ("GET", item, Value::Null, None),
        "list" => ("GET", collection, Value::Null, None),
        "watch" => (
            "GET",
            format!("{collection}?watch=1&timeoutSeconds=1"),
            Value::Null,
            None,
        ),
        "create" if res.sub.is_some() => (
            "POST",
            format!("{item}?dryRun=All"),
            json!({"spec": {}}),
            None,
        ),
        "create" => ("POST", format!("{collection}?dryRun=All"), body, None),
        "update" => ("PUT", format!("{item}?dryRun=All"), body, None),
        "patch" => ("PATCH", format!("{item}?dryRun=All"), json!({}), None),
        "delete" => ("DELETE", format!("{item}?dryRun=All"), Value::Null, None),
        "deletecollection" => (
            "DELETE",
            format!("{collection}?dryRun=All"),
            Value::Null,
            None,
        ),
        // Impersonation is tried on whoami, which every user may ask.
        "impersonate" => {
            let header = match res.plural {
                "groups" => json!({"Impersonate-User": "bob", "Impersonate-Group": r.name}),
                "serviceaccounts" => {
                    json!({"Impersonate-User": format!("system:serviceaccount:{}:{}", r.namespace.unwrap_or(""), r.name.unwrap_or(""))})
                }
                _ => json!({"Impersonate-User": r.name}),
            };
            (
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews".to_string(),
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                Some(header),
            )
        }
        // Binding (escalating) a role is tried by creating a RoleBinding (a ClusterRole) that
        // names it.
        "bind" => (
            "POST",
            format!(
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/rolebindings?dryRun=All",
                r.namespace.unwrap_or("default")
            ),
            json!({"metadata": {"name": "try"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": r.name},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "someone"}]}),
            None,
        ),
        "escalate" => (
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles?dryRun=All".to_string(),
            json!({"metadata": {"name": r.name}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            None,
        ),
        other => panic!("no request for verb {other}"),
    };
    let mut headers = impersonate.unwrap_or_else(|| json!({}));
    if let Some(user) = r.as_user {
        headers["Impersonate-User"] = json!(user);
    }
    json!({"token": r.token, "method": method, "path": path, "body": body, "headers": headers})
}

/// Sends each request with the official Python client; their HTTP status codes.
const PYTHON_REQUESTS: &str = r"
import sys, json
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(sys.argv[1])
api = client.ApiClient()
answers = []
for r in json.loads(sys.argv[2]):
    headers = {'Authorization': 'Bearer ' + r['token'], 'Content-Type': 'application/merge-patch+json' if r['method'] == 'PATCH' else 'application/json'}
    headers.update(r.get('headers') or {})
    try:
        resp = api.rest_client.request(r['method'], api.configuration.host + r['path'], headers=headers,
                                       body=r.get('body'))
        status, data = resp.status, resp.read() if resp.status == 403 else b''
    except ApiException as e:
        status, data = e.status, (e.body or b'')
    details = json.loads(data).get('details') if data else None
    answers.append({'code': status, 'details': details})
print(json.dumps(answers))
";

/// What the server answered one request: its code and, for a 403, its Status's details.
struct Answer {
    code: u16,
    details: Option<Value>,
}

fn python_answers(w: &World, requests: &[Value]) -> Vec<Answer> {
    let kubeconfig = w.dirs.data.join("kubeconfig");
    let input = serde_json::to_string(requests).unwrap();
    let out =
        backflow_testkit::python::run(PYTHON_REQUESTS, &[&kubeconfig.to_string_lossy(), &input]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    answers
        .into_iter()
        .map(|a| Answer {
            code: u16::try_from(a["code"].as_u64().unwrap()).unwrap(),
            details: Some(a["details"].clone()).filter(|d| !d.is_null()),
        })
        .collect()
}

#[test]
fn the_decision_table_holds_for_kubectl_auth_can_i_and_for_real_requests() {
    assert!(TABLE.len() >= 60, "{} rows", TABLE.len());
    let (w, _tokens) = world();
    // The roles the server bootstraps are its defaults, not mirrored; those a person made are.
    w.wait_present("live/_cluster/rbac.authorization.k8s.io/clusterroles/metrics-reader.yaml");
    w.wait_settled();
    let files = w.files();
    assert!(
        files.iter().all(|f| !f.contains("cluster-admin")
            && !f.contains("system:")
            && !f.contains("system-")),
        "{files:?}"
    );
    // The aggregated roles hold what they aggregate, as the aggregation controller writes it.
    let view = w.get_json(&["clusterrole", "view"]);
    let groups: Vec<&str> = view["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r["apiGroups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
        })
        .collect();
    assert!(
        groups.contains(&"coordination.k8s.io") && groups.contains(&"apps"),
        "{view}"
    );
    let edit = w.kubectl(&["describe", "clusterrole", "edit"]);
    assert!(
        edit.lines().any(|l| l.trim_start().starts_with("secrets ")),
        "{edit}"
    );
    let requests: Vec<Value> = TABLE.iter().map(request).collect();
    let answers = python_answers(&w, &requests);
    let mut wrong = Vec::new();
    for ((r, answer), req) in TABLE.iter().zip(&answers).zip(&requests) {
        let asked = can_i(&w, r);
        let code = answer.code;
        let served = code != 403;
        if let Some(expected) = (!served).then(|| denial_details(r)).flatten()
            && answer.details.as_ref() != Some(&expected)
        {
            wrong.push(format!(
                "{} {} {}: the 403's details were {:?}, expected {expected}",
                r.token, r.verb, r.what, answer.details
            ));
        }
        let by_kubectl = kubectl_did(&w, r);
        if asked != r.allowed || served != r.allowed || by_kubectl.is_some_and(|k| k != r.allowed) {
            wrong.push(format!(
                "{} {} {} {:?} {:?} (as {:?}): expected {}, can-i said {asked}, the request got {code} ({}), kubectl let through: {by_kubectl:?} — {}",
                r.token, r.verb, r.what, r.namespace, r.name, r.as_user, r.allowed, req["path"], r.why
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows wrong:\n{}",
        wrong.len(),
        TABLE.len(),
        wrong.join("\n")
    );
}

/// The details of kube-apiserver's 403 for row `r`: the resource without its subresource, its
/// group, the name asked for. Not for rows acting as someone else (the refusal names who) or
/// asking for `bind`/`escalate` (the request writes a binding or role, and its refusal names
/// that object).
fn denial_details(r: &Row) -> Option<Value> {
    if r.as_user.is_some() || matches!(r.verb, "bind" | "escalate") {
        return None;
    }
    let Some(res) = resource(r.what) else {
        return Some(json!({}));
    };
    let mut details = json!({"kind": res.plural});
    if !res.group.is_empty() {
        details["group"] = json!(res.group);
    }
    let named = matches!(
        r.verb,
        "get" | "update" | "patch" | "delete" | "impersonate"
    ) || (r.verb == "create" && res.sub.is_some());
    if named {
        details["name"] = json!(r.name.unwrap_or("x"));
    }
    Some(details)
}

/// `kubectl create -f` of `yaml` as the user of `token`, server-side dry run: what kubectl
/// printed and whether it worked.
fn create_as(w: &World, token: &str, name: &str, yaml: &str) -> (bool, String) {
    let file = w.dirs.work.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let out = w.kubectl_run(&[
        "--token",
        token,
        "create",
        "--dry-run=server",
        "-f",
        file.to_str().unwrap(),
    ]);
    (out.code == Some(0), out.stderr)
}

fn role(namespace: &str, rules: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: made, namespace: {namespace}}}\nrules: {rules}\n"
    )
}

fn role_binding(namespace: &str, kind: &str, name: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: made, namespace: {namespace}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {kind}, name: {name}}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: mallory}}]\n"
    )
}

/// Escalation prevention, as the RBAC documentation states it: a user may create or update a
/// Role only with permissions they already hold in its scope (a wildcard only if they hold the
/// wildcard), and a binding only to a role whose permissions they hold, or that they may `bind`.
#[test]
fn a_role_or_binding_grants_only_what_its_writer_holds_or_may_bind() {
    let (w, _tokens) = world();
    let cases: &[(&str, &str, String, bool, &str)] = &[
        (
            "t-gina",
            "r1",
            role(
                "team-b",
                "[{apiGroups: [''], resources: [secrets], verbs: [get]}]",
            ),
            true,
            "admin holds get secrets in team-b",
        ),
        (
            "t-gina",
            "r2",
            role(
                "team-b",
                "[{apiGroups: [''], resources: [configmaps], verbs: ['*']}]",
            ),
            false,
            "admin does not hold the verb wildcard",
        ),
        (
            "t-gina",
            "r3",
            role(
                "team-b",
                "[{apiGroups: [storage.k8s.io], resources: [storageclasses], verbs: [list]}]",
            ),
            false,
            "not held at all",
        ),
        (
            "t-gina",
            "r4",
            role_binding("team-b", "ClusterRole", "edit"),
            true,
            "admin holds everything edit grants",
        ),
        (
            "t-gina",
            "r5",
            role_binding("team-b", "ClusterRole", "cluster-admin"),
            false,
            "a binding to cluster-admin escalates",
        ),
        (
            "t-dave",
            "r6",
            role_binding("team-b", "ClusterRole", "view"),
            true,
            "dave holds none of view, but may bind it",
        ),
        (
            "t-dave",
            "r7",
            role_binding("team-b", "ClusterRole", "edit"),
            false,
            "dave may bind view only",
        ),
        (
            "t-frank",
            "r8",
            role_binding("team-b", "ClusterRole", "cluster-admin"),
            true,
            "system:masters",
        ),
    ];
    for (token, name, yaml, allowed, why) in cases {
        let (worked, said) = create_as(&w, token, name, yaml);
        assert_eq!(worked, *allowed, "{token} {name} ({why}):\n{said}");
        if !allowed {
            assert!(
                said.contains("is attempting to grant RBAC permissions not currently held"),
                "{token} {name}: kube-apiserver's message:\n{said}"
            );
        }
    }
    // Impersonated extras are authorized one by one (`userextras/<key>`, named by the value).
    let whoami = |extra: &str| {
        json!({"token": "t-dave", "method": "POST", "path": "/apis/authentication.k8s.io/v1/selfsubjectreviews",
               "body": {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
               "headers": {"Impersonate-User": "bob", "Impersonate-Extra-Scopes": extra}})
    };
    let answers = python_answers(&w, &[whoami("view"), whoami("admin")]);
    assert_eq!(
        answers.iter().map(|a| a.code).collect::<Vec<_>>(),
        [201, 403]
    );
    assert_eq!(
        answers[1].details,
        Some(json!({"name": "admin", "group": "authentication.k8s.io", "kind": "userextras"})),
        "the impersonation refused names the extra's value"
    );
    // Without `escalate`, raising a Role one holds over what one holds is refused too; with
    // it, allowed (frank: system:masters).
    let (worked, said) = create_as(
        &w,
        "t-gina",
        "r9",
        &role(
            "team-b",
            "[{apiGroups: [''], resources: [nodes], verbs: [get]}]",
        ),
    );
    assert!(!worked && said.contains("Resources:[\"nodes\"]"), "{said}");
}

/// alice has `edit` in team-a (through her group): she changes `ConfigMaps` there, cannot read
/// Secrets elsewhere, cannot touch backflow-system, cannot bind herself cluster-admin; and her
/// refused writes leave nothing in the store or in Git. `kubectl auth can-i --list` shows what
/// she holds.
#[test]
fn alice_with_edit_in_team_a_changes_it_and_nothing_else() {
    let (w, _tokens) = world();
    let alice = |args: &[&str]| {
        let mut all = vec!["--token", "t-alice"];
        all.extend_from_slice(args);
        w.kubectl_run(&all)
    };
    let made = alice(&[
        "create",
        "configmap",
        "by-alice",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);
    assert_eq!(made.code, Some(0), "{made}");
    w.wait_present("live/team-a/configmaps/by-alice.yaml");
    let refused = [
        alice(&["get", "secret", "db", "-n", "team-b"]),
        alice(&[
            "create",
            "configmap",
            "sneaky",
            "-n",
            "team-b",
            "--from-literal=k=v",
        ]),
        alice(&["delete", "gitprovider", "default", "-n", "backflow-system"]),
        alice(&[
            "create",
            "configmap",
            "sneaky",
            "-n",
            "backflow-system",
            "--from-literal=k=v",
        ]),
        alice(&[
            "create",
            "rolebinding",
            "me-root",
            "-n",
            "team-a",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ]),
        alice(&[
            "create",
            "clusterrolebinding",
            "me-root",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ]),
    ];
    for out in &refused {
        assert_eq!(out.code, Some(1), "{out}");
        assert!(out.stderr.contains("is forbidden: User \"alice\""), "{out}");
    }
    assert!(
        refused[0].stderr.contains("secrets \"db\" is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team-b\""),
        "{}",
        refused[0]
    );
    // Nothing of it reached the store or Git.
    for (kind, name, ns) in [
        ("configmap", "sneaky", "team-b"),
        ("configmap", "sneaky", "backflow-system"),
        ("rolebinding", "me-root", "team-a"),
    ] {
        let got = w.kubectl_run(&["get", kind, name, "-n", ns]);
        assert_eq!(got.code, Some(1), "{got}");
    }
    assert_eq!(
        w.kubectl_run(&["get", "clusterrolebinding", "me-root"])
            .code,
        Some(1)
    );
    w.kubectl(&["get", "gitprovider", "default", "-n", "backflow-system"]);
    w.wait_settled();
    let files = w.files();
    assert!(
        files
            .iter()
            .all(|f| !f.contains("sneaky") && !f.contains("me-root")),
        "{files:?}"
    );
    // What she may do in team-a, as kubectl lists it.
    let list = alice(&["auth", "can-i", "--list", "-n", "team-a"]);
    assert_eq!(list.code, Some(0), "{list}");
    let line = |resource: &str| {
        list.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .unwrap_or_else(|| panic!("no {resource} in:\n{}", list.stdout))
            .to_string()
    };
    assert!(
        line("configmaps").contains("create") && line("configmaps").contains("delete"),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout
            .lines()
            .all(|l| !l.starts_with("rolebindings.rbac")),
        "{}",
        list.stdout
    );
    // Asked about her by others: the admin (SubjectAccessReview), gina as admin of team-b
    // (LocalSubjectAccessReview, in her namespace only).
    let review = |token: Option<&str>, name: &str, yaml: &str| -> Value {
        let file = w.dirs.work.join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let mut args = Vec::new();
        if let Some(t) = token {
            args.extend(["--token", t]);
        }
        let path = file.to_string_lossy().into_owned();
        args.extend(["create", "-f", path.as_str(), "-o", "json"]);
        serde_json::from_str(&w.kubectl(&args)).unwrap()
    };
    let sar = |verb: &str, resource: &str, ns: &str| {
        format!(
            "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: alice\n  groups: [team-a-devs, system:authenticated]\n  resourceAttributes: {{verb: {verb}, resource: {resource}, namespace: {ns}}}\n"
        )
    };
    assert_eq!(
        review(None, "sar1", &sar("create", "configmaps", "team-a"))["status"]["allowed"],
        true
    );
    assert_eq!(
        review(None, "sar2", &sar("get", "secrets", "team-b"))["status"]["allowed"],
        false
    );
    let lsar = "apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nmetadata: {namespace: team-b}\nspec:\n  user: bob\n  resourceAttributes: {verb: get, resource: configmaps, namespace: team-b}\n";
    assert_eq!(
        review(Some("t-gina"), "lsar", lsar)["status"]["allowed"],
        false,
        "bob holds nothing in team-b"
    );
    let not_hers = w.kubectl_run(&[
        "--token",
        "t-alice",
        "create",
        "-f",
        &w.dirs.work.join("sar1.yaml").to_string_lossy(),
    ]);
    assert!(
        not_hers
            .stderr
            .contains("cannot create resource \"subjectaccessreviews\""),
        "{not_hers}"
    );
    let elsewhere = alice(&["auth", "can-i", "--list", "-n", "team-b"]);
    assert!(
        elsewhere
            .stdout
            .lines()
            .all(|l| !l.starts_with("configmaps ")),
        "{}",
        elsewhere.stdout
    );
}

/// Git is no way around RBAC: a `NativeClaim` naming a service account applies with its rights
/// (impersonation), so a push of an object in a namespace the account may not write is refused
/// by the API server for that object alone, told on the claim, and the rest is applied.
#[test]
fn an_applier_acting_as_its_service_account_applies_only_what_it_may() {
    applies_only_what_deployer_may(&[], "{serviceAccountName: deployer}");
}

/// With `--default-service-account`, a claim that names no account acts as that one, in the
/// claim's namespace: before it, such a claim applied with backflow's own (unlimited) rights.
#[test]
fn a_claim_naming_no_account_acts_as_the_default_service_account() {
    applies_only_what_deployer_may(&["--default-service-account", "deployer"], "{}");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_backflow"))
        .args([
            "serve",
            "--default-service-account",
            "backflow-system/deployer",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("is not a service account name"),
        "{said}"
    );
}

/// A world whose claim `apps` (spec `claim_spec`) folder gets a push of one `ConfigMap` in
/// team-a, where `deployer` has `edit`, and one in team-b, where it has nothing: only the first
/// is applied, the second refused with the account named.
fn applies_only_what_deployer_may(serve_args: &[&str], claim_spec: &str) -> World {
    let w = World::start(serve_args);
    if serve_args.is_empty() {
        crate::apply::wait_acting(&w);
    } else {
        // serve's own claim names no account either: it acts as the default one too, which
        // may not apply what the default folder holds (the CRDs).
        let refused = wait_for(
            "the default claim to act as the default account",
            || format!("{:#}", crate::apply::claim(&w)),
            || {
                let said = crate::apply::claim(&w)["conditions"].to_string();
                said.contains("User \\\"system:serviceaccount:backflow-system:deployer\\\" cannot")
                    .then_some(said)
            },
        );
        assert!(refused.contains("customresourcedefinitions"), "{refused}");
    }
    crate::apply::one_way_default(&w);
    let setup = r"apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: deployer, namespace: backflow-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer-edit, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: deployer, namespace: backflow-system}]
---
apiVersion: backflow.dev/v1alpha1
kind: NativeClaim
metadata: {name: apps, namespace: backflow-system}
spec: CLAIM_SPEC
---
apiVersion: backflow.dev/v1alpha1
kind: GitTarget
metadata: {name: apps, namespace: backflow-system}
spec:
  providerRef: {name: default}
  branch: main
  path: apps
  applierClaimRef: {kind: NativeClaim, name: apps}
---
apiVersion: backflow.dev/v1alpha1
kind: WatchRule
metadata: {name: apps, namespace: backflow-system}
spec: {targetRef: {name: apps}, rules: [{apiGroups: [''], resources: [configmaps], sourceNamespace: team-a}]}
";
    w.apply(&setup.replace("CLAIM_SPEC", claim_spec));
    wait_for(
        "the apps claim to act",
        || format!("{:?}", w.target_condition("apps", "ApplierClaimReady")),
        || {
            w.target_condition("apps", "ApplierClaimReady")
                .is_some_and(|c| c.status == "True")
                .then_some(())
        },
    );
    // What the setup made is mirrored first: the clone holds it.
    w.wait_settled();
    let clone = w.clone_origin("ci");
    for (ns, name) in [("team-a", "allowed"), ("team-b", "refused")] {
        let dir = clone.join(format!("apps/{ns}/configmaps"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("{name}.yaml")),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  k: v\n"),
        )
        .unwrap();
    }
    w.commit_all_and_push_rebasing(&clone, "one object the deployer may write, one it may not");
    wait_for(
        "the allowed object applied",
        || {
            format!(
                "{}\n{}\n{}",
                w.kubectl_run(&["get", "configmap", "allowed", "-n", "team-a"]),
                w.get_json(&["nativeclaim", "apps", "-n", "backflow-system"])["status"],
                w.kubectl(&["get", "events", "-n", "backflow-system"])
            )
        },
        || {
            (w.kubectl_run(&["get", "configmap", "allowed", "-n", "team-a"])
                .code
                == Some(0))
            .then_some(())
        },
    );
    let told = wait_for(
        "the refusal told on the claim",
        || w.kubectl(&["get", "events", "-n", "backflow-system"]),
        || {
            w.get_json(&["events", "-n", "backflow-system"])["items"]
                .as_array()?
                .iter()
                .filter(|e| e["reason"] == "ApplyFailed" && e["involvedObject"]["name"] == "apps")
                .find_map(|e| e["message"].as_str().map(str::to_string))
        },
    );
    assert!(
        told.contains("User \"system:serviceaccount:backflow-system:deployer\" cannot")
            && told.contains("team-b")
            && !told.contains("Status {"),
        "{told}"
    );
    let refused = w.kubectl_run(&["get", "configmap", "refused", "-n", "team-b"]);
    assert_eq!(refused.code, Some(1), "{refused}");
    w
}
