//! Canonical YAML for new files, and the scalar style every write uses.
//!
//! One encoder serves new files and in-place edits (which render new values with the same
//! functions), so the first edit after a create never rewrites lines it did not mean to.
//!
//! The shape:
//! - `apiVersion`, `kind`, `metadata` first (metadata: `name`, `namespace`, `labels`,
//!   `annotations`, then the rest sorted), then every other top-level key sorted; nested maps
//!   sorted. Sorting makes the bytes a function of the value alone.
//! - Two-space indentation; sequences indented under their key.
//! - Strings are plain only when every YAML reader agrees they are strings. Go's YAML 1.1
//!   readers (yaml.v2, sigs.k8s.io/yaml, so kubectl, Flux and Argo CD) read `y`, `no`, `on`,
//!   `1_000`, `0777`, `12:30` and `2024-01-01` as booleans, numbers or times; those, and
//!   anything else that could be misread, are double-quoted.
//! - Multi-line strings are literal blocks (`|`, `|-`, `|+` for the trailing newlines), unless
//!   their content cannot be a literal block, then double-quoted with escapes.

use serde_json::{Map, Value};

/// Renders a whole document (an object) in canonical form, ending with a newline.
#[must_use]
pub fn render(object: &Value) -> String {
    // Rendered files wait in a write until it is pushed and a snapshot holds one per object:
    // written where no doubling slack or gap is left behind.
    String::from(backflow_api::compact::exact_text(|out| match object {
        Value::Object(map) if !map.is_empty() => write_mapping(out, map, 0, Order::TopLevel),
        Value::Array(items) if !items.is_empty() => write_sequence(out, items, 0),
        other => {
            out.push_str(&scalar_or_flow(other));
            out.push('\n');
        }
    }))
}

/// Which key order a mapping is written in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// The top level of a manifest.
    TopLevel,
    /// `metadata`.
    Metadata,
    /// Everything else: sorted.
    Sorted,
}

fn rank(order: Order, key: &str) -> usize {
    let first: &[&str] = match order {
        Order::TopLevel => &["apiVersion", "kind", "metadata"],
        Order::Metadata => &["name", "namespace", "labels", "annotations"],
        Order::Sorted => &[],
    };
    first.iter().position(|k| *k == key).unwrap_or(first.len())
}

/// Keys in the order they are written.
pub(crate) fn ordered_keys(map: &Map<String, Value>, order: Order) -> Vec<&String> {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by(|a, b| rank(order, a).cmp(&rank(order, b)).then_with(|| a.cmp(b)));
    keys
}

/// Writes `map` as block lines, each indented by `indent` spaces.
pub(crate) fn write_mapping(
    out: &mut String,
    map: &Map<String, Value>,
    indent: usize,
    order: Order,
) {
    for key in ordered_keys(map, order) {
        push_indent(out, indent);
        out.push_str(&render_key(key));
        out.push(':');
        let child = if order == Order::TopLevel && key == "metadata" {
            Order::Metadata
        } else {
            Order::Sorted
        };
        write_tail(out, &map[key.as_str()], indent, child);
    }
}

/// Writes what follows `key:` (or `- `) for `value` whose key sits at column `indent`: an inline
/// scalar, a block scalar header and lines, or a newline and the nested block.
pub(crate) fn write_tail(out: &mut String, value: &Value, indent: usize, order: Order) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_mapping(out, map, indent + 2, order);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_sequence(out, items, indent + 2);
        }
        Value::String(s) if block_safe(s) => {
            out.push(' ');
            write_block(out, s, indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar_or_flow(other));
            out.push('\n');
        }
    }
}

/// Writes `items` as block sequence lines with the dash at column `indent`.
pub(crate) fn write_sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        write_item(out, item, indent);
    }
}

/// Writes one sequence item, its dash at column `indent`.
pub(crate) fn write_item(out: &mut String, item: &Value, indent: usize) {
    push_indent(out, indent);
    out.push('-');
    match item {
        Value::Object(map) if !map.is_empty() => {
            // The first entry shares the dash's line: render at indent+2 and replace that
            // line's indentation with the dash.
            let mut nested = String::new();
            write_mapping(&mut nested, map, indent + 2, Order::Sorted);
            out.push(' ');
            out.push_str(&nested[indent + 2..]);
        }
        Value::Array(inner) if !inner.is_empty() => {
            let mut nested = String::new();
            write_sequence(&mut nested, inner, indent + 2);
            out.push(' ');
            out.push_str(&nested[indent + 2..]);
        }
        other => write_tail(out, other, indent, Order::Sorted),
    }
}

