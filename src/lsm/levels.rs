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
