//! What differs between the live side and a folder at its tip (`backflow diff`): each object
//! the live side holds and the folder does not, the folder holds and the live side does not,
//! or both hold differently — read as the mirror would write the live object (sanitized,
//! kube-apiserver's defaults left out where Git does not hold them). At rest, nothing.
//! Pure: handed the folder's objects and the live objects of the folder's scope.

use std::collections::BTreeMap;

use backflow_api::AppliedBy;
use backflow_manifest::{DeclaredObject, Identity, KindMap};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::text_diff::unified;

/// Where an object differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiffState {
    /// Live, and not in the folder.
    OnlyLive,
    /// In the folder, and not live.
    OnlyInGit,
    /// Both, with different values.
    Differs,
}

/// One object that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDiff {
    /// `ConfigMap default/demo`.
    pub object: String,
    /// The file that holds it in Git, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Where it differs.
    pub state: DiffState,
    /// A unified diff from the live side (`live/…`) to Git (`git/…`) of the sanitized YAML; a
    /// Secret's values are never in it (each shows as hidden, and whether it differs).
    pub diff: String,
}

/// A `GitTarget`'s folder against the live side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderDiff {
    /// `namespace/name` of the `GitTarget`.
    pub target: String,
    /// Its branch.
    pub branch: String,
    /// Its folder.
    pub folder: String,
    /// The tip compared, if the branch has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tip: Option<String>,
    /// The objects that differ, by name.
    pub objects: Vec<ObjectDiff>,
    /// What could not be compared, for a person (an unreadable file, a type that cannot be
    /// listed, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
}

/// The objects that differ between `declared` (the folder at its tip) and `live` (every live
/// object of the folder's scope, as the API serves it); objects another applier than `own`
/// owns are not the folder's and are left out.
#[must_use]
pub fn compare(
    declared: &[DeclaredObject],
    live: &[Value],
    own: Option<&AppliedBy>,
    kinds: &KindMap,
) -> Vec<ObjectDiff> {
    let mut in_git: BTreeMap<Identity, &DeclaredObject> =
        declared.iter().map(|d| (d.identity.clone(), d)).collect();
    let mut out = Vec::new();
    for object in live {
        let Ok(identity) = Identity::of(object) else {
            continue;
        };
        let owner = owner_of(object);
        if AppliedBy::excludes(own, owner.as_ref()) {
            in_git.remove(&identity);
            continue;
        }
        let sanitized = backflow_manifest::sanitize(object);
        if let Some(git) = in_git.remove(&identity) {
            let view = omit_defaults(kinds, sanitized, Some(&git.value));
            if let Some(diff) = differs(&identity, &view, &git.value) {
                out.push(ObjectDiff {
                    object: describe(&identity),
                    path: Some(git.path.clone()),
                    state: DiffState::Differs,
                    diff,
                });
            }
        } else {
            let view = omit_defaults(kinds, sanitized, None);
            out.push(ObjectDiff {
                object: describe(&identity),
                path: None,
                state: DiffState::OnlyLive,
                diff: text(&identity, Some(&view), None),
            });
        }
    }
    for (identity, git) in in_git {
        out.push(ObjectDiff {
            object: describe(&identity),
            path: Some(git.path.clone()),
            state: DiffState::OnlyInGit,
            diff: text(&identity, None, Some(&git.value)),
        });
    }
    out.sort_by(|a, b| a.object.cmp(&b.object));
    out
}

/// `object` without the defaults the API server filled in that Git's document (`kept`) does
/// not hold, as the mirror leaves them out: kube-apiserver's for built-in kinds, the CRD
/// schema's for custom ones.
fn omit_defaults(kinds: &KindMap, object: Value, kept: Option<&Value>) -> Value {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    match api_version
        .zip(kind)
        .and_then(|(v, k)| kinds.schema_of(v, k))
    {
        Some(schema) => backflow_api::defaults::omit_with_schema(object, kept, &schema),
        None => backflow_api::defaults::omit(object, kept),
    }
}

fn owner_of(object: &Value) -> Option<AppliedBy> {
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(object.pointer(&format!("/metadata/{key}"))?.clone()).ok()
    };
    AppliedBy::of(map("labels").as_ref(), map("annotations").as_ref())
}

fn differs(identity: &Identity, live: &Value, git: &Value) -> Option<String> {
    if live == git {
        return None;
    }
    let diff = text(identity, Some(live), Some(git));
    // Values equal but ordered differently render alike: not a difference.
    (!diff.is_empty()).then_some(diff)
}

fn text(identity: &Identity, live: Option<&Value>, git: Option<&Value>) -> String {
    let (live, git) = if is_secret(identity) {
        hidden_values(live, git)
    } else {
        (live.cloned(), git.cloned())
    };
    let name = describe_path(identity);
    let render = |v: Option<Value>| {
        v.as_ref()
            .map(backflow_manifest::render)
            .unwrap_or_default()
    };
    unified(
        &format!("live/{name}"),
        &format!("git/{name}"),
        &render(live),
        &render(git),
    )
}

