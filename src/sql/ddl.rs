//! `CREATE` and `DROP`: tables (a `CREATE TABLE` becomes a [`TableDefinition`]: columns with
//! their Paimon types, keys, partitioning, options and comments), databases and schemas. Also the
//! readers of SQL column types and `'key' = 'value'` option lists, which ALTER TABLE shares
//! (`super::alter`). Every change goes through the catalog, which owns what is written (a
//! table's first schema file, a database's directory); here the statements are only read and
//! checked.

use datafusion::sql::sqlparser::ast::{
    ColumnOption, CreateTable, Expr, HiveDistributionStyle, ObjectName, ObjectType, SchemaName,
    SqlOption, TableConstraint, Value,
};

use super::{SqlEngine, SqlSession};
use crate::catalog::TableDefinition;
use crate::error::{invalid, Result};

/// `CREATE TABLE`: the table is created in a database that must exist.
pub(super) async fn create_table(
    engine: &SqlEngine,
    session: &SqlSession,
    ct: &CreateTable,
) -> Result<i64> {
    let id = engine.identifier(session, &ct.name)?;
    let (def, if_not_exists) = table_definition(ct)?;
    require_database(engine, &id.database).await?;
    engine
        .catalog
        .create_table(&id, &def, if_not_exists)
        .await?;
    Ok(0)
}

async fn require_database(engine: &SqlEngine, db: &str) -> Result<()> {
    if engine.catalog.database_exists(db).await? {
        Ok(())
    } else {
        crate::error::NotFoundSnafu {
            message: format!("database '{db}' does not exist; create it with CREATE DATABASE {db}"),
        }
        .fail()
    }
}

/// `DROP TABLE | SCHEMA | DATABASE [IF EXISTS] name, ... [CASCADE]`, one name after the other.
pub(super) async fn drop(
    engine: &SqlEngine,
    session: &SqlSession,
    object_type: ObjectType,
    if_exists: bool,
    names: &[ObjectName],
    cascade: bool,
) -> Result<i64> {
    for name in names {
        match object_type {
            ObjectType::Table => {
                let id = engine.identifier(session, name)?;
                engine.catalog.drop_table(&id, if_exists).await?;
            }
            ObjectType::Schema | ObjectType::Database => {
                let db = engine.database_name(name)?;
                if !engine.catalog.database_exists(&db).await? {
                    if if_exists {
                        continue;
                    }
                    return crate::error::NotFoundSnafu {
                        message: format!("database '{db}' does not exist"),
                    }
                    .fail();
                }
                engine.catalog.drop_database(&db, cascade).await?;
            }
            other => return invalid!("DROP {other} is not supported"),
        }
    }
    Ok(0)
}

/// `CREATE SCHEMA [IF NOT EXISTS] name` (a database by another name).
pub(super) async fn create_schema(
    engine: &SqlEngine,
    schema_name: SchemaName,
    if_not_exists: bool,
) -> Result<i64> {
    let name = match schema_name {
        SchemaName::Simple(n) | SchemaName::NamedAuthorization(n, _) => n,
        SchemaName::UnnamedAuthorization(_) => return invalid!("CREATE SCHEMA needs a name"),
    };
    let db = engine.database_name(&name)?;
    create_database(engine, &db, if_not_exists).await
}

/// `CREATE DATABASE [IF NOT EXISTS] name` (and CREATE SCHEMA).
pub(super) async fn create_database(
    engine: &SqlEngine,
    db: &str,
    if_not_exists: bool,
) -> Result<i64> {
    if !if_not_exists && engine.catalog.database_exists(db).await? {
        return crate::error::AlreadyExistsSnafu {
            message: format!("database '{db}' already exists"),
        }
        .fail();
    }
    engine.catalog.create_database(db, true).await?;
    Ok(0)
}

