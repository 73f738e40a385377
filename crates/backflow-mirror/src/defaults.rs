//! The configuration `backflow serve` creates when started without any: everything the API
//! holds, mirrored into one folder of one branch, Secrets SOPS-encrypted to the server's own
//! age key.

use backflow_api::config::{
    AgeEncryption, ApplierClaimReference, ClusterTargetReference, ClusterWatchRule,
    ClusterWatchRuleSpec, Encryption, FirstContact, GitProvider, GitProviderSpec, GitReceiver,
    GitReceiverSpec, GitTarget, GitTargetSpec, LocalReference, NativeClaim, NativeClaimSpec,
    PushPolicy, ReceiverType, ResourceRule, SecretReference, WatchRule, WatchRuleSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// The namespace the default configuration lives in.
pub const NAMESPACE: &str = "backflow-system";
/// The name of every default object.
pub const NAME: &str = "default";
/// The field manager of the default configuration; flags re-apply it on every start.
pub const FIELD_MANAGER: &str = "backflow-serve";

/// The default mirror's settings (from `serve`'s flags).
#[derive(Debug, Clone)]
pub struct DefaultSetup {
    /// Repository URL.
    pub url: String,
    /// Branch.
    pub branch: String,
    /// Folder.
    pub path: String,
    /// Commit window (`1s`, `0s`).
    pub commit_window: String,
    /// age recipients Secrets are encrypted to (`spec.encryption.age.recipients`); with none,
    /// the default `GitTarget` gets no encryption and Secrets are not mirrored.
    pub recipients: Vec<String>,
    /// The webhook secret of the default `GitReceiver` (generic-hmac, its Secret
    /// [`RECEIVER_SECRET`]); none: no default receiver.
    pub receiver_token: Option<String>,
    /// Coordinate the default folder with the `NativeClaim` `backflow-system/default`: a commit
    /// somebody else pushes is applied to the API (after a flush).
    pub apply: bool,
    /// The default claim's `spec.firstContact`.
    pub first_contact: FirstContact,
}

/// The Secret holding the default `GitReceiver`'s token.
pub const RECEIVER_SECRET: &str = "default-receiver";

async fn apply<K, P>(api: Api<K>, name: &str, obj: &P) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    P: serde::Serialize + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map(|_| ())
}

/// Applies the backflow.dev CRDs (server-side apply, so a newer backflow updates them), as
/// `backflow serve` and `backflow operator` do on start.
pub async fn install_crds(client: &Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in backflow_api::config::crds() {
        let name = crd
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        api.patch(
            &name,
            &PatchParams::apply("backflow").force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
    Ok(())
}

/// Applies the default `GitProvider`, `GitTarget`, `WatchRule` (every namespace),
/// `ClusterWatchRule` (cluster-scoped types), with `apply` the `NativeClaim` the target names,
/// and with a token the `GitReceiver`. Objects a user changed keep their other fields; the flags' fields are
/// set again.
pub async fn ensure(client: &Client, setup: &DefaultSetup) -> Result<(), kube::Error> {
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.patch(
        NAMESPACE,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
    )
    .await?;
    let provider = default_provider(setup);
    apply::<GitProvider, _>(Api::namespaced(client.clone(), NAMESPACE), NAME, &provider).await?;
    if setup.apply {
        let spec = NativeClaimSpec {
            first_contact: setup.first_contact,
            ..NativeClaimSpec::default()
        };
        let claim = NativeClaim::new(NAME, spec);
        apply::<NativeClaim, _>(Api::namespaced(client.clone(), NAMESPACE), NAME, &claim).await?;
    }
    apply::<GitTarget, _>(
        Api::namespaced(client.clone(), NAMESPACE),
        NAME,
        &default_target(setup)?,
    )
    .await?;
    apply_watch_rules(client).await?;
    if let Some(token) = &setup.receiver_token {
        ensure_receiver(client, token).await?;
    }
    Ok(())
}

/// The default `GitTarget`, as applied: the flags' branch, folder, claim and recipients.
fn default_target(setup: &DefaultSetup) -> Result<serde_json::Value, kube::Error> {
    let target = GitTarget::new(
        NAME,
        GitTargetSpec {
            provider_ref: LocalReference { name: NAME.into() },
            branch: setup.branch.clone(),
            path: setup.path.clone(),
            applier_claim_ref: setup.apply.then(|| ApplierClaimReference {
                kind: "NativeClaim".into(),
                name: NAME.into(),
            }),
            encryption: (!setup.recipients.is_empty()).then(|| Encryption {
                age: Some(AgeEncryption {
                    recipients: setup.recipients.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    // The typed spec always serializes `prune` (its default is `OnEvent`); applied with force,
    // it would take the prune mode back from whoever set it on every start. The flags do not set
    // it, so it is left out of the applied configuration.
    let mut target = serde_json::to_value(&target).map_err(kube::Error::SerdeError)?;
    if let Some(spec) = target
        .get_mut("spec")
        .and_then(serde_json::Value::as_object_mut)
    {
        spec.remove("prune");
    }
    Ok(target)
}

/// The `WatchRule` and `ClusterWatchRule` of the default target: every type.
async fn apply_watch_rules(client: &Client) -> Result<(), kube::Error> {
    let everything = ResourceRule {
        resources: vec!["*".into()],
        source_namespace: Some("*".into()),
        ..Default::default()
    };
    let rule = WatchRule::new(
        NAME,
        WatchRuleSpec {
            target_ref: LocalReference { name: NAME.into() },
            rules: vec![everything],
        },
    );
    apply::<WatchRule, _>(Api::namespaced(client.clone(), NAMESPACE), NAME, &rule).await?;
    let cluster = ClusterWatchRule::new(
        NAME,
        ClusterWatchRuleSpec {
            target_ref: ClusterTargetReference {
                name: NAME.into(),
                namespace: NAMESPACE.into(),
            },
            rules: vec![ResourceRule {
                resources: vec!["*".into()],
                ..Default::default()
            }],
        },
    );
    apply::<ClusterWatchRule, _>(Api::all(client.clone()), NAME, &cluster).await
}

/// The default `GitProvider`: the flags' repository and commit window.
fn default_provider(setup: &DefaultSetup) -> GitProvider {
    GitProvider::new(
        NAME,
        GitProviderSpec {
            url: setup.url.clone(),
            push: Some(PushPolicy {
                commit_window: Some(setup.commit_window.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

/// The default `GitReceiver` (generic-hmac) and its Secret, which `serve`'s repository hook
/// signs its push notices for.
async fn ensure_receiver(client: &Client, token: &str) -> Result<(), kube::Error> {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": RECEIVER_SECRET, "namespace": NAMESPACE},
        "type": "Opaque",
        "stringData": {"token": token},
    });
    apply::<Secret, _>(
        Api::namespaced(client.clone(), NAMESPACE),
        RECEIVER_SECRET,
        &secret,
    )
    .await?;
    let receiver = GitReceiver::new(
        NAME,
        GitReceiverSpec {
            type_: ReceiverType::GenericHmac,
            secret_ref: SecretReference {
                name: RECEIVER_SECRET.into(),
            },
            suspend: false,
        },
    );
    apply::<GitReceiver, _>(Api::namespaced(client.clone(), NAMESPACE), NAME, &receiver).await
}
