//! Giving back the slack of JSON values that are kept for long.
//!
//! A parsed or edited `serde_json::Value` holds maps and lists grown by doubling. The API
//! server keeps every object it stores and a snapshot keeps every object it mirrors until the
//! push, so at a hundred thousand objects that slack is a good part of the process's memory.

use serde_json::{Map, Value};

/// Rebuilds every map of `value` with room for exactly its entries and shrinks every list and
/// string, keeping the order of keys (so a value compares, serializes and hashes the same).
pub fn compact(value: &mut Value) {
    match value {
        Value::Object(map) => compact_map(map),
        Value::Array(items) => {
            items.iter_mut().for_each(compact);
            items.shrink_to_fit();
        }
        Value::String(s) => s.shrink_to_fit(),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// [`compact`] for a map.
pub fn compact_map(map: &mut Map<String, Value>) {
    let mut exact = Map::with_capacity(map.len());
    for (mut k, mut v) in std::mem::take(map) {
        k.shrink_to_fit();
        compact(&mut v);
        exact.insert(k, v);
    }
    *map = exact;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacting_keeps_order_and_content() {
        let text = r#"{"z":1,"a":{"y":[1,{"q":"r","b":null}],"c":"d"},"m":[]}"#;
        let mut v: Value = serde_json::from_str(text).expect("json");
        let before = v.clone();
        compact(&mut v);
        assert_eq!(v, before);
        assert_eq!(serde_json::to_string(&v).expect("json"), text);
    }
}
