//! What the Flight SQL metadata calls return: the SqlInfo set JDBC and ADBC read, the XDBC type
//! list, and the result schemas of the key calls (primary keys; imported/exported keys and cross
//! references, which are always empty: Paimon has no foreign keys).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::sql::metadata::{
    SqlInfoData, SqlInfoDataBuilder, XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder,
};
use arrow_flight::sql::{
    Nullable, Searchable, SqlInfo, SqlNullOrdering, SqlSupportedCaseSensitivity,
    SqlSupportedTransaction, XdbcDataType, XdbcDatetimeSubcode,
};

/// Server name reported to clients.
pub const SERVER_NAME: &str = "tidelake";

const KEYWORDS: &[&str] = &[
    "ABSOLUTE",
    "ACTION",
    "ADD",
    "ALL",
    "ALLOCATE",
    "ALTER",
    "AND",
    "ANY",
    "ARE",
    "AS",
    "ASC",
    "BETWEEN",
    "BY",
    "CALL",
    "CASCADE",
    "CASE",
    "CAST",
    "CATALOG",
    "COMPACT",
    "CREATE",
    "CROSS",
    "DATABASE",
    "DELETE",
    "DESC",
    "DESCRIBE",
    "DISTINCT",
    "DROP",
    "ELSE",
    "END",
    "EXCEPT",
    "EXISTS",
    "EXPLAIN",
    "FALSE",
    "FOR",
    "FROM",
    "FULL",
    "GROUP",
    "HAVING",
    "IF",
    "IN",
    "INNER",
    "INSERT",
    "INTERSECT",
    "INTO",
    "IS",
    "JOIN",
    "LEFT",
    "LIKE",
    "LIMIT",
    "NOT",
    "NULL",
    "OF",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "OVERWRITE",
    "PARTITION",
    "PARTITIONED",
    "PRIMARY",
    "KEY",
    "RIGHT",
    "SCHEMA",
    "SELECT",
    "SET",
    "SHOW",
    "SYSTEM_TIME",
    "TABLE",
    "TABLES",
    "THEN",
    "TRUE",
    "UNION",
    "UPDATE",
    "USING",
    "VALUES",
    "VERSION",
    "WHEN",
    "WHERE",
    "WITH",
];

const NUMERIC_FUNCTIONS: &[&str] = &[
    "abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "cos", "degrees", "exp", "floor", "ln",
    "log", "log10", "log2", "pi", "power", "radians", "random", "round", "signum", "sin", "sqrt",
    "tan", "trunc",
];

const STRING_FUNCTIONS: &[&str] = &[
    "ascii",
    "btrim",
    "char_length",
    "concat",
    "concat_ws",
    "initcap",
    "left",
    "length",
    "lower",
    "lpad",
    "ltrim",
    "repeat",
    "replace",
    "reverse",
    "right",
    "rpad",
    "rtrim",
    "split_part",
    "starts_with",
    "strpos",
    "substr",
    "substring",
    "to_hex",
    "translate",
    "trim",
    "upper",
];

const DATETIME_FUNCTIONS: &[&str] = &[
    "current_date",
    "current_time",
    "date_bin",
    "date_part",
    "date_trunc",
    "extract",
    "from_unixtime",
    "now",
    "to_timestamp",
    "to_timestamp_millis",
    "to_date",
    "to_char",
];

