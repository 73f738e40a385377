//! What the appliers backflow holds (a Flux Kustomization, an Argo CD Application) share: the
//! object held, the repository and branch it must read, and backflow's writes to it.

use std::sync::Arc;

use backflow_api::Clock;
use kube::api::{ApiResource, DynamicObject, PatchParams};
use kube::{Api, Client};

use crate::receiver::RepositoryId;

/// An applier object backflow holds.
pub(crate) struct Held {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    /// Its kind, for messages.
    kind: &'static str,
    /// The repository URL and branch the claim's targets write: the applier must read them.
    source: (String, String),
    clock: Arc<dyn Clock>,
}

impl Held {
    /// `kind` `namespace/name`, which must read `url` `branch`.
    pub fn new(
        client: Client,
        kind: &'static str,
        (namespace, name): (&str, &str),
        (url, branch): (&str, &str),
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            kind,
            source: (url.to_string(), branch.to_string()),
            clock,
        }
    }

    /// Objects of `resource` in `namespace`.
    pub fn api(&self, resource: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, resource)
    }

    /// `Kustomization team-a/apps`, for messages.
    pub fn shown(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// What failed doing `what` (`reading`, `resuming`, …) to the held object, as a person reads
    /// it: `reading Kustomization team-a/apps: <the API's message> (<reason>, <code>)`.
    pub fn failed(&self, what: &str, error: &kube::Error) -> String {
        format!(
            "{what} {}: {}",
            self.shown(),
            backflow_board::explain(error)
        )
    }

    /// A token naming one request (its time, to the nanosecond).
    pub fn token(&self) -> String {
        humantime::format_rfc3339_nanos(self.clock.now()).to_string()
    }

    /// backflow's merge patches, under its own field manager.
    pub fn params() -> PatchParams {
        PatchParams {
            field_manager: Some("backflow".into()),
            ..PatchParams::default()
        }
    }

    /// Whether `url` at `branch` is what the targets write (URLs compared as one repository:
    /// scheme, user, `.git`, host case); otherwise why not, for a person.
    pub fn check_source(&self, what: &str, url: &str, branch: &str) -> Result<(), String> {
        let same = RepositoryId::parse(url)
            .is_some_and(|a| RepositoryId::parse(&self.source.0) == Some(a))
            && branch == self.source.1;
        if same {
            Ok(())
        } else {
            Err(format!(
                "{what} reads {url} branch {branch}, but the GitTargets naming the claim write {} branch {}",
                self.source.0, self.source.1
            ))
        }
    }
}
