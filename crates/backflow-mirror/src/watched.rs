//! An object as the mirror's watch reads it: decoded, or, when its metadata does not decode, what
//! is needed to report it and go on. The watch of a type decodes every object of a list page or
//! event as one unit, so with plain `DynamicObject`s one object with wrongly typed metadata (an
//! `ownerReferences: "x"` stored before the API refused such objects, or served by another API
//! server) failed the whole watch of its type, again at every retry.

use std::borrow::Cow;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One watched object.
#[derive(Debug, Clone)]
pub enum Watched {
    /// Read whole.
    Decoded(DynamicObject),
    /// Its metadata does not decode: `meta` holds what could be read of it (name, namespace,
    /// resourceVersion when they are strings), `error` why the rest could not.
    Undecodable {
        /// Name, namespace and resourceVersion, as far as they are readable.
        meta: ObjectMeta,
        /// What the decoder said.
        error: String,
    },
}

impl<'de> Deserialize<'de> for Watched {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(Self::from_value(value))
    }
}

impl Watched {
    /// Decodes `value`, never failing: what does not decode is [`Watched::Undecodable`].
    fn from_value(mut value: Value) -> Self {
        let Some(map) = value.as_object_mut() else {
            return Self::Undecodable {
                meta: ObjectMeta::default(),
                error: "the object is not a JSON object".into(),
            };
        };
        let metadata = map
            .remove("metadata")
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let meta = match ObjectMeta::deserialize(&metadata) {
            Ok(meta) => meta,
            Err(e) => {
                return Self::Undecodable {
                    meta: readable_meta(&metadata),
                    error: format!("metadata: {e}"),
                };
            }
        };
        let types = match (map.remove("apiVersion"), map.remove("kind")) {
            (Some(Value::String(api_version)), Some(Value::String(kind))) => {
                Some(TypeMeta { api_version, kind })
            }
            _ => None,
        };
        Self::Decoded(DynamicObject {
            types,
            metadata: meta,
            data: value,
        })
    }
}

impl Watched {
    /// The object as its deletion needs it: whole, or only its identity when it cannot be read
    /// (its file is removed all the same: the object is gone).
    pub fn into_gone(self) -> DynamicObject {
        match self {
            Self::Decoded(obj) => obj,
            Self::Undecodable { meta, .. } => DynamicObject {
                types: None,
                metadata: meta,
                data: Value::Null,
            },
        }
    }
}

/// The identity fields of `metadata` that are strings, whatever else is wrong with it.
fn readable_meta(metadata: &Value) -> ObjectMeta {
    let text = |k: &str| metadata.get(k).and_then(Value::as_str).map(String::from);
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        resource_version: text("resourceVersion"),
        uid: text("uid"),
        ..ObjectMeta::default()
    }
}

impl Resource for Watched {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Decoded(obj) => &obj.metadata,
            Self::Undecodable { meta, .. } => meta,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Decoded(obj) => &mut obj.metadata,
            Self::Undecodable { meta, .. } => meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_good_object_decodes_as_a_dynamic_object_would() {
        let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "a", "namespace": "d", "resourceVersion": "7"},
                       "data": {"k": "v"}});
        let Watched::Decoded(obj) = serde_json::from_value::<Watched>(v.clone()).expect("json")
        else {
            panic!("decodes");
        };
        let plain: DynamicObject = serde_json::from_value(v).expect("dynamic");
        assert_eq!(obj.metadata, plain.metadata);
        assert_eq!(obj.types, plain.types);
        assert_eq!(obj.data, plain.data);
    }

    /// The object that failed the watch of its whole type: a list holding it still decodes, and
    /// the bad one says who it is and what is wrong.
    #[test]
    fn wrongly_typed_metadata_is_undecodable_not_an_error() {
        let list = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "namespace": "d",
              "resourceVersion": "9", "ownerReferences": "x"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"}}
        ]);
        let items: Vec<Watched> = serde_json::from_value(list).expect("the list decodes");
        let Watched::Undecodable { meta, error } = &items[0] else {
            panic!("undecodable: {:?}", items[0]);
        };
        assert_eq!(
            (
                meta.name.as_deref(),
                meta.namespace.as_deref(),
                meta.resource_version.as_deref()
            ),
            (Some("bad"), Some("d"), Some("9"))
        );
        assert!(error.contains("metadata"), "{error}");
        assert!(
            matches!(&items[1], Watched::Decoded(o) if o.metadata.name.as_deref() == Some("good"))
        );
        // What plain decoding did: the whole list failed.
        assert!(
            serde_json::from_value::<Vec<DynamicObject>>(json!([
                {"metadata": {"name": "bad", "ownerReferences": "x"}}
            ]))
            .is_err()
        );
    }
}