/// A Secret's two sides with every value of `data` and `stringData` replaced: `(hidden)` where
/// both sides agree or one side alone has it, `(hidden, differs)` on the Git side where they
/// do not.
pub(crate) fn hidden_values(
    live: Option<&Value>,
    git: Option<&Value>,
) -> (Option<Value>, Option<Value>) {
    let mut live = live.cloned();
    let mut git = git.cloned();
    for field in ["data", "stringData"] {
        let theirs = live
            .as_ref()
            .and_then(|v| v.get(field))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(map) = live
            .as_mut()
            .and_then(|v| v.get_mut(field))
            .and_then(Value::as_object_mut)
        {
            for value in map.values_mut() {
                *value = Value::String("(hidden)".into());
            }
        }
        if let Some(map) = git
            .as_mut()
            .and_then(|v| v.get_mut(field))
            .and_then(Value::as_object_mut)
        {
            for (key, value) in map.iter_mut() {
                let same = theirs.get(key).is_none_or(|v| v == value);
                *value = Value::String(
                    if same {
                        "(hidden)"
                    } else {
                        "(hidden, differs)"
                    }
                    .into(),
                );
            }
        }
    }
    (live, git)
}

fn is_secret(identity: &Identity) -> bool {
    identity.group.is_empty() && identity.kind == "Secret"
}

fn describe(identity: &Identity) -> String {
    if identity.namespace.is_empty() {
        format!("{} {}", identity.kind, identity.name)
    } else {
        format!("{} {}/{}", identity.kind, identity.namespace, identity.name)
    }
}

fn describe_path(identity: &Identity) -> String {
    let kind = identity.kind.to_lowercase();
    if identity.namespace.is_empty() {
        format!("{kind}/{}", identity.name)
    } else {
        format!("{}/{kind}/{}", identity.namespace, identity.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(value: Value) -> DeclaredObject {
        DeclaredObject {
            identity: Identity::of(&value).expect("identity"),
            value,
            path: "live/default/x.yaml".into(),
            encrypted: false,
        }
    }

    fn configmap(name: &str, greeting: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"greeting": greeting}})
    }

    fn live(mut object: Value) -> Value {
        object["metadata"]["resourceVersion"] = json!("7");
        object["metadata"]["uid"] = json!("u");
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
        object
    }

    #[test]
    fn at_rest_nothing_differs_though_the_live_side_has_its_bookkeeping() {
        let git = [declared(configmap("a", "hi"))];
        assert_eq!(
            compare(&git, &[live(configmap("a", "hi"))], None, &KindMap::new()),
            []
        );
    }

    #[test]
    fn a_changed_a_live_only_and_a_git_only_object_are_each_shown_as_a_diff_from_live_to_git() {
        let git = [
            declared(configmap("a", "from-git")),
            declared(configmap("gone", "x")),
        ];
        let found = compare(
            &git,
            &[live(configmap("a", "live")), live(configmap("new", "y"))],
            None,
            &KindMap::new(),
        );
        let states: Vec<(&str, DiffState)> =
            found.iter().map(|d| (d.object.as_str(), d.state)).collect();
        assert_eq!(
            states,
            [
                ("ConfigMap default/a", DiffState::Differs),
                ("ConfigMap default/gone", DiffState::OnlyInGit),
                ("ConfigMap default/new", DiffState::OnlyLive),
            ]
        );
        assert!(
            found[0]
                .diff
                .contains("-  greeting: live\n+  greeting: from-git\n"),
            "{}",
            found[0].diff
        );
        assert!(!found[0].diff.contains("resourceVersion"), "sanitized");
        assert!(found[1].diff.starts_with(
            "--- live/default/configmap/gone\n+++ git/default/configmap/gone\n@@ -0,0"
        ));
    }

    #[test]
    fn a_secrets_values_are_never_shown_only_whether_they_differ() {
        let secret = |v: &str, w: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
                   "data": {"password": v, "token": w}})
        };
        let found = compare(
            &[declared(secret("Z2l0", "c2FtZQ=="))],
            &[live(secret("bGl2ZQ==", "c2FtZQ=="))],
            None,
            &KindMap::new(),
        );
        assert_eq!(found.len(), 1);
        let diff = &found[0].diff;
        assert!(
            !diff.contains("Z2l0") && !diff.contains("bGl2ZQ==") && !diff.contains("c2FtZQ=="),
            "{diff}"
        );
        assert!(diff.contains("+  password: (hidden, differs)"), "{diff}");
        assert!(
            diff.contains("   token: (hidden)"),
            "an equal value is context: {diff}"
        );
    }

    #[test]
    fn another_appliers_object_is_not_the_folders() {
        let mut flux = configmap("f", "x");
        flux["metadata"]["labels"] = json!({
            "kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
        let own = AppliedBy::claim("backflow-system", "default");
        assert_eq!(
            compare(&[], &[live(flux.clone())], Some(&own), &KindMap::new()),
            []
        );
        assert_eq!(
            compare(&[], &[live(flux)], None, &KindMap::new()).len(),
            1,
            "a folder no claim holds takes it"
        );
    }
}
