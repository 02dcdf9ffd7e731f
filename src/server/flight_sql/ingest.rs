//! Flight SQL bulk ingest (`CommandStatementIngest`): create, append or replace a table from a
//! DoPut stream, through a staging table when the target is replaced.

use super::*;

impl TidelakeFlightSql {
    /// Bulk ingest: streams the batches into one writer and commits once at the end.
    pub(super) async fn ingest(
        &self,
        call: &Call,
        cmd: CommandStatementIngest,
        input: FlightDataIn,
    ) -> std::result::Result<i64, Status> {
        let (p, session) = self.session(call);
        Self::check_catalog(p, cmd.catalog.as_deref())?;
        if cmd.temporary {
            return Err(crate::server::status::status(
                ErrorKind::Unsupported,
                "temporary tables are not supported",
            ));
        }
        if cmd.transaction_id.is_some() {
            return Err(crate::server::status::status(
                ErrorKind::Unsupported,
                "transactions are not supported",
            ));
        }
        let database = cmd
            .schema
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(session.database.clone());
        let id = Identifier::new(database, cmd.table.clone());
        call.set_object(|| format!("ingest {id}"));
        let opts = cmd.table_definition_options.unwrap_or_default();
        let if_not_exist = TableNotExistOption::try_from(opts.if_not_exist)
            .unwrap_or(TableNotExistOption::Unspecified);
        let if_exists =
            TableExistsOption::try_from(opts.if_exists).unwrap_or(TableExistsOption::Unspecified);
        let mut batches = FlightRecordBatchStream::new_from_flight_data(checked_flight_data(
            input.map_err(FlightError::from),
        ));
        // The first batch (or the end) makes the stream's schema known.
        let first = batches
            .next()
            .await
            .transpose()
            .map_err(|e| invalid(format!("ingest into {id}: {e}")))?;
        let Some(schema) = batches.schema().cloned() else {
            return Err(invalid(format!(
                "ingest into {id}: the stream has no schema"
            )));
        };
        let catalog = p.tenant.engine.catalog();
        let exists = match catalog.load_table(&id).await {
            Ok(_) => true,
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => false,
            Err(e) => return Err(to_status(e)),
        };
        let mut row_kind_column = None;
        let mut def = TableDefinition::default();
        for (k, v) in &cmd.options {
            let list = || {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
            };
            match k.as_str() {
                "primary-key" | "tidelake.primary-key" => def.primary_keys = list(),
                "partition-keys" | "tidelake.partition-keys" => def.partition_keys = list(),
                "row-kind-column" | "tidelake.row-kind-column" => row_kind_column = Some(v.clone()),
                _ => {
                    def.options.insert(k.clone(), v.clone());
                }
            }
        }
        let mut overwrite = None;
        if exists {
            match if_exists {
                TableExistsOption::Append => {}
                TableExistsOption::Replace => overwrite = Some(Overwrite::Table),
                _ => {
                    return Err(crate::server::status::status(
                        ErrorKind::AlreadyExists,
                        format!("table '{id}' already exists"),
                    ))
                }
            }
        } else if if_not_exist != TableNotExistOption::Create {
            return Err(crate::server::status::status(
                ErrorKind::NotFound,
                format!("table '{id}' does not exist"),
            ));
        }
        if !exists || overwrite.is_some() {
            let mut columns = Vec::new();
            for f in schema.fields() {
                if Some(f.name()) == row_kind_column.as_ref() {
                    continue;
                }
                let nullable = f.is_nullable() && !def.primary_keys.contains(f.name());
                let Some(ty) =
                    crate::spec::DataType::from_arrow(&plain_type(f.data_type()), nullable)
                else {
                    return Err(invalid(format!(
                        "ingest into {id}: column '{}' has type {} which Paimon tables cannot store",
                        f.name(),
                        f.data_type()
                    )));
                };
                columns.push((f.name().clone(), ty));
            }
            def.columns = columns;
        }
        if !exists
            && !catalog
                .database_exists(&id.database)
                .await
                .map_err(to_status)?
        {
            return Err(crate::server::status::status(
                ErrorKind::NotFound,
                format!("database '{}' does not exist", id.database),
            ));
        }
        // A new table, or a replacement whose definition differs, is written into a staging
        // table first and renamed into place once the data is committed: a failed ingest leaves
        // no table behind and the replaced one untouched.
        let staged = if !exists {
            true
        } else if overwrite.is_some() {
            let table = catalog.load_table(&id).await.map_err(to_status)?;
            !same_definition(table.schema(), &def)
        } else {
            false
        };
        let needed = if staged {
            (Role::Admin, "an ingest that creates or redefines a table")
        } else {
            (Role::Writer, "ingest")
        };
        session
            .role
            .require(needed.0, needed.1)
            .map_err(to_status)?;
        let ident = id.to_string();
        let rest = batches.map(move |r| {
            r.map_err(|e| {
                crate::error::InvalidArgumentSnafu {
                    message: format!("ingest into {ident}: {e}"),
                }
                .build()
            })
        });
        let all = stream::iter(first.map(Ok)).chain(rest).boxed();
        let options = WriteOptions { row_kind_column };
        if !staged {
            let table = catalog.load_table(&id).await.map_err(to_status)?;
            return table
                .write_stream(all, options, overwrite)
                .await
                .map_err(to_status);
        }
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let staging = Identifier::new(id.database.clone(), format!("_tidelake_ingest_{tag}"));
        let table = catalog
            .create_table(&staging, &def, false)
            .await
            .map_err(to_status)?;
        let written = match table.write_stream(all, options, None).await {
            Ok(n) => n,
            Err(e) => {
                drop_staging(catalog, &staging).await;
                return Err(to_status(e));
            }
        };
        if !exists {
            if let Err(e) = catalog.rename_table(&staging, &id).await {
                drop_staging(catalog, &staging).await;
                return Err(to_status(e));
            }
            return Ok(written);
        }
        // Replace: the old table steps aside, the new one takes its name, the old one goes.
        let old = Identifier::new(id.database.clone(), format!("_tidelake_replaced_{tag}"));
        if let Err(e) = catalog.rename_table(&id, &old).await {
            drop_staging(catalog, &staging).await;
            return Err(to_status(e));
        }
        if let Err(e) = catalog.rename_table(&staging, &id).await {
            if let Err(back) = catalog.rename_table(&old, &id).await {
                tracing::error!(table = %id, error = %back, "could not restore a replaced table");
            }
            drop_staging(catalog, &staging).await;
            return Err(to_status(e));
        }
        drop_staging(catalog, &old).await;
        Ok(written)
    }
}

/// Whether a table already has the definition an ingest asks for: the same column names and types
/// (nullability aside: NOT NULL columns stay so, and a null in them fails the write) and, where
/// the request names them, the same keys and options.
pub(super) fn same_definition(schema: &crate::spec::TableSchema, def: &TableDefinition) -> bool {
    let columns = schema.fields.len() == def.columns.len()
        && schema
            .fields
            .iter()
            .zip(&def.columns)
            .all(|(a, (n, t))| &a.name == n && a.data_type.same_shape(t));
    let keys = (def.primary_keys.is_empty() || def.primary_keys == schema.primary_keys)
        && (def.partition_keys.is_empty() || def.partition_keys == schema.partition_keys);
    let options = def
        .options
        .iter()
        .all(|(k, v)| schema.options.get(k) == Some(v));
    columns && keys && options
}

/// Removes a staging (or replaced) table of an ingest, logging what cannot be removed (an orphan
/// directory an operator can delete).
pub(super) async fn drop_staging(catalog: &crate::catalog::Catalog, id: &Identifier) {
    if let Err(e) = catalog.drop_table(id, true).await {
        tracing::warn!(table = %id, error = %e, "could not remove an ingest's staging table");
    }
}
