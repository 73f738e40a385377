//! The `backflow` command: runs the embedded API server with its mirror, or the mirror alone
//! against another Kubernetes API, and prints client configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use backflow_api::config::FirstContact;
use backflow_api::{Clock, SystemClock};
use backflow_apply::claims::{ApplyMetrics, Claims};
use backflow_mirror::defaults::DefaultSetup;
use backflow_mirror::{Mirror, MirrorOptions};
use backflow_server::{RunningServer, ServerConfig};
use clap::{Args, Parser, Subcommand};

mod connect;
mod face;
mod flags;
mod health;
mod operator;
mod output;
mod receiver;
mod status;

use flags::{
    parse_authorization_mode, parse_bind_address, parse_bytes, parse_first_contact, parse_interval,
    parse_window,
};

/// backflow keeps a live Kubernetes-style API and a Git branch in step, both ways.
#[derive(Debug, Parser)]
#[command(name = "backflow", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written to stderr: `text` (coloured only on a terminal) or `json`
    /// (one object per line, for a log collector).
    #[arg(long, global = true, default_value = "text", env = "BACKFLOW_LOG_FORMAT", value_parser = output::parse_log_format)]
    log_format: output::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes-compatible API server (kubectl and any Kubernetes client work
    /// against it) and mirror every change into Git. With no flags it keeps its data in
    /// ./backflow-data, listens on 127.0.0.1:6443 over plain HTTP (only allowed on loopback),
    /// and commits into the bare repository ./backflow-data/origin.git, branch main, folder live.
    Serve(Box<ServeArgs>),
    /// Print the kubeconfig of a server's data directory (the same file `serve` writes there).
    Kubeconfig(KubeconfigArgs),
    /// Run the mirror against another Kubernetes API (a real cluster): installs the backflow.dev
    /// CRDs there if missing, then mirrors what its `GitTargets` and `WatchRules` select.
    Operator(Box<OperatorArgs>),
    /// Print the `CustomResourceDefinitions` of the configuration kinds, for `kubectl apply -f -`:
    /// one JSON List, or (`-o yaml`) one YAML document each, as the install's `crds.yaml`.
    Crds(CrdsArgs),
    /// Show every target, branch and claim, and what needs a person (exit code 1).
    ///
    /// What needs a person: conditions that are not fine, an apply that failed or is
    /// unresolved, a held prune, refused changes, unreadable files, plaintext secrets. Exit
    /// code 0: all fine; 1: something needs a person; 2: the API could not be read.
    ///
    /// Examples: `backflow status` (beside a `backflow serve`: its ./backflow-data/kubeconfig),
    /// `backflow status --kubeconfig ~/.kube/config -n team-a`, `backflow status -o json`.
    Status(status::StatusArgs),
    /// Show an object's story both ways, newest first: its live writes (who, when), the
    /// commits that carried them, commits others pushed that changed it (author), the applies
    /// that wrote those, and what backflow repaired, kept or refused.
    ///
    /// Examples: `backflow history configmap/demo`, `backflow history deploy/web -n shop`,
    /// `backflow history cm/demo -o json`. Exit code 0: answered; 2: not (the object, the API
    /// or Git could not be read).
    History(face::ObjectArgs),
    /// Show the last writer of each field of a live object and how the value got there: a
    /// live edit (and the commit that carried it to Git) or a push (and the apply that wrote
    /// it).
    ///
    /// Examples: `backflow why configmap/demo`, `backflow why deployments.apps/web -n shop`.
    Why(face::ObjectArgs),
    /// Show what differs between the live side and each folder at its branch tip, as unified
    /// diffs of the sanitized YAML (nothing, at rest). Secrets' values are never shown, only
    /// whether they differ.
    ///
    /// Examples: `backflow diff`, `backflow diff backflow-system/default`, `backflow diff -o
    /// json`. Exit code 0: nothing differs; 1: something does; 2: it could not be read.
    Diff(face::DiffArgs),
    /// Post a signed push notice to a receiver for every ref a `post-receive` hook's input
    /// names (what the hook `serve` installs in its repository runs). Never fails.
    #[command(hide = true)]
    PushNotice(PushNoticeArgs),
}