/// The SqlInfo answers (all keys JDBC's DatabaseMetaData and ADBC's get_info read).
pub fn sql_info() -> SqlInfoData {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, SERVER_NAME);
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "59");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(
        SqlInfo::FlightSqlServerTransaction,
        SqlSupportedTransaction::None as i32,
    );
    b.append(SqlInfo::FlightSqlServerCancel, false);
    b.append(SqlInfo::FlightSqlServerBulkIngestion, true);
    b.append(SqlInfo::FlightSqlServerIngestTransactionsSupported, false);
    b.append(SqlInfo::FlightSqlServerStatementTimeout, 0i32);
    b.append(SqlInfo::FlightSqlServerTransactionTimeout, 0i32);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, true);
    b.append(SqlInfo::SqlDdlTable, true);
    b.append(
        SqlInfo::SqlIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityLowercase as i32,
    );
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(
        SqlInfo::SqlQuotedIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityCaseInsensitive as i32,
    );
    b.append(SqlInfo::SqlAllTablesAreSelectable, true);
    b.append(
        SqlInfo::SqlNullOrdering,
        SqlNullOrdering::SqlNullsSortedHigh as i32,
    );
    b.append(SqlInfo::SqlKeywords, KEYWORDS);
    b.append(SqlInfo::SqlNumericFunctions, NUMERIC_FUNCTIONS);
    b.append(SqlInfo::SqlStringFunctions, STRING_FUNCTIONS);
    b.append(SqlInfo::SqlSystemFunctions, &["version"] as &[&str]);
    b.append(SqlInfo::SqlDatetimeFunctions, DATETIME_FUNCTIONS);
    b.append(SqlInfo::SqlSearchStringEscape, "\\");
    b.append(SqlInfo::SqlExtraNameCharacters, "$");
    b.append(SqlInfo::SqlSupportsColumnAliasing, true);
    b.append(SqlInfo::SqlNullPlusNullIsNull, true);
    b.append(SqlInfo::SqlSupportsTableCorrelationNames, true);
    b.append(SqlInfo::SqlSupportsDifferentTableCorrelationNames, false);
    b.append(SqlInfo::SqlSupportsExpressionsInOrderBy, true);
    b.append(SqlInfo::SqlSupportsOrderByUnrelated, true);
    // Bitmask of SqlSupportedGroupBy: unrelated (0) | beyond select (1).
    b.append(SqlInfo::SqlSupportedGroupBy, 0b11i32);
    b.append(SqlInfo::SqlSupportsLikeEscapeClause, true);
    b.append(SqlInfo::SqlSupportsNonNullableColumns, true);
    // Bitmask of SupportedSqlGrammar: minimum (0) | core (1).
    b.append(SqlInfo::SqlSupportedGrammar, 0b11i32);
    b.append(SqlInfo::SqlSupportsIntegrityEnhancementFacility, false);
    // SqlOuterJoinsSupportLevel: full outer joins (2).
    b.append(SqlInfo::SqlOuterJoinsSupportLevel, 2i32);
    b.append(SqlInfo::SqlSchemaTerm, "database");
    b.append(SqlInfo::SqlProcedureTerm, "procedure");
    b.append(SqlInfo::SqlCatalogTerm, "catalog");
    b.append(SqlInfo::SqlCatalogAtStart, true);
    b.append(SqlInfo::SqlSchemasSupportedActions, 0b111i32);
    b.append(SqlInfo::SqlCatalogsSupportedActions, 0b001i32);
    b.append(SqlInfo::SqlSupportedPositionedCommands, 0i32);
    b.append(SqlInfo::SqlSelectForUpdateSupported, false);
    b.append(SqlInfo::SqlStoredProceduresSupported, false);
    // Bitmask of SqlSupportedSubqueries: comparisons, exists, in, quantified.
    b.append(SqlInfo::SqlSupportedSubqueries, 0b1111i32);
    b.append(SqlInfo::SqlCorrelatedSubqueriesSupported, true);
    // Bitmask of SqlSupportedUnions: union (0) | union all (1).
    b.append(SqlInfo::SqlSupportedUnions, 0b11i32);
    for key in [
        SqlInfo::SqlMaxBinaryLiteralLength,
        SqlInfo::SqlMaxCharLiteralLength,
        SqlInfo::SqlMaxColumnNameLength,
        SqlInfo::SqlMaxColumnsInGroupBy,
        SqlInfo::SqlMaxColumnsInIndex,
        SqlInfo::SqlMaxColumnsInOrderBy,
        SqlInfo::SqlMaxColumnsInSelect,
        SqlInfo::SqlMaxColumnsInTable,
        SqlInfo::SqlMaxConnections,
        SqlInfo::SqlMaxCursorNameLength,
        SqlInfo::SqlMaxIndexLength,
        SqlInfo::SqlDbSchemaNameLength,
        SqlInfo::SqlMaxProcedureNameLength,
        SqlInfo::SqlMaxCatalogNameLength,
        SqlInfo::SqlMaxRowSize,
        SqlInfo::SqlMaxStatementLength,
        SqlInfo::SqlMaxStatements,
        SqlInfo::SqlMaxTableNameLength,
        SqlInfo::SqlMaxTablesInSelect,
        SqlInfo::SqlMaxUsernameLength,
    ] {
        // 0: no known limit.
        b.append(key, 0i64);
    }
    b.append(SqlInfo::SqlMaxRowSizeIncludesBlobs, true);
    b.append(SqlInfo::SqlDefaultTransactionIsolation, 0i64);
    b.append(SqlInfo::SqlTransactionsSupported, false);
    b.append(SqlInfo::SqlSupportedTransactionsIsolationLevels, 0i32);
    b.append(SqlInfo::SqlDataDefinitionCausesTransactionCommit, false);
    b.append(SqlInfo::SqlDataDefinitionsInTransactionsIgnored, true);
    // Bitmask of SqlSupportedResultSetType: forward only (1).
    b.append(SqlInfo::SqlSupportedResultSetTypes, 0b10i32);
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetUnspecified,
        0i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetForwardOnly,
        0b10i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetScrollSensitive,
        0i32,
    );
    b.append(
        SqlInfo::SqlSupportedConcurrenciesForResultSetScrollInsensitive,
        0i32,
    );
    b.append(SqlInfo::SqlBatchUpdatesSupported, true);
    b.append(SqlInfo::SqlSavepointsSupported, false);
    b.append(SqlInfo::SqlNamedParametersSupported, false);
    b.append(SqlInfo::SqlLocatorsUpdateCopy, false);
    b.append(SqlInfo::SqlStoredFunctionsUsingCallSyntaxSupported, false);
    b.build().expect("static SqlInfo set is valid")
}

