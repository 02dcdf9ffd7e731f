//! ORC data files (`file.format = orc`, Paimon's default before 0.9): decoding one into the
//! record batches of a table's layout (columns by name, as Paimon's readers match them, only the
//! target's read), and encoding a batch as one. The ORC codec itself is `orc-rust`'s; this module
//! owns the mapping: which of the table's types its writer encodes, which codec a table's
//! `file.compression` names, and that a file it cannot decode is refused naming the file.

use std::ops::Range;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use bytes::Bytes;
use orc_rust::arrow_reader::ArrowReaderBuilder;
use orc_rust::compression::CompressionType;
use orc_rust::projection::ProjectionMask;
use orc_rust::schema::TimestampPrecision;
use orc_rust::ArrowWriterBuilder;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::conform::{file_names, Decoded};
use super::parquet_writer::ROW_GROUP_ROWS;
use super::parts::groups_starting_in;
use crate::error::{Malformed, Result};
use crate::spec::options::FileCompression;
use crate::table::evolution::FileColumns;

/// Rows decoded at a time (as for Parquet files).
const BATCH_ROWS: usize = 64 * 1024;

/// The ORC file `bytes` (at `path`) opened for decoding into batches of `target`: only the
/// columns `target` names are read; columns are cast where the file chose another
/// representation and NULL where it has none.
pub(crate) fn open(
    path: &str,
    bytes: Bytes,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
) -> Result<Decoded> {
    let broken =
        |e: &dyn std::fmt::Display| Malformed(format!("not a readable ORC file: {e}")).at(path);
    crate::metrics::metrics()
        .bytes_read
        .inc_by(bytes.len() as u64);
    let builder = guarded(path, || ArrowReaderBuilder::try_new(bytes))?
        .map_err(|e| broken(&e))?
        .with_batch_size(BATCH_ROWS)
        .with_timestamp_precision(precision(target));
    let all = builder.schema();
    let names = file_names(&all, target, columns);
    let mut read: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
    read.sort_unstable();
    read.dedup();
    let mask = ProjectionMask::named_roots(builder.file_metadata().root_data_type(), &read);
    let mut builder = builder.with_projection(mask);
    if let Some(part) = part {
        // A part is the stripes whose first row is in it, as a Parquet part is row groups.
        let stripes = builder.file_metadata().stripe_metadatas();
        let chosen = groups_starting_in(stripes.iter().map(|s| s.number_of_rows() as i64), part);
        let bytes = match (chosen.first(), chosen.last()) {
            (Some(&a), Some(&b)) => stripes[a].offset() as usize..stripes[b].offset() as usize + 1,
            _ => 0..0,
        };
        builder = builder.with_file_byte_range(bytes);
    }
    let reader = builder.build();
    let guarded_reader = Guarded {
        path: path.to_string(),
        inner: reader,
    };
    Ok(Decoded::new(
        path,
        Box::new(guarded_reader),
        target,
        names,
        None,
    ))
}

/// Decodes the ORC file `bytes` whole (see [`open`]).
pub(crate) fn decode(
    path: &str,
    bytes: Bytes,
    target: &SchemaRef,
    columns: Option<&FileColumns>,
    part: Option<&Range<u64>>,
) -> Result<Vec<RecordBatch>> {
    open(path, bytes, target, columns, part)?.collect()
}

/// The timestamp unit to decode in: nanoseconds only where the target keeps them (they overflow
/// past the year 2262, which Paimon's timestamps reach), microseconds otherwise (pure).
fn precision(target: &SchemaRef) -> TimestampPrecision {
    let nanos = target
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Timestamp(TimeUnit::Nanosecond, _)));
    if nanos {
        TimestampPrecision::Nanosecond
    } else {
        TimestampPrecision::Microsecond
    }
}

/// Runs a step of the ORC decoder, whose bounds checks on a damaged file can panic: a panic is
/// the file's fault, refused naming it, never the server's.
fn guarded<T>(path: &str, step: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(step))
        .map_err(|_| Malformed("not a readable ORC file: its structure is damaged".into()).at(path))
}

/// The ORC reader with each batch's decoding [`guarded`].
struct Guarded {
    path: String,
    inner: orc_rust::ArrowReader<Bytes>,
}

