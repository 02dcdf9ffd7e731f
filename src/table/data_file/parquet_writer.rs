//! The Parquet side of writing a data file: the writer's properties, the choices made per
//! column from a sample of its values (dictionary or not, compressed or not), the row groups
//! encoded on two threads, and the footer's exact-bounds marker.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use arrow::row::{RowConverter, SortField};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use snafu::ResultExt;

use crate::error::{ParquetSnafu, Result};
use crate::spec::options::FileCompression;

/// Parquet's codec for a table's `file.compression` (pure).
fn codec(compression: FileCompression) -> parquet::errors::Result<Compression> {
    Ok(match compression {
        FileCompression::None => Compression::UNCOMPRESSED,
        FileCompression::Snappy => Compression::SNAPPY,
        FileCompression::Lz4 => Compression::LZ4,
        FileCompression::Lz4Raw => Compression::LZ4_RAW,
        FileCompression::Gzip => Compression::GZIP(GzipLevel::default()),
        FileCompression::Brotli => Compression::BROTLI(BrotliLevel::default()),
        FileCompression::Zstd(level) => Compression::ZSTD(ZstdLevel::try_new(level)?),
        // Refused before anything is written (`TableLayout::check_writable`).
        FileCompression::Lzo => {
            return Err(parquet::errors::ParquetError::NYI(
                "writing LZO-compressed Parquet".into(),
            ))
        }
    })
}

/// `batch` as the bytes of a Parquet file (in the table's codec, row groups of [`ROW_GROUP_ROWS`],
/// pages of at most [`PAGE_ROWS`], page statistics, and the exact-bounds marker
/// [`EXACT_BOUNDS_KEY`]).
pub(crate) fn encode_parquet(
    batch: &RecordBatch,
    file_name: &str,
    compression: FileCompression,
) -> Result<Vec<u8>> {
    let mut props = WriterProperties::builder()
        .set_compression(codec(compression).context(ParquetSnafu { path: file_name })?)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS);
    for (field, col) in batch.schema().fields().iter().zip(batch.columns()) {
        if !dictionary_worthwhile(col) {
            let path = ColumnPath::from(field.name().as_str());
            props = props.set_column_dictionary_enabled(path.clone(), false);
            match plain_layout(col) {
                Layout::Compressed => {}
                Layout::Uncompressed => {
                    props = props.set_column_compression(path, Compression::UNCOMPRESSED);
                }
                Layout::Delta => {
                    props = props
                        .set_column_encoding(path.clone(), Encoding::DELTA_BINARY_PACKED)
                        .set_column_compression(path, Compression::UNCOMPRESSED);
                }
            }
        }
    }
    let mut buf = Vec::with_capacity(batch.get_array_memory_size() / 3);
    write_parallel(&mut buf, batch, props.build()).context(ParquetSnafu { path: file_name })?;
    Ok(buf)
}

/// Rows per Parquet row group.
pub(crate) const ROW_GROUP_ROWS: usize = 256 * 1024;

/// Rows per Parquet data page (at most; pages also end at 1 MiB): a point query, which reads only
/// the pages its key can be in (the page index), decompresses ~16k rows per column and file, not
/// a whole megabyte page.
const PAGE_ROWS: usize = 16 * 1024;

