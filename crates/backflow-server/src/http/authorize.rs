//! Every request authorized as kube-apiserver authorizes it under RBAC: its attributes read
//! from the path, method and query (`list` and `watch` checked once, at the start), the
//! impersonation headers honoured for a caller allowed to `impersonate`, and a denial answered
//! 403 with kube-apiserver's message. Writes of RBAC objects carry the writer's policy, so the
//! engine can refuse a grant of what the writer does not hold.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method};

use super::AppState;
use super::path;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::rbac::{Attributes, Grantor, Policy, Subject};

/// The subject of an authenticated user (every one is in `system:authenticated`), or of an
/// anonymous request.
#[must_use]
pub fn subject_of(user: Option<&UserInfo>) -> Subject {
    match user {
        Some(u) => {
            let mut groups = u.groups.clone();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            Subject {
                name: u.name.to_string(),
                groups,
            }
        }
        None => Subject {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        },
    }
}

/// The middleware: authorizes the request under RBAC (when the server enforces it). Where it
/// does not (no authentication: loopback, or backflow's own in-process client), a request that
/// impersonates somebody is still authorized as them: that is how an applier acts with its
/// claim's service account's rights.
pub(super) async fn authorize(
    State(s): State<AppState>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let impersonating = Impersonation::of(req.headers());
    if !s.rbac && impersonating.is_none() {
        return next.run(req).await;
    }
    let user = req.extensions().get::<UserInfo>().cloned();
    let mut subject = subject_of(user.as_ref());
    let attributes = attributes_of(req.method(), req.uri());
    let writes_rbac = attributes.resource.as_ref().is_some_and(|r| {
        r.group == "rbac.authorization.k8s.io"
            && matches!(attributes.verb.as_str(), "create" | "update" | "patch")
    });
    if subject.is_master() && impersonating.is_none() && !writes_rbac {
        req.extensions_mut().insert(Arc::new(subject));
        return next.run(req).await;
    }
    let policy = s.policies.current(s.engine.store());
    if let Some(asked) = &impersonating {
        // Without authorization the caller may do everything: impersonating included.
        let caller = if s.rbac {
            subject.clone()
        } else {
            Subject {
                name: subject.name.clone(),
                groups: vec![crate::rbac::MASTERS.into()],
            }
        };
        match impersonated(&policy, &caller, asked) {
            Ok((as_subject, as_user)) => {
                subject = as_subject;
                req.extensions_mut().insert(as_user);
            }
            Err(denied) => return denied.into_response(),
        }
    }
    if !policy.allows(&subject, &attributes) {
        tracing::info!(user = %subject.name, verb = %attributes.verb, path = %req.uri().path(), "request forbidden");
        return attributes.denied(&subject.name).into_response();
    }
    if writes_rbac {
        req.extensions_mut().insert(Arc::new(Grantor {
            policy,
            subject: subject.clone(),
        }));
    }
    req.extensions_mut().insert(Arc::new(subject));
    next.run(req).await
}

/// What a request asks, as kube-apiserver's `RequestInfo` reads it.
#[must_use]
pub fn attributes_of(method: &Method, uri: &http::Uri) -> Attributes {
    let query: Vec<(String, String)> = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(p) = path::parse(uri.path()) else {
        let verb = if *method == Method::HEAD {
            "get".to_string()
        } else {
            method.as_str().to_ascii_lowercase()
        };
        return Attributes::non_resource(&verb, uri.path());
    };
    let watch = param("watch").is_some_and(|v| matches!(v, "true" | "1"));
    // A list or watch of one object by `metadata.name` names it, as kube-apiserver reads it.
    let selected = param("fieldSelector").and_then(|f| {
        f.split(',')
            .find_map(|r| {
                r.strip_prefix("metadata.name=")
                    .or_else(|| r.strip_prefix("metadata.name=="))
            })
            .map(str::to_string)
    });
    let verb = match (method.as_str(), p.name.is_some()) {
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    };
    let name = p
        .name
        .clone()
        .or(if p.name.is_none() && matches!(verb, "list" | "watch") {
            selected
        } else {
            None
        });
    // A namespace's own requests are in it (`get namespace team-a` is in `team-a`).
    let namespace = if p.group.is_empty() && p.plural == "namespaces" {
        p.name.clone()
    } else {
        p.namespace.clone()
    };
    let resource = match &p.subresource {
        Some(sub) => format!("{}/{sub}", p.plural),
        None => p.plural.clone(),
    };
    Attributes::resource(
        verb,
        &p.group,
        &resource,
        namespace.as_deref(),
        name.as_deref(),
    )
}

