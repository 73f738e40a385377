//! The `backflow` command: runs the embedded API server and prints client configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use backflow_server::{ServerConfig, serve};
use clap::{Args, Parser, Subcommand};

/// backflow keeps a live Kubernetes-style API and a Git branch in step, both ways.
#[derive(Debug, Parser)]
#[command(name = "backflow", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes-compatible API server (kubectl and any Kubernetes client work
    /// against it). With no flags it keeps its data in ./backflow-data and listens on
    /// 127.0.0.1:6443 over plain HTTP, which is only allowed on loopback.
    Serve(ServeArgs),
    /// Print the kubeconfig of a server's data directory (the same file `serve` writes there).
    Kubeconfig(KubeconfigArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Directory for the store, the kubeconfig, the token and generated certificates.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
    /// Address to listen on. Any non-loopback address turns on TLS (a certificate is generated
    /// into the data dir unless --tls-cert-file is given) and bearer-token authentication.
    #[arg(long, default_value = "127.0.0.1:6443", env = "BACKFLOW_LISTEN")]
    listen: SocketAddr,
    /// File holding the bearer token clients must send. Required of clients whenever given; on a
    /// non-loopback address without it, a token is generated into <data-dir>/token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Serving certificate chain (PEM), instead of a generated one; needs --tls-private-key-file.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert-file.
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// How many changes a watch can resume across; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 100_000)]
    watch_history: usize,
    /// How often idle watches that allow bookmarks receive one (e.g. 60s).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    bookmark_interval: Duration,
}

#[derive(Debug, Args)]
struct KubeconfigArgs {
    /// The server's data directory.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BACKFLOW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
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

async fn run_serve(args: ServeArgs) -> Result<(), String> {
    let mut config = ServerConfig::new(&args.data_dir);
    config.listen = args.listen;
    config.token_file = args.token_file;
    config.tls_cert_file = args.tls_cert_file;
    config.tls_key_file = args.tls_private_key_file;
    config.watch_history = args.watch_history;
    config.bookmark_interval = args.bookmark_interval;
    let server = serve::start(config).await.map_err(|e| e.to_string())?;
    let data_dir = std::fs::canonicalize(&args.data_dir).unwrap_or(args.data_dir);
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
    println!(
        "  try:        KUBECONFIG={} kubectl get namespaces",
        kubeconfig.display()
    );
    tracing::info!(addr = %server.addr, "serving");
    wait_for_signal().await;
    tracing::info!("stopping");
    server.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Kubeconfig(args) => {
            let path = serve::kubeconfig_path(&args.data_dir);
            match std::fs::read_to_string(&path) {
                Ok(s) => {
                    print!("{s}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "error: cannot read {}: {e}\nhint: `backflow serve --data-dir {}` writes it on start",
                        path.display(),
                        args.data_dir.display()
                    );
                    ExitCode::from(1)
                }
            }
        }
        Command::Serve(args) => {
            init_logging();
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
            match rt.block_on(run_serve(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
