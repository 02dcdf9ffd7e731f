//! The deletion vectors of one bucket while compactions change them (Paimon's
//! `BucketedDvMaintainer`): which rows of which data files above level 0 are deleted.
//!
//! ```text
//!  committed DELETION_VECTORS file of the bucket ──load──► BucketVectors { base, vectors }
//!        compaction: inputs rewritten (their vectors go), old copies of keys it rewrote marked
//!  ──after(inputs, marks)──► BucketVectors { modified } ──encode──► one new index file per bucket
//! ```
//!
//! A commit that carries a new file names the `base` it was derived from; the commit refuses it
//! when the bucket's file changed meanwhile, or when a file it marks is no longer live
//! (the table's commit, `decide::check_vectors`), so marks are never lost and never point at a rewritten file.
//! Everything here is pure but [`Table::bucket_vectors`], which loads a bucket's vectors.

use std::collections::{BTreeMap, HashSet};

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::Int64Type;
use arrow::row::{RowConverter, Rows};
use roaring::RoaringBitmap;
use snafu::ResultExt;

use crate::error::{ArrowSnafu, InternalSnafu, Malformed, Result};

use crate::spec::deletion_vector::{write_32, write_64, DeletionVector};
use crate::spec::index_manifest::{IndexFileMeta, IndexManifestEntry, DELETION_VECTORS_INDEX};
use crate::spec::DataFileMeta;

/// Positions of deleted rows, by data file name (Paimon's 32-bit vectors).
pub(crate) type Marks = BTreeMap<String, RoaringBitmap>;

/// The deletion vectors of one (partition, bucket).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BucketVectors {
    /// The bucket's `DELETION_VECTORS` file in the snapshot these were loaded from (`None`: it
    /// had none).
    pub(crate) base: Option<String>,
    pub(crate) vectors: Marks,
    /// Whether the vectors differ from `base` (a new index file is due at the next commit).
    pub(crate) modified: bool,
}

/// The bucket's deletion-vector file among a snapshot's index `entries`, if any.
pub(crate) fn bucket_file<'a>(
    entries: &'a [IndexManifestEntry],
    partition: &[u8],
    bucket: i32,
) -> Option<&'a IndexManifestEntry> {
    entries.iter().find(|e| {
        e.partition == partition
            && e.bucket == bucket
            && e.file.index_type == DELETION_VECTORS_INDEX
    })
}

impl BucketVectors {
    /// Vectors loaded from the bucket's file `base`, keeping only those of `live` data files (an
    /// overwrite may have removed files whose vectors are still listed).
    pub(crate) fn loaded(
        base: Option<String>,
        vectors: impl IntoIterator<Item = (String, DeletionVector)>,
        live: &HashSet<&str>,
    ) -> Result<Self, Malformed> {
        let mut out = Marks::new();
        let mut dropped = false;
        for (file, dv) in vectors {
            if !live.contains(file.as_str()) {
                dropped = true;
                continue;
            }
            let bits = match dv {
                DeletionVector::Bits32(b) => b,
                wide => wide.positions_32(&file)?,
            };
            if !bits.is_empty() {
                out.insert(file, bits);
            }
        }
        Ok(Self {
            base,
            vectors: out,
            modified: dropped,
        })
    }

    /// The deleted positions of `file`, if any.
    pub(crate) fn of(&self, file: &str) -> Option<&RoaringBitmap> {
        self.vectors.get(file)
    }

    /// The vectors after a compaction that rewrote `inputs` (their deleted rows were left out of
    /// the outputs, so their vectors go) and marked `marks` in files it did not rewrite.
    pub(crate) fn after(&self, inputs: &[DataFileMeta], marks: &Marks) -> Self {
        let mut next = self.clone();
        for f in inputs {
            next.modified |= next.vectors.remove(&f.file_name).is_some();
        }
        for (file, positions) in marks {
            if positions.is_empty() {
                continue;
            }
            let bits = next.vectors.entry(file.clone()).or_default();
            let before = bits.len();
            *bits |= positions;
            next.modified |= bits.len() != before;
        }
        next
    }

    /// The index file of these vectors (`bits64`: Paimon's 64-bit layout): its bytes and its
    /// description under `file_name`, in data-file name order. An empty set still makes a (one-byte) file, as Paimon writes one to
    /// replace a bucket's last vectors.
    pub(crate) fn encode(&self, file_name: String, bits64: bool) -> (Vec<u8>, IndexFileMeta) {
        let list: Vec<(String, RoaringBitmap)> = self
            .vectors
            .iter()
            .map(|(f, b)| (f.clone(), b.clone()))
            .collect();
        let (bytes, ranges) = if bits64 {
            write_64(&list)
        } else {
            write_32(&list)
        };
        let meta = IndexFileMeta {
            index_type: DELETION_VECTORS_INDEX.into(),
            file_name,
            file_size: bytes.len() as i64,
            row_count: ranges.len() as i64,
            dv_ranges: Some(ranges),
            external_path: None,
            global_index: None,
        };
        (bytes, meta)
    }
}

