//! The record accumulator: one open RecordBatch v2 per partition and sending thread.
//!
//! Each thread that sends through a producer fills its own batch for each partition it
//! sends to (a [`Lane`]). Records are encoded straight into that batch (no per-record
//! allocation), and a lane's lock is only ever contended by the producer's linger thread
//! or a `flush`, so a send costs one uncontended lock and no other shared write. That
//! lock is a spin lock (one compare-and-swap to take it, a plain store to release it:
//! about half the cost of a parking mutex, whose release is a second atomic
//! read-modify-write); a thread that finds it held backs off to yielding and then to
//! short sleeps, since the holder may be appending a batch. A batch
//! is appended to the log as a whole when it reaches `batch_size`, when it is `linger`
//! old (the producer's linger thread), when a synchronous send or `flush()` asks for it,
//! when its thread ends, or when the producer closes. The append happens under the
//! lane's lock, so one thread's batches of one partition reach the log in the order their
//! records were sent: per-thread, per-partition order is kept. Batches of different
//! threads interleave in the log, batch by batch.
//!
//! With `Durability::Fsync` a batch is acknowledged only once the log is fsynced up to
//! its end, and that wait happens after the lane is unlocked ([`Unsynced`]): the
//! appending thread waits through the log's group commit (`PartitionLog::sync_to`), so
//! concurrent durable senders share fsyncs and nobody holds a lock across one.
//!
//! A batch gets a completion slot (one allocation per batch) only when a record in it
//! asks for a receipt; a record's receipt is the slot plus the record's index in the
//! batch, so its offset is `base_offset + index` once the batch is appended. Records
//! sent without a receipt report a failed append through the producer's error sink,
//! which `flush` and `close` return.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use spin::mutex::{SpinMutex, SpinMutexGuard};

use crate::error::{Error, Result};
use crate::record::{BatchBuilder, Compression};
use crate::storage::AppendInfo;
use crate::topic::Partition;

/// What the log answered for one appended batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Appended {
    pub(crate) base_offset: i64,
    pub(crate) log_append_time: Option<i64>,
    /// The leadership it was appended under (an `acks=all` wait is for it).
    pub(crate) epoch: crate::topic::AppendEpoch,
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
    /// A slot whose batch is already appended (or failed).
    pub(crate) fn completed(result: AppendResult) -> Arc<Self> {
        let slot = Arc::new(BatchSlot::default());
        slot.complete(result);
        slot
    }

    pub(crate) fn complete(&self, result: AppendResult) {
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

/// Where the errors of records that nobody waits on go: the first one is kept until
/// `flush` or `close` returns it.
#[derive(Debug, Default)]
pub(crate) struct ErrorSink {
    first: Mutex<Option<Error>>,
}

impl ErrorSink {
    fn record(&self, e: &Error) {
        let mut first = self.first.lock();
        if first.is_none() {
            *first = Some(e.clone());
        }
    }

    /// The first error since the last call, if any.
    pub(crate) fn take(&self) -> Option<Error> {
        self.first.lock().take()
    }
}

/// How the sender of a record learns where it went: what [`Lane::push`] returns.
pub(crate) trait Delivery: Copy {
    /// What the sender gets back.
    type Out;

    /// Called with the lane locked, right after the record (at `index`) was pushed into
    /// a batch that is full at `batch_size` bytes. `committed` is the partition whose
    /// high watermark must pass the record before it is acknowledged (`acks=all` on a
    /// replicated partition).
    fn after_push(
        self,
        st: &mut LaneState,
        index: i32,
        batch_size: usize,
        committed: Option<Partition>,
        config: LaneConfig,
        sink: &ErrorSink,
    ) -> Self::Out;

    /// Called after the lane is unlocked and the batches appended meanwhile were made
    /// durable (with `Durability::Fsync`): `synced` is the outcome of the last one's
    /// fsync (None when nothing waited for one).
    #[inline]
    fn synced(out: Self::Out, synced: Option<Result<()>>) -> Self::Out {
        let _ = synced;
        out
    }
}

/// No receipt: a failed append goes to the producer's error sink.
#[derive(Clone, Copy)]
pub(crate) struct Forget;

/// A receipt on the batch's slot: the slot, the record's index in the batch and the
/// partition to wait on for `acks=all`.
#[derive(Clone, Copy)]
pub(crate) struct Receipt;

/// Append the batch now: the outcome, the record's index in the batch and the partition
/// to wait on for `acks=all` (after the lane is unlocked).
#[derive(Clone, Copy)]
pub(crate) struct Now;

impl Delivery for Forget {
    type Out = ();

    #[inline]
    fn after_push(
        self,
        st: &mut LaneState,
        _: i32,
        batch_size: usize,
        _: Option<Partition>,
        config: LaneConfig,
        sink: &ErrorSink,
    ) {
        st.unobserved = true;
        append_if_due(st, batch_size, config, sink);
    }
}

impl Delivery for Receipt {
    type Out = (Arc<BatchSlot>, i32, Option<Partition>);

    fn after_push(
        self,
        st: &mut LaneState,
        index: i32,
        batch_size: usize,
        committed: Option<Partition>,
        config: LaneConfig,
        sink: &ErrorSink,
    ) -> Self::Out {
        let slot = Arc::clone(st.slot.get_or_insert_with(Arc::default));
        append_if_due(st, batch_size, config, sink);
        (slot, index, committed)
    }
}

impl Delivery for Now {
    type Out = (AppendResult, i32, Option<Partition>);

    fn after_push(
        self,
        st: &mut LaneState,
        index: i32,
        _: usize,
        committed: Option<Partition>,
        config: LaneConfig,
        sink: &ErrorSink,
    ) -> Self::Out {
        (append_now(st, config.fsync, sink), index, committed)
    }

    fn synced(out: Self::Out, synced: Option<Result<()>>) -> Self::Out {
        match (out, synced) {
            ((Ok(_), index, committed), Some(Err(e))) => (Err(e), index, committed),
            (out, _) => out,
        }
    }
}

/// Appends the open batch if it is full (`batch_size`), or if linger is zero.
#[inline]
fn append_if_due(st: &mut LaneState, batch_size: usize, config: LaneConfig, sink: &ErrorSink) {
    if config.immediate || st.builder.size_bytes() >= batch_size {
        append_locked(st, config.fsync, sink);
    }
}

/// A record as the accumulator sees it.
#[derive(Clone, Copy)]
pub(crate) struct Rec<'a> {
    pub(crate) timestamp: i64,
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) headers: &'a [(&'a str, &'a [u8])],
}

