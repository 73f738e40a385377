//! What a push may not do to the live side: the blast-radius rules of backflow's own applier.
//!
//! Anyone who can push to the branch drives the live side, so two things never follow Git:
//! - **backflow's own configuration and the system namespaces** ([`protection`]): its kinds
//!   (`backflow.dev`), their CRDs, everything in `backflow-system` (the receiver's Secret among
//!   them) and the Namespaces `default`, `kube-system`, `kube-public`, `kube-node-lease`,
//!   `backflow-system`. They are mirrored into Git for the record and change only through the
//!   API: a push changing them is refused for those objects, and they are never pruned. A
//!   pusher therefore cannot add an encryption recipient, a provider, a receiver or a claim.
//! - **a mass prune** ([`PruneGuard`]): an apply that would delete more than a share of what the
//!   claim applied (default a quarter, once more than [`PRUNE_FLOOR`] objects), or all of it
//!   (when that is more than one object), is
//!   held — everything else of the commit is applied — until a person confirms that commit
//!   with the annotation [`CONFIRM_PRUNE`] on the claim, or a later commit brings the files
//!   back. Argo CD's `Prune=confirm` sync option asks the same of each pruned resource.

use std::fmt;

use backflow_decision::CommitId;
use backflow_manifest::Identity;

/// The annotation on a `NativeClaim` that confirms a held prune: its value names the commit
/// (full id, or a prefix of at least seven characters).
pub const CONFIRM_PRUNE: &str = "backflow.dev/confirm-prune";

/// The namespace backflow's own objects live in.
pub const SYSTEM_NAMESPACE: &str = "backflow-system";

/// Namespaces whose Namespace object a push never rewrites or removes.
const SYSTEM_NAMESPACES: [&str; 5] = [
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    SYSTEM_NAMESPACE,
];

/// Prunes of at most this many objects are never held for their share (all of the claim's
/// objects still are): a small folder losing a file is ordinary work.
pub const PRUNE_FLOOR: usize = 5;

/// Why an object is out of a push's reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// One of backflow's kinds, or their CRD.
    Configuration,
    /// An object in `backflow-system`.
    SystemObject,
    /// A system Namespace.
    SystemNamespace,
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Configuration => "backflow's own configuration",
            Self::SystemObject => "in backflow's own namespace",
            Self::SystemNamespace => "a system namespace",
        })
    }
}

/// Whether a push may not write or prune `identity` (applied in `namespace`), and why.
#[must_use]
pub fn protection(identity: &Identity, namespace: &str) -> Option<Protection> {
    let group = identity.group.as_str();
    let kind = identity.kind.as_str();
    if group == "backflow.dev" || group.ends_with(".backflow.dev") {
        return Some(Protection::Configuration);
    }
    if group == "apiextensions.k8s.io"
        && kind == "CustomResourceDefinition"
        && identity.name.ends_with(".backflow.dev")
    {
        return Some(Protection::Configuration);
    }
    if group.is_empty()
        && kind == "Namespace"
        && SYSTEM_NAMESPACES.contains(&identity.name.as_str())
    {
        return Some(Protection::SystemNamespace);
    }
    (namespace == SYSTEM_NAMESPACE).then_some(Protection::SystemObject)
}

/// When a prune is held for a person to confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneGuard {
    /// The share of the claim's objects (percent) one apply may prune without a confirmation,
    /// once more than [`PRUNE_FLOOR`] objects; 100 holds only a prune of everything.
    pub max_percent: u8,
}

impl Default for PruneGuard {
    fn default() -> Self {
        Self { max_percent: 25 }
    }
}

impl PruneGuard {
    /// The guard of a claim's `spec.pruneLimitPercent` (the default when unset).
    #[must_use]
    pub fn with_limit(percent: Option<u8>) -> Self {
        percent.map_or_else(Self::default, |max_percent| Self { max_percent })
    }

