//! Rows of the workload kinds besides Deployments and Pods: `ReplicaSet`, `StatefulSet`,
//! `DaemonSet`, `Job`, `CronJob` and `ControllerRevision`, with the columns kube-apiserver's printers declare.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::format::{bool_ptr, int, label_selector, labels, len, since, text, text_or};
use super::{Printed, age, columns};

/// Container names or images of the pod template at `template` (`…/spec/containers`).
fn containers(obj: &Value, template: &str, field: &str) -> String {
    obj.pointer(template)
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| text(c, &format!("/{field}")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

const TEMPLATE: &str = "/spec/template/spec/containers";

// Long on purpose: one arm per kind, its columns beside its cells, in the order the API
// server's printers declare them.
/// The row of one object of `plural` in group `group`, when it is a workload kind printed here.
pub(super) fn row(group: &str, plural: &str, obj: &Value, now: SystemTime) -> Option<Printed> {
    let name = json!(crate::object::name(obj));
    let age = json!(age(obj, now));
    let wide = |template: &str, selector: &str| {
        [
            json!(containers(obj, template, "name")),
            json!(containers(obj, template, "image")),
            json!(label_selector(obj.pointer(selector))),
        ]
    };
    Some(match (group, plural) {
        ("apps", "replicasets") => {
            let [c, i, s] = wide(TEMPLATE, "/spec/selector");
            let desired = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            (
                columns(&[
                    ("Name", "string", 0),
                    ("Desired", "integer", 0),
                    ("Current", "integer", 0),
                    ("Ready", "integer", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                    ("Selector", "string", 1),
                ]),
                vec![
                    name,
                    json!(desired),
                    json!(int(obj, "/status/replicas")),
                    json!(int(obj, "/status/readyReplicas")),
                    age,
                    c,
                    i,
                    s,
                ],
            )
        }
        ("apps", "statefulsets") => {
            let [c, i, _] = wide(TEMPLATE, "/spec/selector");
            let desired = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            (
                columns(&[
                    ("Name", "string", 0),
                    ("Ready", "string", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                ]),
                vec![
                    name,
                    json!(format!("{}/{desired}", int(obj, "/status/readyReplicas"))),
                    age,
                    c,
                    i,
                ],
            )
        }
        ("apps", "daemonsets") => {
            let [c, i, s] = wide(TEMPLATE, "/spec/selector");
            (
                columns(&[
                    ("Name", "string", 0),
                    ("Desired", "integer", 0),
                    ("Current", "integer", 0),
                    ("Ready", "integer", 0),
                    ("Up-to-date", "integer", 0),
                    ("Available", "integer", 0),
                    ("Node Selector", "string", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                    ("Selector", "string", 1),
                ]),
                vec![
                    name,
                    json!(int(obj, "/status/desiredNumberScheduled")),
                    json!(int(obj, "/status/currentNumberScheduled")),
                    json!(int(obj, "/status/numberReady")),
                    json!(int(obj, "/status/updatedNumberScheduled")),
                    json!(int(obj, "/status/numberAvailable")),
                    json!(labels(obj.pointer("/spec/template/spec/nodeSelector"))),
                    age,
                    c,
                    i,
                    s,
                ],
            )
        }
        ("batch", "jobs") => {
            let [c, i, s] = wide(TEMPLATE, "/spec/selector");
            (
                columns(&[
                    ("Name", "string", 0),
                    ("Status", "string", 0),
                    ("Completions", "string", 0),
                    ("Duration", "string", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                    ("Selector", "string", 1),
                ]),
                vec![
                    name,
                    json!(job_status(obj)),
                    json!(completions(obj)),
                    json!(duration(obj, now)),
                    age,
                    c,
                    i,
                    s,
                ],
            )
        }
        ("batch", "cronjobs") => {
            let [c, i, s] = wide(
                "/spec/jobTemplate/spec/template/spec/containers",
                "/spec/jobTemplate/spec/selector",
            );
            (
                columns(&[
                    ("Name", "string", 0),
                    ("Schedule", "string", 0),
                    ("Timezone", "string", 0),
                    ("Suspend", "boolean", 0),
                    ("Active", "integer", 0),
                    ("Last Schedule", "string", 0),
                    ("Age", "string", 0),
                    ("Containers", "string", 1),
                    ("Images", "string", 1),
                    ("Selector", "string", 1),
                ]),
                vec![
                    name,
                    json!(text(obj, "/spec/schedule")),
                    json!(text_or(obj, "/spec/timeZone", "<none>")),
                    json!(bool_ptr(obj, "/spec/suspend")),
                    json!(len(obj, "/status/active")),
                    json!(
                        since(obj, "/status/lastScheduleTime", now)
                            .unwrap_or_else(|| "<none>".into())
                    ),
                    age,
                    c,
                    i,
                    s,
                ],
            )
        }
        ("apps", "controllerrevisions") => (
            columns(&[
                ("Name", "string", 0),
                ("Controller", "string", 0),
                ("Revision", "string", 0),
                ("Age", "string", 0),
            ]),
            vec![
                name,
                json!(controller(obj)),
                json!(int(obj, "/revision")),
                age,
            ],
        ),
        _ => return None,
    })
}

/// Whether the first condition of type `kind` holds.
fn has_condition(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| text(c, "/type") == kind))
        .is_some_and(|c| text(c, "/status") == "True")
}

fn job_status(job: &Value) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if crate::object::is_deleting(job) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn completions(job: &Value) -> String {
    let succeeded = int(job, "/status/succeeded");
    match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(n) => format!("{succeeded}/{n}"),
        None => match int(job, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

fn duration(job: &Value, now: SystemTime) -> String {
    let at = |ptr: &str| humantime::parse_rfc3339(text(job, ptr)).ok();
    let Some(start) = at("/status/startTime") else {
        return String::new();
    };
    let end = at("/status/completionTime").unwrap_or(now);
    super::human_duration(end.duration_since(start).unwrap_or_default())
}

/// `kind.group/name` of the controlling owner (`statefulset.apps/web`), or `<none>`.
fn controller(obj: &Value) -> String {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter()
                .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
        .map_or_else(
            || "<none>".into(),
            |r| {
                let group = text(r, "/apiVersion")
                    .rsplit_once('/')
                    .map_or("", |(g, _)| g);
                let kind = text(r, "/kind").to_lowercase();
                let kind = if group.is_empty() {
                    kind
                } else {
                    format!("{kind}.{group}")
                };
                format!("{kind}/{}", text(r, "/name"))
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(group: &str, plural: &str, obj: &Value) -> Vec<Value> {
        super::super::cells_at(row, group, plural, obj)
    }

    #[test]
    fn jobs_show_their_status_completions_and_duration() {
        let job = json!({"metadata": {"name": "j"},
            "spec": {"completions": 3, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                     "selector": {"matchLabels": {"job-name": "j"}}},
            "status": {"succeeded": 1, "startTime": "2026-01-01T00:58:00Z"}});
        let c = cells("batch", "jobs", &job);
        assert_eq!(&c[1..4], [json!("Running"), json!("1/3"), json!("2m")]);
        assert_eq!(&c[5..], [json!("c"), json!("busybox"), json!("job-name=j")]);
        let done = json!({"metadata": {"name": "j"}, "spec": {"parallelism": 2},
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}],
                       "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:30Z"}});
        let c = cells("batch", "jobs", &done);
        assert_eq!(
            &c[1..4],
            [json!("Complete"), json!("1/1 of 2"), json!("30s")]
        );
    }

    #[test]
    fn cronjobs_and_revisions_fill_their_placeholders() {
        let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *"}});
        let c = cells("batch", "cronjobs", &cj);
        assert_eq!(
            &c[1..6],
            [
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("<unset>"),
                json!(0),
                json!("<none>")
            ]
        );
        let rev = json!({"metadata": {"name": "web-1", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]},
            "revision": 2});
        let c = cells("apps", "controllerrevisions", &rev);
        assert_eq!(&c[1..3], [json!("statefulset.apps/web"), json!(2)]);
    }
}
