//! The catalog: databases (`<db>.db/` directories) and tables under one warehouse root.
//!
//! A table exists when its `schema/` holds at least one schema file. Creating a table writes
//! `schema-0` with a create-if-absent put, so two concurrent creators cannot both succeed.

use std::collections::BTreeMap;

use snafu::ResultExt;

use crate::clock::Clock;
use crate::error::{AlreadyExistsSnafu, InvalidArgumentSnafu, NotFoundSnafu, Result};
use crate::io::FileIo;
use crate::schema::SchemaManager;
use crate::spec::{CoreOptions, DataField, DataType, TableSchema};
use crate::table::Table;

pub use crate::spec::identifier::Identifier;
use crate::spec::identifier::{is_path_safe, validate_name};

/// What a new table is made of.
#[derive(Debug, Clone, Default)]
pub struct TableDefinition {
    pub columns: Vec<(String, DataType)>,
    pub primary_keys: Vec<String>,
    pub partition_keys: Vec<String>,
    pub options: BTreeMap<String, String>,
    pub comment: Option<String>,
    /// Column comments by column name (the fields' `description`).
    pub column_comments: BTreeMap<String, String>,
}

impl TableDefinition {
    /// Parses a column list such as `id BIGINT NOT NULL, name STRING, price DECIMAL(10, 2)`.
    pub fn parse_columns(spec: &str) -> Result<Vec<(String, DataType)>> {
        let mut columns = Vec::new();
        let parts = crate::spec::types::split_top_level(spec).ok_or_else(|| {
            InvalidArgumentSnafu {
                message: format!("unbalanced brackets or quotes in the column list '{spec}'"),
            }
            .build()
        })?;
        for part in parts {
            let part = part.trim();
            let Some((name, ty)) = part.split_once(char::is_whitespace) else {
                return InvalidArgumentSnafu {
                    message: format!("column '{part}' needs a name and a type"),
                }
                .fail();
            };
            let ty: DataType = ty.parse().map_err(|e| {
                InvalidArgumentSnafu {
                    message: format!("column '{name}': {e}"),
                }
                .build()
            })?;
            columns.push((name.trim().to_string(), ty));
        }
        Ok(columns)
    }

    /// Checks the definition and builds `schema-0`.
    fn to_schema(&self, now_millis: i64) -> Result<TableSchema> {
        let fail = |message: String| InvalidArgumentSnafu { message }.fail();
        if self.columns.is_empty() {
            return fail("a table needs at least one column".into());
        }
        let mut fields: Vec<DataField> = Vec::new();
        // Ids as Paimon gives them: each column the next one, then the fields nested in its type.
        let mut highest = -1;
        for (name, ty) in &self.columns {
            if name.is_empty()
                || name.starts_with("_KEY_")
                || name.starts_with("_SEQUENCE_NUMBER")
                || name == "_VALUE_KIND"
            {
                return fail(format!("invalid column name '{name}' (reserved or empty)"));
            }
            if fields.iter().any(|f| f.name == *name) {
                return fail(format!("duplicate column '{name}'"));
            }
            let nullable = ty.nullable && !self.primary_keys.contains(name);
            highest += 1;
            let id = highest;
            let mut data_type = ty.clone().with_nullable(nullable);
            data_type.reassign_nested_ids(&mut highest);
            fields.push(DataField {
                id,
                name: name.clone(),
                data_type,
                description: self.column_comments.get(name).cloned(),
            });
        }
        for (what, keys) in [
            ("primary key", &self.primary_keys),
            ("partition key", &self.partition_keys),
        ] {
            for k in keys {
                if !fields.iter().any(|f| f.name == *k) {
                    return fail(format!("{what} '{k}' is not a column"));
                }
            }
        }
        let opts = CoreOptions::new(&self.options);
        let pk = !self.primary_keys.is_empty();
        let bucket = opts.bucket()?;
        opts.merge_engine()?;
        if pk {
            if bucket == -1 && opts.bucket_key().is_some() {
                return fail(
                    "cannot define 'bucket-key' with bucket = -1 (dynamic buckets); remove 'bucket-key' or set a bucket count"
                        .into(),
                );
            }
            if self
                .primary_keys
                .iter()
                .all(|k| self.partition_keys.contains(k))
            {
                return fail(
                    "the primary key must contain a column that is not a partition key".into(),
                );
            }
        } else if bucket == -2 {
            return fail(
                "bucket = -2 (postpone) needs a primary key; an append table takes a bucket count or -1"
                    .into(),
            );
        }
        let trimmed: Vec<&String> = self
            .primary_keys
            .iter()
            .filter(|k| !self.partition_keys.contains(k))
            .collect();
        match opts.bucket_key() {
            Some(keys) => {
                for k in &keys {
                    if !fields.iter().any(|f| f.name == *k) {
                        return fail(format!("bucket-key '{k}' is not a column"));
                    }
                    if pk && !trimmed.contains(&k) {
                        return fail(format!(
                            "bucket-key '{k}' must be a primary key column that is not a partition key"
                        ));
                    }
                    if self.partition_keys.contains(k) {
                        return fail(format!("bucket-key '{k}' cannot be a partition key"));
                    }
                }
            }
            None if !pk && bucket > 0 => {
                return fail("append tables with 'bucket' > 0 need option 'bucket-key'".into())
            }
            None => {}
        }
        for f in opts.sequence_fields() {
            if !fields.iter().any(|x| x.name == f) {
                return fail(format!("sequence.field '{f}' is not a column"));
            }
        }
        if let Some(f) = opts.rowkind_field() {
            if !fields.iter().any(|x| x.name == f) {
                return fail(format!("rowkind.field '{f}' is not a column"));
            }
        }
        Ok(TableSchema {
            version: crate::spec::schema::SCHEMA_VERSION,
            id: 0,
            highest_field_id: highest,
            fields,
            partition_keys: self.partition_keys.clone(),
            primary_keys: self.primary_keys.clone(),
            options: self.options.clone(),
            comment: self.comment.clone(),
            time_millis: now_millis,
        })
    }
}

