//! Acting as another user: Kubernetes impersonation, so an applier applies with the rights of
//! the service account its claim names (`NativeClaim` `spec.serviceAccountName`), and the API
//! server's RBAC decides what a push may change — Git is no way around it.

use std::sync::Arc;

use kube::Client;

/// Who a client acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name (`system:serviceaccount:<namespace>:<name>`).
    pub user: String,
    /// Its groups.
    pub groups: Vec<String>,
}

impl Identity {
    /// The service account `name` in `namespace`, as the API server names it.
    #[must_use]
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
        }
    }
}

/// Makes a client of the same API that acts as an identity (the `Impersonate-User` and
/// `Impersonate-Group` headers on every request).
pub type ActAs = Arc<dyn Fn(&Identity) -> Client + Send + Sync>;

/// Whom a claim's applier acts as: the service account the claim names, else the default one
/// (`--default-service-account`, as Flux's kustomize-controller has it), in the claim's
/// namespace; with neither, backflow's own rights.
#[derive(Clone)]
pub struct ActingAs {
    clients: ActAs,
    default_account: Option<String>,
}

impl std::fmt::Debug for ActingAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActingAs")
            .field("default_account", &self.default_account)
            .finish_non_exhaustive()
    }
}

impl ActingAs {
    /// Acting through `clients`, as `default_account` for claims that name no account.
    #[must_use]
    pub fn new(clients: ActAs, default_account: Option<String>) -> Self {
        Self {
            clients,
            default_account,
        }
    }

    /// Who a claim in `namespace` naming `account` acts as (`None`: backflow itself).
    #[must_use]
    pub fn identity(&self, namespace: &str, account: Option<&str>) -> Option<Identity> {
        // An empty name is no name, as Flux reads `serviceAccountName: ""`.
        account
            .filter(|a| !a.is_empty())
            .or(self.default_account.as_deref())
            .map(|name| Identity::service_account(namespace, name))
    }

    /// A client acting as `who`.
    #[must_use]
    pub fn client(&self, who: &Identity) -> Client {
        (self.clients)(who)
    }
}

/// Clients of the API `router` serves in this process, each request carrying the identity's
/// impersonation headers (the server authorizes them as that identity).
#[must_use]
pub fn through_router(router: axum::Router) -> ActAs {
    Arc::new(move |who: &Identity| {
        let who = who.clone();
        let acting = router.clone().layer(axum::middleware::map_request(
            move |mut req: axum::extract::Request| {
                let who = who.clone();
                async move {
                    let headers = req.headers_mut();
                    if let Ok(user) = http::HeaderValue::from_str(&who.user) {
                        headers.insert("impersonate-user", user);
                    }
                    for group in &who.groups {
                        if let Ok(group) = http::HeaderValue::from_str(group) {
                            headers.append("impersonate-group", group);
                        }
                    }
                    req
                }
            },
        ));
        Client::new(acting, "default")
    })
}

/// Clients of `config`'s API acting as each identity (`kube::Config`'s impersonation). A
/// client that cannot be made answers every request with why, so the claim fails rather than
/// apply with backflow's own rights.
#[must_use]
pub fn from_config(config: kube::Config) -> ActAs {
    Arc::new(move |who: &Identity| {
        let mut config = config.clone();
        config.auth_info.impersonate = Some(who.user.clone());
        config.auth_info.impersonate_groups = Some(who.groups.clone());
        Client::try_from(config)
            .unwrap_or_else(|e| refusing(&format!("cannot act as {}: {e}", who.user)))
    })
}

/// A client whose every request is answered `503` with `message`.
fn refusing(message: &str) -> Client {
    tracing::error!(%message, "the claim's applier cannot act as its service account");
    let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": message, "reason": "ServiceUnavailable", "code": 503});
    let router = axum::Router::new().fallback(move || {
        let body = status.to_string();
        async move {
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                [(http::header::CONTENT_TYPE, "application/json")],
                body,
            )
        }
    });
    Client::new(router, "default")
}
