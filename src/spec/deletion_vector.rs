//! Deletion vectors: the positions of deleted rows of one data file, as Paimon keeps them in its
//! `DELETION_VECTORS` index files (`DeletionVectorsIndexFile`, `BitmapDeletionVector`,
//! `Bitmap64DeletionVector`). Pure: bytes in, bitmaps out, and back.
//!
//! ```text
//! index file:  version byte 1 | one record per data file, where its DeletionVectorMeta says
//! 32-bit:      i32 BE size (= 4 + bitmap) | i32 BE magic 1581511376 | RoaringBitmap (portable) | i32 BE CRC32
//! 64-bit:      i32 BE size (= 4 + bitmap) | i32 LE magic 1681511377 | 64-bit portable Roaring | i32 BE CRC32
//! ```
//!
//! The meta's length is `size` for a 32-bit vector and the whole record (`size + 8`) for a 64-bit
//! one; both kinds may appear in one table. The CRC is not checked on read, as in Paimon.

use std::io::Cursor;

use roaring::{RoaringBitmap, RoaringTreemap};

use super::index_manifest::DeletionVectorMeta;
use crate::error::{malformed, Malformed};

/// The version byte every deletion-vector index file starts with.
pub const DV_FILE_VERSION: u8 = 1;
const MAGIC_32: i32 = 1_581_511_376;
const MAGIC_64: i32 = 1_681_511_377;

/// The deleted row positions of one data file.
#[derive(Debug, Clone, PartialEq)]
pub enum DeletionVector {
    /// Paimon's default (`BitmapDeletionVector`): positions below 2^31.
    Bits32(RoaringBitmap),
    /// `deletion-vectors.bitmap64` (`Bitmap64DeletionVector`, Iceberg's layout).
    Bits64(RoaringTreemap),
}

impl DeletionVector {
    pub fn is_deleted(&self, position: u64) -> bool {
        match self {
            DeletionVector::Bits32(b) => u32::try_from(position).is_ok_and(|p| b.contains(p)),
            DeletionVector::Bits64(b) => b.contains(position),
        }
    }

    /// The deleted positions as a 32-bit bitmap (the error names `file` when a 64-bit vector
    /// holds a position beyond 32 bits).
    pub fn positions_32(&self, file: &str) -> Result<RoaringBitmap, Malformed> {
        match self {
            DeletionVector::Bits32(b) => Ok(b.clone()),
            DeletionVector::Bits64(b) => b
                .iter()
                .map(|p| {
                    u32::try_from(p).map_err(|_| {
                        Malformed(format!(
                            "deletion vector of {file}: position {p} is beyond 32 bits"
                        ))
                    })
                })
                .collect(),
        }
    }

    /// How many rows are deleted.
    pub fn cardinality(&self) -> u64 {
        match self {
            DeletionVector::Bits32(b) => b.len(),
            DeletionVector::Bits64(b) => b.len(),
        }
    }
}

/// Reads the deletion vector at `meta` of an index file's bytes; the error says what is wrong
/// (the caller names the file).
pub fn read(file: &[u8], meta: &DeletionVectorMeta) -> Result<DeletionVector, Malformed> {
    match file.first() {
        Some(&DV_FILE_VERSION) => {}
        Some(v) => return malformed!("version {v} is not deletion-vector file version 1"),
        None => return malformed!("the file is empty"),
    }
    let at = |what: &str| {
        Malformed(format!(
            "deletion vector of {} at offset {}: {what}",
            meta.data_file, meta.offset
        ))
    };
    let offset = usize::try_from(meta.offset).map_err(|_| at("negative offset"))?;
    let word = |pos: usize| -> Result<[u8; 4], Malformed> {
        file.get(pos..pos + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| at("past the end of the file"))
    };
    let size = i32::from_be_bytes(word(offset)?);
    let magic = word(offset + 4)?;
    let bitmap = |size: i32| -> Result<&[u8], Malformed> {
        let len = size
            .checked_sub(4)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| at("size below 4"))?;
        file.get(offset + 8..offset + 8 + len)
            .ok_or_else(|| at("its bitmap runs past the end of the file"))
    };
    // The listed length is the size for 32-bit vectors, the whole record for 64-bit ones.
    let kind = if i32::from_be_bytes(magic) == MAGIC_32 {
        Some((32, i64::from(size)))
    } else if i32::from_le_bytes(magic) == MAGIC_64 {
        Some((64, i64::from(size) + 8))
    } else {
        None
    };
    if let Some((bits, listed)) = kind {
        if listed != i64::from(meta.length) {
            return Err(at(&format!(
                "size {size} does not fit the listed length {} of a {bits}-bit vector",
                meta.length
            )));
        }
        let bytes = Cursor::new(bitmap(size)?);
        let read = if bits == 32 {
            RoaringBitmap::deserialize_from(bytes).map(DeletionVector::Bits32)
        } else {
            RoaringTreemap::deserialize_from(bytes).map(DeletionVector::Bits64)
        };
        read.map_err(|e| at(&format!("bad {bits}-bit bitmap: {e}")))
    } else {
        Err(at(&format!(
            "invalid magic number {}, expected {MAGIC_32} (32-bit) or {MAGIC_64} (64-bit)",
            i32::from_be_bytes(magic)
        )))
    }
}

