//! A wall clock read once per maintenance tick, for decisions that a tick of lag does
//! not change: whether the active segment is older than `segment.ms`.
//!
//! Reading the system clock (`clock_gettime`, through the vDSO) cost 15-20 % of a
//! single-record append here. A log opened by a [`super::LogManager`] whose maintenance
//! thread runs takes the time from this clock instead when `segment.ms` is at least
//! [`TICKS_PER_SEGMENT_MS`] ticks, so the roll happens at most one tick (about 2 %)
//! late. Anything that is written down (LogAppendTime) reads the system clock,
//! through [`now_ms`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `segment.ms` must span this many ticks for the clock to stand in for the system's.
pub(crate) const TICKS_PER_SEGMENT_MS: i64 = 50;

/// Wall-clock milliseconds as of the last tick; shared by a manager and its logs.
#[derive(Clone, Default)]
pub(crate) struct CoarseClock(Arc<State>);

#[derive(Default)]
struct State {
    /// Milliseconds since the epoch at the last tick.
    now_ms: AtomicI64,
    /// Milliseconds between ticks; 0 while nothing ticks.
    tick_ms: AtomicI64,
}

impl CoarseClock {
    /// Records the time; `tick` is the longest wait until the next call.
    pub(crate) fn tick(&self, now_ms: i64, tick: std::time::Duration) {
        self.0.now_ms.store(now_ms, Ordering::Relaxed);
        let ms = i64::try_from(tick.as_millis()).unwrap_or(i64::MAX).max(1);
        self.0.tick_ms.store(ms, Ordering::Relaxed);
    }

    /// Stops standing in for the system clock (the ticking thread is gone).
    pub(crate) fn stop(&self) {
        self.0.tick_ms.store(0, Ordering::Relaxed);
    }

    /// The last tick's time, if the clock ticks at least [`TICKS_PER_SEGMENT_MS`] times
    /// per `precision_ms`; `None` when the system clock must be read.
    #[inline]
    pub(crate) fn now_within(&self, precision_ms: u64) -> Option<i64> {
        let tick = self.0.tick_ms.load(Ordering::Relaxed);
        let fine = tick > 0
            && i64::try_from(precision_ms).unwrap_or(i64::MAX) / TICKS_PER_SEGMENT_MS >= tick;
        fine.then(|| self.0.now_ms.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stands_in_only_while_ticking_often_enough() {
        let c = CoarseClock::default();
        assert_eq!(c.now_within(u64::MAX), None, "never ticked");
        c.tick(1_000, Duration::from_secs(1));
        assert_eq!(c.now_within(7 * 24 * 3_600_000), Some(1_000));
        assert_eq!(c.now_within(50_000), Some(1_000));
        assert_eq!(c.now_within(49_999), None, "a tick is over 2 % of it");
        c.clone().tick(2_000, Duration::from_millis(10));
        assert_eq!(c.now_within(500), Some(2_000), "clones share the clock");
        c.stop();
        assert_eq!(c.now_within(u64::MAX), None);
    }
}
