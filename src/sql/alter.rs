//! `ALTER TABLE`: the SQL spellings of Paimon's schema changes, all of one statement applied as
//! one new schema version (or a table rename).
//!
//! ```sql
//! ALTER TABLE t ADD COLUMN c INT [COMMENT '...'] [FIRST | AFTER x]
//! ALTER TABLE t DROP COLUMN c
//! ALTER TABLE t RENAME COLUMN a TO b
//! ALTER TABLE t ALTER COLUMN c [SET DATA] TYPE BIGINT
//! ALTER TABLE t ALTER COLUMN c SET NOT NULL | DROP NOT NULL
//! ALTER TABLE t SET TBLPROPERTIES ('k' = 'v')        -- also Flink's  ALTER TABLE t SET ('k' = 'v')
//! ALTER TABLE t RESET ('k1', 'k2')                  -- also Spark's  UNSET TBLPROPERTIES ('k')
//! ALTER TABLE t RENAME TO t2
//! ALTER TABLE t MODIFY [COLUMN] c BIGINT [NOT NULL] [COMMENT '...'] [FIRST | AFTER x]
//! ALTER TABLE t CHANGE [COLUMN] a b BIGINT [NOT NULL] [COMMENT '...'] [FIRST | AFTER x]
//! COMMENT ON COLUMN t.c IS '...' | NULL
//! COMMENT ON TABLE t IS '...' | NULL
//! ```
//!
//! `MODIFY` and `CHANGE` (MySQL's and Flink's spellings) restate a column: each part that
//! differs from the column as it is (name, type, nullability, comment, position) becomes its
//! own change, all in one schema version.
//!
//! Flink's `SET (...)` / `RESET (...)` and Spark's `UNSET TBLPROPERTIES` reach this module already
//! rewritten by the parser (`super::dialect`).

use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnOption, MySQLColumnPosition,
    RenameTableNameKind,
};

use super::ddl::{column_type, key_values};
use super::{SqlEngine, SqlSession};
use crate::catalog::Identifier;
use crate::error::{invalid, Result};
use crate::schema::change::{ColumnMove, SchemaChange};
use datafusion::sql::sqlparser::ast::{CommentObject, DataType as SqlType, Ident, ObjectName};

/// Runs one ALTER TABLE statement.
pub(super) async fn alter_table(
    engine: &SqlEngine,
    session: &SqlSession,
    alter: AlterTable,
) -> Result<i64> {
    let id = engine.identifier(session, &alter.name)?;
    if alter.if_exists && engine.catalog().load_table(&id).await.is_err() {
        return Ok(0);
    }
    apply(
        engine,
        session,
        &id,
        Alteration::Operations(alter.operations),
    )
    .await?;
    Ok(0)
}

/// What one ALTER asks for: the parser's operations, or (Flink's `RESET ('k', ...)` and Spark's
/// `UNSET TBLPROPERTIES`) option keys to remove.
pub(super) enum Alteration {
    Operations(Vec<AlterTableOperation>),
    ResetOptions(Vec<String>),
}

/// The text after `ALTER TABLE <t>` (the CLI's `alter` and the `tidelake.alter_table` action):
/// `ADD COLUMN c INT, RENAME COLUMN a TO b`, `SET ('k' = 'v')`, `RESET ('k')`, `RENAME TO t2`.
/// Parsed on its own, so the table's name never passes through SQL text.
pub(super) fn parse_alteration(text: &str) -> Result<Alteration> {
    use datafusion::sql::sqlparser::parser::Parser;
    use datafusion::sql::sqlparser::tokenizer::Token;
    let text = text.trim().trim_end_matches(';').trim();
    let upper = text.to_ascii_uppercase();
    let dialect = super::dialect::TidelakeDialect::default();
    let parser = |sql: &str| {
        Parser::new(&dialect).try_with_sql(sql).map_err(|e| {
            crate::error::InvalidArgumentSnafu {
                message: format!("ALTER TABLE changes '{text}': {e}"),
            }
            .build()
        })
    };
    let failed = |e: datafusion::sql::sqlparser::parser::ParserError| {
        crate::error::InvalidArgumentSnafu {
            message: format!("ALTER TABLE changes '{text}': {e}"),
        }
        .build()
    };
    let reset_list = [
        "RESET",
        "UNSET TBLPROPERTIES IF EXISTS",
        "UNSET TBLPROPERTIES",
    ]
    .iter()
    .find_map(|p| upper.strip_prefix(p).map(|_| &text[p.len()..]));
    if let Some(list) = reset_list.filter(|l| l.trim_start().starts_with('(')) {
        let mut p = parser(list)?;
        p.expect_token(&Token::LParen).map_err(failed)?;
        let keys = if p.consume_token(&Token::RParen) {
            vec![]
        } else {
            let keys = p
                .parse_comma_separated(|p| p.parse_literal_string())
                .map_err(failed)?;
            p.expect_token(&Token::RParen).map_err(failed)?;
            keys
        };
        p.expect_token(&Token::EOF).map_err(failed)?;
        return Ok(Alteration::ResetOptions(keys));
    }
    // Flink's `SET ('k' = 'v')` is the parser's `SET TBLPROPERTIES (...)`.
    let owned;
    let text = match upper.strip_prefix("SET") {
        Some(rest) if rest.trim_start().starts_with('(') => {
            owned = format!("SET TBLPROPERTIES {}", &text[3..]);
            owned.as_str()
        }
        _ => text,
    };
    let mut p = parser(text)?;
    let ops = p
        .parse_comma_separated(Parser::parse_alter_table_operation)
        .map_err(failed)?;
    p.expect_token(&Token::EOF).map_err(failed)?;
    Ok(Alteration::Operations(ops))
}

