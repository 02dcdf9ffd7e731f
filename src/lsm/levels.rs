//! The levels of one bucket's LSM tree, as sorted runs ordered newest to oldest: every level-0
//! file is a run of its own (higher max sequence number first), then each non-empty level >= 1 is
//! one run (its files have disjoint key ranges).

use crate::spec::DataFileMeta;

/// One sorted run and the level it lives on.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelSortedRun {
    pub level: i32,
    pub files: Vec<DataFileMeta>,
}

impl LevelSortedRun {
    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|f| f.file_size.max(0) as u64).sum()
    }
}

/// Groups a bucket's live files into sorted runs, newest first.
pub fn sorted_runs(files: &[DataFileMeta]) -> Vec<LevelSortedRun> {
    let mut level0: Vec<&DataFileMeta> = files.iter().filter(|f| f.level == 0).collect();
    level0.sort_by(|a, b| {
        b.max_sequence_number
            .cmp(&a.max_sequence_number)
            .then_with(|| b.min_sequence_number.cmp(&a.min_sequence_number))
            .then_with(|| b.file_name.cmp(&a.file_name))
    });
    let mut runs: Vec<LevelSortedRun> = level0
        .into_iter()
        .map(|f| LevelSortedRun {
            level: 0,
            files: vec![f.clone()],
        })
        .collect();
    let max_level = files.iter().map(|f| f.level).max().unwrap_or(0);
    for level in 1..=max_level {
        let in_level: Vec<DataFileMeta> =
            files.iter().filter(|f| f.level == level).cloned().collect();
        if !in_level.is_empty() {
            runs.push(LevelSortedRun {
                level,
                files: in_level,
            });
        }
    }
    runs
}

/// When the sorted runs' sequence-number ranges (each the span of its files' ranges) are pairwise
/// disjoint, each run's largest sequence number, in the runs' order. Pure.
///
/// A key is in a run at most once, so a merge compares sequence numbers only across runs, and
/// disjoint ranges order any two runs' records as the runs' largest numbers do: a read may give
/// every row of a run that number instead of decoding the column. Touching or overlapping
/// ranges (files from a writer that recorded no real range, say) give `None`.
pub fn disjoint_run_sequences(runs: &[Vec<DataFileMeta>]) -> Option<Vec<i64>> {
    let mut spans = Vec::with_capacity(runs.len());
    for run in runs {
        let lo = run.iter().map(|f| f.min_sequence_number).min()?;
        let hi = run.iter().map(|f| f.max_sequence_number).max()?;
        if lo > hi {
            return None;
        }
        spans.push((lo, hi));
    }
    let mut sorted = spans.clone();
    sorted.sort_unstable();
    sorted
        .windows(2)
        .all(|w| w[0].1 < w[1].0)
        .then(|| spans.iter().map(|&(_, hi)| hi).collect())
}

/// Whether two metas name the same file at the same level (a file moved to another level by a
/// compaction is, for the tree, a different entry).
pub fn same_file(a: &DataFileMeta, b: &DataFileMeta) -> bool {
    a.file_name == b.file_name && a.level == b.level
}

/// The live files of one bucket as a writer sees them: what it restored from a snapshot, plus
/// its own flushes and compaction outputs. A value: every change returns or mutates it in place,
/// and nothing here does IO.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Levels {
    files: Vec<DataFileMeta>,
}

impl Levels {
    pub fn new(files: Vec<DataFileMeta>) -> Self {
        Self { files }
    }

    pub fn files(&self) -> &[DataFileMeta] {
        &self.files
    }

    /// Sorted runs, newest first (see [`sorted_runs`]).
    pub fn sorted_runs(&self) -> Vec<LevelSortedRun> {
        sorted_runs(&self.files)
    }

    /// A flushed file joins the tree (at level 0, or wherever its meta says).
    pub fn add(&mut self, file: DataFileMeta) {
        self.files.push(file);
    }

    /// The tree after a compaction replaced `inputs` with `outputs`, and the inputs that left it
    /// (an input no longer live, because something else already replaced it, is not returned).
    pub fn apply(
        &self,
        inputs: &[DataFileMeta],
        outputs: &[DataFileMeta],
    ) -> (Levels, Vec<DataFileMeta>) {
        let (obsolete, mut kept): (Vec<_>, Vec<_>) = self
            .files
            .iter()
            .cloned()
            .partition(|f| inputs.iter().any(|i| same_file(i, f)));
        for o in outputs {
            if !kept.iter().any(|f| same_file(f, o)) {
                kept.push(o.clone());
            }
        }
        (Levels { files: kept }, obsolete)
    }

    /// The tree rebuilt on a newer snapshot: its `committed` files, minus the inputs `replaced`
    /// by compactions not committed yet, plus the files `added` since (flushes and compaction
    /// outputs not committed yet). What another compactor committed meanwhile is taken as it is.
    pub fn rebase(
        committed: Vec<DataFileMeta>,
        replaced: &[DataFileMeta],
        added: &[DataFileMeta],
    ) -> Levels {
        let gone = |f: &DataFileMeta| replaced.iter().any(|r| same_file(r, f));
        let mut files: Vec<DataFileMeta> = committed.into_iter().filter(|f| !gone(f)).collect();
        for f in added {
            if !gone(f) && !files.iter().any(|x| same_file(x, f)) {
                files.push(f.clone());
            }
        }
        Levels { files }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, level: i32, seq: i64) -> DataFileMeta {
        let mut f = DataFileMeta::for_test(name, level, 0, 0);
        f.min_sequence_number = seq;
        f.max_sequence_number = seq;
        f
    }

