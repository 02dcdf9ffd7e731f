//! Which REST catalog resource a request names: the raw path parsed into a [`Route`] (a pure
//! function). Paimon's clients put each name in one path segment, form-encoded (`+` is a space,
//! `%2F` a slash), so segments are split on the raw path first and decoded one by one. Every
//! resource but `/v1/config` follows the catalog prefix that `/v1/config` hands out.

use axum::http::Method;

use crate::sql::Role;

/// One resource of the REST catalog API, with its decoded names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Config,
    Databases,
    Database(String),
    Tables(String),
    Table(String, String),
    RenameTable,
    Commit(String, String),
    Snapshot(String, String),
    Rollback(String, String),
    /// The table's tags, or one (`Some(name)`).
    Tags(String, String, Option<String>),
    /// Data credentials for the table's files.
    Token(String, String),
    /// The table's partitions.
    Partitions(String, String),
    /// Any other resource of a table (`token`, `partitions`, `branches`, …): its path segments.
    TableResource(String, String, Vec<String>),
}

impl Route {
    /// What kind of resource, for audit lines (`REST POST commit`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Route::Config => "config",
            Route::Databases => "databases",
            Route::Database(_) => "database",
            Route::Tables(_) => "tables",
            Route::Table(..) => "table",
            Route::RenameTable => "rename",
            Route::Commit(..) => "commit",
            Route::Snapshot(..) => "snapshot",
            Route::Rollback(..) => "rollback",
            Route::Tags(..) => "tags",
            Route::Token(..) => "token",
            Route::Partitions(..) => "partitions",
            Route::TableResource(..) => "table resource",
        }
    }

    /// The database or table it names, for audit lines.
    pub(crate) fn object(&self) -> Option<String> {
        match self {
            Route::Config | Route::Databases | Route::RenameTable => None,
            Route::Database(d) | Route::Tables(d) => Some(d.clone()),
            Route::Table(d, t)
            | Route::Commit(d, t)
            | Route::Snapshot(d, t)
            | Route::Rollback(d, t)
            | Route::Tags(d, t, _)
            | Route::Token(d, t)
            | Route::Partitions(d, t)
            | Route::TableResource(d, t, _) => Some(format!("{d}.{t}")),
        }
    }
}

/// A request's route and the catalog prefix it names (`None`: no prefix segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Routed {
    pub(crate) prefix: Option<String>,
    pub(crate) route: Route,
}

