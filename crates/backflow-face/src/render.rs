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
    let rows: Vec<[String; 5]> = story
        .entries
        .iter()
        .map(|e| {
            [
                e.at.clone(),
                format!("{:?}", e.kind),
                e.who.clone(),
                e.commit.as_deref().map(short).unwrap_or_default(),
                with_fields(&e.summary, &e.fields),
            ]
        })
        .collect();
    table(&mut out, ["TIME", "WHAT", "WHO", "COMMIT", "DETAIL"], &rows);
    if story.entries.is_empty() {
        let _ = writeln!(out, "Nothing recorded about it.");
    }
    gaps(&mut out, &story.story_gaps());
    out
}

/// Each field's last writer.
#[must_use]
pub fn why(why: &Why) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", why.story.object.describe());
    let rows: Vec<[String; 5]> = why
        .fields
        .iter()
        .map(|f| {
            [
                f.field.clone(),
                f.writer.clone(),
                f.at.clone().unwrap_or_default(),
                f.commit.as_deref().map(short).unwrap_or_default(),
                f.how.clone(),
            ]
        })
        .collect();
    table(
        &mut out,
        ["FIELD", "LAST WRITER", "WHEN", "COMMIT", "HOW"],
        &rows,
    );
    gaps(&mut out, &why.story.story_gaps());
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
            .map_or_else(|| "no tip".to_string(), short);
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

impl Story {
    fn story_gaps(&self) -> Vec<String> {
        self.gaps.clone()
    }
}

fn with_fields(summary: &str, fields: &[String]) -> String {
    if fields.is_empty() {
        summary.to_string()
    } else {
        format!("{summary}; fields: {}", fields.join(", "))
    }
}

fn short(commit: &str) -> String {
    commit.chars().take(12).collect()
}

fn gaps(out: &mut String, gaps: &[String]) {
    for gap in gaps {
        let _ = writeln!(out, "note: {gap}");
    }
}

fn table<const N: usize>(out: &mut String, header: [&str; N], rows: &[[String; N]]) {
    if rows.is_empty() {
        return;
    }
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut String, cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(out, header.to_vec());
    for row in rows {
        line(out, row.iter().map(String::as_str).collect());
    }
}
