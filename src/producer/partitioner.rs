//! Choosing a partition for a record.
//!
//! Keyed records go where Kafka's Java client would put them: `toPositive(murmur2(key)) %
//! partitions`, so that a tidelog producer and any Kafka producer agree on which partition
//! holds a key. Keyless records stick to one partition for a while (so they coalesce into
//! large batches, as Kafka's sticky partitioner does) and then move on round-robin.
//!
//! The partitioners here take no lock and allocate nothing per record; the default one
//! writes no shared memory per record either (its sticky count is per thread).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), returned as the
/// Java `int` it computes.
///
/// Seed `0x9747b28c`, the key read as little-endian 32-bit words, the tail mixed in the
/// same order as the Java code.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java truncates the length to an int; keys are far below 2 GiB in practice.
    let length = data.len() as u32;
    let mut h: u32 = SEED ^ length;

    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on
/// `i32::MIN`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition Kafka's default partitioner gives a keyed record:
/// `toPositive(murmur2(key)) % partition_count`.
///
/// `partition_count` must be at least 1; a count of 0 or less yields partition 0 (the
/// caller checks the count before appending, so this never routes a record anywhere).
pub fn partition_for_key(key: &[u8], partition_count: i32) -> i32 {
    if partition_count <= 0 {
        return 0;
    }
    to_positive(murmur2(key)) % partition_count
}

/// Chooses the partition of each record a producer sends without an
/// explicit partition.
///
/// Implementations must be cheap and thread-safe: `partition` is called once per record,
/// from every thread that sends. The result must lie in `0..partition_count`; a result out
/// of range is reported to the sender as an unknown-partition error.
pub trait Partitioner: Send + Sync + 'static {
    /// The partition for a record of `topic` with this key and value, given that the topic
    /// has `partition_count` partitions (at least 1).
    fn partition(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        partition_count: i32,
    ) -> i32;
}

/// Kafka's default partitioner: murmur2 of the key for keyed records; for keyless records,
/// a sticky partition that moves on round-robin every `sticky_records` records.
///
/// Kafka's built-in partitioner switches the sticky partition each time a batch of
/// `batch.size` bytes fills up; counting records instead gives the same spread without
/// any per-topic state or lock. Each sending thread counts its own records (starting one
/// sticky run after the thread before it), so threads sending keyless records fill
/// different partitions' batches and write no shared counter per record.
#[derive(Debug)]
pub struct DefaultPartitioner {
    /// Tells this partitioner's per-thread counts from another's.
    id: u64,
    /// The sticky run the next thread to send through this partitioner starts in.
    next_run: AtomicU64,
    sticky_records: u64,
}

/// Ids of default partitioners, so that a thread's count belongs to one of them.
static PARTITIONER_IDS: AtomicU64 = AtomicU64::new(1);

/// Default partitioners whose counts a thread keeps at once (by id, direct-mapped).
const STICKY_SLOTS: usize = 4;

/// Where a thread is in its sticky runs of one default partitioner.
#[derive(Clone, Copy)]
struct Sticky {
    /// The partitioner's id (0: the slot is free).
    id: u64,
    /// The run: keyless records go to partition `run % partition_count`.
    run: u64,
    /// Records left in the run.
    left: u64,
}

thread_local! {
    /// This thread's runs, the one of a partitioner in slot `id % STICKY_SLOTS`.
    static STICKY: [Cell<Sticky>; STICKY_SLOTS] =
        const { [const { Cell::new(Sticky { id: 0, run: 0, left: 0 }) }; STICKY_SLOTS] };
}

impl DefaultPartitioner {
    /// Keyless records stay on one partition for `sticky_records` records (at least 1).
    pub fn new(sticky_records: u64) -> Self {
        DefaultPartitioner {
            id: PARTITIONER_IDS.fetch_add(1, Ordering::Relaxed),
            next_run: AtomicU64::new(0),
            sticky_records: sticky_records.max(1),
        }
    }

