//! Who wrote a live object, as its managedFields say: every entry but status ones (a
//! controller reporting status edits nothing Git holds), each with its manager and second.

use backflow_decision::{ManagedWrite, Writes};
use kube::api::DynamicObject;

/// The non-status managedFields entries of `obj`.
pub(crate) fn writes_of(obj: &DynamicObject) -> Writes {
    let entries = obj.metadata.managed_fields.as_deref().unwrap_or_default();
    Writes::new(
        entries
            .iter()
            .filter(|e| e.subresource.as_deref() != Some("status"))
            .filter_map(|e| {
                let second = e.time.as_ref()?.0.as_second();
                let manager = e.manager.clone().unwrap_or_default();
                Some(ManagedWrite { manager, second })
            })
            .collect(),
    )
}
