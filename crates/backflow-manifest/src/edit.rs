//! In-place edits of one document of a YAML file.
//!
//! yaml-edit's lossless syntax tree locates every key, value and list item by byte range; the
//! edit itself is a set of splices computed from the difference between what the document holds
//! and the object it should hold. Splicing (rather than yaml-edit's own setters) keeps full
//! control of the bytes written: new values use the same quoting and layout as new files
//! ([`crate::yaml`]), so YAML 1.1 hazards such as `y` or `1_000` are always quoted.
//!
//! What an edit changes:
//! - a changed scalar: only its own bytes (a comment after it stays; a quoted value keeps its
//!   quote style);
//! - a key the object no longer has: its lines; a new key: lines appended after the mapping's
//!   last entry (new keys sorted among themselves);
//! - known Kubernetes lists (containers, env, volumes, ports, volumeMounts, conditions, ...)
//!   and a kustomization's `images`, `replicas` and generators:
//!   items matched by their merge key, so one container's change touches that container only;
//!   other lists are replaced as a whole when they differ;
//! - anything that cannot be changed in place (a flow collection, a block scalar, a change of
//!   type): the smallest enclosing entry or item is rendered again.
//!
//! Every other byte of the document, and every other document of the file, stays as it was.
//! The result is parsed back and must equal the object; if the in-place splices do not get
//! there, the document's body is rendered canonically instead, and if even that does not read
//! back, nothing is written.

use std::collections::{BTreeMap, BTreeSet};

use backflow_branch::merge_keys;
use serde_json::{Map, Value};
use yaml_edit::SyntaxKind;

use crate::document::{Doc, Node, ParsedFile, parse_file, parse_value, to_range};
use crate::error::ManifestError;
use crate::yaml::{self, Order};

/// Edits document `doc` of the file at `path` (bytes `bytes`) so it reads `desired`.
///
/// Returns the new bytes of the whole file; the same bytes when the document already reads
/// `desired`.
pub fn edit_document(
    path: &str,
    bytes: &[u8],
    doc: usize,
    desired: &Value,
) -> Result<Vec<u8>, ManifestError> {
    Ok(edit_parsed(path, bytes, doc, |_| desired.clone())?
        .map_or_else(|| bytes.to_vec(), |e| e.bytes))
}

/// A file as an edit left it, with the parse that checked it reads back.
#[derive(Debug)]
pub(crate) struct EditedFile {
    /// The new bytes of the whole file.
    pub bytes: Vec<u8>,
    /// Their parse.
    pub parsed: ParsedFile,
}

/// As [`edit_document`], with the desired value made from the document's current one (the
/// planner leaves out the defaults the document does not hold); `None` when the document
/// already reads `desired`.
pub(crate) fn edit_parsed(
    path: &str,
    bytes: &[u8],
    doc: usize,
    desired: impl FnOnce(&Value) -> Value,
) -> Result<Option<EditedFile>, ManifestError> {
    let file = parse_file(path, bytes)?;
    let Some(current) = file.docs.get(doc) else {
        return Err(ManifestError::NoSuchDocument {
            path: path.to_string(),
            doc,
        });
    };
    let desired = &desired(&current.value);
    if current.value == *desired {
        return Ok(None);
    }
    refuse_unsafe(path, doc, current)?;
    let try_candidate = |candidate: String| {
        reads_back(path, &candidate, &file, doc, desired).map(|p| (candidate, p))
    };
    let edited = in_place(&file, doc, desired)
        .and_then(try_candidate)
        .or_else(|| try_candidate(rewritten(&file, doc, desired)));
    match edited {
        Some((candidate, parsed)) => Ok(Some(EditedFile {
            bytes: candidate.into_bytes(),
            parsed,
        })),
        None => Err(ManifestError::EditMismatch {
            path: path.to_string(),
            doc,
            reason: "even a full rewrite of the document does not read back".into(),
        }),
    }
}

/// Refuses a document an edit cannot keep correct: one with anchors, aliases, tags and the
/// like, or an encrypted one.
fn refuse_unsafe(path: &str, doc: usize, current: &Doc) -> Result<(), ManifestError> {
    if !current.hazards.is_empty() {
        return Err(ManifestError::UnsafeDocument {
            path: path.to_string(),
            doc,
            feature: current.hazards.join(", "),
        });
    }
    if current.value.get("sops").is_some() {
        return Err(ManifestError::EncryptedDocument {
            path: path.to_string(),
            doc,
        });
    }
    Ok(())
}

