//! Resource URLs: `/api/v1/...` and `/apis/G/V/...`, namespaced or not.

/// A parsed resource path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group ("" for `/api`).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace from `/namespaces/NS/...`, if any.
    pub namespace: Option<String>,
    /// Plural resource.
    pub plural: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`), if any.
    pub subresource: Option<String>,
}

/// Parses a resource path; `None` when it is not one (discovery and other paths are routed before).
pub fn parse(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
        _ => return None,
    };
    let is_namespace_sub = |s: &str| matches!(s, "status" | "finalize");
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..]
            if !(tail.is_empty()
                || tail.len() == 1 && group.is_empty() && is_namespace_sub(tail[0])) =>
        {
            (Some(ns.to_string()), tail)
        }
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (plural, None, None),
        [plural, name] => (plural, Some(name.to_string()), None),
        [plural, name, sub] => (plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return None,
    };
    if plural.is_empty() || name.as_deref() == Some("") || namespace.as_deref() == Some("") {
        return None;
    }
    Some(ResourcePath {
        group,
        version,
        namespace,
        plural: plural.to_string(),
        name,
        subresource,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = parse("/api/v1/namespaces/default/configmaps/cm1").expect("parses");
        assert_eq!(
            (p.namespace.as_deref(), p.plural.as_str(), p.name.as_deref()),
            (Some("default"), "configmaps", Some("cm1"))
        );
        let p = parse("/api/v1/namespaces/default").expect("parses");
        assert_eq!(
            (p.namespace, p.plural.as_str(), p.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let p = parse("/api/v1/namespaces/proj/status").expect("parses");
        assert_eq!(
            (
                p.plural.as_str(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            ("namespaces", Some("proj"), Some("status"))
        );
        let p = parse("/apis/apps/v1/namespaces/a/deployments/web/scale").expect("parses");
        assert_eq!(
            (p.group.as_str(), p.subresource.as_deref()),
            ("apps", Some("scale"))
        );
        let p = parse("/apis/example.com/v1/widgets").expect("parses");
        assert_eq!((p.namespace, p.name), (None, None));
        assert!(parse("/apis/apps/v1/namespaces/a/deployments/web/scale/x").is_none());
        assert!(parse("/healthz").is_none());
    }
}
