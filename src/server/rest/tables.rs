//! The REST catalog's tables: list, create (from Paimon's schema JSON), get (with the audit
//! fields Paimon's clients read), drop, rename, and alter (Paimon's `SchemaChange` JSON mapped
//! onto tidelake's schema changes). A table's REST id is a digest of where it is and when it was
//! made, so a table dropped and created again is another table to a client that loaded the old.

use std::collections::BTreeMap;

use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Digest;

use super::catalog::exists;
use super::wire::{about, location, ok, page, parse_body, Query};
use super::RestError;
use crate::catalog::Catalog;
use crate::error::ErrorKind;
use crate::error::Refusal;
use crate::spec::identifier::Identifier;
use crate::spec::TableSchema;
use crate::table::Table;

/// `GET /v1/databases/{db}/tables`.
pub(super) async fn list(catalog: &Catalog, db: &str, q: &Query) -> Result<Response, RestError> {
    exists(catalog, db).await?;
    let names = catalog.list_tables(db).await?;
    let (page, next) = page(
        names,
        q.get("tableNamePattern"),
        q.get("pageToken"),
        q.max_results()?,
    );
    ok(json!({"tables": page, "nextPageToken": next}))
}

/// `GET /v1/databases/{db}/tables/{t}`.
pub(super) async fn get(catalog: &Catalog, table: &Table) -> Result<Response, RestError> {
    ok(table_response(catalog, table).await?)
}

/// `DELETE /v1/databases/{db}/tables/{t}`.
pub(super) async fn drop(catalog: &Catalog, id: Identifier) -> Result<Response, RestError> {
    catalog
        .drop_table(&id, false)
        .await
        .map_err(|e| about(e, "TABLE", &id.to_string()))?;
    ok(json!({}))
}

/// `POST /v1/tables/rename`.
pub(super) async fn rename(catalog: &Catalog, body: &[u8]) -> Result<Response, RestError> {
    let req: RenameTable = parse_body(body)?;
    let (from, to) = (req.source.identifier(), req.destination.identifier());
    catalog.rename_table(&from, &to).await.map_err(|e| {
        let name = if e.kind() == ErrorKind::AlreadyExists {
            to.to_string()
        } else {
            from.to_string()
        };
        about(e, "TABLE", &name)
    })?;
    ok(json!({}))
}

/// `POST /v1/databases/{db}/tables/{t}`: Paimon's schema changes, all or none.
pub(super) async fn alter(
    catalog: &Catalog,
    table: &Table,
    body: &[u8],
) -> Result<Response, RestError> {
    let req: AlterTable = parse_body(body)?;
    let id = table.identifier();
    let changes = req
        .changes
        .iter()
        .map(|c| schema_change(c, table))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|r| RestError::from(r.of(format_args!("table '{id}'"))))?;
    if changes.is_empty() {
        return Err(RestError::new(
            ErrorKind::InvalidArgument,
            format!("table '{id}': no schema change given"),
        ));
    }
    catalog
        .alter_table(id, &changes)
        .await
        .map_err(|e| about(e, "TABLE", &id.to_string()))?;
    ok(json!({}))
}

/// The table `db.t`, or 404 `TABLE`.
pub(super) async fn load(catalog: &Catalog, db: &str, t: &str) -> Result<Table, RestError> {
    let id = Identifier::new(db, t);
    catalog
        .load_table(&id)
        .await
        .map_err(|e| about(e, "TABLE", &id.to_string()))
}

/// When the table was made: its first schema's time.
pub(super) async fn created_at(table: &Table) -> i64 {
    match table.schema_manager().schema(0).await {
        Ok(s) => s.time_millis,
        Err(_) => table.schema().time_millis,
    }
}

