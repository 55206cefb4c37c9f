//! The record accumulator: one open RecordBatch v2 per partition, shared by every thread
//! that sends to it.
//!
//! Records are encoded straight into the partition's open batch (no per-record
//! allocation). A batch is appended to the log as a whole when it reaches `batch_size`,
//! when it is `linger` old (the producer's linger thread), when a synchronous send or
//! `flush()` asks for it, or when the producer closes. The append happens under the
//! partition's accumulator lock, so batches of one partition reach the log in the order
//! their records were accumulated: per-thread, per-partition order is kept.
//!
//! Each batch has one shared completion slot (one allocation per batch); a record's
//! receipt is the slot plus the record's index in the batch, so its offset is
//! `base_offset + index` once the batch is appended.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::record::{BatchBuilder, Compression};
use crate::storage::AppendInfo;
use crate::topic::Partition;

/// What the log answered for one appended batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Appended {
    pub(crate) base_offset: i64,
    pub(crate) log_append_time: Option<i64>,
}

/// The outcome of appending one batch, shared by its records (`Error` clones cheaply
/// and keeps its variant: a timeout stays a timeout).
pub(crate) type AppendResult = Result<Appended>;

/// Completion of one batch, shared by the receipts of its records.
#[derive(Debug, Default)]
pub(crate) struct BatchSlot {
    done: Mutex<Option<AppendResult>>,
    cv: Condvar,
}

impl BatchSlot {
    fn complete(&self, result: AppendResult) {
        *self.done.lock() = Some(result);
        self.cv.notify_all();
    }

    /// Waits until the batch is appended, or `deadline` (None = forever).
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Option<AppendResult> {
        let mut done = self.done.lock();
        loop {
            if let Some(r) = done.as_ref() {
                return Some(r.clone());
            }
            match deadline {
                Some(d) => {
                    if self.cv.wait_until(&mut done, d).timed_out() {
                        return done.as_ref().cloned();
                    }
                }
                None => self.cv.wait(&mut done),
            }
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.lock().is_some()
    }
}

struct AccState {
    builder: BatchBuilder,
    slot: Arc<BatchSlot>,
    /// When the first record of the open batch arrived.
    opened: Option<Instant>,
}

/// An upper bound of the bytes a record adds to a batch: its fields plus the largest
/// varint overheads (length 5, attributes 1, timestamp delta 10, offset delta 5, key
/// and value lengths 5 each, header count 5, each header's two lengths 10). Cheaper than
/// the exact size; a batch may end a few bytes short of `batch_size`.
fn max_record_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&str, &[u8])]) -> usize {
    let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
    let h: usize = headers.iter().map(|(k, v)| 10 + k.len() + v.len()).sum();
    36 + len(key) + len(value) + h
}

/// The accumulator of one partition.
pub(crate) struct PartitionAccumulator {
    pub(crate) partition: Partition,
    /// The topic's `max.message.bytes`: batches are cut below it even if the producer's
    /// `batch_size` is larger (a single larger record still fails, as in Kafka). Read
    /// again after each append, so a topic config change applies to the next batch.
    max_batch: AtomicUsize,
    /// The producer's `compression.type`; the topic's own `compression.type`, read again
    /// after each append, decides what the builder uses.
    producer_codec: Compression,
    state: Mutex<AccState>,
}

/// Where one record went: its batch's slot and its index in the batch.
pub(crate) struct Pending {
    pub(crate) slot: Arc<BatchSlot>,
    pub(crate) index: i32,
}

impl PartitionAccumulator {
    pub(crate) fn new(partition: Partition, batch_size: usize, codec: Compression) -> Self {
        let config = partition.log().config();
        let max_batch = config.max_message_bytes as usize;
        PartitionAccumulator {
            partition,
            max_batch: AtomicUsize::new(max_batch),
            producer_codec: codec,
            state: Mutex::new(AccState {
                builder: BatchBuilder::with_capacity(batch_size.min(max_batch) + 1024)
                    .compression(config.compression_type.resolve(codec)),
                slot: Arc::new(BatchSlot::default()),
                opened: None,
            }),
        }
    }

