//! Where a new object's file goes when the `GitTarget` says so (`spec.placement`): path templates
//! per type or for every type, before the canonical layout.
//!
//! Only new objects are placed: an object with a document anywhere in the folder is edited where
//! it is, so changing a template never moves a file.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use backflow_api::ObjectKey;
use serde_json::Value;

use crate::error::ManifestError;
use crate::layout::{CLUSTER_SEGMENT, check_key, is_git_dir, join, normalize_target};

/// The variables a template may use.
pub const VARIABLES: &[&str] = &[
    "name",
    "namespace",
    "namespaceOrCluster",
    "resource",
    "group",
    "groupPath",
    "version",
    "apiVersion",
    "kind",
    "scope",
    "sensitiveSuffix",
];

/// A `GitTarget`'s placement rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementRules {
    /// Per type, keyed `[group/]version/resource` (`v1/configmaps`, `apps/v1/deployments`).
    pub by_type: BTreeMap<String, String>,
    /// For every other type.
    pub default: Option<String>,
}

/// Checks a template: known variables only, a relative path that cannot escape the folder, a
/// `.yaml`/`.yml` file (or `{sensitiveSuffix}`).
pub fn validate_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("template {template:?} has an unclosed '{{'"));
        };
        let var = &rest[open + 1..open + close];
        if !VARIABLES.contains(&var) {
            return Err(format!(
                "template {template:?} uses unknown variable {{{var}}}; known: {}",
                VARIABLES.join(", ")
            ));
        }
        rest = &rest[open + close + 1..];
    }
    if template.starts_with('/') || template.split('/').any(|s| s == ".." || s == ".") {
        return Err(format!(
            "template {template:?} must be a relative path without '.' or '..' segments"
        ));
    }
    if template.split('/').any(is_git_dir) {
        return Err(format!(
            "template {template:?} names a .git folder, which Git refuses"
        ));
    }
    let lower = template.to_ascii_lowercase();
    if !(lower.ends_with(".yaml")
        || lower.ends_with(".yml")
        || lower.ends_with("{sensitivesuffix}"))
    {
        return Err(format!(
            "template {template:?} must name a .yaml file (or end with {{sensitiveSuffix}})"
        ));
    }
    Ok(())
}

/// Placement rules per folder of one branch, shared between the controller (which fills it from
/// each `GitTarget`) and the planner. Cloning shares the map.
#[derive(Debug, Clone, Default)]
pub struct PlacementMap {
    inner: Arc<RwLock<BTreeMap<String, PlacementRules>>>,
    counts: Arc<PlacementCounts>,
}

/// How many new files each rule placed (a replay after a refused push plans, and counts, again).
#[derive(Debug, Default)]
pub struct PlacementCounts {
    /// Placed by a `byType` template.
    pub by_type: AtomicU64,
    /// Placed by the `default` template.
    pub default: AtomicU64,
    /// Placed by the canonical layout (no template applied).
    pub canonical: AtomicU64,
}

impl PlacementCounts {
    /// `(by_type, default, canonical)` so far.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.by_type.load(Ordering::Relaxed),
            self.default.load(Ordering::Relaxed),
            self.canonical.load(Ordering::Relaxed),
        )
    }
}

impl PlacementMap {
    /// An empty map: every folder uses the canonical layout.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or, with empty rules, clears) the rules of `target`.
    pub fn set(&self, target: &str, rules: PlacementRules) {
        let key = normalize_target(target).unwrap_or_else(|_| target.to_string());
        let mut map = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if rules == PlacementRules::default() {
            map.remove(&key);
        } else {
            map.insert(key, rules);
        }
    }

    /// The path a new object gets from the rules of `target`, or `None` when no template applies
    /// (the canonical layout then decides).
    pub fn place(
        &self,
        target: &str,
        key: &ObjectKey,
        object: &Value,
        sensitive: bool,
    ) -> Result<Option<String>, ManifestError> {
        let map = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(rules) = map.get(target) else {
            return Ok(None);
        };
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = api_version.rsplit('/').next().unwrap_or("");
        let type_key = if key.resource.group.is_empty() {
            format!("{version}/{}", key.resource.resource)
        } else {
            format!("{}/{version}/{}", key.resource.group, key.resource.resource)
        };
        let (template, counter) = match (rules.by_type.get(&type_key), rules.default.as_ref()) {
            (Some(t), _) => (t, &self.counts.by_type),
            (None, Some(t)) => (t, &self.counts.default),
            (None, None) => return Ok(None),
        };
        let path = render(template, target, key, object, sensitive)?;
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(Some(path))
    }

    /// Counts a new file placed by the canonical layout.
    pub fn count_canonical(&self) {
        self.counts.canonical.fetch_add(1, Ordering::Relaxed);
    }

    /// The placement counts of every folder using this map.
    #[must_use]
    pub fn counts(&self) -> Arc<PlacementCounts> {
        self.counts.clone()
    }
}

