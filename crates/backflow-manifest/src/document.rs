//! A YAML file split into documents, with each document's bytes, value and editing hazards.
//!
//! The split comes from yaml-edit's lossless syntax tree (so a `---` inside a block scalar is
//! not a separator) and is cross-checked against a plain YAML parse of the whole file: if the
//! two disagree the file is refused rather than edited on a guess.

use std::ops::Range;
use std::str::FromStr;

use rowan::ast::AstNode;
use serde_json::Value;
use yaml_edit::{SyntaxKind, YamlFile};

use crate::error::ManifestError;

/// A syntax node of yaml-edit's tree.
pub(crate) type Node = rowan::SyntaxNode<yaml_edit::Lang>;

/// One document of a file.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    /// Its bytes in the file, including a leading `---`, comments and a trailing `...`.
    pub range: Range<usize>,
    /// Its value; `Null` for an empty or comment-only document.
    pub value: Value,
    /// YAML features that make an in-place edit unsafe (`anchors`, `aliases`, ...).
    pub hazards: Vec<&'static str>,
    /// Its syntax node, with byte offsets into the whole file.
    pub node: Node,
}

/// A parsed file.
#[derive(Debug, Clone)]
pub(crate) struct ParsedFile {
    /// The whole text.
    pub text: String,
    /// Its documents, in order.
    pub docs: Vec<Doc>,
}

/// Reads bytes as UTF-8 text, refusing anything else.
pub(crate) fn as_text<'a>(path: &str, bytes: &'a [u8]) -> Result<&'a str, ManifestError> {
    std::str::from_utf8(bytes).map_err(|e| ManifestError::InvalidYaml {
        path: path.to_string(),
        reason: format!("not UTF-8: {e}"),
    })
}

/// The syntax tree of `text`; refuses text the parser reports errors for.
pub(crate) fn syntax(path: &str, text: &str) -> Result<Node, ManifestError> {
    let file = YamlFile::from_str(text).map_err(|e| ManifestError::InvalidYaml {
        path: path.to_string(),
        reason: e.to_string(),
    })?;
    let root = file.syntax().clone();
    // The tree must be lossless, or byte ranges taken from it would cut the wrong bytes.
    if root.text() != text {
        return Err(ManifestError::InvalidYaml {
            path: path.to_string(),
            reason: "the file cannot be parsed losslessly".into(),
        });
    }
    Ok(root)
}

/// Parses one value of YAML text with the serde parser.
pub(crate) fn parse_value(path: &str, text: &str) -> Result<Value, ManifestError> {
    yaml_serde::from_str::<Value>(text).map_err(|e| ManifestError::InvalidYaml {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
thread_local! {
    /// How many files this thread parsed: tests count the parses a plan costs.
    pub(crate) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `check` (a debug build's cross-check) without counting its parses in [`PARSES`]: they
/// are no cost of the release build.
#[cfg(debug_assertions)]
pub(crate) fn uncounted<T>(check: impl FnOnce() -> T) -> T {
    #[cfg(test)]
    let before = PARSES.with(std::cell::Cell::get);
    let result = check();
    #[cfg(test)]
    PARSES.with(|n| n.set(before));
    result
}

/// Splits and parses a file.
pub(crate) fn parse_file(path: &str, bytes: &[u8]) -> Result<ParsedFile, ManifestError> {
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    let text = as_text(path, bytes)?;
    let root = syntax(path, text)?;
    let mut docs = Vec::new();
    for node in root.children().filter(|n| n.kind() == SyntaxKind::DOCUMENT) {
        let range = to_range(&node);
        let value = parse_value(path, &text[range.clone()])?;
        docs.push(Doc {
            range,
            value,
            hazards: hazards(&node),
            node,
        });
    }
    // Cross-check the split with the serde parser's view of the whole file.
    let mut whole = Vec::new();
    for de in yaml_serde::Deserializer::from_str(text) {
        let value = <Value as serde::Deserialize>::deserialize(de).map_err(|e| {
            ManifestError::InvalidYaml {
                path: path.to_string(),
                reason: e.to_string(),
            }
        })?;
        whole.push(value);
    }
    let ours: Vec<&Value> = docs
        .iter()
        .map(|d| &d.value)
        .filter(|v| !v.is_null())
        .collect();
    let theirs: Vec<&Value> = whole.iter().filter(|v| !v.is_null()).collect();
    if ours != theirs {
        return Err(ManifestError::InvalidYaml {
            path: path.to_string(),
            reason: "its documents cannot be told apart reliably".into(),
        });
    }
    Ok(ParsedFile {
        text: text.to_string(),
        docs,
    })
}

/// A node's byte range.
pub(crate) fn to_range(node: &Node) -> Range<usize> {
    let r = node.text_range();
    usize::from(r.start())..usize::from(r.end())
}

/// The YAML features in a document that an in-place edit cannot keep correct.
pub(crate) fn hazards(node: &Node) -> Vec<&'static str> {
    let mut found = Vec::new();
    let mut note = |what: &'static str| {
        if !found.contains(&what) {
            found.push(what);
        }
    };
    for element in node.descendants_with_tokens() {
        match element.kind() {
            SyntaxKind::ANCHOR => note("anchors"),
            SyntaxKind::ALIAS | SyntaxKind::REFERENCE => note("aliases"),
            SyntaxKind::MERGE_KEY => note("merge keys"),
            SyntaxKind::TAG | SyntaxKind::TAGGED_NODE => note("tags"),
            SyntaxKind::DIRECTIVE => note("directives"),
            SyntaxKind::ERROR => note("syntax errors"),
            _ => {}
        }
    }
    found
}