/// Whom a request impersonates: kube-apiserver's `Impersonate-User`, `-Group`, `-Uid` and
/// `-Extra-<key>` headers.
#[derive(Debug, Clone)]
pub(super) struct Impersonation {
    user: String,
    groups: Vec<String>,
    uid: Option<String>,
    /// Each extra's key (URL-decoded, as kube-apiserver reads it) and value.
    extras: Vec<(String, String)>,
}

impl Impersonation {
    /// The impersonation `headers` ask for, if any.
    pub(super) fn of(headers: &HeaderMap) -> Option<Self> {
        let all = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect()
        };
        // A value that is not text impersonates the user "" (refused): never nobody.
        let user = headers
            .get("impersonate-user")?
            .to_str()
            .unwrap_or_default()
            .to_string();
        let extras = headers
            .iter()
            .filter_map(|(header, value)| {
                let key = header.as_str().strip_prefix("impersonate-extra-")?;
                let key: String = form_urlencoded::parse(format!("k={key}").as_bytes())
                    .next()
                    .map_or_else(|| key.to_string(), |(_, v)| v.into_owned());
                Some((key, value.to_str().unwrap_or_default().to_string()))
            })
            .collect();
        Some(Self {
            user,
            groups: all("impersonate-group"),
            uid: all("impersonate-uid").into_iter().next(),
            extras,
        })
    }

    /// The service account impersonated: its namespace and name.
    fn service_account(&self) -> Option<(&str, &str)> {
        self.user
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
    }

    /// What the caller must be allowed to `impersonate`, as kube-apiserver checks it: the user
    /// (or service account), each group, the uid, and each extra as `userextras/<key>` named by
    /// its value (extras are not carried further).
    fn asks(&self) -> Vec<Attributes> {
        let impersonate = |group: &str, resource: &str, ns: Option<&str>, name: &str| {
            Attributes::resource("impersonate", group, resource, ns, Some(name))
        };
        let mut asks = vec![match self.service_account() {
            Some((ns, name)) => impersonate("", "serviceaccounts", Some(ns), name),
            None => impersonate("", "users", None, &self.user),
        }];
        asks.extend(
            self.groups
                .iter()
                .map(|g| impersonate("", "groups", None, g)),
        );
        asks.extend(
            self.uid
                .iter()
                .map(|uid| impersonate("authentication.k8s.io", "uids", None, uid)),
        );
        asks.extend(self.extras.iter().map(|(key, value)| {
            impersonate(
                "authentication.k8s.io",
                &format!("userextras/{key}"),
                None,
                value,
            )
        }));
        asks
    }

    /// The user the request acts as: a service account without groups asked for is in
    /// `system:serviceaccounts` and its namespace's group, as its token would put it.
    pub(super) fn user_info(&self) -> UserInfo {
        let mut groups = self.groups.clone();
        if let Some((ns, _)) = self.service_account()
            && groups.is_empty()
        {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        UserInfo {
            name: self.user.as_str().into(),
            uid: self.uid.clone().unwrap_or_default(),
            groups,
        }
    }
}

/// The subject and user a request impersonates, each part allowed only to a caller that may
/// `impersonate` it; kube-apiserver's denial otherwise.
fn impersonated(
    policy: &Policy,
    caller: &Subject,
    asked: &Impersonation,
) -> Result<(Subject, UserInfo), ApiError> {
    if let Some(refused) = asked.asks().into_iter().find(|a| !policy.allows(caller, a)) {
        return Err(refused.denied(&caller.name));
    }
    let info = asked.user_info();
    Ok((subject_of(Some(&info)), info))
}