/// Fills a template for an object; empty segments collapse, and the result must stay inside
/// the folder.
pub fn render(
    template: &str,
    target: &str,
    key: &ObjectKey,
    object: &Value,
    sensitive: bool,
) -> Result<String, ManifestError> {
    check_key(key)?;
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = api_version.rsplit('/').next().unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let namespaced = !key.namespace.is_empty();
    let values: BTreeMap<&str, String> = [
        ("name", key.name.clone()),
        ("namespace", key.namespace.clone()),
        (
            "namespaceOrCluster",
            if namespaced {
                key.namespace.clone()
            } else {
                CLUSTER_SEGMENT.to_string()
            },
        ),
        ("resource", key.resource.resource.clone()),
        ("group", key.resource.group.clone()),
        ("groupPath", key.resource.group.clone()),
        ("version", version.to_string()),
        ("apiVersion", api_version.replace('/', "_")),
        ("kind", kind.to_string()),
        (
            "scope",
            if namespaced { "namespaced" } else { "cluster" }.to_string(),
        ),
        (
            "sensitiveSuffix",
            if sensitive { ".sops.yaml" } else { ".yaml" }.to_string(),
        ),
    ]
    .into_iter()
    .collect();
    let mut filled = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        filled.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .ok_or_else(|| invalid(template, "an unclosed '{'"))?;
        let var = &rest[open + 1..close];
        filled.push_str(
            values
                .get(var)
                .ok_or_else(|| invalid(template, &format!("unknown variable {{{var}}}")))?,
        );
        rest = &rest[close + 1..];
    }
    filled.push_str(rest);
    let segments = checked_segments(&filled, template, key)?;
    Ok(join(target, &segments.join("/")))
}

/// The segments of a filled template, refused when they would leave the folder, make a `.git`
/// folder, or not name a `.yaml` file.
fn checked_segments<'a>(
    filled: &'a str,
    template: &str,
    key: &ObjectKey,
) -> Result<Vec<&'a str>, ManifestError> {
    let segments: Vec<&'a str> = filled.split('/').filter(|s| !s.is_empty()).collect();
    if segments
        .iter()
        .any(|s| *s == "." || *s == ".." || s.contains('\\') || s.contains('\0'))
    {
        return Err(invalid(
            template,
            &format!("it gives {filled:?} for {key}, which leaves the folder"),
        ));
    }
    if segments.iter().any(|s| is_git_dir(s)) {
        return Err(invalid(
            template,
            &format!("it gives {filled:?} for {key}: a .git folder, which Git refuses"),
        ));
    }
    let Some(file) = segments.last() else {
        return Err(invalid(
            template,
            &format!("it gives an empty path for {key}"),
        ));
    };
    let lower = file.to_ascii_lowercase();
    if !(lower.ends_with(".yaml") || lower.ends_with(".yml")) || lower.starts_with('.') {
        return Err(invalid(
            template,
            &format!("it gives {filled:?} for {key}, not a .yaml file"),
        ));
    }
    Ok(segments)
}

fn invalid(template: &str, why: &str) -> ManifestError {
    ManifestError::InvalidTarget {
        target: format!("spec.placement template {template:?}"),
        reason: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::GroupResource;
    use serde_json::json;

    fn deploy() -> (ObjectKey, Value) {
        (
            ObjectKey::new(GroupResource::new("apps", "deployments"), "web", "api"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "web"}}),
        )
    }

    #[test]
    fn templates_fill_and_stay_inside() {
        let (key, obj) = deploy();
        assert_eq!(
            render("{namespace}/{kind}-{name}.yaml", "live", &key, &obj, false).expect("renders"),
            "live/web/Deployment-api.yaml"
        );
        assert_eq!(
            render("{namespace}/{name}{sensitiveSuffix}", "", &key, &obj, true).expect("renders"),
            "web/api.sops.yaml"
        );
        let ns = ObjectKey::new(GroupResource::new("", "namespaces"), "", "web");
        let nso = json!({"apiVersion": "v1", "kind": "Namespace"});
        assert_eq!(
            render("{namespace}/{resource}/{name}.yaml", "t", &ns, &nso, false).expect("collapses"),
            "t/namespaces/web.yaml"
        );
        assert!(
            render("{name}", "t", &key, &obj, false).is_err(),
            "not a yaml file"
        );
        let evil = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "..");
        assert!(render("{name}/x.yaml", "t", &evil, &obj, false).is_err());
        // A kind (a CRD's, chosen by whoever may create one) that makes a .git folder.
        let git_kind = json!({"apiVersion": "example.com/v1", "kind": ".Git"});
        let err = render("{kind}/{name}.yaml", "t", &key, &git_kind, false).unwrap_err();
        assert!(err.to_string().contains(".git folder"), "{err}");
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(validate_template("{namespace}/{name}.yaml").is_ok());
        assert!(validate_template("{nope}/{name}.yaml").is_err());
        assert!(validate_template("../{name}.yaml").is_err());
        assert!(validate_template("/abs/{name}.yaml").is_err());
        assert!(validate_template("{name}.json").is_err());
        assert!(validate_template(".git/{name}.yaml").is_err());
        assert!(validate_template("{namespace}/.GIT/{name}.yaml").is_err());
    }

    #[test]
    fn by_type_before_default() {
        let map = PlacementMap::new();
        let mut by_type = BTreeMap::new();
        by_type.insert(
            "apps/v1/deployments".to_string(),
            "apps/{name}.yaml".to_string(),
        );
        map.set(
            "live",
            PlacementRules {
                by_type,
                default: Some("other/{resource}-{name}.yaml".into()),
            },
        );
        let (key, obj) = deploy();
        assert_eq!(
            map.place("live", &key, &obj, false).expect("places"),
            Some("live/apps/api.yaml".into())
        );
        let cm = ObjectKey::new(GroupResource::new("", "configmaps"), "web", "c");
        let cmo = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(
            map.place("live", &cm, &cmo, false).expect("places"),
            Some("live/other/configmaps-c.yaml".into())
        );
        assert_eq!(
            map.place("elsewhere", &cm, &cmo, false).expect("no rules"),
            None
        );
    }
}