fn push_indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A scalar (or empty collection) on one line; other values as flow JSON, which is valid YAML.
fn scalar_or_flow(value: &Value) -> String {
    inline(value).unwrap_or_else(|| flow_json(value))
}

/// The one-line form of a scalar or an empty collection; `None` for non-empty collections.
pub(crate) fn inline(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => scalar_string(s),
        Value::Object(m) if m.is_empty() => "{}".to_string(),
        Value::Array(a) if a.is_empty() => "[]".to_string(),
        _ => return None,
    })
}

/// A flow rendering of any value (used inside flow collections a person wrote).
pub(crate) fn flow_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let parts: Vec<String> = ordered_keys(map, Order::Sorted)
                .into_iter()
                .map(|k| format!("{}: {}", double_quoted(k), flow_json(&map[k.as_str()])))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(flow_json).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::String(s) => double_quoted(s),
        other => inline(other).unwrap_or_default(),
    }
}

/// Numbers as every reader parses them back: integers plain, floats always with a `.` (a YAML
/// 1.1 reader takes `1e3` for a string) and a signed exponent.
fn number(n: &serde_json::Number) -> String {
    let text = n.to_string();
    if n.is_f64() {
        let (mantissa, exponent) = match text.split_once(['e', 'E']) {
            Some((m, e)) => (m.to_string(), Some(e.to_string())),
            None => (text.clone(), None),
        };
        let mantissa = if mantissa.contains('.') {
            mantissa
        } else {
            format!("{mantissa}.0")
        };
        return match exponent {
            Some(e) if e.starts_with('-') || e.starts_with('+') => format!("{mantissa}e{e}"),
            Some(e) => format!("{mantissa}e+{e}"),
            None => mantissa,
        };
    }
    text
}

/// A key: plain when safe, double-quoted otherwise (a key `y` is a boolean to YAML 1.1).
pub(crate) fn render_key(key: &str) -> String {
    if needs_quotes(key) {
        double_quoted(key)
    } else {
        key.to_string()
    }
}

/// A one-line string scalar: plain when safe, double-quoted otherwise.
pub(crate) fn scalar_string(s: &str) -> String {
    if needs_quotes(s) {
        double_quoted(s)
    } else {
        s.to_string()
    }
}

/// Words YAML 1.1 or 1.2 readers resolve to booleans or null (compared case-insensitively,
/// which also covers `True`, `NO`, `Off`, `NULL`).
const RESERVED_WORDS: &[&str] = &[
    "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "=", "<<",
];

/// Whether a one-line string would be read as something other than this string if written
/// plain, by a YAML 1.1 or 1.2 reader. Errs on the side of quoting.
#[must_use]
pub fn needs_quotes(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return true;
    };
    let lower = s.to_ascii_lowercase();
    if RESERVED_WORDS.contains(&lower.as_str()) {
        return true;
    }
    // Numbers in any notation (1_000, 0x1F, 0o17, 0777, 1e3, .5, -1, +1, .inf, 12:30 and
    // 190:20:30 sexagesimal, 2024-01-01 dates) begin with a digit, a sign or a dot.
    let second = s.chars().nth(1);
    let starts_numeric = first.is_ascii_digit()
        || first == '.'
        || ((first == '-' || first == '+')
            && second.is_none_or(|c| c.is_ascii_digit() || c == '.' || c == ' '));
    if starts_numeric {
        return true;
    }
    // Indicators that start flow collections, anchors, aliases, tags, block scalars, quotes,
    // comments, directives or reserved characters.
    if "?:,[]{}#&*!|>'\"%@`\\".contains(first) {
        return true;
    }
    if s.starts_with("---") || s.starts_with("...") || s == "-" {
        return true;
    }
    if first == ' ' || first == '\t' || s.ends_with(' ') || s.ends_with('\t') || s.ends_with(':') {
        return true;
    }
    if s.contains(": ") || s.contains(" #") || s.contains(":\t") || s.contains("\t#") {
        return true;
    }
    s.chars().any(|c| !plain_safe_char(c))
}

