//! What Git keeps of an object whose live state is an applier's write withheld from Git (the
//! applier wrote over a live edit made during its apply — a collision — and a Repair is to
//! apply the edit back), and how a list of the live side reads such an object: a list knows
//! nothing of the collision, and would otherwise publish the write over the edit.
//!
//! The mirror's streams and the simulator's world both list through [`as_git_keeps`].

use std::collections::BTreeMap;

/// An applier's write kept out of Git, and what Git keeps instead (`V`: the edit's value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldWrite<V> {
    /// The `resourceVersion` the write made (of its delete, for a prune): a list that shows
    /// another version shows a later write, which is what it is.
    pub version: u64,
    /// The edit's value, or `None` when the edit was a delete.
    pub kept: Option<V>,
}

/// How one listed object reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsKept<V> {
    /// As listed: nothing withheld, or written since.
    Listed,
    /// As the edit Git keeps (read against the claim's commits like any object: an edit a
    /// commit since holds was published, and what Git gained after it stands).
    Edit(V),
    /// Its edit was a delete: its document goes.
    Deleted,
}

/// A list read as Git keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedAsKept<K, V> {
    /// How each listed object reads, in the list's order.
    pub listed: Vec<AsKept<V>>,
    /// Edits an applier pruned: listed although the list lacks them.
    pub unlisted: Vec<(K, V)>,
}

/// Reads `listed` (each object's key and `resourceVersion`) against the withheld writes of its
/// scope (`kept`): an object whose live version is the withheld write reads as the edit Git
/// keeps (or as deleted, when the edit was a delete); an object written since (another
/// version) reads as listed; an edit the applier pruned is listed although the list lacks it.
#[must_use]
pub fn as_git_keeps<'a, K: Ord + 'a, V>(
    listed: impl IntoIterator<Item = (&'a K, u64)>,
    mut kept: BTreeMap<K, WithheldWrite<V>>,
) -> ListedAsKept<K, V> {
    let listed = listed
        .into_iter()
        .map(|(key, version)| {
            let withheld = kept.remove(key);
            // Version 0 is no version (an object never written): never a withheld write.
            match withheld.filter(|w| w.version == version && w.version != 0) {
                None => AsKept::Listed,
                Some(WithheldWrite { kept: None, .. }) => AsKept::Deleted,
                Some(WithheldWrite {
                    kept: Some(edit), ..
                }) => AsKept::Edit(edit),
            }
        })
        .collect();
    let unlisted = kept
        .into_iter()
        .filter_map(|(key, write)| write.kept.map(|edit| (key, edit)))
        .collect();
    ListedAsKept { listed, unlisted }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: u64, kept: Option<&'static str>) -> WithheldWrite<&'static str> {
        WithheldWrite { version, kept }
    }

    #[test]
    fn a_list_reads_withheld_writes_as_the_edits_git_keeps() {
        let kept = BTreeMap::from([
            ("a", at(7, Some("person"))),
            ("b", at(7, None)),
            ("c", at(5, Some("pruned edit"))),
            ("gone", at(5, None)),
            ("later", at(5, Some("older than what is listed"))),
            ("never", at(0, Some("no version"))),
        ]);
        let listed = [("a", 7), ("b", 7), ("x", 3), ("later", 9), ("never", 0)];
        let read = as_git_keeps(listed.iter().map(|(k, v)| (k, *v)), kept);
        assert_eq!(
            read.listed,
            [
                AsKept::Edit("person"),
                AsKept::Deleted,
                AsKept::Listed,
                AsKept::Listed,
                AsKept::Listed,
            ]
        );
        assert_eq!(read.unlisted, [("c", "pruned edit")]);
        let nothing = as_git_keeps([(&"a", 7)], BTreeMap::<_, WithheldWrite<()>>::new());
        assert_eq!(nothing.listed, [AsKept::Listed]);
        assert!(nothing.unlisted.is_empty());
    }
}
