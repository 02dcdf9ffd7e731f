//! Universal compaction (Paimon's `UniversalCompaction`, master semantics): given the sorted runs of
//! a bucket, newest first, decide which leading runs to merge and into which level.
//!
//! Order of checks: size amplification (full compaction), size ratio, run count. Output level: the
//! level below the first run not taken, never 0; everything taken means the max level.

/// A sorted run as the picker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSize {
    pub level: i32,
    pub size: u64,
}

/// The picker's options (Paimon's defaults in `Default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PickerOptions {
    /// `compaction.max-size-amplification-percent` (200).
    pub max_size_amplification_percent: u64,
    /// `compaction.size-ratio` (1).
    pub size_ratio: u64,
    /// `num-sorted-run.compaction-trigger` (5).
    pub run_trigger: usize,
    /// `num-levels` - 1 (trigger + 1 levels by default).
    pub max_level: i32,
}

impl Default for PickerOptions {
    fn default() -> Self {
        Self {
            max_size_amplification_percent: 200,
            size_ratio: 1,
            run_trigger: 5,
            max_level: 5,
        }
    }
}

/// Merge the first `runs` sorted runs into `output_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactUnit {
    pub runs: usize,
    pub output_level: i32,
}

/// Picks a compaction for `runs` (newest first), or `None` when the tree is in shape.
pub fn pick(runs: &[RunSize], opts: &PickerOptions) -> Option<CompactUnit> {
    if runs.len() < opts.run_trigger || runs.len() < 2 {
        return None;
    }
    // 1. Size amplification: everything newer than the oldest run, relative to it.
    let (last, newer) = runs.split_last()?;
    let newer_size: u64 = newer.iter().map(|r| r.size).sum();
    if newer_size.saturating_mul(100)
        > opts
            .max_size_amplification_percent
            .saturating_mul(last.size)
    {
        return Some(CompactUnit {
            runs: runs.len(),
            output_level: opts.max_level,
        });
    }
    // 2. Size ratio from the newest run.
    if let Some(unit) = pick_for_size_ratio(runs, opts, 1, false) {
        return Some(unit);
    }
    // 3. Too many runs: take enough of the newest to get back to the trigger.
    if runs.len() > opts.run_trigger {
        return pick_for_size_ratio(runs, opts, runs.len() - opts.run_trigger + 1, true);
    }
    None
}

/// A full compaction: all runs into the max level (`None` when there is nothing to do: no runs,
/// or a single run already at the max level).
pub fn pick_full(runs: &[RunSize], opts: &PickerOptions) -> Option<CompactUnit> {
    match runs {
        [] => None,
        [only] if only.level == opts.max_level => None,
        _ => Some(CompactUnit {
            runs: runs.len(),
            output_level: opts.max_level,
        }),
    }
}

fn pick_for_size_ratio(
    runs: &[RunSize],
    opts: &PickerOptions,
    count: usize,
    force: bool,
) -> Option<CompactUnit> {
    let mut count = count.min(runs.len());
    let mut candidate: u64 = runs[..count].iter().map(|r| r.size).sum();
    let mut triggered = force || count > 1;
    let ratio = (100 + opts.size_ratio) as f64 / 100.0;
    for next in &runs[count..] {
        let too_big = (candidate as f64) * ratio < next.size as f64;
        // Once merging has started, too-big runs at levels 0 and 1 are still taken along.
        if too_big && (!triggered || next.level > 1) {
            break;
        }
        candidate += next.size;
        count += 1;
        triggered = true;
    }
    triggered.then(|| create_unit(runs, opts.max_level, count))
}

