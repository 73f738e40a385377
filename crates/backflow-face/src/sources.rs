//! What the face reads in the running backflow: the configuration and the live objects through
//! the API, each folder's history and tip through its branch worker, and the record of writes.

use std::sync::Arc;

use backflow_api::config::{DeliveryRecord, GitProvider, GitReceiver, GitTarget};
use backflow_api::{AppliedBy, WriteRecord};
use backflow_board::BranchRegistry;
use backflow_branch::CommitId;
use backflow_git::FolderFile;
use backflow_manifest::KindMap;
use backflow_sops::Identity as AgeIdentity;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::error::FaceError;
use crate::folder_diff::{FolderDiff, compare};
use crate::object::ObjectRef;
use crate::story::{EventNote, Story, StoryInputs, TargetHistory};
use crate::why::Why;

/// How many of a folder's changes a story reads, newest first.
pub const STORY_CHANGES: usize = 500;

/// The face's view of a running backflow. Cheap to clone.
#[derive(Clone)]
pub struct Face {
    client: Client,
    branches: BranchRegistry,
    writes: Option<Arc<WriteRecord>>,
    identities: Arc<Vec<AgeIdentity>>,
}

impl std::fmt::Debug for Face {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Face").finish_non_exhaustive()
    }
}

/// A delivery to a `GitReceiver`, as its status keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// The receiver's `namespace/name`.
    pub(crate) receiver: String,
    /// When, what became of it, and what it named.
    pub(crate) record: DeliveryRecord,
}

/// A `GitTarget` as the face needs it.
#[derive(Debug, Clone)]
struct Target {
    namespace: String,
    name: String,
    url: String,
    branch: String,
    folder: String,
    /// The applier that coordinates the folder, when it is backflow's own claim.
    own: Option<AppliedBy>,
}

