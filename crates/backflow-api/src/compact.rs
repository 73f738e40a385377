//! Giving back the slack of JSON values that are kept for long.
//!
//! A parsed or edited `serde_json::Value` holds maps and lists grown by doubling. The API
//! server keeps every object it stores and a snapshot keeps every object it mirrors until the
//! push, so at a hundred thousand objects that slack is a good part of the process's memory.
//!
//! Text kept for long (a stored object's JSON, an intent's JSON, a rendered file) is written
//! into a buffer each thread reuses and copied into an allocation of exactly its length.
//! Growing it by doubling and shrinking it in place instead leaves the allocator a free gap
//! after every kept text, which new texts outgrow: at a million stored objects those gaps
//! were a third of the store's memory.

use std::cell::RefCell;

use serde_json::{Map, Value};

/// The most a thread's buffer keeps between texts; a larger text's room is given back.
const SCRATCH_KEEP: usize = 256 * 1024;

thread_local! {
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// What `write` writes, in an allocation of exactly its length (see the module's comment).
pub fn exact_text(write: impl FnOnce(&mut String)) -> Box<str> {
    SCRATCH.with(|scratch| {
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            // Called from inside `write` itself: a buffer of its own.
            let mut own = String::new();
            write(&mut own);
            return Box::from(own.as_str());
        };
        buf.clear();
        write(&mut buf);
        let exact = Box::from(buf.as_str());
        if buf.capacity() > SCRATCH_KEEP {
            *buf = String::new();
        }
        exact
    })
}

/// `value` as compact JSON, in an allocation of exactly its length.
#[must_use]
pub fn json_exact(value: &Value) -> Box<str> {
    exact_text(|out| {
        use std::fmt::Write as _;
        // Writing a `Value` into a `String` cannot fail.
        let _ = write!(out, "{value}");
    })
}

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

    #[test]
    fn exact_texts_are_what_was_written_and_no_longer() {
        let v: Value = serde_json::from_str(r#"{"b":[1,2.5,"é\""],"a":null}"#).expect("json");
        let json = json_exact(&v);
        assert_eq!(&*json, serde_json::to_string(&v).expect("json"));
        let long = "x".repeat(SCRATCH_KEEP + 1);
        assert_eq!(&*exact_text(|out| out.push_str(&long)), long);
        // The buffer gave a large text's room back; a nested call writes into its own.
        SCRATCH.with(|s| assert_eq!(s.borrow().capacity(), 0));
        let nested = exact_text(|out| {
            out.push('a');
            out.push_str(&exact_text(|inner| inner.push('b')));
        });
        assert_eq!(&*nested, "ab");
    }
}