/// The newline document `doc` uses.
fn newline_of(file: &ParsedFile, doc: usize) -> &'static str {
    if file.text[file.docs[doc].range.clone()].contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// Document `doc`'s top-level mapping, if its body is one.
fn root_mapping(current: &Doc) -> Option<Node> {
    current
        .node
        .children()
        .find(|n| n.kind() == SyntaxKind::MAPPING)
}

/// The file with document `doc` edited in place to read `desired` (only the lines whose values
/// change), when its body and `desired` are mappings and the edit can be made.
fn in_place(file: &ParsedFile, doc: usize, desired: &Value) -> Option<String> {
    let current = &file.docs[doc];
    let map = root_mapping(current)?;
    let mut editor = Editor {
        text: &file.text,
        splices: Vec::new(),
        newline: newline_of(file, doc),
    };
    editor
        .mapping(&map, current.value.as_object()?, desired.as_object()?, true)
        .ok()?;
    apply(&file.text, &editor.splices)
}

/// The file with document `doc`'s body rendered canonically from `desired`, keeping the
/// document's framing (leading `---` and comments before the body, a trailing `...`).
fn rewritten(file: &ParsedFile, doc: usize, desired: &Value) -> String {
    let text = file.text.as_str();
    let body = match root_mapping(&file.docs[doc]) {
        Some(map) => to_range(&map),
        None => body_range(file, doc),
    };
    let mut rendered = yaml::render(desired);
    if !text[body.clone()].ends_with('\n') && body.end == text.len() {
        rendered.pop();
    }
    let rendered = rendered.replace('\n', newline_of(file, doc));
    format!("{}{}{}", &text[..body.start], rendered, &text[body.end..])
}

/// The bytes of a document that hold its value: after a leading `---` line and before a
/// trailing `...`.
fn body_range(file: &ParsedFile, doc: usize) -> std::ops::Range<usize> {
    let range = file.docs[doc].range.clone();
    let text = &file.text[range.clone()];
    let mut start = range.start;
    if text.starts_with("---") {
        start += text.find('\n').map_or(text.len(), |i| i + 1);
    }
    let mut end = range.end;
    if let Some(i) = text.rfind("\n...") {
        end = range.start + i + 1;
    }
    start.min(end)..end
}

/// The parse of `candidate` when it still splits into the same number of documents, document
/// `doc` reads `desired`, and every other document reads as before; `None` otherwise.
fn reads_back(
    path: &str,
    candidate: &str,
    before: &ParsedFile,
    doc: usize,
    desired: &Value,
) -> Option<ParsedFile> {
    let after = parse_file(path, candidate.as_bytes()).ok()?;
    if after.docs.len() != before.docs.len() {
        return None;
    }
    let same = after
        .docs
        .iter()
        .zip(&before.docs)
        .enumerate()
        .all(|(i, (a, b))| {
            if i == doc {
                a.value == *desired
            } else {
                a.value == b.value && after.text[a.range.clone()] == before.text[b.range.clone()]
            }
        });
    same.then_some(after)
}

