//! A planner writing one JSON file per object, for tests and benchmarks (feature `testing`).

use crate::error::{PlanError, TreeError};
use crate::intent::{Intent, ObjectState, SweepScope};
use crate::planner::Planner;
use crate::tree::{PathUpdate, TreeView};

/// One file per object at `{target}/{namespace or _cluster}/{group/}{resource}/{name}.json`,
/// holding the value as pretty JSON. For tests and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct FilePerObjectPlanner;

impl FilePerObjectPlanner {
    /// Where this planner puts an intent's object.
    #[must_use]
    pub fn path_of(intent: &Intent) -> String {
        let key = &intent.key;
        let ns = if key.namespace.is_empty() {
            "_cluster"
        } else {
            key.namespace.as_str()
        };
        let group = if key.resource.group.is_empty() {
            String::new()
        } else {
            format!("{}/", key.resource.group)
        };
        let target = intent.target.trim_matches('/');
        let prefix = if target.is_empty() {
            String::new()
        } else {
            format!("{target}/")
        };
        format!(
            "{prefix}{ns}/{group}{}/{}.json",
            key.resource.resource, key.name
        )
    }

    /// The bytes this planner writes for a value.
    #[must_use]
    pub fn render(value: &serde_json::Value) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

impl FilePerObjectPlanner {
    /// The files a sweep removes: those of the scope's type in its namespace (every namespace
    /// for `None`) whose name is not kept.
    fn sweep(
        tree: &dyn TreeView,
        target: &str,
        scope: &SweepScope,
    ) -> Result<Vec<PathUpdate>, TreeError> {
        let target = target.trim_matches('/');
        let group = if scope.resource.group.is_empty() {
            String::new()
        } else {
            format!("{}/", scope.resource.group)
        };
        // `{namespace}/{group/}{resource}/` relative to the target.
        let type_dir = format!("{group}{}/", scope.resource.resource);
        let prefix = if target.is_empty() {
            String::new()
        } else {
            format!("{target}/")
        };
        let mut updates = Vec::new();
        for path in tree.list(target)? {
            let Some(rel) = path.strip_prefix(&prefix) else {
                continue;
            };
            let Some((ns, rest)) = rel.split_once('/') else {
                continue;
            };
            if scope.namespace.as_deref().is_some_and(|want| {
                let want = if want.is_empty() { "_cluster" } else { want };
                want != ns
            }) {
                continue;
            }
            let Some(file) = rest.strip_prefix(&type_dir) else {
                continue;
            };
            let Some(name) = file.strip_suffix(".json") else {
                continue;
            };
            let namespace = if ns == "_cluster" { "" } else { ns };
            if name.contains('/') || scope.keeps(namespace, name) {
                continue;
            }
            updates.push(PathUpdate::remove(path.clone()));
        }
        Ok(updates)
    }
}

impl Planner for FilePerObjectPlanner {
    fn plan(&self, tree: &dyn TreeView, intent: &Intent) -> Result<Vec<PathUpdate>, TreeError> {
        match &intent.state {
            ObjectState::Sweep(scope) => return Self::sweep(tree, &intent.target, scope),
            // This planner writes no companion files.
            ObjectState::Bootstrap => return Ok(Vec::new()),
            ObjectState::Present(_) | ObjectState::Absent => {}
        }
        let path = Self::path_of(intent);
        if intent.key.name.contains('/')
            || intent.key.name.starts_with('.')
            || intent.key.name.is_empty()
        {
            return Err(PlanError::new(format!(
                "object name {:?} cannot be a file name",
                intent.key.name
            ))
            .into());
        }
        Ok(vec![match &intent.state {
            ObjectState::Present(object) => PathUpdate::write(path, Self::render(&object.value())),
            ObjectState::Absent | ObjectState::Sweep(_) | ObjectState::Bootstrap => {
                PathUpdate::remove(path)
            }
        }])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use backflow_api::{GroupResource, ObjectKey};

    use super::*;
    use crate::error::IoFailure;

    /// A tree in memory.
    struct MemTree(BTreeMap<String, Vec<u8>>);

    impl TreeView for MemTree {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
            Ok(self.0.get(path).cloned())
        }

        fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
            let prefix = crate::tree::dir_prefix(dir);
            Ok(self
                .0
                .keys()
                .filter(|p| p.starts_with(&prefix))
                .cloned()
                .collect())
        }
    }

    #[test]
    fn sweep_removes_only_inside_its_scope() {
        let mut files = BTreeMap::new();
        for path in [
            "apps/web/configmaps/keep.json",
            "apps/web/configmaps/gone.json",
            "apps/db/configmaps/other.json",
            // Same name as the kept object, another namespace: not kept by it.
            "apps/db/configmaps/keep.json",
            "apps/web/secrets/gone.json",
            "apps/web/apps/configmaps/gone.json",
            "other/web/configmaps/gone.json",
        ] {
            files.insert(path.to_string(), b"{}".to_vec());
        }
        let tree = MemTree(files);
        let scope = |ns: Option<&str>| SweepScope {
            resource: GroupResource::new("", "configmaps"),
            namespace: ns.map(str::to_string),
            keep: BTreeSet::from([("web".to_string(), "keep".to_string())]),
            removable: None,
        };
        let one = FilePerObjectPlanner
            .plan(&tree, &Intent::sweep("apps", scope(Some("web"))))
            .expect("plan");
        assert_eq!(
            one,
            vec![PathUpdate::remove("apps/web/configmaps/gone.json")]
        );
        let all = FilePerObjectPlanner
            .plan(&tree, &Intent::sweep("apps", scope(None)))
            .expect("plan");
        assert_eq!(
            all,
            vec![
                PathUpdate::remove("apps/db/configmaps/keep.json"),
                PathUpdate::remove("apps/db/configmaps/other.json"),
                PathUpdate::remove("apps/web/configmaps/gone.json"),
            ]
        );
        let sweep = Intent::sweep("apps", scope(None));
        assert_eq!(
            sweep.key,
            ObjectKey::new(GroupResource::new("", "configmaps"), "", "")
        );
    }
}
