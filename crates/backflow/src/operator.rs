//! `backflow operator`: the mirror and the appliers against another Kubernetes API (a real
//! cluster). Replicas take turns through a Lease: one acts (branch workers, claims, the push
//! receiver), the others stand by, ready, and take over once it stops or its Lease expires.

use std::sync::Arc;

use backflow_api::SystemClock;
use backflow_leader::{ElectionConfig, Leadership, LeaseElector, LeaseName};
use backflow_mirror::{Mirror, MirrorOptions};
use backflow_server::Listener;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::health::Health;
use crate::{
    OperatorArgs, operator_receiver_tls, receiver, start_claims, stop_mirror, wait_for_signal,
};

/// Runs the operator until SIGTERM or Ctrl-C (or, when it loses the Lease, exits at once).
pub(crate) async fn run(args: OperatorArgs) -> Result<(), String> {
    if let Some(addr) = args.web_view_bind_address.filter(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "--web-view-bind-address {addr} is not a loopback address: the operator's web view has no authentication of its own; bind it to 127.0.0.1 and reach it with `kubectl port-forward`, which the cluster authenticates"
        ));
    }
    // One listener for the whole run: a signal that arrives while it starts acting is kept.
    let signal = stop_signal();
    let (client, act_as, api) = client_of(&args).await?;
    if args.install_crds {
        backflow_mirror::defaults::install_crds(&client)
            .await
            .map_err(|e| format!("cannot install the backflow.dev CRDs: {} (install them with the manifests and give --install-crds=false)", backflow_board::explain(&e)))?;
    }
    let (stop_election, election) = if args.leader_elect {
        let (stop, stopped) = watch::channel(false);
        (
            Some(stop),
            Some(start_election(&client, &args, stopped).await?),
        )
    } else {
        (None, None)
    };
    if election.is_some() {
        // A Pod whose container restarts keeps its labels: it stands by until it leads again.
        label_pod(&client, &args, false).await;
    }
    let health = Health::new(election.as_ref().map(|e| e.leadership.clone()));
    let health_listener = match args.metrics_bind_address {
        Some(addr) => Some(
            Listener::bind(addr, health.clone().router(), None)
                .await
                .map_err(|e| format!("metrics and probes (--metrics-bind-address): {e}"))?,
        ),
        None => None,
    };
    println!("backflow operator mirroring the API of {api}");
    if let Some(l) = &health_listener {
        println!("  probes:     http://{}/readyz, /healthz, /metrics", l.addr);
    }
    if let Some(e) = &election
        && !wait_to_lead(e.leadership.clone(), signal.clone()).await
    {
        // Stopped while standing by: nothing to flush, nothing held.
        leave(stop_election, election, health_listener).await;
        return Ok(());
    }
    let events = election.as_ref().map(|e| LeadershipEvents {
        recorder: backflow_board::EventRecorder::new(client.clone(), e.identity.clone()),
        lease: e.lease.clone(),
        identity: e.identity.clone(),
    });
    if let Some(events) = &events {
        events.note("became leader").await;
        label_pod(&client, &args, true).await;
    }
    let acted = act(
        &args,
        &client,
        act_as,
        &health,
        election.as_ref(),
        events.as_ref(),
        signal,
    )
    .await;
    // Released even when acting failed to start (then the label goes here too; a clean stop
    // removed it before flushing): a standby takes over at once.
    if acted.is_err() && election.is_some() {
        label_pod(&client, &args, false).await;
    }
    leave(stop_election, election, health_listener).await;
    acted
}

/// The label of the acting replica's Pod: the push receiver's Service selects it.
const LEADER_LABEL: &str = "backflow.dev/leader";

/// Labels this replica's Pod (`--pod-name`) as the acting one, or (`leading`: false) removes
/// the label; best effort, within two seconds.
async fn label_pod(client: &kube::Client, args: &OperatorArgs, leading: bool) {
    let Some(name) = &args.pod_name else {
        return;
    };
    let pods = Api::<Pod>::namespaced(client.clone(), &args.pod_namespace);
    let value = if leading {
        serde_json::json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch = serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let labelled = pods.patch(name, &params, &patch);
    match tokio::time::timeout(std::time::Duration::from_secs(2), labelled).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::warn!(pod = %name, error = %backflow_board::explain(&e), "cannot label this replica's Pod; the receiver's Service may reach a standby");
        }
        Err(_) => tracing::warn!(pod = %name, "labelling this replica's Pod timed out"),
    }
}

/// Turns true on SIGTERM or Ctrl-C.
fn stop_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tx.send_replace(true);
    });
    rx
}

