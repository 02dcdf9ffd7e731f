//! DataFusion's view of the warehouse: one catalog (`tidelake`) whose schemas are Paimon
//! databases and whose tables are loaded when a statement names them. Table names may carry a
//! system-table suffix (`orders$snapshots`) and a version (`orders@snapshot=3`, written by the
//! dialect's rewrite of `FOR SYSTEM_TIME AS OF`).
//!
//! Scans push projection, limit, partition equalities and primary-key ranges into the table scan;
//! every filter is also re-applied above the scan (pushdown is `Inexact` here). In the physical
//! plan the scan then takes the comparisons of a column with a literal and applies them itself
//! (`super::scan_filter`), so only the rest stays in DataFusion's filter.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::common::DataFusionError;
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::error::df_err;
use super::expr::{column_op_literal, scalar_to_datum, split_and};
use super::scan_exec::{ScanPartition, TableScanExec};
use super::system;
use crate::catalog::{Catalog, Identifier};
use crate::error::Result;
use crate::spec::binary_row::Datum;
use crate::table::{SnapshotSelector, Table};

/// The `tidelake` catalog: every Paimon database is a schema.
#[derive(Debug)]
pub(crate) struct WarehouseCatalog {
    pub(crate) catalog: Catalog,
    /// Table functions (`generate_series`, `range`): not tables, left to DataFusion.
    pub(crate) table_functions: Arc<std::collections::HashSet<String>>,
}

impl CatalogProvider for WarehouseCatalog {
    fn schema_names(&self) -> Vec<String> {
        // Listing needs I/O; SHOW and the Flight metadata calls list databases themselves.
        vec![]
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        Some(Arc::new(DatabaseSchema {
            catalog: self.catalog.clone(),
            database: name.to_string(),
            table_functions: Arc::clone(&self.table_functions),
        }))
    }
}

#[derive(Debug)]
struct DatabaseSchema {
    catalog: Catalog,
    database: String,
    table_functions: Arc<std::collections::HashSet<String>>,
}

#[async_trait]
impl SchemaProvider for DatabaseSchema {
    fn table_names(&self) -> Vec<String> {
        vec![]
    }

    async fn table(
        &self,
        name: &str,
    ) -> std::result::Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        if self.table_functions.contains(name) {
            return Ok(None);
        }
        resolve(&self.catalog, &self.database, name)
            .await
            .map(Some)
            .map_err(df_err)
    }

    fn table_exist(&self, _name: &str) -> bool {
        false
    }
}

/// A table name split into base table, system table and version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableName {
    pub(crate) table: String,
    pub(crate) system: Option<String>,
    pub(crate) selector: SnapshotSelector,
}

pub(crate) fn parse_table_name(name: &str) -> Result<TableName> {
    let (rest, version) = match name.split_once('@') {
        Some((r, v)) => (r, Some(v)),
        None => (name, None),
    };
    let selector = match version {
        None => SnapshotSelector::Latest,
        Some(v) => {
            let (k, val) = v.split_once('=').unwrap_or((v, ""));
            let num = || {
                val.parse::<i64>().map_err(|_| {
                    crate::error::InvalidArgumentSnafu {
                        message: format!("invalid table version '{v}' in '{name}'"),
                    }
                    .build()
                })
            };
            match k {
                "snapshot" => SnapshotSelector::Id(num()?),
                "ts" => SnapshotSelector::TimestampMillis(num()?),
                "tag" => SnapshotSelector::Tag(val.to_string()),
                _ => {
                    return crate::error::invalid!(
                        "invalid table version '{v}' in '{name}': use snapshot=, tag= or ts="
                    )
                }
            }
        }
    };
    // `orders$branch_dev` names a branch (loaded by that name) and `orders$branch_dev$files`
    // a system table of it; any other `$suffix` is a system table of the table.
    let (table, system) = match rest.split_once(crate::table::branch::BRANCH_SUFFIX) {
        Some((t, after)) => match after.split_once('$') {
            Some((b, s)) => (
                format!("{t}{}{b}", crate::table::branch::BRANCH_SUFFIX),
                Some(s.to_ascii_lowercase()),
            ),
            None => (rest.to_string(), None),
        },
        None => match rest.split_once('$') {
            Some((t, s)) => (t.to_string(), Some(s.to_ascii_lowercase())),
            None => (rest.to_string(), None),
        },
    };
    Ok(TableName {
        table,
        system,
        selector,
    })
}

