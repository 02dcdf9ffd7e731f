//! Key-range pruning of the data files of primary-key tables, which are sorted by key: the row
//! groups and pages whose statistics for the first key column may hold a key in range, and the
//! rows of a decoded batch that do (rows of other keys may be dropped before merging, since a key's
//! merge sees only its own rows).

use arrow::array::RecordBatch;
use snafu::ResultExt;

use crate::error::{ArrowSnafu, Result};

/// How many of `rows` (in order) satisfy `before`, which holds for a prefix of them.
pub(crate) fn partition_point(
    rows: std::ops::Range<usize>,
    before: impl Fn(usize) -> bool,
) -> usize {
    let (mut lo, mut hi) = (rows.start, rows.end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo - rows.start
}

/// [`partition_point`] searched outwards from the range's start (galloping): `O(log k)` for an
/// answer `k` rows in, so a walk of sorted keys over sorted rows costs what the gaps between
/// them do and touches memory near where the last search ended.
pub(crate) fn gallop(rows: std::ops::Range<usize>, before: impl Fn(usize) -> bool) -> usize {
    let len = rows.end.saturating_sub(rows.start);
    let mut bound = 1usize;
    while bound <= len && before(rows.start + bound - 1) {
        bound *= 2;
    }
    // The first bound / 2 rows hold; the answer lies in bound / 2 ..= min(bound, len).
    let lo = rows.start + bound / 2;
    bound / 2 + partition_point(lo..rows.start + bound.min(len), before)
}

/// One page of a file by its key column: its rows (counted from the file's first row) and its
/// key bounds (`None`: no usable bounds, the page may hold any key).
#[derive(Debug)]
pub(crate) struct KeyPage {
    pub(crate) first_row: usize,
    pub(crate) rows: usize,
    pub(crate) bounds: Option<(crate::spec::Datum, crate::spec::Datum)>,
}

/// Keeps the row groups, pages and rows whose key (one key column) may lie in a range (files are
/// sorted by key, so a point lookup touches one page of each file).
#[derive(Debug, Clone)]
pub(crate) struct RowGroupFilter {
    /// The key column as stored (`_KEY_<name>`).
    pub(crate) column: String,
    pub(crate) ty: crate::spec::DataType,
    pub(crate) range: super::scan::KeyRange,
}

impl RowGroupFilter {
    /// The rows of `batch` whose key lies in the range (all of them when the batch has no such
    /// column). Rows of other keys may be dropped before merging: a key's merge sees only its own
    /// rows. A data file's rows are sorted by key (what the merge relies on too), so the rows in
    /// range are one slice, found by binary search with the merge's order: a point read keeps
    /// its row of a cached page without comparing every key of the page.
    pub(super) fn keep_in_range(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let Some(col) = batch.column_by_name(&self.column) else {
            return Ok(batch);
        };
        let context = || format!("keeping the rows of {} in range", self.column);
        let (lower, upper) = self.range.bounds();
        let mut rows = 0..batch.num_rows();
        for (bound, is_lower) in [(lower, true), (upper, false)] {
            let Some((value, inclusive)) = bound else {
                continue;
            };
            let value =
                crate::spec::datum::datums_to_array(col.data_type(), std::slice::from_ref(value))?;
            let order = arrow::array::make_comparator(
                col.as_ref(),
                value.as_ref(),
                arrow::compute::SortOptions::default(),
            )
            .with_context(|_| ArrowSnafu { context: context() })?;
            // Rows before the bound: below it, or equal to an exclusive lower bound or an
            // inclusive upper one.
            let before = |i: usize| {
                let o = order(i, 0);
                o.is_lt() || (o.is_eq() && is_lower != *inclusive)
            };
            let at = rows.start + partition_point(rows.clone(), before);
            rows = if is_lower {
                at..rows.end
            } else {
                rows.start..at
            };
        }
        Ok(if rows.len() == batch.num_rows() {
            batch
        } else {
            batch.slice(rows.start, rows.len())
        })
    }

    pub(super) fn column(&self, md: &parquet::file::metadata::ParquetMetaData) -> Option<usize> {
        let schema = md.file_metadata().schema_descr();
        (0..schema.num_columns()).find(|&i| schema.column(i).name() == self.column)
    }

    /// Every page of the row groups `groups`, by the key column's page index: its first row
    /// (counted from the file's first row), its rows, and its key bounds (`None`: unusable, the
    /// page may hold any key); `None` when the file has no page index for the column.
    pub(super) fn key_pages(
        &self,
        md: &parquet::file::metadata::ParquetMetaData,
        groups: &[usize],
    ) -> Option<Vec<KeyPage>> {
        let col = self.column(md)?;
        let (ci, oi) = (md.column_index()?, md.offset_index()?);
        let mut out = Vec::new();
        for &rg in groups {
            let base = (0..rg)
                .map(|g| usize::try_from(md.row_group(g).num_rows()).ok())
                .sum::<Option<usize>>()?;
            let index = ci.get(rg)?.get(col)?;
            for (p, (start, rows)) in page_spans(md, oi, rg, col)?.into_iter().enumerate() {
                out.push(KeyPage {
                    first_row: base + start,
                    rows,
                    bounds: page_range(index, p, &self.ty),
                });
            }
        }
        Some(out)
    }

    /// Whether `page` may hold a key in range.
    pub(super) fn wants(&self, page: &KeyPage) -> bool {
        match &page.bounds {
            Some((min, max)) => self.range.overlaps(min, max),
            None => true,
        }
    }

    /// Within the kept row groups, the rows of the pages whose key statistics may hold a key in
    /// range (from the page index); `None` to read every row of them.
    pub(super) fn pages(
        &self,
        md: &parquet::file::metadata::ParquetMetaData,
        groups: &[usize],
    ) -> Option<parquet::arrow::arrow_reader::RowSelection> {
        use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
        let selectors: Vec<RowSelector> = self
            .key_pages(md, groups)?
            .iter()
            .map(|page| {
                if self.wants(page) {
                    RowSelector::select(page.rows)
                } else {
                    RowSelector::skip(page.rows)
                }
            })
            .collect();
        Some(RowSelection::from(selectors))
    }

    /// The row groups to read, or `None` to read all (no usable statistics).
    pub(super) fn select(
        &self,
        md: &parquet::file::metadata::ParquetMetaData,
    ) -> Option<Vec<usize>> {
        let col = self.column(md)?;
        let keep = md
            .row_groups()
            .iter()
            .enumerate()
            .filter(|(_, rg)| {
                match rg
                    .column(col)
                    .statistics()
                    .and_then(|s| stats_range(s, &self.ty))
                {
                    Some((min, max)) => self.range.overlaps(&min, &max),
                    None => true,
                }
            })
            .map(|(i, _)| i)
            .collect();
        Some(keep)
    }
}

/// The first row (within row group `rg`) and the rows of each page of column `col` there, by the
/// offset index `oi`; none when it lacks them or they are inconsistent.
pub(crate) fn page_spans(
    md: &parquet::file::metadata::ParquetMetaData,
    oi: &parquet::file::metadata::ParquetOffsetIndex,
    rg: usize,
    col: usize,
) -> Option<Vec<(usize, usize)>> {
    let rows = usize::try_from(md.row_group(rg).num_rows()).ok()?;
    let pages = oi.get(rg)?.get(col)?.page_locations();
    let starts = pages
        .iter()
        .map(|p| usize::try_from(p.first_row_index).ok())
        .collect::<Option<Vec<usize>>>()?;
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(rows));
    starts
        .iter()
        .zip(ends)
        .map(|(&start, end)| Some((start, end.checked_sub(start)?)))
        .collect()
}