/// A table's id: a digest of where it is and when its first schema was made (`created`), so a
/// table dropped and created again under the same name has another id (a commit for the old one
/// is refused).
pub(super) fn table_id(catalog: &Catalog, table: &Table, created: i64) -> String {
    let digest = sha2::Sha256::digest(format!(
        "{}\0{}\0{created}",
        catalog.io().uri(),
        table.path()
    ));
    uuid::Builder::from_slice(&digest[..16])
        .map(|b| b.into_uuid().to_string())
        .unwrap_or_default()
}

async fn table_response(catalog: &Catalog, table: &Table) -> Result<Value, RestError> {
    let schema = table.schema();
    let fields = serde_json::to_value(&schema.fields).map_err(|e| {
        RestError::new(
            ErrorKind::Internal,
            format!("table '{}': its schema: {e}", table.identifier()),
        )
    })?;
    // Audit fields: when the table was made (its first schema) and last changed (its latest schema
    // or snapshot); tidelake keeps no owner or author of either.
    let created = created_at(table).await;
    let last_commit = match table.snapshot_manager().latest().await? {
        Some(s) => s.time_millis,
        None => 0,
    };
    Ok(json!({
        "id": table_id(catalog, table, created),
        "name": table.identifier().table,
        "owner": null,
        "createdAt": created,
        "createdBy": null,
        "updatedAt": schema.time_millis.max(last_commit),
        "updatedBy": null,
        "path": location(catalog, table.path()),
        "isExternal": false,
        "schemaId": schema.id,
        "schema": {
            "fields": fields,
            "partitionKeys": schema.partition_keys,
            "primaryKeys": schema.primary_keys,
            "options": schema.options,
            "comment": schema.comment,
        },
    }))
}

#[derive(Deserialize)]
struct AlterTable {
    changes: Vec<Value>,
}

#[derive(Deserialize)]
struct IdentifierJson {
    database: String,
    object: String,
}

impl IdentifierJson {
    fn identifier(&self) -> Identifier {
        Identifier::new(self.database.clone(), self.object.clone())
    }
}

