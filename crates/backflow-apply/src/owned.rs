//! One owner per folder, on the Git → live side: an applier applies nothing from a folder whose
//! `.backflow-owner` file names another backflow (that one's live side is the folder's other
//! half; this one's mirror is refused there too).

use std::future::Future;
use std::pin::Pin;

use backflow_api::config::InventoryEntry;
use backflow_git::WorkerHandle;
use backflow_manifest::{FolderOwner, Ownership, normalize_target};

use crate::native::{Applier, ApplyReport, ApplyRequest};

/// An applier that first reads the owner file of each of its folders at the commit asked for:
/// when another backflow holds one, nothing is applied and the report says who holds it.
pub struct OwnedFolders {
    inner: std::sync::Arc<dyn Applier>,
    worker: WorkerHandle,
    folders: Vec<String>,
    me: FolderOwner,
}

impl OwnedFolders {
    /// `inner`, applying `folders` of the branch `worker` writes only while `me` holds them or
    /// nobody does.
    #[must_use]
    pub fn new(
        inner: std::sync::Arc<dyn Applier>,
        worker: WorkerHandle,
        folders: Vec<String>,
        me: FolderOwner,
    ) -> Self {
        Self {
            inner,
            worker,
            folders,
            me,
        }
    }

    /// Why `commit` must not be applied: the first folder another backflow holds. A folder that
    /// cannot be read is the inner applier's to report.
    async fn held_elsewhere(&self, commit: backflow_decision::CommitId) -> Option<String> {
        for folder in &self.folders {
            let Ok(folder) = normalize_target(folder) else {
                continue;
            };
            let path = FolderOwner::path(&folder);
            let Ok(Ok(files)) = self.worker.read_folder(commit, path.clone()).await else {
                continue;
            };
            let content = files
                .into_iter()
                .find(|f| f.path == path)
                .map(|f| f.content);
            if let Ownership::Other(holder) = self.me.judge(content.as_deref()) {
                return Some(FolderOwner::refusal(&folder, &holder).to_string());
            }
        }
        None
    }
}

impl Applier for OwnedFolders {
    fn apply(
        &self,
        request: ApplyRequest,
    ) -> Pin<Box<dyn Future<Output = ApplyReport> + Send + '_>> {
        Box::pin(async move {
            match self.held_elsewhere(request.commit).await {
                Some(why) => {
                    tracing::warn!(commit = %request.commit, "{why}");
                    ApplyReport {
                        failures: vec![why],
                        inventory: request.inventory,
                        ..ApplyReport::default()
                    }
                }
                None => self.inner.apply(request).await,
            }
        })
    }

    fn hold(&self) -> Pin<Box<dyn Future<Output = Result<Option<bool>, String>> + Send + '_>> {
        self.inner.hold()
    }

    fn release(
        &self,
        suspended: bool,
        inventory: Vec<InventoryEntry>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        self.inner.release(suspended, inventory)
    }
}
