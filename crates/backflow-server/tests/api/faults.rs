//! Bad luck on the disk: a full file system refuses writes without losing an acknowledged one,
//! `/readyz` says so, and the store takes writes again as soon as there is room, with no restart.

use std::path::{Path, PathBuf};
use std::process::Command;

use backflow_server::{ServerConfig, start};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::common::{client_from_kubeconfig, guard};

/// A small tmpfs mounted for the test, unmounted when dropped: a file system that really fills.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a {megabytes} MiB tmpfs needs root (the fault tests run as root in CI): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn configmap(name: &str, bytes: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"payload": "x".repeat(bytes)},
    }))
    .expect("configmap")
}

/// Fills `disk` with a file until the file system says no more; returns the file.
fn fill(disk: &Path) -> PathBuf {
    use std::io::Write as _;
    let filler = disk.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    filler
}

async fn readyz(base: &str) -> (u16, String) {
    let out = tokio::process::Command::new("curl")
        .args([
            "-sk",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            &format!("{base}/readyz"),
        ])
        .output()
        .await
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[tokio::test]
async fn a_full_disk_refuses_writes_then_heals_without_a_restart() {
    let disk = SmallDisk::mount(16);
    let mut config = ServerConfig::new(disk.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    let server = start(config).await.expect("start");
    let base = server.access.server_url.clone();
    let client = client_from_kubeconfig(&server.kubeconfig_path).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    guard(
        "a first write",
        api.create(&PostParams::default(), &configmap("before", 10)),
    )
    .await
    .expect("a write while there is room");
    assert_eq!(readyz(&base).await.0, 200);

    let filler = fill(disk.path());
    let mut refused = None;
    let mut acknowledged = vec!["before".to_string()];
    for i in 0..64 {
        let name = format!("full-{i}");
        match guard(
            "a write on a full disk",
            api.create(&PostParams::default(), &configmap(&name, 64 * 1024)),
        )
        .await
        {
            Ok(_) => acknowledged.push(name),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let refused = refused.expect("a full disk refuses a write");
    assert!(
        refused.to_string().contains("No space left on device"),
        "the error names the cause: {refused}"
    );
    let (code, body) = readyz(&base).await;
    assert_eq!(code, 503, "readyz says the store cannot write: {body}");
    assert!(body.contains("store"), "{body}");

    // Room again: the next write is taken, with no restart.
    std::fs::remove_file(filler).expect("free the disk");
    guard("a write after the disk has room", async {
        loop {
            if api
                .create(&PostParams::default(), &configmap("after", 10))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(readyz(&base).await.0, 200, "ready again");
    acknowledged.push("after".into());

    // Everything acknowledged is there, in memory and after a restart.
    let listed = |items: Vec<ConfigMap>| {
        let mut names: Vec<String> = items.into_iter().filter_map(|c| c.metadata.name).collect();
        names.sort();
        names
    };
    acknowledged.sort();
    let live = guard("list", api.list(&ListParams::default()))
        .await
        .expect("list");
    assert_eq!(listed(live.items), acknowledged);
    guard("shutdown", server.shutdown()).await;
    let mut config = ServerConfig::new(disk.path().join("data"));
    config.listen = "127.0.0.1:0".parse().expect("address");
    let server = start(config).await.expect("restart");
    let client = client_from_kubeconfig(&server.kubeconfig_path).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let stored = guard("list", api.list(&ListParams::default()))
        .await
        .expect("list");
    assert_eq!(listed(stored.items), acknowledged);
    guard("shutdown", server.shutdown()).await;
}
