//! The web view, under `/ui/` of the API (its authentication and authorization, like every
//! non-resource URL): the overview with the live feed, and each object's page. Read-only,
//! server-rendered, usable with script off; the only script follows the feed.

mod feed;
mod object_page;
mod overview;
mod page;

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;

use crate::error::FaceError;
use crate::sources::Face;
use crate::status::StatusReport;

/// How many writes the overview shows before the feed adds more.
const FEED_SHOWN: usize = 50;

/// The web view's routes, with `face` as their state.
pub fn router(face: Face) -> Router {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(overview))
        .route("/ui/object", get(object))
        .route("/ui/feed", get(feed))
        .with_state(face)
}

async fn overview(State(face): State<Face>) -> Response {
    let report = match StatusReport::read(face.client(), None).await {
        Ok(report) => report,
        Err(e) => return page_error(&FaceError::Listing(e)),
    };
    let feed = face.writes().map(|w| feed::newest(w, FEED_SHOWN));
    let deliveries = match face.deliveries().await {
        Ok(deliveries) => deliveries,
        Err(e) => return page_error(&e),
    };
    Html(overview::render(&report, feed.as_deref(), &deliveries)).into_response()
}

async fn object(State(face): State<Face>, Query(q): Query<HashMap<String, String>>) -> Response {
    let part = |name: &str| q.get(name).cloned().unwrap_or_default();
    let object = match face
        .resolve(
            &part("group"),
            &part("plural"),
            &part("namespace"),
            &part("name"),
        )
        .await
    {
        Ok(object) => object,
        Err(e) => return page_error(&e),
    };
    let story = match face.story(&object).await {
        Ok(story) => story,
        Err(e) => return page_error(&e),
    };
    let live = match face.live(&object).await {
        Ok(live) => Some(live),
        Err(FaceError::NotFound(_)) => None,
        Err(e) => return page_error(&e),
    };
    Html(object_page::render(
        &object,
        &story,
        live.as_ref(),
        q.get("from").map(String::as_str),
        q.get("to").map(String::as_str),
    ))
    .into_response()
}

async fn feed(
    State(face): State<Face>,
    Query(q): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let Some(record) = face.writes().cloned() else {
        return page_error(&FaceError::NotFound("the record of writes".into()));
    };
    // A browser that reconnects says where it was: that wins over the page's first `after`.
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let after = resumed
        .or_else(|| q.get("after").and_then(|a| a.parse().ok()))
        .unwrap_or(0);
    feed::stream(record, after)
}

/// An error as a page a person reads, with the status code it deserves.
fn page_error(e: &FaceError) -> Response {
    let (code, _) = e.status();
    let body = format!(
        "<p class=\"warn\" id=\"error\">{}</p>",
        page::esc(&e.to_string())
    );
    (
        code,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page::page("Cannot show this", &body, None),
    )
        .into_response()
}