/// Finds, in each chunk of a deletion-vector compaction, the rows of lookup runs whose keys the
/// inputs rewrite: those are kept (without their position column) and their positions marked;
/// the other lookup rows stay where they are and are dropped from the chunk.
pub(crate) struct OldCopies {
    keys: RowConverter,
    key_count: usize,
    input_runs: usize,
}

impl OldCopies {
    pub(crate) fn new(
        schema: &arrow::datatypes::SchemaRef,
        key_count: usize,
        input_runs: usize,
    ) -> Result<Self> {
        let keys = crate::lsm::merge::key_converter(
            schema.fields()[..key_count].iter().map(|f| f.data_type()),
        )?;
        Ok(Self {
            keys,
            key_count,
            input_runs,
        })
    }

    pub(crate) fn take(
        &mut self,
        chunk: &[(usize, RecordBatch)],
        lookup_names: &[String],
        marks: &mut Marks,
    ) -> Result<Vec<(usize, RecordBatch)>> {
        let encode =
            |b: &RecordBatch| crate::lsm::merge::encode_keys(&self.keys, b, self.key_count);
        let rewritten = chunk
            .iter()
            .filter(|(run, _)| *run < self.input_runs)
            .map(|(_, b)| encode(b))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(chunk.len());
        for (run, b) in chunk {
            if *run < self.input_runs {
                out.push((*run, b.clone()));
                continue;
            }
            let keys = encode(b)?;
            let keep = BooleanArray::from(found_in(&keys, &rewritten));
            let last = b.num_columns() - 1;
            let positions = b.column(last).as_primitive::<Int64Type>();
            for (i, k) in keep.iter().enumerate() {
                if k != Some(true) {
                    continue;
                }
                let p = positions.value(i);
                let file = lookup_names.get((p >> 32) as usize).ok_or_else(|| {
                    InternalSnafu {
                        message: format!("a lookup row names file ordinal {}", p >> 32),
                    }
                    .build()
                })?;
                marks
                    .entry(file.clone())
                    .or_default()
                    .insert((p & 0xffff_ffff) as u32);
            }
            if keep.true_count() == 0 {
                continue;
            }
            let stripped = b
                .project(&(0..last).collect::<Vec<_>>())
                .context(ArrowSnafu {
                    context: "dropping the position column",
                })?;
            let kept = filter_record_batch(&stripped, &keep).context(ArrowSnafu {
                context: "keeping the old copies of rewritten keys",
            })?;
            out.push((*run, kept));
        }
        Ok(out)
    }
}

/// Which of `keys` are among the keys of `sets`. A chunk's slices are each sorted with every key
/// once, so each set is walked beside the keys; a slice out of order is looked up by hash. Pure.
fn found_in(keys: &Rows, sets: &[Rows]) -> Vec<bool> {
    let sorted = |rows: &Rows| (1..rows.num_rows()).all(|i| rows.row(i - 1) < rows.row(i));
    let mut found = vec![false; keys.num_rows()];
    if !sorted(keys) || !sets.iter().all(sorted) {
        let all: HashSet<&[u8]> = sets
            .iter()
            .flat_map(|s| s.iter().map(|r| r.data()))
            .collect();
        for (f, k) in found.iter_mut().zip(keys.iter()) {
            *f = all.contains(k.data());
        }
        return found;
    }
    for set in sets {
        let (mut i, mut j) = (0, 0);
        while i < keys.num_rows() && j < set.num_rows() {
            match keys.row(i).cmp(&set.row(j)) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    found[i] = true;
                    i += 1;
                    j += 1;
                }
            }
        }
    }
    found
}

impl crate::table::Table {
    /// The deletion vectors of one bucket as of the snapshot whose index `entries` are given,
    /// restricted to its `live` data files.
    pub(crate) async fn bucket_vectors(
        &self,
        snapshot_id: i64,
        entries: &[IndexManifestEntry],
        partition: &[u8],
        bucket: i32,
        live: &[DataFileMeta],
    ) -> Result<BucketVectors> {
        let base = bucket_file(entries, partition, bucket).map(|e| e.file.file_name.clone());
        let vectors = self
            .manifest_manager()
            .deletion_vectors(snapshot_id, entries, partition, bucket, None)
            .await?;
        let live: HashSet<&str> = live.iter().map(|f| f.file_name.as_str()).collect();
        BucketVectors::loaded(base, vectors, &live)
            .map_err(|e| e.at(format!("{} (bucket {bucket})", self.identifier())))
    }
}

impl crate::table::Table {
    /// The change a compaction's commit message carries: `vectors` written as the bucket's new
    /// deletion-vector file when they changed (durable, not committed), and their base.
    pub(crate) async fn write_vectors(
        &self,
        namer: &crate::manifest::FileNamer,
        vectors: &BucketVectors,
    ) -> Result<VectorsChange> {
        let file = if vectors.modified {
            let bits64 = crate::spec::CoreOptions::new(&self.schema().options)
                .flag(crate::spec::options::DV_BITMAP64);
            let (bytes, file) = vectors.encode(namer.next("index-", ""), bits64);
            self.manifest_manager()
                .write_index_file(&file, bytes)
                .await?;
            Some(file)
        } else {
            None
        };
        Ok(VectorsChange {
            base: vectors.base.clone(),
            file,
        })
    }
}

