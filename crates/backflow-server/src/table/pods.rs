//! A Pod's row: READY, STATUS and RESTARTS worked out from its container statuses as the API
//! server's printer does (init containers first, sidecars counted as containers, the reason of
//! the first failing container, `Terminating` while being deleted).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::format::{len, text, text_or};
use super::{Printed, age, columns, human_duration};

/// What the container statuses add up to.
#[derive(Default)]
struct Tally {
    ready: usize,
    restarts: i64,
    /// The latest time a container last finished, for the "(5m ago)" of RESTARTS.
    last_restart: Option<SystemTime>,
    sidecar_restarts: i64,
    last_sidecar_restart: Option<SystemTime>,
}

impl Tally {
    fn count_restarts(&mut self, status: &Value, sidecar: bool) {
        let n = status
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let finished =
            humantime::parse_rfc3339(text(status, "/lastState/terminated/finishedAt")).ok();
        self.restarts += n;
        self.last_restart = self.last_restart.max(finished);
        if sidecar {
            self.sidecar_restarts += n;
            self.last_sidecar_restart = self.last_sidecar_restart.max(finished);
        }
    }
}

fn condition_is_true(pod: &Value, kind: &str) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| text(c, "/type") == kind))
        .is_some_and(|c| text(c, "/status") == "True")
}

/// Names of the init containers that run beside the others (`restartPolicy: Always`).
fn sidecars(pod: &Value) -> Vec<&str> {
    pod.pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter(|c| text(c, "/restartPolicy") == "Always")
                .map(|c| text(c, "/name"))
                .collect()
        })
        .unwrap_or_default()
}

fn statuses<'a>(pod: &'a Value, ptr: &str) -> &'a [Value] {
    pod.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The reason an exited container gives when it names none.
