//! An object's page (`/ui/object`): its story both ways, as `backflow history` tells it, and
//! the YAML difference between any two points of it (a commit, or the live object now),
//! chosen with a form that works without script. A Secret's values are never on it.

use std::fmt::Write as _;

use serde_json::Value;

use crate::folder_diff::hidden_values;
use crate::object::ObjectRef;
use crate::render::short_commit;
use crate::story::Story;
use crate::text_diff::unified;

use super::page::{diff_block, esc, page, table};

/// One point of the object's story that has a value to compare.
struct Point {
    /// `live`, or the commit.
    id: String,
    /// For a person.
    label: String,
    value: Value,
}

/// The points: the live object now (sanitized; a Secret's values hidden), then each commit's
/// document, newest first.
fn points(object: &ObjectRef, story: &Story, live: Option<&Value>) -> Vec<Point> {
    let mut out = Vec::new();
    if let Some(live) = live {
        let newest_git = story.entries.iter().find_map(|e| e.document.as_ref());
        let mut value = backflow_api::defaults::omit(backflow_manifest::sanitize(live), newest_git);
        if object.is_secret() {
            value = hidden_values(Some(&value), None).0.unwrap_or(Value::Null);
        }
        out.push(Point {
            id: "live".into(),
            label: "the live object now".into(),
            value,
        });
    }
    for entry in &story.entries {
        if let (Some(commit), Some(document)) = (&entry.commit, &entry.document) {
            let short = short_commit(commit);
            out.push(Point {
                id: commit.clone(),
                label: format!(
                    "commit {short} ({:?} by {}, {})",
                    entry.kind, entry.who, entry.at
                ),
                value: document.clone(),
            });
        }
    }
    out
}

/// The page of `object`: `story`, the live object (`None`: not live), and the points `from`
/// and `to` to compare (by default the newest commit and the live object).
#[must_use]
pub fn render(
    object: &ObjectRef,
    story: &Story,
    live: Option<&Value>,
    from: Option<&str>,
    to: Option<&str>,
) -> String {
    let mut body = String::new();
    if live.is_none() {
        body.push_str("<p id=\"not-live\">It is not live now.</p>");
    }
    timeline(&mut body, story);
    body.push_str(
        "<section aria-labelledby=\"compare\"><h2 id=\"compare\">Compare two points</h2>",
    );
    let points = points(object, story, live);
    if object.is_secret() {
        body.push_str(
            "<p>A Secret's values are never shown here: Git holds them SOPS-encrypted.</p>",
        );
    }
    if points.len() < 2 {
        body.push_str(
            "<p id=\"no-diff\">There are not two points with a value to compare.</p></section>",
        );
        return page(&object.describe(), &body, None);
    }
    let pick = |wanted: Option<&str>, default: usize| {
        wanted
            .and_then(|w| points.iter().position(|p| p.id == w))
            .unwrap_or(default)
    };
    let from = pick(from, 1);
    let to = pick(to, 0);
    form(&mut body, object, &points, from, to);
    let render = |p: &Point| backflow_manifest::render(&p.value);
    let diff = unified(
        &points[from].label,
        &points[to].label,
        &render(&points[from]),
        &render(&points[to]),
    );
    if diff.is_empty() {
        body.push_str("<p id=\"same\">The two points hold the same object.</p>");
    } else {
        body.push_str(&diff_block("diff", &diff));
    }
    body.push_str("</section>");
    page(&object.describe(), &body, None)
}

fn timeline(body: &mut String, story: &Story) {
    body.push_str(
        "<section aria-labelledby=\"story\"><h2 id=\"story\">Its story, newest first</h2>",
    );
    let rows: Vec<Vec<String>> = story
        .entries
        .iter()
        .map(|e| {
            vec![
                format!("<time>{}</time>", esc(&e.at)),
                esc(&format!("{:?}", e.kind)),
                esc(&e.who),
                e.commit
                    .as_deref()
                    .map(|c| format!("<code>{}</code>", esc(&short_commit(c))))
                    .unwrap_or_default(),
                esc(&e.detail()),
            ]
        })
        .collect();
    if rows.is_empty() {
        body.push_str("<p>Nothing recorded about it.</p>");
    } else {
        let mut html = table(
            "Timeline",
            &["Time", "What", "Who", "Commit", "Detail"],
            &rows,
        );
        html = html.replacen("<table>", "<table id=\"timeline\">", 1);
        body.push_str(&html);
    }
    for gap in &story.gaps {
        let _ = write!(body, "<p class=\"note\">Note: {}</p>", esc(gap));
    }
    body.push_str("</section>");
}

fn form(body: &mut String, object: &ObjectRef, points: &[Point], from: usize, to: usize) {
    body.push_str("<form method=\"get\" action=\"/ui/object\">");
    for (name, value) in [
        ("group", &object.group),
        ("plural", &object.plural),
        ("namespace", &object.namespace),
        ("name", &object.name),
    ] {
        let _ = write!(
            body,
            "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
            esc(value)
        );
    }
    for (name, label, chosen) in [("from", "From", from), ("to", "To", to)] {
        let _ = write!(
            body,
            "<p><label for=\"{name}\">{label}</label> <select id=\"{name}\" name=\"{name}\">"
        );
        for (at, point) in points.iter().enumerate() {
            let selected = if at == chosen { " selected" } else { "" };
            let _ = write!(
                body,
                "<option value=\"{}\"{selected}>{}</option>",
                esc(&point.id),
                esc(&point.label)
            );
        }
        body.push_str("</select></p>");
    }
    body.push_str("<p><button type=\"submit\">Show the difference</button></p></form>");
}
