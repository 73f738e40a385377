//! An audit policy (`audit.k8s.io/v1` `Policy`), read as kube-apiserver reads it: the first
//! rule that matches a request sets its level (`None`, `Metadata`, `Request`,
//! `RequestResponse`) and the stages it leaves out; no rule matching means `None`.

use std::path::Path;

use serde::Deserialize;

use crate::rbac::{Attributes, Subject};

/// How much of a request is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when, and the answer's code.
    Metadata,
    /// … and the request's body.
    Request,
    /// … and the response's body.
    RequestResponse,
}

/// A point in a request's life an event is written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    /// As soon as the request is read.
    RequestReceived,
    /// When a long-running request (a watch) starts answering.
    ResponseStarted,
    /// When the answer is complete.
    ResponseComplete,
    /// When the request panicked.
    Panic,
}

impl Stage {
    /// The name in the event.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestReceived => "RequestReceived",
            Self::ResponseStarted => "ResponseStarted",
            Self::ResponseComplete => "ResponseComplete",
            Self::Panic => "Panic",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

impl GroupResources {
    fn matches(
        &self,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        let combined =
            subresource.map_or_else(|| resource.to_string(), |s| format!("{resource}/{s}"));
        self.group == group
            && (self.resources.is_empty()
                || self.resources.iter().any(|r| {
                    r == "*"
                        || *r == combined
                        || r.strip_suffix("/*").is_some_and(|base| base == resource)
                        || r.strip_prefix("*/")
                            .is_some_and(|sub| Some(sub) == subresource)
                }))
            && (self.resource_names.is_empty()
                || name.is_some_and(|n| self.resource_names.iter().any(|x| x == n)))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
}

impl Rule {
    fn matches(&self, who: &Subject, a: &Attributes) -> bool {
        if !self.users.is_empty() && !self.users.contains(&who.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !who.groups.iter().any(|g| self.user_groups.contains(g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.contains(&a.verb) {
            return false;
        }
        let Some(r) = &a.resource else {
            if !self.resources.is_empty() || !self.namespaces.is_empty() {
                return false;
            }
            return self.non_resource_urls.is_empty()
                || self.non_resource_urls.iter().any(|u| {
                    u == "*"
                        || *u == a.path
                        || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
                });
        };
        if !self.non_resource_urls.is_empty() {
            return false;
        }
        let ns = r.namespace.as_deref().unwrap_or("");
        (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == ns))
            && (self.resources.is_empty()
                || self.resources.iter().any(|g| {
                    g.matches(
                        &r.group,
                        &r.resource,
                        r.subresource.as_deref(),
                        r.name.as_deref(),
                    )
                }))
    }
}

/// A parsed audit policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditPolicy {
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
}

/// What the policy asks of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// How much is recorded.
    pub level: Level,
    /// The stages not written.
    pub omit: Vec<Stage>,
}

/// Why a policy file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file cannot be read.
    #[error("cannot read the audit policy {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not an audit policy.
    #[error("the audit policy {path} is not an audit.k8s.io/v1 Policy: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl AuditPolicy {
    /// Reads a policy file (YAML or JSON), as kube-apiserver's `--audit-policy-file`.
    ///
    /// # Errors
    /// When the file cannot be read or is not an `audit.k8s.io/v1` `Policy`.
    pub fn read(path: &Path) -> Result<Self, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|message| PolicyError::Invalid {
            path: shown,
            message,
        })
    }

    /// Parses a policy's text.
    ///
    /// # Errors
    /// What is wrong with it, for a person.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: serde_json::Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        let api_version = value["apiVersion"].as_str().unwrap_or("");
        let kind = value["kind"].as_str().unwrap_or("");
        if kind != "Policy" || !matches!(api_version, "audit.k8s.io/v1" | "audit.k8s.io/v1beta1") {
            return Err(format!(
                "kind {kind:?} of {api_version:?}, expected Policy of audit.k8s.io/v1"
            ));
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    /// What to record of a request by `who` asking `a`.
    #[must_use]
    pub fn decide(&self, who: &Subject, a: &Attributes) -> Decision {
        let Some(rule) = self.rules.iter().find(|r| r.matches(who, a)) else {
            return Decision {
                level: Level::None,
                omit: Vec::new(),
            };
        };
        let mut omit = self.omit_stages.clone();
        omit.extend(rule.omit_stages.iter().copied());
        Decision {
            level: rule.level,
            omit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [system:kube-proxy]
- level: Metadata
  resources: [{group: '', resources: [secrets, configmaps/status]}]
- level: RequestResponse
  namespaces: [team-a]
  verbs: [create, update, patch]
- level: None
  nonResourceURLs: [/healthz*, /version]
- level: Metadata
";

    fn who(name: &str) -> Subject {
        Subject {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let p = AuditPolicy::parse(POLICY).unwrap();
        let level = |user: &str, a: Attributes| p.decide(&who(user), &a).level;
        assert_eq!(
            level(
                "system:kube-proxy",
                Attributes::resource("get", "", "pods", Some("a"), None)
            ),
            Level::None
        );
        assert_eq!(
            level(
                "alice",
                Attributes::resource("create", "", "secrets", Some("team-a"), None)
            ),
            Level::Metadata,
            "secrets first, even in team-a"
        );
        assert_eq!(
            level(
                "alice",
                Attributes::resource("create", "", "configmaps", Some("team-a"), None)
            ),
            Level::RequestResponse
        );
        assert_eq!(
            level(
                "alice",
                Attributes::resource("get", "", "configmaps", Some("team-a"), None)
            ),
            Level::Metadata
        );
        assert_eq!(
            level(
                "alice",
                Attributes::resource("update", "", "configmaps/status", Some("b"), Some("x"))
            ),
            Level::Metadata
        );
        assert_eq!(
            level("alice", Attributes::non_resource("get", "/healthz/ready")),
            Level::None
        );
        assert_eq!(
            level("alice", Attributes::non_resource("get", "/metrics")),
            Level::Metadata
        );
        assert_eq!(
            p.decide(&who("alice"), &Attributes::non_resource("get", "/metrics"))
                .omit,
            vec![Stage::RequestReceived]
        );
    }

    #[test]
    fn a_file_that_is_not_a_policy_is_refused_with_what_it_is() {
        let err = AuditPolicy::parse("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
        assert!(err.contains("expected Policy of audit.k8s.io/v1"), "{err}");
        assert!(
            AuditPolicy::parse(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n"
            )
            .is_err()
        );
    }
}
