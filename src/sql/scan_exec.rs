//! The physical scan of a Paimon table: one DataFusion partition per group of splits, each a
//! streamed [`TableRead`]. It also takes the dynamic filters the operators above it publish
//! (DataFusion's TopK bar for `ORDER BY … LIMIT n`) and hands them to the read as a row
//! predicate, so a row that cannot make the answer costs the decoding of the filter's columns
//! only (late materialization, `crate::table::row_filter`).

use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{internal_err, DataFusionError, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning,
    PlanProperties, ReplaceChildrenOptions, SendableRecordBatchStream,
};
use futures::StreamExt;
use snafu::ResultExt;

use super::error::df_err;
use super::scan_filter::{self, ColumnTest};
use crate::table::read::TopKey;
use crate::table::{Plan, RowPredicate, TableRead};

/// One partition of a scan: a planned snapshot's splits read with one projection.
#[derive(Clone)]
pub(crate) struct ScanPartition {
    /// What the partition yields (DataFusion's projection order).
    pub(crate) schema: SchemaRef,
    pub(crate) read: TableRead,
    pub(crate) plan: Plan,
    /// Where each output column is in the read's batches.
    pub(crate) reorder: Vec<usize>,
}

impl std::fmt::Debug for ScanPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanPartition")
            .field("splits", &self.plan.splits.len())
            .finish_non_exhaustive()
    }
}

impl ScanPartition {
    /// The partition's rows: with `top`, only those that can be first by its keys (read late);
    /// with `predicate`, without rows it rejects; only rows that pass `tests`; at most about
    /// `limit` rows.
    fn execute(
        &self,
        limit: Option<usize>,
        predicate: Option<Arc<dyn RowPredicate>>,
        tests: Arc<[ColumnTest]>,
        top: Option<&TopN>,
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
    ) -> SendableRecordBatchStream {
        let schema = Arc::clone(&self.schema);
        let reorder = self.reorder.clone();
        let mut remaining = limit.unwrap_or(usize::MAX);
        let read = match predicate {
            Some(p) => self.read.clone().with_row_predicate(p),
            None => self.read.clone(),
        };
        let skipped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let late = top
            .and_then(|t| read.top_n_stream(self.plan.clone(), &t.keys, t.n, Arc::clone(&skipped)));
        let rows = match late {
            Some(late) => {
                let late_rows = MetricBuilder::new(metrics).counter("top_n_rows", partition);
                let pages_skipped =
                    MetricBuilder::new(metrics).counter("top_n_pages_skipped", partition);
                late.inspect(move |b| {
                    if let Ok(b) = b {
                        late_rows.add(b.num_rows());
                    }
                    pages_skipped.add(skipped.swap(0, std::sync::atomic::Ordering::Relaxed));
                })
                .boxed()
            }
            None => read.stream(self.plan.clone()),
        };
        let stream = rows
            .map(move |r| -> datafusion::common::Result<RecordBatch> {
                let b = r.map_err(df_err)?;
                let cols = reorder.iter().map(|&i| Arc::clone(b.column(i))).collect();
                let opts =
                    arrow::array::RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                let b = RecordBatch::try_new_with_options(Arc::clone(&schema), cols, &opts)
                    .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
                scan_filter::apply(&tests, b).map_err(df_err)
            })
            .take_while(move |r| {
                let go = remaining > 0;
                if let Ok(b) = r {
                    remaining = remaining.saturating_sub(b.num_rows());
                }
                futures::future::ready(go)
            });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))
    }
}

/// The scan operator: its partitions, and the dynamic filters pushed into it.
#[derive(Debug, Clone)]
pub(crate) struct TableScanExec {
    schema: SchemaRef,
    partitions: Vec<ScanPartition>,
    limit: Option<usize>,
    /// Dynamic filters of the operators above (their bar is read as the scan goes).
    dynamic: Vec<Arc<dyn PhysicalExpr>>,
    /// Conjuncts of the filter above that the scan decides itself (the filter no longer does).
    tests: Arc<[ColumnTest]>,
    /// The top-N a sort with a fetch above wants ([`TopNIntoScan`]).
    top: Option<TopN>,
    properties: Arc<PlanProperties>,
    /// `top_n_rows`: the rows partitions read late; `top_n_pages_skipped`: the pages of the first
    /// sort key they left unread (EXPLAIN ANALYZE shows both).
    metrics: ExecutionPlanMetricsSet,
}

