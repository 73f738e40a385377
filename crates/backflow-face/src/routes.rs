//! The face's endpoints, under `/backflow/v1/`, served behind the API's authentication and
//! authorization (non-resource URLs): JSON for the CLI and for scripts.
//!
//! - `GET /backflow/v1/history?group=&version=&kind=&plural=&namespace=&name=`: [`Story`]
//! - `GET /backflow/v1/why?…` (the same object): [`Why`]
//! - `GET /backflow/v1/diff[?target=NAMESPACE/NAME]`: a [`FolderDiff`] per `GitTarget`
//!
//! [`Story`]: crate::Story
//! [`Why`]: crate::Why
//! [`FolderDiff`]: crate::FolderDiff

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::error::FaceError;
use crate::object::ObjectRef;
use crate::sources::Face;

/// The routes, with `face` as their state: the `/backflow/v1/` endpoints, and with `web` the
/// web view under `/ui/`.
pub fn router(face: Face, web: bool) -> Router {
    let api = Router::new()
        .route("/backflow/v1/history", get(history))
        .route("/backflow/v1/why", get(why))
        .route("/backflow/v1/diff", get(diff))
        .with_state(face.clone());
    if web {
        api.merge(crate::web::router(face))
    } else {
        api
    }
}

/// The object a query names.
fn object_of(query: &HashMap<String, String>) -> Result<ObjectRef, FaceError> {
    let part = |name: &str| query.get(name).cloned().unwrap_or_default();
    let object = ObjectRef {
        group: part("group"),
        version: part("version"),
        kind: part("kind"),
        plural: part("plural"),
        namespace: part("namespace"),
        name: part("name"),
    };
    object.check().map_err(|why| {
        FaceError::BadRequest(format!(
            "{why}: name the object with group, version, kind, plural, namespace and name"
        ))
    })?;
    Ok(object)
}

async fn history(State(face): State<Face>, Query(q): Query<HashMap<String, String>>) -> Response {
    match object_of(&q) {
        Ok(object) => answer(face.story(&object).await),
        Err(e) => e.into_response(),
    }
}

async fn why(State(face): State<Face>, Query(q): Query<HashMap<String, String>>) -> Response {
    match object_of(&q) {
        Ok(object) => answer(face.why(&object).await),
        Err(e) => e.into_response(),
    }
}

async fn diff(State(face): State<Face>, Query(q): Query<HashMap<String, String>>) -> Response {
    answer(face.diff(q.get("target").map(String::as_str)).await)
}

fn answer<T: serde::Serialize>(result: Result<T, FaceError>) -> Response {
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}
