//! Which API a CLI verb reads: `--kubeconfig` (or `$KUBECONFIG`), else the kubeconfig a
//! `backflow serve` wrote into `--data-dir`, else the usual (`~/.kube/config`, in-cluster).

use std::path::PathBuf;

use clap::Args;
use kube::Client;

/// Where the API is.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// Kubeconfig of the API to read; without it, the kubeconfig `serve` wrote into
    /// --data-dir when there is one, else the usual (~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The data directory of a `serve` whose kubeconfig to use.
    #[arg(long, default_value = "./backflow-data", env = "BACKFLOW_DATA_DIR")]
    data_dir: PathBuf,
}

impl ClientArgs {
    /// A client of the API these arguments name.
    pub(crate) async fn client(&self) -> Result<Client, String> {
        let served = self.data_dir.join("kubeconfig");
        let path = self
            .kubeconfig
            .clone()
            .or_else(|| served.exists().then_some(served));
        let config = match path {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(&path)
                    .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
                kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| format!("kubeconfig {} is not usable: {e}", path.display()))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                format!(
                    "no API to read: give --kubeconfig, or --data-dir of a running `backflow serve` ({e})"
                )
            })?,
        };
        Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
    }
}

/// A runtime for one verb, on this thread.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))
}
