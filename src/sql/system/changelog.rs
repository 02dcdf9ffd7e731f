//! `<table>$changelog`: the changes of every retained snapshot as a bounded SQL table, one row
//! per change with its `_row_kind` and `_snapshot_id`, in snapshot order. Bounds on
//! `_snapshot_id` in the WHERE clause choose which snapshots are read (the filter is re-applied
//! by DataFusion too); without them every retained snapshot up to the latest at planning is read.
//! Like any SQL result, the row order is only guaranteed with `ORDER BY _snapshot_id`, which the
//! scan satisfies without sorting (each snapshot's rows keep their changelog order).
//!
//! This is the SQL face of a table's changes only: reading one snapshot's changes is
//! `table::changes`, producing them at compaction `lsm::compaction::changelog`, and streaming
//! them to subscribers `server::subscription`; expiring long-lived changelogs is
//! `table::maintenance::expire_changelogs`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream};
use futures::stream::{self, StreamExt};

use crate::error::Result;
use crate::sql::error::df_err;
use crate::sql::expr::{column_op_literal, split_and};
use crate::table::changes::{ChangelogReader, ROW_KIND_COLUMN};
use crate::table::Table;

/// Name of the snapshot-id column of `$changelog`.
pub(crate) const SNAPSHOT_ID_COLUMN: &str = "_snapshot_id";

/// The `$changelog` system table of one table.
#[derive(Debug)]
pub(crate) struct ChangelogProvider {
    table: Table,
    schema: SchemaRef,
}

impl ChangelogProvider {
    pub(crate) fn new(table: Table) -> Result<Self> {
        let read = ChangelogReader::new(table.clone(), None)?.schema();
        let mut fields: Vec<Arc<Field>> = vec![
            Arc::new(Field::new(ROW_KIND_COLUMN, DataType::Utf8, false)),
            Arc::new(Field::new(SNAPSHOT_ID_COLUMN, DataType::Int64, false)),
        ];
        fields.extend(read.fields().iter().skip(1).cloned());
        Ok(Self {
            table,
            schema: Arc::new(Schema::new(fields)),
        })
    }
}

/// The `[lower, upper]` snapshot ids the filters allow (`None`: unbounded on that side).
fn snapshot_bounds(filters: &[Expr]) -> (Option<i64>, Option<i64>) {
    let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
    let mut conjuncts = Vec::new();
    for f in filters {
        split_and(f, &mut conjuncts);
    }
    for e in conjuncts {
        let Some((col, op, value)) = column_op_literal(e) else {
            continue;
        };
        if col != SNAPSHOT_ID_COLUMN {
            continue;
        }
        let v = match value.cast_to(&DataType::Int64) {
            Ok(ScalarValue::Int64(Some(v))) => v,
            _ => continue,
        };
        let (l, h) = match op {
            Operator::Eq => (Some(v), Some(v)),
            Operator::Gt => (v.checked_add(1), None),
            Operator::GtEq => (Some(v), None),
            Operator::Lt => (None, v.checked_sub(1)),
            Operator::LtEq => (None, Some(v)),
            _ => (None, None),
        };
        if let Some(l) = l {
            lo = Some(lo.map_or(l, |x| x.max(l)));
        }
        if let Some(h) = h {
            hi = Some(hi.map_or(h, |x| x.min(h)));
        }
    }
    (lo, hi)
}

#[async_trait]
impl TableProvider for ChangelogProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> datafusion::common::Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        let sm = self.table.snapshot_manager();
        // Long-lived changelogs (a decoupled lifecycle) reach below the earliest snapshot.
        let earliest = self
            .table
            .earliest_readable_id()
            .await
            .map_err(df_err)?
            .unwrap_or(1);
        let latest = sm.latest_id().await.map_err(df_err)?.unwrap_or(0);
        let (lo, hi) = snapshot_bounds(filters);
        let from = lo.unwrap_or(earliest).max(earliest);
        let to = hi.unwrap_or(latest).min(latest);
        let wanted: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let out_schema = Arc::new(
            self.schema
                .project(&wanted)
                .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?,
        );
        let columns: Vec<String> = wanted
            .iter()
            .filter(|&&i| i >= 2)
            .map(|&i| self.schema.field(i).name().clone())
            .collect();
        let reader = ChangelogReader::new(self.table.clone(), Some(&columns)).map_err(df_err)?;
        let partition = Arc::new(ChangelogPartition {
            schema: Arc::clone(&out_schema),
            reader,
            wanted,
            from,
            to,
        });
        // Rows come in snapshot order: `ORDER BY _snapshot_id` needs no sort and keeps each
        // snapshot's own order (-U before its +U).
        let ordering = out_schema.index_of(SNAPSHOT_ID_COLUMN).ok().and_then(|i| {
            LexOrdering::new([PhysicalSortExpr::new_default(Arc::new(Column::new(
                SNAPSHOT_ID_COLUMN,
                i,
            )))])
        });
        let exec =
            StreamingTableExec::try_new(out_schema, vec![partition], None, ordering, false, None)?;
        Ok(Arc::new(exec))
    }
}

/// The changes of snapshots `from..=to`, read when executed.
struct ChangelogPartition {
    schema: SchemaRef,
    reader: ChangelogReader,
    /// Columns of the provider's schema to output: 0 is the kind, 1 the snapshot id, the rest
    /// come from the reader in order.
    wanted: Vec<usize>,
    from: i64,
    to: i64,
}

impl std::fmt::Debug for ChangelogPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangelogPartition")
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl PartitionStream for ChangelogPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let reader = self.reader.clone();
        let schema = Arc::clone(&self.schema);
        let wanted = self.wanted.clone();
        let ids = self.from..=self.to;
        let stream = stream::iter(ids)
            .then(move |id| {
                let reader = reader.clone();
                async move {
                    let changes = match reader.table().snapshot_or_changelog(id).await {
                        Ok(Some(s)) => reader.changes(&s).await,
                        // Expired since planning: nothing to read.
                        Ok(None) => Ok(stream::empty().boxed()),
                        Err(e) => Err(e),
                    };
                    match changes {
                        Ok(s) => s.map(move |b| b.map(|b| (id, b))).boxed(),
                        Err(e) => stream::iter([Err(e)]).boxed(),
                    }
                }
            })
            .flatten()
            .map(move |r| -> datafusion::common::Result<RecordBatch> {
                let (id, b) = r.map_err(df_err)?;
                let n = b.num_rows();
                let mut next_value = 1;
                let cols: Vec<ArrayRef> = wanted
                    .iter()
                    .map(|&i| match i {
                        0 => Arc::clone(b.column(0)),
                        1 => Arc::new(Int64Array::from_value(id, n)) as ArrayRef,
                        _ => {
                            let c = Arc::clone(b.column(next_value));
                            next_value += 1;
                            c
                        }
                    })
                    .collect();
                let opts = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
                RecordBatch::try_new_with_options(Arc::clone(&schema), cols, &opts)
                    .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))
            });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))
    }
}
