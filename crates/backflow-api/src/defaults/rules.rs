//! The defaults kube-apiserver sets per built-in kind (its `SetDefaults_*` functions), as a walk
//! over the fields they set. Kinds without defaults (`ConfigMap`, `Ingress`, `Lease`, …) are absent.

use serde_json::{Map, Value, json};

use super::Walk;

type Object = Map<String, Value>;

/// The defaults of one object of `group`/`kind`.
pub(super) fn object(w: &mut Walk, group: &str, kind: &str, obj: &mut Object) {
    match (group, kind) {
        ("", "Pod") => w.object(obj, "spec", |w, spec| pod_spec(w, spec, true)),
        ("", "Service") => w.object(obj, "spec", service_spec),
        ("", "Secret") => w.field(obj, "type", || json!("Opaque")),
        ("", "PersistentVolumeClaim") => w.object(obj, "spec", claim_spec),
        ("", "Endpoints") => w.objects(obj, "subsets", |w, subset| {
            w.objects(subset, "ports", tcp);
        }),
        ("", "LimitRange") => w.object(obj, "spec", |w, spec| {
            w.objects(spec, "limits", limit_range_item);
        }),
        ("apps", "Deployment") => w.object(obj, "spec", deployment_spec),
        ("apps", "StatefulSet") => w.object(obj, "spec", stateful_set_spec),
        ("apps", "DaemonSet") => w.object(obj, "spec", daemon_set_spec),
        ("apps", "ReplicaSet") => w.object(obj, "spec", |w, spec| {
            w.field(spec, "replicas", || json!(1));
            template(w, spec);
        }),
        ("batch", "Job") => job(w, obj),
        ("batch", "CronJob") => w.object(obj, "spec", cron_job_spec),
        ("autoscaling", "HorizontalPodAutoscaler") => hpa(w, obj),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            w.objects(obj, "subjects", |w, subject| {
                if matches!(
                    subject.get("kind").and_then(Value::as_str),
                    Some("User" | "Group")
                ) {
                    w.field(subject, "apiGroup", || json!("rbac.authorization.k8s.io"));
                }
            });
        }
        ("networking.k8s.io", "NetworkPolicy") => w.object(obj, "spec", network_policy_spec),
        ("storage.k8s.io", "StorageClass") => {
            w.field(obj, "reclaimPolicy", || json!("Delete"));
            w.field(obj, "volumeBindingMode", || json!("Immediate"));
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            w.field(obj, "preemptionPolicy", || json!("PreemptLowerPriority"));
        }
        _ => {}
    }
}

fn str_of<'o>(obj: &'o Object, key: &str) -> Option<&'o str> {
    obj.get(key).and_then(Value::as_str)
}

fn tcp(w: &mut Walk, port: &mut Object) {
    w.field(port, "protocol", || json!("TCP"));
}

/// `spec.template.spec` of a workload.
fn template(w: &mut Walk, spec: &mut Object) {
    w.object(spec, "template", |w, t| {
        w.object(t, "spec", |w, s| pod_spec(w, s, false));
    });
}

/// A Pod's spec, or a template's (`pod`: the Pod-only defaults too).
fn pod_spec(w: &mut Walk, spec: &mut Object, pod: bool) {
    w.field(spec, "dnsPolicy", || json!("ClusterFirst"));
    w.field(spec, "restartPolicy", || json!("Always"));
    w.field(spec, "securityContext", || json!({}));
    w.field(spec, "terminationGracePeriodSeconds", || json!(30));
    w.field(spec, "schedulerName", || json!("default-scheduler"));
    if pod {
        w.field(spec, "enableServiceLinks", || json!(true));
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        w.objects(spec, list, |w, c| container(w, c, pod));
    }
    w.objects(spec, "volumes", volume);
}

fn container(w: &mut Walk, c: &mut Object, pod: bool) {
    w.field(c, "terminationMessagePath", || {
        json!("/dev/termination-log")
    });
    w.field(c, "terminationMessagePolicy", || json!("File"));
    let policy = image_pull_policy(str_of(c, "image").unwrap_or_default());
    w.field(c, "imagePullPolicy", || json!(policy));
    w.objects(c, "ports", tcp);
    for probe_key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        w.object(c, probe_key, probe);
    }
    w.object(c, "lifecycle", |w, lifecycle| {
        for hook in ["postStart", "preStop"] {
            w.object(lifecycle, hook, |w, h| w.object(h, "httpGet", http_get));
        }
    });
    w.objects(c, "env", |w, env| {
        w.object(env, "valueFrom", |w, from| {
            w.object(from, "fieldRef", field_ref);
        });
    });
    if pod {
        // A Pod's container with a limit and no request for a resource requests its limit.
        w.object(c, "resources", |w, resources| {
            let Some(Value::Object(limits)) = resources.get("limits").cloned() else {
                return;
            };
            if limits.is_empty() {
                return;
            }
            w.defaulted_object(resources, "requests", |w, requests| {
                for (name, quantity) in limits {
                    w.field(requests, &name, || quantity);
                }
            });
        });
    }
}

