//! BLOB files (`data-<uuid>-<n>.blob`, Paimon 2.0's multimodal tables): the values of one BLOB
//! column for a range of row ids, each a record of its own, then an index of their lengths. Read
//! whole; each record's CRC is checked, so a damaged file is refused naming it.
//!
//! ```text
//!  record  := magic CF 11 4E 58 | payload | length i64 (payload + 16) | crc32 (magic..length)
//!  index   := one length per row, delta then zigzag then LEB128 (-1: NULL, -2: not in this file)
//!  footer  := index length i32 | version u8 = 1          (all integers little-endian)
//! ```
//!
//! A BLOB column of a row-id group may be spread over several such files: the first write's, then
//! partial ones of later updates (rows they do not update marked absent). [`column`] resolves each
//! row to the newest file that holds it, as Java's `BlobFallbackRecordReader` does.

use std::ops::Range;

use arrow::array::LargeBinaryBuilder;

use crate::error::Malformed;

const MAGIC: [u8; 4] = [0xCF, 0x11, 0x4E, 0x58];
/// The length entry of a NULL value.
const NULL_LEN: i64 = -1;
/// The length entry of a row a partial (update) file does not hold: an older file has it.
const PLACEHOLDER_LEN: i64 = -2;

/// What a blob file holds for one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The value: these bytes of the file.
    Value(Range<usize>),
    Null,
    /// Not in this file (a partial update file): an older file of the row's range has it.
    Absent,
}

/// The rows of the blob file `file`, in row order. Malformed: anything that does not add up
/// (footer, index, record bounds, magic, CRC).
pub(crate) fn slots(file: &[u8]) -> Result<Vec<Slot>, Malformed> {
    let bad = |what: String| Malformed(format!("not a readable BLOB file: {what}"));
    if file.len() < 5 {
        return Err(bad(format!("{} bytes, too short for a footer", file.len())));
    }
    let footer = file.len() - 5;
    if file[footer + 4] != 1 {
        return Err(bad(format!("version {}, not 1", file[footer + 4])));
    }
    let index_len = i32::from_le_bytes(file[footer..footer + 4].try_into().unwrap_or([0; 4]));
    let index_len = usize::try_from(index_len)
        .ok()
        .filter(|&n| n <= footer)
        .ok_or_else(|| bad(format!("index length {index_len} outside the file")))?;
    let index_start = footer - index_len;
    let lengths = delta_varints(&file[index_start..footer]).map_err(bad)?;
    let mut offset = 0usize;
    let mut out = Vec::with_capacity(lengths.len());
    for (row, len) in lengths.into_iter().enumerate() {
        match len {
            NULL_LEN => out.push(Slot::Null),
            PLACEHOLDER_LEN => out.push(Slot::Absent),
            len if len >= 16 => {
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|l| offset.checked_add(l))
                    .filter(|&e| e <= index_start)
                    .ok_or_else(|| bad(format!("row {row}'s record runs past the data")))?;
                let record = &file[offset..end];
                if record[..4] != MAGIC {
                    return Err(bad(format!("row {row}'s record has no magic")));
                }
                let stored_len = i64::from_le_bytes(
                    record[record.len() - 12..record.len() - 4]
                        .try_into()
                        .unwrap_or([0; 8]),
                );
                let crc =
                    u32::from_le_bytes(record[record.len() - 4..].try_into().unwrap_or([0; 4]));
                if stored_len != len || crc32fast::hash(&record[..record.len() - 4]) != crc {
                    return Err(bad(format!("row {row}'s record fails its check")));
                }
                out.push(Slot::Value(offset + 4..end - 12));
                offset = end;
            }
            other => return Err(bad(format!("row {row} has the length {other}"))),
        }
    }
    if offset != index_start {
        return Err(bad(format!(
            "the records end at byte {offset}, the index starts at {index_start}"
        )));
    }
    Ok(out)
}

/// One `.blob` file of a row-id group, for one column.
pub(crate) struct BlobSource<'a> {
    /// The file's path (a descriptor's uri).
    pub(crate) path: &'a str,
    pub(crate) bytes: &'a [u8],
    pub(crate) first_row_id: i64,
    pub(crate) max_sequence_number: i64,
}

/// Where a row's value is: the file (position) and the payload's bytes in it; none for NULL.
type Found = Option<(usize, Range<usize>)>;

