//! A repository's identity, the same for every URL that names it: a delivery names a repository
//! by its clone, SSH and web URLs, a `GitProvider` by whichever URL the user wrote.

use std::fmt;

/// A repository normalised so that every URL of it compares equal. For a network repository it
/// is `host/path` in lower case (hosts and the big forges' paths are case-insensitive), without
/// scheme, user, port, trailing slash or `.git`:
/// `https://GitHub.com/Org/Repo.git/`, `git@github.com:org/repo` and
/// `ssh://git@github.com:22/org/repo.git` are all `github.com/org/repo`. A local repository
/// (`file://` or a bare path) is `file:` + its path, case kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepositoryId(String);

impl RepositoryId {
    /// The identity of `url`; `None` when it names no repository (empty, no path).
    #[must_use]
    pub fn parse(url: &str) -> Option<Self> {
        let url = url.trim();
        if url.is_empty() {
            return None;
        }
        if let Some((scheme, rest)) = url.split_once("://") {
            if scheme.eq_ignore_ascii_case("file") {
                // file:///srv/r.git, or file://localhost/srv/r.git.
                let path = rest.strip_prefix("localhost").unwrap_or(rest);
                return local(path);
            }
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            return network(host_of(authority), path);
        }
        if url.starts_with('/') || url.starts_with('.') {
            return local(url);
        }
        // scp-style: [user@]host:path. A colon after a slash is part of a local path.
        match url.split_once(':') {
            Some((authority, path)) if !authority.contains('/') => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                network(host, path)
            }
            _ => local(url),
        }
    }

    /// The normalised form.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RepositoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The host of an authority (`user:pw@host:port`, `[::1]:22`), without user and port.
fn host_of(authority: &str) -> &str {
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split_once(']').map_or(bracketed, |(h, _)| h);
    }
    host.split_once(':').map_or(host, |(h, _)| h)
}

/// `path` without surrounding slashes and a trailing `.git`.
fn trimmed(path: &str) -> &str {
    let path = path.trim_matches('/');
    path.strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/')
}

fn network(host: &str, path: &str) -> Option<RepositoryId> {
    let path = trimmed(path);
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(RepositoryId(format!("{host}/{path}").to_ascii_lowercase()))
}

fn local(path: &str) -> Option<RepositoryId> {
    let path = trimmed(path);
    (!path.is_empty()).then(|| RepositoryId(format!("file:/{path}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(url: &str) -> String {
        RepositoryId::parse(url).map(|r| r.0).unwrap_or_default()
    }

    #[test]
    fn every_url_of_one_repository_is_one_identity() {
        for url in [
            "https://github.com/org/repo.git",
            "https://GitHub.com/Org/Repo.git/",
            "http://user:token@github.com:8443/org/repo",
            "git@github.com:org/repo.git",
            "github.com:org/repo",
            "ssh://git@github.com:22/org/repo.git",
            "git://github.com/org/repo/",
            "https://github.com/org/repo",
        ] {
            assert_eq!(id(url), "github.com/org/repo", "{url}");
        }
    }

    #[test]
    fn nested_groups_ipv6_and_local_paths_keep_what_identifies_them() {
        assert_eq!(
            id("https://gitlab.example.com/group/sub/project.git"),
            "gitlab.example.com/group/sub/project"
        );
        assert_eq!(id("ssh://git@[::1]:2222/srv/r.git"), "::1/srv/r");
        assert_eq!(id("file:///srv/Data/origin.git"), "file:/srv/Data/origin");
        assert_eq!(id("/srv/Data/origin.git/"), "file:/srv/Data/origin");
        assert_eq!(id("file://localhost/srv/r"), "file:/srv/r");
    }

    #[test]
    fn different_repositories_stay_apart_and_nothing_is_no_repository() {
        assert_ne!(
            id("https://github.com/org/repo"),
            id("https://github.com/org/repo2")
        );
        assert_ne!(
            id("https://github.com/org/repo"),
            id("https://gitlab.com/org/repo")
        );
        assert_ne!(id("file:///srv/r.git"), id("https://srv/r.git"));
        assert_eq!(RepositoryId::parse(""), None);
        assert_eq!(RepositoryId::parse("https://github.com/"), None);
        assert_eq!(RepositoryId::parse("file:///"), None);
    }
}
