//! Which snapshots expire: a pure decision over the snapshot ids, their commit times, the
//! retention options and the consumers' progress (Paimon's `ExpireSnapshotsImpl.expire`).

/// Retention options (`snapshot.num-retained.min/max`, `snapshot.time-retained`,
/// `snapshot.expire.limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub min_retained: i64,
    pub max_retained: i64,
    pub time_retained_millis: i64,
    pub expire_limit: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            min_retained: 10,
            max_retained: i32::MAX as i64,
            time_retained_millis: 3_600_000,
            expire_limit: 50,
        }
    }
}

/// The first snapshot id to keep: ids in `[earliest, returned)` expire. `times[i]` is the commit
/// time of snapshot `earliest + i` (ids are contiguous); `min_consumer` is the lowest
/// `nextSnapshot` of live consumers.
pub fn expire_until(
    earliest: i64,
    times: &[i64],
    now: i64,
    r: &Retention,
    min_consumer: Option<i64>,
) -> i64 {
    if times.is_empty() {
        return earliest;
    }
    let latest = earliest + times.len() as i64 - 1;
    let min = (latest - r.max_retained + 1).max(earliest);
    let mut max_exclusive = latest - r.min_retained.max(1) + 1;
    if let Some(c) = min_consumer {
        max_exclusive = max_exclusive.min(c);
    }
    max_exclusive = max_exclusive.min(earliest + r.expire_limit);
    let older_than = now - r.time_retained_millis;
    let time_of = |id: i64| times.get((id - earliest) as usize).copied();
    let mut id = min;
    while id < max_exclusive {
        // A snapshot may go once the snapshot after it is older than the retention time.
        if let Some(next) = time_of(id + 1) {
            if older_than <= next {
                return id.max(earliest);
            }
        }
        id += 1;
    }
    max_exclusive.max(earliest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_minimum_and_recent_snapshots() {
        let r = Retention {
            min_retained: 2,
            max_retained: 100,
            time_retained_millis: 1000,
            expire_limit: 50,
        };
        let times: Vec<i64> = (0..10).map(|i| i * 100).collect(); // snapshots 1..=10
                                                                  // All old: everything but the last 2 expires.
        assert_eq!(expire_until(1, &times, 1_000_000, &r, None), 9);
        // Nothing old enough: nothing expires.
        assert_eq!(expire_until(1, &times, 0, &r, None), 1);
        // Snapshot 6's successor (7, time 600) is not older than now - 1000 = 550: keep 6 on.
        assert_eq!(expire_until(1, &times, 1550, &r, None), 6);
        // A consumer still needs snapshot 4.
        assert_eq!(expire_until(1, &times, 1_000_000, &r, Some(4)), 4);
        // max_retained expires regardless of time.
        let r2 = Retention {
            max_retained: 3,
            ..r
        };
        assert_eq!(expire_until(1, &times, 0, &r2, None), 8);
        // The limit caps one run.
        let r3 = Retention {
            expire_limit: 3,
            ..r
        };
        assert_eq!(expire_until(1, &times, 1_000_000, &r3, None), 4);
    }
}
