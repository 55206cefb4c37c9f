//! The time records are stamped with when their writer gives none.
//!
//! A record's CreateTime is in milliseconds, and reading the precise wall clock
//! (`clock_gettime(CLOCK_REALTIME)` through the vDSO, which reads the TSC) took 34 ns
//! here: a third of what a whole `Producer` send costs, a fifth of a single-record
//! append. On Linux [`now_ms`] reads the kernel's coarse wall clock instead
//! (`CLOCK_REALTIME_COARSE`, 5 ns: the time of the last timer tick, no TSC read), which
//! is behind the precise one by at most one tick (1 to 4 ms, by the kernel's `HZ`).
//! Elsewhere it reads the system clock.

/// Milliseconds since the Unix epoch, at most one kernel tick (1 to 4 ms) behind the
/// system clock and never ahead of it: the CreateTime the `Producer` (in process and
/// over the network) stamps on records that carry none, cheap enough to read once a
/// record.
///
/// ```
/// use tidelog::BatchBuilder;
///
/// let mut b = BatchBuilder::new();
/// b.push(tidelog::record::now_ms(), None, Some(b"hello"), &[]);
/// let batch = b.finish();
/// assert!(tidelog::Batch::parse(&batch)?.max_timestamp() > 1_700_000_000_000);
/// # Ok::<(), tidelog::Error>(())
/// ```
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
#[allow(clippy::useless_conversion)] // `tv_nsec` is an i32 on x32
pub fn now_ms() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    t.tv_sec * 1000 + i64::from(t.tv_nsec) / 1_000_000
}

/// Milliseconds since the Unix epoch (the system clock): the CreateTime the `Producer`
/// stamps on records that carry none.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[inline]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_a_tick_of_the_system_clock() {
        for _ in 0..1000 {
            let before = crate::storage::now_ms();
            let coarse = now_ms();
            let after = crate::storage::now_ms();
            // The coarse clock never runs ahead, and lags by one tick (at most 10 ms
            // with HZ = 100, the slowest kernel tick).
            assert!(coarse <= after, "coarse {coarse} ahead of {after}");
            assert!(
                before - coarse <= 10,
                "coarse {coarse} too far behind {before}"
            );
        }
    }
}
