//! The overview page (`/ui/`): what needs a person, every target, branch and claim with its
//! health, and the live activity feed.

use std::fmt::Write as _;

use crate::render::short_commit;
use crate::sources::Delivery;
use crate::status::StatusReport;

use super::feed::{FEED_SCRIPT, FeedItem};
use super::page::{esc, page, table};

/// A commit as a person reads it.
fn short(commit: Option<&String>) -> String {
    commit.map_or_else(|| "-".to_string(), |c| esc(&short_commit(c)))
}

fn or_dash(text: Option<&String>) -> String {
    text.map_or_else(|| "-".to_string(), |t| esc(t))
}

/// The overview of `report` and the newest writes (`feed`, newest first; `None` where no
/// record of writes is kept).
#[must_use]
pub fn render(report: &StatusReport, feed: Option<&[FeedItem]>, deliveries: &[Delivery]) -> String {
    let mut body = String::new();
    needs_section(&mut body, report);
    health_section(&mut body, report);
    activity_section(&mut body, feed);
    deliveries_section(&mut body, deliveries);
    page("backflow", &body, feed.map(|_| FEED_SCRIPT))
}

/// What needs a person.
fn needs_section(body: &mut String, report: &StatusReport) {
    body.push_str("<section aria-labelledby=\"needs\"><h2 id=\"needs\">Needs a person</h2>");
    if report.needs_a_person.is_empty() {
        body.push_str("<p id=\"fine\">Nothing needs a person.</p>");
    } else {
        body.push_str("<ul id=\"needs-list\">");
        for line in &report.needs_a_person {
            let _ = write!(body, "<li class=\"warn\">{}</li>", esc(line));
        }
        body.push_str("</ul>");
    }
    body.push_str("</section>");
}

/// Every target, branch and claim with its health.
fn health_section(body: &mut String, report: &StatusReport) {
    body.push_str(
        "<section aria-labelledby=\"health\"><h2 id=\"health\">Targets, branches and claims</h2>",
    );
    body.push_str(&targets_table(report));
    body.push_str(&branches_table(report));
    body.push_str(&claims_table(report));
    body.push_str("</section>");
}

/// The `GitTargets`.
fn targets_table(report: &StatusReport) -> String {
    let targets: Vec<Vec<String>> = report
        .targets
        .iter()
        .map(|t| {
            vec![
                esc(&format!("{}/{}", t.namespace, t.name)),
                esc(&t.branch),
                esc(&t.folder),
                esc(&t.ready),
                esc(&t.streams),
                short(t.last_commit.as_ref()),
                or_dash(t.last_push_time.as_ref()),
            ]
        })
        .collect();
    table(
        "GitTargets",
        &[
            "Target",
            "Branch",
            "Folder",
            "Ready",
            "Streams",
            "Last commit",
            "Last push",
        ],
        &targets,
    )
}

/// The `GitBranches`.
fn branches_table(report: &StatusReport) -> String {
    let branches: Vec<Vec<String>> = report
        .branches
        .iter()
        .map(|b| {
            vec![
                esc(&format!("{}/{}", b.namespace, b.name)),
                esc(&b.branch),
                esc(&b.ready),
                short(b.tip.as_ref()),
                b.pending_writes.to_string(),
                or_dash(b.last_push_time.as_ref()),
            ]
        })
        .collect();
    table(
        "GitBranches",
        &[
            "Branch object",
            "Branch",
            "Ready",
            "Tip",
            "Pending writes",
            "Last push",
        ],
        &branches,
    )
}

/// The applier claims.
fn claims_table(report: &StatusReport) -> String {
    let claims: Vec<Vec<String>> = report
        .claims
        .iter()
        .map(|c| {
            vec![
                esc(&format!("{} {}/{}", c.kind, c.namespace, c.name)),
                esc(&c.ready),
                short(c.last_applied.as_ref()),
                c.operation.as_ref().map_or_else(
                    || "-".to_string(),
                    |op| {
                        esc(&format!(
                            "{} {} {}",
                            op.id,
                            op.phase,
                            short_commit(&op.commit)
                        ))
                    },
                ),
            ]
        })
        .collect();
    table(
        "Applier claims",
        &["Claim", "Ready", "Last applied", "Last operation"],
        &claims,
    )
}

/// The live activity feed (none where no record of writes is kept).
fn activity_section(body: &mut String, feed: Option<&[FeedItem]>) {
    body.push_str("<section aria-labelledby=\"activity\"><h2 id=\"activity\">Live activity</h2>");
    match feed {
        Some(items) => {
            body.push_str("<p>Writes to the API by people, clients and appliers, newest first; new ones appear as they happen (backflow's own bookkeeping, its statuses and bootstrap, is left out).</p><ul id=\"feed\" aria-live=\"polite\">");
            for item in items {
                body.push_str(&item.html());
            }
            body.push_str("</ul>");
        }
        None => {
            body.push_str(
                "<p>Live writes are recorded by backflow's embedded API server only.</p>",
            );
        }
    }
    body.push_str("</section>");
}

/// The push webhooks' recent deliveries.
fn deliveries_section(body: &mut String, deliveries: &[Delivery]) {
    body.push_str(
        "<section aria-labelledby=\"deliveries\"><h2 id=\"deliveries\">Push deliveries</h2>",
    );
    if deliveries.is_empty() {
        body.push_str("<p>No push webhook delivery yet.</p>");
    } else {
        let rows: Vec<Vec<String>> = deliveries
            .iter()
            .map(|d| {
                vec![
                    esc(&d.record.at),
                    esc(&d.receiver),
                    esc(&d.record.outcome),
                    esc(&d.record.detail),
                ]
            })
            .collect();
        let html = table(
            "The newest deliveries to the GitReceivers",
            &["Time", "Receiver", "Outcome", "Detail"],
            &rows,
        );
        body.push_str(&html.replacen("<table>", "<table id=\"deliveries-table\">", 1));
    }
    body.push_str("</section>");
}