/// A page's min and max of a key column (page-index bounds may be truncated strings: a truncated
/// min is still a lower bound and parquet rounds a truncated max up).
fn page_range(
    index: &parquet::file::page_index::column_index::ColumnIndexMetaData,
    page: usize,
    ty: &crate::spec::DataType,
) -> Option<(crate::spec::Datum, crate::spec::Datum)> {
    use crate::spec::{Datum, TypeRoot};
    use parquet::file::page_index::column_index::ColumnIndexMetaData as I;
    match (index, &ty.root) {
        (I::INT32(ix), TypeRoot::Int) => Some((
            Datum::Int(*ix.min_value(page)?),
            Datum::Int(*ix.max_value(page)?),
        )),
        (I::INT64(ix), TypeRoot::BigInt) => Some((
            Datum::BigInt(*ix.min_value(page)?),
            Datum::BigInt(*ix.max_value(page)?),
        )),
        (I::BYTE_ARRAY(ix), TypeRoot::VarChar(_) | TypeRoot::Char(_)) => {
            let min = std::str::from_utf8(ix.min_value(page)?).ok()?;
            let max = std::str::from_utf8(ix.max_value(page)?).ok()?;
            Some((
                Datum::String(min.to_string()),
                Datum::String(max.to_string()),
            ))
        }
        _ => None,
    }
}

