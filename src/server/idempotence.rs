//! Idempotent producers: producer ids, and per-partition sequence checks so that a
//! retried batch lands once.
//!
//! Kafka's rules (`ProducerStateManager`), per partition and producer id:
//! - a batch whose first and last sequence equal one of the producer's last five batches
//!   is a duplicate: it is not appended and the original offset is returned;
//! - otherwise, with the producer's current epoch, the first sequence must follow the
//!   last one (`DUPLICATE_SEQUENCE_NUMBER` if it is older, `OUT_OF_ORDER_SEQUENCE_NUMBER`
//!   if it skips ahead); a newer epoch must start at sequence 0; an older epoch is
//!   `INVALID_PRODUCER_EPOCH`;
//! - a producer the partition has never seen may start anywhere.
//!
//! The state survives a restart because it is rebuilt from the log itself: the first
//! idempotent produce to a partition after the server starts reads the batch headers
//! of that partition (the producer id, epoch and sequences are in every batch header).
//! Producer ids are handed out from blocks of [`ID_BLOCK`] whose upper end is written to
//! `<data dir>/producer-id-block` (crash-safe checkpoint) before any id of the block is
//! used, so an id is never given twice, across restarts too.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::backend::PartitionOps;
use crate::Result;

/// Producer ids reserved on disk at a time.
pub(crate) const ID_BLOCK: i64 = 1000;

/// Batches remembered per producer for duplicate detection (Kafka keeps five: the most a
/// producer may have in flight with idempotence on).
const REMEMBERED_BATCHES: usize = 5;

/// Kafka error codes of the sequence checks.
pub(crate) mod codes {
    /// The batch is older than the producer's last one but is not a known duplicate.
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    /// The batch does not follow the producer's last one.
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// The batch's epoch is older than the producer's current one.
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
}

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMeta {
    /// Sequence of its first record.
    pub first_seq: i32,
    /// Sequence of its last record.
    pub last_seq: i32,
    /// Offset of its first record.
    pub base_offset: i64,
}

/// What a producer has written to one partition.
#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    /// The last few batches, oldest first.
    batches: VecDeque<BatchMeta>,
}

/// The verdict on one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Append it.
    Append,
    /// Already in the log at this base offset; do not append.
    Duplicate(i64),
    /// Refuse it with this Kafka error code.
    Refuse(i16),
}

/// The sequence after `seq` (sequences wrap from `i32::MAX` to 0).
pub(crate) fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX { 0 } else { seq + 1 }
}