/// An upper bound of the bytes a record adds to a batch: its fields plus the largest
/// varint overheads (length 5, attributes 1, timestamp delta 10, offset delta 5, key
/// and value lengths 5 each, header count 5, each header's two lengths 10). Cheaper than
/// the exact size; a batch may end a few bytes short of `batch_size`.
#[inline]
fn max_record_size(r: &Rec<'_>) -> usize {
    let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
    let mut size = 36 + len(r.key) + len(r.value);
    for (k, v) in r.headers {
        size += 10 + k.len() + v.len();
    }
    size
}

/// Settings every push and append of a producer needs.
#[derive(Clone, Copy)]
pub(crate) struct LaneConfig {
    /// `batch.size` in bytes.
    pub(crate) batch_size: usize,
    /// Fsync after each append (`Durability::Fsync`).
    pub(crate) fsync: bool,
    /// `linger` is zero: every record is appended as soon as it is pushed.
    pub(crate) immediate: bool,
    /// `acks=all`: on a replicated partition, a record is refused while the ISR is
    /// below `min.insync.replicas`, and acknowledged once the high watermark passed it.
    pub(crate) acks_all: bool,
}

/// The partition a lane appends to, with what it read from the topic's config.
struct Target {
    partition: Partition,
    /// The topic's `max.message.bytes`: batches are cut below it even if the producer's
    /// `batch_size` is larger (a single larger record still fails, as in Kafka). Read
    /// again after each append, so a topic config change applies to the next batch.
    max_batch: usize,
    /// The topic's `durable.acks`: an `acks=all` send waits for the fsync even on a
    /// single node (read again after each append, as `max_batch`).
    durable_acks: bool,
    /// The producer's `compression.type`; the topic's own `compression.type`, read again
    /// after each append, decides what the builder uses.
    producer_codec: Compression,
}

pub(crate) struct LaneState {
    /// None once the producer closed: the lane holds nothing any more.
    target: Option<Target>,
    builder: BatchBuilder,
    /// Completion of the open batch, made when a record in it first asks for a receipt.
    slot: Option<Arc<BatchSlot>>,
    /// The open batch holds records whose senders asked for no receipt.
    unobserved: bool,
    /// When the first record of the open batch arrived.
    opened: Option<Instant>,
    /// Batches appended under the lock that wait for their fsync (`Durability::Fsync`),
    /// finished once the lock is released (see [`Lane::unlock`]).
    unsynced: Vec<Unsynced>,
}

/// A batch appended with `Durability::Fsync`: acknowledged (its slot completed, its
/// error sent to the sink) once the log is fsynced past it, after the lane is unlocked.
pub(crate) struct Unsynced {
    partition: Partition,
    /// The offset after the batch's last record.
    end: i64,
    appended: Appended,
    slot: Option<Arc<BatchSlot>>,
    unobserved: bool,
}

