//! The writer side of cross-partition upserts (see [`crate::table::cross_partition`]): each row
//! of a batch, in input order, is placed by where its key lives (the writer's own assignments
//! since its last commit first, then the table's key index), and a key that changes partition
//! leaves a retraction behind in its old bucket: the row itself as `-D`, with the old partition's
//! values in its partition columns, as Paimon's `DeleteExistingProcessor` writes it.
//!
//! The index is synced to the latest snapshot at the first write after each commit (which brings
//! in the writer's own commit); the commit messages carry the snapshot it was synced to, and the
//! commit fails as a conflict if another writer added files since.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, ArrayRef, Int8Array, RecordBatch, UInt32Array};
use arrow::compute::{concat, concat_batches, take_record_batch};
use snafu::ResultExt;

use super::{BucketId, TableWrite};
use crate::error::{ArrowSnafu, CorruptSnafu, Result};
use crate::spec::binary_row;
use crate::spec::datum::datums_to_array;
use crate::spec::RowKind;
use crate::table::cross_partition::{self, decide, pick_bucket, Action, OnMoved, Place};

/// What a writer of a cross-partition table holds of the key index.
#[derive(Debug)]
pub(super) struct CrossIndex {
    index: cross_partition::SharedIndex,
    /// The snapshot the index was synced to when this commit's writes began (`Some(0)` on a
    /// table without snapshots); `None` until the first write after a commit.
    synced: Option<i64>,
    /// Keys this writer placed since then.
    placed: HashMap<Vec<u8>, Place>,
    /// Keys per bucket of the partitions it placed keys in, as this writer sees them.
    counts: HashMap<u32, BTreeMap<i32, u64>>,
}

/// A routed batch: its rows (the input's, then the retractions it caused), their kinds, and the
/// rows of each bucket in the order they are written.
pub(super) type Routed = (RecordBatch, Option<Int8Array>, Vec<(BucketId, Vec<u32>)>);