/// A new deletion-vector file of one bucket, and the file it replaces (what the commit checks).
/// A compaction whose vectors did not change still names its base (`file` none): what it read
/// must still be the bucket's vectors when it commits, or rows deleted meanwhile would return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorsChange {
    pub base: Option<String>,
    pub file: Option<IndexFileMeta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(p: &[u32]) -> RoaringBitmap {
        p.iter().copied().collect()
    }

    #[test]
    fn keys_are_found_in_sorted_sets_by_walking_and_in_others_by_hash() {
        use arrow::array::{ArrayRef, Int64Array};
        let conv = RowConverter::new(vec![arrow::row::SortField::new(
            arrow::datatypes::DataType::Int64,
        )])
        .unwrap();
        let rows = |v: &[i64]| {
            let col: ArrayRef = std::sync::Arc::new(Int64Array::from(v.to_vec()));
            conv.convert_columns(&[col]).unwrap()
        };
        let keys = rows(&[-5, 1, 2, 7, 9, 20]);
        let sets = [rows(&[-5, 3, 7]), rows(&[0, 2, 7, 21])];
        let want = vec![true, false, true, true, false, false];
        assert_eq!(found_in(&keys, &sets), want);
        // Out of order (keys or a set): the same answer.
        assert_eq!(found_in(&keys, &[rows(&[7, -5, 3]), rows(&[2])]), want);
        let shuffled = rows(&[9, 1, -5, 20, 7, 2]);
        assert_eq!(
            found_in(&shuffled, &sets),
            vec![false, false, true, false, true, true]
        );
        assert_eq!(found_in(&keys, &[]), vec![false; 6]);
    }

    #[test]
    fn rewritten_inputs_lose_their_vectors_and_marks_join() {
        let live: HashSet<&str> = ["a", "b"].into_iter().collect();
        let v = BucketVectors::loaded(
            Some("index-1".into()),
            [
                ("a".to_string(), DeletionVector::Bits32(bits(&[1, 2]))),
                ("gone".to_string(), DeletionVector::Bits32(bits(&[0]))),
            ],
            &live,
        )
        .unwrap();
        // A vector of a file no longer live is dropped, which is a change to write.
        assert!(v.modified);
        assert_eq!(v.vectors.keys().collect::<Vec<_>>(), ["a"]);
        let clean = BucketVectors {
            modified: false,
            ..v.clone()
        };
        // Nothing rewritten and nothing marked: unchanged.
        assert!(!clean.after(&[], &Marks::new()).modified);
        // A mark already present changes nothing either.
        let same: Marks = [("a".to_string(), bits(&[2]))].into();
        assert!(!clean.after(&[], &same).modified);
        let marks: Marks = [("b".to_string(), bits(&[7])), ("a".to_string(), bits(&[3]))].into();
        let next = clean.after(&[], &marks);
        assert!(next.modified);
        assert_eq!(next.of("a"), Some(&bits(&[1, 2, 3])));
        assert_eq!(next.of("b"), Some(&bits(&[7])));
        let input = DataFileMeta::for_test("a", 3, 0, 0);
        let next = next.after(std::slice::from_ref(&input), &Marks::new());
        assert_eq!(next.of("a"), None);
        assert_eq!(next.base.as_deref(), Some("index-1"));
    }

    #[test]
    fn encoded_files_read_back_and_an_empty_set_is_one_byte() {
        let v = BucketVectors {
            base: None,
            vectors: [
                ("f2".to_string(), bits(&[5])),
                ("f1".to_string(), bits(&[0, 9])),
            ]
            .into(),
            modified: true,
        };
        let (bytes, meta) = v.encode("index-x-0".into(), false);
        assert_eq!(meta.row_count, 2);
        assert_eq!(meta.file_size, bytes.len() as i64);
        let ranges = meta.dv_ranges.unwrap();
        assert_eq!(ranges[0].data_file, "f1");
        let dv = crate::spec::deletion_vector::read(&bytes, &ranges[0]).unwrap();
        assert!(dv.is_deleted(9) && !dv.is_deleted(5));
        let (bytes, meta) = BucketVectors::default().encode("index-x-1".into(), false);
        assert_eq!(bytes, [1u8]);
        assert_eq!(meta.row_count, 0);
    }

    #[test]
    fn sixty_four_bit_vectors_convert_while_they_fit() {
        let live: HashSet<&str> = ["a"].into_iter().collect();
        let mut t = roaring::RoaringTreemap::new();
        t.insert(4);
        let v = BucketVectors::loaded(
            None,
            [("a".to_string(), DeletionVector::Bits64(t.clone()))],
            &live,
        )
        .unwrap();
        assert_eq!(v.of("a"), Some(&bits(&[4])));
        t.insert(1 << 40);
        let e = BucketVectors::loaded(None, [("a".to_string(), DeletionVector::Bits64(t))], &live)
            .unwrap_err();
        assert!(e.0.contains("beyond 32 bits"), "{e}");
    }
}