impl Unsynced {
    /// Waits until the log is durable past the batch (sharing fsyncs with concurrent
    /// senders) and acknowledges it; returns the outcome.
    fn finish(self, sink: &ErrorSink) -> Result<()> {
        let result = self.partition.log().sync_to(self.end);
        if let Err(e) = &result {
            let dropped = self
                .slot
                .as_ref()
                .is_some_and(|s| Arc::strong_count(s) == 1);
            if self.unobserved || dropped {
                sink.record(e);
            }
        }
        if let Some(slot) = self.slot {
            slot.complete(result.clone().map(|()| self.appended));
        }
        result
    }
}

/// One thread's open batch for one partition.
pub(crate) struct Lane {
    state: SpinMutex<LaneState>,
    /// The thread that filled the lane no longer uses it (it ended, or the producer's
    /// topic was deleted): what is left is appended and the lane dropped.
    orphaned: AtomicBool,
}

impl Lane {
    pub(crate) fn new(partition: Partition, batch_size: usize, codec: Compression) -> Self {
        let config = partition.log().config();
        let max_batch = config.max_message_bytes as usize;
        let builder = BatchBuilder::with_capacity(batch_size.min(max_batch) + 1024)
            .compression(config.compression_type.resolve(codec));
        Lane {
            state: SpinMutex::new(LaneState {
                target: Some(Target {
                    partition,
                    max_batch,
                    durable_acks: config.durable_acks,
                    producer_codec: codec,
                }),
                builder,
                slot: None,
                unobserved: false,
                opened: None,
                unsynced: Vec::new(),
            }),
            orphaned: AtomicBool::new(false),
        }
    }

    /// Takes the lane's lock: at once on the sending thread's path, else after a
    /// backoff (see the module's documentation).
    #[inline]
    fn lock(&self) -> SpinMutexGuard<'_, LaneState> {
        match self.state.try_lock() {
            Some(guard) => guard,
            None => self.lock_contended(),
        }
    }

    #[cold]
    fn lock_contended(&self) -> SpinMutexGuard<'_, LaneState> {
        let mut tries = 0u32;
        loop {
            if let Some(guard) = self.state.try_lock() {
                return guard;
            }
            tries = tries.saturating_add(1);
            if tries < 64 {
                std::hint::spin_loop();
            } else if tries < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    pub(crate) fn orphan(&self) {
        self.orphaned.store(true, Ordering::Release);
    }

    pub(crate) fn is_orphaned(&self) -> bool {
        self.orphaned.load(Ordering::Acquire)
    }

    /// Adds a record to the open batch, appending the batch first if the record would
    /// make it exceed `batch_size`, and after if it is now full (or linger is zero, or
    /// `delivery` is [`Now`]). `Error::Closed` once the producer closed the lane; with
    /// `acks=all` on a replicated partition, `Error::NotEnoughReplicas` (nothing pushed)
    /// while its ISR is below `min.insync.replicas`.
    ///
    /// Inlined into the send (its one caller), even though the compiler would not: the
    /// call cost about 20 instructions a record.
    #[inline(always)]
    pub(crate) fn push<D: Delivery>(
        &self,
        r: &Rec<'_>,
        delivery: D,
        config: LaneConfig,
        sink: &ErrorSink,
    ) -> Result<D::Out> {
        let mut st = self.lock();
        let Some(target) = &st.target else {
            return Err(Error::Closed("producer".into()));
        };
        let batch_size = config.batch_size.min(target.max_batch);
        // One atomic load a record; the ISR is looked at only on a replicated partition.
        let committed =
            if config.acks_all && (target.durable_acks || target.partition.log().is_replicated()) {
                target.partition.check_enough_replicas()?;
                Some(target.partition.clone())
            } else {
                None
            };
        if !st.builder.is_empty() && st.builder.size_bytes() + max_record_size(r) > batch_size {
            append_locked(&mut st, config.fsync, sink);
        }
        if st.builder.is_empty() {
            st.opened = Some(Instant::now());
        }
        st.builder.push(r.timestamp, r.key, r.value, r.headers);
        let index = st.builder.len() as i32 - 1;
        let out = delivery.after_push(&mut st, index, batch_size, committed, config, sink);
        Ok(D::synced(out, Self::unlock(st, sink)))
    }

    /// Unlocks the lane, then makes the batches it appended with `Durability::Fsync`
    /// durable and acknowledges them (see [`Unsynced`]). Returns the outcome of the
    /// last one's fsync, None if none was appended.
    #[inline]
    fn unlock(st: SpinMutexGuard<'_, LaneState>, sink: &ErrorSink) -> Option<Result<()>> {
        if st.unsynced.is_empty() {
            return None;
        }
        Self::unlock_unsynced(st, sink)
    }

    /// [`Lane::unlock`] of a lane that appended batches waiting for their fsync.
    #[cold]
    fn unlock_unsynced(
        mut st: SpinMutexGuard<'_, LaneState>,
        sink: &ErrorSink,
    ) -> Option<Result<()>> {
        let unsynced = std::mem::take(&mut st.unsynced);
        drop(st);
        unsynced.into_iter().map(|u| u.finish(sink)).last()
    }

    /// Appends the open batch now (if any). Returns the append error, if one happened.
    pub(crate) fn flush(&self, fsync: bool, sink: &ErrorSink) -> Result<()> {
        let mut st = self.lock();
        let appended = append_locked(&mut st, fsync, sink);
        let synced = Self::unlock(st, sink);
        match (appended, synced) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            _ => Ok(()),
        }
    }

    /// Appends the open batch if it is at least `linger` old, or if the lane is
    /// orphaned. Does not wait for a lane in use.
    pub(crate) fn flush_if_older(&self, linger: Duration, fsync: bool, sink: &ErrorSink) {
        if let Some(mut st) = self.state.try_lock()
            && st
                .opened
                .is_some_and(|t| self.is_orphaned() || t.elapsed() >= linger)
        {
            append_locked(&mut st, fsync, sink);
            Self::unlock(st, sink);
        }
    }

    /// True if the open batch holds no record (false while the lane is in use).
    pub(crate) fn is_idle_and_empty(&self) -> bool {
        self.state
            .try_lock()
            .is_some_and(|st| st.builder.is_empty())
    }

    /// Appends what is left and lets go of the partition and the batch buffer: the lane
    /// refuses records from now on. Returns the append error, if one happened.
    pub(crate) fn retire(&self, fsync: bool, sink: &ErrorSink) -> Result<()> {
        let mut st = self.lock();
        let appended = append_locked(&mut st, fsync, sink);
        st.target = None;
        st.builder = BatchBuilder::with_capacity(0);
        match (appended, Self::unlock(st, sink)) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            _ => Ok(()),
        }
    }
}