/// Encodes `batch` as Parquet with the columns of each row group encoded on two threads (the
/// encoding, compression and dictionary work dominate ingest; a file is still one writer's output).
fn write_parallel(
    buf: &mut Vec<u8>,
    batch: &RecordBatch,
    props: WriterProperties,
) -> parquet::errors::Result<()> {
    use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk};
    let schema = batch.schema();
    let writer = ArrowWriter::try_new(buf, Arc::clone(&schema), Some(props))?;
    let (mut file, factory) = writer.into_serialized_writer()?;
    let mut start = 0;
    let mut index = 0;
    while start < batch.num_rows() {
        let slice = batch.slice(start, ROW_GROUP_ROWS.min(batch.num_rows() - start));
        start += slice.num_rows();
        let writers = factory.create_column_writers(index)?;
        index += 1;
        let mut leaves = Vec::with_capacity(writers.len());
        for (field, column) in schema.fields().iter().zip(slice.columns()) {
            leaves.extend(compute_leaves(field, column)?);
        }
        let jobs = std::sync::Mutex::new(
            writers
                .into_iter()
                .zip(leaves)
                .enumerate()
                .collect::<Vec<_>>(),
        );
        let done: std::sync::Mutex<Vec<(usize, ArrowColumnChunk)>> =
            std::sync::Mutex::new(Vec::new());
        let work = || -> parquet::errors::Result<()> {
            loop {
                let job = jobs
                    .lock()
                    .map_err(|_| parquet::errors::ParquetError::General("poisoned".into()))?
                    .pop();
                let Some((i, (mut writer, leaf))) = job else {
                    return Ok(());
                };
                writer.write(&leaf)?;
                let chunk = writer.close()?;
                done.lock()
                    .map_err(|_| parquet::errors::ParquetError::General("poisoned".into()))?
                    .push((i, chunk));
            }
        };
        std::thread::scope(|scope| -> parquet::errors::Result<()> {
            let helper = scope.spawn(work);
            work()?;
            helper.join().map_err(|_| {
                parquet::errors::ParquetError::General("encoder thread panicked".into())
            })?
        })?;
        let mut chunks = done
            .into_inner()
            .map_err(|_| parquet::errors::ParquetError::General("poisoned".into()))?;
        chunks.sort_by_key(|(i, _)| *i);
        let mut row_group = file.next_row_group()?;
        for (_, chunk) in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
    }
    let exact = exact_bound_columns(batch);
    if !exact.is_empty() {
        let names = serde_json::to_string(&exact)
            .map_err(|e| parquet::errors::ParquetError::General(e.to_string()))?;
        file.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
            EXACT_BOUNDS_KEY.to_string(),
            names,
        ));
    }
    file.close()?;
    Ok(())
}

/// Key of the footer metadata naming the columns whose page statistics are values their pages
/// hold (a page's min and max are rows of it) and whose floats hold no NaN, which Parquet leaves
/// out of statistics. Readers of other writers' files cannot assume either; a top-N read uses
/// such bounds to skip pages ([`crate::table::read`]). Other Parquet readers ignore it.
pub(crate) const EXACT_BOUNDS_KEY: &str = "tidelake.exact-bounds";

/// The top-level columns of `batch` whose Parquet statistics are exact, attained bounds: integers,
/// dates, times, timestamps and decimals always, floats when no value (null slots included) is
/// NaN. Pure.
pub(crate) fn exact_bound_columns(batch: &RecordBatch) -> Vec<&str> {
    use arrow::datatypes::{DataType as A, Float32Type, Float64Type};
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(f, col)| match f.data_type() {
            A::Int8 | A::Int16 | A::Int32 | A::Int64 => true,
            A::Date32 | A::Time32(_) | A::Time64(_) | A::Timestamp(_, _) => true,
            A::Decimal128(_, _) => true,
            A::Float32 => !col
                .as_primitive::<Float32Type>()
                .values()
                .iter()
                .any(|v| v.is_nan()),
            A::Float64 => !col
                .as_primitive::<Float64Type>()
                .values()
                .iter()
                .any(|v| v.is_nan()),
            _ => false,
        })
        .map(|(f, _)| f.name().as_str())
        .collect()
}

/// Whether dictionary encoding can pay off for a column: decided on a sample, since interning
/// mostly-unique values (ids, free text) costs more than it saves and Parquet only falls back after
/// the dictionary page is full.
fn dictionary_worthwhile(col: &ArrayRef) -> bool {
    const SAMPLE: usize = 2048;
    if col.len() < 64 {
        return true;
    }
    let sample = col.slice(0, col.len().min(SAMPLE));
    let Ok(conv) = RowConverter::new(vec![SortField::new(sample.data_type().clone())]) else {
        return true;
    };
    let Ok(rows) = conv.convert_columns(&[sample]) else {
        return true;
    };
    let distinct: std::collections::HashSet<_> = rows.iter().collect();
    distinct.len() * 2 <= rows.num_rows()
}