/// `CREATE TABLE` to a table definition; returns it with the `IF NOT EXISTS` flag.
fn table_definition(ct: &CreateTable) -> Result<(TableDefinition, bool)> {
    if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return invalid!("CREATE TABLE ... AS / LIKE / CLONE is not supported");
    }
    if ct.or_replace {
        return invalid!("CREATE OR REPLACE TABLE is not supported; drop the table first");
    }
    let mut def = TableDefinition::default();
    for c in &ct.columns {
        let mut not_null = false;
        let mut comment = None;
        for o in &c.options {
            match &o.option {
                ColumnOption::NotNull => not_null = true,
                ColumnOption::Null => {}
                ColumnOption::PrimaryKey(_) => {
                    not_null = true;
                    def.primary_keys.push(c.name.value.clone());
                }
                ColumnOption::Comment(text) => comment = Some(text.clone()),
                other => return invalid!("column '{}': option '{other}' is not supported", c.name),
            }
        }
        let ty = column_type(&c.name.value, &c.data_type, not_null)?;
        if let Some(comment) = comment {
            def.column_comments.insert(c.name.value.clone(), comment);
        }
        def.columns.push((c.name.value.clone(), ty));
    }
    for constraint in &ct.constraints {
        match constraint {
            TableConstraint::PrimaryKey(pk) => {
                for col in &pk.columns {
                    match &col.column.expr {
                        Expr::Identifier(i) => def.primary_keys.push(i.value.clone()),
                        other => {
                            return invalid!("PRIMARY KEY expects column names, got '{other}'")
                        }
                    }
                }
            }
            other => return invalid!("constraint '{other}' is not supported"),
        }
    }
    // Primary-key columns are NOT NULL, as in Paimon.
    for (name, ty) in def.columns.iter_mut() {
        if def.primary_keys.contains(name) {
            *ty = ty.clone().with_nullable(false);
        }
    }
    if let HiveDistributionStyle::PARTITIONED { columns } = &ct.hive_distribution {
        def.partition_keys = columns.iter().map(|c| c.name.value.clone()).collect();
    }
    if let Some(p) = &ct.partition_by {
        return invalid!("use PARTITIONED BY (columns), not PARTITION BY {p}");
    }
    let options: &[SqlOption] = match &ct.table_options {
        datafusion::sql::sqlparser::ast::CreateTableOptions::None => &[],
        datafusion::sql::sqlparser::ast::CreateTableOptions::With(o)
        | datafusion::sql::sqlparser::ast::CreateTableOptions::Options(o)
        | datafusion::sql::sqlparser::ast::CreateTableOptions::TableProperties(o) => o,
        datafusion::sql::sqlparser::ast::CreateTableOptions::Plain(o) => o,
    };
    def.options.extend(key_values(options)?);
    if let Some(c) = &ct.comment {
        def.comment = Some(match c {
            datafusion::sql::sqlparser::ast::CommentDef::WithEq(s)
            | datafusion::sql::sqlparser::ast::CommentDef::WithoutEq(s) => s.clone(),
        });
    }
    Ok((def, ct.if_not_exists))
}

/// A column's Paimon type from its SQL type: ARRAY<T> (and T[]), MAP<K, V>, STRUCT<..> and
/// ROW<..> are nested types; every other type is read by its name.
pub(super) fn column_type(
    name: &str,
    sql: &datafusion::sql::sqlparser::ast::DataType,
    not_null: bool,
) -> Result<crate::spec::DataType> {
    sql_type(name, sql, 0).map(|t| t.with_nullable(!not_null))
}

fn sql_type(
    name: &str,
    sql: &datafusion::sql::sqlparser::ast::DataType,
    depth: usize,
) -> Result<crate::spec::DataType> {
    use crate::spec::{DataField, DataType, TypeRoot};
    use datafusion::sql::sqlparser::ast::{ArrayElemTypeDef as E, DataType as S};
    let bad = |e: String| {
        crate::error::InvalidArgumentSnafu {
            message: format!("column '{name}': {e}"),
        }
        .build()
    };
    use crate::spec::types::MAX_NESTING;
    if depth > MAX_NESTING {
        return Err(bad(format!(
            "type '{sql}' nests deeper than {MAX_NESTING} levels"
        )));
    }
    let inner = |t: &S| sql_type(name, t, depth + 1).map(Box::new);
    let root = match sql {
        S::Array(E::AngleBracket(t) | E::SquareBracket(t, _) | E::Parenthesis(t)) => {
            TypeRoot::Array(inner(t)?)
        }
        S::Map(k, v) => TypeRoot::Map(inner(k)?, inner(v)?),
        S::Struct(fields, _) => TypeRoot::Row(
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let field = f
                        .field_name
                        .as_ref()
                        .ok_or_else(|| bad(format!("every field of '{sql}' needs a name")))?;
                    Ok(DataField {
                        id: i as i32,
                        name: field.value.clone(),
                        data_type: *inner(&f.field_type)?,
                        description: None,
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        other => {
            return paimon_type_name(&other.to_string())
                .parse()
                .map_err(|e: crate::spec::types::TypeParseError| bad(e.0))
        }
    };
    DataType::checked(root, true).map_err(|e| bad(e.0))
}

/// `'key' = 'value'` options (WITH, TBLPROPERTIES) as strings.
pub(super) fn key_values(options: &[SqlOption]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for o in options {
        match o {
            SqlOption::KeyValue { key, value } => {
                let v = match value {
                    Expr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                        Value::Number(n, _) => n.clone(),
                        Value::Boolean(b) => b.to_string(),
                        other => other.to_string(),
                    },
                    Expr::Identifier(i) => i.value.clone(),
                    other => other.to_string(),
                };
                out.push((key.value.clone(), v));
            }
            other => {
                return invalid!("table option '{other}' is not supported; use 'key' = 'value'")
            }
        }
    }
    Ok(out)
}

/// SQL type spellings to Paimon's.
fn paimon_type_name(sql: &str) -> String {
    let upper = sql.trim().to_ascii_uppercase();
    match upper.as_str() {
        "TEXT" => "STRING".into(),
        "INTEGER" => "INT".into(),
        "BOOL" => "BOOLEAN".into(),
        "REAL" => "FLOAT".into(),
        "DOUBLE PRECISION" => "DOUBLE".into(),
        "BYTEA" | "BLOB" => "BYTES".into(),
        _ => upper,
    }
}