/// Removes document `doc` of a file. `None` when no document with content is left, so the file
/// should be removed.
///
/// Removing the first document also drops the `---` that would now lead the file.
pub fn remove_document(
    path: &str,
    bytes: &[u8],
    doc: usize,
) -> Result<Option<Vec<u8>>, ManifestError> {
    let file = parse_file(path, bytes)?;
    let Some(target) = file.docs.get(doc) else {
        return Err(ManifestError::NoSuchDocument {
            path: path.to_string(),
            doc,
        });
    };
    let others_hold_content = file
        .docs
        .iter()
        .enumerate()
        .any(|(i, d)| i != doc && !d.value.is_null());
    if !others_hold_content {
        return Ok(None);
    }
    let text = file.text.as_str();
    let head = &text[..target.range.start];
    let mut rest = &text[target.range.end..];
    // Documents before it with no content do not count: the removed one was the first.
    if file.docs[..doc].iter().all(|d| d.value.is_null())
        && let Some(after_marker) = rest.strip_prefix("---")
    {
        let eol = after_marker
            .find('\n')
            .map_or(after_marker.len(), |i| i + 1);
        let line = after_marker[..eol].trim();
        if line.is_empty() || line.starts_with('#') {
            rest = &after_marker[eol..];
        }
    }
    let result = format!("{head}{rest}");
    // The other documents must read exactly as before.
    let expected: Vec<&Value> = file
        .docs
        .iter()
        .enumerate()
        .filter(|(i, d)| *i != doc && !d.value.is_null())
        .map(|(_, d)| &d.value)
        .collect();
    let after = parse_file(path, result.as_bytes())?;
    let got: Vec<&Value> = after
        .docs
        .iter()
        .map(|d| &d.value)
        .filter(|v| !v.is_null())
        .collect();
    if got != expected {
        return Err(ManifestError::EditMismatch {
            path: path.to_string(),
            doc,
            reason: "removing the document would change the others".into(),
        });
    }
    Ok(Some(result.into_bytes()))
}

/// Appends a canonical document for `desired` to a file, after a `---`.
#[must_use]
pub fn append_document(bytes: &[u8], desired: &Value) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let rendered = yaml::render(desired);
    if text.trim().is_empty() {
        return rendered.into_bytes();
    }
    let mut out = text.into_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(&rendered);
    out.into_bytes()
}

/// One replacement of a byte range.
#[derive(Debug)]
struct Splice {
    start: usize,
    end: usize,
    text: String,
}

