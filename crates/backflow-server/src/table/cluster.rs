//! Rows of the access, policy, networking and storage kinds, with the columns kube-apiserver's
//! printers declare (`Role`, `ClusterRole` and `LimitRange` have no printer there: `Created At`).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::format::{created_at, int, int_or_string, label_selector, len, text, text_or};
use super::{Printed, age, columns};

// Long on purpose: one arm per kind, its columns beside its cells, in the order the API
// server's printers declare them.
/// The row of one object of `plural` in group `group`, when it is a kind printed here.
pub(super) fn row(group: &str, plural: &str, obj: &Value, now: SystemTime) -> Option<Printed> {
    let name = json!(crate::object::name(obj));
    let age = json!(age(obj, now));
    let (specs, cells): (&[(&str, &str, u8)], Vec<Value>) = match (group, plural) {
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") | ("", "limitranges") => (
            &[("Name", "string", 0), ("Created At", "date", 0)],
            vec![json!(created_at(obj))],
        ),
        ("", "serviceaccounts") => (
            &[
                ("Name", "string", 0),
                ("Secrets", "string", 0),
                ("Age", "string", 0),
            ],
            vec![json!(len(obj, "/secrets")), age],
        ),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => (
            &[
                ("Name", "string", 0),
                ("Role", "string", 0),
                ("Age", "string", 0),
                ("Users", "string", 1),
                ("Groups", "string", 1),
                ("ServiceAccounts", "string", 1),
            ],
            vec![
                json!(format!(
                    "{}/{}",
                    text(obj, "/roleRef/kind"),
                    text(obj, "/roleRef/name")
                )),
                age,
                json!(subjects(obj, "User")),
                json!(subjects(obj, "Group")),
                json!(subjects(obj, "ServiceAccount")),
            ],
        ),
        ("networking.k8s.io", "networkpolicies") => (
            &[
                ("Name", "string", 0),
                ("Pod-Selector", "string", 0),
                ("Age", "string", 0),
            ],
            vec![json!(label_selector(obj.pointer("/spec/podSelector"))), age],
        ),
        ("policy", "poddisruptionbudgets") => (
            &[
                ("Name", "string", 0),
                ("Min Available", "string", 0),
                ("Max Unavailable", "string", 0),
                ("Allowed Disruptions", "integer", 0),
                ("Age", "string", 0),
            ],
            vec![
                json!(int_or_string(obj, "/spec/minAvailable", "N/A")),
                json!(int_or_string(obj, "/spec/maxUnavailable", "N/A")),
                json!(int(obj, "/status/disruptionsAllowed")),
                age,
            ],
        ),
        ("scheduling.k8s.io", "priorityclasses") => (
            &[
                ("Name", "string", 0),
                ("Value", "integer", 0),
                ("Global-Default", "boolean", 0),
                ("Age", "string", 0),
                ("PreemptionPolicy", "string", 0),
            ],
            vec![
                json!(int(obj, "/value")),
                json!(
                    obj.get("globalDefault")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                age,
                json!(text(obj, "/preemptionPolicy")),
            ],
        ),
        ("", "resourcequotas") => {
            let (request, limit) = quota(obj);
            (
                &[
                    ("Name", "string", 0),
                    ("Age", "string", 0),
                    ("Request", "string", 0),
                    ("Limit", "string", 0),
                ],
                vec![age, json!(request), json!(limit)],
            )
        }
        ("autoscaling", "horizontalpodautoscalers") => (
            &[
                ("Name", "string", 0),
                ("Reference", "string", 0),
                ("Targets", "string", 0),
                ("MinPods", "string", 0),
                ("MaxPods", "string", 0),
                ("Replicas", "string", 0),
                ("Age", "string", 0),
            ],
            vec![
                json!(format!(
                    "{}/{}",
                    text(obj, "/spec/scaleTargetRef/kind"),
                    text(obj, "/spec/scaleTargetRef/name")
                )),
                json!(super::autoscaling::targets(obj)),
                json!(
                    obj.pointer("/spec/minReplicas")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<unset>".into(), |n| n.to_string())
                ),
                json!(int(obj, "/spec/maxReplicas")),
                json!(int(obj, "/status/currentReplicas")),
                age,
            ],
        ),
        ("networking.k8s.io", "ingresses") => (
            &[
                ("Name", "string", 0),
                ("Class", "string", 0),
                ("Hosts", "string", 0),
                ("Address", "string", 0),
                ("Ports", "string", 0),
                ("Age", "string", 0),
            ],
            vec![
                json!(text_or(obj, "/spec/ingressClassName", "<none>")),
                json!(ingress_hosts(obj)),
                json!(ingress_address(obj)),
                json!(if len(obj, "/spec/tls") > 0 {
                    "80, 443"
                } else {
                    "80"
                }),
                age,
            ],
        ),
        ("", "persistentvolumeclaims") => (
            &[
                ("Name", "string", 0),
                ("Status", "string", 0),
                ("Volume", "string", 0),
                ("Capacity", "string", 0),
                ("Access Modes", "string", 0),
                ("StorageClass", "string", 0),
                ("VolumeAttributesClass", "string", 0),
                ("Age", "string", 0),
                ("VolumeMode", "string", 1),
            ],
            claim_cells(obj, age),
        ),
        ("storage.k8s.io", "storageclasses") => (
            &[
                ("Name", "string", 0),
                ("Provisioner", "string", 0),
                ("ReclaimPolicy", "string", 0),
                ("VolumeBindingMode", "string", 0),
                ("AllowVolumeExpansion", "string", 0),
                ("Age", "string", 0),
            ],
            vec![
                json!(text(obj, "/provisioner")),
                json!(text_or(obj, "/reclaimPolicy", "Delete")),
                json!(text_or(obj, "/volumeBindingMode", "Immediate")),
                json!(
                    obj.get("allowVolumeExpansion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                age,
            ],
        ),
        ("coordination.k8s.io", "leases") => (
            &[
                ("Name", "string", 0),
                ("Holder", "string", 0),
                ("Age", "string", 0),
            ],
            vec![json!(text(obj, "/spec/holderIdentity")), age],
        ),
        ("", "endpoints") => (
            &[
                ("Name", "string", 0),
                ("Endpoints", "string", 0),
                ("Age", "string", 0),
            ],
            vec![json!(endpoints(obj)), age],
        ),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => (
            &[
                ("Name", "string", 0),
                ("Webhooks", "integer", 0),
                ("Age", "string", 0),
            ],
            vec![json!(len(obj, "/webhooks")), age],
        ),
        _ => return None,
    };
    let name = if (group, plural) == ("storage.k8s.io", "storageclasses") && is_default_class(obj) {
        json!(format!("{} (default)", crate::object::name(obj)))
    } else {
        name
    };
    Some((columns(specs), std::iter::once(name).chain(cells).collect()))
}

/// The names of a binding's subjects of `kind`, joined by `, ` (`namespace/name` for accounts).
fn subjects(binding: &Value, kind: &str) -> String {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| text(s, "/kind") == kind)
        .map(|s| {
            if kind == "ServiceAccount" {
                format!("{}/{}", text(s, "/namespace"), text(s, "/name"))
            } else {
                text(s, "/name").to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A quota's `status.hard` entries as `name: used/hard`, limits apart from requests.
fn quota(obj: &Value) -> (String, String) {
    let Some(hard) = obj.pointer("/status/hard").and_then(Value::as_object) else {
        return (String::new(), String::new());
    };
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    for name in names {
        let used = obj
            .pointer("/status/used")
            .and_then(|u| u.get(name.as_str()))
            .and_then(Value::as_str)
            .unwrap_or("0");
        let entry = format!("{name}: {used}/{}", hard[name].as_str().unwrap_or(""));
        match name.split_once('.') {
            Some(("limits", _)) => limit.push(entry),
            _ => request.push(entry),
        }
    }
    (request.join(", "), limit.join(", "))
}

fn ingress_hosts(obj: &Value) -> String {
    let rules = obj
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut hosts = Vec::new();
    let mut more = false;
    for (i, rule) in rules.iter().enumerate() {
        if hosts.len() == 3 {
            more = i < rules.len();
            break;
        }
        let host = text(rule, "/host");
        if !host.is_empty() {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".into();
    }
    let mut out = hosts.join(",");
    if more {
        out.push_str(&format!(" + {} more...", rules.len() - 3));
    }
    out
}

fn ingress_address(obj: &Value) -> String {
    let mut addresses: Vec<&str> = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|i| match text(i, "/ip") {
            "" => text(i, "/hostname"),
            ip => ip,
        })
        .filter(|a| !a.is_empty())
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    addresses.join(",")
}

fn claim_cells(obj: &Value, age: Value) -> Vec<Value> {
    let volume = text(obj, "/spec/volumeName");
    let bound = !volume.is_empty();
    let status = if crate::object::is_deleting(obj) {
        "Terminating".to_string()
    } else {
        text(obj, "/status/phase").to_string()
    };
    let capacity = if bound {
        text_or(obj, "/status/capacity/storage", "0")
    } else {
        String::new()
    };
    let modes = if bound {
        access_modes(obj)
    } else {
        String::new()
    };
    let class = obj
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .map_or_else(
            || text(obj, "/spec/storageClassName").to_string(),
            str::to_string,
        );
    vec![
        json!(status),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(text_or(obj, "/spec/volumeAttributesClassName", "<unset>")),
        age,
        json!(text_or(obj, "/spec/volumeMode", "<unset>")),
    ]
}

/// `status.accessModes` as `RWO,ROX,RWX,RWOP`, in that order, each once.
fn access_modes(obj: &Value) -> String {
    let modes: Vec<&str> = obj
        .pointer("/status/accessModes")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn is_default_class(obj: &Value) -> bool {
    [
        "/metadata/annotations/storageclass.kubernetes.io~1is-default-class",
        "/metadata/annotations/storageclass.beta.kubernetes.io~1is-default-class",
    ]
    .iter()
    .any(|p| text(obj, p) == "true")
}

/// Up to three `ip:port` of an Endpoints' subsets, `+ N more...` beyond.
fn endpoints(obj: &Value) -> String {
    let subsets = obj
        .get("subsets")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let (mut shown, mut count, mut more) = (Vec::new(), 0usize, false);
    for subset in subsets {
        let ips: Vec<&str> = subset
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| text(a, "/ip"))
            .collect();
        let ports: Vec<Option<i64>> = match subset.get("ports").and_then(Value::as_array) {
            Some(ps) if !ps.is_empty() => ps
                .iter()
                .map(|p| p.get("port").and_then(Value::as_i64))
                .collect(),
            _ => vec![None],
        };
        for port in ports {
            count += ips.len();
            for ip in &ips {
                if shown.len() == 3 {
                    more = true;
                    break;
                }
                shown.push(match port {
                    Some(p) if ip.contains(':') => format!("[{ip}]:{p}"),
                    Some(p) => format!("{ip}:{p}"),
                    None => (*ip).to_string(),
                });
            }
        }
    }
    let mut out = shown.join(",");
    if more {
        out.push_str(&format!(" + {} more...", count - 3));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(group: &str, plural: &str, obj: &Value) -> Vec<Value> {
        super::super::cells_at(row, group, plural, obj)
    }

    #[test]
    fn bindings_quotas_and_budgets_read_as_kubectl_shows_them() {
        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "ann"}, {"kind": "User", "name": "bob"},
                         {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]});
        let c = cells("rbac.authorization.k8s.io", "rolebindings", &rb);
        assert_eq!(c[1], "ClusterRole/admin");
        assert_eq!(&c[3..], [json!("ann, bob"), json!(""), json!("tools/ci")]);
        let q = json!({"metadata": {"name": "q"}, "status": {
            "hard": {"pods": "10", "limits.cpu": "4", "requests.cpu": "2"},
            "used": {"pods": "2", "requests.cpu": "500m"}}});
        let c = cells("", "resourcequotas", &q);
        assert_eq!(
            &c[2..4],
            [
                json!("pods: 2/10, requests.cpu: 500m/2"),
                json!("limits.cpu: 0/4")
            ]
        );
        let pdb = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%"}});
        assert_eq!(
            &cells("policy", "poddisruptionbudgets", &pdb)[1..4],
            [json!("50%"), json!("N/A"), json!(0)]
        );
        let role = json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(
            cells("rbac.authorization.k8s.io", "roles", &role),
            [json!("r"), json!("2026-01-01T00:00:00Z")]
        );
    }

    #[test]
    fn ingresses_claims_and_endpoints_fill_their_cells() {
        let ing = json!({"metadata": {"name": "i"}, "spec": {"tls": [{}], "rules": [
            {"host": "a.example"}, {"host": "b.example"}, {}, {"host": "c.example"}, {"host": "d.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"hostname": "lb.example"}, {"ip": "10.0.0.2"}]}}});
        let c = cells("networking.k8s.io", "ingresses", &ing);
        assert_eq!(
            &c[1..5],
            [
                json!("<none>"),
                json!("a.example,b.example,c.example + 2 more..."),
                json!("10.0.0.2,lb.example"),
                json!("80, 443")
            ]
        );
        let pvc = json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        let c = cells("", "persistentvolumeclaims", &pvc);
        assert_eq!(
            &c[1..7],
            [
                json!("Bound"),
                json!("pv-1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("fast"),
                json!("<unset>")
            ]
        );
        let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.1.0.20"}, {"ip": "10.1.0.21"}],
            "ports": [{"port": 53}, {"port": 9153}]}]});
        assert_eq!(
            cells("", "endpoints", &ep)[1],
            "10.1.0.20:53,10.1.0.21:53,10.1.0.20:9153 + 1 more..."
        );
    }
}
