//! The REST catalog's endpoints that change a table's history and shape rather than its data:
//! rollback, branches, and Paimon's `SchemaChange` JSON mapped onto tidelake's schema changes
//! (tags are answered in [`super::handlers`], with these request bodies).

use axum::http::Method;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use super::handlers::{about, ok, parse_body};
use super::RestError;
use crate::error::ErrorKind;
use crate::table::Table;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CreateTag {
    pub(super) tag_name: String,
    #[serde(default)]
    pub(super) snapshot_id: Option<i64>,
    #[serde(default)]
    pub(super) time_retained: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct AlterTable {
    pub(super) changes: Vec<Value>,
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
    use crate::table::lifecycle::RollbackTarget;
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
    table
        .rollback_to(target)
        .await
        .map_err(|e| about(e, resource, &what))?;
    crate::table::changelog::notify_commit();
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
            table
                .create_branch(&req.branch, req.from_tag.as_deref())
                .await
                .map_err(|e| match (&req.from_tag, e.kind()) {
                    (Some(tag), ErrorKind::NotFound) => RestError::from(e).about("TAG", tag),
                    _ => about(e, "BRANCH", &req.branch),
                })?;
            ok(json!({}))
        }
        (&Method::DELETE, [branch]) => {
            table
                .delete_branch(branch)
                .await
                .map_err(|e| about(e, "BRANCH", branch))?;
            ok(json!({}))
        }
        (&Method::POST, [branch, "forward"]) => {
            table
                .fast_forward(branch)
                .await
                .map_err(|e| about(e, "BRANCH", branch))?;
            crate::table::changelog::notify_commit();
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

/// One of Paimon's `SchemaChange` JSON objects (`action` names the kind) as tidelake's.
pub(crate) fn schema_change(
    change: &Value,
    table: &Table,
) -> Result<crate::schema::change::SchemaChange, String> {
    use crate::schema::change::{ColumnMove, SchemaChange};
    let text = |key: &str| -> Result<String, String> {
        change
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("schema change {change}: no string '{key}'"))
    };
    let opt_text = |key: &str| change.get(key).and_then(Value::as_str).map(str::to_string);
    let column = || -> Result<String, String> {
        let names = change
            .get("fieldNames")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("schema change {change}: no 'fieldNames'"))?;
        match names.as_slice() {
            [one] => one
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("schema change {change}: a field name is not a string")),
            _ => Err(format!(
                "schema change {change}: only top-level columns can be changed"
            )),
        }
    };
    let data_type = |key: &str| -> Result<crate::spec::DataType, String> {
        let v = change
            .get(key)
            .ok_or_else(|| format!("schema change {change}: no '{key}'"))?;
        serde_json::from_value(v.clone()).map_err(|e| format!("schema change {change}: {e}"))
    };
    let position = |key: &str| -> Result<Option<ColumnMove>, String> {
        let Some(m) = change.get(key).filter(|m| !m.is_null()) else {
            return Ok(None);
        };
        let reference = m
            .get("referenceFieldName")
            .and_then(Value::as_str)
            .map(str::to_string);
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        match (kind, reference) {
            ("FIRST", _) => Ok(Some(ColumnMove::First)),
            ("LAST", _) => Ok(Some(ColumnMove::Last)),
            ("AFTER", Some(r)) => Ok(Some(ColumnMove::After(r))),
            ("BEFORE", Some(r)) => Ok(Some(ColumnMove::Before(r))),
            _ => Err(format!("schema change {change}: unknown move {m}")),
        }
    };
    let action = text("action")?;
    Ok(match action.as_str() {
        "setOption" => SchemaChange::SetOption {
            key: text("key")?,
            value: text("value")?,
        },
        "removeOption" => SchemaChange::RemoveOption { key: text("key")? },
        "updateComment" => SchemaChange::UpdateComment {
            comment: opt_text("comment"),
        },
        "addColumn" => SchemaChange::AddColumn {
            name: column()?,
            data_type: data_type("dataType")?,
            comment: opt_text("comment"),
            position: position("move")?,
        },
        "renameColumn" => SchemaChange::RenameColumn {
            name: column()?,
            new_name: text("newName")?,
        },
        "dropColumn" => SchemaChange::DropColumn { name: column()? },
        "updateColumnType" => {
            let name = column()?;
            let mut data_type = data_type("newDataType")?;
            if change.get("keepNullability").and_then(Value::as_bool) == Some(true) {
                let current = table
                    .schema()
                    .field(&name)
                    .ok_or_else(|| format!("no column '{name}'"))?;
                data_type = data_type.with_nullable(current.data_type.nullable);
            }
            SchemaChange::UpdateColumnType { name, data_type }
        }
        "updateColumnNullability" => SchemaChange::UpdateColumnNullability {
            name: column()?,
            nullable: change
                .get("newNullability")
                .and_then(Value::as_bool)
                .ok_or_else(|| format!("schema change {change}: no boolean 'newNullability'"))?,
        },
        "updateColumnComment" => SchemaChange::UpdateColumnComment {
            name: column()?,
            comment: opt_text("newComment"),
        },
        "updateColumnPosition" => {
            let m = change
                .get("move")
                .ok_or_else(|| format!("schema change {change}: no 'move'"))?;
            let name = m
                .get("fieldName")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("schema change {change}: no 'move.fieldName'"))?;
            SchemaChange::UpdateColumnPosition {
                name: name.to_string(),
                position: position("move")?
                    .ok_or_else(|| format!("schema change {change}: no move"))?,
            }
        }
        other => return Err(format!("schema change '{other}' is not supported")),
    })
}