impl Target {
    fn label(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl Face {
    /// The face of the API `client` reaches and the branches `branches` runs; `writes` is the
    /// embedded server's record of writes (none against a real cluster); `identities` read
    /// SOPS files (values are compared, never shown).
    #[must_use]
    pub fn new(
        client: Client,
        branches: BranchRegistry,
        writes: Option<Arc<WriteRecord>>,
        identities: Vec<AgeIdentity>,
    ) -> Self {
        Self {
            client,
            branches,
            writes,
            identities: Arc::new(identities),
        }
    }

    /// The client of the API.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The push webhooks' newest deliveries as their `GitReceiver`s' status keeps them, newest
    /// first (none where the API serves no `GitReceiver`s).
    pub(crate) async fn deliveries(&self) -> Result<Vec<Delivery>, FaceError> {
        let receivers = match Api::<GitReceiver>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut out: Vec<Delivery> = receivers
            .iter()
            .flat_map(|r| {
                let receiver = format!("{}/{}", r.namespace().unwrap_or_default(), r.name_any());
                r.status
                    .iter()
                    .flat_map(|s| s.recent_deliveries.iter())
                    .map(move |d| Delivery {
                        receiver: receiver.clone(),
                        record: d.clone(),
                    })
            })
            .collect();
        out.sort_by(|a, b| b.record.at.cmp(&a.record.at));
        Ok(out)
    }

    /// The record of writes, where one is kept.
    pub(crate) fn writes(&self) -> Option<&Arc<WriteRecord>> {
        self.writes.as_ref()
    }

    /// The object of type `group`/`plural` named `namespace`/`name`, its version and kind as
    /// the API serves them.
    pub(crate) async fn resolve(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectRef, FaceError> {
        if plural.is_empty() || name.is_empty() {
            return Err(FaceError::BadRequest(
                "name the object with plural and name (and group, namespace)".into(),
            ));
        }
        let served = kube::discovery::group(&self.client, group)
            .await
            .map_err(|_| FaceError::NotFound(format!("API group {group:?}")))?;
        let (resource, _) = served
            .recommended_resources()
            .into_iter()
            .find(|(r, _)| r.plural == plural)
            .ok_or_else(|| FaceError::NotFound(format!("resource {plural} in group {group:?}")))?;
        let object = ObjectRef {
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
            plural: resource.plural,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        object.check().map_err(FaceError::BadRequest)?;
        Ok(object)
    }

    /// The story of `object`, newest first.
    pub async fn story(&self, object: &ObjectRef) -> Result<Story, FaceError> {
        object.check().map_err(FaceError::BadRequest)?;
        let writes = self
            .writes
            .as_ref()
            .map(|w| w.writes_of(&object.key()))
            .unwrap_or_default();
        let mut gaps = Vec::new();
        if self.writes.is_none() {
            gaps.push("live writes are recorded by backflow's embedded API server only".into());
        }
        let mut histories = Vec::new();
        for target in self.targets().await? {
            match self.history_of(&target).await {
                Ok(Some(history)) => histories.push(history),
                Ok(None) => {}
                Err(e) => gaps.push(format!("GitTarget {}: {e}", target.label())),
            }
        }
        let notes = self.notes_about(object).await?;
        let mut story = Story::tell(StoryInputs {
            object,
            writes: &writes,
            histories: &histories,
            notes: &notes,
            identities: &self.identities,
        });
        story.gaps = gaps;
        Ok(story)
    }

    /// The last writer of each field of `object`.
    pub async fn why(&self, object: &ObjectRef) -> Result<Why, FaceError> {
        let story = self.story(object).await?;
        let live = self.live(object).await?;
        Ok(Why::of(&live, story))
    }

    /// Every `GitTarget`'s folder (or only `only`'s, `namespace/name`) against the live side.
    pub async fn diff(&self, only: Option<&str>) -> Result<Vec<FolderDiff>, FaceError> {
        let targets: Vec<Target> = self
            .targets()
            .await?
            .into_iter()
            .filter(|t| only.is_none_or(|o| o == t.label()))
            .collect();
        if let (Some(only), true) = (only, targets.is_empty()) {
            return Err(FaceError::NotFound(format!("GitTarget {only}")));
        }
        let kinds = self.kinds().await;
        let mut out = Vec::new();
        for target in targets {
            out.push(self.folder_diff(&target, &kinds).await?);
        }
        Ok(out)
    }

    async fn targets(&self) -> Result<Vec<Target>, FaceError> {
        let targets = Api::<GitTarget>::all(self.client.clone())
            .list(&ListParams::default())
            .await?;
        let providers = Api::<GitProvider>::all(self.client.clone())
            .list(&ListParams::default())
            .await?;
        Ok(targets
            .items
            .into_iter()
            .filter_map(|t| {
                let namespace = t.namespace().unwrap_or_default();
                let provider = providers.items.iter().find(|p| {
                    p.namespace().as_deref() == Some(namespace.as_str())
                        && p.name_any() == t.spec.provider_ref.name
                })?;
                let own = t
                    .spec
                    .applier_claim_ref
                    .as_ref()
                    .filter(|c| c.kind == "NativeClaim")
                    .map(|c| AppliedBy::claim(&namespace, &c.name));
                Some(Target {
                    name: t.name_any(),
                    namespace,
                    url: provider.spec.url.clone(),
                    branch: t.spec.branch.clone(),
                    folder: t.spec.path.clone(),
                    own,
                })
            })
            .collect())
    }

    /// The branch tip the mirror last saw, and the worker that reads it.
    fn tip_of(&self, target: &Target) -> Option<(CommitId, backflow_git::WorkerHandle)> {
        let worker = self.branches.worker(&target.url, &target.branch)?;
        let tip = self
            .branches
            .tip(&target.url, &target.branch)?
            .parse()
            .ok()?;
        Some((tip, worker))
    }

    async fn history_of(&self, target: &Target) -> Result<Option<TargetHistory>, FaceError> {
        let Some((tip, worker)) = self.tip_of(target) else {
            return Ok(None);
        };
        let history = worker
            .read_history(tip, target.folder.clone(), STORY_CHANGES)
            .await
            .map_err(|e| FaceError::Git(e.to_string()))?
            .map_err(|e| FaceError::Git(e.to_string()))?;
        Ok(Some(TargetHistory {
            target: target.label(),
            history,
        }))
    }

    /// backflow's Events about `object`, and those about a `GitTarget` that name it.
    async fn notes_about(&self, object: &ObjectRef) -> Result<Vec<EventNote>, FaceError> {
        let events = Api::<Event>::all(self.client.clone())
            .list(&ListParams::default())
            .await?;
        let key = format!("{}:", object.key());
        Ok(events
            .items
            .into_iter()
            .filter(|e| {
                let Some(regarding) = &e.regarding else {
                    return false;
                };
                let about = regarding.kind.as_deref() == Some(object.kind.as_str())
                    && regarding.name.as_deref() == Some(object.name.as_str())
                    && regarding.namespace.as_deref().unwrap_or_default() == object.namespace;
                let naming = regarding.kind.as_deref() == Some("GitTarget")
                    && e.note.as_deref().is_some_and(|n| n.starts_with(&key));
                about || naming
            })
            .map(|e| EventNote {
                at: e
                    .series
                    .as_ref()
                    .map(|s| s.last_observed_time.0.to_string())
                    .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
                    .unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                message: e.note.clone().unwrap_or_default(),
                by: e.reporting_controller.clone().unwrap_or_default(),
            })
            .collect())
    }

    pub(crate) async fn live(&self, object: &ObjectRef) -> Result<Value, FaceError> {
        let api = self.api_of(object, Some(&object.namespace));
        let found = api
            .get_opt(&object.name)
            .await?
            .ok_or_else(|| FaceError::NotFound(format!("{} is not live", object.describe())))?;
        Ok(serde_json::to_value(found).unwrap_or(Value::Null))
    }

    fn api_of(&self, object: &ObjectRef, namespace: Option<&str>) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(&object.group, &object.version, &object.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &object.plural);
        match namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// The custom kinds' schemas, so their defaults read as the mirror reads them.
    async fn kinds(&self) -> KindMap {
        let kinds = KindMap::new();
        let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
        let crds = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &crds);
        if let Ok(list) = api.list(&ListParams::default()).await {
            let values: Vec<Value> = list
                .items
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect();
            kinds.set_schemas_from_crds(&values);
        }
        kinds
    }

    async fn folder_diff(&self, target: &Target, kinds: &KindMap) -> Result<FolderDiff, FaceError> {
        let mut diff = FolderDiff {
            target: target.label(),
            branch: target.branch.clone(),
            folder: target.folder.clone(),
            tip: None,
            objects: Vec::new(),
            gaps: Vec::new(),
        };
        let Some((tip, worker)) = self.tip_of(target) else {
            diff.gaps
                .push("the branch is not running here yet, or has no commit".into());
            return Ok(diff);
        };
        diff.tip = Some(tip.to_string());
        let files: Vec<FolderFile> = worker
            .read_folder(tip, target.folder.clone())
            .await
            .map_err(|e| FaceError::Git(e.to_string()))?
            .map_err(|e| FaceError::Git(e.to_string()))?;
        let files: Vec<(String, Vec<u8>)> =
            files.into_iter().map(|f| (f.path, f.content)).collect();
        let folders = [target.folder.clone()]
            .into_iter()
            .filter(|f| f != ".")
            .collect::<Vec<_>>();
        let declared = backflow_manifest::declared_objects_within(
            &files,
            &folders,
            self.identities.as_slice(),
        );
        diff.gaps.extend(
            declared
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.path, p.reason)),
        );
        let mut live = Vec::new();
        for stream in self.branches.streams_of(&target.namespace, &target.name) {
            let served = &stream.served;
            let object = ObjectRef {
                group: served.group.clone(),
                version: served.version.clone(),
                kind: served.kind.clone(),
                plural: served.plural.clone(),
                namespace: String::new(),
                name: String::new(),
            };
            let api = self.api_of(&object, stream.namespace.as_deref());
            // What the mirror does not see is not the folder's either.
            let params = match backflow_board::unseen_objects(served) {
                Some(selector) => ListParams::default().labels(selector),
                None => ListParams::default(),
            };
            match api.list(&params).await {
                Ok(list) => live.extend(list.items.into_iter().map(|mut o| {
                    o.types = Some(kube::api::TypeMeta {
                        api_version: object.api_version(),
                        kind: object.kind.clone(),
                    });
                    serde_json::to_value(o).unwrap_or(Value::Null)
                })),
                Err(e) => diff
                    .gaps
                    .push(format!("cannot list {}: {e}", stream.describe())),
            }
        }
        diff.objects = compare(&declared.objects, &live, target.own.as_ref(), kinds);
        Ok(diff)
    }
}