#[derive(Debug, Args)]
struct CrdsArgs {
    /// `json` (one List) or `yaml` (one document per CRD).
    #[arg(short, long, default_value = "json", value_parser = ["json", "yaml"])]
    output: String,
}

#[derive(Debug, Args)]
struct PushNoticeArgs {
    /// The receiver URL with the webhook path (http:// only).
    #[arg(long)]
    url: String,
    /// The file holding the receiver's token.
    #[arg(long)]
    token_file: PathBuf,
    /// The repository URL the notice names.
    #[arg(long)]
    repository: String,
}

/// The flags of the push receiver and the periodic refresh, shared by `serve` and `operator`.
#[derive(Debug, Args)]
struct SyncArgs {
    /// How often a branch worker reads its remote when no push webhook told it the branch
    /// moved; a `GitProvider`'s spec.refreshInterval overrides it.
    #[arg(long, default_value = "10m", value_parser = parse_interval)]
    git_refresh_interval: Duration,
    /// How long a stop (SIGTERM, Ctrl-C) keeps trying to push pending writes before it exits
    /// anyway; what stayed unpushed is logged, and the next start's resync publishes it.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// The service account, in each claim's namespace, a `NativeClaim` without
    /// spec.serviceAccountName applies as (as Flux's kustomize-controller flag of that name):
    /// a push may then change only what that account's RBAC allows. Without it, such claims
    /// apply with backflow's own rights.
    #[arg(long, value_parser = flags::parse_service_account)]
    default_service_account: Option<String>,
}

