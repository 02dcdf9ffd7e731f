//! Data-evolution tables (`data-evolution.enabled`, on row-tracking append tables): the columns
//! of a row may be written in several files that cover the same row-id range, a full file first
//! and column-only files (`writeCols`) for later updates. This module decides, purely, how such
//! files are read back, as Java's `DataEvolutionSplitRead` does:
//!
//! ```text
//!  rows 0..3   A (seq 1, every column)   U1 (seq 3, b)   U3 (seq 6, c)
//!              id, a <- A    b <- U1    c <- U3    deletion vector of A (the anchor)
//! ```
//!
//! - files whose row-id ranges overlap form one group ([`row_range_groups`]);
//! - each column comes from the newest file (by max sequence number, ties in manifest order) that
//!   wrote it; a column no file wrote reads as NULL ([`plan_group`]);
//! - the group's deletion vector is that of its anchor, the oldest file ([`anchor`]).
//!
//! The reading itself is `table/read/evolved.rs`.

use std::ops::Range;

use super::scan::Split;
use crate::error::Malformed;
use crate::spec::DataFileMeta;

/// The row ids `file` holds: `first_row_id .. first_row_id + row_count` (none: no first row id).
pub(crate) fn row_range(file: &DataFileMeta) -> Option<Range<i64>> {
    let first = file.first_row_id?;
    Some(first..first.saturating_add(file.row_count.max(0)))
}

/// The positions of `files` grouped by overlapping row-id ranges (Paimon's
/// `RangeHelper.mergeOverlappingRanges`): groups in the order of their first row id, each group's
/// files in input order. Every file of a data-evolution table has a first row id.
pub(crate) fn row_range_groups(files: &[DataFileMeta]) -> Result<Vec<Vec<usize>>, Malformed> {
    let mut ranged = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let range = row_range(f).ok_or_else(|| {
            Malformed(format!(
                "data file {} of a data-evolution table has no first row id",
                f.file_name
            ))
        })?;
        ranged.push((range, i));
    }
    ranged.sort_by_key(|(r, i)| (r.start, r.end, *i));
    let mut groups: Vec<(i64, Vec<usize>)> = Vec::new();
    for (range, i) in ranged {
        match groups.last_mut() {
            Some((end, members)) if range.start < *end => {
                *end = (*end).max(range.end);
                members.push(i);
            }
            _ => groups.push((range.end, vec![i])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(_, mut members)| {
            members.sort_unstable();
            members
        })
        .collect())
}

/// Whether a data file is a `.blob` file (one BLOB column's values for a range of row ids).
pub(crate) fn is_blob_file(name: &str) -> bool {
    name.ends_with(".blob")
}

/// Whether `files` (one row-id group) must be read together, column by column: more than one
/// file, or one that holds only some columns.
pub(crate) fn needs_assembly(files: &[DataFileMeta]) -> bool {
    files.len() > 1 || files.iter().any(|f| f.write_cols.is_some())
}

/// `split` (the files of one bucket) as one split per row-id group, in row-id order: a group is
/// never cut, as Java's `DataEvolutionSplitGenerator` keeps it whole.
pub(crate) fn group_splits(split: &Split) -> Result<Vec<Split>, Malformed> {
    Ok(row_range_groups(&split.files)?
        .into_iter()
        .map(|members| Split {
            partition: split.partition.clone(),
            bucket: split.bucket,
            files: members.iter().map(|&i| split.files[i].clone()).collect(),
            rows: None,
        })
        .collect())
}

/// The file of a group whose deletion vector applies to all of the group's rows: the oldest, by
/// (max sequence number, file name), as Java's `retrieveAnchorFile`.
pub(crate) fn anchor(files: &[&DataFileMeta]) -> Option<usize> {
    (0..files.len()).min_by(|&a, &b| {
        let key = |f: &DataFileMeta| (f.max_sequence_number, f.file_name.clone());
        key(files[a]).cmp(&key(files[b]))
    })
}

/// How one group of files is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupPlan {
    /// The row ids of the group.
    pub(crate) rows: Range<i64>,
    /// For each column asked for, the position (in the group's files) of the file it is read
    /// from; none: no file wrote it (NULL).
    pub(crate) columns: Vec<Option<usize>>,
    /// The file whose deletion vector applies.
    pub(crate) anchor: usize,
    /// The rows' sequence number: the newest file's.
    pub(crate) sequence: i64,
}

