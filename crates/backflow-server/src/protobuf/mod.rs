//! Decoding the protobuf request bodies kubectl ≥ 1.32 and other client-go programs send for
//! built-in types (`application/vnd.kubernetes.protobuf`), into the JSON object they stand for.
//!
//! Descriptor-driven: one decoder walks any built-in message with the schema generated from
//! Kubernetes' own `.proto` files and Go types ([`schema`]), so every built-in kind decodes the
//! same way, whole. Answers stay JSON, which every client accepts. Messages are gogo-protobuf
//! with proto2 semantics: a non-pointer field is always written, so a zero (`""`, `0`, `false`)
//! of a field whose JSON omits it when empty means "unset" and is left out, as the JSON form
//! would.

mod schema;
mod special;
mod wire;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::ApiError;
use schema::{FieldDef, Label, MessageDef, Schema};
use wire::{Field, Reader, bad, fields, text};

/// The 4 bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// How deep messages may nest: far beyond any built-in type (a pod template in a job template in
/// a cron job is about a dozen), and a bound on what a hostile body can make the decoder recurse.
const MAX_DEPTH: usize = 64;

/// Decodes a protobuf body (the `runtime.Unknown` envelope kubectl sends) into the JSON object it
/// stands for.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the Kubernetes protobuf magic bytes"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(type_meta)) => {
                for (n, f) in fields(type_meta)? {
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
    let schema = Schema::builtin();
    let Some(name) = schema.object(&api_version, &kind) else {
        return Err(ApiError::UnsupportedMediaType(format!(
            "protobuf bodies are decoded for the built-in types; {api_version} {kind} is not one: send it as JSON (application/json)"
        )));
    };
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), Value::String(api_version));
    obj.insert("kind".into(), Value::String(kind));
    match decode_message(schema, &name, raw, 0)? {
        Value::Object(fields) => obj.extend(fields),
        _ => return Err(bad(&format!("{name} is not an object"))),
    }
    Ok(Value::Object(obj))
}

/// One message as JSON: the well-known types by their JSON form, anything else field by field.
fn decode_message(
    schema: &Schema,
    name: &str,
    bytes: &[u8],
    depth: usize,
) -> Result<Value, ApiError> {
    if depth > MAX_DEPTH {
        return Err(bad("messages nest too deeply"));
    }
    if let Some(value) = special::decode(name, bytes)? {
        return Ok(value);
    }
    let message = schema
        .message(name)
        .ok_or_else(|| bad(&format!("message {name} is not a Kubernetes type")))?;
    if message.list {
        return list_of_items(message, bytes);
    }
    let mut obj = Map::new();
    for (number, payload) in fields(bytes)? {
        // A field this schema does not know (newer than it) is skipped, as JSON decoding skips
        // an unknown field.
        let Some(def) = message.fields.get(&number) else {
            continue;
        };
        match def.label {
            Label::Optional => optional(schema, def, payload, &mut obj, depth)?,
            Label::Repeated => repeated(schema, def, payload, &mut obj, depth)?,
            Label::Map => map_entry(schema, def, payload, &mut obj, depth)?,
        }
    }
    Ok(Value::Object(obj))
}

/// A message that is a list of strings in JSON.
fn list_of_items(message: &MessageDef, bytes: &[u8]) -> Result<Value, ApiError> {
    let mut items = Vec::new();
    for (number, payload) in fields(bytes)? {
        if let (true, Field::Bytes(x)) = (message.fields.contains_key(&number), payload) {
            items.push(Value::String(text(x)?));
        }
    }
    Ok(Value::Array(items))
}

fn optional(
    schema: &Schema,
    def: &FieldDef,
    payload: Field<'_>,
    obj: &mut Map<String, Value>,
    depth: usize,
) -> Result<(), ApiError> {
    let value = value(schema, &def.ty, payload, depth)?;
    if value.is_null() || (!def.zero && is_zero(&value)) {
        return Ok(());
    }
    match (def.inline, value) {
        (true, Value::Object(fields)) => obj.extend(fields),
        (_, value) => {
            obj.insert(def.json.clone(), value);
        }
    }
    Ok(())
}

