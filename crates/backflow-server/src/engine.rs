//! The Kubernetes object semantics over the store: create, read, update, patch, delete.
//!
//! Every write runs inside one store transaction, so what it checks (the namespace exists, the
//! resourceVersion matches) still holds when it is committed. The HTTP layer only translates
//! requests into these calls.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use backflow_api::ids::NAME_ALPHABET;
use backflow_api::{Clock, GroupResource, IdSource, ObjectKey};
use serde_json::{Value, json};

use crate::apply::{self, ApplyRequest};
use crate::builtin::INITIAL_NAMESPACES;
use crate::cel_rules;
use crate::error::{ApiError, ApiResult, Cause};
use crate::list::{Candidates, ContinueToken, ObjectList, Served};
use crate::managed_fields::{self, FieldWrite};
use crate::object::{self, metadata_mut};
use crate::patch::{self, PatchType};
use crate::registry::{KindBehavior, Registry, ResourceType};
use crate::schema::{self, FieldValidation};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Store, StoredObject, WriteTx};
use crate::{crd, validation};

/// Options shared by every write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run every check, persist nothing.
    pub dry_run: bool,
    /// The field manager recorded in `managedFields`.
    pub field_manager: String,
    /// `force=true` on a server-side apply: take fields other managers own.
    pub force: bool,
    /// What to do with fields the kind's schema does not know.
    pub field_validation: FieldValidation,
    /// The authenticated user making the write (`None`: anonymous, or backflow itself).
    pub user: Option<Arc<str>>,
    /// Under RBAC, the writer of an RBAC object: it may grant only what it holds.
    pub grantor: Option<Arc<crate::rbac::Grantor>>,
}

/// Options of a delete (query parameters and the `DeleteOptions` body).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `dryRun: [All]`.
    pub dry_run: bool,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// The authenticated user making the delete (`None`: anonymous, or backflow itself).
    pub user: Option<Arc<str>>,
}

/// Options of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue` token from the previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion=N&resourceVersionMatch=Exact`: the list as it was at N.
    pub exact: Option<u64>,
}

impl ListOptions {
    /// Whether there is no selector (every object is selected).
    #[must_use]
    pub fn selects_all(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether the selectors select `obj`; it is parsed only when there is a selector.
    #[must_use]
    pub fn selects(&self, obj: &StoredObject) -> bool {
        if self.selects_all() {
            return true;
        }
        let v = obj.value();
        self.labels.matches(&v) && self.fields.matches(&v)
    }
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The object itself.
    Main,
    /// The `status` subresource.
    Status,
}

/// The outcome of a write: the object as stored (or as it would be, in a dry run).
#[derive(Debug, Clone)]
pub struct Written {
    /// The object, at the version the request used.
    pub object: Value,
    /// Whether the write created the object (HTTP 201).
    pub created: bool,
    /// Warnings for the client (`Warning` headers), e.g. unknown fields that were dropped.
    pub warnings: Vec<String>,
}

/// How a write turns the current object (if any) into the new one.
enum Change {
    Create(Value),
    Replace(Value),
    Patch(PatchType, Value),
    /// Server-side apply of a configuration, with `force`.
    Apply(Value, bool),
}

/// The object semantics: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct Engine {
    store: Store,
    registry: Arc<RwLock<Registry>>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

fn rfc3339(clock: &dyn Clock) -> String {
    humantime::format_rfc3339_seconds(clock.now()).to_string()
}

fn namespace_key(ns: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "namespaces"), "", ns)
}

fn not_found(t: &ResourceType, name: &str) -> ApiError {
    ApiError::NotFound {
        group: t.group.clone(),
        resource: t.plural.clone(),
        name: name.into(),
    }
}

/// What one write is about, shared by its stages.
struct WriteRequest<'a> {
    t: &'a ResourceType,
    /// The namespace (`""` for a cluster-scoped type).
    namespace: &'a str,
    part: Part,
    opts: &'a WriteOptions,
    /// The request's time, for managedFields and timestamps.
    now: String,
}

impl WriteRequest<'_> {
    fn key(&self, name: &str) -> ObjectKey {
        Engine::key(self.t, self.namespace, name)
    }
}

/// The object a change resolves to, and the managed fields server-side apply computed.
struct Resolved {
    object: Value,
    managed_fields: Option<Vec<Value>>,
}

/// `old` (at the type's version) with a patch applied.
fn patched(
    t: &ResourceType,
    name: &str,
    old: &Value,
    pt: PatchType,
    body: &Value,
) -> ApiResult<Value> {
    let mut target = at_version(old, t);
    match pt {
        PatchType::Merge => patch::merge(&mut target, body),
        PatchType::Strategic => patch::strategic(&mut target, body)?,
        PatchType::Json => patch::json_patch(&mut target, body).map_err(|e| match e {
            ApiError::Invalid { causes, .. } => ApiError::Invalid {
                group: t.group.clone(),
                kind: t.kind.clone(),
                name: name.into(),
                causes,
            },
            other => other,
        })?,
        PatchType::Apply => {
            return Err(ApiError::Internal(
                "apply patches are routed to server-side apply".into(),
            ));
        }
    }
    Ok(target)
}

/// Random identifiers, as a real API server hands out: UUID v4 UIDs and random name suffixes.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn uid(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    fn name_suffix(&self) -> String {
        let bytes = uuid::Uuid::new_v4().into_bytes();
        bytes[..5]
            .iter()
            .map(|b| NAME_ALPHABET[*b as usize % NAME_ALPHABET.len()] as char)
            .collect()
    }
}