/// Applies `alteration` to table `id` as one new schema version (or a rename); returns the table
/// as it is afterwards (under its new name after `RENAME TO`).
pub(super) async fn apply(
    engine: &SqlEngine,
    session: &SqlSession,
    id: &Identifier,
    alteration: Alteration,
) -> Result<crate::table::Table> {
    let catalog = engine.catalog();
    let operations = match alteration {
        Alteration::ResetOptions(keys) => {
            let changes: Vec<SchemaChange> = keys
                .into_iter()
                .map(|key| SchemaChange::RemoveOption { key })
                .collect();
            if changes.is_empty() {
                return catalog.load_table(id).await;
            }
            return catalog.alter_table(id, &changes).await;
        }
        Alteration::Operations(ops) => ops,
    };
    let id = id.clone();
    let mut changes = Vec::new();
    for op in operations {
        // MODIFY c ... is CHANGE c c ...
        let op = match op {
            AlterTableOperation::ModifyColumn {
                col_name,
                data_type,
                options,
                column_position,
            } => AlterTableOperation::ChangeColumn {
                old_name: col_name.clone(),
                new_name: col_name,
                data_type,
                options,
                column_position,
            },
            other => other,
        };
        match op {
            AlterTableOperation::RenameTable { table_name } => {
                let (RenameTableNameKind::To(to) | RenameTableNameKind::As(to)) = table_name;
                if !changes.is_empty() {
                    return invalid!("RENAME TO cannot be combined with other changes");
                }
                let mut target = engine.identifier(session, &to)?;
                // `RENAME TO name` keeps the database.
                if super::object_name_parts(&to)?.len() == 1 {
                    target.database = id.database.clone();
                }
                return catalog.rename_table(&id, &target).await;
            }
            AlterTableOperation::AddColumn {
                column_def,
                column_position,
                if_not_exists,
                ..
            } => {
                let name = column_def.name.value.clone();
                if if_not_exists
                    && catalog
                        .load_table(&id)
                        .await?
                        .schema()
                        .field(&name)
                        .is_some()
                {
                    continue;
                }
                let mut not_null = false;
                let mut comment = None;
                for o in &column_def.options {
                    match &o.option {
                        ColumnOption::NotNull => not_null = true,
                        ColumnOption::Null => {}
                        ColumnOption::Comment(c) => comment = Some(c.clone()),
                        other => {
                            return invalid!(
                                "column '{name}': option '{other}' is not supported in ALTER TABLE"
                            )
                        }
                    }
                }
                let data_type = column_type(&name, &column_def.data_type, not_null)?;
                let position = column_position.map(|p| match p {
                    MySQLColumnPosition::First => ColumnMove::First,
                    MySQLColumnPosition::After(c) => ColumnMove::After(c.value),
                });
                changes.push(SchemaChange::AddColumn {
                    name,
                    data_type,
                    comment,
                    position,
                });
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                let table = catalog.load_table(&id).await?;
                let schema = table.schema();
                for c in column_names {
                    if if_exists && schema.field(&c.value).is_none() {
                        continue;
                    }
                    changes.push(SchemaChange::DropColumn { name: c.value });
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => changes.push(SchemaChange::RenameColumn {
                name: old_column_name.value,
                new_name: new_column_name.value,
            }),
            AlterTableOperation::AlterColumn { column_name, op } => {
                let name = column_name.value;
                match op {
                    AlterColumnOperation::SetDataType {
                        data_type, using, ..
                    } => {
                        if using.is_some() {
                            return invalid!("ALTER COLUMN ... TYPE ... USING is not supported");
                        }
                        let data_type = column_type(&name, &data_type, false)?;
                        changes.push(SchemaChange::UpdateColumnType { name, data_type });
                    }
                    AlterColumnOperation::SetNotNull => {
                        changes.push(SchemaChange::UpdateColumnNullability {
                            name,
                            nullable: false,
                        })
                    }
                    AlterColumnOperation::DropNotNull => {
                        changes.push(SchemaChange::UpdateColumnNullability {
                            name,
                            nullable: true,
                        })
                    }
                    other => return invalid!("ALTER COLUMN {name} {other} is not supported"),
                }
            }
            AlterTableOperation::ChangeColumn {
                old_name,
                new_name,
                data_type,
                options,
                column_position,
            } => {
                let table = catalog.load_table(&id).await?;
                let restated = Restated {
                    old_name,
                    new_name,
                    data_type,
                    options,
                    position: column_position,
                };
                changes.extend(restated.changes(table.schema())?);
            }
            AlterTableOperation::SetTblProperties { table_properties } => {
                for (key, value) in key_values(&table_properties)? {
                    changes.push(SchemaChange::SetOption { key, value });
                }
            }
            other => return invalid!("ALTER TABLE ... {other} is not supported"),
        }
    }
    if changes.is_empty() {
        return catalog.load_table(&id).await;
    }
    catalog.alter_table(&id, &changes).await
}

/// A column restated by `MODIFY` or `CHANGE`.
struct Restated {
    old_name: Ident,
    new_name: Ident,
    data_type: SqlType,
    options: Vec<ColumnOption>,
    position: Option<MySQLColumnPosition>,
}

impl Restated {
    /// The changes that turn the column as it is into the column as restated.
    fn changes(self, schema: &crate::spec::TableSchema) -> Result<Vec<SchemaChange>> {
        let old = self.old_name.value;
        let Some(field) = schema.field(&old) else {
            return invalid!("table has no column '{old}'");
        };
        let name = self.new_name.value;
        let mut not_null = false;
        let mut comment = None;
        for o in &self.options {
            match o {
                ColumnOption::NotNull => not_null = true,
                ColumnOption::Null => {}
                ColumnOption::Comment(c) => comment = Some(c.clone()),
                other => return invalid!("column '{name}': option '{other}' is not supported"),
            }
        }
        let data_type = column_type(&name, &self.data_type, not_null)?;
        let mut out = Vec::new();
        if name != old {
            out.push(SchemaChange::RenameColumn {
                name: old.clone(),
                new_name: name.clone(),
            });
        }
        if !data_type.same_shape(&field.data_type) {
            out.push(SchemaChange::UpdateColumnType {
                name: name.clone(),
                data_type: data_type.clone(),
            });
        }
        if data_type.nullable != field.data_type.nullable {
            out.push(SchemaChange::UpdateColumnNullability {
                name: name.clone(),
                nullable: data_type.nullable,
            });
        }
        if comment.is_some() && comment != field.description {
            out.push(SchemaChange::UpdateColumnComment {
                name: name.clone(),
                comment,
            });
        }
        if let Some(p) = self.position {
            out.push(SchemaChange::UpdateColumnPosition {
                name,
                position: match p {
                    MySQLColumnPosition::First => ColumnMove::First,
                    MySQLColumnPosition::After(c) => ColumnMove::After(c.value),
                },
            });
        }
        Ok(out)
    }
}

/// `COMMENT ON TABLE t IS '...'` and `COMMENT ON COLUMN t.c IS '...'` (`IS NULL` removes it).
pub(super) async fn comment_on(
    engine: &SqlEngine,
    session: &SqlSession,
    object: CommentObject,
    name: &ObjectName,
    comment: Option<String>,
    if_exists: bool,
) -> Result<i64> {
    let catalog = engine.catalog();
    let (id, change): (Identifier, SchemaChange) = match object {
        CommentObject::Table => (
            engine.identifier(session, name)?,
            SchemaChange::UpdateComment { comment },
        ),
        CommentObject::Column => {
            let mut parts = super::object_name_parts(name)?;
            let Some(column) = parts.pop().filter(|_| !parts.is_empty()) else {
                return invalid!("COMMENT ON COLUMN needs table.column, got '{name}'");
            };
            let table = ObjectName::from(parts.into_iter().map(Ident::new).collect::<Vec<_>>());
            (
                engine.identifier(session, &table)?,
                SchemaChange::UpdateColumnComment {
                    name: column,
                    comment,
                },
            )
        }
        other => return invalid!("COMMENT ON {other} is not supported (only TABLE and COLUMN)"),
    };
    if if_exists && catalog.load_table(&id).await.is_err() {
        return Ok(0);
    }
    catalog.alter_table(&id, &[change]).await?;
    Ok(0)
}
