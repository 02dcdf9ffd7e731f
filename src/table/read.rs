//! Reading planned splits: data files decoded with projection, primary-key splits merged with the
//! table's merge engine, results streamed split by split.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use snafu::ResultExt;

use super::data_file;
use super::layout::TableLayout;
use super::scan::{Plan, Split};
use super::Table;
use crate::error::{invalid, ArrowSnafu, InternalSnafu, Result};
use crate::lsm::merge_runs;

/// Reads splits of one table with a projection.
#[derive(Debug, Clone)]
pub struct TableRead {
    table: Table,
    layout: Arc<TableLayout>,
    /// Projected column positions in the table schema.
    projection: Vec<usize>,
    output_schema: SchemaRef,
}

impl TableRead {
    /// `projection`: column names to return, in that order (`None` = all columns).
    pub(crate) fn new(table: Table, projection: Option<&[String]>) -> Result<Self> {
        let layout = table.layout()?;
        let projection = match projection {
            None => (0..layout.schema.fields.len()).collect(),
            Some(cols) => cols
                .iter()
                .map(|c| match layout.schema.field_index(c) {
                    Some(i) => Ok(i),
                    None => invalid!("table {} has no column '{c}'", table.identifier()),
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let output_schema = Arc::new(layout.arrow_schema.project(&projection).context(
            ArrowSnafu {
                context: "projecting the schema",
            },
        )?);
        Ok(Self {
            table,
            layout,
            projection,
            output_schema,
        })
    }

    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.output_schema)
    }

    /// Streams the rows of `plan`, reading up to two splits ahead.
    pub fn stream(&self, plan: Plan) -> BoxStream<'static, Result<RecordBatch>> {
        let this = self.clone();
        stream::iter(plan.splits)
            .map(move |split| {
                let this = this.clone();
                async move { this.read_split(&split).await }
            })
            .buffered(2)
            .map_ok(|batches| stream::iter(batches.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    /// Reads every row of `plan` into memory.
    pub async fn collect(&self, plan: Plan) -> Result<Vec<RecordBatch>> {
        self.stream(plan).try_collect().await
    }

    /// Reads one split: files decoded concurrently, then merged (primary-key tables).
    pub async fn read_split(&self, split: &Split) -> Result<Vec<RecordBatch>> {
        let dir = self.table.bucket_dir(&split.partition, split.bucket)?;
        let layout = &self.layout;
        // One sorted run above level 0 without retractions holds final rows, each key once (after
        // a full compaction, typically): it is read without merging, as Paimon's raw-convertible
        // splits are.
        let first_level = split.files.first().map(|f| f.level).unwrap_or(0);
        let raw = split
            .files
            .iter()
            .all(|f| f.level > 0 && f.level == first_level && f.delete_row_count == Some(0));
        let pk = layout.is_primary_key_table() && !raw;
        // PK tables read the system columns plus projected and sequence-field columns.
        let (file_target, value_cols): (SchemaRef, Vec<usize>) = if pk {
            let offset = layout.value_offset();
            let mut cols: Vec<usize> = (0..offset).collect();
            // Engines that build rows merge every column; the projection is applied afterwards.
            let mut values: Vec<usize> = if layout.merge_config.needs_all_columns() {
                (0..layout.schema.fields.len()).collect()
            } else {
                self.projection.clone()
            };
            for &s in &layout.sequence_field_indices {
                if !values.contains(&s) {
                    values.push(s);
                }
            }
            cols.extend(values.iter().map(|v| v + offset));
            let schema = Arc::new(layout.file_schema.project(&cols).context(ArrowSnafu {
                context: "projecting",
            })?);
            (schema, values)
        } else {
            (Arc::clone(&self.output_schema), self.projection.clone())
        };
        let fetches = split.files.iter().map(|f| {
            let path = match &f.external_path {
                Some(p) => p.clone(),
                None => format!("{dir}/{}", f.file_name),
            };
            let io = self.table.io().clone();
            async move { io.read(&path).await.map(|bytes| (path, bytes)) }
        });
        let files = futures::future::try_join_all(fetches).await?;
        let k = layout.key_indices.len();
        let spec = pk.then(|| layout.merge_spec(&value_cols, false));
        let output_schema = Arc::clone(&self.output_schema);
        // Where each projected column sits among the merged columns.
        let out_cols: Vec<usize> = self
            .projection
            .iter()
            .filter_map(|p| value_cols.iter().position(|v| v == p).map(|i| k + 2 + i))
            .collect();
        // Decoding and merging are CPU work: off the async workers, one task per split.
        tokio::task::spawn_blocking(move || -> Result<Vec<RecordBatch>> {
            let mut runs = Vec::new();
            for (path, bytes) in files {
                runs.extend(data_file::decode(&path, bytes, &file_target)?);
            }
            let Some(spec) = spec else { return Ok(runs) };
            let Some(merged) = merge_runs(&runs, &spec)? else {
                return Ok(vec![]);
            };
            let columns = merged
                .project(&out_cols)
                .context(ArrowSnafu {
                    context: "projecting merged rows",
                })?
                .columns()
                .to_vec();
            let batch = RecordBatch::try_new(output_schema, columns).context(ArrowSnafu {
                context: "merged rows",
            })?;
            Ok(vec![batch])
        })
        .await
        .map_err(|e| {
            InternalSnafu {
                message: format!("read task: {e}"),
            }
            .build()
        })?
    }
}
