//! Parsing: DataFusion's generic SQL dialect plus table versions (`FOR SYSTEM_TIME AS OF`,
//! `VERSION AS OF`, `TIMESTAMP AS OF`), which are rewritten into versioned table names that the
//! schema provider resolves (`t@snapshot=3`, `t@tag=nightly`, `t@ts=1732881600000`).
//!
//! Spellings of other engines that the parser does not know are rewritten into ones it does
//! before parsing: Flink's and Spark's option statements (`ALTER TABLE t SET (...)`,
//! `RESET (...)`, `UNSET TBLPROPERTIES`) and Paimon's `ROW<..>` type. Every statement passes the
//! size and shape limits of `super::limits` here, before anything plans it.

use std::any::TypeId;
use std::ops::ControlFlow;

use datafusion::sql::parser::{DFParserBuilder, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, ObjectNamePart, TableFactor, TableVersion, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};

use crate::error::{invalid, invalid_argument, Result};

/// The generic dialect with table versioning switched on.
#[derive(Debug, Default)]
pub(crate) struct TidelakeDialect {
    inner: GenericDialect,
}

impl Dialect for TidelakeDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<GenericDialect>()
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        self.inner.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        self.inner.is_identifier_part(ch) || ch == '$'
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.inner.is_delimited_identifier_start(ch)
    }
    fn supports_table_versioning(&self) -> bool {
        true
    }
    /// `COMMENT ON TABLE | COLUMN ... IS ...`.
    fn supports_comment_on(&self) -> bool {
        true
    }
    fn supports_group_by_expr(&self) -> bool {
        self.inner.supports_group_by_expr()
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        self.inner.supports_filter_during_aggregation()
    }
    fn supports_window_function_null_treatment_arg(&self) -> bool {
        self.inner.supports_window_function_null_treatment_arg()
    }
    fn supports_dictionary_syntax(&self) -> bool {
        self.inner.supports_dictionary_syntax()
    }
    fn supports_start_transaction_modifier(&self) -> bool {
        self.inner.supports_start_transaction_modifier()
    }
    fn supports_named_fn_args_with_eq_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_eq_operator()
    }
    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_colon_operator()
    }
    fn supports_named_fn_args_with_rarrow_operator(&self) -> bool {
        self.inner.supports_named_fn_args_with_rarrow_operator()
    }
    fn supports_numeric_prefix(&self) -> bool {
        self.inner.supports_numeric_prefix()
    }
    fn supports_struct_literal(&self) -> bool {
        self.inner.supports_struct_literal()
    }
    /// `MAP<STRING, INT>` as Paimon, Flink and Spark spell it (the generic `MAP(K, V)` too).
    fn supports_map_literal_with_angle_brackets(&self) -> bool {
        true
    }
}