#[allow(
    clippy::struct_excessive_bools,
    reason = "independent command-line switches, as the flags read"
)]
#[derive(Debug, Args)]
struct ServeArgs {
    /// Directory for the store, the kubeconfig, the token, generated certificates, the default
    /// repository and the Git caches.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
    /// Address to listen on. Any non-loopback address turns on TLS (a certificate is generated
    /// into the data dir unless --tls-cert-file is given) and bearer-token authentication.
    #[arg(long, default_value = "127.0.0.1:6443", env = "BACKFLOW_LISTEN", value_parser = parse_bind_address)]
    listen: SocketAddr,
    /// Serve the web view (`/ui/`, read-only, behind the API's authentication) on a
    /// non-loopback --listen too; on loopback it is always served.
    #[arg(long)]
    web_view: bool,
    /// File holding the bearer token clients must send. Required of clients whenever given (and
    /// then TLS is on: kubectl sends tokens only over TLS); on a non-loopback address without
    /// it, a token is generated into <data-dir>/token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Users and their tokens, in kube-apiserver's token file format: one `token,user,uid`
    /// line per user, optionally with `,"group1,group2"`. Turns authentication and TLS on (also
    /// on loopback; the kubeconfig keeps the server's own token, user `admin`), and each user's
    /// changes are committed under their name.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// How authenticated requests are authorized: `RBAC` (Roles, `ClusterRoles` and their
    /// bindings, as on a cluster; the server's own admin is in system:masters and may do
    /// everything) or `AlwaysAllow` (every authenticated user may do everything). Applies
    /// whenever the server authenticates (a token or certificate); on loopback without tokens
    /// there is no one to tell apart.
    #[arg(long, default_value = "RBAC", value_parser = parse_authorization_mode)]
    authorization_mode: backflow_server::AuthorizationMode,
    /// An audit policy (audit.k8s.io/v1 Policy, as kube-apiserver's): which requests are
    /// recorded in the audit log and how much (`None`, `Metadata`, `Request`, `RequestResponse`).
    /// Needs --audit-log-path.
    #[arg(long, requires = "audit_log_path")]
    audit_policy_file: Option<PathBuf>,
    /// The audit log: one audit.k8s.io/v1 Event per line, a write's event naming the commit
    /// that carried it (annotation backflow.dev/commit). Needs --audit-policy-file.
    #[arg(long, requires = "audit_policy_file")]
    audit_log_path: Option<PathBuf>,
    /// Rotate the audit log once it reaches this many megabytes (0: never).
    #[arg(long, default_value_t = 100)]
    audit_log_maxsize: u64,
    /// How many rotated audit logs to keep (0: all).
    #[arg(long, default_value_t = 10)]
    audit_log_maxbackup: usize,
    /// Serving certificate chain (PEM), instead of a generated one; needs --tls-private-key-file.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// How many changes a watch can resume across; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 100_000)]
    watch_history: usize,
    /// About how many bytes of objects that history may hold (`128Mi`, `1Gi`, or bytes); the
    /// oldest changes go first, whichever bound is reached.
    #[arg(long, default_value = "128Mi", value_parser = parse_bytes)]
    watch_cache_bytes: usize,
    /// How often idle watches that allow bookmarks receive one (e.g. 60s).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    bookmark_interval: Duration,
    /// Start with an empty API although the data dir holds an earlier start's files
    /// (origin.git, age.key, kubeconfig) but no store.redb: without it, a lost store is refused
    /// rather than served as a fresh install. The mirror then resyncs Git from the empty API.
    #[arg(long)]
    initialize: bool,
    /// Repository the default mirror writes to (file://, https://, ssh://); default: a bare
    /// repository created at <data-dir>/origin.git. Applied as `GitProvider`
    /// backflow-system/default on every start.
    #[arg(long, env = "BACKFLOW_REPO")]
    repo: Option<String>,
    /// Branch of the default mirror (`GitTarget` backflow-system/default).
    #[arg(long, default_value = "main")]
    branch: String,
    /// Folder of the default mirror inside the repository ("." for the root).
    #[arg(long, default_value = "live")]
    path: String,
    /// Commit window of the default mirror: the silence that closes a commit ("0s" = one commit
    /// per change).
    #[arg(long, default_value = "1s", value_parser = parse_window)]
    commit_window: String,
    /// Serve the API only: install no configuration and mirror nothing.
    #[arg(long)]
    no_mirror: bool,
    /// Address of the push receiver (`GitReceiver` webhooks, and the notices of the default
    /// repository's post-receive hook). Beyond loopback it speaks TLS with the API's
    /// certificate.
    #[arg(
        long,
        default_value = "127.0.0.1:9292",
        env = "BACKFLOW_RECEIVER_BIND_ADDRESS",
        value_parser = parse_bind_address
    )]
    receiver_bind_address: SocketAddr,
    /// Run no push receiver: foreign pushes are seen at the periodic refresh or at the next
    /// rejected push.
    #[arg(long)]
    no_receiver: bool,
    /// Mirror one way only: do not coordinate the default folder with the `NativeClaim`
    /// backflow-system/default (by default, commits others push to the branch are applied to
    /// the API after every pending API edit is flushed into them), and let no applier claim act.
    #[arg(long)]
    no_apply: bool,
    /// When the default claim first meets its branch (no operation recorded yet) and both
    /// sides hold an object with different content: `live-wins` publishes the live object
    /// over the file (capture a cluster), `git-wins` applies the file over the live object
    /// (restore from Git). What only one side holds goes to the other either way.
    #[arg(long, default_value = "live-wins", value_parser = parse_first_contact)]
    first_contact: FirstContact,
    #[command(flatten)]
    sync: SyncArgs,
}

#[derive(Debug, Args)]
struct KubeconfigArgs {
    /// The server's data directory.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
    /// Issue a client certificate for this user, signed by the server's CA, and print a
    /// kubeconfig that uses it (the server must speak TLS: a non-loopback --listen, or
    /// --token-file / --token-auth-file). Commits name the user as the author of their changes.
    #[arg(long)]
    user: Option<String>,
    /// A group the --user is in (the certificate's organization); repeatable.
    #[arg(long, requires = "user")]
    group: Vec<String>,
}

