//! The REST catalog's endpoints over a table's history: tags, rollback and branches. Every
//! operation goes through the maintenance core ([`crate::table::maintenance::Request`]), as the
//! CLI's, `CALL`'s and the Flight actions' do: same checks, same messages, same after-change
//! effects; this door only maps the answer onto Paimon's REST errors.

use axum::http::Method;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::wire::{about, ok, page, parse_body, Query};
use super::RestError;
use crate::error::ErrorKind;
use crate::table::maintenance::{CreateTag, Outcome, Request, RollbackTarget};
use crate::table::progress::Operation;
use crate::table::Table;

/// Runs `request` on `table` through the maintenance core (quick operations: nothing to track
/// or cancel).
pub(super) async fn maintain(table: &Table, request: Request) -> crate::error::Result<Outcome> {
    request.run(table, &Operation::new()).await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTagBody {
    tag_name: String,
    #[serde(default)]
    snapshot_id: Option<i64>,
    #[serde(default)]
    time_retained: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Instant {
    #[serde(rename_all = "camelCase")]
    Snapshot { snapshot_id: i64 },
    #[serde(rename_all = "camelCase")]
    Tag { tag_name: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rollback {
    instant: Instant,
    #[serde(default)]
    from_snapshot: Option<i64>,
}

/// `POST …/rollback`: to a snapshot or a tag; with `fromSnapshot`, only while that is still the
/// latest snapshot.
pub(super) async fn rollback(table: &Table, body: &[u8]) -> Result<Response, RestError> {
    let req: Rollback = parse_body(body)?;
    let name = table.identifier().to_string();
    if let Some(from) = req.from_snapshot {
        let latest = table.snapshot_manager().latest_id().await?;
        if latest != Some(from) {
            return Err(RestError::new(
                ErrorKind::Conflict,
                format!(
                    "table '{name}': the latest snapshot is {}, not {from}; nothing rolled back",
                    latest.map_or("none".to_string(), |l| l.to_string())
                ),
            ));
        }
    }
    let (target, resource, what) = match req.instant {
        Instant::Snapshot { snapshot_id } => (
            RollbackTarget::Snapshot(snapshot_id),
            "SNAPSHOT",
            snapshot_id.to_string(),
        ),
        Instant::Tag { tag_name } => (RollbackTarget::Tag(tag_name.clone()), "TAG", tag_name),
    };
    maintain(table, Request::Rollback(target))
        .await
        .map_err(|e| about(e, resource, &what))?;
    ok(json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBranch {
    branch: String,
    #[serde(default)]
    from_tag: Option<String>,
}

/// `…/branches`: list (`GET`), create (`POST`, optionally from a tag), drop (`DELETE
/// branches/{b}`) and fast-forward main to a branch (`POST branches/{b}/forward`). Renaming a
/// branch is not supported by tidelake's branches (501).
pub(super) async fn branches(
    table: &Table,
    method: &Method,
    rest: &[String],
    body: &[u8],
) -> Result<Response, RestError> {
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match (method, rest.as_slice()) {
        (&Method::GET, []) => {
            let names: Vec<String> = table
                .branches()
                .await?
                .into_iter()
                .map(|b| b.name)
                .collect();
            ok(json!({ "branches": names }))
        }
        (&Method::POST, []) => {
            let req: CreateBranch = parse_body(body)?;
            let request = Request::CreateBranch {
                name: req.branch.clone(),
                from_tag: req.from_tag.clone(),
            };
            maintain(table, request)
                .await
                .map_err(|e| match (&req.from_tag, e.kind()) {
                    (Some(tag), ErrorKind::NotFound) => RestError::from(e).about("TAG", tag),
                    _ => about(e, "BRANCH", &req.branch),
                })?;
            ok(json!({}))
        }
        (&Method::DELETE, [branch]) => {
            let request = Request::DeleteBranches {
                names: vec![branch.to_string()],
            };
            maintain(table, request)
                .await
                .map_err(|e| about(e, "BRANCH", branch))?;
            ok(json!({}))
        }
        (&Method::POST, [branch, "forward"]) => {
            let request = Request::FastForward {
                name: branch.to_string(),
            };
            maintain(table, request)
                .await
                .map_err(|e| about(e, "BRANCH", branch))?;
            ok(json!({}))
        }
        _ => Err(RestError::new(
            ErrorKind::Unsupported,
            format!(
                "{method} branches/{} of table '{}' is not supported",
                rest.join("/"),
                table.identifier()
            ),
        )),
    }
}

/// `GET …/tags`: the table's tag names, a page at a time.
pub(super) async fn list_tags(table: &Table, q: &Query) -> Result<Response, RestError> {
    let names: Vec<String> = table
        .list_tags()
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| q.get("tagNamePrefix").is_none_or(|p| n.starts_with(p)))
        .collect();
    let (page, next) = page(names, None, q.get("pageToken"), q.max_results()?);
    ok(json!({"tags": page, "nextPageToken": next}))
}

/// `POST …/tags`: a tag on a snapshot (the latest when none is given).
pub(super) async fn create_tag(table: &Table, body: &[u8]) -> Result<Response, RestError> {
    let req: CreateTagBody = parse_body(body)?;
    if req.time_retained.is_some() {
        return Err(RestError::new(
            ErrorKind::Unsupported,
            format!(
                "tag '{}' of '{}': timeRetained is not supported (tags are kept until deleted)",
                req.tag_name,
                table.identifier()
            ),
        ));
    }
    let request = Request::CreateTag(CreateTag {
        name: req.tag_name.clone(),
        snapshot_id: req.snapshot_id,
    });
    maintain(table, request)
        .await
        .map_err(|e| match req.snapshot_id {
            Some(id) if e.kind() == ErrorKind::NotFound => {
                RestError::from(e).about("SNAPSHOT", id.to_string())
            }
            _ => about(e, "TAG", &req.tag_name),
        })?;
    ok(json!({}))
}

/// `GET …/tags/{tag}`: the snapshot it pins.
pub(super) async fn get_tag(table: &Table, tag: String) -> Result<Response, RestError> {
    let tags = table.list_tags().await?;
    let Some((_, snapshot)) = tags.into_iter().find(|(n, _)| *n == tag) else {
        return Err(RestError::new(
            ErrorKind::NotFound,
            format!("table '{}' has no tag '{tag}'", table.identifier()),
        )
        .about("TAG", tag));
    };
    ok(json!({
        "tagName": tag,
        "snapshot": snapshot,
        "tagCreateTime": null,
        "tagTimeRetained": null,
    }))
}

/// `DELETE …/tags/{tag}`: the tag, and the files only it kept.
pub(super) async fn delete_tag(table: &Table, tag: &str) -> Result<Response, RestError> {
    let request = Request::DeleteTag {
        name: tag.to_string(),
    };
    maintain(table, request)
        .await
        .map_err(|e| about(e, "TAG", tag))?;
    ok(json!({}))
}