/// Characters that may appear in a plain scalar without escaping.
fn plain_safe_char(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        // Line and paragraph separators, next line and the byte-order mark are line breaks or
        // invisible to some readers.
        '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => false,
        c => !c.is_control() && c != '\u{fffe}' && c != '\u{ffff}',
    }
}

/// A double-quoted scalar with escapes for everything that is not printable.
#[must_use]
pub fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` is multi-line and can be written as a literal block that reads back exactly.
pub(crate) fn block_safe(s: &str) -> bool {
    if !s.contains('\n') {
        return false;
    }
    let Some(first) = s.chars().next() else {
        return false;
    };
    // The first line fixes the block's indentation, so it must be content that starts
    // with no whitespace; lines of only whitespace and characters needing escapes cannot be
    // written literally.
    if first == ' ' || first == '\t' || first == '\n' {
        return false;
    }
    if s.chars()
        .any(|c| c != '\n' && c != '\t' && !plain_safe_char(c))
    {
        return false;
    }
    s.split('\n')
        .all(|line| line.is_empty() || !line.chars().all(|c| c == ' ' || c == '\t'))
}

/// Writes a literal block header (`|`, `|-`, `|+`) and its lines at column `indent`.
pub(crate) fn write_block(out: &mut String, s: &str, indent: usize) {
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    out.push_str(match trailing {
        0 => "|-",
        1 => "|",
        _ => "|+",
    });
    out.push('\n');
    for line in body.split('\n') {
        if !line.is_empty() {
            push_indent(out, indent);
            out.push_str(line);
        }
        out.push('\n');
    }
    // The first trailing newline ends the last line; the rest are kept empty lines.
    for _ in 1..trailing {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml11_hazards_are_quoted() {
        for s in [
            "y",
            "Y",
            "n",
            "yes",
            "No",
            "on",
            "OFF",
            "true",
            "null",
            "~",
            "1_000",
            "0x1F",
            "0777",
            "1e3",
            "12:30",
            "2024-01-01",
            "",
            " a",
            "a ",
            "#x",
            "a: b",
            "a #b",
            "-",
            "- a",
            "-1",
            ".5",
            ".inf",
            "*x",
            "&x",
            "!x",
            "%x",
            "@x",
            "`x",
            "[a",
            "{a",
            "|",
            ">",
            "'",
            "\"",
            "a:",
            "---",
            "=",
            "<<",
            "a\tb",
        ] {
            assert!(needs_quotes(s), "{s:?} must be quoted");
        }
        for s in [
            "web",
            "nginx:1.25",
            "--port=80",
            "a-b",
            "v1",
            "app.kubernetes.io/name",
            "a b",
        ] {
            assert!(!needs_quotes(s), "{s:?} can stay plain");
        }
    }

    #[test]
    fn canonical_document() {
        let v = json!({
            "spec": {"z": 1, "a": [{"name": "x", "b": "no"}, "y", [1, 2]], "e": {}, "l": []},
            "metadata": {"annotations": {"b": "1"}, "labels": {"a": "b"}, "namespace": "ns",
                "name": "n", "finalizers": ["f"]},
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "data": {"script": "line 1\n  indented\n", "f": 1.5, "g": 1e30, "h": 1.0},
        });
        let text = render(&v);
        assert_eq!(
            text,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"n\"\n  namespace: ns\n  labels:\n    a: b\n  annotations:\n    b: \"1\"\n  finalizers:\n    - f\ndata:\n  f: 1.5\n  g: 1.0e+30\n  h: 1.0\n  script: |\n    line 1\n      indented\nspec:\n  a:\n    - b: \"no\"\n      name: x\n    - \"y\"\n    - - 1\n      - 2\n  e: {}\n  l: []\n  z: 1\n"
        );
        let back: Value = yaml_serde::from_str(&text).expect("parses");
        assert_eq!(back, v);
    }

    #[test]
    fn chomping() {
        for s in ["a\nb", "a\nb\n", "a\nb\n\n\n", "a\n\nb", "x\n  y\n\tz"] {
            let v = json!({"k": s});
            let text = render(&v);
            let back: Value = yaml_serde::from_str(&text).expect("parses");
            assert_eq!(back, v, "{text}");
        }
    }
}