fn type_info(
    name: &str,
    data_type: XdbcDataType,
    column_size: Option<i32>,
    prefix: Option<&str>,
    case_sensitive: bool,
    subcode: Option<XdbcDatetimeSubcode>,
    radix: Option<i32>,
) -> XdbcTypeInfo {
    XdbcTypeInfo {
        type_name: name.to_string(),
        data_type,
        column_size,
        literal_prefix: prefix.map(str::to_string),
        literal_suffix: prefix.map(str::to_string),
        create_params: None,
        nullable: Nullable::NullabilityNullable,
        case_sensitive,
        searchable: Searchable::Full,
        unsigned_attribute: radix.map(|_| false),
        fixed_prec_scale: false,
        auto_increment: radix.map(|_| false),
        local_type_name: Some(name.to_string()),
        minimum_scale: None,
        maximum_scale: None,
        sql_data_type: data_type,
        datetime_subcode: subcode,
        num_prec_radix: radix,
        interval_precision: None,
    }
}

/// The Paimon types tidelake stores, as XDBC types.
pub fn xdbc_types() -> XdbcTypeInfoData {
    use XdbcDataType as T;
    let mut b = XdbcTypeInfoDataBuilder::new();
    let q = Some("'");
    let ts = Some(XdbcDatetimeSubcode::XdbcSubcodeTimestamp);
    for info in [
        type_info("BOOLEAN", T::XdbcBit, Some(1), None, false, None, None),
        type_info(
            "TINYINT",
            T::XdbcTinyint,
            Some(3),
            None,
            false,
            None,
            Some(10),
        ),
        type_info(
            "SMALLINT",
            T::XdbcSmallint,
            Some(5),
            None,
            false,
            None,
            Some(10),
        ),
        type_info("INT", T::XdbcInteger, Some(10), None, false, None, Some(10)),
        type_info(
            "BIGINT",
            T::XdbcBigint,
            Some(19),
            None,
            false,
            None,
            Some(10),
        ),
        type_info("FLOAT", T::XdbcFloat, Some(7), None, false, None, Some(2)),
        type_info(
            "DOUBLE",
            T::XdbcDouble,
            Some(15),
            None,
            false,
            None,
            Some(2),
        ),
        XdbcTypeInfo {
            create_params: Some(vec!["precision".into(), "scale".into()]),
            fixed_prec_scale: true,
            minimum_scale: Some(0),
            maximum_scale: Some(38),
            ..type_info(
                "DECIMAL",
                T::XdbcDecimal,
                Some(38),
                None,
                false,
                None,
                Some(10),
            )
        },
        type_info(
            "STRING",
            T::XdbcVarchar,
            Some(i32::MAX),
            q,
            true,
            None,
            None,
        ),
        XdbcTypeInfo {
            create_params: Some(vec!["length".into()]),
            ..type_info(
                "VARCHAR",
                T::XdbcVarchar,
                Some(i32::MAX),
                q,
                true,
                None,
                None,
            )
        },
        type_info(
            "BYTES",
            T::XdbcVarbinary,
            Some(i32::MAX),
            None,
            false,
            None,
            None,
        ),
        type_info("DATE", T::XdbcDate, Some(10), q, false, None, None),
        type_info("TIME", T::XdbcTime, Some(12), q, false, None, None),
        type_info("TIMESTAMP", T::XdbcTimestamp, Some(29), q, false, ts, None),
    ] {
        b.append(info);
    }
    b.build().expect("static XDBC type list is valid")
}

/// Result schema of GetPrimaryKeys.
pub fn primary_keys_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ]))
}

/// GetPrimaryKeys rows for one table.
pub fn primary_keys_batch(
    catalog: &str,
    database: &str,
    table: &str,
    keys: &[String],
) -> arrow::error::Result<RecordBatch> {
    let n = keys.len();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![catalog; n])),
        Arc::new(StringArray::from(vec![database; n])),
        Arc::new(StringArray::from(vec![table; n])),
        Arc::new(StringArray::from_iter_values(keys)),
        Arc::new(StringArray::from(vec![None::<&str>; n])),
        Arc::new(Int32Array::from_iter_values(1..=n as i32)),
    ];
    RecordBatch::try_new(primary_keys_schema(), cols)
}

/// Result schema of GetImportedKeys, GetExportedKeys and GetCrossReference.
pub fn foreign_keys_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("pk_catalog_name", DataType::Utf8, true),
        Field::new("pk_db_schema_name", DataType::Utf8, true),
        Field::new("pk_table_name", DataType::Utf8, false),
        Field::new("pk_column_name", DataType::Utf8, false),
        Field::new("fk_catalog_name", DataType::Utf8, true),
        Field::new("fk_db_schema_name", DataType::Utf8, true),
        Field::new("fk_table_name", DataType::Utf8, false),
        Field::new("fk_column_name", DataType::Utf8, false),
        Field::new("key_sequence", DataType::Int32, false),
        Field::new("fk_key_name", DataType::Utf8, true),
        Field::new("pk_key_name", DataType::Utf8, true),
        Field::new("update_rule", DataType::UInt8, false),
        Field::new("delete_rule", DataType::UInt8, false),
    ]))
}