/// For each row of `rows`, which of `files` (position, payload bytes) holds its value: per row the
/// newest file (by max sequence number) that does not mark it absent; NULL there, or no file
/// holding it, is none. Files of one sequence number must not overlap, and none may reach
/// outside `rows` (pure over the files' slots).
fn resolve(rows: &Range<i64>, files: &[(i64, i64, Vec<Slot>)]) -> Result<Vec<Found>, Malformed> {
    let total = usize::try_from(rows.end - rows.start).unwrap_or(0);
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(files[i].1), files[i].0));
    // Per row: decided (Some(value or NULL)) or not yet (None).
    let mut decided: Vec<Option<Found>> = vec![None; total];
    let mut layer_end: Option<(i64, i64)> = None;
    for &i in &order {
        let (first, seq, slots) = &files[i];
        let start = first
            .checked_sub(rows.start)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o + slots.len() <= total)
            .ok_or_else(|| {
                Malformed(format!(
                    "a BLOB file of rows {first}..{} reaches outside the group's rows {rows:?}",
                    first + slots.len() as i64
                ))
            })?;
        if let Some((s, end)) = layer_end {
            if s == *seq && *first < end {
                return Err(Malformed(format!(
                    "BLOB files of sequence number {seq} overlap at row id {first}"
                )));
            }
        }
        layer_end = Some((*seq, first + slots.len() as i64));
        for (k, slot) in slots.iter().enumerate() {
            let row = &mut decided[start + k];
            if row.is_some() {
                continue;
            }
            match slot {
                Slot::Value(r) => *row = Some(Some((i, r.clone()))),
                Slot::Null => *row = Some(None),
                Slot::Absent => {}
            }
        }
    }
    Ok(decided.into_iter().map(Option::flatten).collect())
}

/// The values of one BLOB column for the rows `rows` of a group, from its `.blob` files: the bytes,
/// or with `descriptors` Paimon's serialized `BlobDescriptor` of each (version 2, the file, the
/// payload's offset and length). Malformed: a file that does not parse, or files that do not fit.
pub(crate) fn column(
    rows: &Range<i64>,
    files: &[BlobSource<'_>],
    descriptors: bool,
) -> Result<arrow::array::LargeBinaryArray, Malformed> {
    let parsed = files
        .iter()
        .map(|f| {
            let slots = slots(f.bytes).map_err(|e| Malformed(format!("{}: {}", f.path, e.0)))?;
            Ok((f.first_row_id, f.max_sequence_number, slots))
        })
        .collect::<Result<Vec<_>, Malformed>>()?;
    let mut out = LargeBinaryBuilder::new();
    for row in resolve(rows, &parsed)? {
        match row {
            None => out.append_null(),
            Some((i, payload)) if descriptors => {
                out.append_value(descriptor(files[i].path, payload.start, payload.len()))
            }
            Some((i, payload)) => out.append_value(&files[i].bytes[payload]),
        }
    }
    Ok(out.finish())
}

/// Paimon's `BlobDescriptor.serialize` (version 2): where a BLOB value's bytes are.
fn descriptor(uri: &str, offset: usize, length: usize) -> Vec<u8> {
    const MAGIC: i64 = 0x424C_4F42_4445_5343; // "BLOBDESC"
    let mut out = Vec::with_capacity(uri.len() + 29);
    out.push(2u8);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&(uri.len() as i32).to_le_bytes());
    out.extend_from_slice(uri.as_bytes());
    out.extend_from_slice(&(offset as i64).to_le_bytes());
    out.extend_from_slice(&(length as i64).to_le_bytes());
    out
}

