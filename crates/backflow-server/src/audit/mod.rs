//! The audit log in kube-apiserver's format: per request, as the policy asks
//! (`--audit-policy-file`), one `audit.k8s.io/v1` `Event` per stage on one line of
//! `--audit-log-path` — who (and whom they impersonated), what, the object, the answer's code,
//! the bodies at `Request` and `RequestResponse` — and, for a write that reached Git, the commit
//! that carried it (annotation `backflow.dev/commit`). A Secret's body is recorded only at
//! `RequestResponse`: below it, never.

mod log;
mod policy;

use serde_json::{Map, Value, json};

pub use log::{AuditLog, LogSettings};
pub use policy::{AuditPolicy, Decision, Level, PolicyError, Stage};

use crate::auth::UserInfo;
use crate::rbac::{Attributes, Subject};

/// The annotation naming the commit that carried a write.
pub const COMMIT_ANNOTATION: &str = "backflow.dev/commit";

/// What audits requests: the policy and the log.
#[derive(Debug)]
pub struct Auditor {
    /// Which requests are recorded, how much.
    pub policy: AuditPolicy,
    /// Where.
    pub log: AuditLog,
}

/// One request, as its events describe it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request's id, the same in each of its events.
    pub id: String,
    /// How much is recorded.
    pub level: Level,
    /// The path and query.
    pub request_uri: String,
    /// What it asked.
    pub attributes: Attributes,
    /// Who asked.
    pub user: Subject,
    /// Their uid, when known.
    pub uid: Option<String>,
    /// Whom they acted as.
    pub impersonated: Option<UserInfo>,
    /// Where from.
    pub source_ip: Option<String>,
    /// The client.
    pub user_agent: Option<String>,
    /// When it came (RFC 3339, microseconds).
    pub received: String,
    /// The request's body, at `Request` and above.
    pub request_object: Option<Value>,
}

impl Recorded {
    /// Whether the request concerns Secrets, whose bodies are recorded only at
    /// `RequestResponse`.
    #[must_use]
    pub fn is_secret(&self) -> bool {
        self.attributes
            .resource
            .as_ref()
            .is_some_and(|r| r.group.is_empty() && r.resource == "secrets")
    }

    /// Whether a body may be recorded at this level.
    #[must_use]
    pub fn records_bodies(&self) -> bool {
        match self.level {
            Level::RequestResponse => true,
            Level::Request => !self.is_secret(),
            Level::None | Level::Metadata => false,
        }
    }

    /// The event of `stage`, with the answer's `code` and body once there is one.
    #[must_use]
    pub fn event(
        &self,
        stage: Stage,
        at: &str,
        code: Option<u16>,
        response: Option<&Value>,
        annotations: Map<String, Value>,
    ) -> Value {
        let mut user = json!({"username": self.user.name, "groups": self.user.groups});
        if let Some(uid) = self.uid.as_ref().filter(|u| !u.is_empty()) {
            user["uid"] = json!(uid);
        }
        let mut event = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": format!("{:?}", self.level),
            "auditID": self.id,
            "stage": stage.as_str(),
            "requestURI": self.request_uri,
            "verb": self.attributes.verb,
            "user": user,
            "sourceIPs": self.source_ip.iter().collect::<Vec<_>>(),
            "requestReceivedTimestamp": self.received,
            "stageTimestamp": at,
        });
        if let Some(agent) = &self.user_agent {
            event["userAgent"] = json!(agent);
        }
        if let Some(u) = &self.impersonated {
            event["impersonatedUser"] = json!({"username": &*u.name, "groups": u.groups});
        }
        if let Some(r) = &self.attributes.resource {
            let mut object = json!({"resource": r.resource});
            for (field, value) in [
                ("namespace", &r.namespace),
                ("name", &r.name),
                ("subresource", &r.subresource),
            ] {
                if let Some(v) = value {
                    object[field] = json!(v);
                }
            }
            if !r.group.is_empty() {
                object["apiGroup"] = json!(r.group);
            }
            event["objectRef"] = object;
        }
        if let Some(code) = code {
            event["responseStatus"] = json!({"metadata": {}, "code": code});
        }
        if self.records_bodies()
            && let Some(body) = &self.request_object
        {
            event["requestObject"] = body.clone();
        }
        if self.level == Level::RequestResponse
            && let Some(body) = response
        {
            event["responseObject"] = body.clone();
        }
        if !annotations.is_empty() {
            event["annotations"] = Value::Object(annotations);
        }
        event
    }
}

/// Now, as audit events write times (RFC 3339, microseconds, UTC).
#[must_use]
pub fn now_micro() -> String {
    let nanos = humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string();
    // 2026-12-06T10:00:00.123456789Z → …123456Z
    match nanos.split_once('.') {
        Some((seconds, fraction)) => format!("{seconds}.{}Z", &fraction[..6.min(fraction.len())]),
        None => nanos,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(level: Level, resource: &str) -> Recorded {
        Recorded {
            id: "1".into(),
            level,
            request_uri: "/api/v1/namespaces/a/x".into(),
            attributes: Attributes::resource("create", "", resource, Some("a"), Some("x")),
            user: Subject {
                name: "alice".into(),
                groups: vec![],
            },
            uid: None,
            impersonated: None,
            source_ip: None,
            user_agent: None,
            received: now_micro(),
            request_object: Some(json!({"data": {"password": "aHVudGVyMg=="}})),
        }
    }

    #[test]
    fn a_secrets_body_is_recorded_at_request_response_only() {
        let body = |level, resource| {
            recorded(level, resource)
                .event(
                    Stage::ResponseComplete,
                    "t",
                    Some(201),
                    Some(&json!({"r": 1})),
                    Map::new(),
                )
                .get("requestObject")
                .is_some()
        };
        assert!(body(Level::Request, "configmaps"));
        assert!(
            !body(Level::Request, "secrets"),
            "below RequestResponse, never"
        );
        assert!(body(Level::RequestResponse, "secrets"));
        assert!(!body(Level::Metadata, "configmaps"));
        let event = recorded(Level::Request, "configmaps").event(
            Stage::ResponseComplete,
            "t",
            Some(201),
            Some(&json!({"r": 1})),
            Map::new(),
        );
        assert!(
            event.get("responseObject").is_none(),
            "a response body at RequestResponse only"
        );
        assert_eq!(
            event["objectRef"],
            json!({"resource": "configmaps", "namespace": "a", "name": "x"})
        );
    }
}