/// Resolves once `signal` turned true.
async fn stopped(mut signal: watch::Receiver<bool>) {
    while !*signal.borrow_and_update() {
        if signal.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A running election.
struct Running {
    leadership: watch::Receiver<Leadership>,
    task: JoinHandle<()>,
    lease: LeaseName,
    identity: String,
}

/// Events on the Lease when this replica takes or loses it, as client-go records them
/// (`LeaderElection`, "<identity> became leader").
struct LeadershipEvents {
    recorder: std::sync::Arc<backflow_board::EventRecorder>,
    lease: LeaseName,
    identity: String,
}

impl LeadershipEvents {
    async fn note(&self, what: &str) {
        let note = backflow_board::Note {
            regarding: backflow_board::Regarding {
                api_version: "coordination.k8s.io/v1".into(),
                kind: "Lease".into(),
                namespace: Some(self.lease.namespace.clone()),
                name: self.lease.name.clone(),
            },
            kind: backflow_board::EventType::Normal,
            reason: "LeaderElection".into(),
            action: "Elect".into(),
            message: format!("{} {what}", self.identity),
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.recorder.write(note))
            .await;
    }
}

/// A client of the API to mirror, the clients acting as a claim's service account, and how it
/// was found (for the banner).
async fn client_of(
    args: &OperatorArgs,
) -> Result<(kube::Client, backflow_apply::act_as::ActAs, String), String> {
    let (config, found) = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|e| format!("kubeconfig {} is not usable: {e}", path.display()))?;
            (config, path.display().to_string())
        }
        None => (
            kube::Config::infer().await.map_err(|e| {
                format!("no API to mirror: give --kubeconfig, or run in a pod with a service account ({e})")
            })?,
            "this cluster (in-cluster configuration)".to_string(),
        ),
    };
    let act_as = backflow_apply::act_as::from_config(config.clone());
    let client =
        kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?;
    Ok((client, act_as, found))
}

/// Joins the election for the Lease the flags name, creating its namespace if missing.
async fn start_election(
    client: &kube::Client,
    args: &OperatorArgs,
    stop: watch::Receiver<bool>,
) -> Result<Running, String> {
    let namespace = &args.leader_election_namespace;
    let namespaces = Api::<Namespace>::all(client.clone());
    let wanted = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let exists = namespaces.get_opt(namespace).await.map_err(|e| {
        format!(
            "the leader election's namespace {namespace} cannot be read: {}",
            backflow_board::explain(&e)
        )
    })?;
    if exists.is_none() {
        match namespaces.create(&PostParams::default(), &wanted).await {
            Ok(_) => tracing::info!(%namespace, "created the leader election's namespace"),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => {
                return Err(format!(
                    "the leader election's namespace {namespace} cannot be created: {} (create it, or give --leader-election-namespace)",
                    backflow_board::explain(&e)
                ));
            }
        }
    }
    let host = backflow_mirror::host_name().unwrap_or_else(|| "backflow".into());
    let mut config = ElectionConfig::new(format!("{host}_{:016x}", rand::random::<u64>()));
    config.lease_duration = args.leader_elect_lease_duration;
    config.renew_deadline = args.leader_elect_renew_deadline;
    config.retry_period = args.leader_elect_retry_period;
    config.validate().map_err(|e| {
        format!("--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period: {e}")
    })?;
    let lease = LeaseName {
        namespace: namespace.clone(),
        name: args.leader_election_id.clone(),
    };
    tracing::info!(%lease, identity = %config.identity, "joining the leader election");
    let identity = config.identity.clone();
    let (leadership, task) = LeaseElector::new(client.clone(), lease.clone(), config).spawn(stop);
    Ok(Running {
        leadership,
        task,
        lease,
        identity,
    })
}

/// Waits until this replica leads; `false` when the process is asked to stop first.
async fn wait_to_lead(
    mut leadership: watch::Receiver<Leadership>,
    signal: watch::Receiver<bool>,
) -> bool {
    let lead = async {
        loop {
            if *leadership.borrow_and_update() == Leadership::Leading {
                return true;
            }
            if leadership.changed().await.is_err() {
                return false;
            }
        }
    };
    tokio::select! {
        led = lead => led,
        () = stopped(signal) => false,
    }
}

