//! `SHOW TABLES`, `SHOW DATABASES` and `DESCRIBE t`, answered from the catalog (DataFusion's
//! information schema is off): one small batch each.

use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{ShowStatementIn, Statement};

use super::{
    internal, object_name_parts, rows_output, SqlEngine, SqlOutput, SqlSession, StatementKind,
};
use crate::error::Result;

/// SHOW and DESCRIBE, answered from the catalog.
pub(super) async fn metadata_statement(
    engine: &SqlEngine,
    session: &SqlSession,
    stmt: &DFStatement,
) -> Result<Option<SqlOutput>> {
    let DFStatement::Statement(s) = stmt else {
        return Ok(None);
    };
    let batch = match s.as_ref() {
        Statement::ShowTables { show_options, .. } => {
            let db = match &show_options.show_in {
                Some(ShowStatementIn {
                    parent_name: Some(n),
                    ..
                }) => {
                    let mut parts = object_name_parts(n)?;
                    let db = parts.pop().unwrap_or_default();
                    match parts.as_slice() {
                        [] => db,
                        [c] if c == engine.catalog_name() => db,
                        _ => {
                            return crate::error::invalid!(
                                "unknown catalog '{}'; the catalog is '{}'",
                                parts.join("."),
                                engine.catalog_name()
                            )
                        }
                    }
                }
                _ => session.database.clone(),
            };
            let tables = engine.catalog().list_tables(&db).await?;
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("database", ArrowType::Utf8, false),
                    Field::new("table_name", ArrowType::Utf8, false),
                ])),
                vec![
                    Arc::new(StringArray::from(vec![db.as_str(); tables.len()])),
                    Arc::new(StringArray::from(tables)),
                ],
            )
        }
        Statement::ShowDatabases { .. } | Statement::ShowSchemas { .. } => {
            let dbs = engine.catalog().list_databases().await?;
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new(
                    "database",
                    ArrowType::Utf8,
                    false,
                )])),
                vec![Arc::new(StringArray::from(dbs))],
            )
        }
        Statement::ExplainTable { table_name, .. } => {
            let id = engine.identifier(session, table_name)?;
            let table = engine.catalog().load_table(&id).await?;
            let schema = table.schema();
            let f = &schema.fields;
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("column_name", ArrowType::Utf8, false),
                    Field::new("data_type", ArrowType::Utf8, false),
                    Field::new("is_nullable", ArrowType::Utf8, false),
                    Field::new("primary_key", ArrowType::Utf8, false),
                    Field::new("partition_key", ArrowType::Utf8, false),
                    Field::new("comment", ArrowType::Utf8, true),
                ])),
                vec![
                    Arc::new(StringArray::from_iter_values(f.iter().map(|c| &c.name))),
                    Arc::new(StringArray::from_iter_values(
                        f.iter()
                            .map(|c| c.data_type.clone().with_nullable(true).to_string()),
                    )),
                    Arc::new(StringArray::from_iter_values(f.iter().map(|c| {
                        if c.data_type.nullable {
                            "YES"
                        } else {
                            "NO"
                        }
                    }))),
                    Arc::new(StringArray::from_iter_values(
                        f.iter()
                            .map(|c| yes_no(schema.primary_keys.contains(&c.name))),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        f.iter()
                            .map(|c| yes_no(schema.partition_keys.contains(&c.name))),
                    )),
                    Arc::new(StringArray::from(
                        f.iter().map(|c| c.description.clone()).collect::<Vec<_>>(),
                    )),
                ],
            )
        }
        _ => return Ok(None),
    }
    .map_err(|e| internal(format!("metadata result: {e}")))?;
    Ok(Some(rows_output(StatementKind::Query, batch)))
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "YES"
    } else {
        "NO"
    }
}
