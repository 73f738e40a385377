//! Who this backflow is, as the owner files of the folders it writes name it.

use std::path::Path;

use backflow_manifest::FolderOwner;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};

/// This machine's host name (a Pod's name in a cluster), when the system says it.
#[must_use]
pub fn host_name() -> Option<String> {
    hostname::get().ok().and_then(|h| h.into_string().ok())
}

/// The file in the data dir holding this backflow's instance id when the live side's
/// `kube-system` Namespace cannot be read.
const INSTANCE_FILE: &str = "instance-id";

/// This backflow: the uid of the live side's `kube-system` Namespace (what every replica of one
/// cluster's backflow shares, and a `serve` keeps in its data dir), or, when that cannot be
/// read, an id kept in `data_dir`.
///
/// # Errors
/// When neither the Namespace nor the data dir's file can be read or the file written.
pub async fn this_backflow(client: &Client, data_dir: &Path) -> std::io::Result<FolderOwner> {
    let host = host_name().unwrap_or_default();
    let namespaces = Api::<Namespace>::all(client.clone());
    let uid = match namespaces.get("kube-system").await {
        Ok(ns) => ns.metadata.uid,
        Err(e) => {
            tracing::warn!(error = %e, "the kube-system Namespace cannot be read: this backflow names itself in folders by an id kept in its data dir");
            None
        }
    };
    let instance = match uid {
        Some(uid) => uid,
        None => kept_instance(data_dir)?,
    };
    Ok(FolderOwner { instance, host })
}

/// The instance id kept in `data_dir`, made on first use.
fn kept_instance(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join(INSTANCE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(data_dir)?;
    let id = format!("local-{:032x}", rand::random::<u128>());
    std::fs::write(&path, format!("{id}\n"))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_instance_is_made_once_and_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = kept_instance(dir.path()).expect("made");
        assert!(first.starts_with("local-"), "{first}");
        assert_eq!(kept_instance(dir.path()).expect("read"), first);
        let other = tempfile::tempdir().expect("temp dir");
        assert_ne!(kept_instance(other.path()).expect("made"), first);
    }
}
