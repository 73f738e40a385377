//! What a verified push delivery names: repositories, a ref and the new tip. Nothing else is
//! read from it — the commit lists are capped by every host (GitHub 2048, GitLab 20) and empty
//! for tag bursts, so the branch worker reads the remote itself.

use serde_json::Value;

use super::repository::RepositoryId;

/// The ref a push moved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PushedRef {
    /// `refs/heads/<name>`.
    Branch(String),
    /// A tag or any other ref: no branch worker cares.
    Other(String),
    /// A generic relay that named no ref: every branch of the repository is woken.
    Unnamed,
}

/// Where the ref points after the push.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// A 40-hex SHA-1 commit id (lower case).
    Commit(String),
    /// All zeros: the ref was deleted.
    Deleted,
    /// Not given (a generic relay may leave it out).
    Unknown,
}

/// A push as its delivery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushDelivery {
    /// Every identity of the repository the delivery names (clone, SSH and web URLs), sorted.
    pub repositories: Vec<RepositoryId>,
    /// The ref that moved.
    pub pushed_ref: PushedRef,
    /// The ref's new tip.
    pub after: Revision,
}

/// Why a verified body is not a push backflow can act on (answered 400).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// Not JSON.
    #[error("the body is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A form body (`application/x-www-form-urlencoded`) without a `payload` field.
    #[error("the form body has no `payload` field")]
    NoPayloadField,
    /// JSON, but not an object.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// No URL of a repository anywhere the hosts put one.
    #[error(
        "the payload names no repository (looked for repository.clone_url, ssh_url, html_url, url and project.git_http_url, git_ssh_url, web_url)"
    )]
    NoRepository,
    /// The repository uses SHA-256 object ids, which backflow does not read.
    #[error(
        "the repository uses SHA-256 object ids ({0}); backflow works with SHA-1 repositories only"
    )]
    Sha256(String),
    /// `after` is neither a 40-hex commit id nor all zeros.
    #[error("`after` is {0:?}, not a 40-hex commit id")]
    BadRevision(String),
    /// `ref` is not a string.
    #[error("`ref` is not a string")]
    BadRef,
}

/// Where each host puts the repository's URLs.
const URL_FIELDS: [(&str, &[&str]); 2] = [
    (
        "repository",
        &[
            "clone_url",
            "ssh_url",
            "html_url",
            "git_url",
            "url",
            "git_http_url",
            "git_ssh_url",
            "homepage",
        ],
    ),
    (
        "project",
        &[
            "git_http_url",
            "git_ssh_url",
            "web_url",
            "http_url",
            "ssh_url",
        ],
    ),
];

impl PushDelivery {
    /// Reads a push from a JSON body.
    pub fn from_json(body: &[u8]) -> Result<Self, DeliveryError> {
        let value: Value = serde_json::from_slice(body)?;
        let object = value.as_object().ok_or(DeliveryError::NotAnObject)?;
        let format = object
            .get("repository")
            .and_then(|r| r.get("object_format_name"))
            .and_then(Value::as_str);
        if format == Some("sha256") {
            return Err(DeliveryError::Sha256(
                "repository.object_format_name".into(),
            ));
        }
        let mut repositories: Vec<RepositoryId> = URL_FIELDS
            .iter()
            .filter_map(|(parent, fields)| object.get(*parent).map(|p| (p, *fields)))
            .flat_map(|(parent, fields)| fields.iter().filter_map(move |f| parent.get(f)))
            .filter_map(Value::as_str)
            .filter_map(RepositoryId::parse)
            .collect();
        repositories.sort();
        repositories.dedup();
        if repositories.is_empty() {
            return Err(DeliveryError::NoRepository);
        }
        let pushed_ref = match object.get("ref") {
            None | Some(Value::Null) => PushedRef::Unnamed,
            Some(Value::String(r)) => match r.strip_prefix("refs/heads/") {
                Some(branch) if !branch.is_empty() => PushedRef::Branch(branch.to_string()),
                _ => PushedRef::Other(r.clone()),
            },
            Some(_) => return Err(DeliveryError::BadRef),
        };
        let after = match object.get("after").or_else(|| object.get("checkout_sha")) {
            None | Some(Value::Null) => Revision::Unknown,
            Some(Value::String(s)) => revision(s)?,
            Some(other) => return Err(DeliveryError::BadRevision(other.to_string())),
        };
        Ok(Self {
            repositories,
            pushed_ref,
            after,
        })
    }

    /// Reads a push from a form body (GitHub's `application/x-www-form-urlencoded` content
    /// type): the JSON is in the `payload` field.
    pub fn from_form(body: &[u8]) -> Result<Self, DeliveryError> {
        let payload = form_urlencoded::parse(body)
            .find(|(k, _)| k == "payload")
            .map(|(_, v)| v.into_owned())
            .ok_or(DeliveryError::NoPayloadField)?;
        Self::from_json(payload.as_bytes())
    }
}