/// The sequence of the last record of a batch of `count_minus_one + 1` records starting
/// at `first`.
pub(crate) fn last_seq(first: i32, last_offset_delta: i32) -> i32 {
    let sum = i64::from(first) + i64::from(last_offset_delta);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// Producer state of one partition.
#[derive(Debug, Default)]
pub(crate) struct PartitionProducers {
    producers: HashMap<i64, ProducerEntry>,
}

impl PartitionProducers {
    /// Judge a batch of producer `pid` with `epoch` and sequences `first..=last`.
    pub(crate) fn check(&self, pid: i64, epoch: i16, first: i32, last: i32) -> Check {
        let Some(entry) = self.producers.get(&pid) else {
            return Check::Append;
        };
        if epoch < entry.epoch {
            return Check::Refuse(codes::INVALID_PRODUCER_EPOCH);
        }
        if epoch > entry.epoch {
            return if first == 0 {
                Check::Append
            } else {
                Check::Refuse(codes::OUT_OF_ORDER_SEQUENCE_NUMBER)
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
        {
            return Check::Duplicate(dup.base_offset);
        }
        match entry.batches.back() {
            None => Check::Append,
            Some(prev) if first == next_seq(prev.last_seq) => Check::Append,
            Some(prev) if first <= prev.last_seq => Check::Refuse(codes::DUPLICATE_SEQUENCE_NUMBER),
            Some(_) => Check::Refuse(codes::OUT_OF_ORDER_SEQUENCE_NUMBER),
        }
    }

    /// Remember an appended batch.
    pub(crate) fn record(&mut self, pid: i64, epoch: i16, meta: BatchMeta) {
        let entry = self.producers.entry(pid).or_default();
        if epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = epoch;
        }
        entry.batches.push_back(meta);
        while entry.batches.len() > REMEMBERED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Rebuild from the batch headers of `log`.
    fn load(log: &dyn PartitionOps) -> Result<PartitionProducers> {
        let mut state = PartitionProducers::default();
        let mut offset = log.log_start_offset();
        while offset < log.high_watermark() {
            let slice = log.read(offset, 4 * 1024 * 1024)?;
            if slice.is_empty() {
                break;
            }
            for b in slice.batches() {
                if b.producer_id() >= 0 {
                    let first = b.base_sequence();
                    state.record(
                        b.producer_id(),
                        b.producer_epoch(),
                        BatchMeta {
                            first_seq: first,
                            last_seq: last_seq(first, b.last_offset_delta()),
                            base_offset: b.base_offset(),
                        },
                    );
                }
            }
            if slice.next_offset() <= offset {
                break;
            }
            offset = slice.next_offset();
        }
        Ok(state)
    }
}

/// The next producer ids to hand out.
#[derive(Debug)]
struct IdBlock {
    /// Next id to give.
    next: i64,
    /// First id not reserved on disk.
    limit: i64,
}

/// One partition's producer state, locked across check and append.
type SharedProducers = Arc<Mutex<PartitionProducers>>;

/// Reserves a block of producer ids cluster-wide (a cluster node asks its controller):
/// given the block size, returns the block's first id.
pub(crate) type BlockSource = Box<dyn Fn(i64) -> Result<i64> + Send + Sync>;

/// Producer ids and the producer state of every partition, for one server.
pub(crate) struct ProducerStates {
    /// Where the reserved id block is recorded.
    block_file: PathBuf,
    ids: Mutex<Option<IdBlock>>,
    partitions: Mutex<HashMap<(String, i32), SharedProducers>>,
    /// On a cluster node, blocks come from the controller instead of `block_file`.
    block_source: Option<BlockSource>,
}

impl std::fmt::Debug for ProducerStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerStates")
            .field("block_file", &self.block_file)
            .field("cluster_blocks", &self.block_source.is_some())
            .finish_non_exhaustive()
    }
}

impl ProducerStates {
    /// State for a broker whose data directory is `dir`.
    pub(crate) fn new(dir: PathBuf) -> ProducerStates {
        ProducerStates {
            block_file: dir.join("producer-id-block"),
            ids: Mutex::new(None),
            partitions: Mutex::new(HashMap::new()),
            block_source: None,
        }
    }

    /// State for a cluster node: id blocks are reserved through `source`, so no two
    /// nodes hand out the same id.
    pub(crate) fn with_block_source(dir: PathBuf, source: BlockSource) -> ProducerStates {
        ProducerStates {
            block_source: Some(source),
            ..ProducerStates::new(dir)
        }
    }

    /// A new producer id, never handed out before by this data directory (by this
    /// cluster, on a cluster node).
    pub(crate) fn new_producer_id(&self) -> Result<i64> {
        let mut ids = self.ids.lock();
        if let Some(source) = &self.block_source {
            if ids.as_ref().is_none_or(|b| b.next >= b.limit) {
                let start = source(ID_BLOCK)?;
                *ids = Some(IdBlock {
                    next: start,
                    limit: start + ID_BLOCK,
                });
            }
            let block = ids.as_mut().expect("set above");
            let id = block.next;
            block.next += 1;
            return Ok(id);
        }
        let block = match ids.as_mut() {
            Some(b) => b,
            None => {
                let start = match crate::storage::read_checkpoint(&self.block_file)? {
                    Some(bytes) if bytes.len() == 8 => {
                        i64::from_be_bytes(bytes[..8].try_into().unwrap_or([0; 8]))
                    }
                    Some(_) => {
                        return Err(crate::Error::corrupt(
                            self.block_file.display(),
                            0,
                            "a producer id block is 8 bytes",
                        ));
                    }
                    None => 0,
                };
                ids.insert(IdBlock {
                    next: start,
                    limit: start,
                })
            }
        };
        if block.next >= block.limit {
            let limit = block.next + ID_BLOCK;
            crate::storage::write_checkpoint(&self.block_file, &limit.to_be_bytes())?;
            block.limit = limit;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    /// The producer state of `topic`/`partition`, loaded from `log` on first use.
    pub(crate) fn partition(
        &self,
        topic: &str,
        partition: i32,
        log: &dyn PartitionOps,
    ) -> Result<SharedProducers> {
        let key = (topic.to_string(), partition);
        if let Some(state) = self.partitions.lock().get(&key) {
            return Ok(state.clone());
        }
        // Load outside the map lock; if two threads race, the first insert wins (both
        // loaded the same log, and appends to it go through this state's lock).
        let loaded = Arc::new(Mutex::new(PartitionProducers::load(log)?));
        Ok(self.partitions.lock().entry(key).or_insert(loaded).clone())
    }

    /// Forget the state of a deleted topic.
    pub(crate) fn forget_topic(&self, topic: &str) {
        self.partitions.lock().retain(|(t, _), _| t != topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(first: i32, last: i32, base_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq: first,
            last_seq: last,
            base_offset,
        }
    }

    #[test]
    fn sequences_must_follow_and_duplicates_land_once() {
        let mut s = PartitionProducers::default();
        assert_eq!(s.check(7, 0, 0, 9), Check::Append);
        s.record(7, 0, meta(0, 9, 100));
        assert_eq!(s.check(7, 0, 0, 9), Check::Duplicate(100));
        assert_eq!(s.check(7, 0, 10, 19), Check::Append);
        s.record(7, 0, meta(10, 19, 110));
        assert_eq!(s.check(7, 0, 10, 19), Check::Duplicate(110));
        assert_eq!(
            s.check(7, 0, 25, 30),
            Check::Refuse(codes::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(
            s.check(7, 0, 5, 12),
            Check::Refuse(codes::DUPLICATE_SEQUENCE_NUMBER)
        );
        // Another producer is independent.
        assert_eq!(s.check(8, 0, 40, 41), Check::Append);
    }

    #[test]
    fn epochs_fence_and_reset_sequences() {
        let mut s = PartitionProducers::default();
        s.record(1, 3, meta(0, 4, 0));
        assert_eq!(
            s.check(1, 2, 5, 5),
            Check::Refuse(codes::INVALID_PRODUCER_EPOCH)
        );
        assert_eq!(
            s.check(1, 4, 5, 5),
            Check::Refuse(codes::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(1, 4, 0, 0), Check::Append);
        s.record(1, 4, meta(0, 0, 5));
        assert_eq!(s.check(1, 4, 1, 1), Check::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
        let mut s = PartitionProducers::default();
        for i in 0..6 {
            s.record(1, 0, meta(i, i, i64::from(i)));
        }
        assert_eq!(
            s.check(1, 0, 0, 0),
            Check::Refuse(codes::DUPLICATE_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(1, 0, 1, 1), Check::Duplicate(1));
        assert_eq!(last_seq(i32::MAX - 1, 3), 1);
        let mut w = PartitionProducers::default();
        w.record(2, 0, meta(i32::MAX - 1, i32::MAX, 0));
        assert_eq!(w.check(2, 0, 0, 4), Check::Append);
    }

    #[test]
    fn producer_ids_are_never_reused_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerStates::new(dir.path().to_path_buf());
        let first: Vec<i64> = (0..3).map(|_| a.new_producer_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerStates::new(dir.path().to_path_buf());
        let next = b.new_producer_id().unwrap();
        assert!(next >= ID_BLOCK, "{next}");
    }
}
