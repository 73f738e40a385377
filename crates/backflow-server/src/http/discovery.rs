//! Discovery: aggregated (`apidiscovery.k8s.io/v2`, or `v2beta1` for older clients) and legacy,
//! always built from the live registry.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::{Registry, ResourceType};

/// The exact Content-Type kubectl needs to parse an aggregated answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The Content-Type of the same answer under `apidiscovery.k8s.io/v2beta1`, the only aggregated
/// version kubectl 1.29 and older ask for (the document has the same shape as v2).
const AGGREGATED_V2BETA1_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Which `apidiscovery.k8s.io` version the client accepts, taking the first aggregated media
/// range of its `Accept` header whose `v` parameter is exactly one we serve (`v2` or `v2beta1`).
/// `None` means the client gets legacy discovery.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|range| {
            let (mut g, mut v, mut r#as) = (None, None, None);
            for (k, val) in range.split(';').skip(1).filter_map(|p| p.split_once('=')) {
                match k.trim() {
                    "g" => g = Some(val.trim()),
                    "v" => v = Some(val.trim()),
                    "as" => r#as = Some(val.trim()),
                    _ => {}
                }
            }
            if g != Some("apidiscovery.k8s.io") || r#as != Some("APIGroupDiscoveryList") {
                return None;
            }
            match v {
                Some("v2") => Some("v2"),
                Some("v2beta1") => Some("v2beta1"),
                _ => None,
            }
        })
}

fn json_response(body: Value, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.to_string()).into_response()
}

fn aggregated_resource(t: &ResourceType) -> Value {
    let mut r = json!({
        "resource": t.plural,
        "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
        "scope": if t.namespaced() { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": t.verbs(),
    });
    if !t.short_names.is_empty() {
        r["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        r["categories"] = json!(t.categories);
    }
    let mut subs = Vec::new();
    if t.status_subresource {
        subs.push(json!({"subresource": "status", "responseKind": {"group": t.group, "version": t.version, "kind": t.kind}, "verbs": ["get", "patch", "update"]}));
    }
    if t.scale.is_some() {
        subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

fn aggregated_group(reg: &Registry, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = reg
                .all()
                .filter(|t| t.group == group && &t.version == v)
                .map(aggregated_resource)
                .collect();
            json!({"version": v, "freshness": "Current", "resources": resources})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}

fn aggregated(reg: &Registry, core: bool, version: &'static str) -> Response {
    let items: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| aggregated_group(reg, g, vs))
        .collect();
    let content_type = if version == "v2" {
        AGGREGATED_CONTENT_TYPE
    } else {
        AGGREGATED_V2BETA1_CONTENT_TYPE
    };
    json_response(
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items}),
        content_type,
    )
}

/// `GET /api`.
pub fn api(reg: &Registry, headers: &HeaderMap, server_address: &str) -> Response {
    if let Some(version) = aggregated_version(headers) {
        return aggregated(reg, true, version);
    }
    json_response(
        json!({"kind": "APIVersions", "versions": ["v1"],
               "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}),
        "application/json",
    )
}

fn legacy_group(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `GET /apis`.
pub fn apis(reg: &Registry, headers: &HeaderMap) -> Response {
    if let Some(version) = aggregated_version(headers) {
        return aggregated(reg, false, version);
    }
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| legacy_group(g, vs))
        .collect();
    json_response(
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
        "application/json",
    )
}

/// `GET /apis/G`.
pub fn group(reg: &Registry, group: &str) -> Result<Response, ApiError> {
    let (_, versions) = reg
        .groups()
        .into_iter()
        .find(|(g, _)| g == group)
        .ok_or(ApiError::UnknownResource)?;
    let mut body = legacy_group(group, &versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(json_response(body, "application/json"))
}

/// `GET /api/v1` and `GET /apis/G/V`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Result<Response, ApiError> {
    if !reg.has_group_version(group, version) {
        return Err(ApiError::UnknownResource);
    }
    let mut resources = Vec::new();
    for t in reg
        .all()
        .filter(|t| t.group == group && t.version == version)
    {
        let mut r = json!({
            "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced(),
            "kind": t.kind, "verbs": t.verbs(),
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status_subresource {
            resources.push(json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced(), "kind": t.kind, "verbs": ["get", "patch", "update"]}));
        }
        if t.scale.is_some() {
            resources.push(json!({"name": format!("{}/scale", t.plural), "singularName": "", "namespaced": t.namespaced(), "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_response(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
        "application/json",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, v.parse().expect("header value"));
        h
    }

    #[test]
    fn negotiates_the_aggregated_version_exactly() {
        // kubectl 1.32.
        assert_eq!(
            aggregated_version(&accept(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            )),
            Some("v2")
        );
        // kubectl 1.29 offers only v2beta1, which is not v2.
        assert_eq!(
            aggregated_version(&accept(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
            )),
            Some("v2beta1")
        );
        assert_eq!(aggregated_version(&accept("application/json, */*")), None);
        assert_eq!(aggregated_version(&HeaderMap::new()), None);
    }
}
