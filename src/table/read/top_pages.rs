//! Which pages of a top-N read's first sort key need decoding at all: every page holding one of
//! the first `n` rows has a bound (its max, descending; its min, ascending) at least as good as
//! the `n`-th best bound among pages whose bound is a value they hold, so the others are skipped
//! unread. Bounds come from the Parquet page index; a bound counts as held ("attained") only in
//! files whose footer says so ([`data_file::EXACT_BOUNDS_KEY`]): Parquet leaves NaN out of float
//! statistics, and other writers may truncate. Unknown bounds always read.

use arrow::datatypes::DataType;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use crate::table::data_file;
use crate::table::key_filter::page_spans;

/// A page's bound on the first sort key, as f64 (a monotone image of the column's values:
/// comparisons against it are conservative, never wrong).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bound {
    /// No usable statistics: the page may hold anything.
    Unknown,
    /// Every row of the page is null.
    AllNull,
    /// The page's best value (max descending, min ascending).
    Value(f64),
}

/// One page of the first sort key's column, in the order a file's part reads its rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PageBound {
    pub(super) rows: usize,
    pub(super) best: Bound,
    /// Whether a row of the page holds `best` (exact bounds, not merely a limit).
    pub(super) attained: bool,
    /// Whether the page may hold nulls.
    pub(super) nulls: bool,
}

/// For each file (`None`: its pages are unknown), which pages to decode (`None`: all of them), so
/// that the first `n` rows by the first key (`descending`, `nulls_first`) are among those read.
/// Pure.
pub(super) fn choose(
    files: &[Option<Vec<PageBound>>],
    n: usize,
    descending: bool,
    nulls_first: bool,
) -> Vec<Option<Vec<bool>>> {
    let mut held: Vec<f64> = files
        .iter()
        .flatten()
        .flatten()
        .filter(|p| p.attained)
        .filter_map(|p| match p.best {
            Bound::Value(v) if !v.is_nan() => Some(v),
            _ => None,
        })
        .collect();
    if n == 0 || held.len() < n {
        return vec![None; files.len()];
    }
    // The n-th best held bound: at least n rows are as good, so no row worse can be among the
    // first n.
    let at = if descending { held.len() - n } else { n - 1 };
    let (_, bar, _) = held.select_nth_unstable_by(at, f64::total_cmp);
    let bar = *bar;
    let keep = |p: &PageBound| match p.best {
        Bound::Unknown => true,
        Bound::AllNull => nulls_first,
        Bound::Value(v) => {
            (nulls_first && p.nulls) || v.is_nan() || if descending { v >= bar } else { v <= bar }
        }
    };
    files
        .iter()
        .map(|pages| {
            let pages = pages.as_ref()?;
            let kept: Vec<bool> = pages.iter().map(keep).collect();
            (!kept.iter().all(|k| *k)).then_some(kept)
        })
        .collect()
}

/// The pages of the top-level column `column` (its name in the file) in row groups `groups` (in
/// that order), bounded for a sort `descending`; `None` when the file has no page index for it
/// or stores it with another type than `target`.
pub(super) fn page_bounds(
    md: &ParquetMetaData,
    arrow_schema: &arrow::datatypes::Schema,
    groups: &[usize],
    column: &str,
    target: &DataType,
    descending: bool,
) -> Option<Vec<PageBound>> {
    if arrow_schema.field_with_name(column).ok()?.data_type() != target {
        return None;
    }
    let schema = md.file_metadata().schema_descr();
    let col = (0..schema.num_columns()).find(|&i| schema.column(i).path().parts() == [column])?;
    let attained = exact_columns(md).iter().any(|c| c == column);
    let (ci, oi) = (md.column_index()?, md.offset_index()?);
    let mut out = Vec::new();
    for &rg in groups {
        let index = ci.get(rg)?.get(col)?;
        for (p, (_, rows)) in page_spans(md, oi, rg, col)?.into_iter().enumerate() {
            let best = page_best(index, p, descending);
            out.push(PageBound {
                rows,
                best,
                // Float bounds leave NaN out: held only where the writer saw none.
                attained: attained && matches!(best, Bound::Value(_)),
                nulls: index.null_count(p) != Some(0),
            });
        }
    }
    Some(out)
}

