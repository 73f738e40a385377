use serde_json::json;

use super::*;

fn policy(extra_roles: &[Value], extra_bindings: &[Value]) -> Policy {
    let mut cluster_roles = Vec::new();
    let mut cluster_bindings = Vec::new();
    for o in bootstrap_objects() {
        if o["kind"] == "ClusterRole" {
            cluster_roles.push(o);
        } else {
            cluster_bindings.push(o);
        }
    }
    let roles: Vec<Value> = extra_roles
        .iter()
        .filter(|o| o["kind"] == "Role")
        .cloned()
        .collect();
    cluster_roles.extend(
        extra_roles
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .cloned(),
    );
    let bindings: Vec<Value> = extra_bindings
        .iter()
        .filter(|o| o["kind"] == "RoleBinding")
        .cloned()
        .collect();
    cluster_bindings.extend(
        extra_bindings
            .iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding")
            .cloned(),
    );
    Policy::from_objects(&roles, &cluster_roles, &bindings, &cluster_bindings)
}

fn user(name: &str) -> Subject {
    Subject {
        name: name.into(),
        groups: vec!["system:authenticated".into()],
    }
}

fn edit_in(ns: &str, who: &str) -> Value {
    json!({"kind": "RoleBinding", "metadata": {"name": "e", "namespace": ns},
           "roleRef": {"kind": "ClusterRole", "name": "edit"},
           "subjects": [{"kind": "User", "name": who}]})
}

#[test]
fn edit_in_one_namespace_allows_its_configmaps_and_nothing_elsewhere() {
    let p = policy(&[], &[edit_in("team-a", "alice")]);
    let alice = user("alice");
    let can = |verb: &str, resource: &str, ns: Option<&str>| {
        p.allows(&alice, &Attributes::resource(verb, "", resource, ns, None))
    };
    assert!(can("create", "configmaps", Some("team-a")));
    assert!(can("get", "secrets", Some("team-a")));
    assert!(!can("get", "secrets", Some("team-b")));
    assert!(!can("list", "configmaps", None), "not across namespaces");
    assert!(
        !can("create", "rolebindings", Some("team-a")),
        "edit grants no RBAC writes"
    );
    assert!(
        p.allows(&alice, &Attributes::non_resource("get", "/apis/apps")),
        "discovery"
    );
    assert!(!p.allows(&alice, &Attributes::non_resource("get", "/metrics")));
}

#[test]
fn subresources_wildcards_and_names_match_as_kube_apiserver_reads_them() {
    let rule = |r: Value| -> PolicyRule { serde_json::from_value(r).unwrap() };
    let a = |verb, resource, name| Attributes::resource(verb, "apps", resource, Some("ns"), name);
    let scale = rule(json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*/scale"]}));
    assert!(scale.allows(&a("get", "deployments/scale", None)));
    assert!(!scale.allows(&a("get", "deployments", None)));
    let named = rule(
        json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["deployments"], "resourceNames": ["web"]}),
    );
    assert!(named.allows(&a("get", "deployments", Some("web"))));
    assert!(!named.allows(&a("get", "deployments", Some("db"))));
    assert!(
        !named.allows(&a("get", "deployments", None)),
        "a list names nothing"
    );
    let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}));
    assert!(urls.allows(&Attributes::non_resource("get", "/apis/apps/v1")));
    assert!(!urls.allows(&Attributes::non_resource("get", "/api")));
}

#[test]
fn a_role_may_grant_only_what_its_writer_holds() {
    let p = policy(&[], &[edit_in("team-a", "alice")]);
    let alice = user("alice");
    let cm: PolicyRule = serde_json::from_value(
        json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}),
    )
    .unwrap();
    assert!(
        p.not_held(&alice, Some("team-a"), std::slice::from_ref(&cm))
            .is_empty()
    );
    assert_eq!(
        p.not_held(&alice, Some("team-b"), std::slice::from_ref(&cm))
            .len(),
        1
    );
    let star: PolicyRule = serde_json::from_value(
        json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]}),
    )
    .unwrap();
    assert!(
        !p.not_held(&alice, Some("team-a"), &[star]).is_empty(),
        "a wildcard is covered only by a wildcard"
    );
}

#[test]
fn masters_bypass_and_aggregated_roles_gain_labelled_rules() {
    let p = policy(
        &[
            json!({"kind": "ClusterRole", "metadata": {"name": "widgets-view",
                  "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                  "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]}),
        ],
        &[
            json!({"kind": "RoleBinding", "metadata": {"name": "v", "namespace": "team-a"},
                  "roleRef": {"kind": "ClusterRole", "name": "view"},
                  "subjects": [{"kind": "Group", "name": "viewers"}]}),
        ],
    );
    let viewer = Subject {
        name: "carol".into(),
        groups: vec!["viewers".into()],
    };
    assert!(p.allows(
        &viewer,
        &Attributes::resource("get", "example.com", "widgets", Some("team-a"), Some("w"))
    ));
    assert!(
        !p.allows(
            &viewer,
            &Attributes::resource("get", "", "secrets", Some("team-a"), Some("s"))
        ),
        "view reads no Secrets"
    );
    let root = Subject {
        name: "root".into(),
        groups: vec![MASTERS.into()],
    };
    assert!(p.allows(
        &root,
        &Attributes::resource("delete", "", "namespaces", None, Some("x"))
    ));
}

