//! Parts of a data file: a scan may read one large file as several parts (row ranges), each
//! the row groups (Parquet) or stripes (ORC) whose first row falls in it, so the parts of a file
//! never overlap and together hold all of it.

use std::ops::Range;

use crate::spec::options::FileFormat;

/// Whether the data file `name` can be read in parts: Parquet (row groups) and ORC (stripes);
/// Avro files, and formats not read here, are read whole (pure).
pub(crate) fn splittable(name: &str) -> bool {
    [FileFormat::Parquet, FileFormat::Orc]
        .iter()
        .any(|f| name.ends_with(f.suffix()))
}

/// The positions of the groups (of these row counts, in file order) whose first row is in
/// `part`. Pure.
pub(crate) fn groups_starting_in(rows: impl Iterator<Item = i64>, part: &Range<u64>) -> Vec<usize> {
    let mut first = 0u64;
    let mut out = Vec::new();
    for (g, n) in rows.enumerate() {
        if part.contains(&first) {
            out.push(g);
        }
        first += n.max(0) as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_belongs_to_the_part_its_first_row_is_in() {
        let rows = [100i64, 100, 50];
        assert_eq!(groups_starting_in(rows.iter().copied(), &(0..100)), vec![0]);
        assert_eq!(groups_starting_in(rows.iter().copied(), &(1..200)), vec![1]);
        assert_eq!(
            groups_starting_in(rows.iter().copied(), &(100..u64::MAX)),
            vec![1, 2]
        );
        assert!(groups_starting_in(rows.iter().copied(), &(1..100)).is_empty());
    }

    #[test]
    fn parquet_and_orc_files_are_read_in_parts() {
        assert!(splittable("data-1.parquet") && splittable("data-1.orc"));
        assert!(!splittable("data-1.avro") && !splittable("data-1.blob"));
    }
}