/// The plan of one group (`files`, in manifest order) for `columns` (name, nullable);
/// `wrote(file, column)` says whether a file holds a column (its schema version had it and, for a
/// column-only file, its `writeCols` list it). Refused as malformed: files of one group that do
/// not cover the same rows, and a NOT NULL column no file holds.
pub(crate) fn plan_group(
    files: &[&DataFileMeta],
    columns: &[(&str, bool)],
    wrote: impl Fn(&DataFileMeta, &str) -> bool,
) -> Result<GroupPlan, Malformed> {
    let Some(first) = files.first() else {
        return Err(Malformed("an empty row-id group".into()));
    };
    let rows = row_range(first)
        .ok_or_else(|| Malformed(format!("data file {} has no first row id", first.file_name)))?;
    if let Some(odd) = files.iter().find(|f| row_range(f) != Some(rows.clone())) {
        return Err(Malformed(format!(
            "data files {} and {} of a data-evolution table overlap without covering the same row ids ({:?} and {:?})",
            first.file_name,
            odd.file_name,
            rows,
            row_range(odd)
        )));
    }
    let mut newest_first: Vec<usize> = (0..files.len()).collect();
    newest_first.sort_by_key(|&i| std::cmp::Reverse(files[i].max_sequence_number));
    let mut planned = Vec::with_capacity(columns.len());
    for &(name, nullable) in columns {
        let from = newest_first
            .iter()
            .copied()
            .find(|&i| wrote(files[i], name));
        if from.is_none() && !nullable {
            return Err(Malformed(format!(
                "column {name} is NOT NULL, but no data file of row ids {rows:?} holds it"
            )));
        }
        planned.push(from);
    }
    Ok(GroupPlan {
        rows,
        columns: planned,
        anchor: anchor(files).unwrap_or(0),
        sequence: files[newest_first[0]].max_sequence_number,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, first: i64, rows: i64, seq: i64, cols: Option<&[&str]>) -> DataFileMeta {
        let mut f = DataFileMeta::for_test(name, 0, 0, 0);
        f.row_count = rows;
        f.first_row_id = Some(first);
        f.max_sequence_number = seq;
        f.min_sequence_number = seq;
        f.write_cols = cols.map(|c| c.iter().map(|s| s.to_string()).collect());
        f
    }

    /// Whether `f` holds `name`: every column of its schema (`id, a, b, c, d`; `e` came later),
    /// or those its `writeCols` list.
    fn wrote(f: &DataFileMeta, name: &str) -> bool {
        match &f.write_cols {
            Some(c) => c.iter().any(|x| x == name),
            None => ["id", "a", "b", "c", "d"].contains(&name),
        }
    }

    #[test]
    fn overlapping_ranges_group_in_range_order_keeping_manifest_order_inside() {
        let files = vec![
            file("C", 5, 2, 2, None),
            file("U1", 0, 3, 3, Some(&["b"])),
            file("A", 0, 3, 1, None),
            file("B", 3, 2, 1, None),
            file("U2", 3, 2, 4, Some(&["b"])),
        ];
        assert_eq!(
            row_range_groups(&files).unwrap(),
            vec![vec![1, 2], vec![3, 4], vec![0]]
        );
        let mut bad = files.clone();
        bad[0].first_row_id = None;
        assert!(row_range_groups(&bad).unwrap_err().0.contains("C"));
    }

    #[test]
    fn each_column_comes_from_the_newest_file_that_wrote_it() {
        let a = file("A", 0, 3, 1, None);
        let u1 = file("U1", 0, 3, 3, Some(&["b"]));
        let u3 = file("U3", 0, 3, 6, Some(&["c", "d"]));
        let u4 = file("U4", 0, 3, 4, Some(&["b"]));
        let group = [&a, &u1, &u3, &u4];
        let cols = [
            ("id", false),
            ("a", true),
            ("b", true),
            ("c", true),
            ("e", true),
        ];
        let plan = plan_group(&group, &cols, wrote).unwrap();
        assert_eq!(plan.rows, 0..3);
        // id, a <- A; b <- U4 (seq 4 beats U1's 3); c <- U3; e: no file.
        assert_eq!(plan.columns, vec![Some(0), Some(0), Some(3), Some(2), None]);
        assert_eq!(plan.anchor, 0);
        assert_eq!(plan.sequence, 6);
        // Ties keep manifest order.
        let twin = file("U1b", 0, 3, 3, Some(&["b"]));
        let plan = plan_group(&[&a, &u1, &twin], &[("b", true)], wrote).unwrap();
        assert_eq!(plan.columns, vec![Some(1)]);
    }

    #[test]
    fn groups_that_do_not_line_up_or_lack_a_required_column_are_refused() {
        let a = file("A", 0, 3, 1, None);
        let short = file("S", 0, 2, 2, Some(&["b"]));
        let e = plan_group(&[&a, &short], &[("b", true)], wrote).unwrap_err();
        assert!(e.0.contains("A") && e.0.contains("S"), "{e}");
        let only_b = file("B", 0, 3, 2, Some(&["b"]));
        let e = plan_group(&[&only_b], &[("id", false)], wrote).unwrap_err();
        assert!(e.0.contains("id"), "{e}");
        assert!(plan_group(&[], &[], wrote).is_err());
    }

    #[test]
    fn the_anchor_is_the_oldest_file() {
        let a = file("A", 0, 3, 1, None);
        let b = file("B", 0, 3, 1, Some(&["b"]));
        let u = file("U", 0, 3, 5, Some(&["c"]));
        assert_eq!(anchor(&[&u, &b, &a]), Some(2));
        assert_eq!(anchor(&[]), None);
    }
}