#[test]
fn a_denial_is_a_403_status_naming_what_was_asked_for() {
    let status = Attributes::resource("get", "", "secrets", Some("team-b"), Some("db"))
        .denied("alice")
        .to_status();
    assert_eq!(status["code"], 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["details"],
        serde_json::json!({"name": "db", "kind": "secrets"})
    );
    let mut scale = Attributes::resource("update", "apps", "deployments", Some("a"), Some("web"));
    if let Some(r) = scale.resource.as_mut() {
        r.subresource = Some("scale".into());
    }
    assert_eq!(
        scale.denied("alice").to_status()["details"],
        serde_json::json!({"name": "web", "group": "apps", "kind": "deployments"})
    );
    let path = Attributes::non_resource("get", "/metrics")
        .denied("alice")
        .to_status();
    assert_eq!(path["details"], serde_json::json!({}));
    assert_eq!(
        path["message"],
        "forbidden: User \"alice\" cannot get path \"/metrics\""
    );
}

#[test]
fn denials_read_as_kube_apiservers() {
    assert_eq!(
        Attributes::resource("get", "", "secrets", Some("team-b"), Some("db")).forbidden("alice"),
        "secrets \"db\" is forbidden: User \"alice\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team-b\""
    );
    assert_eq!(
        Attributes::resource(
            "list",
            "rbac.authorization.k8s.io",
            "clusterroles",
            None,
            None
        )
        .forbidden("alice"),
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    assert_eq!(
        Attributes::non_resource("get", "/metrics").forbidden("alice"),
        "forbidden: User \"alice\" cannot get path \"/metrics\""
    );
}

/// The cached policy is the same while no RBAC object changes, and follows every create,
/// update and delete of one.
#[tokio::test]
async fn the_cached_policy_follows_every_change_of_an_rbac_object() {
    use crate::engine::{DeleteOptions, Engine, WriteOptions};
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("store.redb"), 100).expect("store");
    let clock = Arc::new(backflow_api::ManualClock::new(std::time::UNIX_EPOCH));
    let engine = Engine::new(store, clock).await.expect("engine");
    let cache = PolicyCache::default();
    let t = |plural: &str| {
        engine
            .resource_type("rbac.authorization.k8s.io", "v1", plural)
            .expect("served")
    };
    let (roles, bindings) = (t("clusterroles"), t("clusterrolebindings"));
    let may_list = |p: &Policy| {
        p.allows(
            &user("alice"),
            &Attributes::resource("list", "", "pods", None, None),
        )
    };
    let empty = cache.current(engine.store());
    assert!(Arc::ptr_eq(&empty, &cache.current(engine.store())));
    assert!(!may_list(&empty));
    let role = |verbs: &str| {
        serde_json::from_str::<Value>(&format!(
            r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{{"name":"reader"}},"rules":[{{"apiGroups":[""],"resources":["pods"],"verbs":{verbs}}}]}}"#
        ))
        .expect("json")
    };
    let opts = WriteOptions::default();
    engine
        .create(&roles, "", role(r#"["list"]"#), &opts)
        .await
        .expect("role");
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "alice-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "User", "name": "alice"}]});
    engine
        .create(&bindings, "", binding, &opts)
        .await
        .expect("binding");
    let bound = cache.current(engine.store());
    assert!(may_list(&bound));
    assert!(Arc::ptr_eq(&bound, &cache.current(engine.store())));
    let mut changed = role(r#"["get"]"#);
    changed["metadata"]["resourceVersion"] =
        engine.get(&roles, "", "reader").expect("stored")["metadata"]["resourceVersion"].clone();
    engine
        .update(
            &roles,
            "",
            "reader",
            crate::engine::Part::Main,
            changed,
            &opts,
        )
        .await
        .expect("updated");
    let updated = cache.current(engine.store());
    assert!(!may_list(&updated), "an update is seen");
    assert!(updated.allows(
        &user("alice"),
        &Attributes::resource("get", "", "pods", None, Some("x"))
    ));
    engine
        .delete(&bindings, "", "alice-reads", &DeleteOptions::default())
        .await
        .expect("deleted");
    let after = cache.current(engine.store());
    assert!(
        !after.allows(
            &user("alice"),
            &Attributes::resource("get", "", "pods", None, Some("x"))
        ),
        "a delete is seen"
    );
}
