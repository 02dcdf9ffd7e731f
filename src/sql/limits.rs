//! How large and how deep a statement may be, checked on the parsed statement before anything
//! plans it. Planning, optimizing, evaluating and even dropping an expression tree recurse once
//! per level, so the depth a statement may reach is what decides the stack its work thread needs
//! ([`crate::runtime::WORK_STACK_BYTES`]). The parser itself bounds nesting by parentheses,
//! function calls and prefix operators (DataFusion's recursion limit); what it builds in loops,
//! chains of binary operators (`a OR b OR ...`, `1 + 1 + ...`, `x || y || ...`) and of set
//! operations (`... UNION ALL ...`), is bounded here.
//!
//! The checks never recurse deeper than the limits themselves: the expression walk stops at the
//! first level past the limit, and set-operation chains are measured in a loop before the walk
//! descends into them.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Query, Select, SetExpr, Statement, TableFactor};
use datafusion::sql::sqlparser::ast::{Visit, Visitor};

use crate::error::{invalid, Result};

/// Largest statement accepted, in bytes of SQL text.
pub const MAX_STATEMENT_BYTES: usize = 1024 * 1024;

/// Deepest expression nesting accepted (a chain of `n` binary operators nests `n` deep).
pub const MAX_EXPRESSION_DEPTH: usize = 1000;

/// Most SELECTs (union branches, subqueries) plus table references in one statement.
pub const MAX_RELATIONS: usize = 1000;

/// InvalidArgument when `sql` is longer than [`MAX_STATEMENT_BYTES`].
pub fn check_size(sql: &str, what: &str) -> Result<()> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return invalid!(
            "{what} is {} bytes, more than the limit of {MAX_STATEMENT_BYTES} bytes",
            sql.len()
        );
    }
    Ok(())
}

/// InvalidArgument when `stmt` nests expressions deeper than [`MAX_EXPRESSION_DEPTH`] or holds
/// more than [`MAX_RELATIONS`] SELECTs and table references.
pub(crate) fn check_shape(stmt: &Statement) -> Result<()> {
    check(stmt)
}

fn check(node: &impl Visit) -> Result<()> {
    match node.visit(&mut Shape::default()) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(message) => invalid!("{message}"),
    }
}

/// The limits on a stand-alone expression given as text (a changelog subscription's filter):
/// its size, then its depth. A text that does not parse passes: its parser reports it.
pub fn check_filter(text: &str) -> Result<()> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    check_size(text, "the filter")?;
    let dialect = GenericDialect {};
    let parsed = Parser::new(&dialect)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr());
    match parsed {
        Ok(expr) => check_expr(&expr),
        Err(_) => Ok(()),
    }
}

/// InvalidArgument when a stand-alone expression is too deep.
pub(crate) fn check_expr(expr: &Expr) -> Result<()> {
    check(expr)
}

#[derive(Debug, Default)]
struct Shape {
    depth: usize,
    relations: usize,
}

impl Shape {
    fn count_relations(&mut self, n: usize) -> ControlFlow<String> {
        self.relations += n;
        if self.relations > MAX_RELATIONS {
            return ControlFlow::Break(format!(
                "the statement has more than {MAX_RELATIONS} SELECTs and table references; \
                 split it into smaller statements"
            ));
        }
        ControlFlow::Continue(())
    }
}

/// The length of the chain of set operations down the left side of `body`, measured in a loop
/// (the parser builds `a UNION b UNION c` as a left-deep tree).
fn set_operation_chain(body: &SetExpr) -> usize {
    let mut n = 0;
    let mut at = body;
    loop {
        match at {
            SetExpr::SetOperation { left, .. } => {
                n += 1;
                at = left;
            }
            SetExpr::Query(q) => at = &q.body,
            _ => return n,
        }
    }
}

/// Table functions that read files (DuckDB's and DataFusion's spellings): a client must never
/// make the server read a path of its choosing.
fn is_file_function(name: &str) -> bool {
    name.starts_with("read_")
        || name.ends_with("_scan")
        || matches!(name, "parquet" | "csv" | "json" | "avro" | "arrow" | "glob")
}