fn repeated(
    schema: &Schema,
    def: &FieldDef,
    payload: Field<'_>,
    obj: &mut Map<String, Value>,
    depth: usize,
) -> Result<(), ApiError> {
    let items = match (payload, is_varint(&def.ty)) {
        // A packed list: varints one after another in one field.
        (Field::Bytes(x), true) => {
            let mut r = Reader::new(x);
            let mut items = Vec::new();
            while !r.is_empty() {
                items.push(value(schema, &def.ty, Field::Varint(r.varint()?), depth)?);
            }
            items
        }
        (payload, _) => vec![value(schema, &def.ty, payload, depth)?],
    };
    match obj
        .entry(def.json.clone())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(list) => list.extend(items),
        _ => return Err(bad(&format!("{} is both a list and a value", def.json))),
    }
    Ok(())
}

/// One `{1: key, 2: value}` entry of a map field.
fn map_entry(
    schema: &Schema,
    def: &FieldDef,
    payload: Field<'_>,
    obj: &mut Map<String, Value>,
    depth: usize,
) -> Result<(), ApiError> {
    let Field::Bytes(entry) = payload else {
        return Err(bad(&format!(
            "map {} has an entry that is not a message",
            def.json
        )));
    };
    let (mut key, mut val) = (String::new(), None);
    for (number, f) in fields(entry)? {
        match (number, f) {
            (1, Field::Bytes(x)) => key = text(x)?,
            (2, f) => val = Some(value(schema, &def.ty, f, depth)?),
            _ => {}
        }
    }
    // An entry whose value is absent holds the type's zero value.
    let val = match val {
        Some(v) => v,
        None => zero_of(schema, &def.ty, depth)?,
    };
    match obj
        .entry(def.json.clone())
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(map) => {
            map.insert(key, val);
        }
        _ => return Err(bad(&format!("{} is both a map and a value", def.json))),
    }
    Ok(())
}

/// One value of type `ty`.
fn value(schema: &Schema, ty: &str, payload: Field<'_>, depth: usize) -> Result<Value, ApiError> {
    let wrong = || bad(&format!("a {ty} field has the wrong wire type"));
    Ok(match (ty, payload) {
        ("string", Field::Bytes(x)) => Value::String(text(x)?),
        ("bytes", Field::Bytes(x)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(x))
        }
        ("bool", Field::Varint(v)) => Value::Bool(v != 0),
        // proto2 int32: a negative number is sent sign-extended to 64 bits.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_possible_wrap,
            reason = "the wire's two's complement is the value"
        )]
        ("int32", Field::Varint(v)) => Value::from(v as i64 as i32),
        #[allow(
            clippy::cast_possible_wrap,
            reason = "the wire's two's complement is the value"
        )]
        ("int64", Field::Varint(v)) => Value::from(v as i64),
        ("double", Field::Fixed64(v)) => Value::from(f64::from_bits(v)),
        ("string" | "bytes" | "bool" | "int32" | "int64" | "double", _) => return Err(wrong()),
        (message, Field::Bytes(x)) => decode_message(schema, message, x, depth + 1)?,
        _ => return Err(wrong()),
    })
}

fn is_varint(ty: &str) -> bool {
    matches!(ty, "bool" | "int32" | "int64")
}

/// Whether `v` is a scalar's zero value, which the wire writes for an unset non-pointer field.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null | Value::Array(_) | Value::Object(_) => false,
    }
}

/// The value of type `ty` that the wire leaves out.
fn zero_of(schema: &Schema, ty: &str, depth: usize) -> Result<Value, ApiError> {
    Ok(match ty {
        "string" | "bytes" => Value::String(String::new()),
        "bool" => Value::Bool(false),
        "int32" | "int64" | "double" => Value::from(0),
        message => decode_message(schema, message, &[], depth + 1)?,
    })
}

#[cfg(test)]
mod tests;
