//! The lock-free counters metrics are recorded in, and the process-wide ones.
//!
//! Every counter is an atomic updated with `Relaxed` ordering: a reader sums them into a
//! snapshot and may see one a moment older than another, never a torn or lost value.
//! Where only one thread ever writes a counter (the appends of a log, under its writer
//! lock) it is updated with a load and a store instead of a read-modify-write, which
//! costs what two plain moves cost; counters written by many threads (reads of a log,
//! requests of a server) use `fetch_add`. The writer's and the readers' counters of a log
//! sit on separate cache lines, so a consumer keeping up with a producer does not bounce
//! the producer's line between cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{HistogramSnapshot, PrefaultMetrics};

/// Upper bounds (inclusive) of the latency buckets, in nanoseconds: 50 µs to 10 s, the
/// last bucket (`+Inf`) holding the rest.
const BOUNDS_NS: [u64; 17] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// A latency histogram with fixed buckets (50 µs to 10 s), recorded without a lock.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// Observations per bucket; the last one counts those above every bound.
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    /// Sum of every observation, in nanoseconds.
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    #[inline]
    pub(crate) fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(BOUNDS_NS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds this histogram's counts to `into`.
    pub(crate) fn add_to(&self, into: &mut HistogramSnapshot) {
        into.ensure_buckets();
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.load(Ordering::Relaxed);
            into.buckets[i].1 += n;
            into.count += n;
        }
        into.sum_seconds += self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
    }
}

impl HistogramSnapshot {
    /// Gives an empty snapshot its buckets (bounds in seconds, `+Inf` last).
    fn ensure_buckets(&mut self) {
        if self.buckets.is_empty() {
            self.buckets = BOUNDS_NS
                .iter()
                .map(|&b| b as f64 / 1e9)
                .chain([f64::INFINITY])
                .map(|b| (b, 0))
                .collect();
        }
    }

    /// An empty histogram with tidelog's buckets.
    pub(crate) fn empty() -> HistogramSnapshot {
        let mut h = HistogramSnapshot::default();
        h.ensure_buckets();
        h
    }
}

/// A 128-byte aligned pair of counters: one cache line pair of its own (adjacent-line
/// prefetch pulls lines in twos on x86), so that counters written by different threads
/// never share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Pair {
    records: AtomicU64,
    bytes: AtomicU64,
}

/// What a partition log counts: records and bytes appended and read, and its fsyncs.
/// Kept in the log itself, so every append path (leader, idempotent, follower) and every
/// read (consumers, fetches, replica fetches) is counted where it happens.
#[derive(Debug, Default)]
pub(crate) struct LogStats {
    /// Written only under the log's writer lock.
    appended: Pair,
    /// Written by any reader.
    read: Pair,
    /// Segment fsyncs (data and indexes of one segment), by latency.
    fsync: Histogram,
}

/// A point-in-time copy of a [`LogStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LogTraffic {
    pub(crate) records_in: u64,
    pub(crate) bytes_in: u64,
    pub(crate) records_out: u64,
    pub(crate) bytes_out: u64,
}