/// Acts — mirror, claims, receiver — until SIGTERM or Ctrl-C, then flushes and stops. Losing
/// the Lease ends the process at once: another replica may be acting already.
async fn act(
    args: &OperatorArgs,
    client: &kube::Client,
    act_as: backflow_apply::act_as::ActAs,
    health: &Health,
    election: Option<&Running>,
    events: Option<&LeadershipEvents>,
    signal: watch::Receiver<bool>,
) -> Result<(), String> {
    let owner = backflow_mirror::this_backflow(client, &args.data_dir)
        .await
        .map_err(|e| format!("cannot keep this backflow's instance id: {e}"))?;
    let options = MirrorOptions {
        data_dir: args.data_dir.join("git"),
        refresh_interval: args.sync.git_refresh_interval,
        identities: Vec::new(),
        shutdown_grace: args.sync.shutdown_grace,
        // A real cluster's watch does not say who wrote: commits name field managers.
        authors: None,
        owner: Some(owner),
    };
    let mirror = Mirror::start(client.clone(), options, Arc::new(SystemClock));
    // Acts only for claims a user names in a GitTarget: opt-in, as the seed says.
    let act_as =
        backflow_apply::act_as::ActingAs::new(act_as, args.sync.default_service_account.clone());
    let claims = start_claims(client.clone(), act_as, &mirror, Vec::new());
    let receiver = match args.receiver_bind_address {
        Some(addr) => Some(start_receiver(args, client, &mirror, addr).await?),
        None => None,
    };
    health.serve_metrics(mirror.metrics_renderer());
    let web_view = match args.web_view_bind_address {
        Some(addr) => Some(start_web_view(client, &mirror, addr).await?),
        None => None,
    };
    println!("  acting:     mirror and appliers started");
    if let Some(r) = &receiver {
        println!(
            "  receiver:   {} (push webhooks: kubectl get gitreceivers -A)",
            r.base_url()
        );
    }
    let lost = || async {
        match election {
            Some(e) => lost(e.leadership.clone()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = stopped(signal) => {}
        why = lost() => {
            label_pod(client, args, false).await;
            exit_lost(&why, events).await;
        }
    }
    // No longer the receiver's: deliveries go to the replica that takes over.
    if election.is_some() {
        label_pod(client, args, false).await;
    }
    let stop = async {
        if let Some(w) = web_view {
            w.shutdown().await;
        }
        if let Some(r) = receiver {
            r.shutdown().await;
        }
        stop_mirror(mirror, Some(claims), args.sync.shutdown_grace).await;
    };
    // Pushing what is pending only while it still leads.
    tokio::select! {
        () = stop => {}
        why = lost() => exit_lost(&why, events).await,
    }
    Ok(())
}

/// The push receiver on `addr`, with the certificate the flags give (plain HTTP beyond
/// loopback is warned about: TLS belongs in front of it then).
async fn start_receiver(
    args: &OperatorArgs,
    client: &kube::Client,
    mirror: &Mirror,
    addr: std::net::SocketAddr,
) -> Result<receiver::RunningReceiver, String> {
    let tls = operator_receiver_tls(args)?;
    if tls.is_none() && !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the push receiver speaks plain HTTP beyond loopback: terminate TLS in front of it (an Ingress), or give --receiver-tls-cert-file");
    }
    receiver::start(client.clone(), mirror, addr, tls.as_ref()).await
}

/// The web view and the face's endpoints on loopback `addr`, reading the cluster through
/// `client` and the branches `mirror` runs (a cluster has no record of writes: stories hold
/// commits, applies and Events).
async fn start_web_view(
    client: &kube::Client,
    mirror: &Mirror,
    addr: std::net::SocketAddr,
) -> Result<Listener, String> {
    let face = backflow_face::Face::new(client.clone(), mirror.branches(), None, Vec::new());
    let listener = Listener::bind(addr, backflow_face::router(face, true), None)
        .await
        .map_err(|e| format!("web view (--web-view-bind-address): {e}"))?;
    println!(
        "  web view:   http://{}/ui/ (kubectl port-forward to reach it; backflow history|why|diff --endpoint http://{})",
        listener.addr, listener.addr
    );
    Ok(listener)
}

/// Exits at once: another replica may be acting already. What was pending is published again
/// by the next leader's start-up resync.
async fn exit_lost(why: &str, events: Option<&LeadershipEvents>) -> ! {
    tracing::error!(%why, "lost the Lease: exiting at once, so another replica acts alone");
    if let Some(events) = events {
        events.note(&format!("stopped leading: {why}")).await;
    }
    eprintln!("error: lost the Lease ({why}); exiting");
    std::process::exit(1)
}

/// Resolves with why, once this leader no longer holds the Lease.
async fn lost(mut leadership: watch::Receiver<Leadership>) -> String {
    loop {
        match &*leadership.borrow_and_update() {
            Leadership::Lost(why) => return why.clone(),
            Leadership::Following { holder } => {
                return format!(
                    "{} holds it now",
                    holder.as_deref().unwrap_or("another replica")
                );
            }
            Leadership::Leading => {}
        }
        if leadership.changed().await.is_err() {
            return "the election stopped".into();
        }
    }
}

/// Releases the Lease (a standby takes over at once) and stops serving the probes.
async fn leave(
    stop: Option<watch::Sender<bool>>,
    election: Option<Running>,
    probes: Option<Listener>,
) {
    if let (Some(stop), Some(election)) = (stop, election) {
        stop.send_replace(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), election.task).await;
    }
    if let Some(probes) = probes {
        probes.shutdown().await;
    }
}
