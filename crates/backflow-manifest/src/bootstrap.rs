//! Files a target folder gets with its first write: a README saying who writes the folder, and
//! an ignore file that ignores nothing.
//!
//! Each is written only when missing: a person may edit them, and backflow never overwrites or
//! deletes them.

use backflow_branch::{IoFailure, PathUpdate, TreeView};

use crate::layout::join;

/// The README placed in a target folder.
pub const README: &str = "\
# This folder is written by backflow

backflow mirrors Kubernetes objects from a live API into this folder, one document per object,
and keeps it in step: a change made through the API lands here as a commit within seconds.

- To change an object, change it through the API (kubectl, the UI), or edit its file here and push:
  comments, key order and other documents in a file are kept when backflow edits it, but a field
  that the live object does not have is removed on its next change.
- New objects are written to `{namespace or _cluster}/{group}/{resource}/{name}.yaml`; an object
  you moved to another file here is edited where it is.
- Only manifests and companion files (README.md, kustomization.yaml, .sops.yaml,
  .gittargetignore, .gitignore, licenses) may live here; any other file makes backflow refuse
  to write the folder until it is moved out.
- Removing or changing this file and .gittargetignore is fine; they are never rewritten.
";

/// The ignore file placed in a target folder. Fully commented: it ignores nothing.
pub const GITTARGETIGNORE: &str = "\
# Files backflow must never read in this folder, in .gitignore syntax.
#
# This folder belongs to backflow: every other file in it is either a manifest it keeps in step
# or a companion file (Markdown, LICENSE/COPYING/NOTICE, .gitignore, .gitattributes, .gitkeep),
# which are accepted without being listed here.
#
# Never ignore a path backflow writes (such as *.yaml): an object whose file is ignored could
# not be edited or removed.
";

/// The bootstrap files missing from `target` (normalized), as path updates.
pub fn missing(tree: &dyn TreeView, target: &str) -> Result<Vec<PathUpdate>, IoFailure> {
    let mut updates = Vec::new();
    for (name, content) in [("README.md", README), (".gittargetignore", GITTARGETIGNORE)] {
        let path = join(target, name);
        if tree.read(&path)?.is_none() {
            updates.push(PathUpdate::write(path, content));
        }
    }
    Ok(updates)
}