    /// The calling thread's run for its next keyless record. A thread's first run is
    /// the one after the previous thread's first run. (A thread that sends through more
    /// partitioners than it keeps runs for starts over when it comes back to one.)
    #[inline]
    fn next_run(&self) -> u64 {
        STICKY
            .try_with(|slots| {
                let slot = &slots[(self.id % STICKY_SLOTS as u64) as usize];
                let mut s = slot.get();
                if s.id != self.id {
                    s = Sticky {
                        id: self.id,
                        run: self.next_run.fetch_add(1, Ordering::Relaxed),
                        left: self.sticky_records,
                    };
                } else if s.left == 0 {
                    s.run = s.run.wrapping_add(1);
                    s.left = self.sticky_records;
                }
                s.left -= 1;
                slot.set(s);
                s.run
            })
            // The thread is ending (its thread-locals are gone): one run per record.
            .unwrap_or_else(|_| self.next_run.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for DefaultPartitioner {
    /// Sticks for 1,000 records: about one `batch_size` (16 KiB) of 16-byte records.
    fn default() -> Self {
        DefaultPartitioner::new(1000)
    }
}

impl Partitioner for DefaultPartitioner {
    #[inline]
    fn partition(
        &self,
        _topic: &str,
        key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partition_count: i32,
    ) -> i32 {
        match key {
            Some(key) => partition_for_key(key, partition_count),
            // One partition: nothing to choose (and no run to advance).
            None if partition_count <= 1 => 0,
            None => (self.next_run() % partition_count as u64) as i32,
        }
    }
}

/// Every record (keyed or not) goes to the next partition in turn, as Kafka's
/// `RoundRobinPartitioner` does.
#[derive(Debug, Default)]
pub struct RoundRobinPartitioner {
    counter: AtomicU64,
}

impl Partitioner for RoundRobinPartitioner {
    fn partition(
        &self,
        _topic: &str,
        _key: Option<&[u8]>,
        _value: Option<&[u8]>,
        partition_count: i32,
    ) -> i32 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        (n % partition_count.max(1) as u64) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka_utils_test() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "key {:?}", String::from_utf8_lossy(key));
        }
    }

    /// Key -> partition pairs for 1,000 partitions, as printed by Kafka's Java
    /// `Partitioner` (the table kafka-python checks its own partitioner against).
    #[test]
    fn keys_land_where_the_java_client_puts_them() {
        let cases: [(&[u8], i32); 6] = [
            (b"", 681),
            (b"a", 524),
            (b"ab", 434),
            (b"abc", 107),
            (b"123456789", 566),
            (b"\x00 ", 742),
        ];
        for (key, want) in cases {
            assert_eq!(partition_for_key(key, 1000), want, "key {key:?}");
        }
    }

    #[test]
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(5), 5);
    }

    #[test]
    fn keyless_records_stick_then_rotate() {
        let p = DefaultPartitioner::new(3);
        let got: Vec<i32> = (0..9).map(|_| p.partition("t", None, None, 2)).collect();
        assert_eq!(got, vec![0, 0, 0, 1, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn each_thread_sticks_to_its_own_run() {
        let p = std::sync::Arc::new(DefaultPartitioner::new(3));
        let first: Vec<i32> = (0..3).map(|_| p.partition("t", None, None, 4)).collect();
        let other = {
            let p = std::sync::Arc::clone(&p);
            std::thread::spawn(move || {
                (0..6)
                    .map(|_| p.partition("t", None, None, 4))
                    .collect::<Vec<i32>>()
            })
            .join()
            .expect("thread")
        };
        assert_eq!(first, vec![0, 0, 0]);
        // The second thread starts one run later, whatever the first one did since.
        assert_eq!(other, vec![1, 1, 1, 2, 2, 2]);
        // The first thread's count went on where it was.
        assert_eq!(p.partition("t", None, None, 4), 1);
        // Another partitioner on the same thread counts on its own.
        let q = DefaultPartitioner::new(2);
        let got: Vec<i32> = (0..4).map(|_| q.partition("t", None, None, 2)).collect();
        assert_eq!(got, vec![0, 0, 1, 1]);
    }

    #[test]
    fn round_robin_cycles_through_partitions() {
        let p = RoundRobinPartitioner::default();
        let got: Vec<i32> = (0..5)
            .map(|_| p.partition("t", Some(b"k"), None, 3))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1]);
    }

    #[test]
    fn zero_partitions_does_not_panic() {
        assert_eq!(partition_for_key(b"k", 0), 0);
        assert_eq!(
            DefaultPartitioner::default().partition("t", None, None, 0),
            0
        );
    }
}
