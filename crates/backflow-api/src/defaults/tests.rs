use serde_json::{Value, json};

use super::{fill, omit};

fn filled(mut v: Value) -> Value {
    fill(&mut v);
    v
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

/// Objects as people write them: none holds a field a default sets.
fn written() -> Vec<Value> {
    vec![
        deployment(),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {
            "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"spec": {"containers": [{"name": "a", "image": "busybox@sha256:abc",
                "livenessProbe": {"httpGet": {"port": 8080}},
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
                "volumes": [{"name": "cache"}, {"name": "cfg", "configMap": {"name": "cfg"}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 443, "targetPort": 8443}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"}, "spec": {
            "type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}]}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
            "template": {"metadata": {"labels": {"app": "j"}}, "spec": {"restartPolicy": "Never",
                "containers": [{"name": "j", "image": "busybox:1.36"}]}}}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"}, "spec": {
            "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "b", "namespace": "default"}]}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"},
            "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}}]}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "x"}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}, "value": 5}),
    ]
}

#[test]
fn a_deployment_gets_kube_apiservers_defaults() {
    let d = filled(deployment());
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    assert!(
        pod.get("enableServiceLinks").is_none(),
        "a Pod's default only"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
}

#[test]
fn stateful_and_daemon_sets_get_theirs() {
    let all: Vec<Value> = written().into_iter().map(filled).collect();
    let sts = &all[1]["spec"];
    assert_eq!(sts["replicas"], 1);
    assert_eq!(sts["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        sts["volumeClaimTemplates"][0]["spec"]["volumeMode"],
        "Filesystem"
    );
    let ds = &all[2]["spec"];
    assert_eq!(
        ds["updateStrategy"]["rollingUpdate"],
        json!({"maxUnavailable": 1, "maxSurge": 0})
    );
    let pod = &ds["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["imagePullPolicy"], "IfNotPresent",
        "pinned by digest"
    );
    assert_eq!(
        pod["containers"][0]["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(
        pod["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(pod["volumes"][0], json!({"name": "cache", "emptyDir": {}}));
    assert_eq!(pod["volumes"][1]["configMap"]["defaultMode"], 420);
}

#[test]
fn services_and_pods_get_theirs() {
    let all: Vec<Value> = written().into_iter().map(filled).collect();
    let svc = &all[3]["spec"];
    assert_eq!(svc["type"], "ClusterIP");
    assert_eq!(svc["sessionAffinity"], "None");
    assert_eq!(svc["internalTrafficPolicy"], "Cluster");
    assert_eq!(
        svc["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    assert_eq!(svc["ports"][1]["targetPort"], 8443);
    assert!(svc.get("externalTrafficPolicy").is_none());
    let lb = &all[4]["spec"];
    assert_eq!(lb["externalTrafficPolicy"], "Cluster");
    assert_eq!(lb["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        lb["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
        10800
    );
    let pod = &all[5]["spec"];
    assert_eq!(pod["enableServiceLinks"], true);
    assert_eq!(
        pod["containers"][0]["imagePullPolicy"], "Always",
        "no tag is latest"
    );
    assert_eq!(
        pod["containers"][0]["resources"]["requests"],
        json!({"cpu": "1"})
    );
}

#[test]
fn jobs_cron_jobs_and_autoscalers_get_theirs() {
    let all: Vec<Value> = written().into_iter().map(filled).collect();
    let job = &all[6];
    assert_eq!(job["metadata"]["labels"], json!({"app": "j"}));
    assert_eq!(job["spec"]["completions"], 1);
    assert_eq!(job["spec"]["parallelism"], 1);
    assert_eq!(job["spec"]["backoffLimit"], 6);
    assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(
        job["spec"]["template"]["spec"]["restartPolicy"], "Never",
        "kept"
    );
    let cron = &all[7]["spec"];
    assert_eq!(cron["concurrencyPolicy"], "Allow");
    assert_eq!(cron["successfulJobsHistoryLimit"], 3);
    assert!(
        cron["jobTemplate"]["spec"].get("backoffLimit").is_none(),
        "a Job's defaults are the Job's"
    );
    assert_eq!(
        cron["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirst"
    );
    let hpa = &all[8]["spec"];
    assert_eq!(hpa["minReplicas"], 1);
    assert_eq!(
        hpa["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(
        hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60,
        "kept"
    );
    assert_eq!(hpa["behavior"]["scaleDown"]["selectPolicy"], "Max");
    assert_eq!(hpa["behavior"]["scaleUp"]["policies"][0]["value"], 4);
}

#[test]
fn the_other_kinds_get_theirs() {
    let all: Vec<Value> = written().into_iter().map(filled).collect();
    assert_eq!(all[9]["type"], "Opaque");
    assert_eq!(
        all[10]["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );
    assert!(all[10]["subjects"][1].get("apiGroup").is_none());
    assert_eq!(all[11]["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(all[11]["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    let limit = &all[12]["spec"]["limits"][0];
    assert_eq!(limit["default"], json!({"cpu": "2"}));
    assert_eq!(
        limit["defaultRequest"],
        json!({"cpu": "2", "memory": "1Mi"})
    );
    assert_eq!(all[13]["reclaimPolicy"], "Delete");
    assert_eq!(all[13]["volumeBindingMode"], "Immediate");
    assert_eq!(all[14]["preemptionPolicy"], "PreemptLowerPriority");
}

#[test]
fn filling_twice_changes_nothing_and_kinds_without_defaults_are_left_alone() {
    for v in written() {
        let once = filled(v);
        assert_eq!(filled(once.clone()), once);
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(filled(cm.clone()), cm);
    let unknown = json!({"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}});
    assert_eq!(
        filled(unknown.clone()),
        unknown,
        "another group's Deployment"
    );
}

#[test]
fn a_new_file_omits_every_default_the_server_filled() {
    for v in written() {
        assert_eq!(omit(filled(v.clone()), None), v, "{}", v["kind"]);
    }
}

#[test]
fn what_git_holds_is_kept_and_values_that_differ_from_the_default_stay() {
    let live = filled(deployment());
    let mut git = deployment();
    git["spec"]["replicas"] = json!(1);
    git["spec"]["strategy"] = json!({"type": "RollingUpdate"});
    git["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    assert_eq!(omit(live.clone(), Some(&git)), git);

    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(3);
    edited["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = json!(1);
    edited["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
    let mut want = deployment();
    want["spec"]["replicas"] = json!(3);
    want["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": 1}});
    want["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
    let omitted = omit(edited.clone(), None);
    assert_eq!(omitted, want);
    assert_eq!(
        filled(omitted),
        edited,
        "filling gives the live object back"
    );

    let mut recreate = live;
    recreate["spec"]["strategy"] = json!({"type": "Recreate"});
    let omitted = omit(recreate.clone(), None);
    assert_eq!(omitted["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(filled(omitted), recreate);
}

#[test]
fn an_object_stored_before_its_defaults_existed_is_not_omitted_from() {
    // Live lacks progressDeadlineSeconds: omitting the rest would let a fill add it.
    let mut live = filled(deployment());
    live["spec"]
        .as_object_mut()
        .map(|s| s.remove("progressDeadlineSeconds"));
    assert_eq!(omit(live.clone(), None), live);
    // A StatefulSet whose strategy type was written: no rollingUpdate block was added.
    let mut sts = written()[1].clone();
    sts["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    let live = filled(sts.clone());
    assert!(
        live["spec"]["updateStrategy"]
            .get("rollingUpdate")
            .is_none()
    );
    let omitted = omit(live.clone(), None);
    assert_eq!(filled(omitted), live);
}

#[test]
fn image_pull_policy_follows_the_tag() {
    let policy = |image: &str| {
        let mut d = deployment();
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
        filled(d)["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"].clone()
    };
    assert_eq!(policy("nginx"), "Always");
    assert_eq!(policy("nginx:latest"), "Always");
    assert_eq!(policy("registry:5000/nginx"), "Always");
    assert_eq!(policy("registry:5000/nginx:1.2"), "IfNotPresent");
    assert_eq!(policy("nginx@sha256:abc"), "IfNotPresent");
}

mod never_loses {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::super::{fill, omit};

    /// A value for a defaulted field: left out, its default, or something else.
    fn choice(default: Value, other: Value) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![Just(None), Just(Some(default)), Just(Some(other))]
    }

    fn put(map: &mut Value, key: &str, v: Option<Value>) {
        if let Some(v) = v {
            map[key] = v;
        }
    }

    prop_compose! {
        fn written_service()(
            kind in choice(json!("ClusterIP"), json!("LoadBalancer")),
            affinity in choice(json!("None"), json!("ClientIP")),
            target in choice(json!(80), json!(8080)),
            protocol in choice(json!("TCP"), json!("UDP")),
            external in choice(json!("Cluster"), json!("Local")),
        ) -> Value {
            let mut spec = json!({"ports": [{"port": 80}]});
            put(&mut spec, "type", kind);
            put(&mut spec, "sessionAffinity", affinity);
            put(&mut spec, "externalTrafficPolicy", external);
            put(&mut spec["ports"][0], "targetPort", target);
            put(&mut spec["ports"][0], "protocol", protocol);
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec})
        }
    }

    prop_compose! {
        fn written_deployment()(
            replicas in choice(json!(1), json!(3)),
            kind in choice(json!("RollingUpdate"), json!("Recreate")),
            surge in choice(json!("25%"), json!(2)),
            policy in choice(json!("IfNotPresent"), json!("Never")),
            limit in choice(json!(10), json!(2)),
        ) -> Value {
            let mut spec = json!({"selector": {}, "template": {"spec": {"containers": [{"name": "c", "image": "c:1"}]}}});
            put(&mut spec, "replicas", replicas);
            put(&mut spec, "revisionHistoryLimit", limit);
            let is_recreate = kind.as_ref() == Some(&json!("Recreate"));
            let mut strategy = json!({});
            put(&mut strategy, "type", kind);
            if !is_recreate && surge.is_some() {
                strategy["rollingUpdate"] = json!({});
                put(&mut strategy["rollingUpdate"], "maxSurge", surge);
            }
            if strategy != json!({}) {
                spec["strategy"] = strategy;
            }
            put(&mut spec["template"]["spec"]["containers"][0], "imagePullPolicy", policy);
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec})
        }
    }

    /// Git's document (any of the written variants) and the live object (another, filled): what
    /// omit writes fills back to the live object, and holds every field Git held that live has.
    fn check(git: &Value, live: &Value) -> Result<(), TestCaseError> {
        let mut live = live.clone();
        fill(&mut live);
        let written = omit(live.clone(), Some(git));
        let mut refilled = written.clone();
        fill(&mut refilled);
        prop_assert_eq!(&refilled, &live);
        for key in git["spec"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            if live["spec"].get(key).is_some() {
                prop_assert!(written["spec"].get(key).is_some(), "{} dropped", key);
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn services(git in written_service(), live in written_service()) {
            check(&git, &live)?;
        }

        #[test]
        fn deployments(git in written_deployment(), live in written_deployment()) {
            check(&git, &live)?;
        }
    }
}

mod custom_resources {
    use serde_json::{Value, json};

    use super::super::{fill_with_schema, omit_with_schema};

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "never"}}},
            "spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast", "nullable": true},
                "tier": {"type": "string", "default": "gold"},
                "resources": {"type": "object", "default": {"cpu": "100m"},
                    "properties": {"cpu": {"type": "string"}, "memory": {"type": "string", "default": "64Mi"}}},
                "pools": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "size": {"type": "integer", "default": 3}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "object",
                    "properties": {"weight": {"type": "integer", "default": 10}}}},
            }},
        }})
    }

    fn written() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"mode": null, "tier": null, "pools": [{"name": "a"}, {"name": "b", "size": 5}],
                "labels": {"x": {}}}})
    }

    #[test]
    fn a_custom_resource_gets_its_schemas_defaults_as_kube_apiserver_applies_them() {
        let mut w = written();
        fill_with_schema(&schema(), &mut w);
        let spec = &w["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["mode"], Value::Null, "nullable: null stays");
        assert_eq!(spec["tier"], "gold", "not nullable: null takes the default");
        assert_eq!(
            spec["resources"],
            json!({"cpu": "100m", "memory": "64Mi"}),
            "defaults inside a default"
        );
        assert_eq!(
            spec["pools"],
            json!([{"name": "a", "size": 3}, {"name": "b", "size": 5}])
        );
        assert_eq!(spec["labels"]["x"]["weight"], 10);
        assert_eq!(
            w["metadata"],
            json!({"name": "w"}),
            "metadata is the server's"
        );

        let mut empty =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "e"}});
        fill_with_schema(&schema(), &mut empty);
        assert_eq!(
            empty["spec"]["replicas"], 1,
            "spec defaulted to {{}}, then its fields"
        );
    }

    #[test]
    fn git_gets_none_of_them_unless_it_held_them() {
        let schema = schema();
        let mut git = written();
        git["spec"].as_object_mut().map(|s| s.remove("tier"));
        let mut live = git.clone();
        fill_with_schema(&schema, &mut live);
        assert_eq!(omit_with_schema(live.clone(), None, &schema), git);
        let mut held = git.clone();
        held["spec"]["replicas"] = json!(1);
        assert_eq!(omit_with_schema(live.clone(), Some(&held), &schema), held);
        let mut edited = live;
        edited["spec"]["pools"][0]["size"] = json!(4);
        let omitted = omit_with_schema(edited.clone(), None, &schema);
        assert_eq!(omitted["spec"]["pools"][0]["size"], 4);
        assert!(omitted["spec"].get("replicas").is_none());
        let mut refilled = omitted;
        fill_with_schema(&schema, &mut refilled);
        assert_eq!(refilled, edited);
    }
}