impl Engine {
    /// Wraps a store, seeding the initial namespaces and loading stored CRDs into the registry.
    /// UIDs and generated names are random ([`RandomIds`]).
    pub async fn new(store: Store, clock: Arc<dyn Clock>) -> ApiResult<Self> {
        Self::with_ids(store, clock, Arc::new(RandomIds)).await
    }

    /// [`Engine::new`] with UIDs and generated names from `ids`.
    pub async fn with_ids(
        store: Store,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
    ) -> ApiResult<Self> {
        let engine = Self {
            store,
            registry: Arc::new(RwLock::new(Registry::builtin())),
            clock,
            ids,
        };
        engine.refresh_custom_types();
        for ns in INITIAL_NAMESPACES {
            let exists = engine.store.read(|s| s.get(&namespace_key(ns)).is_some());
            if !exists {
                let t = engine
                    .resource_type("", "v1", "namespaces")
                    .ok_or(ApiError::UnknownResource)?;
                let body =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                let opts = WriteOptions {
                    dry_run: false,
                    field_manager: "backflow".into(),
                    ..Default::default()
                };
                engine.create(&t, "", body, &opts).await?;
            }
        }
        Ok(engine)
    }

    /// The current time, from the injected clock.
    #[must_use]
    pub fn now(&self) -> std::time::SystemTime {
        self.clock.now()
    }

