//! The REST catalog's one routing table: every (method, resource) the catalog serves, and the
//! handler it lands in, in one match. The handlers live by resource: `super::catalog` (config,
//! databases), `super::tables`, `super::commit` (snapshots and commits),
//! `super::history` (tags, rollback, branches) and `super::data` (data tokens, partitions).

use axum::http::Method;
use axum::response::Response;
use bytes::Bytes;

use super::route::Route;
use super::tables::load;
use super::wire::Query;
use super::{catalog, commit, data, history, tables, RestError};
use crate::error::ErrorKind;
use crate::io::sts::DataTokens;
use crate::server::auth::Principal;
use crate::spec::identifier::Identifier;

/// Answers one request of `principal` (authenticated, its role checked) on `route`.
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
        (&Method::GET, Route::Config) => catalog::config(
            principal,
            tokens.is_some() && crate::io::s3::S3Location::parse(catalog.io().uri()).is_some(),
            &q,
        ),
        (&Method::GET, Route::Databases) => catalog::list(catalog, &q).await,
        (&Method::POST, Route::Databases) => catalog::create(catalog, body).await,
        (&Method::GET, Route::Database(db)) => catalog::get(catalog, &db).await,
        (&Method::POST, Route::Database(db)) => catalog::alter(catalog, &db, body).await,
        (&Method::DELETE, Route::Database(db)) => catalog::drop(catalog, &db).await,
        (&Method::GET, Route::Tables(db)) => tables::list(catalog, &db, &q).await,
        (&Method::POST, Route::Tables(db)) => tables::create(catalog, &db, body).await,
        (&Method::GET, Route::Table(db, t)) => {
            tables::get(catalog, &load(catalog, &db, &t).await?).await
        }
        (&Method::POST, Route::Table(db, t)) => {
            tables::alter(catalog, &load(catalog, &db, &t).await?, body).await
        }
        (&Method::DELETE, Route::Table(db, t)) => {
            tables::drop(catalog, Identifier::new(db, t)).await
        }
        (&Method::POST, Route::RenameTable) => tables::rename(catalog, body).await,
        (&Method::GET, Route::Snapshot(db, t)) => {
            commit::latest_snapshot(&load(catalog, &db, &t).await?).await
        }
        (&Method::POST, Route::Commit(db, t)) => {
            commit::commit(catalog, &load(catalog, &db, &t).await?, body).await
        }
        (&Method::POST, Route::Rollback(db, t)) => {
            history::rollback(&load(catalog, &db, &t).await?, body).await
        }
        (&Method::GET, Route::Tags(db, t, None)) => {
            history::list_tags(&load(catalog, &db, &t).await?, &q).await
        }
        (&Method::POST, Route::Tags(db, t, None)) => {
            history::create_tag(&load(catalog, &db, &t).await?, body).await
        }
        (&Method::GET, Route::Tags(db, t, Some(tag))) => {
            history::get_tag(&load(catalog, &db, &t).await?, tag).await
        }
        (&Method::DELETE, Route::Tags(db, t, Some(tag))) => {
            history::delete_tag(&load(catalog, &db, &t).await?, &tag).await
        }
        (&Method::GET, Route::Token(db, t)) => {
            let table = load(catalog, &db, &t).await?;
            data::token(tokens, principal, catalog, &table).await
        }
        (&Method::GET, Route::Partitions(db, t)) => {
            data::partitions(&load(catalog, &db, &t).await?, &q).await
        }
        (_, Route::TableResource(db, t, what))
            if what.first().map(String::as_str) == Some("branches") =>
        {
            let table = load(catalog, &db, &t).await?;
            history::branches(&table, method, &what[1..], body).await
        }
        (_, Route::TableResource(db, t, what)) => Err(RestError::new(
            ErrorKind::Unsupported,
            format!(
                "{method} {} of table '{db}.{t}' is not served by this catalog yet",
                what.join("/")
            ),
        )),
        (method, route) => Err(RestError::new(
            ErrorKind::InvalidArgument,
            format!(
                "{method} is not an operation on {}",
                super::route_name(&route)
            ),
        )),
    }
}
