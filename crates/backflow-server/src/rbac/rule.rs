//! One `PolicyRule` and what it allows, as kube-apiserver's RBAC authorizer reads it: verbs,
//! API groups, resources (`pods/log`, `*/scale`, `*`), resource names, and non-resource URLs
//! (`/healthz`, `/apis/*`).

use serde::{Deserialize, Serialize};

use super::Attributes;

/// A rule of a Role or `ClusterRole`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// The verbs it allows (`*`: all).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`""`: core; `*`: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, with `resource/subresource` for subresources (`*`, `*/scale`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names it is limited to (none: every name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Paths of non-resource requests (`/healthz`, `/apis/*` as a prefix, `*`).
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

impl PolicyRule {
    /// Whether this rule allows the request.
    #[must_use]
    pub fn allows(&self, a: &Attributes) -> bool {
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        match &a.resource {
            Some(r) => {
                has(&self.api_groups, &r.group)
                    && self.allows_resource(&r.resource, r.subresource.as_deref())
                    && (self.resource_names.is_empty()
                        || r.name
                            .as_deref()
                            .is_some_and(|n| self.resource_names.iter().any(|x| x == n)))
            }
            None => self
                .non_resource_urls
                .iter()
                .any(|u| url_matches(u, &a.path)),
        }
    }

    fn allows_resource(&self, resource: &str, subresource: Option<&str>) -> bool {
        let combined = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || subresource.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
        })
    }

    /// The rule split into its atoms (one verb, group, resource and name or URL each), for
    /// the escalation check.
    pub(crate) fn atoms(&self) -> Vec<PolicyRule> {
        let one = |s: &String| vec![s.clone()];
        let mut out = Vec::new();
        for verb in &self.verbs {
            for url in &self.non_resource_urls {
                out.push(PolicyRule {
                    verbs: one(verb),
                    non_resource_urls: one(url),
                    ..PolicyRule::default()
                });
            }
            for group in &self.api_groups {
                for resource in &self.resources {
                    let names: Vec<Vec<String>> = if self.resource_names.is_empty() {
                        vec![vec![]]
                    } else {
                        self.resource_names.iter().map(one).collect()
                    };
                    for names in names {
                        out.push(PolicyRule {
                            verbs: one(verb),
                            api_groups: one(group),
                            resources: one(resource),
                            resource_names: names,
                            ..PolicyRule::default()
                        });
                    }
                }
            }
        }
        out
    }

    /// Whether this rule allows everything the atom `atom` allows (kube-apiserver's
    /// `ruleCovers`: a wildcard in the atom is covered only by a wildcard).
    pub(crate) fn covers_atom(&self, atom: &PolicyRule) -> bool {
        let first = |v: &[String]| v.first().cloned().unwrap_or_default();
        if !has(&self.verbs, &first(&atom.verbs)) {
            return false;
        }
        if !atom.non_resource_urls.is_empty() {
            let url = first(&atom.non_resource_urls);
            return self.non_resource_urls.iter().any(|u| {
                u == "*" || *u == url || u.strip_suffix('*').is_some_and(|p| url.starts_with(p))
            });
        }
        let resource = first(&atom.resources);
        let resource_ok = self.resources.iter().any(|r| {
            r == "*"
                || *r == resource
                || (r
                    .strip_prefix("*/")
                    .is_some_and(|sub| resource.split_once('/').is_some_and(|(_, s)| s == sub)))
        });
        let names_ok = self.resource_names.is_empty()
            || (!atom.resource_names.is_empty()
                && self.resource_names.contains(&first(&atom.resource_names)));
        has(&self.api_groups, &first(&atom.api_groups)) && resource_ok && names_ok
    }
}

/// Whether a rule's URL (`/apis/*` is a prefix) matches a request's path.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*"
        || rule == path
        || rule
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}