impl LogStats {
    /// Counts one batch appended. Call only under the log's writer lock: there is one
    /// writer, so a load and a store cannot lose an update, and no atomic
    /// read-modify-write (a locked instruction) is added to the append path.
    #[inline]
    pub(crate) fn appended(&self, records: u64, bytes: u64) {
        let a = &self.appended;
        a.records.store(
            a.records.load(Ordering::Relaxed).wrapping_add(records),
            Ordering::Relaxed,
        );
        a.bytes.store(
            a.bytes.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    /// Counts one read handing out `records` offsets in `bytes` bytes (any thread).
    #[inline]
    pub(crate) fn read(&self, records: u64, bytes: u64) {
        self.read.records.fetch_add(records, Ordering::Relaxed);
        self.read.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Runs `fsync` (one segment's) and records how long it took.
    pub(crate) fn timed_fsync<T>(&self, fsync: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = fsync();
        self.fsync.observe(t.elapsed());
        out
    }

    /// The traffic counters as they stand.
    pub(crate) fn traffic(&self) -> LogTraffic {
        LogTraffic {
            records_in: self.appended.records.load(Ordering::Relaxed),
            bytes_in: self.appended.bytes.load(Ordering::Relaxed),
            records_out: self.read.records.load(Ordering::Relaxed),
            bytes_out: self.read.bytes.load(Ordering::Relaxed),
        }
    }

    /// Adds this log's fsyncs to `into`.
    pub(crate) fn add_fsyncs_to(&self, into: &mut HistogramSnapshot) {
        self.fsync.add_to(into);
    }
}

/// What the prefault thread of a data directory did (see `storage::prefault`).
#[derive(Debug, Default)]
pub(crate) struct PrefaultStats {
    write_jobs: AtomicU64,
    write_bytes: AtomicU64,
    read_jobs: AtomicU64,
    read_bytes: AtomicU64,
    busy_ns: AtomicU64,
    refused: AtomicU64,
}

impl PrefaultStats {
    /// The thread faulted in `bytes` for a writer (`write`) or a reader in `took`.
    pub(crate) fn done(&self, write: bool, bytes: u64, took: Duration) {
        let (jobs, total) = if write {
            (&self.write_jobs, &self.write_bytes)
        } else {
            (&self.read_jobs, &self.read_bytes)
        };
        jobs.fetch_add(1, Ordering::Relaxed);
        total.fetch_add(bytes, Ordering::Relaxed);
        self.busy_ns.fetch_add(
            u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// A range was refused because the thread was busy (the caller faulted it itself).
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters as they stand.
    pub(crate) fn snapshot(&self) -> PrefaultMetrics {
        PrefaultMetrics {
            write_ranges: self.write_jobs.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            read_ranges: self.read_jobs.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            busy_seconds: self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
            refused_ranges: self.refused.load(Ordering::Relaxed),
        }
    }
}

/// Bytes of batches validated by recovery in this process (all data directories).
static RECOVERY_VALIDATED: AtomicU64 = AtomicU64::new(0);

/// Recovery validated `bytes` more bytes of batches (the CRC pass of `full_scan`).
#[inline]
pub(crate) fn recovery_validated(bytes: u64) {
    RECOVERY_VALIDATED.fetch_add(bytes, Ordering::Relaxed);
}

/// Bytes of batches that recovery has validated (CRC checked) in this process so far,
/// over every data directory opened: a program opening a directory a crash left with
/// many unflushed bytes can show progress from another thread while
/// [`Broker::open`](crate::Broker::open) runs.
pub fn recovery_bytes_validated() -> u64 {
    RECOVERY_VALIDATED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_hold_each_observation_once() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(10));
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let mut s = HistogramSnapshot::default();
        h.add_to(&mut s);
        assert_eq!(s.count, 4);
        assert_eq!(s.buckets.len(), BOUNDS_NS.len() + 1);
        assert_eq!(s.buckets[0], (0.00005, 2), "50 µs is inclusive");
        assert_eq!(s.buckets[6], (0.005, 1));
        assert_eq!(s.buckets[BOUNDS_NS.len()], (f64::INFINITY, 1));
        assert!((s.sum_seconds - 60.00306).abs() < 1e-9, "{}", s.sum_seconds);
        // Two histograms add up.
        h.add_to(&mut s);
        assert_eq!(s.count, 8);
    }

    #[test]
    fn log_counters_sit_on_their_own_lines() {
        let s = LogStats::default();
        let appended = std::ptr::addr_of!(s.appended) as usize;
        let read = std::ptr::addr_of!(s.read) as usize;
        assert!(appended.abs_diff(read) >= 128);
        s.appended(3, 300);
        s.appended(1, 100);
        s.read(2, 200);
        assert_eq!(
            s.traffic(),
            LogTraffic {
                records_in: 4,
                bytes_in: 400,
                records_out: 2,
                bytes_out: 200
            }
        );
    }
}
