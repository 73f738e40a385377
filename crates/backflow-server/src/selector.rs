//! Label and field selectors, parsed from list and watch queries.

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector` (`a=b,c!=d,e in (x,y),!f`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelRequirement>);

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(s: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::BadRequest(format!("unable to parse requirement: found '{s}', expected: '(' in label selector {whole:?}")))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses a selector; an unparsable one is a 400 naming the part that failed.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
            let req = if words.len() == 2 && words[1].trim_start().starts_with("notin") {
                LabelRequirement::NotIn(
                    words[0].into(),
                    set_values(&words[1].trim_start()[5..], s)?,
                )
            } else if words.len() == 2 && words[1].trim_start().starts_with("in") {
                LabelRequirement::In(words[0].into(), set_values(&words[1].trim_start()[2..], s)?)
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                LabelRequirement::NotExists(k.trim().into())
            } else {
                LabelRequirement::Exists(part.into())
            };
            let key = match &req {
                LabelRequirement::Equals(k, _)
                | LabelRequirement::NotEquals(k, _)
                | LabelRequirement::In(k, _)
                | LabelRequirement::NotIn(k, _)
                | LabelRequirement::Exists(k)
                | LabelRequirement::NotExists(k) => k,
            };
            if !crate::validation::is_qualified_name(key) {
                return Err(ApiError::BadRequest(format!(
                    "unable to parse requirement: invalid label key {key:?} in label selector {s:?}"
                )));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether the selector has no requirement (selects everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed `fieldSelector`: the fields every type supports (`metadata.name`,
/// `metadata.namespace`) and those kube-apiserver adds per built-in type (see [`field_path`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(&'static str, bool, String)>);

/// Where a field label reads the object, for the type (`group`, `kind`): a JSON pointer, or
/// `None` when the type does not support it (kube-apiserver answers 400 then).
fn field_path(group: &str, kind: &str, field: &str) -> Option<&'static str> {
    let common = match field {
        "metadata.name" => Some("/metadata/name"),
        "metadata.namespace" => Some("/metadata/namespace"),
        _ => None,
    };
    common.or(match (group, kind, field) {
        ("", "Event", "involvedObject.kind") => Some("/involvedObject/kind"),
        ("", "Event", "involvedObject.namespace") => Some("/involvedObject/namespace"),
        ("", "Event", "involvedObject.name") => Some("/involvedObject/name"),
        ("", "Event", "involvedObject.uid") => Some("/involvedObject/uid"),
        ("", "Event", "involvedObject.apiVersion") => Some("/involvedObject/apiVersion"),
        ("", "Event", "involvedObject.resourceVersion") => Some("/involvedObject/resourceVersion"),
        ("", "Event", "involvedObject.fieldPath") => Some("/involvedObject/fieldPath"),
        ("", "Event", "reason") => Some("/reason"),
        ("", "Event", "reportingComponent") => Some("/reportingComponent"),
        ("", "Event", "source") => Some("/source/component"),
        ("" | "events.k8s.io", "Event", "type") => Some("/type"),
        // Read on the stored core Event, as kube-apiserver converts these field labels.
        ("events.k8s.io", "Event", "reason") => Some("/reason"),
        ("events.k8s.io", "Event", "reportingController") => Some("/reportingComponent"),
        ("events.k8s.io", "Event", "regarding.kind") => Some("/involvedObject/kind"),
        ("events.k8s.io", "Event", "regarding.namespace") => Some("/involvedObject/namespace"),
        ("events.k8s.io", "Event", "regarding.name") => Some("/involvedObject/name"),
        ("events.k8s.io", "Event", "regarding.uid") => Some("/involvedObject/uid"),
        ("events.k8s.io", "Event", "regarding.apiVersion") => Some("/involvedObject/apiVersion"),
        ("events.k8s.io", "Event", "regarding.resourceVersion") => {
            Some("/involvedObject/resourceVersion")
        }
        ("events.k8s.io", "Event", "regarding.fieldPath") => Some("/involvedObject/fieldPath"),
        ("", "Secret", "type") => Some("/type"),
        ("", "Namespace", "status.phase") => Some("/status/phase"),
        ("", "Node", "spec.unschedulable") => Some("/spec/unschedulable"),
        ("", "Pod", "spec.nodeName") => Some("/spec/nodeName"),
        ("", "Pod", "spec.restartPolicy") => Some("/spec/restartPolicy"),
        ("", "Pod", "spec.schedulerName") => Some("/spec/schedulerName"),
        ("", "Pod", "spec.serviceAccountName") => Some("/spec/serviceAccountName"),
        ("", "Pod", "spec.hostNetwork") => Some("/spec/hostNetwork"),
        ("", "Pod", "status.phase") => Some("/status/phase"),
        ("", "Pod", "status.podIP") => Some("/status/podIP"),
        ("", "Pod", "status.nominatedNodeName") => Some("/status/nominatedNodeName"),
        ("" | "apps", "ReplicationController" | "ReplicaSet", "status.replicas") => {
            Some("/status/replicas")
        }
        ("batch", "Job", "status.successful") => Some("/status/succeeded"),
        _ => None,
    })
}

impl FieldSelector {
    /// Parses a selector for objects of `kind` in `group`; an unsupported field is a 400
    /// naming it.
    pub fn parse(s: &str, group: &str, kind: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let Some(path) = field_path(group, kind, field) else {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            };
            reqs.push((path, eq, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    /// Whether the selector has no requirement (selects everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object satisfies every requirement. A missing field reads as `""`; a
    /// number or boolean as its text (`spec.hostNetwork=true`).
    #[must_use]
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, value)| {
            let actual = match obj.pointer(path) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (actual == *value) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=fe", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing", false),
            ("!missing", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).expect(sel).matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("bad key=1").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(
            FieldSelector::parse("metadata.name=a", "", "ConfigMap")
                .expect("parses")
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a", "", "ConfigMap")
                .expect("parses")
                .matches(&o)
        );
        assert!(FieldSelector::parse("spec.x=1", "", "ConfigMap").is_err());
        // What kubectl describe asks for the events of an object.
        let event = json!({"metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "ns", "uid": "u1"},
            "reason": "Started", "type": "Normal", "source": {"component": "kubelet"}});
        let describe = "involvedObject.name=web,involvedObject.namespace=ns,involvedObject.kind=Pod,involvedObject.uid=u1";
        assert!(
            FieldSelector::parse(describe, "", "Event")
                .expect("parses")
                .matches(&event)
        );
        assert!(
            !FieldSelector::parse("involvedObject.uid=u2", "", "Event")
                .expect("parses")
                .matches(&event)
        );
        assert!(
            FieldSelector::parse("source=kubelet,type!=Warning", "", "Event")
                .expect("parses")
                .matches(&event)
        );
        assert!(FieldSelector::parse("involvedObject.name=web", "", "ConfigMap").is_err());
        let pod = json!({"spec": {"hostNetwork": true, "nodeName": "n1"}});
        assert!(
            FieldSelector::parse("spec.hostNetwork=true,spec.nodeName=n1", "", "Pod")
                .expect("parses")
                .matches(&pod)
        );
    }
}