/// What a sort with a fetch over the scan keeps: the first `n` rows by `keys`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TopN {
    keys: Vec<TopKey>,
    n: usize,
}

impl TableScanExec {
    pub(crate) fn new(
        schema: SchemaRef,
        partitions: Vec<ScanPartition>,
        limit: Option<usize>,
    ) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        // Its streams take from tokio's task budget ([`make_cooperative`]), so DataFusion need not
        // wrap the scan in a `CooperativeExec`, which would hide it from the sort above.
        .with_scheduling_type(SchedulingType::Cooperative);
        Self {
            schema,
            partitions,
            limit,
            dynamic: Vec::new(),
            tests: Arc::from([]),
            top: None,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The top-N read late, if any: none where the scan also has tests, since a late read picks
    /// rows by the top-N's keys alone and the tests could then drop them.
    fn late_top(&self) -> Option<&TopN> {
        self.top.as_ref().filter(|_| self.tests.is_empty())
    }

    /// The row predicate of the pushed dynamic filters (all must hold); none without any, or
    /// when one reads a column the scan does not yield.
    fn predicate(&self) -> Option<Arc<dyn RowPredicate>> {
        if self.dynamic.is_empty() {
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        for e in &self.dynamic {
            for c in collect_columns(e) {
                if !names.iter().any(|n| n == c.name()) {
                    names.push(c.name().to_string());
                }
            }
        }
        names.sort();
        let indices: Vec<usize> = names
            .iter()
            .map(|n| self.schema.index_of(n).ok())
            .collect::<Option<_>>()?;
        let narrow = self.schema.project(&indices).ok()?;
        let exprs = self
            .dynamic
            .iter()
            .map(|e| reassign_expr_columns(Arc::clone(e), &narrow).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(Arc::new(FilterPredicate {
            columns: names,
            exprs,
        }))
    }
}

impl DisplayAs for TableScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableScanExec: partitions={}", self.partitions.len())?;
        let parts = self
            .partitions
            .iter()
            .flat_map(|p| &p.plan.splits)
            .filter(|s| s.rows.is_some())
            .count();
        if parts > 0 {
            write!(f, ", file_parts={parts}")?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", fetch={limit}")?;
        }
        if !self.tests.is_empty() {
            let tests: Vec<String> = self.tests.iter().map(ToString::to_string).collect();
            write!(f, ", filters=[{}]", tests.join(", "))?;
        }
        for e in &self.dynamic {
            write!(f, ", row_filter={e}")?;
        }
        if let Some(top) = self.late_top() {
            let keys: Vec<&str> = top.keys.iter().map(|k| k.column.as_str()).collect();
            write!(f, ", top_n={} by [{}]", top.n, keys.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TableScanExec {
    fn name(&self) -> &str {
        "TableScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> datafusion::common::Result<TreeNodeRecursion>,
    ) -> datafusion::common::Result<TreeNodeRecursion> {
        for e in &self.dynamic {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("TableScanExec has no children to replace")
        }
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        _ctx: Arc<TaskContext>,
    ) -> datafusion::common::Result<SendableRecordBatchStream> {
        match self.partitions.get(partition) {
            Some(p) => Ok(make_cooperative(p.execute(
                self.limit,
                self.predicate(),
                Arc::clone(&self.tests),
                self.late_top(),
                &self.metrics,
                partition,
            ))),
            None => internal_err!(
                "TableScanExec has {} partitions, not {}",
                self.partitions.len(),
                partition + 1
            ),
        }
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        Some(Arc::new(Self {
            limit,
            ..self.clone()
        }))
    }

    /// A filter's conjuncts that compare a column with a literal are taken as [`ColumnTest`]s
    /// (reported as pushed: the filter above drops them). Dynamic filters are kept for the read
    /// (reported as not pushed: the operators above still apply them).
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let mut dynamic = self.dynamic.clone();
        let mut tests = self.tests.to_vec();
        let filters = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| {
                if phase == FilterPushdownPhase::Post && is_dynamic(&f.filter) {
                    dynamic.push(f.filter);
                } else if phase == FilterPushdownPhase::Pre {
                    if let Some(test) = ColumnTest::of(&f.filter, &self.schema) {
                        tests.push(test);
                        return PushedDown::Yes;
                    }
                }
                PushedDown::No
            })
            .collect();
        let changed = dynamic.len() > self.dynamic.len() || tests.len() > self.tests.len();
        let updated = changed.then(|| {
            Arc::new(Self {
                dynamic,
                tests: tests.into(),
                ..self.clone()
            }) as Arc<dyn ExecutionPlan>
        });
        Ok(FilterPushdownPropagation {
            filters,
            updated_node: updated,
        })
    }
}

/// Whether `e` is a dynamic filter (its value changes while the query runs).
fn is_dynamic(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some()
}

/// Pushed filters evaluated over the columns they read (remapped to those columns).
#[derive(Debug)]
struct FilterPredicate {
    columns: Vec<String>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

impl RowPredicate for FilterPredicate {
    fn columns(&self) -> &[String] {
        &self.columns
    }

    fn evaluate(&self, batch: &RecordBatch) -> crate::error::Result<BooleanArray> {
        let mut keep: Option<BooleanArray> = None;
        for e in &self.exprs {
            let value = e
                .evaluate(batch)
                .and_then(|v| v.into_array(batch.num_rows()))
                .map_err(super::error::from_df)?;
            let Some(test) = value.as_any().downcast_ref::<BooleanArray>() else {
                return Err(crate::error::internal(format!(
                    "row filter {e} is not a boolean"
                )));
            };
            keep = Some(match keep {
                Some(k) => arrow::compute::and(&k, test).context(crate::error::ArrowSnafu {
                    context: "combining row filters",
                })?,
                None => test.clone(),
            });
        }
        Ok(keep.unwrap_or_else(|| BooleanArray::from(vec![true; batch.num_rows()])))
    }

    /// Active once any dynamic filter has a bar (before, each is the literal `true`).
    fn is_active(&self) -> bool {
        self.exprs.iter().any(|e| {
            let Some(dynamic) = e.downcast_ref::<DynamicFilterPhysicalExpr>() else {
                return true;
            };
            match dynamic.current() {
                Ok(current) => !matches!(
                    current.downcast_ref::<Literal>().map(Literal::value),
                    Some(ScalarValue::Boolean(Some(true)))
                ),
                Err(_) => false,
            }
        })
    }
}

/// Physical rule: a sort with a fetch (`ORDER BY … LIMIT n`, DataFusion's TopK) directly over a
/// table scan, by plain columns, makes the scan read late ([`crate::table::read::TopKey`]): it
/// yields only rows that can be among the first `n`, which the sort still orders and cuts.
#[derive(Debug, Default)]
pub(crate) struct TopNIntoScan;

impl datafusion::physical_optimizer::PhysicalOptimizerRule for TopNIntoScan {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        plan.transform_down(|node| {
            let Some(sort) = node.downcast_ref::<SortExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(scan) = sort.input().downcast_ref::<TableScanExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(top) = top_n_of(sort) else {
                return Ok(Transformed::no(node));
            };
            if scan.top.as_ref() == Some(&top) {
                return Ok(Transformed::no(node));
            }
            let scan = Arc::new(TableScanExec {
                top: Some(top),
                ..scan.clone()
            });
            let node = Arc::clone(&node).replace_children(
                vec![scan],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )?;
            Ok(Transformed::yes(node))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tidelake_top_n_into_scan"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The top-N of a sort with a fetch whose keys are plain columns; none otherwise. Pure.
fn top_n_of(sort: &SortExec) -> Option<TopN> {
    let n = sort.fetch()?;
    let keys = sort
        .expr()
        .iter()
        .map(|e| {
            e.expr.downcast_ref::<Column>().map(|c| TopKey {
                column: c.name().to_string(),
                options: e.options,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(TopN { keys, n })
}
