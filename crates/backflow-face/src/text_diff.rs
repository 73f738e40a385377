//! A unified diff of two texts, line by line, as `diff -u` prints it: what `backflow diff` and
//! the object page show. The lines are matched by a longest common subsequence; texts too long
//! for that within a bounded table are shown as one replacement.

use std::fmt::Write as _;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The largest table (lines × lines) the matching fills; beyond it the whole text is replaced.
const MAX_CELLS: usize = 4_000_000;

/// One line of the edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Same(&'a str),
    Gone(&'a str),
    Added(&'a str),
}

/// `old` and `new` as a unified diff under the labels `from` and `to`; empty when they are
/// equal.
#[must_use]
pub fn unified(from: &str, to: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let script = edit_script(&a, &b);
    let mut out = format!("--- {from}\n+++ {to}\n");
    for hunk in hunks(&script) {
        write_hunk(&mut out, &script, hunk);
    }
    out
}

/// The lines of `a` and `b` as kept, removed and added, in order.
fn edit_script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    // Common head and tail first: most diffs of one object touch a few lines.
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut script: Vec<Line<'a>> = a[..head].iter().map(|l| Line::Same(l)).collect();
    if ma.len().saturating_mul(mb.len()) > MAX_CELLS {
        script.extend(ma.iter().map(|l| Line::Gone(l)));
        script.extend(mb.iter().map(|l| Line::Added(l)));
    } else {
        script.extend(matched(ma, mb));
    }
    script.extend(a[a.len() - tail..].iter().map(|l| Line::Same(l)));
    script
}

/// The edit script of a longest common subsequence of `a` and `b`.
fn matched<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Line<'a>> {
    let width = b.len() + 1;
    // lcs[i * width + j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![0u32; (a.len() + 1) * width];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(Line::Same(a[i]));
            i += 1;
            j += 1;
        } else if i < a.len()
            && (j == b.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
        {
            // Removals before additions, as `diff -u` prints a changed line.
            out.push(Line::Gone(a[i]));
            i += 1;
        } else {
            out.push(Line::Added(b[j]));
            j += 1;
        }
    }
    out
}

/// The ranges of the script each hunk prints: every change with its context, changes whose
/// contexts touch joined.
fn hunks(script: &[Line<'_>]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (at, line) in script.iter().enumerate() {
        if matches!(line, Line::Same(_)) {
            continue;
        }
        let start = at.saturating_sub(CONTEXT);
        let end = (at + 1 + CONTEXT).min(script.len());
        match out.last_mut() {
            Some(last) if start <= last.end => last.end = last.end.max(end),
            _ => out.push(start..end),
        }
    }
    out
}

fn write_hunk(out: &mut String, script: &[Line<'_>], hunk: std::ops::Range<usize>) {
    let before = &script[..hunk.start];
    let old_start = before
        .iter()
        .filter(|l| !matches!(l, Line::Added(_)))
        .count();
    let new_start = before
        .iter()
        .filter(|l| !matches!(l, Line::Gone(_)))
        .count();
    let lines = &script[hunk];
    let old_len = lines
        .iter()
        .filter(|l| !matches!(l, Line::Added(_)))
        .count();
    let new_len = lines.iter().filter(|l| !matches!(l, Line::Gone(_))).count();
    // diff -u numbers lines from 1, and an empty side from 0.
    let at = |start: usize, len: usize| if len == 0 { start } else { start + 1 };
    let _ = writeln!(
        out,
        "@@ -{},{old_len} +{},{new_len} @@",
        at(old_start, old_len),
        at(new_start, new_len)
    );
    for line in lines {
        let _ = match line {
            Line::Same(l) => writeln!(out, " {l}"),
            Line::Gone(l) => writeln!(out, "-{l}"),
            Line::Added(l) => writeln!(out, "+{l}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a", "b", "x\ny\n", "x\ny\n"), "");
    }

    #[test]
    fn a_changed_line_is_shown_with_three_lines_of_context_as_diff_u_numbers_them() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified("live", "git", old, new),
            "--- live\n+++ git\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn changes_far_apart_are_two_hunks_and_close_ones_one() {
        let old: String = (1..=20).map(|n| n.to_string() + "\n").collect();
        let far = old.replace("2\n", "two\n").replace("19\n", "nineteen\n");
        let text = unified("a", "b", &old, &far);
        assert_eq!(text.matches("@@ -").count(), 2, "{text}");
        let close = old.replace("5\n", "five\n").replace("9\n", "nine\n");
        let text = unified("a", "b", &old, &close);
        assert_eq!(text.matches("@@ -").count(), 1, "{text}");
    }

    #[test]
    fn an_added_text_starts_at_line_zero_of_the_empty_side() {
        assert_eq!(
            unified("a", "b", "", "x\ny\n"),
            "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
        assert_eq!(
            unified("a", "b", "x\n", ""),
            "--- a\n+++ b\n@@ -1,1 +0,0 @@\n-x\n"
        );
    }

    #[test]
    fn an_inserted_line_keeps_the_lines_around_it() {
        let text = unified("a", "b", "a\nb\nc\n", "a\nb\nnew\nc\n");
        assert_eq!(text, "--- a\n+++ b\n@@ -1,3 +1,4 @@\n a\n b\n+new\n c\n");
    }
}
