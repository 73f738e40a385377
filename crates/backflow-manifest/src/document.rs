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
    if !is_whole_text(&docs, text) {
        cross_check(path, text, &docs)?;
    }
    Ok(ParsedFile {
        text: text.to_string(),
        docs,
    })
}

/// Whether `docs` is one document spanning all of `text`. Its value was parsed from all of
/// `text` then, and the serde parser refuses text holding more than one document there, so the
/// whole-file [`cross_check`] could only agree (it was a third of a parse).
fn is_whole_text(docs: &[Doc], text: &str) -> bool {
    matches!(docs, [only] if only.range == (0..text.len()))
}

/// Checks the split against the serde parser's view of the whole file.
fn cross_check(path: &str, text: &str, docs: &[Doc]) -> Result<(), ManifestError> {
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
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Files the cross-check is skipped for (one document spanning the text) are files it
    /// accepts, and the serde parser refuses a single value of text with two documents: the
    /// ground the skip stands on.
    #[test]
    fn the_skipped_cross_check_would_have_agreed() {
        assert!(parse_value("f", "a: 1\n---\nb: 2\n").is_err());
        assert!(parse_value("f", "---\na: 1\n---\n").is_err());
        let files = [
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
            "# a comment first\napiVersion: v1\nkind: ConfigMap\n",
            "---\napiVersion: v1\nkind: ConfigMap\n...\n",
            "data:\n  script: |\n    echo one\n    ---\n    echo two\n",
            "labels: &l {a: 1}\nannotations: *l\n",
            "# only a comment\n",
            "",
            "a: 1\n---\nb: 2\n",
            "a: 1\n---\n",
        ];
        let mut skipped = 0;
        for text in files {
            let file = parse_file("f.yaml", text.as_bytes());
            let Ok(file) = file else { continue };
            if is_whole_text(&file.docs, text) {
                skipped += 1;
                cross_check("f.yaml", text, &file.docs).expect(text);
            }
        }
        assert!(skipped >= 4, "the common files skip it ({skipped})");
    }
}
