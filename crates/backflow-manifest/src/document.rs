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

/// The largest file read, in bytes.
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// The most documents one file may hold.
pub const MAX_DOCUMENTS: usize = 20_000;

/// How many nodes one document's aliases may add when expanded, beyond
/// [`ALIAS_EXPANSION_RATIO`] times the nodes the document is written with: a small file whose
/// aliases expand a hundred thousand times would otherwise take gigabytes (Go's yaml.v3, which
/// kube-apiserver's decoder builds on, limits the share of alias-expanded nodes the same way).
pub const MAX_ALIAS_NODES: u64 = 100_000;

/// See [`MAX_ALIAS_NODES`].
pub const ALIAS_EXPANSION_RATIO: u64 = 4;

/// The most aliases one file may use, counted in its text before anything is parsed: the
/// parse of a file of a hundred thousand aliases takes more memory than the file by far.
pub const MAX_ALIASES: usize = 10_000;

/// How many aliases `text` may use, counted generously (a `*name` after a space, a line start
/// or a flow indicator; one inside a quoted string counts too).
fn aliases_in(text: &[u8]) -> usize {
    let mut count = 0;
    let mut before = b'\n';
    for (i, &b) in text.iter().enumerate() {
        if b == b'*'
            && matches!(
                before,
                b' ' | b'\t' | b'\n' | b'[' | b'{' | b',' | b':' | b'-'
            )
            && text
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphanumeric() || matches!(n, b'_' | b'-' | b'.'))
        {
            count += 1;
        }
        before = b;
    }
    count
}

/// Refuses `path` when `found` (of `what`) is over `limit`.
fn at_most(
    path: &str,
    what: &'static str,
    found: usize,
    limit: usize,
) -> Result<(), ManifestError> {
    if found > limit {
        return Err(ManifestError::TooLarge {
            path: path.to_string(),
            what,
            found: found as u64,
            limit: limit as u64,
        });
    }
    Ok(())
}

/// Refuses a file too large to read, before it is parsed.
fn check_size(path: &str, bytes: &[u8]) -> Result<(), ManifestError> {
    at_most(path, "the file is too large", bytes.len(), MAX_FILE_BYTES)?;
    at_most(
        path,
        "the file uses too many aliases",
        aliases_in(bytes),
        MAX_ALIASES,
    )
}

/// How many nodes `doc` is written with, and how many its aliases add when expanded (each
/// alias adds what its anchor's node holds, aliases inside it expanded too). Walked without
/// recursion: the nesting depth is not checked yet.
fn alias_growth(doc: &Node) -> (u64, u64) {
    use rowan::{NodeOrToken, WalkEvent};
    let mut written = 0u64;
    // Per open node: the nodes it holds (expanded), and the anchor it carries.
    let mut open: Vec<(u64, Option<String>)> = vec![(0, None)];
    let mut anchors: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for event in doc.preorder_with_tokens() {
        match event {
            WalkEvent::Enter(NodeOrToken::Node(_)) => {
                written += 1;
                open.push((1, None));
            }
            WalkEvent::Enter(NodeOrToken::Token(t)) => {
                let name = || t.text().trim_start_matches(['&', '*']).trim().to_string();
                match t.kind() {
                    SyntaxKind::ANCHOR => {
                        if let Some(top) = open.last_mut() {
                            top.1 = Some(name());
                        }
                    }
                    SyntaxKind::REFERENCE => {
                        let adds = anchors.get(&name()).copied().unwrap_or(1);
                        if let Some(top) = open.last_mut() {
                            top.0 = top.0.saturating_add(adds);
                        }
                    }
                    _ => {}
                }
            }
            WalkEvent::Leave(NodeOrToken::Node(_)) => {
                let Some((size, anchor)) = open.pop() else {
                    continue;
                };
                if let Some(anchor) = anchor {
                    anchors.insert(anchor, size);
                }
                if let Some(top) = open.last_mut() {
                    top.0 = top.0.saturating_add(size);
                }
            }
            WalkEvent::Leave(NodeOrToken::Token(_)) => {}
        }
    }
    let expanded = open.first().map_or(0, |o| o.0);
    (written, expanded.saturating_sub(written))
}