/// A form-encoded path segment, decoded (`None`: not valid UTF-8 once decoded).
pub(crate) fn decode_segment(raw: &str) -> Option<String> {
    let spaced = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The route of `path` (the raw, still encoded path), or `None` when it names nothing.
pub(crate) fn parse(path: &str) -> Option<Routed> {
    let rest = path.strip_prefix("/v1/")?;
    let raw: Vec<&str> = rest.split('/').collect();
    if raw.iter().any(|s| s.is_empty()) {
        return None;
    }
    let segments: Vec<String> = raw
        .iter()
        .map(|s| decode_segment(s))
        .collect::<Option<_>>()?;
    if segments == ["config"] {
        return Some(Routed {
            prefix: None,
            route: Route::Config,
        });
    }
    // Every other resource follows the catalog prefix `/v1/config` hands out.
    let (prefix, s) = segments.split_first()?;
    let prefix = Some(prefix.clone());
    let s: Vec<&str> = s.iter().map(String::as_str).collect();
    let route = match s.as_slice() {
        ["databases"] => Route::Databases,
        ["databases", db] => Route::Database(db.to_string()),
        ["databases", db, "tables"] => Route::Tables(db.to_string()),
        ["databases", db, "tables", t] => Route::Table(db.to_string(), t.to_string()),
        ["databases", db, "tables", t, "commit"] => Route::Commit(db.to_string(), t.to_string()),
        ["databases", db, "tables", t, "snapshot"] => {
            Route::Snapshot(db.to_string(), t.to_string())
        }
        ["databases", db, "tables", t, "rollback"] => {
            Route::Rollback(db.to_string(), t.to_string())
        }
        ["databases", db, "tables", t, "tags"] => Route::Tags(db.to_string(), t.to_string(), None),
        ["databases", db, "tables", t, "tags", tag] => {
            Route::Tags(db.to_string(), t.to_string(), Some(tag.to_string()))
        }
        ["databases", db, "tables", t, "token"] => Route::Token(db.to_string(), t.to_string()),
        ["databases", db, "tables", t, "partitions"] => {
            Route::Partitions(db.to_string(), t.to_string())
        }
        ["databases", db, "tables", t, rest @ ..] => Route::TableResource(
            db.to_string(),
            t.to_string(),
            rest.iter().map(|s| s.to_string()).collect(),
        ),
        ["tables", "rename"] => Route::RenameTable,
        _ => return None,
    };
    Some(Routed { prefix, route })
}

/// The least role that may make `method` on `route`: reading needs a reader, a commit a writer,
/// anything else that changes the catalog an admin.
pub(crate) fn required_role(method: &Method, route: &Route) -> Role {
    match (method, route) {
        (&Method::GET, _) => Role::Reader,
        (_, Route::Commit(..)) => Role::Writer,
        _ => Role::Admin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Option<(Option<String>, Route)> {
        parse(path).map(|r| (r.prefix, r.route))
    }

    #[test]
    fn names_are_form_decoded_one_segment_at_a_time() {
        assert_eq!(
            route("/v1/tidelake/databases/db+1/tables/t%2F1"),
            Some((
                Some("tidelake".into()),
                Route::Table("db 1".into(), "t/1".into())
            ))
        );
        assert_eq!(
            route("/v1/my%2Fpfx/databases/a%2Bb/tables/t%24branch_b1/commit"),
            Some((
                Some("my/pfx".into()),
                Route::Commit("a+b".into(), "t$branch_b1".into())
            ))
        );
    }

    #[test]
    fn paths_with_and_without_a_prefix() {
        assert_eq!(route("/v1/config"), Some((None, Route::Config)));
        assert_eq!(
            route("/v1/p/databases"),
            Some((Some("p".into()), Route::Databases))
        );
        assert_eq!(
            route("/v1/p/databases/d"),
            Some((Some("p".into()), Route::Database("d".into())))
        );
        assert_eq!(
            route("/v1/p/tables/rename"),
            Some((Some("p".into()), Route::RenameTable))
        );
        assert_eq!(
            route("/v1/databases/databases/d"),
            Some((Some("databases".into()), Route::Database("d".into())))
        );
        assert_eq!(
            route("/v1/p/databases/d/tables/t/tags/v+1"),
            Some((
                Some("p".into()),
                Route::Tags("d".into(), "t".into(), Some("v 1".into()))
            ))
        );
        assert_eq!(
            route("/v1/p/databases/d/tables/t/branches/b/forward"),
            Some((
                Some("p".into()),
                Route::TableResource(
                    "d".into(),
                    "t".into(),
                    vec!["branches".into(), "b".into(), "forward".into()]
                )
            ))
        );
    }

    #[test]
    fn what_names_nothing() {
        for path in [
            "/",
            "/v1",
            "/v1/",
            "/v2/config",
            "/v1/p/databases//tables",
            "/v1/p/nothing",
            "/v1/p/databases/d/views",
            "/v1/p/databases/%FF",
            "/v1/databases",
            "/v1/tables/rename",
        ] {
            assert_eq!(route(path), None, "{path}");
        }
    }

    #[test]
    fn roles_by_method_and_resource() {
        let t = Route::Table("d".into(), "t".into());
        assert_eq!(required_role(&Method::GET, &t), Role::Reader);
        assert_eq!(required_role(&Method::DELETE, &t), Role::Admin);
        assert_eq!(
            required_role(&Method::POST, &Route::Commit("d".into(), "t".into())),
            Role::Writer
        );
        assert_eq!(required_role(&Method::POST, &Route::Databases), Role::Admin);
        assert!(Role::Admin > Role::Writer && Role::Writer > Role::Reader);
    }
}
