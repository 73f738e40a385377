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
  .gittargetignore, .gitignore, .backflow-owner, licenses) may live here; any other file makes
  backflow refuse to write the folder until it is moved out.
- `.backflow-owner` names the backflow that writes this folder: any other one writes nothing
  here. Delete it in a commit to hand the folder to another backflow, once this one is stopped.
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
        // Asked once per object written: whether the file is there, not its content.
        if !tree.exists(&path)? {
            updates.push(PathUpdate::write(path, content));
        }
    }
    Ok(updates)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A tree that knows its files' ids and refuses to be read: asking whether the bootstrap
    /// files are there (once per object written) must not read them.
    struct IdsOnly(BTreeMap<String, String>);

    impl TreeView for IdsOnly {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
            panic!("{path} was read to learn whether it is there");
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
            Ok(self
                .0
                .keys()
                .filter(|p| p.starts_with(&format!("{dir}/")))
                .cloned()
                .collect())
        }
        fn file_id(&self, path: &str) -> Result<Option<String>, IoFailure> {
            Ok(self.0.get(path).cloned())
        }
    }

    #[test]
    fn only_the_missing_files_are_written_and_none_is_read() {
        let tree = IdsOnly(BTreeMap::from([(
            "live/README.md".to_string(),
            "a1".repeat(20),
        )]));
        let updates = missing(&tree, "live").expect("missing");
        let paths: Vec<&str> = updates.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(paths, ["live/.gittargetignore"]);
        assert_eq!(
            updates[0].content.as_deref(),
            Some(GITTARGETIGNORE.as_bytes())
        );
        let none = IdsOnly(BTreeMap::new());
        assert_eq!(missing(&none, "live").expect("missing").len(), 2);
    }
}
