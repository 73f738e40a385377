//! Writing a document as block YAML that sops (Go yaml.v3), Kubernetes and YAML 1.1 readers
//! all read back as the same JSON value.
//!
//! Written by hand, not through a serializer, because the quoting must be decided against the
//! strictest reader: sops turns an unquoted `2024-01-01` into a timestamp, `1_000` into an
//! integer, and that changes the MAC. So a string is plain only if it cannot be anything but a
//! string; everything else is double-quoted.

use serde_json::{Map, Value};

/// The whole document, ending in a newline.
pub(crate) fn emit(doc: &Map<String, Value>) -> String {
    let mut out = String::new();
    if doc.is_empty() {
        out.push_str("{}\n");
    } else {
        write_map(&mut out, doc, 0, false);
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// Writes a non-empty map at column `col`; with `inline`, the first key continues the current
/// line (after a sequence's `- `).
fn write_map(out: &mut String, map: &Map<String, Value>, col: usize, inline: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            indent(out, col);
        }
        out.push_str(&scalar(key));
        out.push(':');
        write_after_key(out, value, col);
    }
}

/// Writes a non-empty sequence at column `col`.
fn write_seq(out: &mut String, items: &[Value], col: usize, inline: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline {
            indent(out, col);
        }
        out.push_str("- ");
        match item {
            Value::Object(m) if !m.is_empty() => write_map(out, m, col + 2, true),
            Value::Array(a) if !a.is_empty() => write_seq(out, a, col + 2, true),
            Value::String(s) if block_literal(s) => write_literal(out, s, col + 2),
            other => {
                out.push_str(&inline_value(other));
                out.push('\n');
            }
        }
    }
}

fn write_after_key(out: &mut String, value: &Value, col: usize) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(out, m, col + 2, false);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_seq(out, a, col + 2, false);
        }
        Value::String(s) if block_literal(s) => {
            out.push(' ');
            write_literal(out, s, col + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&inline_value(other));
            out.push('\n');
        }
    }
}

/// `|` then each line at column `col`; only called for strings [`block_literal`] accepts.
fn write_literal(out: &mut String, s: &str, col: usize) {
    out.push_str("|\n");
    for line in s.lines() {
        if !line.is_empty() {
            indent(out, col);
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// A scalar, or an empty collection, on one line.
fn inline_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// Whether a multi-line string can be written as a `|` literal and read back byte for byte:
/// exactly one trailing newline (the default "clip"), no leading space or blank first line
/// (which would need an indentation indicator), no trailing blanks, only printable text.
fn block_literal(s: &str) -> bool {
    let Some(body) = s.strip_suffix('\n') else {
        return false;
    };
    !body.is_empty()
        && body.contains('\n')
        && !body.ends_with('\n')
        && !body.starts_with([' ', '\n', '\t'])
        && body
            .chars()
            .all(|c| c == '\n' || (printable(c) && !matches!(c, '\t' | '\r')))
        && body.lines().all(|l| !l.ends_with(' '))
}

/// A key or string value: plain when that cannot be misread, else double-quoted.
fn scalar(s: &str) -> String {
    if plain_safe(s) || sops_value(s) {
        s.to_owned()
    } else {
        quote(s)
    }
}

/// Plain only for identifier-like text that no YAML 1.1 or 1.2 schema reads as a bool, null,
/// number or timestamp: it starts with a letter or `_` and holds only `[A-Za-z0-9_./-]`.
fn plain_safe(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "true" | "false" | "on" | "off" | "null"
        )
}

/// `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` is safe plain in block context (no `: ` or
/// ` #`), and sops writes it plain, so files look like sops' own.
fn sops_value(s: &str) -> bool {
    s.starts_with("ENC[AES256_GCM,data:")
        && s.ends_with(']')
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | ',' | ':' | '[' | ']' | '_')
        })
}

/// YAML's printable set (c-printable), without the byte-order mark and the Unicode line
/// separators, which some readers treat as line breaks.
fn printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// A double-quoted scalar with JSON-style escapes, which YAML double quotes accept.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if !printable(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ambiguous_strings_are_quoted() {
        for s in [
            "",
            "y",
            "No",
            "true",
            "null",
            "~",
            "1",
            "1_000",
            "0x10",
            "1e3",
            ".inf",
            "2024-01-01",
            "12:30",
            "a: b",
            "a #b",
            "-a",
            "*a",
            "&a",
            "!a",
            "|",
            ">",
            "'",
            "%",
            "@",
            "`",
            " a",
            "a ",
            "[a]",
            "{a}",
        ] {
            assert!(scalar(s).starts_with('"'), "{s:?} must be quoted");
        }
        for s in ["abc", "tls.crt", "app.kubernetes.io/name", "_x", "Opaque"] {
            assert_eq!(scalar(s), s);
        }
    }

    #[test]
    fn control_and_separator_characters_are_escaped() {
        assert_eq!(
            quote("a\u{0}\u{85}\u{2028}\u{feff}b"),
            "\"a\\u0000\\u0085\\u2028\\uFEFFb\""
        );
    }
}