/// Refuses a document whose aliases would expand to far more than it is written with.
fn check_aliases(path: &str, doc: &Node) -> Result<(), ManifestError> {
    let (written, added) = alias_growth(doc);
    if added > MAX_ALIAS_NODES && added > written.saturating_mul(ALIAS_EXPANSION_RATIO) {
        return Err(ManifestError::TooLarge {
            path: path.to_string(),
            what: "its aliases expand to too many nodes",
            found: added,
            limit: MAX_ALIAS_NODES.max(written.saturating_mul(ALIAS_EXPANSION_RATIO)),
        });
    }
    Ok(())
}

/// Splits and parses a file, within the limits above.
pub(crate) fn parse_file(path: &str, bytes: &[u8]) -> Result<ParsedFile, ManifestError> {
    #[cfg(test)]
    PARSES.with(|n| n.set(n.get() + 1));
    check_size(path, bytes)?;
    let text = as_text(path, bytes)?;
    let root = syntax(path, text)?;
    let documents = root
        .children()
        .filter(|n| n.kind() == SyntaxKind::DOCUMENT)
        .count();
    at_most(
        path,
        "the file holds too many documents",
        documents,
        MAX_DOCUMENTS,
    )?;
    let mut docs = Vec::new();
    for node in root.children().filter(|n| n.kind() == SyntaxKind::DOCUMENT) {
        check_aliases(path, &node)?;
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

    /// A small file whose aliases would expand a hundred thousand times is refused before
    /// expansion; anchors used a few times, and large files without aliases, are read.
    #[test]
    fn an_alias_bomb_is_refused_before_it_is_expanded() {
        let mut bomb =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nx: &a [");
        bomb.push_str(&vec!["\"v\""; 64].join(", "));
        bomb.push_str("]\ny:\n");
        for _ in 0..5_000 {
            bomb.push_str("  - *a\n");
        }
        let Err(refused) = parse_file("bomb.yaml", bomb.as_bytes()) else {
            panic!("the alias bomb was read");
        };
        assert!(
            matches!(refused, ManifestError::TooLarge { .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("aliases"), "{refused}");

        let (written, added) = {
            let root = syntax("f", &bomb).expect("tree");
            let doc = root
                .children()
                .find(|n| n.kind() == SyntaxKind::DOCUMENT)
                .expect("doc");
            alias_growth(&doc)
        };
        assert!(
            added > 5_000 * 64,
            "every alias adds its anchor's nodes: {added} over {written}"
        );
        // Ten times as many aliases are refused from the text alone.
        bomb.push_str(&"  - *a\n".repeat(MAX_ALIASES));
        let Err(refused) = parse_file("bomb.yaml", bomb.as_bytes()) else {
            panic!("the alias bomb was read");
        };
        assert!(
            refused.to_string().contains("too many aliases"),
            "{refused}"
        );
        assert_eq!(
            aliases_in(b"a: \"*not\" # 2*3\nb: [*x, *y]\nc: *z\n- *w\n"),
            4
        );

        let few = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: &l {a: \"1\"}\n  annotations: *l\n";
        assert!(parse_file("few.yaml", few.as_bytes()).is_ok());
        let mut large = String::new();
        for i in 0..3_000 {
            large.push_str(&format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  k: v\n"
            ));
        }
        assert_eq!(
            parse_file("large.yaml", large.as_bytes())
                .expect("read")
                .docs
                .len(),
            3_000
        );
    }

    #[test]
    fn too_many_documents_or_bytes_are_refused() {
        let many = "---\na: 1\n".repeat(MAX_DOCUMENTS + 1);
        let Err(refused) = parse_file("many.yaml", many.as_bytes()) else {
            panic!("read");
        };
        assert!(
            refused.to_string().contains("too many documents"),
            "{refused}"
        );
        let huge = vec![b'#'; MAX_FILE_BYTES + 1];
        let Err(refused) = parse_file("huge.yaml", &huge) else {
            panic!("read");
        };
        assert!(refused.to_string().contains("too large"), "{refused}");
    }

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
