//! The REST catalog's endpoints over the principal's tenant's [`Catalog`]: config, databases,
//! tables, the latest snapshot, and commits of snapshots a client wrote the files of. Field names
//! are those of Paimon's REST API (`rest-catalog-open-api.yaml`, read by pypaimon's
//! `api_response.py`).

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Digest;

use super::commit::{commit, latest_snapshot};
use super::data::{partitions, token};
use super::lifecycle::{branches, rollback, schema_change, AlterTable, CreateTag};
use super::route::Route;
use super::{json_response, RestError};
use crate::catalog::Catalog;
use crate::error::ErrorKind;
use crate::io::sts::DataTokens;
use crate::server::auth::Principal;
use crate::spec::identifier::Identifier;
use crate::spec::TableSchema;
use crate::table::Table;

/// Names a page lists at most when the client does not say.
const MAX_PAGE: usize = 1000;

pub(super) async fn dispatch(
    principal: &Principal,
    tokens: Option<&DataTokens>,
    method: &Method,
    route: Route,
    query: &str,
    body: &Bytes,
) -> Result<Response, RestError> {
    let catalog = principal.tenant.engine.catalog();
    let q = Query::parse(query);
    match (method, route) {
        (&Method::GET, Route::Config) => config(
            principal,
            tokens.is_some() && crate::io::s3::S3Location::parse(catalog.io().uri()).is_some(),
            &q,
        ),
        (&Method::GET, Route::Databases) => {
            let names = catalog.list_databases().await?;
            let (page, next) = page(
                names,
                q.get("databaseNamePattern"),
                q.get("pageToken"),
                q.max_results()?,
            );
            ok(json!({"databases": page, "nextPageToken": next}))
        }
        (&Method::POST, Route::Databases) => {
            let req: CreateDatabase = parse_body(body)?;
            catalog
                .create_database_with(&req.name, &req.options.unwrap_or_default(), false)
                .await
                .map_err(|e| about(e, "DATABASE", &req.name))?;
            ok(json!({}))
        }
        (&Method::GET, Route::Database(db)) => {
            let options = catalog
                .database_options(&db)
                .await
                .map_err(|e| about(e, "DATABASE", &db))?;
            ok(json!({
                "id": db,
                "name": db,
                "location": location(catalog, &format!("{db}.db")),
                "options": options,
            }))
        }
        (&Method::DELETE, Route::Database(db)) => {
            // Paimon's clients check for tables themselves before a non-cascading drop.
            catalog
                .drop_database(&db, true)
                .await
                .map_err(|e| about(e, "DATABASE", &db))?;
            ok(json!({}))
        }
        (&Method::GET, Route::Tables(db)) => {
            exists(catalog, &db).await?;
            let names = catalog.list_tables(&db).await?;
            let (page, next) = page(
                names,
                q.get("tableNamePattern"),
                q.get("pageToken"),
                q.max_results()?,
            );
            ok(json!({"tables": page, "nextPageToken": next}))
        }
        (&Method::POST, Route::Tables(db)) => create_table(catalog, &db, body).await,
        (&Method::GET, Route::Table(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            ok(table_response(catalog, &table).await?)
        }
        (&Method::DELETE, Route::Table(db, t)) => {
            let id = Identifier::new(db, t);
            catalog
                .drop_table(&id, false)
                .await
                .map_err(|e| about(e, "TABLE", &id.to_string()))?;
            ok(json!({}))
        }
        (&Method::POST, Route::RenameTable) => {
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
        (&Method::GET, Route::Snapshot(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            latest_snapshot(&table).await
        }
        (&Method::POST, Route::Commit(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            commit(catalog, &table, body).await
        }
        (&Method::POST, Route::Rollback(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            rollback(&table, body).await
        }
        (&Method::GET, Route::Tags(db, t, None)) => {
            let table = load(catalog, &db, &t).await?;
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
        (&Method::POST, Route::Tags(db, t, None)) => {
            let table = load(catalog, &db, &t).await?;
            let req: CreateTag = parse_body(body)?;
            if req.time_retained.is_some() {
                return Err(RestError::new(
                    ErrorKind::Unsupported,
                    format!("tag '{}' of '{db}.{t}': timeRetained is not supported (tags are kept until deleted)", req.tag_name),
                ));
            }
            table
                .create_tag(&req.tag_name, req.snapshot_id)
                .await
                .map_err(|e| match req.snapshot_id {
                    Some(id) if e.kind() == ErrorKind::NotFound => {
                        RestError::from(e).about("SNAPSHOT", id.to_string())
                    }
                    _ => about(e, "TAG", &req.tag_name),
                })?;
            ok(json!({}))
        }
        (&Method::GET, Route::Tags(db, t, Some(tag))) => {
            let table = load(catalog, &db, &t).await?;
            let tags = table.list_tags().await?;
            let Some((_, snapshot)) = tags.into_iter().find(|(n, _)| *n == tag) else {
                return Err(RestError::new(
                    ErrorKind::NotFound,
                    format!("table '{db}.{t}' has no tag '{tag}'"),
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
        (&Method::DELETE, Route::Tags(db, t, Some(tag))) => {
            let table = load(catalog, &db, &t).await?;
            table
                .delete_tag(&tag)
                .await
                .map_err(|e| about(e, "TAG", &tag))?;
            ok(json!({}))
        }
        (&Method::POST, Route::Table(db, t)) => {
            let req: AlterTable = parse_body(body)?;
            let id = Identifier::new(db, t);
            let table = load(catalog, &id.database, &id.table).await?;
            let changes = req
                .changes
                .iter()
                .map(|c| schema_change(c, &table))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| {
                    RestError::new(ErrorKind::InvalidArgument, format!("table '{id}': {m}"))
                })?;
            if changes.is_empty() {
                return Err(RestError::new(
                    ErrorKind::InvalidArgument,
                    format!("table '{id}': no schema change given"),
                ));
            }
            catalog
                .alter_table(&id, &changes)
                .await
                .map_err(|e| about(e, "TABLE", &id.to_string()))?;
            ok(json!({}))
        }
        (&Method::GET, Route::Token(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            token(tokens, principal, catalog, &table).await
        }
        (&Method::GET, Route::Partitions(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            partitions(&table, &q).await
        }
        (_, Route::TableResource(db, t, what))
            if what.first().map(String::as_str) == Some("branches") =>
        {
            let table = load(catalog, &db, &t).await?;
            branches(&table, method, &what[1..], body).await
        }
        (_, Route::TableResource(db, t, what)) => Err(RestError::new(
            ErrorKind::Unsupported,
            format!(
                "{method} {} of table '{db}.{t}' is not served by this catalog yet",
                what.join("/")
            ),
        )),
        (&Method::POST, Route::Database(db)) => {
            let req: AlterDatabase = parse_body(body)?;
            let before = catalog
                .database_options(&db)
                .await
                .map_err(|e| about(e, "DATABASE", &db))?;
            catalog
                .alter_database(&db, &req.removals, &req.updates)
                .await
                .map_err(|e| about(e, "DATABASE", &db))?;
            let (removed, missing): (Vec<&String>, Vec<&String>) =
                req.removals.iter().partition(|k| before.contains_key(*k));
            ok(json!({
                "removed": removed,
                "updated": req.updates.keys().collect::<Vec<_>>(),
                "missing": missing,
            }))
        }
        (method, route) => Err(RestError::new(
            ErrorKind::InvalidArgument,
            format!(
                "{method} is not an operation on {}",
                super::route_name(&route)
            ),
        )),
    }
}

pub(super) fn ok(body: Value) -> Result<Response, RestError> {
    Ok(json_response(StatusCode::OK, &body))
}

/// `e` with the resource it is about, when it is a 404 or 409.
pub(super) fn about(e: crate::error::Error, resource_type: &'static str, name: &str) -> RestError {
    let kind = e.kind();
    let error = RestError::from(e);
    match kind {
        ErrorKind::NotFound | ErrorKind::AlreadyExists => error.about(resource_type, name),
        _ => error,
    }
}

pub(super) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, RestError> {
    serde_json::from_slice(body).map_err(|e| {
        RestError::new(
            ErrorKind::InvalidArgument,
            format!("malformed request body: {e}"),
        )
    })
}

/// A request's query parameters (form-decoded).
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Self {
        Self(
            url::form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn max_results(&self) -> Result<usize, RestError> {
        match self.get("maxResults") {
            None => Ok(MAX_PAGE),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n.min(MAX_PAGE)),
                _ => Err(RestError::new(
                    ErrorKind::InvalidArgument,
                    format!("maxResults must be a positive integer, not '{v}'"),
                )),
            },
        }
    }
}

/// SQL `LIKE`: `%` matches any run of characters, `_` any one.
pub(crate) fn like(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // matched[j]: the pattern so far matches name[..j].
    let mut matched = vec![false; n.len() + 1];
    matched[0] = true;
    for &c in &p {
        let mut next = vec![false; n.len() + 1];
        for j in 0..=n.len() {
            next[j] = match c {
                '%' => matched[j] || (j > 0 && next[j - 1]),
                '_' => j > 0 && matched[j - 1],
                c => j > 0 && matched[j - 1] && n[j - 1] == c,
            };
        }
        matched = next;
    }
    matched[n.len()]
}

/// One page of `names` (sorted): those matching `pattern`, after `token` (the last name of the
/// previous page), at most `max`; and the token of the next page when more follow.
pub(crate) fn page(
    mut names: Vec<String>,
    pattern: Option<&str>,
    token: Option<&str>,
    max: usize,
) -> (Vec<String>, Option<String>) {
    names.sort();
    let mut rest = names
        .into_iter()
        .filter(|n| pattern.is_none_or(|p| like(p, n)))
        .filter(|n| token.is_none_or(|t| n.as_str() > t));
    let page: Vec<String> = rest.by_ref().take(max).collect();
    let next = match rest.next() {
        Some(_) => page.last().cloned(),
        None => None,
    };
    (page, next)
}

/// `GET /v1/config`: the principal's catalog as the prefix of every other path. A `warehouse`
/// naming another catalog is refused.
fn config(principal: &Principal, data_tokens: bool, q: &Query) -> Result<Response, RestError> {
    let name = principal.tenant.name.as_str();
    if let Some(asked) = q.get("warehouse") {
        // pypaimon 2.1 encodes the value twice.
        let asked = if asked.contains('%') || asked.contains('+') {
            super::route::decode_segment(asked).unwrap_or_else(|| asked.to_string())
        } else {
            asked.to_string()
        };
        if asked != name {
            return Err(RestError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "warehouse '{asked}' is not a catalog '{}' may use; its catalog is '{name}'",
                    principal.subject
                ),
            ));
        }
    }
    let mut overrides = json!({"prefix": name, "warehouse": name});
    if data_tokens {
        // Clients then ask `GET …/token` for each table's storage keys.
        overrides["data-token.enabled"] = json!("true");
    }
    ok(json!({"defaults": {}, "overrides": overrides}))
}

async fn exists(catalog: &Catalog, db: &str) -> Result<(), RestError> {
    if catalog.database_exists(db).await? {
        return Ok(());
    }
    Err(RestError::new(
        ErrorKind::NotFound,
        format!("database '{db}' does not exist"),
    )
    .about("DATABASE", db))
}

async fn load(catalog: &Catalog, db: &str, t: &str) -> Result<Table, RestError> {
    let id = Identifier::new(db, t);
    catalog
        .load_table(&id)
        .await
        .map_err(|e| about(e, "TABLE", &id.to_string()))
}

/// Where a path of the warehouse is, as clients open it: an absolute local path, or the
/// object store's URI.
pub(super) fn location(catalog: &Catalog, path: &str) -> String {
    match catalog.io().local_root() {
        Some(root) => root.join(path).display().to_string(),
        None => format!("{}/{path}", catalog.io().uri().trim_end_matches('/')),
    }
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
struct CreateDatabase {
    name: String,
    #[serde(default)]
    options: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct AlterDatabase {
    #[serde(default)]
    removals: Vec<String>,
    #[serde(default)]
    updates: BTreeMap<String, String>,
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

async fn create_table(catalog: &Catalog, db: &str, body: &[u8]) -> Result<Response, RestError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_as_sql_does() {
        assert!(like("%", ""));
        assert!(like("ord%", "orders"));
        assert!(like("o_ders", "orders"));
        assert!(like("%der%", "orders"));
        assert!(!like("ord_", "orders"));
        assert!(!like("x%", "orders"));
        assert!(like("orders", "orders"));
        assert!(!like("order", "orders"));
    }

    #[test]
    fn pages_follow_their_token() {
        let names: Vec<String> = ["c", "a", "b", "d", "e"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (p, next) = page(names.clone(), None, None, 2);
        assert_eq!(
            (p, next.as_deref()),
            (vec!["a".into(), "b".into()], Some("b"))
        );
        let (p, next) = page(names.clone(), None, Some("b"), 2);
        assert_eq!(
            (p, next.as_deref()),
            (vec!["c".into(), "d".into()], Some("d"))
        );
        let (p, next) = page(names.clone(), None, Some("d"), 2);
        assert_eq!((p, next), (vec!["e".to_string()], None));
        let (p, next) = page(names, Some("%d%"), None, 2);
        assert_eq!((p, next), (vec!["d".to_string()], None));
    }

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
