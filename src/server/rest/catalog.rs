//! The REST catalog's catalog-level resources: `GET /v1/config` (the principal's catalog as the
//! prefix of every other path) and the databases (list, create, get, alter options, drop).

use std::collections::BTreeMap;

use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::wire::{about, location, ok, page, parse_body, Query};
use super::RestError;
use crate::catalog::Catalog;
use crate::error::ErrorKind;
use crate::server::auth::Principal;

/// `GET /v1/config`: the principal's catalog as the prefix of every other path. A `warehouse`
/// naming another catalog is refused.
pub(super) fn config(
    principal: &Principal,
    data_tokens: bool,
    q: &Query,
) -> Result<Response, RestError> {
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

/// `GET /v1/databases`.
pub(super) async fn list(catalog: &Catalog, q: &Query) -> Result<Response, RestError> {
    let names = catalog.list_databases().await?;
    let (page, next) = page(
        names,
        q.get("databaseNamePattern"),
        q.get("pageToken"),
        q.max_results()?,
    );
    ok(json!({"databases": page, "nextPageToken": next}))
}

/// `POST /v1/databases`.
pub(super) async fn create(catalog: &Catalog, body: &[u8]) -> Result<Response, RestError> {
    let req: CreateDatabase = parse_body(body)?;
    catalog
        .create_database_with(&req.name, &req.options.unwrap_or_default(), false)
        .await
        .map_err(|e| about(e, "DATABASE", &req.name))?;
    ok(json!({}))
}

/// `GET /v1/databases/{db}`.
pub(super) async fn get(catalog: &Catalog, db: &str) -> Result<Response, RestError> {
    let options = catalog
        .database_options(db)
        .await
        .map_err(|e| about(e, "DATABASE", db))?;
    ok(json!({
        "id": db,
        "name": db,
        "location": location(catalog, &format!("{db}.db")),
        "options": options,
    }))
}

/// `POST /v1/databases/{db}`: options removed and updated.
pub(super) async fn alter(catalog: &Catalog, db: &str, body: &[u8]) -> Result<Response, RestError> {
    let req: AlterDatabase = parse_body(body)?;
    let before = catalog
        .database_options(db)
        .await
        .map_err(|e| about(e, "DATABASE", db))?;
    catalog
        .alter_database(db, &req.removals, &req.updates)
        .await
        .map_err(|e| about(e, "DATABASE", db))?;
    let (removed, missing): (Vec<&String>, Vec<&String>) =
        req.removals.iter().partition(|k| before.contains_key(*k));
    ok(json!({
        "removed": removed,
        "updated": req.updates.keys().collect::<Vec<_>>(),
        "missing": missing,
    }))
}

/// `DELETE /v1/databases/{db}`. Paimon's clients check for tables themselves before a
/// non-cascading drop.
pub(super) async fn drop(catalog: &Catalog, db: &str) -> Result<Response, RestError> {
    catalog
        .drop_database(db, true)
        .await
        .map_err(|e| about(e, "DATABASE", db))?;
    ok(json!({}))
}

/// Nothing, or 404 `DATABASE` when `db` does not exist.
pub(super) async fn exists(catalog: &Catalog, db: &str) -> Result<(), RestError> {
    if catalog.database_exists(db).await? {
        return Ok(());
    }
    Err(RestError::new(
        ErrorKind::NotFound,
        format!("database '{db}' does not exist"),
    )
    .about("DATABASE", db))
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
