//! The apimachinery types whose JSON form is not their fields: an int-or-string is a number or a
//! string, a quantity and a time are strings, a raw extension is the JSON it carries.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::wire::{Field, bad, fields, text};
use crate::error::ApiError;

const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const QUANTITY_VALUE: &str = "k8s.io.apimachinery.pkg.api.resource.QuantityValue";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";

/// The JSON form of message `name` when it is one of the special types; `None` otherwise.
/// `Value::Null` stands for a zero time, which JSON writes as `null` (left out by the caller).
pub(super) fn decode(name: &str, bytes: &[u8]) -> Result<Option<Value>, ApiError> {
    Ok(Some(match name {
        INT_OR_STRING => int_or_string(bytes)?,
        QUANTITY | QUANTITY_VALUE => Value::String(string_field(bytes, 1)?),
        TIME => time(bytes, false)?,
        MICRO_TIME => time(bytes, true)?,
        DURATION => Value::String(go_duration(int_field(bytes, 1)?)),
        RAW_EXTENSION | FIELDS_V1 => raw_json(bytes)?,
        _ => return Ok(None),
    }))
}

fn string_field(bytes: &[u8], number: u64) -> Result<String, ApiError> {
    let mut out = String::new();
    for (n, f) in fields(bytes)? {
        if let (true, Field::Bytes(x)) = (n == number, f) {
            out = text(x)?;
        }
    }
    Ok(out)
}

#[allow(
    clippy::cast_possible_wrap,
    reason = "the wire's two's complement is the value"
)]
fn int_field(bytes: &[u8], number: u64) -> Result<i64, ApiError> {
    let mut out = 0;
    for (n, f) in fields(bytes)? {
        if let (true, Field::Varint(v)) = (n == number, f) {
            out = v as i64;
        }
    }
    Ok(out)
}

/// `{type: 0, intVal}` is a number, `{type: 1, strVal}` a string.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    reason = "intVal is an int32 sent sign-extended"
)]
fn int_or_string(bytes: &[u8]) -> Result<Value, ApiError> {
    let (mut kind, mut int, mut string) = (0, 0i32, String::new());
    for (n, f) in fields(bytes)? {
        match (n, f) {
            (1, Field::Varint(v)) => kind = v,
            (2, Field::Varint(v)) => int = v as i64 as i32,
            (3, Field::Bytes(x)) => string = text(x)?,
            _ => {}
        }
    }
    Ok(if kind == 1 {
        Value::String(string)
    } else {
        Value::from(int)
    })
}

/// A time as RFC 3339 (to the second, or to the microsecond for a `MicroTime`); the zero time is
/// `null`.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "nanos is an int32 in 0..1e9"
)]
fn time(bytes: &[u8], micros: bool) -> Result<Value, ApiError> {
    let seconds = int_field(bytes, 1)?;
    let nanos = int_field(bytes, 2)?;
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let since_epoch =
        u64::try_from(seconds).map_err(|_| bad("a time before 1970 is not supported"))?;
    let at = SystemTime::UNIX_EPOCH
        + Duration::from_secs(since_epoch)
        + Duration::from_nanos(nanos.clamp(0, 999_999_999) as u64);
    Ok(Value::String(if micros {
        humantime::format_rfc3339_micros(at).to_string()
    } else {
        humantime::format_rfc3339_seconds(at).to_string()
    }))
}

/// Embedded JSON (a raw extension's object, managed fields' field set).
fn raw_json(bytes: &[u8]) -> Result<Value, ApiError> {
    let mut raw: &[u8] = &[];
    for (n, f) in fields(bytes)? {
        if let (1, Field::Bytes(x)) = (n, f) {
            raw = x;
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| bad(&format!("embedded JSON does not parse: {e}")))
}

/// A duration in nanoseconds as Go prints it (`1h0m0s`, `1m30s`, `1.5s`, `250ms`, `0s`).
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let fraction = |value: u64, unit: u64, suffix: &str| {
        let (whole, rest) = (value / unit, value % unit);
        let digits = unit.ilog10() as usize;
        let rest = format!("{rest:0digits$}");
        let rest = rest.trim_end_matches('0');
        if rest.is_empty() {
            format!("{sign}{whole}{suffix}")
        } else {
            format!("{sign}{whole}.{rest}{suffix}")
        }
    };
    match n {
        ..1_000 => format!("{sign}{n}ns"),
        1_000..1_000_000 => fraction(n, 1_000, "µs"),
        1_000_000..1_000_000_000 => fraction(n, 1_000_000, "ms"),
        _ => {
            let secs = n / 1_000_000_000;
            let (h, m) = (secs / 3600, secs / 60 % 60);
            let s = fraction(n % 60_000_000_000, 1_000_000_000, "s");
            let s = s.trim_start_matches('-');
            match (h, m) {
                (0, 0) => format!("{sign}{s}"),
                (0, m) => format!("{sign}{m}m{s}"),
                (h, m) => format!("{sign}{h}h{m}m{s}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_prints_them() {
        for (nanos, text) in [
            (0, "0s"),
            (500, "500ns"),
            (1_500, "1.5µs"),
            (250_000_000, "250ms"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-61_000_000_000, "-1m1s"),
        ] {
            assert_eq!(go_duration(nanos), text, "{nanos}");
        }
    }
}