/// A row group's min and max of a key column, for the types whose statistics are exact bounds.
fn stats_range(
    s: &parquet::file::statistics::Statistics,
    ty: &crate::spec::DataType,
) -> Option<(crate::spec::Datum, crate::spec::Datum)> {
    use crate::spec::{Datum, TypeRoot};
    use parquet::file::statistics::Statistics as S;
    match (s, &ty.root) {
        (S::Int32(v), TypeRoot::Int) => {
            Some((Datum::Int(*v.min_opt()?), Datum::Int(*v.max_opt()?)))
        }
        (S::Int64(v), TypeRoot::BigInt) => {
            Some((Datum::BigInt(*v.min_opt()?), Datum::BigInt(*v.max_opt()?)))
        }
        (S::ByteArray(v), TypeRoot::VarChar(_) | TypeRoot::Char(_))
            if v.min_is_exact() && v.max_is_exact() =>
        {
            let min = std::str::from_utf8(v.min_opt()?.data()).ok()?;
            let max = std::str::from_utf8(v.max_opt()?.data()).ok()?;
            Some((
                Datum::String(min.to_string()),
                Datum::String(max.to_string()),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DataType, Datum};
    use crate::table::scan::KeyRange;
    use arrow::array::{Array, Int64Array, StringArray};
    use std::sync::Arc;

    fn filter(lower: Option<(i64, bool)>, upper: Option<(i64, bool)>) -> RowGroupFilter {
        RowGroupFilter {
            column: "_KEY_id".into(),
            ty: DataType::new(crate::spec::TypeRoot::BigInt, false),
            range: KeyRange::new(
                lower.map(|(v, i)| (Datum::BigInt(v), i)),
                upper.map(|(v, i)| (Datum::BigInt(v), i)),
            ),
        }
    }

    fn kept(f: &RowGroupFilter, keys: &[i64]) -> Vec<i64> {
        let batch = RecordBatch::try_from_iter([
            ("_KEY_id", Arc::new(Int64Array::from(keys.to_vec())) as _),
            (
                "v",
                Arc::new(StringArray::from_iter_values(
                    keys.iter().map(|k| k.to_string()),
                )) as _,
            ),
        ])
        .unwrap();
        let out = f.keep_in_range(batch).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let vs = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(ids.len(), vs.len());
        (0..ids.len())
            .map(|i| {
                assert_eq!(vs.value(i), ids.value(i).to_string(), "rows stay whole");
                ids.value(i)
            })
            .collect()
    }

    #[test]
    fn the_rows_in_range_of_sorted_keys_are_kept_by_binary_search() {
        // Keys repeat: a file of several sequence numbers per key (level-0 files keep them).
        let keys = [1, 3, 3, 5, 7, 7, 7, 9];
        assert_eq!(
            kept(&filter(Some((7, true)), Some((7, true))), &keys),
            [7, 7, 7]
        );
        assert_eq!(
            kept(&filter(Some((3, false)), Some((7, false))), &keys),
            [5]
        );
        assert_eq!(
            kept(&filter(Some((3, true)), None), &keys),
            [3, 3, 5, 7, 7, 7, 9]
        );
        assert_eq!(kept(&filter(None, Some((3, true))), &keys), [1, 3, 3]);
        assert_eq!(
            kept(&filter(Some((4, true)), Some((4, true))), &keys),
            [] as [i64; 0]
        );
        assert_eq!(
            kept(&filter(Some((0, true)), Some((10, true))), &keys),
            keys
        );
        assert_eq!(kept(&filter(Some((10, true)), None), &keys), [] as [i64; 0]);
        assert_eq!(
            kept(&filter(Some((9, true)), Some((1, true))), &keys),
            [] as [i64; 0]
        );
        assert_eq!(kept(&filter(Some((7, true)), None), &[]), [] as [i64; 0]);
    }

    #[test]
    fn partition_point_counts_the_prefix() {
        assert_eq!(partition_point(0..0, |_| true), 0);
        assert_eq!(partition_point(2..6, |i| i < 4), 2);
        assert_eq!(partition_point(2..6, |_| true), 4);
        assert_eq!(partition_point(2..6, |_| false), 0);
        for len in 0..40usize {
            for k in 0..=len {
                assert_eq!(gallop(3..3 + len, |i| i < 3 + k), k, "len {len}, k {k}");
            }
        }
    }
}
