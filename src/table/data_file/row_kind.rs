//! The row kind of a data file whose every row holds one kind (a file of inserts alone, as most
//! are): its footer's statistics say so, and the column is filled in instead of decoded.

use std::sync::Arc;

use arrow::array::{ArrayRef, ArrowPrimitiveType, PrimitiveArray};
use parquet::file::statistics::Statistics;

/// The one value of a file's row-kind column (leaf `leaf`) in every row, where its footer's
/// statistics show it: each row group's least and greatest values are that value and it has no
/// nulls. A file of inserts alone, as most are, is then read without decoding the column. Pure.
pub(super) fn constant_kind(
    md: &parquet::file::metadata::ParquetMetaData,
    leaf: usize,
) -> Option<i8> {
    let mut value = None;
    for group in md.row_groups() {
        let Some(Statistics::Int32(stats)) = group.column(leaf).statistics() else {
            return None;
        };
        let (Some(&lo), Some(&hi)) = (stats.min_opt(), stats.max_opt()) else {
            return None;
        };
        if lo != hi || stats.null_count_opt() != Some(0) || value.is_some_and(|v| v != lo) {
            return None;
        }
        value = Some(lo);
    }
    i8::try_from(value?).ok()
}

/// One value in every row of a column, as an array grown to the largest batch seen and sliced to
/// each batch's rows: a row kind filled in, or the sequence number of a run read without its own.
pub(crate) struct ConstantColumn<T: ArrowPrimitiveType> {
    value: T::Native,
    rows: PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> ConstantColumn<T> {
    pub(crate) fn new(value: T::Native) -> Self {
        ConstantColumn {
            value,
            rows: PrimitiveArray::<T>::from_value(value, 0),
        }
    }

    /// The column for a batch of `n` rows.
    pub(crate) fn column(&mut self, n: usize) -> ArrayRef {
        if self.rows.len() < n {
            self.rows = PrimitiveArray::<T>::from_value(self.value, n);
        }
        Arc::new(self.rows.slice(0, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::VALUE_KIND;
    use crate::table::data_file::decode;
    use arrow::array::{AsArray, RecordBatch};
    use arrow::array::{Int64Array, Int8Array};
    use arrow::datatypes::{DataType, Int8Type, SchemaRef};
    use arrow::datatypes::{Field, Schema};
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A Parquet file of (`_KEY_id`, `_VALUE_KIND`) rows, two rows to a row group.
    fn file(kinds: &[i8]) -> (Bytes, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("_KEY_id", DataType::Int64, false),
            Field::new(VALUE_KIND, DataType::Int8, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..kinds.len() as i64)),
                Arc::new(Int8Array::from(kinds.to_vec())),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, Arc::clone(&schema), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        (Bytes::from(out), schema)
    }

    fn constant(kinds: &[i8]) -> Option<i8> {
        let (bytes, _) = file(kinds);
        let md = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        constant_kind(md.metadata(), 1)
    }

    #[test]
    fn a_constant_column_fits_each_batch() {
        let mut c = ConstantColumn::<arrow::datatypes::Int64Type>::new(7);
        for n in [3, 0, 5, 2] {
            let col = c.column(n);
            assert_eq!(col.len(), n);
            assert!(col
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .iter()
                .all(|&v| v == 7));
        }
    }

    #[test]
    fn a_row_kind_is_constant_only_where_every_row_group_says_so() {
        assert_eq!(constant(&[0, 0, 0, 0, 0]), Some(0));
        assert_eq!(constant(&[2, 2, 2]), Some(2));
        assert_eq!(
            constant(&[0, 0, 3, 3]),
            None,
            "row groups of different kinds"
        );
        assert_eq!(constant(&[0, 0, 0, 3]), None, "a row group of two kinds");
        assert_eq!(constant(&[]), None, "no row group");
    }

    #[test]
    fn a_filled_in_row_kind_reads_as_the_decoded_one() {
        for kinds in [vec![0i8; 5], vec![2; 3], vec![0, 1, 2, 3, 0]] {
            let (bytes, schema) = file(&kinds);
            let read = decode("f.parquet", bytes, &schema).unwrap();
            let got: Vec<i8> = read
                .iter()
                .flat_map(|b| b.column(1).as_primitive::<Int8Type>().values().to_vec())
                .collect();
            assert_eq!(got, kinds);
        }
    }
}