/// Writes an index file of 32-bit deletion vectors (Paimon's default kind), one per data file in
/// the given order; returns the bytes and where each vector sits.
pub fn write_32(vectors: &[(String, RoaringBitmap)]) -> (Vec<u8>, Vec<DeletionVectorMeta>) {
    write(vectors, false)
}

/// Writes an index file of 64-bit vectors (`deletion-vectors.bitmap64`, Iceberg's
/// `deletion-vector-v1` layout): the magic little-endian, a portable 64-bit Roaring bitmap, and a
/// listed length that covers the whole record.
pub fn write_64(vectors: &[(String, RoaringBitmap)]) -> (Vec<u8>, Vec<DeletionVectorMeta>) {
    write(vectors, true)
}

fn write(vectors: &[(String, RoaringBitmap)], bits64: bool) -> (Vec<u8>, Vec<DeletionVectorMeta>) {
    let mut out = vec![DV_FILE_VERSION];
    let mut metas = Vec::with_capacity(vectors.len());
    for (data_file, bitmap) in vectors {
        let mut body = Vec::new();
        if bits64 {
            body.extend_from_slice(&MAGIC_64.to_le_bytes());
            let mut wide = RoaringTreemap::new();
            wide.extend(bitmap.iter().map(u64::from));
            wide.serialize_into(&mut body)
                .expect("writing into a Vec cannot fail");
        } else {
            body.extend_from_slice(&MAGIC_32.to_be_bytes());
            bitmap
                .serialize_into(&mut body)
                .expect("writing into a Vec cannot fail");
        }
        let size = body.len() as i32;
        metas.push(DeletionVectorMeta {
            data_file: data_file.clone(),
            offset: out.len() as i32,
            length: if bits64 { size + 8 } else { size },
            cardinality: Some(bitmap.len() as i64),
        });
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    }
    (out, metas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn meta(offset: i32, length: i32) -> DeletionVectorMeta {
        DeletionVectorMeta {
            data_file: "f".into(),
            offset,
            length,
            cardinality: None,
        }
    }

    fn positions(dv: &DeletionVector) -> Vec<u64> {
        (0..8).filter(|&p| dv.is_deleted(p)).collect()
    }

    /// Paimon's compatibility files `dvindex-32` and `dvindex-64` (two vectors: {2, 3} and {1}).
    #[test]
    fn reads_paimons_golden_32_and_64_bit_files() {
        let f32 = hex(
            "01 00000018 5E43F2D0 3A300000 01000000 0000 0100 10000000 0200 0300 C898F63D
                          00000016 5E43F2D0 3A300000 01000000 0000 0000 10000000 0100 FA2B5192",
        );
        assert_eq!(positions(&read(&f32, &meta(1, 24)).unwrap()), [2, 3]);
        assert_eq!(positions(&read(&f32, &meta(33, 22)).unwrap()), [1]);
        let f64 = hex("01 00000024 D1D33964 0100000000000000 00000000 3A300000 01000000 0000 0100 10000000 0200 0300 7A813847
                          00000022 D1D33964 0100000000000000 00000000 3A300000 01000000 0000 0000 10000000 0100 EEBD85F4");
        let first = read(&f64, &meta(1, 44)).unwrap();
        assert!(matches!(first, DeletionVector::Bits64(_)));
        assert_eq!(positions(&first), [2, 3]);
        assert_eq!(positions(&read(&f64, &meta(45, 42)).unwrap()), [1]);
        // Our writer gives the same bytes for the same vectors.
        let (bytes, metas) = write_32(&[
            ("a".into(), [2u32, 3].into_iter().collect()),
            ("b".into(), [1u32].into_iter().collect()),
        ]);
        assert_eq!(bytes, f32);
        assert_eq!((metas[1].offset, metas[1].length), (33, 22));
        let (bytes, metas) = write_64(&[
            ("a".into(), [2u32, 3].into_iter().collect()),
            ("b".into(), [1u32].into_iter().collect()),
        ]);
        assert_eq!(bytes, f64);
        assert_eq!((metas[1].offset, metas[1].length), (45, 42));
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let (good, _) = write_32(&[("a".into(), (0u32..100).collect())]);
        for bad in [vec![], vec![2], good[..good.len() - 10].to_vec(), {
            let mut b = good.clone();
            b[5] ^= 0xff; // the magic
            b
        }] {
            assert!(read(&bad, &meta(1, good.len() as i32 - 9)).is_err());
        }
        assert!(
            read(&good, &meta(1, 5)).is_err(),
            "a length that is not the size"
        );
        assert!(read(&good, &meta(-1, 5)).is_err());
        assert!(read(&good, &meta(i32::MAX, 5)).is_err());
    }
}