fn create_unit(runs: &[RunSize], max_level: i32, mut count: usize) -> CompactUnit {
    let mut output_level = if count == runs.len() {
        max_level
    } else {
        (runs[count].level - 1).max(0)
    };
    if output_level == 0 {
        // Level 0 is never an output: take runs until one from a higher level is taken.
        while count < runs.len() {
            let next = runs[count];
            count += 1;
            if next.level != 0 {
                output_level = next.level;
                break;
            }
        }
    }
    if count == runs.len() {
        output_level = max_level;
    }
    CompactUnit {
        runs: count,
        output_level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l0(sizes: &[u64]) -> Vec<RunSize> {
        sizes
            .iter()
            .map(|&size| RunSize { level: 0, size })
            .collect()
    }

    #[test]
    fn nothing_below_the_trigger() {
        assert_eq!(pick(&l0(&[1, 1, 1, 1]), &PickerOptions::default()), None);
    }

    #[test]
    fn size_amplification_compacts_everything() {
        let mut runs = l0(&[1, 1, 1, 1]);
        runs.push(RunSize { level: 5, size: 1 });
        assert_eq!(
            pick(&runs, &PickerOptions::default()),
            Some(CompactUnit {
                runs: 5,
                output_level: 5
            })
        );
    }

    #[test]
    fn size_ratio_takes_similar_runs_and_lands_above_the_next_level() {
        let mut runs = l0(&[1, 1, 1, 1]);
        runs.push(RunSize {
            level: 4,
            size: 100,
        });
        runs.push(RunSize {
            level: 5,
            size: 1000,
        });
        // Amplification: 104 * 100 <= 200 * 1000: no. Ratio: 1,1,1,1 then 100 is too big and level 4 > 1.
        assert_eq!(
            pick(&runs, &PickerOptions::default()),
            Some(CompactUnit {
                runs: 4,
                output_level: 3
            })
        );
    }

    #[test]
    fn run_count_forces_a_pick_when_sizes_diverge() {
        let runs: Vec<RunSize> = [(0, 1), (0, 3), (0, 9), (0, 27), (0, 81), (5, 1000)]
            .iter()
            .map(|&(level, size)| RunSize { level, size })
            .collect();
        let opts = PickerOptions::default();
        // 6 runs > trigger 5: start with 2 runs and keep taking level-0 runs (all level <= 1).
        let unit = pick(&runs, &opts).unwrap();
        assert_eq!(
            unit,
            CompactUnit {
                runs: 5,
                output_level: 4
            }
        );
    }

    #[test]
    fn output_level_is_never_zero() {
        let runs = vec![
            RunSize { level: 0, size: 1 },
            RunSize { level: 0, size: 1 },
            RunSize {
                level: 1,
                size: 100,
            },
        ];
        let opts = PickerOptions {
            run_trigger: 2,
            ..Default::default()
        };
        let unit = pick(&runs, &opts).unwrap();
        assert!(unit.output_level > 0, "{unit:?}");
    }

    #[test]
    fn full_pick_skips_a_single_top_run() {
        let opts = PickerOptions::default();
        assert_eq!(pick_full(&[RunSize { level: 5, size: 10 }], &opts), None);
        assert_eq!(
            pick_full(&[RunSize { level: 0, size: 10 }], &opts),
            Some(CompactUnit {
                runs: 1,
                output_level: 5
            })
        );
    }

    /// Simulation: many commits of one level-0 file each, compacting whenever the picker says so.
    /// The number of sorted runs stays bounded and the data (total size) is conserved.
    #[test]
    fn simulation_keeps_runs_bounded() {
        let opts = PickerOptions::default();
        let mut runs: Vec<RunSize> = Vec::new();
        let mut max_runs = 0;
        for commit in 0..2000u64 {
            runs.insert(
                0,
                RunSize {
                    level: 0,
                    size: 10 + commit % 7,
                },
            );
            if let Some(unit) = pick(&runs, &opts) {
                let size: u64 = runs[..unit.runs].iter().map(|r| r.size).sum();
                let mut rest: Vec<RunSize> = runs[unit.runs..].to_vec();
                // Merging into a level that already has a run combines them.
                if let Some(pos) = rest.iter().position(|r| r.level == unit.output_level) {
                    rest[pos].size += size;
                } else {
                    rest.push(RunSize {
                        level: unit.output_level,
                        size,
                    });
                    rest.sort_by_key(|r| r.level);
                }
                runs = rest;
            }
            max_runs = max_runs.max(runs.len());
            let levels: Vec<i32> = runs
                .iter()
                .filter(|r| r.level > 0)
                .map(|r| r.level)
                .collect();
            let mut dedup = levels.clone();
            dedup.dedup();
            assert_eq!(levels, dedup, "one run per level above 0");
        }
        let total: u64 = runs.iter().map(|r| r.size).sum();
        assert_eq!(total, (0..2000u64).map(|c| 10 + c % 7).sum::<u64>());
        assert!(
            max_runs <= opts.run_trigger + 1,
            "runs peaked at {max_runs}"
        );
    }
}
