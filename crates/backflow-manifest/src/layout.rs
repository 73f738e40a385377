//! Where a new object's file goes, and the checks that keep every path inside its folder.
//!
//! `{target}/{namespace or _cluster}/{group, omitted for core}/{resource}/{name}.yaml`, and
//! `{name}.sops.yaml` for sensitive objects (see [`crate::encryption`]).
//! No version segment, so a preferred-version change never moves a file; `_cluster` cannot
//! collide with a namespace because namespaces cannot start with `_`.

use backflow_api::ObjectKey;

use crate::error::ManifestError;

/// The folder segment for cluster-scoped objects.
pub const CLUSTER_SEGMENT: &str = "_cluster";

/// Checks a target folder and returns it normalized: no leading or trailing slash, and `""` for
/// the repository root (written `.` or `""` in configuration).
pub fn normalize_target(target: &str) -> Result<String, ManifestError> {
    let refuse = |reason: &str| ManifestError::InvalidTarget {
        target: target.to_string(),
        reason: reason.to_string(),
    };
    if target.contains('\0') || target.contains('\\') {
        return Err(refuse("contains a NUL or a backslash"));
    }
    if target.starts_with('/') {
        return Err(refuse("must be relative to the repository root"));
    }
    let trimmed = target.trim_end_matches('/');
    if trimmed.is_empty() || trimmed == "." {
        return Ok(String::new());
    }
    for segment in trimmed.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(refuse("has an empty, `.` or `..` segment"));
        }
        if is_git_dir(segment) {
            return Err(refuse(
                "points into .git (in any letter case, Git refuses such a folder)",
            ));
        }
    }
    Ok(trimmed.to_string())
}

/// Whether a path segment is `.git` in any letter case: Git (and libgit2) refuse a tree holding
/// one, so a single such path would stop every write of its branch.
#[must_use]
pub fn is_git_dir(segment: &str) -> bool {
    segment.eq_ignore_ascii_case(".git")
}

/// Checks that `segment` can be one path segment that stays inside its folder.
fn check_segment(object: &ObjectKey, what: &str, segment: &str) -> Result<(), ManifestError> {
    let reason = if segment.is_empty() {
        Some("is empty")
    } else if segment == "." || segment == ".." {
        Some("is `.` or `..`")
    } else if is_git_dir(segment) {
        Some("is `.git` (in some letter case), a folder Git refuses")
    } else if segment.contains('/') || segment.contains('\\') {
        Some("contains a slash or backslash")
    } else if segment.contains('\0') {
        Some("contains a NUL")
    } else if segment.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(ManifestError::InvalidName {
            object: object.to_string(),
            reason: format!(
                "{what} {segment:?} {reason}, so it cannot be a file name in the folder"
            ),
        }),
        None => Ok(()),
    }
}

/// Checks every segment an object contributes to its path.
pub fn check_key(key: &ObjectKey) -> Result<(), ManifestError> {
    check_segment(key, "name", &key.name)?;
    if !key.namespace.is_empty() {
        check_segment(key, "namespace", &key.namespace)?;
    }
    check_segment(key, "resource", &key.resource.resource)?;
    if !key.resource.group.is_empty() {
        check_segment(key, "group", &key.resource.group)?;
    }
    Ok(())
}

/// The folder that holds the files of one resource type in one namespace scope (namespace `""`
/// for cluster-scoped objects), under the normalized `target`.
pub fn resource_dir(target: &str, key: &ObjectKey) -> Result<String, ManifestError> {
    check_key(key)?;
    let mut parts: Vec<&str> = Vec::new();
    if !target.is_empty() {
        parts.push(target);
    }
    parts.push(if key.namespace.is_empty() {
        CLUSTER_SEGMENT
    } else {
        key.namespace.as_str()
    });
    if !key.resource.group.is_empty() {
        parts.push(&key.resource.group);
    }
    parts.push(&key.resource.resource);
    Ok(parts.join("/"))
}

/// The path a new object's file gets under the normalized `target`.
pub fn object_path(target: &str, key: &ObjectKey) -> Result<String, ManifestError> {
    Ok(format!("{}/{}.yaml", resource_dir(target, key)?, key.name))
}

/// The path a new sensitive object's SOPS file gets under the normalized `target`.
pub fn sops_object_path(target: &str, key: &ObjectKey) -> Result<String, ManifestError> {
    Ok(format!(
        "{}/{}.sops.yaml",
        resource_dir(target, key)?,
        key.name
    ))
}

/// Whether `path` names a SOPS file by its name (`*.sops.yaml`, `*.sops.yml`): the folder's
/// creation rule makes `sops` treat it as encrypted, so plain text never goes there.
#[must_use]
pub fn is_sops_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".sops.yaml") || lower.ends_with(".sops.yml")
}

/// `child` joined under the normalized `target`.
#[must_use]
pub fn join(target: &str, child: &str) -> String {
    if target.is_empty() {
        child.to_string()
    } else {
        format!("{target}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::GroupResource;

    fn key(group: &str, resource: &str, ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new(group, resource), ns, name)
    }

    #[test]
    fn paths() {
        assert_eq!(
            object_path("clusters/prod", &key("", "configmaps", "web", "app")).expect("path"),
            "clusters/prod/web/configmaps/app.yaml"
        );
        assert_eq!(
            object_path("", &key("apps", "deployments", "web", "api")).expect("path"),
            "web/apps/deployments/api.yaml"
        );
        assert_eq!(
            object_path(
                "t",
                &key("rbac.authorization.k8s.io", "clusterroles", "", "view")
            )
            .expect("path"),
            "t/_cluster/rbac.authorization.k8s.io/clusterroles/view.yaml"
        );
    }

    #[test]
    fn names_cannot_escape() {
        for name in [
            "..",
            ".",
            "../x",
            "a/b",
            "a\\b",
            "",
            "a\0b",
            "/etc/passwd",
            ".git",
            ".Git",
        ] {
            let err =
                object_path("t", &key("", "configmaps", "web", name)).expect_err("must be refused");
            assert!(err.to_string().contains("configmaps/web/"), "{err}");
        }
        for ns in ["..", "a/b", ".GIT"] {
            assert!(object_path("t", &key("", "configmaps", ns, "x")).is_err());
        }
        assert!(
            object_path("t", &key("", ".git", "web", "x")).is_err(),
            "a resource named .git"
        );
    }

    #[test]
    fn targets() {
        assert_eq!(normalize_target(".").expect("root"), "");
        assert_eq!(normalize_target("").expect("root"), "");
        assert_eq!(normalize_target("a/b/").expect("ok"), "a/b");
        for bad in [
            "/a",
            "a/../b",
            "a//b",
            "./a",
            "a\\b",
            ".git/x",
            ".GIT",
            "live/.Git",
            "a/.gIt/b",
        ] {
            assert!(normalize_target(bad).is_err(), "{bad}");
        }
    }
}
