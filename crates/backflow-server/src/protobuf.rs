//! Decoding the protobuf request bodies kubectl ≥ 1.32 sends for `kubectl create
//! configmap|secret|namespace|deployment` (`application/vnd.kubernetes.protobuf`).
//!
//! Only those kinds, and only the fields those commands set, are decoded; answers stay JSON, which
//! kubectl accepts. Messages are gogo-proto with proto2 semantics: empty strings and zeros are
//! written, and mean "unset".

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The 4 bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("the protobuf request body is malformed: {what}"))
}

/// One decoded field.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ApiError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let (number, wire) = (tag >> 3, tag & 7);
        let field = match wire {
            0 => Field::Varint(self.varint()?),
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                if self.buf.len() < n {
                    return Err(bad("truncated fixed-width field"));
                }
                self.buf = &self.buf[n..];
                Field::Varint(0)
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| bad("length overflow"))?;
                if self.buf.len() < len {
                    return Err(bad("truncated length-delimited field"));
                }
                let (data, rest) = self.buf.split_at(len);
                self.buf = rest;
                Field::Bytes(data)
            }
            other => return Err(bad(&format!("unsupported wire type {other}"))),
        };
        Ok(Some((number, field)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ApiError> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("a string field is not UTF-8"))
}

/// Sets a string field unless it is empty (proto2: empty means unset).
fn set_str(m: &mut Map<String, Value>, key: &str, b: &[u8]) -> Result<(), ApiError> {
    let s = text(b)?;
    if !s.is_empty() {
        m.insert(key.into(), json!(s));
    }
    Ok(())
}

fn push_str(m: &mut Map<String, Value>, key: &str, b: &[u8]) -> Result<(), ApiError> {
    let s = text(b)?;
    if let Value::Array(a) = m.entry(key).or_insert_with(|| json!([])) {
        a.push(json!(s));
    }
    Ok(())
}

/// A map entry `{1: key, 2: value}`; `bytes` values become base64.
fn map_entry(m: &mut Map<String, Value>, key: &str, b: &[u8], bytes: bool) -> Result<(), ApiError> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = text(x)?,
            (2, Field::Bytes(x)) if bytes => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(x));
            }
            (2, Field::Bytes(x)) => v = json!(text(x)?),
            _ => {}
        }
    }
    if let Value::Object(map) = m.entry(key).or_insert_with(|| json!({})) {
        map.insert(k, v);
    }
    Ok(())
}

fn object_meta(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => set_str(&mut m, "name", x)?,
            (2, Field::Bytes(x)) => set_str(&mut m, "generateName", x)?,
            (3, Field::Bytes(x)) => set_str(&mut m, "namespace", x)?,
            (11, Field::Bytes(x)) => map_entry(&mut m, "labels", x, false)?,
            (12, Field::Bytes(x)) => map_entry(&mut m, "annotations", x, false)?,
            (14, Field::Bytes(x)) => push_str(&mut m, "finalizers", x)?,
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn int_or_string(b: &[u8]) -> Result<Value, ApiError> {
    let (mut kind, mut int, mut s) = (0, 0i64, String::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => kind = v,
            (2, Field::Varint(v)) => int = i64::from(v as i32),
            (3, Field::Bytes(x)) => s = text(x)?,
            _ => {}
        }
    }
    Ok(if kind == 1 { json!(s) } else { json!(int) })
}