/// The databases and tables of one warehouse.
#[derive(Debug, Clone)]
pub struct Catalog {
    io: FileIo,
    clock: Clock,
}

impl Catalog {
    pub fn new(io: FileIo) -> Self {
        Self {
            io,
            clock: Clock::system(),
        }
    }

    /// The catalog, and every table it loads, reading time from `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The clock commits and retention read.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Opens the warehouse at `uri` (a directory, `file://...` or `memory://`).
    pub fn open(uri: &str) -> Result<Self> {
        Ok(Self::new(FileIo::open(uri)?))
    }

    /// [`Catalog::open`] with `[storage]` settings for object-store warehouses.
    pub fn open_with(uri: &str, storage: &crate::io::StorageOptions) -> Result<Self> {
        Ok(Self::new(FileIo::open_with(uri, storage)?))
    }

    /// Opens a warehouse that must exist already (see [`FileIo::open_existing`]).
    pub fn open_existing(uri: &str) -> Result<Self> {
        Ok(Self::new(FileIo::open_existing(uri)?))
    }

    pub fn io(&self) -> &FileIo {
        &self.io
    }

    fn db_path(db: &str) -> String {
        format!("{db}.db")
    }

    pub fn table_path(id: &Identifier) -> String {
        format!("{}.db/{}", id.database, id.table)
    }

    pub async fn list_databases(&self) -> Result<Vec<String>> {
        let mut dbs: Vec<String> = self
            .io
            .list_dirs("")
            .await?
            .into_iter()
            .filter_map(|d| d.strip_suffix(".db").map(str::to_string))
            .collect();
        dbs.sort();
        Ok(dbs)
    }

    pub async fn database_exists(&self, db: &str) -> Result<bool> {
        Ok(self.list_databases().await?.iter().any(|d| d == db))
    }

    /// Creates a database. Object stores have no directories, so a marker file keeps it visible.
    pub async fn create_database(&self, db: &str, ignore_if_exists: bool) -> Result<()> {
        self.create_database_with(db, &BTreeMap::new(), ignore_if_exists)
            .await
    }

    /// [`Self::create_database`] with options, kept (as JSON) in the database's marker file.
    pub async fn create_database_with(
        &self,
        db: &str,
        options: &BTreeMap<String, String>,
        ignore_if_exists: bool,
    ) -> Result<()> {
        validate_name("database", db)?;
        if self.database_exists(db).await? {
            if ignore_if_exists {
                return Ok(());
            }
            return AlreadyExistsSnafu {
                message: format!("database '{db}' already exists"),
            }
            .fail();
        }
        self.write_database_options(db, options).await
    }

