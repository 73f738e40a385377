//! Change notices for level-triggered loops: a watch of a kind that only says "something
//! changed", so a loop that reads the whole state anyway wakes at once instead of polling.

use std::time::Duration;

/// Sends `()` on `tx` for every change a watch of `api` sees (dropped when `tx` is full: a
/// level-triggered loop needs one tick, not every event), retrying a failed watch every second.
/// Runs until the watch ends.
pub async fn watch_changes<K>(api: kube::Api<K>, tx: tokio::sync::mpsc::Sender<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt as _;
    let mut events =
        kube::runtime::watcher::watcher(api, kube::runtime::watcher::Config::default()).boxed();
    while let Some(e) = events.next().await {
        if e.is_ok() {
            let _ = tx.try_send(());
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