fn exit_reason(terminated: &Value) -> String {
    match terminated
        .get("signal")
        .and_then(Value::as_i64)
        .unwrap_or(0)
    {
        0 => format!(
            "ExitCode:{}",
            terminated
                .get("exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        signal => format!("Signal:{signal}"),
    }
}

/// Walks the init containers; `Some(reason)` while the pod is still initializing.
fn init_reason(pod: &Value, sidecars: &[&str], tally: &mut Tally) -> Option<String> {
    let inits = len(pod, "/spec/initContainers");
    for (i, status) in statuses(pod, "/status/initContainerStatuses")
        .iter()
        .enumerate()
    {
        let sidecar = sidecars.contains(&text(status, "/name"));
        tally.count_restarts(status, sidecar);
        let terminated = status.pointer("/state/terminated");
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64) == Some(0)) {
            continue;
        }
        if sidecar && status.get("started").and_then(Value::as_bool) == Some(true) {
            if status.get("ready").and_then(Value::as_bool) == Some(true) {
                tally.ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            return Some(match text(t, "/reason") {
                "" => format!("Init:{}", exit_reason(t)),
                r => format!("Init:{r}"),
            });
        }
        let waiting = text(status, "/state/waiting/reason");
        if !waiting.is_empty() && waiting != "PodInitializing" {
            return Some(format!("Init:{waiting}"));
        }
        return Some(format!("Init:{i}/{inits}"));
    }
    None
}

/// Walks the containers, last to first, so the first failing one names the reason.
fn container_reason(pod: &Value, mut reason: String, tally: &mut Tally) -> String {
    tally.restarts = tally.sidecar_restarts;
    tally.last_restart = tally.last_sidecar_restart;
    let mut running = false;
    for status in statuses(pod, "/status/containerStatuses").iter().rev() {
        tally.count_restarts(status, false);
        let waiting = text(status, "/state/waiting/reason");
        let terminated = status.pointer("/state/terminated");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if let Some(t) = terminated {
            reason = match text(t, "/reason") {
                "" => exit_reason(t),
                r => r.to_string(),
            };
        } else if status.get("ready").and_then(Value::as_bool) == Some(true)
            && status.pointer("/state/running").is_some()
        {
            running = true;
            tally.ready += 1;
        }
    }
    if reason == "Completed" && running {
        reason = if condition_is_true(pod, "Ready") {
            "Running".into()
        } else {
            "NotReady".into()
        };
    }
    reason
}

fn status_reason(pod: &Value, tally: &mut Tally) -> String {
    let mut reason = text_or(pod, "/status/reason", text(pod, "/status/phase"));
    let gated = statuses(pod, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == "PodScheduled" && text(c, "/reason") == "SchedulingGated");
    if gated {
        reason = "SchedulingGated".into();
    }
    let sidecars = sidecars(pod);
    let initializing = init_reason(pod, &sidecars, tally);
    if let Some(init) = &initializing {
        reason.clone_from(init);
    }
    if initializing.is_none() || condition_is_true(pod, "Initialized") {
        reason = container_reason(pod, reason, tally);
    }
    let phase = text(pod, "/status/phase");
    if crate::object::is_deleting(pod) {
        if text(pod, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    reason
}

/// How many gates of `spec.readinessGates` hold, or `<none>`.
fn readiness_gates(pod: &Value) -> String {
    let gates = statuses(pod, "/spec/readinessGates");
    if gates.is_empty() {
        return "<none>".into();
    }
    let held = gates
        .iter()
        .filter(|g| condition_is_true(pod, text(g, "/conditionType")))
        .count();
    format!("{held}/{}", gates.len())
}

/// The columns and cells of one Pod.
pub(super) fn row(pod: &Value, now: SystemTime) -> Printed {
    let mut tally = Tally::default();
    let reason = status_reason(pod, &mut tally);
    let total = len(pod, "/spec/containers") + sidecars(pod).len();
    let restarts = match tally.last_restart {
        Some(at) if tally.restarts != 0 => format!(
            "{} ({} ago)",
            tally.restarts,
            human_duration(now.duration_since(at).unwrap_or_default())
        ),
        _ => tally.restarts.to_string(),
    };
    let ip = statuses(pod, "/status/podIPs")
        .first()
        .map_or_else(|| "<none>".into(), |ip| text_or(ip, "/ip", "<none>"));
    (
        columns(&[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ]),
        vec![
            json!(crate::object::name(pod)),
            json!(format!("{}/{total}", tally.ready)),
            json!(reason),
            json!(restarts),
            json!(age(pod, now)),
            json!(ip),
            json!(text_or(pod, "/spec/nodeName", "<none>")),
            json!(text_or(pod, "/status/nominatedNodeName", "<none>")),
            json!(readiness_gates(pod)),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(pod: &Value) -> Vec<Value> {
        let now = humantime::parse_rfc3339("2026-01-01T01:00:00Z").expect("time");
        row(pod, now).1
    }

    #[test]
    fn a_pending_pod_reads_as_kubectl_shows_it() {
        let pod = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:59:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Pending"}});
        assert_eq!(
            cells(&pod),
            [
                json!("web"),
                json!("0/2"),
                json!("Pending"),
                json!("0"),
                json!("60s"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn the_first_failing_container_names_the_status_and_restarts_say_when() {
        let pod = json!({"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}],
              "containerStatuses": [
                {"name": "a", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:55:00Z"}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        let c = cells(&pod);
        assert_eq!(c[1], "1/2");
        assert_eq!(c[2], "CrashLoopBackOff");
        assert_eq!(c[3], "3 (5m ago)");
        assert_eq!(c[5], "10.0.0.7");
        assert_eq!(c[6], "n1");
    }

    #[test]
    fn init_containers_and_deletion_name_the_status() {
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "i0"}, {"name": "i1"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i0", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i1", "state": {"running": {}}}]}});
        assert_eq!(cells(&pod)[2], "Init:1/2");
        let mut deleting = pod.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:59:00Z");
        assert_eq!(cells(&deleting)[2], "Terminating");
        let failed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 0}}}]}});
        assert_eq!(cells(&failed)[2], "ExitCode:137");
    }
}
