//! Routing: which (partition, bucket) each row of a conformed batch belongs to. The partition is
//! the row's partition columns as a serialized BinaryRow; the bucket is Paimon's hash of the
//! bucket-key columns modulo the bucket count (fixed-bucket tables), 0 (dynamic-bucket tables,
//! whose writer then splits each partition by its key index, see `dynamic`), or -2 (postpone
//! tables: their writers stage rows in `bucket-postpone/`). Pure.

use std::collections::HashMap;

use arrow::array::RecordBatch;

use super::BucketId;
use crate::error::Result;
use crate::schema::layout::{write_field, TableLayout};
use crate::spec::binary_row::{self, BinaryRowWriter};
use crate::spec::BucketMode;

/// Row indices grouped by (serialized partition, bucket), each group in input order, the groups
/// ordered by partition bytes then bucket.
pub(super) fn route(
    layout: &TableLayout,
    values: &RecordBatch,
) -> Result<Vec<(BucketId, Vec<u32>)>> {
    let n = values.num_rows();
    let mut w = BinaryRowWriter::default();
    let mut partitions: Vec<Vec<u8>> = Vec::new();
    let mut partition_of_row: Vec<u32> = vec![0; n];
    if layout.partition_indices.is_empty() {
        partitions.push(binary_row::empty_row());
    } else {
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        for (i, slot) in partition_of_row.iter_mut().enumerate() {
            w.reset(layout.partition_indices.len());
            for (pos, (&c, ty)) in layout
                .partition_indices
                .iter()
                .zip(&layout.partition_types)
                .enumerate()
            {
                write_field(&mut w, pos, values.column(c), i, ty)?;
            }
            let bytes = w.serialized();
            let next = seen.len() as u32;
            let id = *seen.entry(bytes.clone()).or_insert_with(|| {
                partitions.push(bytes);
                next
            });
            *slot = id;
        }
    }
    let num_buckets = match layout.bucket_mode {
        BucketMode::Fixed(num) => num as usize,
        _ => 1,
    };
    // Dense [partition][bucket] groups: no hashing per row.
    let mut groups: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); num_buckets]; partitions.len()];
    if num_buckets == 1 && partitions.len() == 1 {
        groups[0][0] = (0..n as u32).collect();
    } else if let BucketMode::Fixed(num) = layout.bucket_mode {
        for (i, (&p, hash)) in partition_of_row
            .iter()
            .zip(key_hashes(layout, values)?)
            .enumerate()
        {
            let bucket = binary_row::bucket_of(hash, num);
            groups[p as usize][bucket as usize].push(i as u32);
        }
    } else {
        for (i, &p) in partition_of_row.iter().enumerate() {
            groups[p as usize][0].push(i as u32);
        }
    }
    let mut out = Vec::new();
    for (p, buckets) in groups.into_iter().enumerate() {
        for (b, rows) in buckets.into_iter().enumerate() {
            if !rows.is_empty() {
                let bucket = match layout.bucket_mode {
                    BucketMode::Postpone => crate::spec::POSTPONE_BUCKET,
                    _ => b as i32,
                };
                out.push((BucketId::new(partitions[p].clone(), bucket), rows));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Paimon's hash of each row's bucket key (the trimmed primary key unless `bucket-key` says
/// otherwise) as a BinaryRow: the fixed-bucket hash before the modulo, and the key of a dynamic
/// bucket's HASH index.
pub(super) fn key_hashes(layout: &TableLayout, values: &RecordBatch) -> Result<Vec<i32>> {
    let types: Vec<_> = layout
        .bucket_key_indices
        .iter()
        .map(|&i| layout.schema.fields[i].data_type.clone())
        .collect();
    let mut w = BinaryRowWriter::default();
    (0..values.num_rows())
        .map(|i| {
            w.reset(types.len());
            for (pos, (&c, ty)) in layout.bucket_key_indices.iter().zip(&types).enumerate() {
                write_field(&mut w, pos, values.column(c), i, ty)?;
            }
            Ok(w.hash_code())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::spec::binary_row::Datum;
    use arrow::array::{ArrayRef, Int64Array, StringArray};

    fn layout(buckets: i32, partitioned: bool) -> TableLayout {
        let partition = if partitioned { r#"["dt"]"# } else { "[]" };
        let keys = if partitioned {
            r#"["id","dt"]"#
        } else {
            r#"["id"]"#
        };
        TableLayout::from_json(&format!(
            r#"{{"version":3,"id":0,"fields":[{{"id":0,"name":"id","type":"BIGINT NOT NULL"}},
            {{"id":1,"name":"dt","type":"STRING NOT NULL"}}],"highestFieldId":1,
            "partitionKeys":{partition},"primaryKeys":{keys},"options":{{"bucket":"{buckets}"}},
            "timeMillis":1}}"#
        ))
    }

    fn rows(layout: &TableLayout, ids: &[i64], dts: &[&str]) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(dts.to_vec())),
        ];
        RecordBatch::try_new(Arc::clone(&layout.arrow_schema), columns).unwrap()
    }

    #[test]
    fn one_bucket_unpartitioned_is_one_group_in_input_order() {
        let l = layout(1, false);
        let groups = route(&l, &rows(&l, &[5, 3, 9], &["a", "b", "c"])).unwrap();
        assert_eq!(
            groups,
            vec![(BucketId::new(binary_row::empty_row(), 0), vec![0, 1, 2])]
        );
    }

    #[test]
    fn every_row_lands_once_by_partition_and_a_key_always_in_the_same_bucket() {
        let l = layout(4, true);
        let ids: Vec<i64> = (0..200).map(|i| i % 50).collect();
        let dts: Vec<&str> = (0..200)
            .map(|i| if i % 3 == 0 { "x" } else { "y" })
            .collect();
        let groups = route(&l, &rows(&l, &ids, &dts)).unwrap();
        let mut seen = vec![0; 200];
        let mut bucket_of_key: HashMap<(i64, &str), i32> = HashMap::new();
        for (BucketId { partition, bucket }, members) in &groups {
            assert!((0..4).contains(bucket));
            assert!(members.windows(2).all(|w| w[0] < w[1]), "input order kept");
            for &r in members {
                let r = r as usize;
                seen[r] += 1;
                assert_eq!(
                    partition,
                    &binary_row::serialize(&[Datum::String(dts[r].into())])
                );
                let b = *bucket_of_key.entry((ids[r], dts[r])).or_insert(*bucket);
                assert_eq!(b, *bucket, "key {} of {} in two buckets", ids[r], dts[r]);
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert!(groups.windows(2).all(|w| w[0].0 < w[1].0), "groups ordered");
        assert!(groups.len() > 2, "rows spread over buckets");
    }
}
