//! Escalation prevention: a Role or `ClusterRole` may grant only what its writer holds (unless
//! they may `escalate` it), and a binding may refer only to a role whose permissions its writer
//! holds (unless they may `bind` it) — kube-apiserver's rules, checked on the object as it
//! will be stored (a patch resolved first).

use serde_json::Value;

use super::{Attributes, Policy, PolicyRule, Subject, describe_rule};
use crate::error::ApiError;

/// Who writes an RBAC object, with the policy as it was when the request came.
#[derive(Debug, Clone)]
pub struct Grantor {
    /// The policy at the time of the request.
    pub policy: std::sync::Arc<Policy>,
    /// The writer.
    pub subject: Subject,
}

impl Grantor {
    /// Refuses the write of `object` (of `rbac.authorization.k8s.io` `plural`, in `namespace`)
    /// when it would grant what the writer does not hold.
    pub fn check(&self, plural: &str, namespace: &str, object: &Value) -> Result<(), ApiError> {
        let ns = (!namespace.is_empty()).then_some(namespace);
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let (granted, may) = match plural {
            "roles" | "clusterroles" => {
                let rules: Vec<PolicyRule> = object
                    .get("rules")
                    .cloned()
                    .and_then(|r| serde_json::from_value(r).ok())
                    .unwrap_or_default();
                let escalate = Attributes::resource(
                    "escalate",
                    "rbac.authorization.k8s.io",
                    plural,
                    ns,
                    Some(name),
                );
                (rules, escalate)
            }
            "rolebindings" | "clusterrolebindings" => {
                let kind = object
                    .pointer("/roleRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let role = object
                    .pointer("/roleRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let resource = if kind == "ClusterRole" {
                    "clusterroles"
                } else {
                    "roles"
                };
                let bind = Attributes::resource(
                    "bind",
                    "rbac.authorization.k8s.io",
                    resource,
                    ns,
                    Some(role),
                );
                (self.policy.referenced_rules(ns, kind, role), bind)
            }
            _ => return Ok(()),
        };
        if self.policy.allows(&self.subject, &may) {
            return Ok(());
        }
        let missing = self.policy.not_held(&self.subject, ns, &granted);
        if missing.is_empty() {
            return Ok(());
        }
        let groups = self
            .subject
            .groups
            .iter()
            .map(|g| format!("{g:?}"))
            .collect::<Vec<_>>()
            .join(" ");
        let rules = missing
            .iter()
            .map(describe_rule)
            .collect::<Vec<_>>()
            .join("\n");
        Err(ApiError::Denied {
            group: "rbac.authorization.k8s.io".into(),
            resource: plural.into(),
            name: name.into(),
            message: format!(
                "{plural}.rbac.authorization.k8s.io \"{name}\" is forbidden: user \"{}\" (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{rules}",
                self.subject.name
            ),
        })
    }
}