    /// The injected clock itself (for answers computed later, such as watch Tables).
    #[must_use]
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The store underneath.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A snapshot of the registry (discovery, routing).
    #[must_use]
    pub fn registry(&self) -> Registry {
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// One served type.
    #[must_use]
    pub fn resource_type(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(group, version, plural)
            .cloned()
    }

    /// Rebuilds the custom types from the stored CRDs; order-independent, so concurrent CRD
    /// writes converge.
    fn refresh_custom_types(&self) {
        let gr = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
        let crds: Vec<Value> = self
            .store
            .read(|s| s.list(&gr, None).map(|(_, v)| v.value()).collect());
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set_custom(&crds);
    }

    /// Every namespaced type, once (at the version its objects are stored under).
    fn storage_types(&self) -> Vec<ResourceType> {
        let reg = self
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let resources: std::collections::BTreeSet<GroupResource> = reg
            .all()
            .filter(|t| t.namespaced())
            .map(ResourceType::group_resource)
            .collect();
        resources
            .iter()
            .filter_map(|gr| reg.storage_type(gr).cloned())
            .collect()
    }

    fn key(t: &ResourceType, namespace: &str, name: &str) -> ObjectKey {
        let ns = if t.namespaced() { namespace } else { "" };
        ObjectKey::new(t.group_resource(), ns, name)
    }

    /// Reads one object.
    pub fn get(&self, t: &ResourceType, namespace: &str, name: &str) -> ApiResult<Value> {
        self.get_served(t, namespace, name).map(Served::into_value)
    }

    /// Reads one object as it is served, without parsing it when it is served as stored.
    pub fn get_served(&self, t: &ResourceType, namespace: &str, name: &str) -> ApiResult<Served> {
        let key = Self::key(t, namespace, name);
        let obj = self
            .store
            .read(|s| s.get(&key).cloned())
            .ok_or_else(|| not_found(t, name))?;
        Ok(Served::as_type(&obj, t))
    }

    /// Lists objects (one namespace, or all with `None`), filtered and paginated. Objects are
    /// parsed only to check a selector or to convert them (see [`Served`]); a page starts at
    /// its continue key and, without a selector, takes only its own objects.
    pub fn list(
        &self,
        t: &ResourceType,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> ApiResult<ObjectList> {
        let gr = t.group_resource();
        let ns = if t.namespaced() { namespace } else { None };
        let token = opts
            .continue_token
            .as_deref()
            .map(ContinueToken::decode)
            .transpose()?;
        let after = token.as_ref().map(|c| c.after(&gr));
        let known = token.as_ref().and_then(|c| c.remaining);
        let page = match opts.exact {
            Some(at) => {
                let objects = self.objects_at(&gr, ns, at)?;
                let objects = objects
                    .iter()
                    .filter(|(k, _)| after.as_ref().is_none_or(|a| k > a))
                    .map(|(_, v)| v);
                Candidates::gather(objects, at, opts, known)
            }
            None => self.store.read(|s| {
                let objects = s.list_after(&gr, ns, after.as_ref()).map(|(_, v)| v);
                Candidates::gather(objects, s.resource_version(), opts, known)
            }),
        };
        let rv = token.map_or(page.resource_version, |c| c.resource_version);
        Ok(page.into_list(t, opts, rv))
    }

    /// The objects of `gr` (in `ns`, or every namespace) as they were at resourceVersion `at`:
    /// the current ones with every later change undone from the watch history. 410 when the
    /// history no longer reaches back to `at`, 504 when `at` is newer than the store.
    fn objects_at(
        &self,
        gr: &backflow_api::GroupResource,
        ns: Option<&str>,
        at: u64,
    ) -> ApiResult<Vec<(ObjectKey, StoredObject)>> {
        // The history is appended just after the read model moves: retry until both agree.
        for _ in 0..1_000 {
            let (mut objects, current): (BTreeMap<ObjectKey, StoredObject>, u64) =
                self.store.read(|s| {
                    let objects = s
                        .list(gr, ns)
                        .map(|(k, v)| (k.to_key(), v.clone()))
                        .collect();
                    (objects, s.resource_version())
                });
            if at > current {
                return Err(ApiError::Timeout(format!(
                    "Too large resource version: {at}, current: {current}"
                )));
            }
            let events = self.store.events().since(at).map_err(|e| {
                ApiError::Expired(format!(
                    "The resourceVersion for the provided list is too old: {at} (the oldest kept is {})",
                    e.oldest
                ))
            })?;
            if events.last().is_some_and(|e| e.resource_version < current)
                || (events.is_empty() && at < current)
            {
                std::thread::yield_now();
                continue;
            }
            let in_scope = |k: &ObjectKey| &k.resource == gr && ns.is_none_or(|n| k.namespace == n);
            for e in events
                .iter()
                .rev()
                .filter(|e| e.resource_version <= current)
            {
                if !in_scope(&e.key) {
                    continue;
                }
                match &e.previous {
                    Some(previous) => objects.insert(e.key.clone(), previous.clone()),
                    None => objects.remove(&e.key),
                };
            }
            return Ok(objects.into_iter().collect());
        }
        Err(ApiError::ServiceUnavailable(
            "the watch history is behind the store; retry".into(),
        ))
    }

    /// Creates an object from a client's body.
    pub async fn create(
        &self,
        t: &ResourceType,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let name = object::name(&body).to_string();
        self.write(t, namespace, &name, Part::Main, Change::Create(body), opts)
            .await
    }

    /// Replaces an object (PUT). Creates it when missing, as PUT does for most kinds.
    pub async fn update(
        &self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        part: Part,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        self.write(t, namespace, name, part, Change::Replace(body), opts)
            .await
    }

    /// Patches an object.
    #[allow(clippy::too_many_arguments)] // mirrors the REST call: type, place, part, format, body, options
    pub async fn patch(
        &self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        part: Part,
        patch_type: PatchType,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        if patch_type == PatchType::Strategic && t.custom {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (strategic merge patch is not supported by {}, Kind={})",
                t.api_version(),
                t.kind
            )));
        }
        let change = match patch_type {
            PatchType::Apply => Change::Apply(body, opts.force),
            other => Change::Patch(other, body),
        };
        self.write(t, namespace, name, part, change, opts).await
    }

    async fn write(
        &self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        part: Part,
        change: Change,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let engine = self.clone();
        let t2 = t.clone();
        let ns = namespace.to_string();
        let name = name.to_string();
        let opts2 = opts.clone();
        let written = self
            .store
            .write(move |tx| {
                tx.act_as(opts2.user.clone());
                tx.managed_by(&opts2.field_manager);
                engine.write_in(tx, &t2, &ns, &name, part, change, &opts2)
            })
            .await?;
        if is_crd(t) && !opts.dry_run {
            self.refresh_custom_types();
        }
        Ok(Written {
            object: at_version(&written.object, t),
            created: written.created,
            warnings: written.warnings,
        })
    }

    /// One write, as a pipeline of named stages inside the store transaction: resolve the
    /// change against what is stored, name the object, check its namespace, split off what the
    /// endpoint does not write (status), prepare the metadata, prune and validate, record
    /// managed fields, and commit it (or recognise a no-op).
    #[allow(clippy::too_many_arguments)] // the store closure hands the request over as it came
    fn write_in(
        &self,
        tx: &mut WriteTx<'_>,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        part: Part,
        change: Change,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let req = WriteRequest {
            t,
            namespace: if t.namespaced() { namespace } else { "" },
            part,
            opts,
            now: rfc3339(self.clock.as_ref()),
        };
        let existing = if name.is_empty() {
            None
        } else {
            tx.get(&req.key(name)).map(|o| o.value())
        };
        let old = existing.as_ref();
        let Resolved {
            mut object,
            managed_fields,
        } = self.resolve(&req, name, change, old)?;
        let name = self.name_object(tx, &req, &mut object, old)?;
        Self::check_namespace(tx, &req, &name, old)?;
        Self::split_status(&req, &mut object, old, &name)?;
        self.stamp(tx, t, &mut object, old, req.namespace, &name, &req.now);
        if is_secret(t) {
            validation::normalize_secret(&mut object);
        }
        object::tidy_metadata(&mut object);
        let warnings = Self::prune_unknown_fields(&req, &mut object)?;
        Self::validate_object(&req, &object, old, &name)?;
        if let Some(grantor) = &opts.grantor
            && t.group == "rbac.authorization.k8s.io"
        {
            grantor.check(&t.plural, req.namespace, &object)?;
        }
        synthesize(t, &mut object, old);
        let managed = Self::managed_fields(&req, &object, old, managed_fields);
        set_managed_fields(&mut object, managed);
        let written = self.commit(tx, &req, object, old, name, warnings)?;
        if !opts.dry_run {
            reaggregate(tx, t);
        }
        Ok(written)
    }

    /// Stage 1: the object the change asks for, given what is stored, with its
    /// resourceVersion precondition checked.
    fn resolve(
        &self,
        req: &WriteRequest<'_>,
        name: &str,
        change: Change,
        existing: Option<&Value>,
    ) -> ApiResult<Resolved> {
        let t = req.t;
        let checked = |body| self.check_body(t, req.namespace, Some(name), body);
        let (object, precondition) = match (change, existing) {
            (Change::Apply(body, force), _) => {
                return self.resolve_apply(req, name, body, force, existing);
            }
            (Change::Create(_), Some(_)) => {
                return Err(ApiError::AlreadyExists {
                    group: t.group.clone(),
                    resource: t.plural.clone(),
                    name: name.into(),
                });
            }
            (Change::Create(body), None) => (self.check_body(t, req.namespace, None, body)?, None),
            (Change::Replace(body), Some(_)) => {
                let precondition =
                    Some(object::resource_version(&body).to_string()).filter(|s| !s.is_empty());
                (checked(body)?, precondition)
            }
            (Change::Replace(body), None) => {
                if req.part == Part::Status || !object::resource_version(&body).is_empty() {
                    return Err(not_found(t, name));
                }
                (checked(body)?, None)
            }
            (Change::Patch(_, _), None) => return Err(not_found(t, name)),
            (Change::Patch(pt, body), Some(old)) => {
                let target = patched(t, name, old, pt, &body)?;
                let after_rv = object::resource_version(&target).to_string();
                let precondition = (after_rv != object::resource_version(old)).then_some(after_rv);
                (checked(target)?, precondition)
            }
        };
        if let (Some(old), Some(rv)) = (existing, &precondition)
            && rv != object::resource_version(old)
        {
            return Err(ApiError::stale(&t.group, &t.plural, name));
        }
        Ok(Resolved {
            object,
            managed_fields: None,
        })
    }

    /// Stage 1 for server-side apply: the merged object and the managed fields it leaves.
    fn resolve_apply(
        &self,
        req: &WriteRequest<'_>,
        name: &str,
        body: Value,
        force: bool,
        existing: Option<&Value>,
    ) -> ApiResult<Resolved> {
        let t = req.t;
        let names_type = |field: &str| {
            body.get(field)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if !(names_type("apiVersion") && names_type("kind")) {
            return Err(ApiError::BadRequest(
                "an apply configuration must set apiVersion and kind (server-side apply needs the full type)".into(),
            ));
        }
        let body = self.check_body(t, req.namespace, Some(name), body)?;
        // A resourceVersion in an apply configuration is an optimistic lock, as for an update.
        let expected = object::resource_version(&body);
        if let Some(old) = existing
            && !expected.is_empty()
            && expected != object::resource_version(old)
        {
            return Err(ApiError::stale(&t.group, &t.plural, name));
        }
        let live = existing.map(|o| at_version(o, t));
        let api_version = t.api_version();
        let apply_req = ApplyRequest {
            manager: &req.opts.field_manager,
            force,
            api_version: &api_version,
            subresource: (req.part == Part::Status).then_some("status"),
            time: &req.now,
        };
        let (object, managed_fields) = apply::apply(
            live.as_ref(),
            &body,
            &apply_req,
            (&t.group, &t.plural),
            name,
        )?;
        Ok(Resolved {
            object,
            managed_fields: Some(managed_fields),
        })
    }

    /// Stage 2: the object's name, given or generated from `generateName` on create.
    fn name_object(
        &self,
        tx: &WriteTx<'_>,
        req: &WriteRequest<'_>,
        object: &mut Value,
        existing: Option<&Value>,
    ) -> ApiResult<String> {
        let mut name = object::name(object).to_string();
        if name.is_empty() && existing.is_none() {
            let prefix = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !prefix.is_empty() {
                for _ in 0..8 {
                    let candidate = format!("{prefix}{}", self.ids.name_suffix());
                    if tx.get(&req.key(&candidate)).is_none() {
                        name = candidate;
                        break;
                    }
                }
                metadata_mut(object).insert("name".into(), json!(name));
            }
        }
        if name.is_empty() {
            return Err(ApiError::Invalid {
                group: req.t.group.clone(),
                kind: req.t.kind.clone(),
                name: String::new(),
                causes: vec![Cause::required("metadata.name")],
            });
        }
        Ok(name)
    }

    /// Stage 3: a namespaced object's namespace exists, and takes no new objects while it is
    /// being terminated.
    fn check_namespace(
        tx: &WriteTx<'_>,
        req: &WriteRequest<'_>,
        name: &str,
        existing: Option<&Value>,
    ) -> ApiResult<()> {
        if !req.t.namespaced() {
            return Ok(());
        }
        match tx.get(&namespace_key(req.namespace)) {
            None => Err(ApiError::NotFound {
                group: String::new(),
                resource: "namespaces".into(),
                name: req.namespace.into(),
            }),
            Some(ns) if existing.is_none() && object::is_deleting(&ns.value()) => {
                Err(ApiError::Forbidden(format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {} because it is being terminated",
                    req.t.plural, req.namespace
                )))
            }
            Some(_) => Ok(()),
        }
    }

    /// Stage 4: which parts of the body count depends on the endpoint — the main endpoint
    /// keeps the stored status, the status endpoint keeps everything else.
    fn split_status(
        req: &WriteRequest<'_>,
        object: &mut Value,
        existing: Option<&Value>,
        name: &str,
    ) -> ApiResult<()> {
        if !req.t.status_subresource {
            return Ok(());
        }
        match (req.part, existing) {
            (Part::Main, Some(old)) => set_or_remove(object, "status", old.get("status").cloned()),
            (Part::Main, None) => {
                if let Some(m) = object.as_object_mut() {
                    m.remove("status");
                }
            }
            (Part::Status, Some(old)) => {
                let status = object.get("status").cloned();
                *object = at_version(old, req.t);
                set_or_remove(object, "status", status);
            }
            (Part::Status, None) => return Err(not_found(req.t, name)),
        }
        Ok(())
    }

    /// Stage 5: fields the kind's schema does not know are dropped, and answered as
    /// `fieldValidation` asks (warnings, returned; or a 400 under `Strict`).
    fn prune_unknown_fields(req: &WriteRequest<'_>, object: &mut Value) -> ApiResult<Vec<String>> {
        let Some(schema) = &req.t.schema else {
            return Ok(Vec::new());
        };
        let unknown: Vec<String> = schema::prune(schema, object)
            .iter()
            .map(|u| format!("unknown field \"{}\"", u.trim_start_matches('.')))
            .collect();
        match req.opts.field_validation {
            FieldValidation::Strict if !unknown.is_empty() => Err(ApiError::BadRequest(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                unknown.join(", "),
                kind = req.t.kind,
                version = req.t.version,
            ))),
            FieldValidation::Warn => Ok(unknown),
            _ => Ok(Vec::new()),
        }
    }

    /// Stage 6: the object is valid for its kind (and a CRD for what it declares); an object
    /// being deleted takes no new finalizers.
    fn validate_object(
        req: &WriteRequest<'_>,
        object: &Value,
        existing: Option<&Value>,
        name: &str,
    ) -> ApiResult<()> {
        let mut causes = validation::validate(req.t, object, existing);
        if is_crd(req.t) {
            causes.extend(crd::validate(object));
        }
        if let Some(schema) = &req.t.schema {
            let structural = schema::validate(schema, object);
            // As kube-apiserver: the rules run on values of the schema's shape only.
            if structural.is_empty() {
                causes.extend(cel_rules::validate(schema, object, existing));
            }
            causes.extend(structural);
        }
        if let Some(old) = existing
            && object::is_deleting(old)
        {
            let before = object::finalizers(old);
            for f in object::finalizers(object) {
                if !before.contains(&f) {
                    causes.push(Cause::forbidden("metadata.finalizers", format!("no new finalizers can be added if the object is being deleted, found new finalizers [\"{f}\"]")));
                }
            }
        }
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::Invalid {
            group: req.t.group.clone(),
            kind: req.t.kind.clone(),
            name: name.to_string(),
            causes,
        })
    }

    /// Stage 7: the managedFields the write leaves: server-side apply's own, or an `Update`
    /// entry for the request's field manager.
    fn managed_fields(
        req: &WriteRequest<'_>,
        object: &Value,
        existing: Option<&Value>,
        applied: Option<Vec<Value>>,
    ) -> Vec<Value> {
        if let Some(applied) = applied {
            return applied;
        }
        let api_version = req.t.api_version();
        let fw = FieldWrite {
            manager: &req.opts.field_manager,
            operation: "Update",
            api_version: &api_version,
            subresource: (req.part == Part::Status).then_some("status"),
            time: &req.now,
        };
        let Some(old) = existing else {
            let fw = FieldWrite {
                subresource: None,
                ..fw
            };
            return managed_fields::record_update(None, object, &fw);
        };
        // A request that rewrites managedFields itself (kubectl's client-side to server-side
        // apply upgrade) sets the baseline the update is recorded on.
        let requested = object
            .pointer("/metadata/managedFields")
            .filter(|mf| Some(*mf) != old.pointer("/metadata/managedFields"))
            .cloned();
        let mut baseline = old.clone();
        if let Some(mf) = requested {
            baseline["metadata"]["managedFields"] = mf;
        }
        managed_fields::record_update(Some(&baseline), object, &fw)
    }

    /// Stage 8: store the object — or recognise a write that changes nothing, a dry run, or
    /// the removal of the last finalizer of an object being deleted (which deletes it).
    fn commit(
        &self,
        tx: &mut WriteTx<'_>,
        req: &WriteRequest<'_>,
        mut object: Value,
        existing: Option<&Value>,
        name: String,
        warnings: Vec<String>,
    ) -> ApiResult<Written> {
        let written = |object: Value, created: bool| Written {
            object,
            created,
            warnings: warnings.clone(),
        };
        if let Some(old) = existing
            && object::same_but_server_fields(old, &object)
            && managed_fields::without_times(old) == managed_fields::without_times(&object)
        {
            // A write that changes nothing keeps the resourceVersion (kubectl's "no change").
            return Ok(written(old.clone(), false));
        }
        if req.opts.dry_run {
            // Nothing is stored, so an update's would-be object keeps the live resourceVersion,
            // as a real apiserver's dry run does (kubectl diff then shows no resourceVersion
            // change); a dry-run create has none.
            if let Some(old) = existing {
                let rv = object::resource_version(old).to_string();
                metadata_mut(&mut object).insert("resourceVersion".into(), json!(rv));
            }
            return Ok(written(object, existing.is_none()));
        }
        let key = req.key(&name);
        if object::is_deleting(&object) && object::finalizers(&object).is_empty() {
            let last = tx
                .delete_as(&key, object)
                .ok_or_else(|| not_found(req.t, &name))?;
            self.after_delete(tx, req.t, &key);
            return Ok(written(last, false));
        }
        let stored = tx.put(key, object);
        Ok(written(stored, existing.is_none()))
    }

    /// Checks that a body is an object of this type for this place, and fills in namespace/name.
    fn check_body(
        &self,
        t: &ResourceType,
        namespace: &str,
        name: Option<&str>,
        mut body: Value,
    ) -> ApiResult<Value> {
        if !body.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of the request must be a JSON object of kind {}",
                t.kind
            )));
        }
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
        if !kind.is_empty() && kind != t.kind {
            return Err(ApiError::BadRequest(format!(
                "the kind of the provided object ({kind}) does not match the resource {} (expected {})",
                t.plural, t.kind
            )));
        }
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if !api_version.is_empty() && api_version != t.api_version() {
            return Err(ApiError::BadRequest(format!(
                "the apiVersion of the provided object ({api_version}) does not match the request ({})",
                t.api_version()
            )));
        }
        crate::decode::check_types(t, &body).map_err(ApiError::BadRequest)?;
        let meta = metadata_mut(&mut body);
        let body_ns = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if t.namespaced() {
            if !body_ns.is_empty() && body_ns != namespace {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        if let Some(name) = name {
            let body_name = meta.get("name").and_then(Value::as_str).unwrap_or("");
            if !body_name.is_empty() && body_name != name {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            meta.insert("name".into(), json!(name));
        }
        Ok(body)
    }

    /// Fills in the fields the server owns: kind, apiVersion, defaults (a built-in kind's,
    /// [`backflow_api::defaults::fill`]; a custom kind's schema's), uid, creationTimestamp, generation (for the types that
    /// have one, see [`ResourceType::tracks_generation`]).
    #[allow(clippy::too_many_arguments)]
    fn stamp(
        &self,
        _tx: &WriteTx<'_>,
        t: &ResourceType,
        new: &mut Value,
        old: Option<&Value>,
        namespace: &str,
        name: &str,
        now: &str,
    ) {
        let storage = self
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .storage_type(&t.group_resource())
            .map_or_else(|| t.api_version(), ResourceType::api_version);
        if let Some(stored) = crate::convert::to_stored(t, new, old) {
            *new = stored;
        }
        if let Some(m) = new.as_object_mut() {
            m.insert("apiVersion".into(), json!(storage));
            m.insert("kind".into(), json!(t.kind));
        }
        // kube-apiserver's defaults (a custom kind's from its schema), before the generation
        // compares specs: a body without them (a file from Git) is no change of an object
        // stored with them.
        match &t.schema {
            Some(schema) => backflow_api::defaults::fill_with_schema(schema, new),
            None if !t.custom => backflow_api::defaults::fill(new),
            None => {}
        }
        let generation = next_generation(old, new);
        let meta = metadata_mut(new);
        meta.insert("name".into(), json!(name));
        if t.namespaced() {
            meta.insert("namespace".into(), json!(namespace));
        }
        meta.remove("resourceVersion");
        meta.remove("selfLink");
        if let Some(old) = old {
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
            ] {
                match old.pointer(&format!("/metadata/{field}")) {
                    Some(v) => {
                        meta.insert(field.into(), v.clone());
                    }
                    None => {
                        meta.remove(field);
                    }
                }
            }
            if meta.get("managedFields").is_none()
                && let Some(mf) = old.pointer("/metadata/managedFields")
            {
                meta.insert("managedFields".into(), mf.clone());
            }
        } else {
            meta.insert("uid".into(), json!(self.ids.uid()));
            meta.insert("creationTimestamp".into(), json!(now));
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            meta.remove("managedFields");
        }
        if t.tracks_generation {
            meta.insert("generation".into(), json!(generation));
        } else {
            meta.remove("generation");
        }
    }

    /// Deletes one object: marks it when finalizers hold it, removes it otherwise.
    pub async fn delete(
        &self,
        t: &ResourceType,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Value> {
        let engine = self.clone();
        let t2 = t.clone();
        let key = Self::key(t, namespace, name);
        let name = name.to_string();
        let opts2 = opts.clone();
        let out = self
            .store
            .write(move |tx| {
                tx.act_as(opts2.user.clone());
                let existing = tx
                    .get(&key)
                    .ok_or_else(|| not_found(&t2, &name))?
                    .value();
                if let Some(uid) = &opts2.uid
                    && uid != object::uid(&existing)
                {
                    return Err(ApiError::Conflict {
                        group: t2.group.clone(),
                        resource: t2.plural.clone(),
                        name: name.clone(),
                        message: format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::uid(&existing)
                        ),
                    });
                }
                if let Some(rv) = &opts2.resource_version
                    && rv != object::resource_version(&existing)
                {
                    return Err(ApiError::Conflict {
                        group: t2.group.clone(),
                        resource: t2.plural.clone(),
                        name: name.clone(),
                        message: format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                            object::resource_version(&existing)
                        ),
                    });
                }
                engine.delete_in(tx, &t2, &key, &existing, opts2.dry_run)
            })
            .await?;
        if is_crd(t) && !opts.dry_run {
            self.refresh_custom_types();
        }
        Ok(at_version(&out, t))
    }

    fn delete_in(
        &self,
        tx: &mut WriteTx<'_>,
        t: &ResourceType,
        key: &ObjectKey,
        existing: &Value,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let now = rfc3339(self.clock.as_ref());
        let holds = !object::finalizers(existing).is_empty();
        let is_ns = is_namespace(t);
        if holds || is_ns {
            if object::is_deleting(existing) && !is_ns {
                return Ok(existing.clone());
            }
            let mut marked = existing.clone();
            if !object::is_deleting(existing) {
                let meta = metadata_mut(&mut marked);
                meta.insert("deletionTimestamp".into(), json!(now));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            if is_ns {
                marked["status"] = json!({"phase": "Terminating"});
            }
            if dry_run {
                return Ok(marked);
            }
            if is_ns {
                // Everything in the namespace goes first; the namespace follows once it is empty.
                self.empty_namespace(tx, &key.name, &now);
                if !holds && self.namespace_is_empty(tx, &key.name) {
                    return tx.delete(key).ok_or_else(|| not_found(t, &key.name));
                }
            }
            return Ok(tx.put(key.clone(), marked));
        }
        if dry_run {
            return Ok(existing.clone());
        }
        let last = tx.delete(key).ok_or_else(|| not_found(t, &key.name))?;
        self.after_delete(tx, t, key);
        Ok(last)
    }

    /// Cascades that follow an object's removal: a CRD takes its objects along; the last object
    /// of a terminating namespace takes the namespace along.
    fn after_delete(&self, tx: &mut WriteTx<'_>, t: &ResourceType, key: &ObjectKey) {
        reaggregate(tx, t);
        if is_crd(t) {
            let (group, plural) = match key.name.split_once('.') {
                Some((plural, group)) => (group.to_string(), plural.to_string()),
                None => return,
            };
            let gr = GroupResource::new(group, plural);
            for (k, _) in tx.list(&gr, None) {
                tx.delete(&k);
            }
        }
        if t.namespaced() {
            let ns_key = namespace_key(&key.namespace);
            if let Some(ns) = tx.get(&ns_key).map(|ns| ns.value())
                && object::is_deleting(&ns)
                && object::finalizers(&ns).is_empty()
                && self.namespace_is_empty(tx, &key.namespace)
            {
                tx.delete(&ns_key);
            }
        }
    }

    fn empty_namespace(&self, tx: &mut WriteTx<'_>, namespace: &str, now: &str) {
        for t in self.storage_types() {
            for (k, obj) in tx.list(&t.group_resource(), Some(namespace)) {
                let obj = obj.value();
                if object::finalizers(&obj).is_empty() {
                    tx.delete(&k);
                } else if !object::is_deleting(&obj) {
                    let mut marked = obj;
                    let meta = metadata_mut(&mut marked);
                    meta.insert("deletionTimestamp".into(), json!(now));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    tx.put(k, marked);
                }
            }
        }
    }

    fn namespace_is_empty(&self, tx: &WriteTx<'_>, namespace: &str) -> bool {
        self.storage_types()
            .iter()
            .all(|t| tx.list(&t.group_resource(), Some(namespace)).is_empty())
    }

    /// Deletes every object matching the list options; answers the list of what was deleted.
    pub async fn delete_collection(
        &self,
        t: &ResourceType,
        namespace: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> ApiResult<Value> {
        let engine = self.clone();
        let t2 = t.clone();
        let ns = if t.namespaced() {
            namespace.map(str::to_string)
        } else {
            None
        };
        let list = list.clone();
        let dry_run = opts.dry_run;
        let user = opts.user.clone();
        let items = self
            .store
            .write(move |tx| {
                tx.act_as(user);
                let mut out = Vec::new();
                for (k, v) in tx.list(&t2.group_resource(), ns.as_deref()) {
                    let v = v.value();
                    if list.labels.matches(&v) && list.fields.matches(&v) {
                        out.push(engine.delete_in(tx, &t2, &k, &v, dry_run)?);
                    }
                }
                Ok(out)
            })
            .await?;
        if is_crd(t) && !opts.dry_run {
            self.refresh_custom_types();
        }
        let rv = self.store.read(super::store::State::resource_version);
        let items: Vec<Value> = items.iter().map(|o| at_version(o, t)).collect();
        Ok(
            json!({"apiVersion": t.api_version(), "kind": t.list_kind, "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
        )
    }
}

fn set_or_remove(obj: &mut Value, field: &str, value: Option<Value>) {
    if let Some(m) = obj.as_object_mut() {
        match value {
            Some(v) => {
                m.insert(field.into(), v);
            }
            None => {
                m.remove(field);
            }
        }
    }
}

fn set_managed_fields(obj: &mut Value, mf: Vec<Value>) {
    let meta = metadata_mut(obj);
    if mf.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(mf));
    }
}

fn is_crd(t: &ResourceType) -> bool {
    t.behavior == KindBehavior::CustomResourceDefinition
}

fn is_secret(t: &ResourceType) -> bool {
    t.behavior == KindBehavior::Secret
}

fn is_namespace(t: &ResourceType) -> bool {
    t.behavior == KindBehavior::Namespace
}

/// Status that a controller would write, synthesized because no controller runs here.
/// The generation of `new`: its predecessor's, one more when the spec changed; 1 for a create.
fn next_generation(old: Option<&Value>, new: &Value) -> i64 {
    let Some(old) = old else {
        return 1;
    };
    let g = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if object::spec_part(old) == object::spec_part(new) {
        g
    } else {
        g + 1
    }
}

fn synthesize(t: &ResourceType, obj: &mut Value, _old: Option<&Value>) {
    match t.behavior {
        KindBehavior::Namespace => {
            if !object::is_deleting(obj) {
                obj["status"] = json!({"phase": "Active"});
            }
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
        }
        KindBehavior::CustomResourceDefinition => crd::complete(obj),
        KindBehavior::Deployment => {
            let replicas = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if obj.pointer("/spec/replicas").is_none()
                && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert("replicas".into(), json!(1));
            }
            let generation = obj
                .pointer("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            let since = obj
                .pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null);
            obj["status"] = json!({
                "observedGeneration": generation,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "message": "Deployment has minimum availability.", "lastUpdateTime": since, "lastTransitionTime": since},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                     "message": "ReplicaSet has successfully progressed.", "lastUpdateTime": since, "lastTransitionTime": since},
                ],
            });
        }
        KindBehavior::Plain | KindBehavior::Secret | KindBehavior::Review => {}
    }
}