async fn resolve(catalog: &Catalog, database: &str, name: &str) -> Result<Arc<dyn TableProvider>> {
    let parsed = parse_table_name(name)?;
    let table = catalog
        .load_table(&Identifier::new(database, parsed.table.clone()))
        .await?;
    // Time travel reads with the schema of the snapshot it names.
    let table = match parsed.system.as_deref() {
        None | Some("audit_log") | Some("row_tracking") => table.as_of(&parsed.selector).await?,
        Some(_) => table,
    };
    match parsed.system.as_deref() {
        None => Ok(Arc::new(TableScanProvider::new(
            table,
            parsed.selector,
            false,
        )?)),
        Some("audit_log") => Ok(Arc::new(TableScanProvider::new(
            table,
            parsed.selector,
            true,
        )?)),
        Some("row_tracking") => Ok(Arc::new(TableScanProvider::row_tracking(
            table,
            parsed.selector,
        )?)),
        Some("changelog") => {
            if parsed.selector != SnapshotSelector::Latest {
                return crate::error::invalid!(
                    "{name}: the changelog takes no time travel; bound it with WHERE _snapshot_id"
                );
            }
            Ok(Arc::new(system::changelog::ChangelogProvider::new(table)?))
        }
        Some(kind) => system::provider(&table, kind, &parsed.selector).await,
    }
}

/// A Paimon table (or its audit log) as a DataFusion table.
#[derive(Debug)]
pub(crate) struct TableScanProvider {
    table: Table,
    selector: SnapshotSelector,
    audit: bool,
    /// `$row_tracking`: the table's columns then `_ROW_ID` and `_SEQUENCE_NUMBER`.
    row_tracking: bool,
    schema: SchemaRef,
}

impl TableScanProvider {
    pub(crate) fn new(table: Table, selector: SnapshotSelector, audit: bool) -> Result<Self> {
        let mut schema = table.new_read(None)?.schema();
        if audit {
            schema = crate::table::read::with_row_kind_column(&schema);
        }
        Ok(Self {
            table,
            selector,
            audit,
            row_tracking: false,
            schema,
        })
    }

    /// Paimon's `<table>$row_tracking` of a row-tracking table.
    pub(crate) fn row_tracking(table: Table, selector: SnapshotSelector) -> Result<Self> {
        let schema = table.new_read(None)?.with_row_tracking()?.schema();
        Ok(Self {
            table,
            selector,
            audit: false,
            row_tracking: true,
            schema,
        })
    }

    /// Partition equalities and primary-key bounds found among `filters`.
    fn pushdown(&self, filters: &[Expr]) -> Result<Pushdown> {
        let layout = self.table.layout()?;
        let schema = &layout.schema;
        let first_key = layout.key_indices.first().map(|&i| &schema.fields[i]);
        let mut out = Pushdown::default();
        let mut equal: std::collections::HashMap<&str, Datum> = std::collections::HashMap::new();
        let mut conjuncts = Vec::new();
        for f in filters {
            split_and(f, &mut conjuncts);
        }
        for e in conjuncts {
            let Some((col, op, value)) = column_op_literal(e) else {
                continue;
            };
            let Some(field) = schema.field(col) else {
                continue;
            };
            let Some(datum) = scalar_to_datum(value, &field.data_type) else {
                continue;
            };
            if datum.is_null() {
                continue;
            }
            if op == Operator::Eq {
                equal.insert(col, datum.clone());
            }
            if op == Operator::Eq && schema.partition_keys.iter().any(|p| p == col) {
                out.partitions.push((col.to_string(), datum.clone()));
            }
            if first_key.is_some_and(|k| k.name == col) {
                match op {
                    Operator::Eq => {
                        out.lower = Some((datum.clone(), true));
                        out.upper = Some((datum, true));
                    }
                    Operator::Gt => out.lower = Some((datum, false)),
                    Operator::GtEq => out.lower = Some((datum, true)),
                    Operator::Lt => out.upper = Some((datum, false)),
                    Operator::LtEq => out.upper = Some((datum, true)),
                    _ => {}
                }
            }
        }
        let bucket_key: Option<Vec<Datum>> = layout
            .bucket_key_indices
            .iter()
            .map(|&i| equal.get(schema.fields[i].name.as_str()).cloned())
            .collect();
        out.bucket_key = bucket_key.filter(|v| !v.is_empty());
        Ok(out)
    }
}