/// The columns the file's writer marked as having exact bounds (none for other writers' files).
fn exact_columns(md: &ParquetMetaData) -> Vec<String> {
    md.file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .find(|kv| kv.key == data_file::EXACT_BOUNDS_KEY)
        .and_then(|kv| kv.value.as_deref())
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// Page `p`'s best value by the page index (max descending, min ascending).
fn page_best(index: &ColumnIndexMetaData, p: usize, descending: bool) -> Bound {
    use ColumnIndexMetaData as I;
    if index.is_null_page(p) {
        return Bound::AllNull;
    }
    macro_rules! best {
        ($ix:expr) => {{
            let v = if descending {
                $ix.max_value(p)
            } else {
                $ix.min_value(p)
            };
            v.map_or(Bound::Unknown, |v| Bound::Value(*v as f64))
        }};
    }
    match index {
        I::INT32(ix) => best!(ix),
        I::INT64(ix) => best!(ix),
        I::FLOAT(ix) => best!(ix),
        I::DOUBLE(ix) => best!(ix),
        _ => Bound::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(best: Bound, attained: bool, nulls: bool) -> PageBound {
        PageBound {
            rows: 10,
            best,
            attained,
            nulls,
        }
    }

    fn v(x: f64) -> PageBound {
        page(Bound::Value(x), true, false)
    }

    #[test]
    fn pages_below_the_nth_best_bound_are_skipped() {
        let files = vec![
            Some(vec![v(1.0), v(9.0), v(5.0)]),
            Some(vec![v(7.0), v(2.0)]),
        ];
        // Descending, n = 2: the bar is 7; pages with max ≥ 7 are read.
        let chosen = choose(&files, 2, true, false);
        assert_eq!(
            chosen,
            vec![Some(vec![false, true, false]), Some(vec![true, false])]
        );
        // Ascending, n = 2: the bar is 2 (min bounds).
        let chosen = choose(&files, 2, false, false);
        assert_eq!(
            chosen,
            vec![Some(vec![true, false, false]), Some(vec![false, true])]
        );
        // A file whose every page is read is read whole.
        let chosen = choose(&files, 4, true, false);
        assert_eq!(chosen, vec![Some(vec![false, true, true]), None]);
    }

    #[test]
    fn ties_at_the_bar_and_unknown_pages_are_read() {
        let files = vec![
            Some(vec![v(5.0), v(5.0), v(5.0)]),
            None,
            Some(vec![page(Bound::Unknown, false, true), v(1.0)]),
        ];
        let chosen = choose(&files, 1, true, false);
        assert_eq!(chosen, vec![None, None, Some(vec![true, false])]);
    }

    #[test]
    fn bounds_that_are_not_held_do_not_set_the_bar() {
        // Only one held bound: with n = 2 everything is read.
        let files = vec![Some(vec![v(3.0), page(Bound::Value(9.0), false, false)])];
        assert_eq!(choose(&files, 2, true, false), vec![None]);
        // But an unheld bound still decides whether its page is read.
        let files = vec![Some(vec![
            v(3.0),
            v(4.0),
            page(Bound::Value(1.0), false, false),
        ])];
        assert_eq!(
            choose(&files, 2, true, false),
            vec![Some(vec![true, true, false])]
        );
    }

    #[test]
    fn nulls_are_read_only_when_they_sort_first() {
        let files = vec![Some(vec![
            v(1.0),
            v(9.0),
            page(Bound::AllNull, false, true),
            page(Bound::Value(0.5), true, true),
        ])];
        assert_eq!(
            choose(&files, 1, true, true),
            vec![Some(vec![false, true, true, true])]
        );
        assert_eq!(
            choose(&files, 1, true, false),
            vec![Some(vec![false, true, false, false])]
        );
    }

    #[test]
    fn nan_bounds_neither_set_the_bar_nor_are_skipped() {
        let files = vec![Some(vec![v(f64::NAN), v(2.0), v(1.0)])];
        assert_eq!(
            choose(&files, 1, true, false),
            vec![Some(vec![true, true, false])]
        );
        // Too few held bounds once NaN is left out.
        assert_eq!(choose(&files, 3, true, false), vec![None]);
        // Nothing to take: everything (nothing) is read.
        assert_eq!(choose(&files, 0, true, false), vec![None]);
    }

    fn written(v: Vec<Option<f64>>) -> parquet::arrow::arrow_reader::ArrowReaderMetadata {
        use arrow::array::{Float64Array, Int64Array, RecordBatch};
        use arrow::datatypes::{Field, Schema};
        let n = v.len() as i64;
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Float64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(Float64Array::from(v)),
            ],
        )
        .unwrap();
        let bytes = bytes::Bytes::from(
            data_file::encode_parquet(
                &batch,
                "t.parquet",
                crate::spec::options::FileCompression::Zstd(1),
            )
            .unwrap(),
        );
        let options = parquet::arrow::arrow_reader::ArrowReaderOptions::new()
            .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required);
        parquet::arrow::arrow_reader::ArrowReaderMetadata::load(&bytes, options).unwrap()
    }

    use std::sync::Arc;

    #[test]
    fn page_bounds_of_a_written_file_are_its_pages_extremes() {
        // 40k rows: pages of 16k rows; page 1 holds the largest value and a null.
        let values: Vec<Option<f64>> = (0..40_000)
            .map(|i| match i {
                20_000 => Some(1e9),
                20_001 => None,
                _ => Some(f64::from(i % 1000)),
            })
            .collect();
        let meta = written(values);
        let md = meta.metadata();
        let groups: Vec<usize> = (0..md.num_row_groups()).collect();
        let desc = page_bounds(md, meta.schema(), &groups, "v", &DataType::Float64, true).unwrap();
        let rows: Vec<usize> = desc.iter().map(|p| p.rows).collect();
        assert_eq!(rows.iter().sum::<usize>(), 40_000);
        assert!(rows.len() >= 3, "{rows:?}");
        assert_eq!(desc[1].best, Bound::Value(1e9));
        assert!(desc.iter().all(|p| p.attained));
        assert_eq!(
            desc.iter().map(|p| p.nulls).collect::<Vec<_>>(),
            (0..rows.len()).map(|i| i == 1).collect::<Vec<_>>()
        );
        let asc = page_bounds(md, meta.schema(), &groups, "v", &DataType::Float64, false).unwrap();
        assert_eq!(asc[0].best, Bound::Value(0.0));
        // Integer bounds are exact too; another type than the target's is unknown.
        let ids = page_bounds(md, meta.schema(), &groups, "id", &DataType::Int64, true).unwrap();
        assert_eq!(ids[0].best, Bound::Value((rows[0] - 1) as f64));
        assert!(ids[0].attained);
        assert!(page_bounds(md, meta.schema(), &groups, "id", &DataType::Int32, true).is_none());
        assert!(page_bounds(md, meta.schema(), &groups, "w", &DataType::Int64, true).is_none());
    }

    #[test]
    fn float_bounds_are_not_held_where_a_nan_was_written() {
        let meta = written(vec![Some(1.0), Some(f64::NAN), Some(3.0)]);
        let md = meta.metadata();
        let pages = page_bounds(md, meta.schema(), &[0], "v", &DataType::Float64, true).unwrap();
        assert!(pages.iter().all(|p| !p.attained), "{pages:?}");
        let ids = page_bounds(md, meta.schema(), &[0], "id", &DataType::Int64, true).unwrap();
        assert!(ids.iter().all(|p| p.attained), "{ids:?}");
    }
}