impl Visitor for Shape {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        // Before the walk descends the chain, which it does recursively.
        let chain = set_operation_chain(&query.body);
        if chain > MAX_RELATIONS {
            return ControlFlow::Break(format!(
                "the statement chains {chain} set operations (UNION, INTERSECT, EXCEPT), more \
                 than the limit of {MAX_RELATIONS}"
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, _select: &Select) -> ControlFlow<String> {
        self.count_relations(1)
    }

    fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<String> {
        if let TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = t
        {
            let function = name.to_string().to_ascii_lowercase();
            let last = function.rsplit('.').next().unwrap_or(&function);
            if is_file_function(last) {
                return ControlFlow::Break(format!(
                    "file functions such as {last}(...) are refused: tidelake reads only the \
                     tables of its warehouse"
                ));
            }
        }
        self.count_relations(1)
    }

    fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<String> {
        self.depth += 1;
        if self.depth > MAX_EXPRESSION_DEPTH {
            return ControlFlow::Break(format!(
                "an expression nests more than {MAX_EXPRESSION_DEPTH} levels deep (a chain of \
                 more than {MAX_EXPRESSION_DEPTH} operators such as AND, OR, + or ||); use IN \
                 lists or split the expression"
            ));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<String> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Statement {
        use datafusion::sql::sqlparser::dialect::GenericDialect;
        use datafusion::sql::sqlparser::parser::Parser;
        Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0)
    }

    fn chain(op: &str, n: usize) -> String {
        vec!["1"; n].join(op)
    }

    #[test]
    fn file_functions_are_refused_by_name() {
        for sql in [
            "SELECT * FROM read_parquet('/etc/passwd')",
            "SELECT * FROM x.read_csv('/etc/passwd')",
            "SELECT * FROM t JOIN parquet_scan('a') ON true",
        ] {
            let e = check_shape(&parse(sql)).unwrap_err().to_string();
            assert!(e.contains("file functions such as"), "{sql}: {e}");
            assert!(e.contains("are refused"), "{sql}: {e}");
        }
        assert!(check_shape(&parse("SELECT * FROM generate_series(1, 3)")).is_ok());
        assert!(check_shape(&parse("SELECT * FROM read_me")).is_ok());
    }

    #[test]
    fn operator_chains_are_bounded_by_depth() {
        // `1 + 1 + ... + 1` with n terms nests n - 1 operators over a leaf: n levels.
        let ok = format!("SELECT {}", chain(" + ", MAX_EXPRESSION_DEPTH));
        assert!(check_shape(&parse(&ok)).is_ok());
        let deep = format!("SELECT {}", chain(" + ", MAX_EXPRESSION_DEPTH + 1));
        let e = check_shape(&parse(&deep)).unwrap_err().to_string();
        assert!(e.contains("nests more than 1000 levels"), "{e}");
        let or = format!("SELECT 1 WHERE {}", chain(" = 1 OR 1", 1500));
        assert!(check_shape(&parse(&or)).is_err());
    }

    #[test]
    fn union_chains_and_relations_are_bounded() {
        let unions = |n: usize| vec!["SELECT 1"; n].join(" UNION ALL ");
        assert!(check_shape(&parse(&unions(500))).is_ok());
        let e = check_shape(&parse(&unions(MAX_RELATIONS + 2)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("set operations"), "{e}");
        let tables: Vec<String> = (0..MAX_RELATIONS + 1).map(|i| format!("t{i}")).collect();
        let join = format!("SELECT 1 FROM {}", tables.join(", "));
        let e = check_shape(&parse(&join)).unwrap_err().to_string();
        assert!(e.contains("table references"), "{e}");
        let fine: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        assert!(check_shape(&parse(&format!(
            "SELECT 1 FROM {}",
            fine.join(" CROSS JOIN ")
        )))
        .is_ok());
        assert!(check_shape(&parse(&format!("SELECT 1 FROM {}", fine.join(", ")))).is_ok());
    }

    #[test]
    fn a_statement_over_the_size_limit_is_refused() {
        let big = "x".repeat(MAX_STATEMENT_BYTES + 1);
        let e = check_size(&big, "the statement").unwrap_err().to_string();
        assert!(e.contains("more than the limit"), "{e}");
        assert!(check_size("SELECT 1", "the statement").is_ok());
    }
}