/// `Always` for an image tagged `latest` or not tagged (and not pinned by digest), else
/// `IfNotPresent`.
fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn probe(w: &mut Walk, p: &mut Object) {
    w.field(p, "timeoutSeconds", || json!(1));
    w.field(p, "periodSeconds", || json!(10));
    w.field(p, "successThreshold", || json!(1));
    w.field(p, "failureThreshold", || json!(3));
    w.object(p, "httpGet", http_get);
}

fn http_get(w: &mut Walk, get: &mut Object) {
    w.field(get, "path", || json!("/"));
    w.field(get, "scheme", || json!("HTTP"));
}

fn field_ref(w: &mut Walk, r: &mut Object) {
    w.field(r, "apiVersion", || json!("v1"));
}

fn volume(w: &mut Walk, v: &mut Object) {
    const SOURCES_WITH_MODE: [&str; 4] = ["secret", "configMap", "projected", "downwardAPI"];
    let has_source = v.keys().any(|k| k != "name");
    if !has_source || w.finding() {
        w.field(v, "emptyDir", || json!({}));
    }
    for source in SOURCES_WITH_MODE {
        w.object(v, source, |w, s| w.field(s, "defaultMode", || json!(420)));
    }
    w.object(v, "downwardAPI", |w, s| {
        w.objects(s, "items", |w, item| w.object(item, "fieldRef", field_ref));
    });
    w.object(v, "hostPath", |w, s| w.field(s, "type", || json!("")));
}

fn claim_spec(w: &mut Walk, spec: &mut Object) {
    w.field(spec, "volumeMode", || json!("Filesystem"));
}

fn service_spec(w: &mut Walk, spec: &mut Object) {
    w.field(spec, "sessionAffinity", || json!("None"));
    if str_of(spec, "sessionAffinity") == Some("ClientIP") {
        w.defaulted_object(spec, "sessionAffinityConfig", |w, config| {
            w.defaulted_object(config, "clientIP", |w, client| {
                w.field(client, "timeoutSeconds", || json!(10800));
            });
        });
    }
    w.field(spec, "type", || json!("ClusterIP"));
    w.objects(spec, "ports", |w, port| {
        tcp(w, port);
        let unset = match port.get("targetPort") {
            None => true,
            Some(t) => *t == json!(0) || *t == json!(""),
        };
        if let Some(number) = port.get("port").cloned()
            && (unset || w.finding())
        {
            if unset {
                w.clear(port, "targetPort");
            }
            w.field(port, "targetPort", || number);
        }
    });
    let kind = str_of(spec, "type").unwrap_or_default().to_string();
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        w.field(spec, "externalTrafficPolicy", || json!("Cluster"));
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        w.field(spec, "internalTrafficPolicy", || json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        w.field(spec, "allocateLoadBalancerNodePorts", || json!(true));
    }
}

fn limit_range_item(w: &mut Walk, item: &mut Object) {
    if str_of(item, "type") != Some("Container") {
        return;
    }
    // Missing defaults come from max; missing default requests from the defaults, then min.
    copy_missing(w, item, "default", &["max"]);
    copy_missing(w, item, "defaultRequest", &["default", "min"]);
}

/// Sets each resource of the `from` maps (first wins) that `target` lacks.
fn copy_missing(w: &mut Walk, item: &mut Object, target: &str, from: &[&str]) {
    let mut sources = Map::new();
    for key in from.iter().rev() {
        if let Some(Value::Object(m)) = item.get(*key) {
            sources.extend(m.clone());
        }
    }
    if sources.is_empty() {
        return;
    }
    w.defaulted_object(item, target, |w, map| {
        for (name, quantity) in sources {
            w.field(map, &name, || quantity);
        }
    });
}

fn deployment_spec(w: &mut Walk, spec: &mut Object) {
    w.field(spec, "replicas", || json!(1));
    w.defaulted_object(spec, "strategy", |w, strategy| {
        w.field(strategy, "type", || json!("RollingUpdate"));
        if str_of(strategy, "type") == Some("RollingUpdate") {
            w.defaulted_object(strategy, "rollingUpdate", |w, r| {
                w.field(r, "maxUnavailable", || json!("25%"));
                w.field(r, "maxSurge", || json!("25%"));
            });
        }
    });
    w.field(spec, "revisionHistoryLimit", || json!(10));
    w.field(spec, "progressDeadlineSeconds", || json!(600));
    template(w, spec);
}

