//! The web view's page frame: one server-rendered HTML document per page, readable with script
//! off, high-contrast, with landmarks, captions and visible focus for keyboards and screen
//! readers.

use std::fmt::Write as _;

/// Text made safe for HTML content and attribute values.
#[must_use]
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Dark text on white and a blue that passes WCAG AA; focus drawn, never hidden.
const STYLE: &str = "
body{font-family:system-ui,sans-serif;color:#111;background:#fff;margin:0;line-height:1.45}
header,main{padding:0 1.5rem}header{border-bottom:1px solid #bbb}
nav a{margin-right:1rem}a{color:#0645ad}a:focus,button:focus,select:focus{outline:3px solid #b35900;outline-offset:2px}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}caption{text-align:left;font-weight:600;padding:.3rem 0}
th,td{border:1px solid #999;padding:.25rem .5rem;text-align:left;vertical-align:top}th{background:#eee}
pre{background:#f4f4f4;border:1px solid #999;padding:.75rem;overflow:auto}
.gone{color:#8b0000}.added{color:#05570f}.warn{color:#8b0000;font-weight:600}
#feed{list-style:none;padding:0}#feed li{border-bottom:1px solid #ddd;padding:.2rem 0}
";

/// A whole page: `title`, then `body` inside `<main>`; `script` (if any) at the end, which the
/// page never needs to be read.
#[must_use]
pub fn page(title: &str, body: &str, script: Option<&str>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · backflow</title><style>{STYLE}</style></head><body>\
         <header><nav aria-label=\"backflow\"><p><a href=\"/ui/\">backflow</a></p></nav></header>\
         <main><h1>{}</h1>{body}</main>",
        esc(title),
        esc(title)
    );
    if let Some(script) = script {
        let _ = write!(out, "<script>{script}</script>");
    }
    out.push_str("</body></html>\n");
    out
}

/// A table with a caption, a header row and rows of cells already escaped (or built from
/// escaped parts).
#[must_use]
pub fn table(caption: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<table><caption>{}</caption><thead><tr>", esc(caption));
    for h in header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// A unified diff as a `<pre>`, removed and added lines marked for color and for screen
/// readers (the `-`/`+` stay in the text).
#[must_use]
pub fn diff_block(id: &str, diff: &str) -> String {
    let mut out = format!("<pre id=\"{}\">", esc(id));
    for line in diff.lines() {
        let class = match line.chars().next() {
            Some('-') if !line.starts_with("---") => Some("gone"),
            Some('+') if !line.starts_with("+++") => Some("added"),
            _ => None,
        };
        match class {
            Some(c) => {
                let _ = writeln!(out, "<span class=\"{c}\">{}</span>", esc(line));
            }
            None => {
                let _ = writeln!(out, "{}", esc(line));
            }
        }
    }
    out.push_str("</pre>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_never_becomes_markup() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let page = page("<b>", "", None);
        assert!(page.contains("<h1>&lt;b&gt;</h1>") && !page.contains("<b>"));
    }

    #[test]
    fn a_diffs_lines_are_marked_and_escaped() {
        let block = diff_block("d", "--- a\n+++ b\n@@ -1 +1 @@\n-x: <1>\n+x: 2\n same\n");
        assert!(
            block.contains("<span class=\"gone\">-x: &lt;1&gt;</span>"),
            "{block}"
        );
        assert!(
            block.contains("<span class=\"added\">+x: 2</span>"),
            "{block}"
        );
        assert!(block.contains("--- a\n"), "headers are not marked: {block}");
    }
}
