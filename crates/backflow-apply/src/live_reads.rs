//! The live objects one apply judges, read with one paged list per type when the folders declare
//! many objects of that type, rather than one read per object: an apply after a restart judges
//! every object the folders declare, and one read each made it grow with the folder (about
//! 2 ms an object).

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{ApiResource, DynamicObject, ListParams, TypeMeta};
use kube::{Api, Client};
use serde_json::Value;

/// From how many declared objects of one type that type is listed.
pub(crate) const LIST_FROM: usize = 20;

/// Objects per list page.
const PAGE: u32 = 500;

/// A type's wanted objects as (namespace, name).
pub(crate) type Wanted = BTreeSet<(String, String)>;

/// One type's listed objects by (namespace, name), as JSON text.
type Listed = BTreeMap<(String, String), Box<str>>;

/// Live objects of the types listed, only those the apply declares.
#[derive(Default)]
pub(crate) struct LiveReads {
    /// Per (group, plural): the wanted objects the list held, by (namespace, name), as JSON
    /// text (a parsed value takes several times the memory, for a hundred thousand objects).
    listed: BTreeMap<(String, String), Listed>,
}

impl LiveReads {
    /// Lists `resource` in every namespace, page by page, keeping the `wanted` objects. On an
    /// error the type stays unlisted (its objects are read one by one).
    pub(crate) async fn list(&mut self, client: &Client, resource: &ApiResource, wanted: &Wanted) {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        let mut found = BTreeMap::new();
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::debug!(resource = %resource.plural, error = %e, "listing failed; its objects are read one by one");
                    return;
                }
            };
            for mut item in page.items {
                let at = (
                    item.metadata.namespace.clone().unwrap_or_default(),
                    item.metadata.name.clone().unwrap_or_default(),
                );
                if !wanted.contains(&at) {
                    continue;
                }
                // A list's items do not say their type; a read of one object does.
                item.types.get_or_insert_with(|| TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                });
                if let Ok(text) = serde_json::to_string(&item) {
                    found.insert(at, text.into_boxed_str());
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        self.listed
            .insert((resource.group.clone(), resource.plural.clone()), found);
    }

    /// The object `namespace`/`name` of `resource` as its type's list held it; `None` when the
    /// type was not listed or the list did not hold it (a create is judged on a read made just
    /// before it, as the list may be seconds old by then).
    pub(crate) fn get(&self, resource: &ApiResource, namespace: &str, name: &str) -> Option<Value> {
        self.listed
            .get(&(resource.group.clone(), resource.plural.clone()))?
            .get(&(namespace.to_string(), name.to_string()))
            .and_then(|text| serde_json::from_str(text).ok())
    }
}