#[derive(Debug, Default)]
struct Pushdown {
    partitions: Vec<(String, Datum)>,
    lower: Option<(Datum, bool)>,
    upper: Option<(Datum, bool)>,
    bucket_key: Option<Vec<Datum>>,
}

#[async_trait]
impl TableProvider for TableScanProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::common::Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        let push = self.pushdown(filters).map_err(df_err)?;
        let mut scan = self
            .table
            .new_scan()
            .snapshot(self.selector.clone())
            .partition_filter(push.partitions);
        if push.lower.is_some() || push.upper.is_some() {
            scan = scan.key_range(push.lower, push.upper);
        }
        if let Some(values) = push.bucket_key {
            scan = scan.bucket_key(values);
        }
        let plan = scan.plan().await.map_err(df_err)?;
        // Column names to read (the audit log's row kind and the row-tracking columns are not
        // table columns).
        let offset = usize::from(self.audit);
        let end = self.schema.fields().len() - if self.row_tracking { 2 } else { 0 };
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let wanted = projection.cloned().unwrap_or(all);
        let names: Vec<String> = wanted
            .iter()
            .filter(|&&i| i >= offset && i < end)
            .map(|&i| self.schema.field(i).name().clone())
            .collect();
        let mut read = self.table.new_read(Some(&names)).map_err(df_err)?;
        if self.audit {
            read = read.with_row_kind();
        }
        if self.row_tracking {
            read = read.with_row_tracking().map_err(df_err)?;
        }
        // The read yields [rowkind?, names...]; DataFusion wants the projection's order.
        let read_schema = read.schema();
        let out_schema = Arc::new(
            self.schema
                .project(&wanted)
                .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?,
        );
        let reorder: Vec<usize> = out_schema
            .fields()
            .iter()
            .map(|f| read_schema.index_of(f.name()).unwrap_or(0))
            .collect();
        // One DataFusion partition per group of splits, so the operators above the scan
        // (filters, partial aggregates) run on every core, not only the decoding.
        // Files of an append table need no merging: each is a split of its own, so even a
        // bucket-unaware table (one bucket) spreads over the partitions; and large files are read in
        // parts of whole row groups, so a table of a few large files (a compacted one) is decoded
        // on every core.
        let layout = self.table.layout().map_err(df_err)?;
        let append = !layout.is_primary_key_table();
        let target = state.config().target_partitions();
        let splits: Vec<crate::table::Split> = if layout.options.data_evolution {
            // The files that cover the same row ids are read together, one split per group.
            let mut groups = Vec::new();
            for split in &plan.splits {
                let cut = crate::table::data_evolution::group_splits(split)
                    .map_err(|e| df_err(e.at(self.table.identifier().to_string())))?;
                groups.extend(cut);
            }
            groups
        } else if append {
            let files: Vec<_> = plan.splits.iter().flat_map(per_file).collect();
            if read.reads_file_parts() {
                in_parts(files, target)
            } else {
                files
            }
        } else {
            plan.splits.clone()
        };
        let groups = split_groups(&splits, target);
        let partitions: Vec<ScanPartition> = groups
            .into_iter()
            .map(|splits| ScanPartition {
                schema: Arc::clone(&out_schema),
                read: read.clone(),
                plan: crate::table::Plan {
                    splits,
                    ..plan.clone()
                },
                reorder: reorder.clone(),
            })
            .collect();
        Ok(Arc::new(TableScanExec::new(out_schema, partitions, limit)))
    }
}