/// In DDL, Paimon's and Flink's `ROW<a INT, b STRING>` becomes `STRUCT<..>`, the spelling the
/// parser knows. Only CREATE and ALTER statements are touched, and only a `ROW` word followed by
/// `<` (a column named `row` compared with `<` in a query stays as written); the rest of the text
/// is kept byte for byte.
fn rewrite_row_types(sql: &str) -> Option<String> {
    use datafusion::sql::sqlparser::keywords::Keyword;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = TidelakeDialect::default();
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .ok()?;
    let significant: Vec<_> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    match &significant.first()?.token {
        Token::Word(w) if matches!(w.keyword, Keyword::CREATE | Keyword::ALTER) => {}
        _ => return None,
    }
    // Byte offsets of each line's start: locations are (line, column), both from 1, in chars.
    let lines: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |line: u64, column: u64| -> Option<usize> {
        let start = *lines.get(usize::try_from(line.checked_sub(1)?).ok()?)?;
        let column = usize::try_from(column.checked_sub(1)?).ok()?;
        sql[start..]
            .char_indices()
            .nth(column)
            .map(|(i, _)| start + i)
    };
    let mut out = String::with_capacity(sql.len() + 16);
    let mut copied = 0;
    for pair in significant.windows(2) {
        let (Token::Word(w), Token::Lt) = (&pair[0].token, &pair[1].token) else {
            continue;
        };
        if w.quote_style.is_some() || !w.value.eq_ignore_ascii_case("ROW") {
            continue;
        }
        let at = offset(pair[0].span.start.line, pair[0].span.start.column)?;
        if !sql.get(at..at + 3)?.eq_ignore_ascii_case("ROW") {
            return None;
        }
        out.push_str(&sql[copied..at]);
        out.push_str("STRUCT");
        copied = at + 3;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

/// Flink's and Spark's option statements, which the SQL parser does not know, rewritten into
/// ones it does: `ALTER TABLE t SET ('k' = 'v', ...)` becomes `... SET TBLPROPERTIES (...)`, and
/// `ALTER TABLE t RESET ('k', ...)` / `ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)`
/// become `CALL sys.reset_options('t', 'k', ...)`. `None` when `sql` is none of them.
fn rewrite_option_statement(sql: &str) -> Option<String> {
    let trimmed = sql.trim().trim_end_matches(';').trim();
    let upper = trimmed.to_ascii_uppercase();
    let rest_upper = upper.strip_prefix("ALTER TABLE ")?;
    let rest = &trimmed["ALTER TABLE ".len()..];
    let name_len = rest_upper.find(char::is_whitespace)?;
    let name = &rest[..name_len];
    let tail_upper = rest_upper[name_len..].trim_start();
    let tail = rest[name_len..].trim_start();
    let list_of = |t_upper: &str| tail[tail.len() - t_upper.len()..].trim();
    if let Some(t) = tail_upper.strip_prefix("RESET") {
        let list = list_of(t);
        return list.starts_with('(').then(|| reset_call(name, list));
    }
    if let Some(t) = tail_upper.strip_prefix("UNSET TBLPROPERTIES") {
        let t = t.trim_start();
        let t = t.strip_prefix("IF EXISTS").unwrap_or(t);
        let list = list_of(t);
        return list.starts_with('(').then(|| reset_call(name, list));
    }
    let t = tail_upper.strip_prefix("SET")?;
    let list = list_of(t);
    list.starts_with('(')
        .then(|| format!("ALTER TABLE {name} SET TBLPROPERTIES {list}"))
}

fn reset_call(table: &str, list: &str) -> String {
    let keys = list.trim_start_matches('(').trim_end_matches(')');
    let table = table.replace('\'', "''");
    if keys.trim().is_empty() {
        format!("CALL sys.reset_options('{table}')")
    } else {
        format!("CALL sys.reset_options('{table}', {keys})")
    }
}

/// Parses exactly one statement and rewrites table versions into versioned names.
pub(crate) fn parse_one(sql: &str) -> Result<DFStatement> {
    // Flink's `ALTER TABLE t SET (...)` / `RESET (...)` are rewritten into parseable forms.
    super::limits::check_size(sql, "the statement")?;
    let rewritten = rewrite_option_statement(sql);
    let sql = rewritten.as_deref().unwrap_or(sql);
    let rows = rewrite_row_types(sql);
    let sql = rows.as_deref().unwrap_or(sql);
    let dialect = TidelakeDialect::default();
    let mut statements = DFParserBuilder::new(sql)
        .with_dialect(&dialect)
        .build()
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!("SQL syntax error: {}", strip_prefix(&e.to_string())),
            }
            .build()
        })?;
    if statements.len() != 1 {
        return invalid!(
            "expected exactly one SQL statement, got {}",
            statements.len()
        );
    }
    let mut stmt = statements.pop_front().expect("one statement");
    check_limits(&stmt)?;
    if let DFStatement::Statement(inner) = &mut stmt {
        // JDBC, ODBC and ADBC users write `?`; DataFusion numbers placeholders (`$1`, `$2`).
        let mut numbering = PlaceholderNumbering { next: 0 };
        let _ = inner.visit(&mut numbering);
        let mut rewriter = VersionRewriter { error: None };
        let _ = inner.visit(&mut rewriter);
        if let Some(e) = rewriter.error {
            return Err(e);
        }
    }
    Ok(stmt)
}

/// The statement limits of `super::limits`, on the statement an EXPLAIN wraps too.
fn check_limits(stmt: &DFStatement) -> Result<()> {
    match stmt {
        DFStatement::Statement(s) => super::limits::check_shape(s),
        DFStatement::Explain(e) => check_limits(&e.statement),
        _ => Ok(()),
    }
}

fn strip_prefix(s: &str) -> &str {
    s.trim_start_matches("SQL error: ")
        .trim_start_matches("ParserError(")
        .trim_end_matches(')')
}

struct PlaceholderNumbering {
    next: usize,
}

