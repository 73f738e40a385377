//! The web view in a real headless Chromium (Debian's `chromium`, driven by `playwright-core`):
//! the overview's health tables and its live feed (a `kubectl` write appears without a
//! reload), an object's page with its timeline and the YAML difference between two points, the
//! same pages readable without script, a keyboard path through the form, and a Secret's value
//! on no page. Screenshots are saved under the test's output (`web-view/` in Cargo's temporary
//! directory for integration tests).

use std::path::PathBuf;

use backflow_testkit::browser::Browser;
use serde_json::json;

use crate::apply::{cm_value, wait_acting, wait_applied};
use crate::common::*;
use crate::face::{SECRET_VALUES, a_secret_created_and_patched};

const DEMO: &str = "live/default/configmaps/demo.yaml";

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-view");
    std::fs::create_dir_all(&dir).expect("the screenshots' folder");
    dir
}

fn texts(b: &mut Browser, selector: &str) -> Vec<String> {
    let answer = b.ask(&json!({"op": "texts", "selector": selector}));
    answer["texts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t.as_str().unwrap_or_default().to_string())
        .collect()
}

fn goto(b: &mut Browser, url: &str) {
    let answer = b.ask(&json!({"op": "goto", "url": url}));
    assert_eq!(answer["status"], 200, "{url}: {answer}");
}

/// A `ConfigMap` created live, then changed by a push and applied: the overview shows the
/// target, branch and claim healthy and follows a new write live; the object's page tells the
/// create, the commit, the push and its apply, and shows the push's change as a diff.
#[test]
fn the_web_view_shows_health_a_live_feed_and_an_objects_story_and_diff_in_chromium() {
    let w = World::start(&[]);
    wait_acting(&w);
    w.kubectl(&[
        "create",
        "configmap",
        "demo",
        "--from-literal=greeting=hello",
    ]);
    w.wait_file(DEMO, |t| t.contains("hello"));
    let push = w.push_edit(DEMO, "greeting: hello", "greeting: from-git");
    wait_applied(&w, &push);
    w.wait_settled();
    let base = format!("http://{}", w.addr());
    wait_for(
        "the overview to find nothing that needs a person",
        || http(w.addr(), "GET", "/ui/", &[], "").body,
        || {
            http(w.addr(), "GET", "/ui/", &[], "")
                .body
                .contains("id=\"fine\"")
                .then_some(())
        },
    );
    let mut b = Browser::start();

    goto(&mut b, &format!("{base}/ui/"));
    assert_eq!(
        texts(&mut b, "caption"),
        [
            "GitTargets",
            "GitBranches",
            "Applier claims",
            "The newest deliveries to the GitReceivers"
        ]
    );
    let deliveries = texts(&mut b, "#deliveries-table tbody tr");
    assert!(
        deliveries
            .iter()
            .any(|d| d.contains("accepted") && d.contains("branch main")),
        "the repository hook's delivery of the push, as the receiver's status keeps it: {deliveries:?}"
    );
    assert_eq!(texts(&mut b, "#fine"), ["Nothing needs a person."]);
    let claims = texts(&mut b, "table:nth-of-type(3) tbody tr");
    assert!(
        claims
            .iter()
            .any(|r| r.contains("NativeClaim backflow-system/default") && r.contains("True")),
        "{claims:?}"
    );
    b.ask(&json!({"op": "mark"}));
    w.kubectl(&[
        "patch",
        "configmap",
        "demo",
        "-p",
        r#"{"metadata":{"labels":{"seen":"in-the-feed"}}}"#,
    ]);
    let seen = b.ask(&json!({"op": "waitText", "selector": "#feed li",
        "contains": "default/demo changed by kubectl-patch", "timeout": 20000}));
    assert_eq!(
        seen["mark"], "kept",
        "the feed grew without a reload: {seen}"
    );
    let feed = texts(&mut b, "#feed li");
    let at = |text: &str| {
        feed.iter()
            .position(|f| f.contains(text))
            .unwrap_or_else(|| panic!("{text}: {feed:?}"))
    };
    assert!(
        at("configmaps default/demo changed by kubectl-patch")
            < at("configmaps default/demo created by kubectl-create"),
        "newest first: {feed:?}"
    );
    assert!(
        !feed.iter().any(|f| f.contains("namespaces default")),
        "the server's own bootstrap is not activity: {feed:?}"
    );
    b.ask(&json!({"op": "screenshot", "path": shots().join("overview.png")}));

    // The label is committed before the object's page is read: its newest commit is live.
    w.wait_settled();
    wait_for(
        "the push's value live",
        || w.kubectl(&["get", "configmap", "demo", "-o", "yaml"]),
        || (cm_value(&w, "demo", "greeting").as_deref() == Some("from-git")).then_some(()),
    );
    let page = format!("{base}/ui/object?group=&plural=configmaps&namespace=default&name=demo");
    goto(&mut b, &page);
    let rows = texts(&mut b, "#timeline tbody tr");
    let has = |what: &str, extra: &str| rows.iter().any(|r| r.contains(what) && r.contains(extra));
    assert!(has("Pushed", &push[..12]), "the push: {rows:#?}");
    assert!(has("Applied", &push[..12]), "its apply: {rows:#?}");
    assert!(
        has("Committed", "kubectl-create"),
        "the create's commit: {rows:#?}"
    );
    assert!(has("LiveWrite", "kubectl-create"), "the create: {rows:#?}");
    let same = texts(&mut b, "#same");
    let shown = texts(&mut b, "#diff");
    assert_eq!(
        same.len(),
        1,
        "Git's newest commit and the live object agree: {shown:?} {rows:#?} live: {}",
        w.kubectl(&["get", "configmap", "demo", "-o", "yaml"])
    );
    let options = texts(&mut b, "#from option");
    let oldest = options.len() - 1;
    assert!(options[oldest].contains("Committed"), "{options:?}");
    let values = b.ask(&json!({"op": "html"}));
    let html = values["html"].as_str().unwrap_or_default().to_string();
    let created = html
        .split("<option value=\"")
        .filter_map(|o| o.split('"').next())
        .filter(|v| *v != "live")
        .last()
        .unwrap_or_else(|| panic!("commit options: {html}"))
        .to_string();
    b.ask(&json!({"op": "select", "selector": "#from", "value": created}));
    b.ask(&json!({"op": "select", "selector": "#to", "value": "live"}));
    b.ask(&json!({"op": "submit", "selector": "button[type=submit]"}));
    let diff = texts(&mut b, "#diff");
    assert!(
        diff.len() == 1
            && diff[0].contains("-  greeting: hello")
            && diff[0].contains("+  greeting: from-git"),
        "the push's change from the first commit to the live object: {diff:?}"
    );
    b.ask(&json!({"op": "screenshot", "path": shots().join("object.png")}));
    let order = b.ask(&json!({"op": "focusOrder", "count": 4}));
    let seen: Vec<&str> = order["seen"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
        .collect();
    assert_eq!(
        seen,
        ["A", "from", "to", "BUTTON"],
        "the keyboard reaches the form in order"
    );

    // The same pages read without script: everything is in the HTML the server sends.
    let plain = http(w.addr(), "GET", &page.replacen(&base, "", 1), &[], "");
    assert_eq!(plain.status, 200);
    assert!(
        plain.body.contains("id=\"timeline\"") && plain.body.contains(&push[..12]),
        "{}",
        plain.body
    );
}

/// A Secret's value (or its base64) is on no page: not its object page, not the overview.
#[test]
fn no_page_shows_a_secrets_value() {
    let w = a_secret_created_and_patched();
    let base = format!("http://{}", w.addr());
    let mut b = Browser::start();
    for path in [
        "/ui/",
        "/ui/object?group=&plural=secrets&namespace=default&name=s",
    ] {
        goto(&mut b, &format!("{base}{path}"));
        let html = b.ask(&json!({"op": "html"}));
        let html = html["html"].as_str().unwrap_or_default();
        assert!(html.contains("<h1>"), "{html}");
        for value in SECRET_VALUES {
            assert!(!html.contains(value), "{value} on {path}:\n{html}");
        }
    }
    let page = texts(&mut b, "main");
    assert!(page[0].contains("never shown"), "{page:?}");
    b.ask(&json!({"op": "screenshot", "path": shots().join("secret.png")}));
}
