//! The engine's clock. Every time the engine records or compares (snapshot and schema commit
//! times, file creation times, retention and consumer expiry, orphan ages) comes from the
//! [`Clock`] the [`Catalog`](crate::Catalog) was given, so tests move time with a manual clock
//! instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Wall-clock time in epoch milliseconds (what [`Clock::system`] reads).
pub fn system_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The system clock, or a manual one that only moves when told; cheap to clone (clones of a
/// manual clock share its time).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The wall clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock standing at `start_millis` until [`Clock::advance`] or [`Clock::set`] moves it.
    pub fn manual(start_millis: i64) -> Self {
        Self {
            manual: Some(Arc::new(AtomicI64::new(start_millis))),
        }
    }

    /// The time now, in epoch milliseconds.
    pub fn now_millis(&self) -> i64 {
        match &self.manual {
            Some(t) => t.load(Ordering::SeqCst),
            None => system_millis(),
        }
    }

    /// Moves a manual clock forward by `millis`; the system clock cannot be moved (`false`).
    pub fn advance(&self, millis: i64) -> bool {
        match &self.manual {
            Some(t) => {
                t.fetch_add(millis, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Sets a manual clock to `millis`; the system clock cannot be set (`false`).
    pub fn set(&self, millis: i64) -> bool {
        match &self.manual {
            Some(t) => {
                t.store(millis, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let c = Clock::manual(1_000);
        let twin = c.clone();
        assert_eq!(c.now_millis(), 1_000);
        assert!(twin.advance(500));
        assert_eq!(c.now_millis(), 1_500);
        assert!(c.set(10));
        assert_eq!(twin.now_millis(), 10);
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock_and_cannot_be_moved() {
        let c = Clock::system();
        let before = system_millis();
        let now = c.now_millis();
        assert!(now >= before && now <= system_millis());
        assert!(!c.advance(1));
        assert!(!c.set(1));
    }
}