fn label_selector(b: &[u8]) -> Result<Value, ApiError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => map_entry(&mut m, "matchLabels", x, false)?,
            (2, Field::Bytes(x)) => {
                let mut e = Map::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(y)) => set_str(&mut e, "key", y)?,
                        (2, Field::Bytes(y)) => set_str(&mut e, "operator", y)?,
                        (3, Field::Bytes(y)) => push_str(&mut e, "values", y)?,
                        _ => {}
                    }
                }
                if let Value::Array(a) = m.entry("matchExpressions").or_insert_with(|| json!([])) {
                    a.push(Value::Object(e));
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

fn container(b: &[u8]) -> Result<Value, ApiError> {
    let mut c = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => set_str(&mut c, "name", x)?,
            (2, Field::Bytes(x)) => set_str(&mut c, "image", x)?,
            (3, Field::Bytes(x)) => push_str(&mut c, "command", x)?,
            (4, Field::Bytes(x)) => push_str(&mut c, "args", x)?,
            (5, Field::Bytes(x)) => set_str(&mut c, "workingDir", x)?,
            (6, Field::Bytes(x)) => {
                let mut p = Map::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(y)) => set_str(&mut p, "name", y)?,
                        (2, Field::Varint(v)) if v != 0 => {
                            p.insert("hostPort".into(), json!(v as i32));
                        }
                        (3, Field::Varint(v)) => {
                            p.insert("containerPort".into(), json!(v as i32));
                        }
                        (4, Field::Bytes(y)) => set_str(&mut p, "protocol", y)?,
                        (5, Field::Bytes(y)) => set_str(&mut p, "hostIP", y)?,
                        _ => {}
                    }
                }
                if let Value::Array(a) = c.entry("ports").or_insert_with(|| json!([])) {
                    a.push(Value::Object(p));
                }
            }
            (7, Field::Bytes(x)) => {
                let mut e = Map::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(y)) => set_str(&mut e, "name", y)?,
                        (2, Field::Bytes(y)) => {
                            e.insert("value".into(), json!(text(y)?));
                        }
                        _ => {}
                    }
                }
                if let Value::Array(a) = c.entry("env").or_insert_with(|| json!([])) {
                    a.push(Value::Object(e));
                }
            }
            (8, Field::Bytes(_)) => {
                c.insert("resources".into(), json!({}));
            }
            (14, Field::Bytes(x)) => set_str(&mut c, "imagePullPolicy", x)?,
            _ => {}
        }
    }
    Ok(Value::Object(c))
}

fn pod_template(b: &[u8]) -> Result<Value, ApiError> {
    let mut t = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => {
                let meta = object_meta(x)?;
                if meta.as_object().is_some_and(|m| !m.is_empty()) {
                    t.insert("metadata".into(), meta);
                }
            }
            (2, Field::Bytes(x)) => {
                let mut spec = Map::new();
                for (n, f) in fields(x)? {
                    if let (2, Field::Bytes(y)) = (n, f)
                        && let Value::Array(a) =
                            spec.entry("containers").or_insert_with(|| json!([]))
                    {
                        a.push(container(y)?);
                    }
                }
                t.insert("spec".into(), Value::Object(spec));
            }
            _ => {}
        }
    }
    Ok(Value::Object(t))
}

fn deployment_spec(b: &[u8]) -> Result<Value, ApiError> {
    let mut s = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => {
                s.insert("replicas".into(), json!(v as i32));
            }
            (2, Field::Bytes(x)) => {
                s.insert("selector".into(), label_selector(x)?);
            }
            (3, Field::Bytes(x)) => {
                s.insert("template".into(), pod_template(x)?);
            }
            (4, Field::Bytes(x)) => {
                let mut st = Map::new();
                for (n, f) in fields(x)? {
                    match (n, f) {
                        (1, Field::Bytes(y)) => set_str(&mut st, "type", y)?,
                        (2, Field::Bytes(y)) => {
                            let mut ru = Map::new();
                            for (n, f) in fields(y)? {
                                match (n, f) {
                                    (1, Field::Bytes(z)) => {
                                        ru.insert("maxUnavailable".into(), int_or_string(z)?);
                                    }
                                    (2, Field::Bytes(z)) => {
                                        ru.insert("maxSurge".into(), int_or_string(z)?);
                                    }
                                    _ => {}
                                }
                            }
                            st.insert("rollingUpdate".into(), Value::Object(ru));
                        }
                        _ => {}
                    }
                }
                if !st.is_empty() {
                    s.insert("strategy".into(), Value::Object(st));
                }
            }
            (5, Field::Varint(v)) if v != 0 => {
                s.insert("minReadySeconds".into(), json!(v as i32));
            }
            (6, Field::Varint(v)) => {
                s.insert("revisionHistoryLimit".into(), json!(v as i32));
            }
            (7, Field::Varint(v)) if v != 0 => {
                s.insert("paused".into(), json!(true));
            }
            (9, Field::Varint(v)) => {
                s.insert("progressDeadlineSeconds".into(), json!(v as i32));
            }
            _ => {}
        }
    }
    Ok(Value::Object(s))
}