#[derive(Debug, Args)]
struct OperatorArgs {
    /// Kubeconfig of the API to mirror (its current context is used); without it, the
    /// in-cluster configuration of the pod's service account (or ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Install (server-side apply) the backflow.dev CRDs at start. `false` where they are
    /// installed with the manifests, so the operator needs no write access to CRDs.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    install_crds: bool,
    /// Directory for the Git caches of the branch workers.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
    /// Address of the push receiver (`GitReceiver` webhooks), e.g. :9292; off unless given.
    /// Plain HTTP unless --receiver-tls-cert-file is given: expose it through an Ingress that
    /// terminates TLS (deliveries are authenticated by their signatures either way).
    #[arg(long, env = "BACKFLOW_RECEIVER_BIND_ADDRESS", value_parser = parse_bind_address)]
    receiver_bind_address: Option<SocketAddr>,
    /// Certificate chain (PEM) the receiver presents; needs --receiver-tls-private-key-file.
    #[arg(long, requires = "receiver_tls_private_key_file")]
    receiver_tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --receiver-tls-cert-file.
    #[arg(long, requires = "receiver_tls_cert_file")]
    receiver_tls_private_key_file: Option<PathBuf>,
    /// Serve /metrics, /healthz and /readyz on this address (`:8080` in a cluster, where the
    /// kubelet probes the pod); off unless given.
    #[arg(long, env = "BACKFLOW_METRICS_BIND_ADDRESS", value_parser = parse_bind_address)]
    metrics_bind_address: Option<SocketAddr>,
    /// Serve the web view (`/ui/`) and what `backflow history|why|diff --endpoint` ask on this
    /// loopback address (`127.0.0.1:8081`), reached with `kubectl port-forward`, which the
    /// cluster authenticates and authorizes (`pods/portforward`); off unless given.
    #[arg(long, env = "BACKFLOW_WEB_VIEW_BIND_ADDRESS", value_parser = parse_bind_address)]
    web_view_bind_address: Option<SocketAddr>,
    /// Act only while holding the Lease --leader-election-namespace/--leader-election-id, so
    /// replicas take turns: one acts, the others stand by (ready) and take over once it stops
    /// or its Lease expires. `false`: act at once, as the only replica.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "BACKFLOW_LEADER_ELECT")]
    leader_elect: bool,
    /// Namespace of the leader election's Lease (created if missing).
    #[arg(long, default_value = "backflow-system")]
    leader_election_namespace: String,
    /// Name of the leader election's Lease.
    #[arg(long, default_value = "backflow-operator")]
    leader_election_id: String,
    /// How long a replica that stopped renewing keeps the Lease.
    #[arg(long, default_value = "15s", value_parser = parse_interval)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps acting without renewing the Lease (less than the lease
    /// duration).
    #[arg(long, default_value = "10s", value_parser = parse_interval)]
    leader_elect_renew_deadline: Duration,
    /// How often a standby tries for the Lease and the leader renews it.
    #[arg(long, default_value = "2s", value_parser = parse_interval)]
    leader_elect_retry_period: Duration,
    /// This replica's Pod (the Deployment passes it from the downward API): the acting replica
    /// labels it `backflow.dev/leader=true`, so a Service that selects that label (the push
    /// receiver's) reaches the replica that acts, never a standby.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    /// The namespace of --pod-name.
    #[arg(long, env = "POD_NAMESPACE", default_value = "backflow-system")]
    pod_namespace: String,
    #[command(flatten)]
    sync: SyncArgs,
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::terminate(),
        ) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// The server's own age identity, `<data-dir>/age.key` (age key-file format, mode 0600),
