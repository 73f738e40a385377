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
    let impersonating = req.headers().contains_key("impersonate-user");
    if !s.rbac && !impersonating {
        return next.run(req).await;
    }
    let user = req.extensions().get::<UserInfo>().cloned();
    let mut subject = subject_of(user.as_ref());
    let attributes = attributes_of(req.method(), req.uri());
    let writes_rbac = attributes.resource.as_ref().is_some_and(|r| {
        r.group == "rbac.authorization.k8s.io"
            && matches!(attributes.verb.as_str(), "create" | "update" | "patch")
    });
    if subject.is_master() && !impersonating && !writes_rbac {
        req.extensions_mut().insert(Arc::new(subject));
        return next.run(req).await;
    }
    let policy = Policy::from_store(s.engine.store());
    if impersonating {
        // Without authorization the caller may do everything: impersonating included.
        let caller = if s.rbac {
            subject.clone()
        } else {
            Subject {
                name: subject.name.clone(),
                groups: vec![crate::rbac::MASTERS.into()],
            }
        };
        match impersonated(&policy, &caller, req.headers()) {
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

/// The subject and user a request impersonates (`Impersonate-User`, `-Group`, `-Uid`), each
/// allowed only to a caller that may `impersonate` it; kube-apiserver's denial otherwise.
fn impersonated(
    policy: &Policy,
    caller: &Subject,
    headers: &HeaderMap,
) -> Result<(Subject, UserInfo), ApiError> {
    let all = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let user = all("impersonate-user")
        .into_iter()
        .next()
        .unwrap_or_default();
    let groups = all("impersonate-group");
    let uid = all("impersonate-uid").into_iter().next();
    let check = |a: Attributes| {
        if policy.allows(caller, &a) {
            Ok(())
        } else {
            Err(a.denied(&caller.name))
        }
    };
    match user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => check(Attributes::resource(
            "impersonate",
            "",
            "serviceaccounts",
            Some(ns),
            Some(name),
        ))?,
        None => check(Attributes::resource(
            "impersonate",
            "",
            "users",
            None,
            Some(&user),
        ))?,
    }
    for group in &groups {
        check(Attributes::resource(
            "impersonate",
            "",
            "groups",
            None,
            Some(group),
        ))?;
    }
    if let Some(uid) = &uid {
        check(Attributes::resource(
            "impersonate",
            "authentication.k8s.io",
            "uids",
            None,
            Some(uid),
        ))?;
    }
    // Each extra (`Impersonate-Extra-<key>: value`) as kube-apiserver checks it: `impersonate`
    // on `userextras/<key>`, named by the value. They are not carried further.
    for (header, value) in headers {
        if let Some(key) = header.as_str().strip_prefix("impersonate-extra-") {
            let key: String = form_urlencoded::parse(format!("k={key}").as_bytes())
                .next()
                .map_or_else(|| key.to_string(), |(_, v)| v.into_owned());
            let value = value.to_str().unwrap_or_default();
            check(Attributes::resource(
                "impersonate",
                "authentication.k8s.io",
                &format!("userextras/{key}"),
                None,
                Some(value),
            ))?;
        }
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
        && all_groups.is_empty()
    {
        all_groups.push("system:serviceaccounts".into());
        all_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    let info = UserInfo {
        name: user.as_str().into(),
        uid: uid.unwrap_or_default(),
        groups: all_groups,
    };
    Ok((subject_of(Some(&info)), info))
}
