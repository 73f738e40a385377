//! The data directory: readable by its owner only, and never silently started over.
//!
//! The store holds every object, Secrets included, so the directory is `0700` and the store
//! `0600`. A data dir that has history (the Git repository, the age key, a kubeconfig) but no
//! store, or an empty one, is a lost or truncated store, not a first start: serving an empty API
//! there would present data loss as a fresh install, so the server refuses to start unless told
//! to begin again (`initialize`).

use std::path::{Path, PathBuf};

use crate::serve::{ServerConfig, StartError};
use crate::store::Store;

/// Files only an earlier start leaves in a data dir.
const HISTORY: &[&str] = &["origin.git", "age.key", "kubeconfig", "store.key"];

/// The store file in `data_dir`.
fn store_path(data_dir: &Path) -> PathBuf {
    data_dir.join("store.redb")
}

/// Creates the data dir (owner only) and opens its store, refusing a missing or empty store
/// over history unless `config.initialize`.
pub(crate) fn open_store(config: &ServerConfig) -> Result<Store, StartError> {
    let dir = &config.data_dir;
    std::fs::create_dir_all(dir).map_err(|e| StartError::DataDir {
        path: dir.clone(),
        source: e,
    })?;
    restrict(dir, 0o700)?;
    let path = store_path(dir);
    let lost = std::fs::metadata(&path).map_or(true, |m| m.len() == 0);
    if lost && !config.initialize {
        let found: Vec<&str> = HISTORY
            .iter()
            .copied()
            .filter(|f| dir.join(f).exists())
            .collect();
        if !found.is_empty() {
            return Err(StartError::StoreMissing {
                path,
                history: found.join(", "),
            });
        }
    }
    let key = dir.join("store.key");
    let store = Store::open_sealed(&path, config.watch_history, Some(&key))?;
    store.events().set_byte_limit(config.watch_cache_bytes);
    restrict(&path, 0o600)?;
    Ok(store)
}

/// Sets `path`'s mode (on Unix; elsewhere the platform's defaults stand).
fn restrict(path: &Path, mode: u32) -> Result<(), StartError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| {
            StartError::DataDir {
                path: path.to_path_buf(),
                source: e,
            }
        })?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_store_over_history_is_refused_unless_initializing() {
        let dir = tempfile::tempdir().expect("temp dir");
        // A first start: nothing there yet; the directory and the store are the owner's only.
        let fresh = ServerConfig::new(dir.path().join("fresh"));
        let _store = open_store(&fresh).expect("first start");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode(&fresh.data_dir), 0o700);
            assert_eq!(mode(&store_path(&fresh.data_dir)), 0o600);
        }
        // An earlier start's key, and the store lost or truncated to nothing: refused, naming
        // what was found and the way out.
        let mut lost = ServerConfig::new(dir.path().join("lost"));
        std::fs::create_dir_all(&lost.data_dir).expect("mkdir");
        std::fs::write(lost.data_dir.join("age.key"), "key").expect("write");
        let err = open_store(&lost).expect_err("refused").to_string();
        assert!(
            err.contains("age.key") && err.contains("--initialize"),
            "{err}"
        );
        std::fs::write(store_path(&lost.data_dir), b"").expect("truncate");
        assert!(open_store(&lost).is_err(), "an empty store is a lost one");
        lost.initialize = true;
        let _store = open_store(&lost).expect("told to begin again");
    }
}