/// The splits of a scan as at most `partitions` groups of about equal bytes (largest split first
/// into the lightest group), each group's splits in plan order; one group for an empty plan. Pure.
pub(crate) fn split_groups(
    splits: &[crate::table::Split],
    partitions: usize,
) -> Vec<Vec<crate::table::Split>> {
    let n = partitions
        .clamp(1, MAX_SCAN_PARTITIONS)
        .min(splits.len().max(1));
    let bytes = |s: &crate::table::Split| -> u64 {
        let whole: u64 = s.files.iter().map(|f| f.file_size.max(1) as u64).sum();
        match (&s.rows, s.files.as_slice()) {
            // A part weighs its share of the file's rows.
            (Some(part), [f]) if f.row_count > 0 => {
                let n = f.row_count as u64;
                let share = part.end.min(n).saturating_sub(part.start.min(n));
                let weight = u128::from(whole) * u128::from(share) / u128::from(n);
                u64::try_from(weight).unwrap_or(u64::MAX).max(1)
            }
            _ => whole,
        }
    };
    let mut order: Vec<usize> = (0..splits.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(bytes(&splits[i])));
    let mut load = vec![0u64; n];
    let mut member: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in order {
        let g = (0..n).min_by_key(|&g| (load[g], g)).unwrap_or(0);
        load[g] += bytes(&splits[i]);
        member[g].push(i);
    }
    member
        .into_iter()
        .map(|mut m| {
            m.sort_unstable();
            m.into_iter().map(|i| splits[i].clone()).collect()
        })
        .collect()
}

/// One split per file of `split` (files that are read without merging).
fn per_file(split: &crate::table::Split) -> Vec<crate::table::Split> {
    split
        .files
        .iter()
        .map(|f| crate::table::Split {
            partition: split.partition.clone(),
            bucket: split.bucket,
            files: vec![f.clone()],
            rows: None,
        })
        .collect()
}

/// Single-file splits with each file cut into the parts [`part_rows`] decides: part `i` of a file
/// reads the row groups starting in rows `i * part_rows ..`, the last one to the file's end.
fn in_parts(splits: Vec<crate::table::Split>, partitions: usize) -> Vec<crate::table::Split> {
    let rows: Vec<Option<u64>> = splits
        .iter()
        .map(|s| match s.files.as_slice() {
            [f] if crate::table::data_file::parts::splittable(&f.file_name) => {
                Some(f.row_count.max(0) as u64)
            }
            _ => None,
        })
        .collect();
    let Some(size) = part_rows(&rows, partitions) else {
        return splits;
    };
    splits
        .into_iter()
        .zip(rows)
        .flat_map(|(split, rows)| {
            let parts = rows.map_or(1, |n| n.div_ceil(size).clamp(1, MAX_FILE_PARTS));
            (0..parts).map(move |i| crate::table::Split {
                rows: (parts > 1).then(|| {
                    let end = if i + 1 == parts {
                        u64::MAX
                    } else {
                        (i + 1) * size
                    };
                    i * size..end
                }),
                ..split.clone()
            })
        })
        .collect()
}

/// The rows per part when the files of an append scan (row counts; none: a file read whole, such
/// as Avro) are cut into parts: about an eighth of a partition's share, rounded up to whole row
/// groups of the files tidelake writes, so parts are even and many enough for the partitions to
/// finish together. None when there is one partition. Pure.
fn part_rows(files: &[Option<u64>], partitions: usize) -> Option<u64> {
    let partitions = partitions.clamp(1, MAX_SCAN_PARTITIONS) as u64;
    if partitions == 1 {
        return None;
    }
    let group = crate::table::data_file::ROW_GROUP_ROWS as u64;
    let total: u64 = files.iter().flatten().sum();
    Some((total / (partitions * 8)).div_ceil(group).max(1) * group)
}

/// The most parts one file is read in.
const MAX_FILE_PARTS: u64 = 16;