/// Applies non-overlapping splices; `None` if any overlap (the caller falls back).
fn apply(text: &str, splices: &[Splice]) -> Option<String> {
    let mut order: Vec<&Splice> = splices.iter().collect();
    order.sort_by_key(|s| (s.start, s.end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for s in order {
        if s.start < at || s.end < s.start || s.end > text.len() {
            return None;
        }
        out.push_str(text.get(at..s.start)?);
        out.push_str(&s.text);
        at = s.end;
    }
    out.push_str(text.get(at..)?);
    Some(out)
}

/// "This node cannot be edited in place; render its enclosing entry or item again."
struct Replace;

struct Editor<'t> {
    text: &'t str,
    splices: Vec<Splice>,
    newline: &'static str,
}

fn child(node: &Node, kind: SyntaxKind) -> Option<Node> {
    node.children().find(|n| n.kind() == kind)
}

/// The node a VALUE (or `SEQUENCE_ENTRY`) holds: a scalar, mapping or sequence.
fn content(node: &Node) -> Option<Node> {
    node.children().find(|n| {
        matches!(
            n.kind(),
            SyntaxKind::SCALAR
                | SyntaxKind::MAPPING
                | SyntaxKind::SEQUENCE
                | SyntaxKind::ALIAS
                | SyntaxKind::TAGGED_NODE
        )
    })
}

fn is_flow(node: &Node) -> bool {
    node.first_token()
        .is_some_and(|t| matches!(t.kind(), SyntaxKind::LEFT_BRACE | SyntaxKind::LEFT_BRACKET))
}

fn is_block_scalar(node: &Node) -> bool {
    node.first_token()
        .is_some_and(|t| matches!(t.kind(), SyntaxKind::PIPE | SyntaxKind::GREATER))
}

impl Editor<'_> {
    fn line_start(&self, offset: usize) -> usize {
        self.text[..offset].rfind('\n').map_or(0, |i| i + 1)
    }

    fn column(&self, offset: usize) -> usize {
        offset - self.line_start(offset)
    }

    /// Whether only spaces precede `offset` on its line.
    fn starts_line(&self, offset: usize) -> bool {
        self.text[self.line_start(offset)..offset]
            .chars()
            .all(|c| c == ' ')
    }

    fn splice(&mut self, start: usize, end: usize, text: String) {
        let text = if self.newline == "\n" {
            text
        } else {
            text.replace('\n', self.newline)
        };
        self.splices.push(Splice { start, end, text });
    }

    /// Removes the whole lines of a node that starts its line.
    fn remove_lines(&mut self, node: &Node) -> Result<(), Replace> {
        let range = to_range(node);
        if !self.starts_line(range.start) {
            return Err(Replace);
        }
        let start = self.line_start(range.start);
        self.splice(start, range.end, String::new());
        Ok(())
    }

    /// Replaces a node's bytes with `rendered` (which ends with a newline), keeping whether the
    /// node ended with one.
    fn replace_node(&mut self, node: &Node, mut rendered: String) {
        let range = to_range(node);
        if !self.text[range.clone()].ends_with('\n') {
            rendered.pop();
        }
        self.splice(range.start, range.end, rendered);
    }

    /// Renders a mapping entry again with its original key text.
    fn replace_entry(&mut self, entry: &Node, value: &Value, order: Order) {
        let Some(key) = child(entry, SyntaxKind::KEY) else {
            return;
        };
        let range = to_range(entry);
        let mut out = self.text[to_range(&key)].to_string();
        out.push(':');
        yaml::write_tail(&mut out, value, self.column(range.start), order);
        self.replace_node(entry, out);
    }

    /// Renders a sequence item again.
    fn replace_item(&mut self, item: &Node, value: &Value) {
        let indent = self.column(to_range(item).start);
        let mut out = String::new();
        yaml::write_item(&mut out, value, indent);
        self.replace_node(item, out[indent..].to_string());
    }

    /// The key of a mapping entry as a string.
    fn key_of(&self, entry: &Node) -> Option<String> {
        let key = child(entry, SyntaxKind::KEY)?;
        match parse_value("", &self.text[to_range(&key)]).ok()? {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    fn mapping(
        &mut self,
        node: &Node,
        cur: &Map<String, Value>,
        des: &Map<String, Value>,
        top: bool,
    ) -> Result<(), Replace> {
        if is_flow(node) || des.is_empty() {
            return Err(Replace);
        }
        let entries: Vec<Node> = node
            .children()
            .filter(|n| n.kind() == SyntaxKind::MAPPING_ENTRY)
            .collect();
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Err(Replace);
        };
        let mut seen = BTreeSet::new();
        for entry in &entries {
            let key = self.key_of(entry).ok_or(Replace)?;
            if !seen.insert(key.clone()) {
                return Err(Replace);
            }
            let order = if top && key == "metadata" {
                Order::Metadata
            } else {
                Order::Sorted
            };
            match (cur.get(&key), des.get(&key)) {
                (_, None) => self.remove_lines(entry)?,
                (Some(c), Some(d)) if c == d => {}
                (Some(c), Some(d)) => {
                    if self.entry_value(entry, &key, c, d).is_err() {
                        self.replace_entry(entry, d, order);
                    }
                }
                (None, Some(_)) => return Err(Replace),
            }
        }
        let added: Map<String, Value> = des
            .iter()
            .filter(|(k, _)| !seen.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !added.is_empty() {
            let indent = self.column(to_range(first).start);
            let end = to_range(last).end;
            let mut out = String::new();
            if !self.text[..end].ends_with('\n') {
                out.push('\n');
            }
            let order = if top { Order::TopLevel } else { Order::Sorted };
            yaml::write_mapping(&mut out, &added, indent, order);
            self.splice(end, end, out);
        }
        Ok(())
    }

    fn entry_value(
        &mut self,
        entry: &Node,
        key: &str,
        cur: &Value,
        des: &Value,
    ) -> Result<(), Replace> {
        let value = child(entry, SyntaxKind::VALUE).ok_or(Replace)?;
        let node = content(&value).ok_or(Replace)?;
        self.value(&node, key, cur, des)
    }

    /// Edits a value node in place, or asks for its entry or item to be rendered again.
    fn value(&mut self, node: &Node, key: &str, cur: &Value, des: &Value) -> Result<(), Replace> {
        match (node.kind(), cur, des) {
            (SyntaxKind::SCALAR, c, d) if !c.is_object() && !c.is_array() => {
                if is_block_scalar(node) {
                    return Err(Replace);
                }
                let old = &self.text[to_range(node)];
                let new = match d {
                    Value::String(s) if s.contains('\n') => return Err(Replace),
                    Value::String(s) => styled_string(old, s),
                    Value::Object(_) | Value::Array(_) => return Err(Replace),
                    other => yaml::inline(other).ok_or(Replace)?,
                };
                let range = to_range(node);
                self.splice(range.start, range.end, new);
                Ok(())
            }
            (SyntaxKind::MAPPING, Value::Object(c), Value::Object(d)) => {
                self.mapping(node, c, d, false)
            }
            (SyntaxKind::SEQUENCE, Value::Array(c), Value::Array(d)) => {
                self.sequence(node, key, c, d)
            }
            _ => Err(Replace),
        }
    }

    fn sequence(
        &mut self,
        node: &Node,
        key: &str,
        cur: &[Value],
        des: &[Value],
    ) -> Result<(), Replace> {
        if is_flow(node) || des.is_empty() {
            return Err(Replace);
        }
        let items: Vec<Node> = node
            .children()
            .filter(|n| n.kind() == SyntaxKind::SEQUENCE_ENTRY)
            .collect();
        if items.len() != cur.len() {
            return Err(Replace);
        }
        let merge_key = merge_keys(key)
            .iter()
            .find(|k| keyed(cur, k).is_some() && keyed(des, k).is_some())
            .ok_or(Replace)?;
        let (Some(cur_keys), Some(des_keys)) = (keyed(cur, merge_key), keyed(des, merge_key))
        else {
            return Err(Replace);
        };
        let cur_at: BTreeMap<&String, usize> =
            cur_keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
        let des_set: BTreeSet<&String> = des_keys.iter().collect();
        // Items both sides hold must keep their relative order, or matching would move bytes
        // around; a reordered list is rendered again.
        let kept_cur: Vec<&String> = cur_keys.iter().filter(|k| des_set.contains(k)).collect();
        let kept_des: Vec<&String> = des_keys.iter().filter(|k| cur_at.contains_key(k)).collect();
        if kept_cur != kept_des {
            return Err(Replace);
        }
        let first = items.first().ok_or(Replace)?;
        let indent = self.column(to_range(first).start);
        if !self.starts_line(to_range(first).start) {
            return Err(Replace);
        }
        for (i, k) in cur_keys.iter().enumerate() {
            if !des_set.contains(k) {
                self.remove_lines(&items[i])?;
            }
        }
        let mut inserts: BTreeMap<usize, String> = BTreeMap::new();
        let mut anchor = self.line_start(to_range(first).start);
        for (j, k) in des_keys.iter().enumerate() {
            if let Some(&i) = cur_at.get(k) {
                let item = &items[i];
                anchor = to_range(item).end;
                if cur[i] == des[j] {
                    continue;
                }
                let edited = match (content(item), &cur[i], &des[j]) {
                    (Some(m), Value::Object(c), Value::Object(d))
                        if m.kind() == SyntaxKind::MAPPING =>
                    {
                        self.mapping(&m, c, d, false)
                    }
                    _ => Err(Replace),
                };
                if edited.is_err() {
                    self.replace_item(item, &des[j]);
                }
            } else {
                let out = inserts.entry(anchor).or_default();
                if !self.text[..anchor].ends_with('\n') && out.is_empty() && anchor > 0 {
                    out.push('\n');
                }
                yaml::write_item(out, &des[j], indent);
            }
        }
        for (at, text) in inserts {
            self.splice(at, at, text);
        }
        Ok(())
    }
}

/// The merge-key values of every item, if every item is a mapping with a unique scalar value
/// under `key`.
fn keyed(items: &[Value], key: &str) -> Option<Vec<String>> {
    let mut keys = Vec::with_capacity(items.len());
    let mut seen = BTreeSet::new();
    for item in items {
        let k = match item.get(key)? {
            Value::String(s) => format!("s:{s}"),
            Value::Number(n) => format!("n:{n}"),
            _ => return None,
        };
        if !seen.insert(k.clone()) {
            return None;
        }
        keys.push(k);
    }
    Some(keys)
}

/// A changed one-line string, written in the quote style the old value used where that is
/// safe, else in the canonical style.
fn styled_string(old: &str, new: &str) -> String {
    if old.starts_with('"') {
        return yaml::double_quoted(new);
    }
    if old.starts_with('\'') && !new.chars().any(char::is_control) {
        return format!("'{}'", new.replace('\'', "''"));
    }
    yaml::scalar_string(new)
}