/// How a column written without a dictionary is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Plain values in the table's codec (the sample is judged with zstd, the default).
    Compressed,
    /// Plain values as they are: values that barely compress (random doubles save about 6%)
    /// cost more than twice the time to write and to read compressed.
    Uncompressed,
    /// INT and BIGINT values as Parquet's DELTA_BINARY_PACKED, not compressed further: sorted
    /// keys and sequence numbers take a few bits a value, values of a narrow range the bits of
    /// the range, and the pages decode several times faster than zstd's.
    Delta,
}

/// Values sampled for a column's layout.
const SAMPLE: usize = 8 * 1024;

/// The layout of a column written without a dictionary, decided on a sample of its values: a
/// fixed-width column is compressed only if zstd saves 10% of the sample, and an INT or BIGINT
/// column is delta-packed when that saves 10% too and is at most a quarter larger than zstd's
/// output. Columns of
/// other types, and short ones, are compressed.
fn plain_layout(col: &ArrayRef) -> Layout {
    let Some(width) = col.data_type().primitive_width() else {
        return Layout::Compressed;
    };
    if col.len() < 1024 {
        return Layout::Compressed;
    }
    let sample = col.slice(0, col.len().min(SAMPLE));
    let data = sample.to_data();
    let Some(values) = data.buffers().first() else {
        return Layout::Compressed;
    };
    let start = data.offset() * width;
    let Some(bytes) = values.as_slice().get(start..start + sample.len() * width) else {
        return Layout::Compressed;
    };
    let zstd_len = zstd::bulk::compress(bytes, 1).map_or(0, |c| c.len());
    let delta_len = match sample.data_type() {
        DataType::Int64 => Some(delta_bytes(sample.as_primitive::<Int64Type>().values())),
        DataType::Int32 => Some(delta_bytes(
            &sample
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|v| *v as i64)
                .collect::<Vec<_>>(),
        )),
        _ => None,
    };
    match delta_len {
        Some(d) if d * 10 < bytes.len() * 9 && (d * 4 <= zstd_len * 5 || zstd_len == 0) => {
            Layout::Delta
        }
        _ if zstd_len == 0 || zstd_len * 10 < bytes.len() * 9 => Layout::Compressed,
        _ => Layout::Uncompressed,
    }
}