/// The most DataFusion partitions one table scan is split into.
const MAX_SCAN_PARTITIONS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_spread_over_partitions_by_bytes() {
        use crate::spec::DataFileMeta;
        let split = |bucket: i32, sizes: &[i64]| crate::table::Split {
            partition: vec![],
            bucket,
            files: sizes
                .iter()
                .map(|&s| {
                    let mut f = DataFileMeta::for_test("f", 0, 0, 0);
                    f.file_size = s;
                    f
                })
                .collect(),
            rows: None,
        };
        let splits = vec![
            split(0, &[100]),
            split(1, &[60, 30]),
            split(2, &[50]),
            split(3, &[10]),
        ];
        let groups = split_groups(&splits, 2);
        let buckets: Vec<Vec<i32>> = groups
            .iter()
            .map(|g| g.iter().map(|s| s.bucket).collect())
            .collect();
        assert_eq!(buckets, [vec![0, 3], vec![1, 2]]);
        assert_eq!(split_groups(&splits, 1).len(), 1);
        assert_eq!(split_groups(&splits, 64).len(), 4, "no empty partitions");
        let empty = split_groups(&[], 4);
        assert_eq!(empty.len(), 1);
        assert!(empty[0].is_empty());
    }

    #[test]
    fn large_files_are_cut_into_parts_of_whole_row_groups() {
        use crate::spec::DataFileMeta;
        let group = crate::table::data_file::ROW_GROUP_ROWS as u64;
        // Five files of 1M rows on two cores: an eighth of a share (312k) is rounded up to two
        // row groups, so each file is read in two parts and the partitions get five each.
        let million = 1_000_000u64;
        assert_eq!(part_rows(&[Some(million); 5], 2), Some(2 * group));
        assert_eq!(part_rows(&[Some(million); 5], 1), None);
        // Many files: parts no smaller than a row group, so a file of one group stays whole.
        assert_eq!(part_rows(&[Some(10); 3], 4), Some(group));
        let split = |name: &str, rows: i64| crate::table::Split {
            partition: vec![],
            bucket: 0,
            files: vec![{
                let mut f = DataFileMeta::for_test(name, 0, 0, 0);
                f.row_count = rows;
                f.file_size = rows;
                f
            }],
            rows: None,
        };
        let parts = in_parts(
            vec![
                split("a.parquet", million as i64),
                split("b.avro", million as i64),
                split("c.parquet", 1000),
            ],
            2,
        );
        let ranges: Vec<(String, Option<std::ops::Range<u64>>)> = parts
            .iter()
            .map(|s| (s.files[0].file_name.clone(), s.rows.clone()))
            .collect();
        // 2M rows over 2 partitions: parts of one row group; the last part runs to the file's end.
        assert_eq!(
            ranges,
            vec![
                ("a.parquet".to_string(), Some(0..group)),
                ("a.parquet".to_string(), Some(group..2 * group)),
                ("a.parquet".to_string(), Some(2 * group..3 * group)),
                ("a.parquet".to_string(), Some(3 * group..u64::MAX)),
                ("b.avro".to_string(), None),
                ("c.parquet".to_string(), None),
            ]
        );
        // Parts weigh their share of the file's bytes, so they balance the partitions.
        let groups = split_groups(&parts[..4], 2);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2]);
    }

    #[test]
    fn table_names() {
        let n = parse_table_name("orders$branch_dev$Files@snapshot=2").unwrap();
        assert_eq!(n.table, "orders$branch_dev");
        assert_eq!(n.system.as_deref(), Some("files"));
        assert_eq!(n.selector, SnapshotSelector::Id(2));
        let n = parse_table_name("orders$branch_dev").unwrap();
        assert_eq!((n.table.as_str(), n.system), ("orders$branch_dev", None));
        let n = parse_table_name("orders$Snapshots@snapshot=4").unwrap();
        assert_eq!(n.table, "orders");
        assert_eq!(n.system.as_deref(), Some("snapshots"));
        assert_eq!(n.selector, SnapshotSelector::Id(4));
        let n = parse_table_name("orders@tag=a=b").unwrap();
        assert_eq!(n.selector, SnapshotSelector::Tag("a=b".into()));
        assert!(parse_table_name("orders@snapshot=x").is_err());
        assert!(parse_table_name("orders@when=1").is_err());
    }
}