/// Decodes a protobuf body into the JSON object it stands for.
/// A `TokenRequestSpec`: `audiences` (1) and `expirationSeconds` (4), what
/// `kubectl create token --audience … --duration …` sends.
fn token_request_spec(b: &[u8]) -> Result<Value, ApiError> {
    let mut spec = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => push_str(&mut spec, "audiences", x)?,
            (4, Field::Varint(v)) => {
                spec.insert("expirationSeconds".into(), json!(v as i64));
            }
            _ => {}
        }
    }
    Ok(Value::Object(spec))
}

pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the Kubernetes protobuf magic bytes"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = text(x)?,
                        (2, Field::Bytes(x)) => kind = text(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    for (n, f) in fields(raw)? {
        let Field::Bytes(x) = f else {
            if let (4 | 5, Field::Varint(v)) = (n, &f)
                && matches!((kind.as_str(), n), ("ConfigMap", 4) | ("Secret", 5))
            {
                obj.insert("immutable".into(), json!(*v != 0));
            }
            continue;
        };
        match (kind.as_str(), n) {
            (_, 1) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2) => map_entry(&mut obj, "data", x, false)?,
            ("ConfigMap", 3) => map_entry(&mut obj, "binaryData", x, true)?,
            ("Secret", 2) => map_entry(&mut obj, "data", x, true)?,
            ("Secret", 3) => set_str(&mut obj, "type", x)?,
            ("Secret", 4) => map_entry(&mut obj, "stringData", x, false)?,
            ("Namespace", 2) => {
                let mut spec = Map::new();
                for (n, f) in fields(x)? {
                    if let (1, Field::Bytes(y)) = (n, f) {
                        push_str(&mut spec, "finalizers", y)?;
                    }
                }
                if !spec.is_empty() {
                    obj.insert("spec".into(), Value::Object(spec));
                }
            }
            ("Deployment", 2) => {
                obj.insert("spec".into(), deployment_spec(x)?);
            }
            ("TokenRequest", 2) => {
                obj.insert("spec".into(), token_request_spec(x)?);
            }
            ("ConfigMap" | "Secret" | "Namespace" | "Deployment" | "TokenRequest", _) => {}
            (other, _) => {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "protobuf bodies are decoded for ConfigMap, Secret, Namespace and Deployment only, not {other}; send JSON (`kubectl create -f`, `kubectl apply`)"
                )));
            }
        }
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field(n: u64, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint((n << 3) | 2, &mut out);
        varint(data.len() as u64, &mut out);
        out.extend_from_slice(data);
        out
    }

    fn entry(k: &str, v: &[u8]) -> Vec<u8> {
        [field(1, k.as_bytes()), field(2, v)].concat()
    }

    #[test]
    fn configmap_and_secret() {
        let meta = [field(1, b"cm1"), field(2, b""), field(3, b"default")].concat();
        let raw = [field(1, &meta), field(2, &entry("a", b"1"))].concat();
        let body = [
            MAGIC.to_vec(),
            field(1, &[field(1, b"v1"), field(2, b"ConfigMap")].concat()),
            field(2, &raw),
        ]
        .concat();
        assert_eq!(
            decode(&body).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "namespace": "default"}, "data": {"a": "1"}})
        );
        let raw = [
            field(1, &field(1, b"s1")),
            field(2, &entry("k", b"\x00\xff")),
            field(3, b""),
        ]
        .concat();
        let body = [
            MAGIC.to_vec(),
            field(1, &[field(1, b"v1"), field(2, b"Secret")].concat()),
            field(2, &raw),
        ]
        .concat();
        assert_eq!(
            decode(&body).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"k": "AP8="}})
        );
    }

    #[test]
    fn garbage_is_a_bad_request() {
        assert!(decode(b"not protobuf").is_err());
        assert!(decode(b"k8s\0\x0a\xff").is_err());
    }
}