impl TableWrite {
    /// Places the rows of a cross-partition table (`groups`: the rows of each partition).
    pub(super) async fn assign_cross(
        &mut self,
        values: RecordBatch,
        kinds: Option<Int8Array>,
        groups: Vec<(BucketId, Vec<u32>)>,
    ) -> Result<Routed> {
        if self.cross.is_none() {
            self.cross = Some(CrossIndex {
                index: cross_partition::open(self.table())?,
                synced: None,
                placed: HashMap::new(),
                counts: HashMap::new(),
            });
        }
        let table = self.table().clone();
        let layout = std::sync::Arc::clone(&self.shared.layout);
        let Some(c) = self.cross.as_mut() else {
            return Ok((values, kinds, groups));
        };
        let shared = std::sync::Arc::clone(&c.index);
        let mut index = shared.lock().await;
        if c.synced.is_none() {
            c.synced = Some(index.sync(&table).await?.unwrap_or(0));
            c.placed.clear();
            c.counts.clear();
        }
        let n = values.num_rows();
        let key_columns: Vec<&ArrayRef> = layout
            .primary_key_indices
            .iter()
            .map(|&i| values.column(i))
            .collect();
        let keys = cross_partition::key_bytes(&layout, &key_columns, 0..n)?;
        let started = std::time::Instant::now();
        let known = index.lookup(&keys)?;
        tracing::debug!(
            keys = n,
            lookup_ms = started.elapsed().as_millis() as u64,
            "key index looked up"
        );
        let mut partition_of = vec![0u32; n];
        for (id, rows) in &groups {
            let p = index.intern(&id.partition);
            for &r in rows {
                partition_of[r as usize] = p;
            }
        }
        let on_moved = OnMoved::of(layout.merge_engine);
        let target = layout.options.dynamic.target_row_num;
        let mut out: BTreeMap<Place, Vec<u32>> = BTreeMap::new();
        // Rows written again elsewhere: (input row, place, kind).
        let mut extra: Vec<(u32, Place, i8)> = Vec::new();
        let kind_of = |r: usize| kinds.as_ref().map_or(0, |k| k.value(r));
        for (r, key) in keys.into_iter().enumerate() {
            let p = partition_of[r];
            let existing = c.placed.get(&key).copied().or(known[r]);
            let place_new = |c: &mut CrossIndex, key: Vec<u8>| {
                let counts = c.counts.entry(p).or_insert_with(|| index.counts(p));
                let b = pick_bucket(counts, target);
                *counts.entry(b).or_default() += 1;
                c.placed.insert(key, (p, b));
                (p, b)
            };
            match decide(existing, p, on_moved) {
                Action::Stay(b) => out.entry((p, b)).or_default().push(r as u32),
                Action::New => {
                    let place = place_new(c, key);
                    out.entry(place).or_default().push(r as u32);
                }
                Action::Move { from } => {
                    extra.push((r as u32, from, RowKind::Delete as i8));
                    out.entry(from)
                        .or_default()
                        .push((n + extra.len() - 1) as u32);
                    let counts = c
                        .counts
                        .entry(from.0)
                        .or_insert_with(|| index.counts(from.0));
                    if let Some(k) = counts.get_mut(&from.1) {
                        *k = k.saturating_sub(1);
                    }
                    let place = place_new(c, key);
                    out.entry(place).or_default().push(r as u32);
                }
                Action::IntoOld(from) => {
                    extra.push((r as u32, from, kind_of(r)));
                    out.entry(from)
                        .or_default()
                        .push((n + extra.len() - 1) as u32);
                }
                Action::Drop => {}
            }
        }
        let groups = out
            .into_iter()
            .map(|((p, b), rows)| (BucketId::new(index.partition(p).to_vec(), b), rows))
            .collect();
        if extra.is_empty() {
            return Ok((values, kinds, groups));
        }
        // The rows written elsewhere, with their new partitions' values.
        let rows = UInt32Array::from_iter_values(extra.iter().map(|e| e.0));
        let moved = take_record_batch(&values, &rows).context(ArrowSnafu {
            context: "rows moved between partitions",
        })?;
        let mut decoded: HashMap<u32, Vec<binary_row::Datum>> = HashMap::new();
        for &(_, (p, _), _) in &extra {
            if let std::collections::hash_map::Entry::Vacant(v) = decoded.entry(p) {
                let datums = binary_row::deserialize(index.partition(p), &layout.partition_types)
                    .map_err(|e| {
                    CorruptSnafu {
                        path: table.path().to_string(),
                        message: format!(
                            "key index: a partition of table {}: {e}",
                            table.identifier()
                        ),
                    }
                    .build()
                })?;
                v.insert(datums);
            }
        }
        let mut columns = moved.columns().to_vec();
        for (pos, &c) in layout.partition_indices.iter().enumerate() {
            let datums: Vec<binary_row::Datum> = extra
                .iter()
                .map(|(_, (p, _), _)| decoded[p][pos].clone())
                .collect();
            columns[c] = datums_to_array(values.schema().field(c).data_type(), &datums)?;
        }
        let moved = RecordBatch::try_new(values.schema(), columns).context(ArrowSnafu {
            context: "rows moved between partitions",
        })?;
        let all = concat_batches(&values.schema(), [&values, &moved]).context(ArrowSnafu {
            context: "rows moved between partitions",
        })?;
        let base: ArrayRef = match &kinds {
            Some(k) => std::sync::Arc::new(k.clone()),
            None => std::sync::Arc::new(Int8Array::from(vec![0i8; n])),
        };
        let more = Int8Array::from_iter_values(extra.iter().map(|e| e.2));
        let kinds = concat(&[base.as_ref(), &more as &dyn Array]).context(ArrowSnafu {
            context: "row kinds of moved rows",
        })?;
        let kinds = kinds
            .as_any()
            .downcast_ref::<Int8Array>()
            .cloned()
            .ok_or_else(|| {
                crate::error::InternalSnafu {
                    message: "row kinds of moved rows are not Int8".to_string(),
                }
                .build()
            })?;
        Ok((all, Some(kinds), groups))
    }

    /// The snapshot a cross-partition writer's key index was synced to for the commit being
    /// prepared (`None`: not such a writer, or nothing written since the last commit); the next
    /// write syncs again.
    pub(super) fn take_cross_base(&mut self) -> Option<i64> {
        self.cross.as_mut().and_then(|c| c.synced.take())
    }
}