fn revision(s: &str) -> Result<Revision, DeliveryError> {
    let hex = s.bytes().all(|b| b.is_ascii_hexdigit());
    match s.len() {
        40 if hex && s.bytes().all(|b| b == b'0') => Ok(Revision::Deleted),
        40 if hex => Ok(Revision::Commit(s.to_ascii_lowercase())),
        64 if hex => Err(DeliveryError::Sha256(format!(
            "`after` has 64 hex digits: {s}"
        ))),
        _ => Err(DeliveryError::BadRevision(s.to_string())),
    }
}

impl std::fmt::Display for PushedRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Branch(name) => write!(f, "branch {name}"),
            Self::Other(name) => write!(f, "ref {name}"),
            Self::Unnamed => write!(f, "an unnamed ref"),
        }
    }
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Commit(id) => write!(f, "{}", id.get(..12).unwrap_or(id)),
            Self::Deleted => write!(f, "deleted"),
            Self::Unknown => write!(f, "an unnamed commit"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const TIP: &str = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";

    fn parse(v: &Value) -> Result<PushDelivery, DeliveryError> {
        PushDelivery::from_json(v.to_string().as_bytes())
    }

    #[test]
    fn a_github_push_names_its_repository_every_way_and_its_branch() {
        let d = parse(&json!({
            "ref": "refs/heads/main", "before": "0".repeat(40), "after": TIP,
            "repository": {
                "full_name": "org/repo",
                "clone_url": "https://github.com/org/repo.git",
                "ssh_url": "git@github.com:org/repo.git",
                "html_url": "https://github.com/org/repo",
            },
            "commits": [],
        }))
        .unwrap();
        assert_eq!(
            d.repositories,
            vec![RepositoryId::parse("https://github.com/org/repo").unwrap()]
        );
        assert_eq!(d.pushed_ref, PushedRef::Branch("main".into()));
        assert_eq!(d.after, Revision::Commit(TIP.into()));
    }

    #[test]
    fn a_gitlab_push_names_its_project_urls() {
        let d = parse(&json!({
            "object_kind": "push", "ref": "refs/heads/env/prod", "after": TIP,
            "project": {
                "git_http_url": "https://gitlab.example.com/group/sub/project.git",
                "git_ssh_url": "git@gitlab.example.com:group/sub/project.git",
            },
        }))
        .unwrap();
        assert_eq!(d.repositories.len(), 1);
        assert_eq!(
            d.repositories[0].as_str(),
            "gitlab.example.com/group/sub/project"
        );
        assert_eq!(d.pushed_ref, PushedRef::Branch("env/prod".into()));
    }

    #[test]
    fn deletes_tags_and_unnamed_refs_are_told_apart() {
        let repo = json!({"clone_url": "https://h/o/r.git"});
        let deleted =
            parse(&json!({"ref": "refs/heads/main", "after": "0".repeat(40), "repository": repo}))
                .unwrap();
        assert_eq!(deleted.after, Revision::Deleted);
        let tag = parse(&json!({"ref": "refs/tags/v1", "after": TIP, "repository": repo})).unwrap();
        assert_eq!(tag.pushed_ref, PushedRef::Other("refs/tags/v1".into()));
        let relay = parse(&json!({"repository": repo})).unwrap();
        assert_eq!(
            (relay.pushed_ref, relay.after),
            (PushedRef::Unnamed, Revision::Unknown)
        );
    }

    #[test]
    fn sha256_repositories_and_bad_bodies_are_refused_with_a_reason() {
        let repo = json!({"clone_url": "https://h/o/r.git"});
        let long =
            parse(&json!({"ref": "refs/heads/main", "after": "a".repeat(64), "repository": repo}));
        assert!(matches!(long, Err(DeliveryError::Sha256(_))), "{long:?}");
        let gitea = parse(&json!({"ref": "refs/heads/main", "after": TIP,
            "repository": {"clone_url": "https://h/o/r.git", "object_format_name": "sha256"}}));
        assert!(matches!(gitea, Err(DeliveryError::Sha256(_))));
        assert!(matches!(
            parse(&json!({"ref": "refs/heads/main", "after": "xyz", "repository": repo})),
            Err(DeliveryError::BadRevision(_))
        ));
        assert!(matches!(
            parse(&json!({"ref": "refs/heads/main"})),
            Err(DeliveryError::NoRepository)
        ));
        assert!(matches!(
            parse(&json!([1])),
            Err(DeliveryError::NotAnObject)
        ));
        assert!(matches!(
            PushDelivery::from_json(br#"{"ref": "refs/heads/ma"#),
            Err(DeliveryError::Json(_))
        ));
    }

    #[test]
    fn a_form_body_carries_the_json_in_payload() {
        let json = json!({"ref": "refs/heads/main", "after": TIP, "repository": {"clone_url": "https://h/o/r"}});
        let body: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &json.to_string())
            .finish();
        let d = PushDelivery::from_form(body.as_bytes()).unwrap();
        assert_eq!(d.pushed_ref, PushedRef::Branch("main".into()));
        assert!(matches!(
            PushDelivery::from_form(b"x=1"),
            Err(DeliveryError::NoPayloadField)
        ));
    }
}