    fn names(files: &[DataFileMeta]) -> Vec<(String, i32)> {
        let mut v: Vec<_> = files
            .iter()
            .map(|f| (f.file_name.clone(), f.level))
            .collect();
        v.sort();
        v
    }

    fn ranged(name: &str, lo: i64, hi: i64) -> DataFileMeta {
        let mut f = file(name, 1, lo);
        f.max_sequence_number = hi;
        f
    }

    #[test]
    fn disjoint_runs_are_ordered_by_their_largest_sequence_numbers() {
        // Newest first; a run's files may overlap each other (their keys do not).
        let runs = vec![
            vec![ranged("l0", 20, 25)],
            vec![ranged("a", 3, 12), ranged("b", 5, 19)],
            vec![ranged("c", 0, 2)],
        ];
        assert_eq!(disjoint_run_sequences(&runs), Some(vec![25, 19, 2]));
        // Any order of the runs.
        let reversed: Vec<_> = runs.iter().rev().cloned().collect();
        assert_eq!(disjoint_run_sequences(&reversed), Some(vec![2, 19, 25]));
        // Touching ranges could tie: decode.
        let touching = vec![vec![ranged("x", 5, 9)], vec![ranged("y", 9, 12)]];
        assert_eq!(disjoint_run_sequences(&touching), None);
        // Overlapping through a second file of a run.
        let overlapping = vec![
            vec![ranged("x", 10, 12)],
            vec![ranged("y", 0, 3), ranged("z", 4, 11)],
        ];
        assert_eq!(disjoint_run_sequences(&overlapping), None);
        // Writers that record no range (all zero) overlap.
        let zeros = vec![vec![ranged("x", 0, 0)], vec![ranged("y", 0, 0)]];
        assert_eq!(disjoint_run_sequences(&zeros), None);
        // An inverted range, and an empty run, say nothing.
        assert_eq!(disjoint_run_sequences(&[vec![ranged("x", 5, 4)]]), None);
        assert_eq!(disjoint_run_sequences(&[vec![]]), None);
        // One run: its own largest number.
        assert_eq!(
            disjoint_run_sequences(&[vec![ranged("x", 1, 7)]]),
            Some(vec![7])
        );
    }

    #[test]
    fn level0_files_are_runs_of_their_own_newest_first_then_one_run_per_level() {
        let levels = Levels::new(vec![
            file("a", 0, 1),
            file("b", 0, 3),
            file("c", 2, 0),
            file("d", 2, 0),
            file("e", 5, 0),
        ]);
        let runs: Vec<(i32, usize)> = levels
            .sorted_runs()
            .iter()
            .map(|r| (r.level, r.files.len()))
            .collect();
        assert_eq!(runs, vec![(0, 1), (0, 1), (2, 2), (5, 1)]);
        assert_eq!(levels.sorted_runs()[0].files[0].file_name, "b");
    }

    #[test]
    fn apply_replaces_inputs_with_outputs_and_returns_the_inputs_that_left() {
        let levels = Levels::new(vec![file("a", 0, 1), file("b", 0, 2), file("c", 5, 0)]);
        let (after, obsolete) = levels.apply(
            &[file("a", 0, 1), file("b", 0, 2)],
            &[file("x", 5, 2), file("y", 5, 2)],
        );
        assert_eq!(names(&obsolete), vec![("a".into(), 0), ("b".into(), 0)]);
        assert_eq!(
            names(after.files()),
            vec![("c".into(), 5), ("x".into(), 5), ("y".into(), 5)]
        );
        // The value it was applied to is unchanged.
        assert_eq!(levels.files().len(), 3);
    }

    #[test]
    fn apply_matches_by_name_and_level_and_ignores_inputs_no_longer_live() {
        // An upgrade moves "a" from level 0 to level 5 under the same name.
        let levels = Levels::new(vec![file("a", 0, 1), file("b", 3, 0)]);
        let (after, obsolete) =
            levels.apply(&[file("a", 0, 1), file("gone", 0, 9)], &[file("a", 5, 1)]);
        assert_eq!(names(&obsolete), vec![("a".into(), 0)]);
        assert_eq!(names(after.files()), vec![("a".into(), 5), ("b".into(), 3)]);
    }

    #[test]
    fn apply_does_not_duplicate_an_output_already_present() {
        let levels = Levels::new(vec![file("a", 0, 1), file("x", 5, 0)]);
        let (after, _) = levels.apply(&[file("a", 0, 1)], &[file("x", 5, 0)]);
        assert_eq!(names(after.files()), vec![("x".into(), 5)]);
    }

    #[test]
    fn rebase_keeps_what_others_committed_and_reapplies_what_this_writer_has_not_committed() {
        // Committed: c1 (ours, from an earlier commit), o1 (another compactor's output).
        // Not committed yet: our compaction replaced c1 with k1; we flushed n1.
        let committed = vec![file("c1", 0, 1), file("o1", 4, 0)];
        let levels = Levels::rebase(
            committed,
            &[file("c1", 0, 1)],
            &[file("n1", 0, 7), file("k1", 5, 1)],
        );
        assert_eq!(
            names(levels.files()),
            vec![("k1".into(), 5), ("n1".into(), 0), ("o1".into(), 4)]
        );
    }

    #[test]
    fn rebase_never_resurrects_a_replaced_file_or_duplicates_a_committed_one() {
        let levels = Levels::rebase(
            vec![file("n1", 0, 7)],
            &[file("k0", 5, 0)],
            &[file("n1", 0, 7), file("k0", 5, 0)],
        );
        assert_eq!(names(levels.files()), vec![("n1".into(), 0)]);
    }
}
