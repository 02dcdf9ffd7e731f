//! What crosses the REST catalog's wire besides the routes: request bodies parsed, query
//! parameters, pages of names (Paimon's `pageToken`/`maxResults`/`*NamePattern`), and answers
//! (a JSON body, or an error naming the resource it is about).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{json_response, RestError};
use crate::catalog::Catalog;
use crate::error::ErrorKind;

/// Names a page lists at most when the client does not say.
const MAX_PAGE: usize = 1000;

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
    pub(super) fn parse(query: &str) -> Self {
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

/// Where a path of the warehouse is, as clients open it: an absolute local path, or the
/// object store's URI.
pub(super) fn location(catalog: &Catalog, path: &str) -> String {
    match catalog.io().local_root() {
        Some(root) => root.join(path).display().to_string(),
        None => format!("{}/{path}", catalog.io().uri().trim_end_matches('/')),
    }
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
}
