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
//! The read that uses this lands with data-evolution tables (issue 43); until then only the
//! tests beside it call it.
#![cfg_attr(not(test), allow(dead_code))]

use std::ops::Range;

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