impl Iterator for Guarded {
    type Item = std::result::Result<RecordBatch, arrow::error::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match guarded(&self.path, || self.inner.next()) {
            Ok(item) => item,
            Err(e) => Some(Err(arrow::error::ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

/// Whether the ORC writer encodes every column of `schema` (a table's file layout): flat
/// primitive columns, strings, binaries, dates and timestamps; not DECIMAL, TIME or nested types
/// (pure). A table whose layout it cannot encode gets Parquet files instead, which every Paimon
/// reader reads by their extension.
pub(crate) fn writable(schema: &SchemaRef) -> bool {
    schema.fields().iter().all(|f| {
        matches!(
            f.data_type(),
            DataType::Boolean
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Float32
                | DataType::Float64
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::Date32
                | DataType::Timestamp(_, None)
        ) || matches!(f.data_type(), DataType::Timestamp(_, Some(tz)) if tz.as_ref() == "UTC")
    })
}

/// The ORC codec of a table's `file.compression` (none: uncompressed). ORC's zstd is written at
/// the codec's default level; brotli and lzo tables are refused before anything is written
/// (`TableLayout::check_writable`) (pure).
fn codec(compression: FileCompression) -> Option<CompressionType> {
    match compression {
        FileCompression::None | FileCompression::Brotli | FileCompression::Lzo => None,
        FileCompression::Snappy => Some(CompressionType::Snappy),
        FileCompression::Lz4 | FileCompression::Lz4Raw => Some(CompressionType::Lz4),
        FileCompression::Gzip => Some(CompressionType::Zlib),
        FileCompression::Zstd(_) => Some(CompressionType::Zstd),
    }
}

/// Encodes `batch` as one ORC file (its schema [`writable`]).
pub(crate) fn encode(
    batch: &RecordBatch,
    file: &str,
    compression: FileCompression,
) -> Result<Vec<u8>> {
    let failed = |e: &dyn std::fmt::Display| {
        crate::error::internal(format!("writing the ORC file {file}: {e}"))
    };
    if !writable(&batch.schema()) {
        return Err(failed(
            &"a column has a type the ORC writer does not encode",
        ));
    }
    let mut buf = Vec::new();
    let mut builder = ArrowWriterBuilder::new(&mut buf, batch.schema());
    if let Some(c) = codec(compression) {
        builder = builder.with_compression(c);
    }
    let mut writer = builder.try_build().map_err(|e| failed(&e))?;
    // Stripes of Parquet's row-group size, so a scan can read a file in parts.
    let mut at = 0;
    while at < batch.num_rows() {
        let n = ROW_GROUP_ROWS.min(batch.num_rows() - at);
        writer.write(&batch.slice(at, n)).map_err(|e| failed(&e))?;
        at += n;
        if at < batch.num_rows() {
            writer.flush_stripe().map_err(|e| failed(&e))?;
        }
    }
    writer.close().map_err(|e| failed(&e))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![
                        Some(1),
                        Some(253_402_300_799_000_000),
                        None,
                    ])
                    .with_timezone("UTC"),
                ),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_batch_reads_back_by_name_with_missing_columns_null_and_types_cast() {
        for c in [
            FileCompression::None,
            FileCompression::Snappy,
            FileCompression::Lz4,
            FileCompression::Gzip,
            FileCompression::Zstd(3),
        ] {
            let bytes = Bytes::from(encode(&batch(), "f.orc", c).unwrap());
            let target = Arc::new(Schema::new(vec![
                Field::new("name", DataType::Utf8, true),
                Field::new("id", DataType::Int64, false),
                Field::new("gone", DataType::Int32, true),
                Field::new(
                    "at",
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                    true,
                ),
            ]));
            let out = decode("f.orc", bytes, &target, None, None).unwrap();
            assert_eq!(out.len(), 1, "{c:?}");
            let b = &out[0];
            assert_eq!(b.schema(), target);
            assert_eq!(
                b.column(1)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values(),
                &[1, 2, 3]
            );
            assert_eq!(
                b.column(0).as_string::<i32>().iter().collect::<Vec<_>>(),
                vec![Some("a"), None, Some("c")]
            );
            assert_eq!(b.column(2).null_count(), 3);
            // The year 9999 survives: decoded in microseconds, not nanoseconds.
            let at = b
                .column(3)
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
            assert_eq!(at.value(1), 253_402_300_799_000_000);
            assert!(at.is_null(2));
        }
    }

    #[test]
    fn files_are_written_in_stripes_that_parts_read_without_overlap() {
        let n = 2 * ROW_GROUP_ROWS + 5;
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let ids = Int64Array::from_iter_values(0..n as i64);
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(ids)]).unwrap();
        let bytes = Bytes::from(encode(&batch, "f.orc", FileCompression::Zstd(1)).unwrap());
        let builder = ArrowReaderBuilder::try_new(bytes.clone()).unwrap();
        assert_eq!(builder.file_metadata().stripe_metadatas().len(), 3);
        let g = ROW_GROUP_ROWS as u64;
        let ids_of = |part: Range<u64>| -> Vec<i64> {
            decode("f.orc", bytes.clone(), &schema, None, Some(&part))
                .unwrap()
                .iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_primitive::<arrow::datatypes::Int64Type>()
                        .values()
                        .to_vec()
                })
                .collect()
        };
        let first = ids_of(0..g);
        let rest = ids_of(g..u64::MAX);
        assert_eq!(first, (0..g as i64).collect::<Vec<_>>());
        assert_eq!(rest, (g as i64..n as i64).collect::<Vec<_>>());
        // A part in which no stripe starts reads nothing.
        assert!(ids_of(1..g).is_empty());
    }

    #[test]
    fn a_damaged_file_is_refused_naming_it() {
        let bytes = Bytes::from(encode(&batch(), "f.orc", FileCompression::Zstd(1)).unwrap());
        let target = batch().schema();
        let cut = bytes.slice(..bytes.len() / 2);
        let e = decode("db.db/t/bucket-0/f.orc", cut, &target, None, None).unwrap_err();
        assert!(e.to_string().contains("db.db/t/bucket-0/f.orc"), "{e}");
        // Every flipped byte is refused or reads; none panics.
        for at in 0..bytes.len() {
            let mut b = bytes.to_vec();
            b[at] ^= 0x5a;
            let _ = decode("f.orc", Bytes::from(b), &target, None, None);
        }
        assert!(decode("f.orc", Bytes::new(), &target, None, None).is_err());
    }

    #[test]
    fn only_what_the_orc_writer_encodes_is_writable() {
        let one = |t: DataType| Arc::new(Schema::new(vec![Field::new("c", t, true)]));
        assert!(writable(&one(DataType::Int32)));
        assert!(writable(&one(DataType::Timestamp(
            TimeUnit::Millisecond,
            None
        ))));
        assert!(!writable(&one(DataType::Decimal128(10, 2))));
        assert!(!writable(&one(DataType::Time32(TimeUnit::Millisecond))));
        assert!(!writable(&one(DataType::Timestamp(
            TimeUnit::Millisecond,
            Some("+01:00".into())
        ))));
        let list = DataType::List(Arc::new(Field::new("element", DataType::Int32, true)));
        assert!(!writable(&one(list)));
    }
}
