//! The types the live API serves, read through discovery (CRDs appear on the next refresh).

use kube::Client;
use kube::discovery::{Discovery, Scope, verbs};

use crate::plan::ServedType;

/// Reads every watchable type, each at every served version (preferred ones marked).
pub async fn served_types(client: &Client) -> Result<Vec<ServedType>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run_aggregated().await?;
    let mut out = Vec::new();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest().to_string();
        for version in group.versions() {
            for (ar, caps) in group.versioned_resources(version) {
                if !caps.supports_operation(verbs::LIST)
                    || !caps.supports_operation(verbs::WATCH)
                    || ar.plural.contains('/')
                {
                    continue;
                }
                out.push(ServedType {
                    group: ar.group.clone(),
                    version: ar.version.clone(),
                    plural: ar.plural.clone(),
                    kind: ar.kind.clone(),
                    namespaced: caps.scope == Scope::Namespaced,
                    preferred: version == preferred,
                });
            }
        }
    }
    out.sort();
    Ok(out)
}