/// generated on first start. Returns the file, its public recipient and the identities in it.
///
/// Secrets of the default `GitTarget` are encrypted to it, and handing the identities to the mirror
/// lets a restart keep the data keys of existing files (no re-encryption, no commit).
fn age_key(
    data_dir: &std::path::Path,
) -> Result<(PathBuf, String, Vec<backflow_sops::Identity>), String> {
    let path = data_dir.join("age.key");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(data_dir)
                .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
            let (secret, recipient) = backflow_sops::generate_identity(&mut rand::rng());
            let created = humantime::format_rfc3339_seconds(SystemClock.now());
            let text = format!(
                "# created: {created}\n# public key: {recipient}\n{}\n",
                secret.as_str()
            );
            write_private(&path, &text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            text
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let identities =
        backflow_sops::parse_identities(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(first) = identities.first() else {
        return Err(format!(
            "{} holds no age identity; remove it to generate a new one",
            path.display()
        ));
    };
    Ok((path, first.recipient().to_string(), identities))
}

/// Writes a new file readable by its owner only (the key must never be world-readable, not even
/// for a moment, so the mode is set at creation).
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// The default repository: a bare repository in the data dir, created on first start.
fn default_repository(data_dir: &std::path::Path, branch: &str) -> Result<String, String> {
    let origin = data_dir.join("origin.git");
    backflow_git::LocalRepo::init_remote(&origin, branch)
        .map_err(|e| format!("cannot create {}: {e}", origin.display()))?;
    let abs = std::fs::canonicalize(&origin).unwrap_or(origin);
    Ok(format!("file://{}", abs.display()))
}

async fn run_serve(args: ServeArgs) -> Result<(), String> {
    let mut config = ServerConfig::new(&args.data_dir);
    config.listen = args.listen;
    config.token_file = args.token_file.clone();
    config.token_auth_file = args.token_auth_file.clone();
    config.authorization = args.authorization_mode;
    config.audit_policy_file = args.audit_policy_file.clone();
    config.audit_log =
        args.audit_log_path
            .clone()
            .map(|path| backflow_server::audit::LogSettings {
                path,
                max_bytes: args.audit_log_maxsize * 1024 * 1024,
                max_backups: args.audit_log_maxbackup,
            });
    config.tls_cert_file = args.tls_cert_file.clone();
    config.tls_key_file = args.tls_private_key_file.clone();
    config.watch_history = args.watch_history;
    config.watch_cache_bytes = args.watch_cache_bytes;
    config.bookmark_interval = args.bookmark_interval;
    config.initialize = args.initialize;
    let server = backflow_server::start(config)
        .await
        .map_err(|e| e.to_string())?;
    let mirror = if args.no_mirror {
        None
    } else {
        Some(start_default_mirror(&args, &server).await?)
    };
    let receiver = match &mirror {
        Some(m) if !args.no_receiver => Some(start_serve_receiver(&args, &server, m).await?),
        _ => None,
    };
    print_banner(&args, &server, mirror.as_ref(), receiver.as_ref());
    tracing::info!(addr = %server.addr, "serving");
    wait_for_signal().await;
    tracing::info!("stopping");
    if let Some(receiver) = receiver {
        receiver.shutdown().await;
    }
    if let Some(running) = mirror {
        // Pending writes are pushed before the API goes away, within the grace.
        stop_mirror(running.mirror, running.claims, args.sync.shutdown_grace).await;
    }
    server.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// The mirror `serve` runs by default, and what its banner says about it.
struct DefaultMirror {
    mirror: Mirror,
    /// The applier claims, unless `--no-apply`.
    claims: Option<Claims>,
    url: String,
    key_path: PathBuf,
    recipient: String,
    /// The default receiver's token and its file, unless `--no-receiver`.
    receiver_token: Option<(PathBuf, String)>,
}

/// The applier claims of the API `client` talks to, acting on `mirror`'s branches.
fn start_claims(
    client: kube::Client,
    act_as: backflow_apply::act_as::ActingAs,
    mirror: &Mirror,
    identities: Vec<backflow_sops::Identity>,
) -> Claims {
    let metrics = mirror.register_metrics(ApplyMetrics::register);
    Claims::start(
        client,
        act_as,
        mirror.branches(),
        identities,
        metrics,
        Arc::new(SystemClock),
    )
}

/// `serve`'s push receiver: TLS beyond loopback (the API's certificate, or one generated), and
/// the post-receive hook of the default repository, which posts to it.
async fn start_serve_receiver(
    args: &ServeArgs,
    server: &RunningServer,
    mirror: &DefaultMirror,
) -> Result<receiver::RunningReceiver, String> {
    let addr = args.receiver_bind_address;
    let tls = if addr.ip().is_loopback() {
        None
    } else if let Some(tls) = &server.tls {
        Some(tls.clone())
    } else {
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        if !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
        Some(
            backflow_server::generate_certificate(&args.data_dir.join("tls"), &hosts)
                .map_err(|e| format!("push receiver TLS: {e}"))?,
        )
    };
    let client = kube::Client::new(server.internal_router.clone(), "default");
    let running = receiver::start(client, &mirror.mirror, addr, tls.as_ref()).await?;
    if let (None, Some((token_file, token))) = (&args.repo, &mirror.receiver_token) {
        if running.is_plain() {
            let origin = args.data_dir.join("origin.git");
            let origin = std::fs::canonicalize(&origin).unwrap_or(origin);
            receiver::install_hook(&origin, &mirror.url, &running.base_url(), token, token_file)?;
        } else {
            tracing::warn!(
                "the receiver speaks TLS, which the repository hook does not: pushes to origin.git are seen at the periodic refresh"
            );
        }
    }
    Ok(running)
}

/// Installs the CRDs and the default configuration into the embedded API and starts the mirror
/// on it, answering `X-Backflow-Wait` and serving its metrics through the server.
async fn start_default_mirror(
    args: &ServeArgs,
    server: &RunningServer,
) -> Result<DefaultMirror, String> {
    let client = kube::Client::new(server.internal_router.clone(), "default");
    let url = match &args.repo {
        Some(url) => url.clone(),
        None => default_repository(&args.data_dir, &args.branch)?,
    };
    backflow_mirror::defaults::install_crds(&client)
        .await
        .map_err(|e| {
            format!(
                "cannot install the backflow.dev CRDs: {}",
                backflow_board::explain(&e)
            )
        })?;
    let (key_path, recipient, identities) = age_key(&args.data_dir)?;
    let receiver_token = if args.no_receiver {
        None
    } else {
        Some(receiver::receiver_token(&args.data_dir)?)
    };
    let setup = DefaultSetup {
        url: url.clone(),
        branch: args.branch.clone(),
        path: args.path.clone(),
        commit_window: args.commit_window.clone(),
        recipients: vec![recipient.clone()],
        receiver_token: receiver_token.as_ref().map(|(_, t)| t.clone()),
        apply: !args.no_apply,
        first_contact: args.first_contact,
    };
    backflow_mirror::defaults::ensure(&client, &setup)
        .await
        .map_err(|e| {
            format!(
                "cannot apply the default configuration: {}",
                backflow_board::explain(&e)
            )
        })?;
    let owner = backflow_mirror::this_backflow(&client, &args.data_dir)
        .await
        .map_err(|e| format!("cannot keep this backflow's instance id: {e}"))?;
    let mirror = Mirror::start(
        client.clone(),
        MirrorOptions {
            data_dir: args.data_dir.join("git"),
            refresh_interval: args.sync.git_refresh_interval,
            identities: identities.clone(),
            shutdown_grace: args.sync.shutdown_grace,
            authors: Some(server.engine.store().authors().clone()),
            owner: Some(owner),
        },
        Arc::new(SystemClock),
    );
    let act_as = backflow_apply::act_as::ActingAs::new(
        backflow_apply::act_as::through_router(server.internal_router.clone()),
        args.sync.default_service_account.clone(),
    );
    let identities_for_face = identities.clone();
    let claims = (!args.no_apply).then(|| start_claims(client, act_as, &mirror, identities));
    let _ = server.extensions.waiter.set(Arc::new(mirror.waiter()));
    let _ = server.extensions.metrics.set(mirror.metrics_renderer());
    install_face(args, server, &mirror, identities_for_face);
    let key_path = std::fs::canonicalize(&key_path).unwrap_or(key_path);
    Ok(DefaultMirror {
        mirror,
        claims,
        url,
        key_path,
        recipient,
        receiver_token,
    })
}

/// What people see (`backflow history`, `why`, `diff`; the web view on loopback or with
/// `--web-view`), served by the API behind its authentication.
fn install_face(
    args: &ServeArgs,
    server: &RunningServer,
    mirror: &Mirror,
    identities: Vec<backflow_sops::Identity>,
) {
    let face = backflow_face::Face::new(
        kube::Client::new(server.internal_router.clone(), "default"),
        mirror.branches(),
        Some(server.engine.store().authors().clone()),
        identities,
    );
    let web = web_view_served(args.listen, args.web_view);
    let _ = server.extensions.face.set(backflow_face::router(face, web));
}

/// Whether `serve` serves the web view: always on loopback, beyond it only when `--web-view`
/// says so.
fn web_view_served(listen: SocketAddr, flag: bool) -> bool {
    listen.ip().is_loopback() || flag
}

/// Where the API, the data and the kubeconfig are, and what the mirror does.
fn print_banner(
    args: &ServeArgs,
    server: &RunningServer,
    mirror: Option<&DefaultMirror>,
    receiver: Option<&receiver::RunningReceiver>,
) {
    let data_dir = std::fs::canonicalize(&args.data_dir).unwrap_or(args.data_dir.clone());
    let kubeconfig =
        std::fs::canonicalize(&server.kubeconfig_path).unwrap_or(server.kubeconfig_path.clone());
    println!(
        "backflow API server listening on {}",
        server.access.server_url
    );
    println!("  data:       {}", data_dir.display());
    println!("  kubeconfig: {}", kubeconfig.display());
    if server.access.token.is_some() {
        println!("  auth:       bearer token required (it is in the kubeconfig)");
    }
    match mirror {
        Some(m) => {
            println!(
                "  mirror:     every namespace -> {}, branch {}, folder {} (GitTarget backflow-system/default)",
                m.url, args.branch, args.path
            );
            println!("  secrets:    SOPS-encrypted to {}", m.recipient);
            if m.claims.is_some() {
                println!(
                    "  apply:      commits pushed to the branch by others are applied to the API (NativeClaim backflow-system/default; --no-apply turns it off)"
                );
            }
            println!(
                "  age key:    {} (SOPS_AGE_KEY_FILE for `sops -d`; keep it private)",
                m.key_path.display()
            );
        }
        None => println!("  mirror:     off (--no-mirror)"),
    }
    if let Some(r) = receiver {
        println!(
            "  receiver:   {} (push webhooks: kubectl get gitreceivers -A; pushes to origin.git are noticed at once)",
            r.base_url()
        );
    }
    println!(
        "  try:        KUBECONFIG={} kubectl get namespaces",
        kubeconfig.display()
    );
}

/// Stops the claims and the mirror, pushing what is pending for at most `grace` (each worker
/// gives up after it; this bounds a push stuck in the network too).
async fn stop_mirror(mirror: Mirror, claims: Option<Claims>, grace: Duration) {
    let stop = async {
        if let Some(claims) = claims {
            claims.shutdown().await;
        }
        mirror.shutdown().await;
    };
    if tokio::time::timeout(grace + Duration::from_secs(2), stop)
        .await
        .is_err()
    {
        tracing::error!(
            grace_s = grace.as_secs(),
            "stopping anyway: writes may be unpushed; the next start's resync publishes them"
        );
    }
}

/// The operator receiver's certificate, if given.
fn operator_receiver_tls(
    args: &OperatorArgs,
) -> Result<Option<backflow_server::TlsMaterial>, String> {
    match (
        &args.receiver_tls_cert_file,
        &args.receiver_tls_private_key_file,
    ) {
        (Some(cert), Some(key)) => Ok(Some(backflow_server::TlsMaterial {
            client_ca_pem: None,
            cert_file: cert.clone(),
            key_file: key.clone(),
            ca_pem: std::fs::read_to_string(cert)
                .map_err(|e| format!("cannot read {}: {e}", cert.display()))?,
        })),
        _ => Ok(None),
    }
}

fn run(
    log_format: output::LogFormat,
    future: impl std::future::Future<Output = Result<(), String>>,
) -> ExitCode {
    output::init_logging(log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The server's kubeconfig, or one for `--user` with a client certificate issued now.
fn kubeconfig(args: &KubeconfigArgs) -> Result<String, String> {
    let path = backflow_server::kubeconfig_path(&args.data_dir);
    let own = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {}: {e}\nhint: `backflow serve --data-dir {}` writes it on start",
            path.display(),
            args.data_dir.display()
        )
    })?;
    let Some(user) = &args.user else {
        return Ok(own);
    };
    if user.trim().is_empty() {
        return Err("--user must name a user".into());
    }
    let server = own
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap_or_default();
    if !server.starts_with("https://") {
        return Err(format!(
            "the server at {server} speaks plain HTTP, where no client certificate is presented: start it with --token-auth-file, --token-file or a non-loopback --listen, which turn TLS on"
        ));
    }
    let tls = args.data_dir.join("tls");
    let ca_file = tls.join("ca.crt");
    let ca = std::fs::read_to_string(&ca_file)
        .map_err(|e| format!("cannot read the server's CA {}: {e}", ca_file.display()))?;
    let cert = backflow_server::issue_client_certificate(&tls, user, &args.group)
        .map_err(|e| e.to_string())?;
    Ok(backflow_server::render_for_certificate(
        server, &ca, user, &cert,
    ))
}

/// A size-class allocator: the store and the mirror keep hundreds of thousands of small texts
/// for long beside request-sized temporaries, which leave the system allocator's arenas full
/// of holes (the store-scale bench holding a million objects: 2055 MiB with it, 1903 with
/// this). Its arenas are committed on demand (`.cargo/config.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Kubeconfig(args) => match kubeconfig(&args) {
            Ok(text) => output::print_out(&text),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Crds(args) => match output::crds(&args.output) {
            Ok(text) => output::print_out(&text),
            Err(e) => {
                eprintln!("error: cannot render the CRDs: {e}");
                ExitCode::from(1)
            }
        },
        Command::Operator(args) => run(cli.log_format, operator::run(*args)),
        Command::PushNotice(args) => {
            receiver::push_notice(&args.url, &args.token_file, &args.repository);
            ExitCode::SUCCESS
        }
        Command::Serve(args) => run(cli.log_format, run_serve(*args)),
        Command::Status(args) => status::run(&args),
        Command::History(args) => face::run_object(face::Verb::History, &args),
        Command::Why(args) => face::run_object(face::Verb::Why, &args),
        Command::Diff(args) => face::run_diff(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_web_view_is_served_on_loopback_and_beyond_it_only_when_asked() {
        let at = |a: &str| a.parse::<SocketAddr>().expect("an address");
        assert!(web_view_served(at("127.0.0.1:6443"), false));
        assert!(web_view_served(at("[::1]:6443"), false));
        assert!(!web_view_served(at("0.0.0.0:6443"), false));
        assert!(!web_view_served(at("10.1.2.3:6443"), false));
        assert!(web_view_served(at("0.0.0.0:6443"), true));
    }
}