impl VisitorMut for PlaceholderNumbering {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Value(v) = expr {
            if let Value::Placeholder(p) = &mut v.value {
                if p == "?" {
                    self.next += 1;
                    *p = format!("${}", self.next);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

struct VersionRewriter {
    error: Option<crate::error::Error>,
}

impl VisitorMut for VersionRewriter {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table { name, version, .. } = factor {
            let Some(v) = version.take() else {
                return ControlFlow::Continue(());
            };
            match version_suffix(&v) {
                Ok(suffix) => {
                    if let Some(ObjectNamePart::Identifier(last)) = name.0.last_mut() {
                        // Unquoted names are case-insensitive (normalised to lower case).
                        let base = if last.quote_style.is_none() {
                            last.value.to_lowercase()
                        } else {
                            last.value.clone()
                        };
                        *last = Ident::with_quote('"', format!("{base}@{suffix}"));
                    }
                }
                Err(e) => {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// `3` → `snapshot=3`; `'tag'` → `tag=tag`; `TIMESTAMP '...'` → `ts=<epoch millis>`.
fn version_suffix(v: &TableVersion) -> Result<String> {
    let (expr, as_timestamp) = match v {
        TableVersion::ForSystemTimeAsOf(e) | TableVersion::VersionAsOf(e) => (e, false),
        TableVersion::TimestampAsOf(e) => (e, true),
        other => {
            return Err(invalid_argument(format!(
                "unsupported table version '{other}'"
            )))
        }
    };
    let bad = || {
        invalid_argument(format!(
            "time travel expects a snapshot id, a tag name in quotes or TIMESTAMP '...', got '{expr}'"
        ))
    };
    match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) if !as_timestamp => n
                .parse::<i64>()
                .map(|id| format!("snapshot={id}"))
                .map_err(|_| bad()),
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                if as_timestamp {
                    timestamp_millis(s).map(|t| format!("ts={t}"))
                } else {
                    Ok(format!("tag={s}"))
                }
            }
            _ => Err(bad()),
        },
        Expr::TypedString(ts) => match &ts.value.value {
            Value::SingleQuotedString(s) => timestamp_millis(s).map(|t| format!("ts={t}")),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// Parses a timestamp literal (UTC when it carries no offset) into epoch milliseconds.
fn timestamp_millis(s: &str) -> Result<i64> {
    let utc: arrow::array::timezone::Tz = "+00:00"
        .parse()
        .map_err(|e| invalid_argument(format!("{e}")))?;
    arrow::compute::kernels::cast_utils::string_to_datetime(&utc, s.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| invalid_argument(format!("invalid timestamp '{s}': {e}")))
}

/// Identifier parts, unquoted ones lower-cased (as DataFusion normalises them).
pub(crate) fn object_name_parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(if i.quote_style.is_some() {
                i.value.clone()
            } else {
                i.value.to_lowercase()
            }),
            other => invalid!("unsupported name part '{other}' in '{name}'"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_types_become_structs_in_ddl_only() {
        let ddl =
            "CREATE TABLE t (r ROW<a INT, `b` ROW<c STRING>>, m MAP<STRING, INT> COMMENT 'ROW<x>')";
        let out = rewrite_row_types(ddl).unwrap();
        assert_eq!(
            out,
            "CREATE TABLE t (r STRUCT<a INT, `b` STRUCT<c STRING>>, m MAP<STRING, INT> COMMENT 'ROW<x>')"
        );
        assert!(parse_one(ddl).is_ok());
        assert_eq!(rewrite_row_types("SELECT * FROM t WHERE row < 5"), None);
        assert_eq!(rewrite_row_types("CREATE TABLE t (a INT)"), None);
    }

    #[test]
    fn versions_become_names() {
        for (sql, name) in [
            ("SELECT * FROM t FOR SYSTEM_TIME AS OF 3", "t@snapshot=3"),
            ("SELECT * FROM db.t VERSION AS OF 7", "t@snapshot=7"),
            (
                "SELECT * FROM t FOR SYSTEM_TIME AS OF 'nightly'",
                "t@tag=nightly",
            ),
            (
                "SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '1970-01-01 00:00:01'",
                "t@ts=1000",
            ),
        ] {
            let stmt = parse_one(sql).unwrap().to_string();
            assert!(stmt.contains(&format!("\"{name}\"")), "{sql} -> {stmt}");
        }
        assert!(parse_one("SELECT * FROM t FOR SYSTEM_TIME AS OF 1 + 2").is_err());
        assert!(parse_one("SELECT 1; SELECT 2").is_err());
        let s = parse_one("SELECT a FROM t WHERE a = ? AND b < ?")
            .unwrap()
            .to_string();
        assert!(s.contains("a = $1 AND b < $2"), "{s}");
        let s = parse_one("SELECT * FROM db.t$snapshots")
            .unwrap()
            .to_string();
        assert!(s.contains("t$snapshots"), "{s}");
    }

    #[test]
    fn rewrites_flink_and_spark_option_statements() {
        assert_eq!(
            rewrite_option_statement("ALTER TABLE db.t SET ('a' = '1', 'b' = '2');").as_deref(),
            Some("ALTER TABLE db.t SET TBLPROPERTIES ('a' = '1', 'b' = '2')")
        );
        assert_eq!(
            rewrite_option_statement("alter table t reset ('a', 'b')").as_deref(),
            Some("CALL sys.reset_options('t', 'a', 'b')")
        );
        assert_eq!(
            rewrite_option_statement("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a')")
                .as_deref(),
            Some("CALL sys.reset_options('t', 'a')")
        );
        assert_eq!(
            rewrite_option_statement("ALTER TABLE t SET TBLPROPERTIES ('a' = '1')"),
            None
        );
        assert_eq!(
            rewrite_option_statement("ALTER TABLE t ADD COLUMN c INT"),
            None
        );
        assert_eq!(rewrite_option_statement("SELECT 1"), None);
    }
}