fn stateful_set_spec(w: &mut Walk, spec: &mut Object) {
    w.field(spec, "podManagementPolicy", || json!("OrderedReady"));
    w.defaulted_object(spec, "updateStrategy", |w, strategy| {
        // Only a strategy whose type was left out gets a rollingUpdate block.
        let type_unset = !strategy.contains_key("type");
        w.field(strategy, "type", || json!("RollingUpdate"));
        if str_of(strategy, "type") == Some("RollingUpdate") {
            if type_unset || w.finding() {
                w.field(strategy, "rollingUpdate", || json!({}));
            }
            w.object(strategy, "rollingUpdate", |w, r| {
                w.field(r, "partition", || json!(0));
            });
        }
    });
    w.defaulted_object(spec, "persistentVolumeClaimRetentionPolicy", |w, p| {
        w.field(p, "whenDeleted", || json!("Retain"));
        w.field(p, "whenScaled", || json!("Retain"));
    });
    w.field(spec, "replicas", || json!(1));
    w.field(spec, "revisionHistoryLimit", || json!(10));
    template(w, spec);
    w.objects(spec, "volumeClaimTemplates", |w, claim| {
        w.object(claim, "spec", claim_spec);
    });
}

fn daemon_set_spec(w: &mut Walk, spec: &mut Object) {
    w.defaulted_object(spec, "updateStrategy", |w, strategy| {
        w.field(strategy, "type", || json!("RollingUpdate"));
        if str_of(strategy, "type") == Some("RollingUpdate") {
            w.defaulted_object(strategy, "rollingUpdate", |w, r| {
                w.field(r, "maxUnavailable", || json!(1));
                w.field(r, "maxSurge", || json!(0));
            });
        }
    });
    w.field(spec, "revisionHistoryLimit", || json!(10));
    template(w, spec);
}

fn job(w: &mut Walk, obj: &mut Object) {
    // A Job without labels takes its template's.
    let template_labels = obj
        .get("spec")
        .and_then(|s| s.pointer("/template/metadata/labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    if let Some(labels) = template_labels {
        w.object(obj, "metadata", |w, meta| {
            let empty = meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty);
            if empty {
                w.clear(meta, "labels");
            }
            if empty || w.finding() {
                w.field(meta, "labels", || labels);
            }
        });
    }
    w.object(obj, "spec", job_spec);
}

fn job_spec(w: &mut Walk, spec: &mut Object) {
    if !spec.contains_key("parallelism") && !spec.contains_key("completions") || w.finding() {
        w.field(spec, "completions", || json!(1));
    }
    w.field(spec, "parallelism", || json!(1));
    let per_index = spec.contains_key("backoffLimitPerIndex");
    w.field(spec, "backoffLimit", || {
        json!(if per_index { i64::from(i32::MAX) } else { 6 })
    });
    w.field(spec, "completionMode", || json!("NonIndexed"));
    w.field(spec, "suspend", || json!(false));
    let failure_policy = spec.contains_key("podFailurePolicy");
    w.field(spec, "podReplacementPolicy", || {
        json!(if failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        })
    });
    w.object(spec, "podFailurePolicy", |w, policy| {
        w.objects(policy, "rules", |w, rule| {
            w.objects(rule, "onPodConditions", |w, condition| {
                w.field(condition, "status", || json!("True"));
            });
        });
    });
    template(w, spec);
}

fn cron_job_spec(w: &mut Walk, spec: &mut Object) {
    w.field(spec, "concurrencyPolicy", || json!("Allow"));
    w.field(spec, "suspend", || json!(false));
    w.field(spec, "successfulJobsHistoryLimit", || json!(3));
    w.field(spec, "failedJobsHistoryLimit", || json!(1));
    w.object(spec, "jobTemplate", |w, t| w.object(t, "spec", template));
}

fn hpa(w: &mut Walk, obj: &mut Object) {
    let v2 = str_of(obj, "apiVersion") == Some("autoscaling/v2");
    w.object(obj, "spec", |w, spec| {
        w.field(spec, "minReplicas", || json!(1));
        if !v2 {
            return;
        }
        let no_metrics = spec
            .get("metrics")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if no_metrics || w.finding() {
            if no_metrics {
                w.clear(spec, "metrics");
            }
            w.field(spec, "metrics", || {
                json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
            });
        }
        w.object(spec, "behavior", |w, behavior| {
            scaling_rules(w, behavior, "scaleUp", 0, || {
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}])
            });
            scaling_rules(w, behavior, "scaleDown", 300, || {
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
            });
        });
    });
}

/// An HPA's `behavior.scaleUp` or `.scaleDown`: filled in when `behavior` is given.
fn scaling_rules(
    w: &mut Walk,
    behavior: &mut Object,
    key: &str,
    window: i64,
    policies: impl FnOnce() -> Value,
) {
    w.defaulted_object(behavior, key, |w, rules| {
        w.field(rules, "stabilizationWindowSeconds", || json!(window));
        w.field(rules, "selectPolicy", || json!("Max"));
        w.field(rules, "policies", policies);
    });
}

fn network_policy_spec(w: &mut Walk, spec: &mut Object) {
    for direction in ["ingress", "egress"] {
        w.objects(spec, direction, |w, rule| w.objects(rule, "ports", tcp));
    }
    let has_egress = spec
        .get("egress")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty());
    w.field(spec, "policyTypes", || {
        if has_egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        }
    });
}
