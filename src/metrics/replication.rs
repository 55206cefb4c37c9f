//! KIP-73's replication throttle, as Kafka's `LeaderReplication` and
//! `FollowerReplication` quota metrics show it: the bytes moved for throttled replicas,
//! their `byte-rate` (over Kafka's default quota window, 11 samples of one second), and
//! the time the quota held them back (`throttle-time`). The cluster's replication quota
//! of each side records here; a broker's snapshot reads both sides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{ReplicationMetrics, ReplicationThrottleMetrics};

/// Samples of Kafka's `replication.quota.window.num` (11).
const SAMPLES: usize = 11;

/// Length of one sample (`replication.quota.window.size.seconds`, 1).
const SAMPLE: Duration = Duration::from_secs(1);

/// The throttle counters of one side. Recorded under the quota's own lock, so a plain
/// mutex costs nothing more here.
#[derive(Debug)]
pub(crate) struct ThrottleStats {
    /// Bytes moved for throttled replicas.
    bytes: AtomicU64,
    /// Time the quota was spent while throttled replicas asked, in microseconds.
    throttle_us: AtomicU64,
    /// The bytes of the last [`SAMPLES`] seconds, for the byte rate.
    window: Mutex<Window>,
}

/// A ring of per-second byte counts.
#[derive(Debug)]
struct Window {
    /// When the first sample started.
    origin: Instant,
    /// `(sample number since origin, bytes)` per slot.
    samples: [(u64, u64); SAMPLES],
}

impl Default for ThrottleStats {
    fn default() -> Self {
        ThrottleStats {
            bytes: AtomicU64::new(0),
            throttle_us: AtomicU64::new(0),
            window: Mutex::new(Window {
                origin: Instant::now(),
                samples: [(u64::MAX, 0); SAMPLES],
            }),
        }
    }
}

impl ThrottleStats {
    /// Counts `bytes` moved for throttled replicas at `now`.
    #[cfg(feature = "server")]
    pub(crate) fn record_bytes(&self, bytes: u64, now: Instant) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        let mut w = self.window.lock();
        let n = w.sample(now);
        let slot = &mut w.samples[(n % SAMPLES as u64) as usize];
        if slot.0 != n {
            *slot = (n, 0);
        }
        slot.1 += bytes;
    }

    /// Counts `d` of throttle time.
    #[cfg(feature = "server")]
    pub(crate) fn record_throttle(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.throttle_us.fetch_add(us, Ordering::Relaxed);
    }

    /// The snapshot at `now`.
    pub(crate) fn snapshot(&self, now: Instant) -> ReplicationThrottleMetrics {
        let w = self.window.lock();
        let n = w.sample(now);
        let oldest = n.saturating_sub(SAMPLES as u64 - 1);
        let bytes: u64 = w
            .samples
            .iter()
            .filter(|(s, _)| *s != u64::MAX && *s >= oldest && *s <= n)
            .map(|(_, b)| b)
            .sum();
        // Kafka's `Rate`: over the whole window once it is full, else since the first
        // sample, and never less than one sample.
        let since = now.saturating_duration_since(w.origin);
        let span = since.min(SAMPLE * SAMPLES as u32).max(SAMPLE);
        ReplicationThrottleMetrics {
            throttled_bytes: self.bytes.load(Ordering::Relaxed),
            byte_rate: bytes as f64 / span.as_secs_f64(),
            throttle_time_seconds: self.throttle_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

impl Window {
    /// The number of the sample `now` falls in.
    fn sample(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        (since.as_nanos() / SAMPLE.as_nanos()) as u64
    }
}

/// Both sides of a node's replication throttle.
#[derive(Debug, Default)]
pub(crate) struct ReplicationStats {
    /// What the node sends as leader (`LeaderReplication`).
    pub leader: std::sync::Arc<ThrottleStats>,
    /// What the node fetches as follower (`FollowerReplication`).
    pub follower: std::sync::Arc<ThrottleStats>,
}

impl ReplicationStats {
    /// The snapshot of both sides.
    pub(crate) fn snapshot(&self) -> ReplicationMetrics {
        let now = Instant::now();
        ReplicationMetrics {
            leader: self.leader.snapshot(now),
            follower: self.follower.snapshot(now),
        }
    }
}

#[cfg(feature = "server")]
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_rate_covers_the_last_eleven_seconds_and_the_counters_add_up() {
        let s = ThrottleStats::default();
        let t0 = s.window.lock().origin;
        s.record_bytes(1000, t0);
        s.record_bytes(1000, t0 + Duration::from_millis(500));
        // Within the first second: over one sample.
        let m = s.snapshot(t0 + Duration::from_millis(900));
        assert_eq!(m.throttled_bytes, 2000);
        assert_eq!(m.byte_rate, 2000.0);
        // Four seconds in: over four seconds.
        s.record_bytes(2000, t0 + Duration::from_millis(3500));
        let m = s.snapshot(t0 + Duration::from_secs(4));
        assert_eq!(m.byte_rate, 1000.0);
        // The first samples leave the window after eleven seconds; the total stays.
        let m = s.snapshot(t0 + Duration::from_millis(11_200));
        assert_eq!(m.byte_rate, 2000.0 / 11.0);
        let m = s.snapshot(t0 + Duration::from_secs(30));
        assert_eq!((m.throttled_bytes, m.byte_rate), (4000, 0.0));
        s.record_throttle(Duration::from_millis(1500));
        s.record_throttle(Duration::from_millis(250));
        assert_eq!(s.snapshot(t0).throttle_time_seconds, 1.75);
    }
}
