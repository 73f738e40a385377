//! Which applier owns a live object, read from the stamps appliers leave on what they apply.
//!
//! A coordinated folder belongs to its applier: an object another applier owns is neither
//! mirrored into it nor applied from it, since two appliers applying one object fight. The
//! owner is read before sanitizing, which strips these stamps.

use std::collections::BTreeMap;
use std::fmt;

/// The label backflow's own applier stamps on every object it applies:
/// `backflow.dev/applier: <namespace>.<claim>`.
pub const APPLIER_LABEL: &str = "backflow.dev/applier";

/// The label on backflow's own records kept as objects (a large claim's inventory):
/// `backflow.dev/record-of: <namespace>.<claim>`. Such objects are never mirrored into Git nor
/// applied from it.
pub const RECORD_LABEL: &str = "backflow.dev/record-of";

/// Flux's labels on every object a Kustomization applied.
const FLUX_NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
const FLUX_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
/// Argo CD's tracking annotation: `<application>:<group>/<kind>:<namespace>/<name>`.
const ARGO_TRACKING_ANNOTATION: &str = "argocd.argoproj.io/tracking-id";

/// An applier that owns objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AppliedBy {
    /// A backflow applier claim, by its label value `<namespace>.<claim>`.
    Claim(String),
    /// A Flux Kustomization.
    Flux {
        /// The Kustomization's namespace.
        namespace: String,
        /// The Kustomization's name.
        name: String,
    },
    /// An Argo CD Application, by name (its tracking id's application part, without the
    /// `<namespace>_` an Application outside Argo CD's own namespace gets).
    ArgoCd(String),
    /// backflow's own record for a claim (`<namespace>.<claim>`): no folder takes it.
    Record(String),
}

impl AppliedBy {
    /// backflow's claim `namespace/name`.
    #[must_use]
    pub fn claim(namespace: &str, name: &str) -> Self {
        Self::Claim(format!("{namespace}.{name}"))
    }

    /// Who owns an object with these labels and annotations: Flux's labels, or else Argo CD's
    /// tracking id, or else a backflow claim's label. `None`: no applier.
    #[must_use]
    pub fn of(
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Option<Self> {
        let label = |key: &str| labels.and_then(|l| l.get(key)).filter(|v| !v.is_empty());
        if let Some(claim) = label(RECORD_LABEL) {
            return Some(Self::Record(claim.clone()));
        }
        if let (Some(name), Some(namespace)) = (label(FLUX_NAME_LABEL), label(FLUX_NAMESPACE_LABEL))
        {
            return Some(Self::Flux {
                namespace: namespace.clone(),
                name: name.clone(),
            });
        }
        let tracked = annotations
            .and_then(|a| a.get(ARGO_TRACKING_ANNOTATION))
            .and_then(|id| id.split(':').next())
            .filter(|app| !app.is_empty());
        if let Some(app) = tracked {
            // `<namespace>_<name>` for an Application outside Argo CD's own namespace; names
            // never hold `_`.
            let name = app.rsplit('_').next().unwrap_or(app);
            return Some(Self::ArgoCd(name.to_string()));
        }
        label(APPLIER_LABEL).map(|claim| Self::Claim(claim.clone()))
    }

    /// Whether an object owned by `owner` belongs to another applier than `own` (the applier of
    /// the folder, `None` for a folder no claim coordinates, which excludes nothing).
    #[must_use]
    pub fn excludes(own: Option<&Self>, owner: Option<&Self>) -> bool {
        match (own, owner) {
            (_, Some(Self::Record(_))) => true,
            (Some(own), Some(owner)) => own != owner,
            _ => false,
        }
    }
}

impl fmt::Display for AppliedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Claim(claim) => write!(f, "backflow claim {claim}"),
            Self::Flux { namespace, name } => write!(f, "Flux Kustomization {namespace}/{name}"),
            Self::ArgoCd(app) => write!(f, "Argo CD Application {app}"),
            Self::Record(claim) => write!(f, "backflow's record for claim {claim}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_owner_is_read_from_each_appliers_stamps() {
        let flux = map(&[
            (FLUX_NAME_LABEL, "apps"),
            (FLUX_NAMESPACE_LABEL, "flux-system"),
        ]);
        assert_eq!(
            AppliedBy::of(Some(&flux), None),
            Some(AppliedBy::Flux {
                namespace: "flux-system".into(),
                name: "apps".into()
            })
        );
        let argo = map(&[(ARGO_TRACKING_ANNOTATION, "guestbook:apps/Deployment:web/ui")]);
        assert_eq!(
            AppliedBy::of(None, Some(&argo)),
            Some(AppliedBy::ArgoCd("guestbook".into()))
        );
        let ours = map(&[(APPLIER_LABEL, "team.default")]);
        assert_eq!(
            AppliedBy::of(Some(&ours), None),
            Some(AppliedBy::claim("team", "default"))
        );
        // Half of Flux's pair, or an empty value, names nobody.
        let half = map(&[(FLUX_NAME_LABEL, "apps"), (APPLIER_LABEL, "")]);
        assert_eq!(AppliedBy::of(Some(&half), None), None);
    }

    #[test]
    fn only_a_coordinated_folder_excludes_and_never_its_own_applier() {
        let own = AppliedBy::claim("team", "default");
        let other = AppliedBy::ArgoCd("guestbook".into());
        assert!(AppliedBy::excludes(Some(&own), Some(&other)));
        assert!(!AppliedBy::excludes(Some(&own), Some(&own)));
        assert!(!AppliedBy::excludes(Some(&own), None));
        assert!(!AppliedBy::excludes(None, Some(&other)));
        // backflow's own records are no folder's, coordinated or not.
        let record = AppliedBy::of(Some(&map(&[(RECORD_LABEL, "team.default")])), None);
        assert_eq!(record, Some(AppliedBy::Record("team.default".into())));
        assert!(AppliedBy::excludes(None, record.as_ref()));
        assert!(AppliedBy::excludes(Some(&own), record.as_ref()));
    }
}