#[derive(Deserialize)]
struct RenameTable {
    source: IdentifierJson,
    destination: IdentifierJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaJson {
    fields: Vec<Value>,
    #[serde(default)]
    partition_keys: Vec<String>,
    #[serde(default)]
    primary_keys: Vec<String>,
    #[serde(default)]
    options: Option<BTreeMap<String, String>>,
    #[serde(default)]
    comment: Option<String>,
}

#[derive(Deserialize)]
struct CreateTable {
    identifier: IdentifierJson,
    schema: SchemaJson,
}

/// The highest field id in `fields`, nested ROW fields included.
fn highest_field_id(fields: &[Value]) -> i64 {
    fn in_type(t: &Value) -> i64 {
        let Some(o) = t.as_object() else { return -1 };
        let mut max = o
            .get("fields")
            .and_then(Value::as_array)
            .map(|f| highest_field_id(f))
            .unwrap_or(-1);
        for k in ["element", "key", "value"] {
            if let Some(inner) = o.get(k) {
                max = max.max(in_type(inner));
            }
        }
        max
    }
    fields
        .iter()
        .map(|f| {
            let own = f.get("id").and_then(Value::as_i64).unwrap_or(-1);
            own.max(f.get("type").map(in_type).unwrap_or(-1))
        })
        .max()
        .unwrap_or(-1)
}

/// `POST /v1/databases/{db}/tables`.
pub(super) async fn create(
    catalog: &Catalog,
    db: &str,
    body: &[u8],
) -> Result<Response, RestError> {
    let req: CreateTable = parse_body(body)?;
    let id = req.identifier.identifier();
    if id.database != db {
        return Err(RestError::new(
            ErrorKind::InvalidArgument,
            format!(
                "the table '{id}' is created under database '{db}': the identifier's database must be '{db}'"
            ),
        ));
    }
    exists(catalog, db).await?;
    let schema = json!({
        "version": 3,
        "id": 0,
        "fields": req.schema.fields,
        "highestFieldId": highest_field_id(&req.schema.fields),
        "partitionKeys": req.schema.partition_keys,
        "primaryKeys": req.schema.primary_keys,
        "options": req.schema.options.unwrap_or_default(),
        "comment": req.schema.comment,
        "timeMillis": catalog.clock().now_millis(),
    });
    let schema: TableSchema = serde_json::from_value(schema).map_err(|e| {
        RestError::new(
            ErrorKind::InvalidArgument,
            format!("table '{id}': malformed schema: {e}"),
        )
    })?;
    catalog
        .create_table_with_schema(&id, schema, false)
        .await
        .map_err(|e| about(e, "TABLE", &id.to_string()))?;
    ok(json!({}))
}

/// One of Paimon's `SchemaChange` JSON objects (`action` names the kind) as tidelake's.
pub(crate) fn schema_change(
    change: &Value,
    table: &Table,
) -> Result<crate::schema::change::SchemaChange, Refusal> {
    use crate::schema::change::{ColumnMove, SchemaChange};
    let text = |key: &str| -> Result<String, Refusal> {
        change
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Refusal(format!("schema change {change}: no string '{key}'")))
    };
    let opt_text = |key: &str| change.get(key).and_then(Value::as_str).map(str::to_string);
    let column = || -> Result<String, Refusal> {
        let names = change
            .get("fieldNames")
            .and_then(Value::as_array)
            .ok_or_else(|| Refusal(format!("schema change {change}: no 'fieldNames'")))?;
        match names.as_slice() {
            [one] => one.as_str().map(str::to_string).ok_or_else(|| {
                Refusal(format!(
                    "schema change {change}: a field name is not a string"
                ))
            }),
            _ => Err(Refusal(format!(
                "schema change {change}: only top-level columns can be changed"
            ))),
        }
    };
    let data_type = |key: &str| -> Result<crate::spec::DataType, Refusal> {
        let v = change
            .get(key)
            .ok_or_else(|| Refusal(format!("schema change {change}: no '{key}'")))?;
        serde_json::from_value(v.clone())
            .map_err(|e| Refusal(format!("schema change {change}: {e}")))
    };
    let position = |key: &str| -> Result<Option<ColumnMove>, Refusal> {
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
            _ => Err(Refusal(format!("schema change {change}: unknown move {m}"))),
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
                    .ok_or_else(|| Refusal(format!("no column '{name}'")))?;
                data_type = data_type.with_nullable(current.data_type.nullable);
            }
            SchemaChange::UpdateColumnType { name, data_type }
        }
        "updateColumnNullability" => SchemaChange::UpdateColumnNullability {
            name: column()?,
            nullable: change
                .get("newNullability")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    Refusal(format!(
                        "schema change {change}: no boolean 'newNullability'"
                    ))
                })?,
        },
        "updateColumnComment" => SchemaChange::UpdateColumnComment {
            name: column()?,
            comment: opt_text("newComment"),
        },
        "updateColumnPosition" => {
            let m = change
                .get("move")
                .ok_or_else(|| Refusal(format!("schema change {change}: no 'move'")))?;
            let name = m
                .get("fieldName")
                .and_then(Value::as_str)
                .ok_or_else(|| Refusal(format!("schema change {change}: no 'move.fieldName'")))?;
            SchemaChange::UpdateColumnPosition {
                name: name.to_string(),
                position: position("move")?
                    .ok_or_else(|| Refusal(format!("schema change {change}: no move")))?,
            }
        }
        other => return Err(Refusal(format!("schema change '{other}' is not supported"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_field_ids_count() {
        let fields: Vec<Value> = serde_json::from_str(
            r#"[{"id":0,"name":"a","type":"INT"},
                {"id":1,"name":"r","type":{"type":"ROW","fields":[{"id":5,"name":"x","type":"INT"}]}},
                {"id":2,"name":"m","type":{"type":"ARRAY","element":{"type":"ROW","fields":[{"id":7,"name":"y","type":"INT"}]}}}]"#,
        )
        .unwrap();
        assert_eq!(highest_field_id(&fields), 7);
        assert_eq!(highest_field_id(&[]), -1);
    }
}