    /// Adds a record to the open batch, appending the batch first if the record would
    /// make it exceed `batch_size`, and after if it is now full.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, &[u8])],
        batch_size: usize,
        fsync: bool,
        flush_now: bool,
    ) -> Pending {
        let batch_size = batch_size.min(self.max_batch.load(Ordering::Relaxed));
        let mut st = self.state.lock();
        if !st.builder.is_empty()
            && st.builder.size_bytes() + max_record_size(key, value, headers) > batch_size
        {
            self.append_locked(&mut st, fsync);
        }
        if st.builder.is_empty() {
            st.opened = Some(Instant::now());
        }
        st.builder.push(timestamp, key, value, headers);
        let pending = Pending {
            slot: Arc::clone(&st.slot),
            index: st.builder.len() as i32 - 1,
        };
        if flush_now || st.builder.size_bytes() >= batch_size {
            self.append_locked(&mut st, fsync);
        }
        pending
    }

    /// Appends the open batch now (if any). Returns the append error, if one happened.
    pub(crate) fn flush(&self, fsync: bool) -> Result<()> {
        let mut st = self.state.lock();
        match self.append_locked(&mut st, fsync) {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Appends the open batch if it is at least `linger` old. Does not wait for a busy
    /// partition.
    pub(crate) fn flush_if_older(&self, linger: Duration, fsync: bool) {
        if let Some(mut st) = self.state.try_lock()
            && st.opened.is_some_and(|t| t.elapsed() >= linger)
        {
            self.append_locked(&mut st, fsync);
        }
    }

    fn append_locked(&self, st: &mut AccState, fsync: bool) -> Option<AppendResult> {
        if st.builder.is_empty() {
            return None;
        }
        let AccState {
            builder,
            slot,
            opened,
            ..
        } = st;
        let result = self
            .partition
            .append_builder(builder)
            .and_then(|info: AppendInfo| {
                if fsync {
                    self.partition.sync()?;
                }
                Ok(Appended {
                    base_offset: info.base_offset,
                    log_append_time: info.log_append_time,
                })
            });
        let config = self.partition.log().config();
        self.max_batch
            .store(config.max_message_bytes as usize, Ordering::Relaxed);
        let codec = config.compression_type.resolve(self.producer_codec);
        if builder.codec() != codec {
            *builder = std::mem::take(builder).compression(codec);
        }
        slot.complete(result.clone());
        *slot = Arc::new(BatchSlot::default());
        *opened = None;
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::producer::DeliveryReceipt;

    /// Receipts of `n` records of one batch.
    fn receipts(slot: &Arc<BatchSlot>, n: i32) -> Vec<DeliveryReceipt> {
        (0..n)
            .map(|index| DeliveryReceipt {
                slot: Arc::clone(slot),
                index,
                partition: 2,
                timestamp: 0,
                committed: None,
            })
            .collect()
    }

    #[test]
    fn a_shared_timeout_stays_a_timeout_for_every_record() {
        let slot = Arc::new(BatchSlot::default());
        let waiting = receipts(&slot, 3);
        slot.complete(Err(Error::Timeout(
            "waiting for the in-sync replicas".into(),
        )));
        for r in waiting {
            match r.wait() {
                Err(Error::Timeout(m)) => assert_eq!(m, "waiting for the in-sync replicas"),
                other => panic!("expected the batch's timeout, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_shared_io_error_keeps_the_operating_system_error() {
        let slot = Arc::new(BatchSlot::default());
        let waiting = receipts(&slot, 2);
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        slot.complete(Err(Error::io("fsync", "/data/events-2", eio)));
        let sources: Vec<Arc<std::io::Error>> = waiting
            .into_iter()
            .map(|r| match r.wait() {
                Err(Error::Io { op, path, source }) => {
                    assert_eq!((op, path.to_str()), ("fsync", Some("/data/events-2")));
                    assert_eq!(source.raw_os_error(), Some(libc::EIO));
                    source
                }
                other => panic!("expected the batch's I/O error, got {other:?}"),
            })
            .collect();
        assert!(Arc::ptr_eq(&sources[0], &sources[1]), "one error, shared");
    }
}