/// After a `ClusterRole` changed, the aggregated ones take the rules they now select (what
/// kube-controller-manager's clusterrole-aggregation controller does), in the same write.
fn reaggregate(tx: &mut WriteTx<'_>, t: &ResourceType) {
    if !(t.group == "rbac.authorization.k8s.io" && t.plural == "clusterroles") {
        return;
    }
    let gr = t.group_resource();
    let listed = tx.list(&gr, None);
    // Parsing every ClusterRole at each ClusterRole write made many writes quadratic: only the
    // aggregating roles and those carrying a label key their selectors ask for are read.
    let mentions = |o: &crate::store::StoredObject, word: &str| {
        let needle = format!("\"{word}\"");
        o.json()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    };
    let aggregating: Vec<Value> = listed
        .iter()
        .filter(|(_, o)| mentions(o, "aggregationRule"))
        .map(|(_, o)| o.value())
        .collect();
    if aggregating.is_empty() {
        return;
    }
    let keys = crate::rbac::selected_keys(&aggregating);
    let roles: Vec<Value> = listed
        .iter()
        .filter(|(_, o)| {
            keys.as_ref().is_none_or(|keys| {
                mentions(o, "aggregationRule") || keys.iter().any(|k| mentions(o, k))
            })
        })
        .map(|(_, o)| o.value())
        .collect();
    for role in crate::rbac::aggregation_updates(&roles) {
        let key = ObjectKey::new(gr.clone(), "", object::name(&role));
        tx.put(key, role);
    }
}