    /// Whether deleting `pruning` of the `owned` objects the claim applied must wait for a
    /// confirmation.
    #[must_use]
    pub fn holds(self, pruning: usize, owned: usize) -> bool {
        // One object is no mass prune.
        if pruning <= 1 {
            return false;
        }
        if pruning >= owned {
            return true;
        }
        pruning > PRUNE_FLOOR && pruning * 100 > usize::from(self.max_percent) * owned
    }
}

/// A prune held back, as the claim reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneHold {
    /// The commit whose apply would have pruned.
    pub commit: CommitId,
    /// How many objects it would delete.
    pub pruning: usize,
    /// Of how many the claim applied.
    pub owned: usize,
}

impl PruneHold {
    /// What the claim says, with what to do.
    #[must_use]
    pub fn message(&self, claim: &str) -> String {
        let (namespace, name) = claim.split_once('/').unwrap_or(("", claim));
        format!(
            "commit {} would delete {} of the {} objects this claim applied: not pruned. To delete them, confirm with `kubectl annotate nativeclaim {name} -n {namespace} --overwrite {CONFIRM_PRUNE}={}`; to keep them, push a commit that restores the files",
            self.commit, self.pruning, self.owned, self.commit
        )
    }
}

/// Whether the confirmation annotation's `value` names `commit`.
#[must_use]
pub fn confirms(value: Option<&str>, commit: &CommitId) -> bool {
    let Some(value) = value.map(str::trim) else {
        return false;
    };
    value.len() >= 7 && commit.to_string().starts_with(&value.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(group: &str, kind: &str, namespace: &str, name: &str) -> Identity {
        Identity {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn own_configuration_and_system_namespaces_are_out_of_reach() {
        let cases = [
            (id("backflow.dev", "GitTarget", "team", "t"), true),
            (
                id(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    "",
                    "gittargets.backflow.dev",
                ),
                true,
            ),
            (
                id(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    "",
                    "widgets.example.com",
                ),
                false,
            ),
            (id("", "Namespace", "", "kube-system"), true),
            (id("", "Namespace", "", "default"), true),
            (id("", "Namespace", "", "team"), false),
            (id("", "Secret", "backflow-system", "receiver"), true),
            (id("", "ConfigMap", "default", "settings"), false),
            (id("example.dev", "Widget", "default", "w"), false),
        ];
        for (identity, protected) in cases {
            let namespace = identity.namespace.clone();
            assert_eq!(
                protection(&identity, &namespace).is_some(),
                protected,
                "{identity}"
            );
        }
    }

    #[test]
    fn a_prune_of_more_than_a_quarter_or_of_everything_is_held() {
        let guard = PruneGuard::default();
        assert!(!guard.holds(0, 0));
        assert!(!guard.holds(0, 10));
        assert!(!guard.holds(1, 1), "one object is no mass prune");
        assert!(guard.holds(2, 2), "all of it");
        assert!(guard.holds(3, 3), "all of it");
        assert!(!guard.holds(2, 3), "a small folder losing files");
        assert!(!guard.holds(5, 6), "at most the floor");
        assert!(!guard.holds(25, 100), "exactly a quarter");
        assert!(guard.holds(26, 100));
        assert!(guard.holds(6, 7));
        let lenient = PruneGuard { max_percent: 100 };
        assert!(!lenient.holds(99, 100));
        assert!(lenient.holds(100, 100));
    }

    #[test]
    fn a_confirmation_names_the_commit() {
        let commit: CommitId = "0123456789abcdef0123456789abcdef01234567"
            .parse()
            .expect("id");
        assert!(confirms(
            Some("0123456789abcdef0123456789abcdef01234567"),
            &commit
        ));
        assert!(confirms(Some("0123456"), &commit));
        assert!(confirms(Some(" 0123456789ABCDEF "), &commit));
        assert!(!confirms(Some("012345"), &commit), "too short a prefix");
        assert!(!confirms(Some("1123456789"), &commit));
        assert!(!confirms(None, &commit));
    }
}