/// Paimon's `DeltaVarintCompressor.decompress`: LEB128 varints, each zigzag-decoded, each a delta
/// from the one before (pure).
fn delta_varints(bytes: &[u8]) -> Result<Vec<i64>, String> {
    let mut out = Vec::new();
    let mut previous = 0i64;
    let mut at = 0;
    while at < bytes.len() {
        let mut raw = 0u64;
        let mut shift = 0;
        loop {
            let Some(&b) = bytes.get(at) else {
                return Err("the index ends inside a number".into());
            };
            at += 1;
            if shift > 63 {
                return Err("an index number longer than 64 bits".into());
            }
            raw |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let delta = (raw >> 1) as i64 ^ -((raw & 1) as i64);
        previous = previous.wrapping_add(delta);
        out.push(previous);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    /// A blob file of `values` (None: NULL; Some(None): absent), as Paimon's writer lays it out.
    fn blob_file(values: &[Option<Option<&[u8]>>]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut lengths = Vec::new();
        for v in values {
            match v {
                None => lengths.push(NULL_LEN),
                Some(None) => lengths.push(PLACEHOLDER_LEN),
                Some(Some(payload)) => {
                    let start = out.len();
                    out.extend_from_slice(&MAGIC);
                    out.extend_from_slice(payload);
                    let len = payload.len() as i64 + 16;
                    out.extend_from_slice(&len.to_le_bytes());
                    let crc = crc32fast::hash(&out[start..]);
                    out.extend_from_slice(&crc.to_le_bytes());
                    lengths.push(len);
                }
            }
        }
        let mut index = Vec::new();
        let mut previous = 0i64;
        for l in lengths {
            let delta = l - previous;
            previous = l;
            let mut z = ((delta << 1) ^ (delta >> 63)) as u64;
            loop {
                let b = (z & 0x7f) as u8;
                z >>= 7;
                if z == 0 {
                    index.push(b);
                    break;
                }
                index.push(b | 0x80);
            }
        }
        out.extend_from_slice(&index);
        out.extend_from_slice(&(index.len() as i32).to_le_bytes());
        out.push(1);
        out
    }

    #[test]
    fn paimons_bytes_read_as_written() {
        // A one-row file pypaimon 2.1 wrote (b"fourth").
        let file = hex::decode("cf114e58666f757274681600000000000000ce6f6fbf2c0100000001").unwrap();
        let got = slots(&file).unwrap();
        assert_eq!(got.len(), 1);
        let Slot::Value(r) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(&file[r.clone()], b"fourth");
    }

    #[test]
    fn values_nulls_and_absent_rows_round_trip() {
        let values: Vec<Option<Option<&[u8]>>> = vec![
            Some(Some(b"\x01\x02\x03")),
            None,
            Some(None),
            Some(Some(b"")),
            Some(Some(&[7u8; 300])),
        ];
        let file = blob_file(&values);
        let got = slots(&file).unwrap();
        let bytes: Vec<Option<Option<Vec<u8>>>> = got
            .iter()
            .map(|s| match s {
                Slot::Value(r) => Some(Some(file[r.clone()].to_vec())),
                Slot::Absent => Some(None),
                Slot::Null => None,
            })
            .collect();
        let want: Vec<Option<Option<Vec<u8>>>> = values
            .iter()
            .map(|v| v.map(|v| v.map(|b| b.to_vec())))
            .collect();
        assert_eq!(bytes, want);
    }

    fn source<'a>(path: &'a str, bytes: &'a [u8], first: i64, seq: i64) -> BlobSource<'a> {
        BlobSource {
            path,
            bytes,
            first_row_id: first,
            max_sequence_number: seq,
        }
    }

    #[test]
    fn each_row_comes_from_the_newest_file_that_holds_it() {
        // pypaimon: rows 0..3 written [a, NULL, c] at seq 1, then row 1 updated at seq 3 in a
        // file of two rows (row 0 absent); row 3 in a file of its own.
        let first = blob_file(&[Some(Some(b"a")), None, Some(Some(b"c"))]);
        let update = blob_file(&[Some(None), Some(Some(b"UPDATED"))]);
        let files = [source("f1", &first, 0, 1), source("f3", &update, 0, 3)];
        let got = column(&(0..3), &files, false).unwrap();
        let values: Vec<Option<&[u8]>> = got.iter().collect();
        assert_eq!(
            values,
            vec![Some(&b"a"[..]), Some(&b"UPDATED"[..]), Some(&b"c"[..])]
        );
        // A NULL in the newer file wins over the older value.
        let nulled = blob_file(&[None]);
        let files = [source("f1", &first, 0, 1), source("f4", &nulled, 0, 4)];
        let got = column(&(0..3), &files, false).unwrap();
        assert!(got.is_null(0) && !got.is_null(2));
        // Descriptors name the file, the payload's offset (after the magic) and its length.
        let got = column(&(0..3), &files[..1], true).unwrap();
        let d = got.value(2);
        assert_eq!(d[0], 2);
        assert_eq!(&d[1..9], b"CSEDBOLB");
        assert_eq!(&d[9..13], &2i32.to_le_bytes());
        assert_eq!(&d[13..15], b"f1");
        assert_eq!(&d[15..23], &(17i64 + 4).to_le_bytes());
        assert_eq!(&d[23..31], &1i64.to_le_bytes());
        // Files that reach outside the group, or overlap at one sequence number, are refused.
        assert!(column(&(0..2), &files[..1], false).is_err());
        let twin = [source("f1", &first, 0, 1), source("f2", &first, 2, 1)];
        assert!(column(&(0..5), &twin, false).is_err());
    }

    #[test]
    fn damaged_files_are_refused_never_panic() {
        let file = blob_file(&[Some(Some(b"hello blob")), None, Some(Some(b"xyz"))]);
        for cut in 0..file.len() {
            assert!(slots(&file[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..file.len() {
            let mut damaged = file.clone();
            damaged[at] ^= 0x41;
            // Any flipped byte is caught (CRC, magic, bounds, footer) or, in the index, yields
            // other lengths that no longer add up.
            assert!(slots(&damaged).is_err(), "flip at {at}");
        }
    }
}