/// The object as a client of `t`'s version sees it (CRDs serve every version from one storage
/// version with no conversion, like `conversion: None`).
#[must_use]
pub fn at_version(obj: &Value, t: &ResourceType) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(t.api_version()));
        m.insert("kind".into(), json!(t.kind));
    }
    crate::convert::to_served(o, t)
}

#[cfg(test)]
mod tests {
    use backflow_api::{ManualClock, SequentialIds};

    use super::*;

    async fn engine(ids: Arc<dyn IdSource>) -> (Engine, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("store.redb"), 100).expect("store");
        let clock = Arc::new(ManualClock::new(std::time::UNIX_EPOCH));
        (
            Engine::with_ids(store, clock, ids).await.expect("engine"),
            dir,
        )
    }

    /// An aggregating `ClusterRole` takes the rules of a role as soon as it carries the label
    /// its selector asks for, and drops them when the label goes (only the roles that could
    /// be picked are read at each write).
    #[tokio::test]
    async fn aggregation_follows_a_label_on_and_off() {
        let (engine, _dir) = engine(Arc::new(SequentialIds::default())).await;
        let t = engine
            .resource_type("rbac.authorization.k8s.io", "v1", "clusterroles")
            .expect("clusterroles");
        let opts = WriteOptions::default();
        let aggregated = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "team"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/to-team": "true"}}]}});
        engine
            .create(&t, "", aggregated, &opts)
            .await
            .expect("aggregated");
        let other = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "other", "labels": {"unrelated": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
        engine.create(&t, "", other, &opts).await.expect("other");
        let labelled = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "widgets", "labels": {"example.com/to-team": "true"}},
            "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]});
        let written = engine
            .create(&t, "", labelled, &opts)
            .await
            .expect("labelled");
        let rules = |engine: &Engine| engine.get(&t, "", "team").expect("team")["rules"].clone();
        assert_eq!(
            rules(&engine),
            json!([{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}])
        );
        let mut unlabelled = written.object.clone();
        unlabelled["metadata"]["labels"] = json!({});
        engine
            .update(&t, "", "widgets", Part::Main, unlabelled, &opts)
            .await
            .expect("unlabelled");
        assert_eq!(rules(&engine), json!([]));
    }

    #[tokio::test]
    async fn uids_and_generated_names_come_from_the_injected_source() {
        let run = || async {
            let (engine, _dir) = engine(Arc::new(SequentialIds::default())).await;
            let t = engine
                .resource_type("", "v1", "configmaps")
                .expect("configmaps");
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"generateName": "cache-"}, "data": {"a": "1"}});
            let written = engine
                .create(&t, "default", body, &WriteOptions::default())
                .await
                .expect("created");
            (
                object::name(&written.object).to_string(),
                written.object["metadata"]["uid"].clone(),
            )
        };
        let (first, again) = (run().await, run().await);
        assert_eq!(first, again, "the same source gives the same identifiers");
        assert!(first.0.starts_with("cache-") && first.0.len() == "cache-".len() + 5);
        assert!(
            first
                .1
                .as_str()
                .is_some_and(|u| u.starts_with("00000000-0000-4000-8000-")),
            "{first:?}"
        );
    }

    #[test]
    fn kinds_carry_their_behaviour() {
        let registry = Registry::builtin();
        let behavior = |g: &str, p: &str| {
            registry
                .all()
                .find(|t| t.group == g && t.plural == p)
                .map(|t| (t.behavior, t.tracks_generation))
                .expect("a built-in type")
        };
        assert_eq!(behavior("", "secrets"), (KindBehavior::Secret, false));
        assert_eq!(behavior("", "namespaces"), (KindBehavior::Namespace, false));
        assert_eq!(behavior("", "configmaps"), (KindBehavior::Plain, false));
        assert_eq!(behavior("", "services"), (KindBehavior::Plain, false));
        assert_eq!(behavior("batch", "jobs"), (KindBehavior::Plain, true));
        assert_eq!(
            behavior("apps", "deployments"),
            (KindBehavior::Deployment, true)
        );
        assert_eq!(
            behavior("apiextensions.k8s.io", "customresourcedefinitions"),
            (KindBehavior::CustomResourceDefinition, true)
        );
    }
}
