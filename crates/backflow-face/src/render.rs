//! The face's answers as text for a terminal: what the CLI prints.

use std::fmt::Write as _;

use crate::folder_diff::{DiffState, FolderDiff};
use crate::story::Story;
use crate::why::Why;

/// A story as a table, newest first.
#[must_use]
pub fn story(story: &Story) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", story.object.describe());
    let rows: Vec<Vec<String>> = story
        .entries
        .iter()
        .map(|e| {
            vec![
                e.at.clone(),
                format!("{:?}", e.kind),
                e.who.clone(),
                e.commit.as_deref().map(short_commit).unwrap_or_default(),
                e.detail(),
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "Nothing recorded about it.");
    } else {
        out.push_str(&text_table(
            &["TIME", "WHAT", "WHO", "COMMIT", "DETAIL"],
            &rows,
        ));
    }
    gaps(&mut out, &story.gaps);
    out
}

/// Each field's last writer.
#[must_use]
pub fn why(why: &Why) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", why.story.object.describe());
    let rows: Vec<Vec<String>> = why
        .fields
        .iter()
        .map(|f| {
            vec![
                f.field.clone(),
                f.writer.clone(),
                f.at.clone().unwrap_or_default(),
                f.commit.as_deref().map(short_commit).unwrap_or_default(),
                f.how.clone(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&text_table(
            &["FIELD", "LAST WRITER", "WHEN", "COMMIT", "HOW"],
            &rows,
        ));
    }
    gaps(&mut out, &why.story.gaps);
    out
}

/// Each folder's differences as unified diffs, or that there are none.
#[must_use]
pub fn diff(diffs: &[FolderDiff]) -> String {
    let mut out = String::new();
    for folder in diffs {
        let tip = folder
            .tip
            .as_deref()
            .map_or_else(|| "no tip".to_string(), short_commit);
        let _ = writeln!(
            out,
            "# GitTarget {} (branch {}, folder {}, {tip})",
            folder.target, folder.branch, folder.folder
        );
        if folder.objects.is_empty() {
            let _ = writeln!(out, "# the live side and the folder agree");
        }
        for object in &folder.objects {
            let state = match object.state {
                DiffState::OnlyLive => "live only",
                DiffState::OnlyInGit => "in Git only",
                DiffState::Differs => "differs",
            };
            let path = object
                .path
                .as_deref()
                .map(|p| format!(", {p}"))
                .unwrap_or_default();
            let _ = writeln!(out, "# {} ({state}{path})", object.object);
            out.push_str(&object.diff);
        }
        gaps(&mut out, &folder.gaps);
    }
    out
}

/// A commit as a person reads it: its first 12 characters.
pub(crate) fn short_commit(commit: &str) -> String {
    commit.chars().take(12).collect()
}

fn gaps(out: &mut String, gaps: &[String]) {
    for gap in gaps {
        let _ = writeln!(out, "note: {gap}");
    }
}

/// Rows under a header, each column as wide as its widest cell.
pub(crate) fn text_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