/// Appends the open batch of `st` if it has records (see [`append_now`]).
fn append_locked(st: &mut LaneState, fsync: bool, sink: &ErrorSink) -> Option<AppendResult> {
    (!st.builder.is_empty()).then(|| append_now(st, fsync, sink))
}

/// Appends the open batch of `st`, completes its slot, and sends the error of records
/// nobody waits on (sent without a receipt, or whose receipts were all dropped) to
/// `sink`. A lane whose producer closed appends nothing: `Error::Closed`. With `fsync`,
/// a batch that was appended is acknowledged only after the lane is unlocked, once it
/// is durable (it goes to `st.unsynced`; see [`Lane::unlock`]).
fn append_now(st: &mut LaneState, fsync: bool, sink: &ErrorSink) -> AppendResult {
    let LaneState {
        target,
        builder,
        slot,
        unobserved,
        opened,
        unsynced,
    } = st;
    let result = match target {
        Some(t) => {
            let result = t.partition.append_builder_at(builder).map(
                |(info, epoch): (AppendInfo, crate::topic::AppendEpoch)| {
                    let appended = Appended {
                        base_offset: info.base_offset,
                        log_append_time: info.log_append_time,
                        epoch,
                    };
                    if fsync {
                        unsynced.push(Unsynced {
                            partition: t.partition.clone(),
                            end: info.last_offset + 1,
                            appended,
                            slot: slot.take(),
                            unobserved: std::mem::take(unobserved),
                        });
                    }
                    appended
                },
            );
            let config = t.partition.log().config();
            t.max_batch = config.max_message_bytes as usize;
            t.durable_acks = config.durable_acks;
            let codec = config.compression_type.resolve(t.producer_codec);
            if builder.codec() != codec {
                *builder = std::mem::take(builder).compression(codec);
            }
            result
        }
        None => Err(Error::Closed("producer".into())),
    };
    if let Err(e) = &result {
        // Records sent without a receipt, or whose receipts were all dropped: nobody
        // else hears of it. (A synchronous sender gets the result itself.)
        let dropped = slot.as_ref().is_some_and(|s| Arc::strong_count(s) == 1);
        if *unobserved || dropped {
            sink.record(e);
        }
    }
    if let Some(slot) = slot.take() {
        slot.complete(result.clone());
    }
    *unobserved = false;
    *opened = None;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn the_sink_keeps_the_first_error_until_taken() {
        let sink = ErrorSink::default();
        assert!(sink.take().is_none());
        sink.record(&Error::Timeout("first".into()));
        sink.record(&Error::Timeout("second".into()));
        match sink.take() {
            Some(Error::Timeout(m)) => assert_eq!(m, "first"),
            other => panic!("expected the first error, got {other:?}"),
        }
        assert!(sink.take().is_none(), "taken once");
    }
}