    fn marker(db: &str) -> String {
        format!("{}/.tidelake-database", Self::db_path(db))
    }

    async fn write_database_options(
        &self,
        db: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<()> {
        let body = if options.is_empty() {
            bytes::Bytes::new()
        } else {
            bytes::Bytes::from(
                serde_json::to_vec(options).context(crate::error::JsonSnafu {
                    path: Self::marker(db),
                })?,
            )
        };
        self.io.write(&Self::marker(db), body).await
    }

    /// A database's options (none for a database without a marker, as Paimon's make).
    pub async fn database_options(&self, db: &str) -> Result<BTreeMap<String, String>> {
        if !self.database_exists(db).await? {
            return NotFoundSnafu {
                message: format!("database '{db}' does not exist"),
            }
            .fail();
        }
        let marker = Self::marker(db);
        if !self.io.exists(&marker).await? {
            return Ok(BTreeMap::new());
        }
        let raw = self.io.read(&marker).await?;
        if raw.is_empty() {
            return Ok(BTreeMap::new());
        }
        serde_json::from_slice(&raw).context(crate::error::JsonSnafu { path: marker })
    }

    /// Sets and removes options of a database (the last writer wins when two alter at once).
    pub async fn alter_database(
        &self,
        db: &str,
        removals: &[String],
        updates: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>> {
        let mut options = self.database_options(db).await?;
        for k in removals {
            options.remove(k);
        }
        options.extend(updates.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.write_database_options(db, &options).await?;
        Ok(options)
    }

    pub async fn drop_database(&self, db: &str, cascade: bool) -> Result<()> {
        if !self.database_exists(db).await? {
            return NotFoundSnafu {
                message: format!("database '{db}' does not exist"),
            }
            .fail();
        }
        if !cascade && !self.list_tables(db).await?.is_empty() {
            return InvalidArgumentSnafu {
                message: format!("database '{db}' is not empty"),
            }
            .fail();
        }
        self.io.delete_dir(&Self::db_path(db)).await
    }

    pub async fn list_tables(&self, db: &str) -> Result<Vec<String>> {
        if !is_path_safe(db) || !self.io.confined(&Self::db_path(db)) {
            return Ok(vec![]);
        }
        let mut tables = Vec::new();
        for t in self.io.list_dirs(&Self::db_path(db)).await? {
            let sm = SchemaManager::new(self.io.clone(), format!("{}/{t}", Self::db_path(db)));
            if !sm.list_ids().await?.is_empty() {
                tables.push(t);
            }
        }
        tables.sort();
        Ok(tables)
    }

    /// Creates a table from `def`; the database is created if missing.
    pub async fn create_table(
        &self,
        id: &Identifier,
        def: &TableDefinition,
        ignore_if_exists: bool,
    ) -> Result<Table> {
        validate_name("database", &id.database)?;
        validate_name("table", &id.table)?;
        let now = self.clock.now_millis();
        let schema = def.to_schema(now)?;
        self.create_table_with_schema(id, schema, ignore_if_exists)
            .await
    }

    /// Creates a table with `schema` (its first schema, as Paimon's JSON has it: field ids,
    /// types, keys, options); the database is created if missing.
    pub async fn create_table_with_schema(
        &self,
        id: &Identifier,
        schema: crate::spec::TableSchema,
        ignore_if_exists: bool,
    ) -> Result<Table> {
        validate_name("database", &id.database)?;
        validate_name("table", &id.table)?;
        // Everything the schema implies (keys, buckets, merge-engine options) must be valid before
        // the table exists.
        let layout = crate::schema::layout::TableLayout::new(std::sync::Arc::new(schema.clone()))?;
        // A table tidelake could not write is not created by it (pypaimon's and Paimon's are read).
        layout.check_writable(&id.to_string())?;
        self.create_database(&id.database, true).await?;
        let sm = SchemaManager::new(self.io.clone(), Self::table_path(id));
        if !sm.list_ids().await?.is_empty() || !sm.create(&schema).await? {
            if ignore_if_exists {
                return self.load_table(id).await;
            }
            return AlreadyExistsSnafu {
                message: format!("table '{id}' already exists"),
            }
            .fail();
        }
        self.load_table(id).await
    }

    pub async fn load_table(&self, id: &Identifier) -> Result<Table> {
        // `orders$branch_dev`: the table's branch, over the table's shared files.
        if let Some((table, branch)) = crate::table::branch::split_branch(&id.table) {
            if crate::spec::identifier::validate_name("branch", branch).is_err() {
                return NotFoundSnafu {
                    message: format!("table '{id}' does not exist"),
                }
                .fail();
            }
            let main = self
                .load_main(&Identifier::new(id.database.clone(), table))
                .await?;
            return main.on_branch(branch).await;
        }
        self.load_main(id).await
    }

    /// The table `id` names, on its main branch.
    async fn load_main(&self, id: &Identifier) -> Result<Table> {
        // A name that is not one directory inside the warehouse (or is longer than any directory
        // name) names no table; nor does a table directory that a symlink leads out of the root.
        let path = Self::table_path(id);
        if !is_path_safe(&id.database) || !is_path_safe(&id.table) || !self.io.confined(&path) {
            if is_path_safe(&id.database) && is_path_safe(&id.table) {
                tracing::warn!(
                    path,
                    "a table directory leads out of the warehouse; ignored"
                );
            }
            return NotFoundSnafu {
                message: format!("table '{id}' does not exist"),
            }
            .fail();
        }
        let sm = SchemaManager::new(self.io.clone(), path.clone());
        match sm.latest().await? {
            Some(schema) => Ok(Table::new(
                self.io.clone(),
                id.clone(),
                path,
                schema,
                self.clock.clone(),
            )),
            None => NotFoundSnafu {
                message: format!("table '{id}' does not exist"),
            }
            .fail(),
        }
    }

    /// Applies schema changes to a table (a new `schema-N`); returns the table at its new schema.
    pub async fn alter_table(
        &self,
        id: &Identifier,
        changes: &[crate::schema::change::SchemaChange],
    ) -> Result<Table> {
        // A branch's schemas are its own (Paimon allows altering a branch).
        let table = self.load_table(id).await?;
        table
            .schema_manager()
            .commit(&id.to_string(), changes, self.clock.now_millis())
            .await?;
        self.load_table(id).await
    }

    /// Renames a table (its directory moves; the database of `to` must exist).
    pub async fn rename_table(&self, from: &Identifier, to: &Identifier) -> Result<Table> {
        not_a_branch("rename", from)?;
        validate_name("table", &to.table)?;
        self.load_table(from).await?;
        if !self.database_exists(&to.database).await? {
            return NotFoundSnafu {
                message: format!("database '{}' does not exist", to.database),
            }
            .fail();
        }
        let target = Self::table_path(to);
        if !SchemaManager::new(self.io.clone(), target.clone())
            .list_ids()
            .await?
            .is_empty()
        {
            return AlreadyExistsSnafu {
                message: format!("table '{to}' already exists"),
            }
            .fail();
        }
        self.io.rename_dir(&Self::table_path(from), &target).await?;
        self.load_table(to).await
    }

    pub async fn drop_table(&self, id: &Identifier, ignore_if_missing: bool) -> Result<()> {
        not_a_branch("drop", id)?;
        let path = Self::table_path(id);
        let safe = is_path_safe(&id.database) && is_path_safe(&id.table) && self.io.confined(&path);
        if !safe
            || SchemaManager::new(self.io.clone(), path.clone())
                .list_ids()
                .await?
                .is_empty()
        {
            if ignore_if_missing {
                return Ok(());
            }
            return NotFoundSnafu {
                message: format!("table '{id}' does not exist"),
            }
            .fail();
        }
        self.io.delete_dir(&path).await?;
        crate::table::cross_partition::forget(&self.io, &path);
        Ok(())
    }
}

/// Paimon's `CatalogUtils.checkNotBranch`: tables are renamed and dropped with all their
/// branches, through the main branch's name.
fn not_a_branch(what: &str, id: &Identifier) -> Result<()> {
    if crate::table::branch::split_branch(&id.table).is_some() {
        return crate::error::invalid!(
            "Cannot '{what}' for branch table '{id}', please modify the table with the default branch."
        );
    }
    Ok(())
}