/// About how many bytes DELTA_BINARY_PACKED takes for `values`: each block of 128 deltas is
/// packed at the width of its deltas' spread (an upper bound: a block's four miniblocks may each
/// be narrower). Pure.
fn delta_bytes(values: &[i64]) -> usize {
    let deltas: Vec<i128> = values
        .windows(2)
        .map(|w| w[1] as i128 - w[0] as i128)
        .collect();
    deltas
        .chunks(128)
        .map(|block| {
            let lo = block.iter().min().copied().unwrap_or(0);
            let hi = block.iter().max().copied().unwrap_or(0);
            let bits = 128 - ((hi - lo) as u128).leading_zeros() as usize;
            // The block's header: its smallest delta and four miniblock widths.
            8 + (block.len() * bits).div_ceil(8)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::super::decode;
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use bytes::Bytes;

    /// Doubles in [0, 1) from a fixed xorshift sequence: they barely compress.
    fn noise(n: usize) -> Vec<f64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect()
    }

    #[test]
    fn each_column_gets_the_layout_that_pays() {
        let random: ArrayRef = Arc::new(Float64Array::from(noise(20_000)));
        assert_eq!(plain_layout(&random), Layout::Uncompressed);
        // A slice is sampled from its own first value.
        assert_eq!(
            plain_layout(&random.slice(5_000, 10_000)),
            Layout::Uncompressed
        );
        // Sorted ids, and random ones of a narrow range: delta-packed.
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..20_000));
        assert_eq!(plain_layout(&ids), Layout::Delta);
        let narrow: ArrayRef = Arc::new(arrow::array::Int32Array::from_iter_values(
            noise(20_000).iter().map(|v| (v * 1e6) as i32),
        ));
        assert_eq!(plain_layout(&narrow), Layout::Delta);
        // Random over all of BIGINT: nothing pays.
        let wide: ArrayRef = Arc::new(Int64Array::from_iter_values(
            noise(20_000)
                .iter()
                .map(|v| (v.to_bits() as i64).wrapping_mul(0x9e37_79b9)),
        ));
        assert_eq!(plain_layout(&wide), Layout::Uncompressed);
        // Few distinct long values repeat: zstd beats delta.
        let repeating: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..20_000).map(|i| [i64::MIN, 7, i64::MAX][i % 3]),
        ));
        assert_eq!(plain_layout(&repeating), Layout::Compressed);
        let strings: ArrayRef = Arc::new(StringArray::from_iter_values(
            noise(20_000).iter().map(|v| v.to_string()),
        ));
        assert_eq!(plain_layout(&strings), Layout::Compressed);
        assert_eq!(plain_layout(&random.slice(0, 100)), Layout::Compressed);
    }

    #[test]
    fn delta_bytes_are_the_bits_of_each_blocks_spread() {
        // Steps of one: no spread, headers only.
        let sorted: Vec<i64> = (0..1_025).collect();
        assert_eq!(delta_bytes(&sorted), 8 * 8);
        // Deltas alternating 0 and 3: two bits each.
        let steps: Vec<i64> = (0..129).map(|i| (i / 2) * 3).collect();
        assert_eq!(delta_bytes(&steps), 8 + 128 * 2 / 8);
        // The extremes do not overflow: a spread of 2^64 - 1 takes 64 bits.
        assert_eq!(
            delta_bytes(&[i64::MIN, i64::MAX, i64::MIN]),
            8 + (2 * 65usize).div_ceil(8)
        );
        assert_eq!(delta_bytes(&[]), 0);
        assert_eq!(delta_bytes(&[5]), 0);
    }

    #[test]
    fn written_files_say_which_columns_have_exact_bounds_and_read_back() {
        let mut values = noise(3_000);
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new("v", arrow::datatypes::DataType::Float64, true),
            arrow::datatypes::Field::new("s", arrow::datatypes::DataType::Utf8, true),
        ]));
        let batch = |values: &[f64]| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from_iter_values(0..values.len() as i64)),
                    Arc::new(Float64Array::from(values.to_vec())),
                    Arc::new(StringArray::from_iter_values(
                        values.iter().map(|v| v.to_string()),
                    )),
                ],
            )
            .unwrap()
        };
        let clean = batch(&values);
        assert_eq!(exact_bound_columns(&clean), vec!["id", "v"]);
        let bytes =
            Bytes::from(encode_parquet(&clean, "t.parquet", FileCompression::Zstd(1)).unwrap());
        // The noise is stored uncompressed, the rest with zstd.
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes)
            .unwrap();
        let codecs: Vec<Compression> = md
            .row_group(0)
            .columns()
            .iter()
            .map(|c| c.compression())
            .collect();
        let zstd = Compression::ZSTD(ZstdLevel::try_new(1).unwrap());
        // Ids delta-packed, not compressed; the noise plain and not compressed; strings zstd.
        assert_eq!(
            codecs,
            vec![Compression::UNCOMPRESSED, Compression::UNCOMPRESSED, zstd]
        );
        let encodings: Vec<Vec<Encoding>> = md
            .row_group(0)
            .columns()
            .iter()
            .map(|c| c.encodings().collect())
            .collect();
        assert!(
            encodings[0].contains(&Encoding::DELTA_BINARY_PACKED),
            "{encodings:?}"
        );
        assert!(
            !encodings[1].contains(&Encoding::DELTA_BINARY_PACKED),
            "{encodings:?}"
        );
        assert_eq!(decode("t.parquet", bytes, &schema).unwrap(), vec![clean]);
        values[1_234] = f64::NAN;
        assert_eq!(exact_bound_columns(&batch(&values)), vec!["id"]);
    }
}
