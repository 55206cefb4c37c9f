//! The transaction coordinator's shell: one [`TxnCoordinator`] per led partition of
//! `__transaction_state`, the writes of their records, the delivery of markers and
//! the timer that aborts timed-out transactions and expires idle transactional ids.
//!
//! Rules it keeps (docs/design.md, "Transactions"):
//!
//! - The requests of one partition are handled one at a time under its lock, and an
//!   outcome's record is in the partition's log before the lock is released and the
//!   request answered, so no request sees a state the log does not hold.
//! - A failed write reloads the partition from its log (`replay`, `finish_loading`):
//!   the memory is again what the log says, and the markers of prepared transactions
//!   are sent again. Until a partition is loaded its ids get
//!   COORDINATOR_LOAD_IN_PROGRESS; an id of a partition not led here gets
//!   NOT_COORDINATOR.
//! - Markers are sent in the background, as Kafka's TransactionMarkerChannelManager
//!   does: EndTxn (and the fencing InitProducerId, a timeout's abort, a load) only
//!   queues them once the Prepare record is written, and the marker sender threads
//!   write them through a [`MarkerWriter`] (the broker's appends to its local
//!   leaders; on a cluster, WriteTxnMarkers to the others), so a slow or unreachable
//!   leader never holds an answer. A sender writes every transaction queued meanwhile
//!   in one batch ([`MarkerWriter::write_batch`]: one WriteTxnMarkers per leader). Partitions whose marker failed are retried by the
//!   timer until every one is written, then [`TxnCoordinator::markers_written`]
//!   completes the transaction (CompleteCommit or CompleteAbort). Until then the id
//!   answers CONCURRENT_TRANSACTIONS to InitProducerId, AddPartitionsToTxn and a
//!   retried EndTxn.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::events;
use super::log::partition_for;
use super::state::{
    AddPartitionsRequest, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest,
    PartitionVerdicts, ProducerIdAndEpoch, TopicPartition, TransactionMetadata, TxnCoordinator,
    TxnLogWrite, TxnMarkers, TxnOutcome, is_epoch_exhausted,
};
use crate::config::TransactionConfig;
use crate::error::{Error, Result, TxnError};
use crate::storage::now_ms;

/// How often the timer retries markers that could not be written, and partitions
/// whose reload failed.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// The marker sender threads: a leader that is slow to answer holds one of them, not
/// the markers of every other transaction.
const MARKER_SENDERS: usize = 4;

/// The most transactions a marker sender takes from its queue at once, written with
/// one [`MarkerWriter::write_batch`] (one WriteTxnMarkers per leader on a cluster).
const MARKER_BATCH: usize = 256;

/// Called by [`MarkerWriter::write_batch`] once per transaction of the batch: its index
/// and the partitions whose marker could not be written, each with its error.
pub type MarkersDone<'a> = dyn Fn(usize, Vec<(TopicPartition, Error)>) + Sync + 'a;

/// Called with each record of a `__transaction_state` partition: its key and value
/// (`None`: a tombstone).
pub type RecordVisitor<'a> = dyn FnMut(&[u8], Option<&[u8]>) -> Result<()> + 'a;

/// Where the coordinator writes the records of one `__transaction_state` partition,
/// and reads them back when it loads.
pub trait TxnStateLog: Send + Sync {
    /// Appends one record (a `None` value is a tombstone); returns once it is
    /// committed (acks=all). An error means nothing may be taken as written.
    fn append(&self, key: &[u8], value: Option<&[u8]>) -> Result<()>;
    /// Calls `f` with every record of the partition, oldest first.
    fn read_all(&self, f: &mut RecordVisitor<'_>) -> Result<()>;
}

/// Writes the COMMIT or ABORT markers of a transaction to its partitions' leaders.
pub trait MarkerWriter: Send + Sync {
    /// Writes the marker to every partition of `markers`; returns the partitions whose
    /// marker could not be written (retried later), each with its error. A partition
    /// that no longer exists counts as written, as in Kafka.
    fn write_markers(&self, markers: &TxnMarkers) -> Vec<(TopicPartition, Error)>;

    /// Writes the markers of several transactions, as Kafka's
    /// TransactionMarkerChannelManager sends them: on a cluster one WriteTxnMarkers
    /// per leader, carrying the markers of every transaction of `batch` with a
    /// partition there. Calls `done` once per transaction, as soon as each of its
    /// partitions is answered (possibly from another thread, and before the other
    /// transactions are), with the partitions that could not be written. The default
    /// writes one transaction after another with [`MarkerWriter::write_markers`], so
    /// a slow write holds the rest of the batch: a writer whose leaders may stall
    /// answers each leader on its own.
    fn write_batch(&self, batch: &[TxnMarkers], done: &MarkersDone<'_>) {
        for (i, m) in batch.iter().enumerate() {
            done(i, self.write_markers(m));
        }
    }
}

/// [`MarkerWriter::write_markers`] for a writer whose [`MarkerWriter::write_batch`]
/// does the work: `m` as a batch of one, its failed partitions collected.
pub(crate) fn write_markers_as_batch<W: MarkerWriter + ?Sized>(
    writer: &W,
    m: &TxnMarkers,
) -> Vec<(TopicPartition, Error)> {
    let failed = parking_lot::Mutex::new(Vec::new());
    writer.write_batch(std::slice::from_ref(m), &|_, f| failed.lock().extend(f));
    failed.into_inner()
}

/// Answers every transaction of `batch` with all its partitions failed by `error`
/// (a writer whose broker or node is gone).
pub(crate) fn fail_batch(batch: &[TxnMarkers], done: &MarkersDone<'_>, error: impl Fn() -> Error) {
    for (i, m) in batch.iter().enumerate() {
        done(
            i,
            m.partitions
                .iter()
                .map(|tp| (tp.clone(), error()))
                .collect(),
        );
    }
}

impl TxnStateLog for crate::topic::Partition {
    fn append(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        // acks=all: refused while the ISR is below min.insync.replicas, as Kafka's
        // coordinator's writes are.
        self.check_enough_replicas()?;
        let mut builder = crate::record::BatchBuilder::new();
        builder.push(now_ms(), Some(key), value, &[]);
        let (info, appended) = self.append_batch_at(&builder.finish())?;
        self.wait_committed_at(info.last_offset, appended, WRITE_TIMEOUT)
    }

    fn read_all(&self, f: &mut RecordVisitor<'_>) -> Result<()> {
        let end = self.log_end_offset();
        let mut offset = self.log_start_offset();
        while offset < end {
            let slice =
                self.log()
                    .read_bounded(offset, 1 << 20, crate::storage::ReadLimit::LogEnd)?;
            let mut next = offset;
            for batch in crate::record::batches(&slice) {
                let batch = batch?;
                next = batch.last_offset() + 1;
                if batch.is_control() {
                    continue;
                }
                for record in batch.records() {
                    let record = record?;
                    if record.offset < offset {
                        continue;
                    }
                    if let Some(key) = record.key {
                        f(key, record.value)?;
                    }
                }
            }
            if next <= offset {
                break;
            }
            offset = next;
        }
        Ok(())
    }
}

/// How long a write to `__transaction_state` waits for the in-sync replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// One led partition of `__transaction_state`.
struct Slot {
    partition: i32,
    log: Arc<dyn TxnStateLog>,
    state: Mutex<TxnCoordinator>,
    /// Set when a write failed and the reload that followed failed too: the timer
    /// retries the reload (the partition answers COORDINATOR_LOAD_IN_PROGRESS).
    needs_reload: AtomicBool,
    /// Markers not yet written to every partition: retried by the timer.
    pending: Mutex<Vec<TxnMarkers>>,
    /// Adds waiting for `state`, one open batch per producer (see
    /// [`TransactionCoordinator::add_partitions`]).
    adds: Mutex<HashMap<AddKey, Arc<AddBatch>>>,
    /// Leaders' adds waiting for the transaction of an id to complete (its markers
    /// being written), batches of one producer and epoch per id: the completion adds
    /// all their partitions and writes one record for the completion and the adds (see
    /// [`TransactionCoordinator::add_partitions_when_completed`]). Changed only under
    /// `state`'s lock.
    parked: Mutex<HashMap<String, Vec<Arc<AddBatch>>>>,
}

/// Whose adds go into one batch: the transactional id, producer id and epoch, and
/// the client's transaction version.
type AddKey = (String, i64, i16, i16);

/// Adds of one producer's transaction that waited for their partition's lock together:
/// their partitions added with one write of the transaction's state.
struct AddBatch {
    /// The partitions of every add in the batch (while it is open, in `Slot::adds`).
    request: Mutex<AddPartitionsRequest>,
    /// The batch's answer, once it was written (or refused).
    answer: Mutex<Option<std::result::Result<(), TxnError>>>,
    /// The batch waits in `Slot::parked` for its transaction's completion (its
    /// answer comes from there).
    parked: AtomicBool,
}

/// What [`TransactionCoordinator::add_or_park`] did with an add.
enum AddOrParked {
    Answered(std::result::Result<(), TxnError>),
    /// Parked until the producer's previous transaction completes.
    Parked(Arc<AddBatch>),
}

/// The markers of one transaction, for a marker sender thread.
struct MarkerJob {
    slot: Arc<Slot>,
    markers: TxnMarkers,
}

struct Inner {
    config: TransactionConfig,
    /// Partitions of `__transaction_state` (0 until it exists).
    partition_count: AtomicI32,
    slots: RwLock<HashMap<i32, Arc<Slot>>>,
    markers: RwLock<Option<Arc<dyn MarkerWriter>>>,
    closed: AtomicBool,
    /// The timer waits on it; notified when markers are queued and at shutdown.
    wake: Mutex<()>,
    woken: Condvar,
    timer: Mutex<Option<JoinHandle<()>>>,
    /// The queue of the marker sender threads (`None` until they are started, and
    /// after shutdown: markers then wait in their partition's `pending` for the
    /// timer).
    queue: Mutex<Option<crossbeam_channel::Sender<MarkerJob>>>,
    senders: Mutex<Vec<JoinHandle<()>>>,
    /// How many times a transaction's markers were all written (its completion was
    /// tried), and the condition variable [`TransactionCoordinator::wait_completed`]
    /// sleeps on: an in-process producer waiting for its markers is woken when they
    /// are written, not at its next poll.
    completed: Mutex<u64>,
    completed_cv: Condvar,
}

/// The transaction coordinator of a broker: the shell around one [`TxnCoordinator`]
/// per led `__transaction_state` partition. Cheap to clone; every clone is the same
/// coordinator.
#[derive(Clone)]
pub struct TransactionCoordinator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TransactionCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionCoordinator")
            .field("config", &self.inner.config)
            .field("partitions", &self.inner.slots.read().len())
            .finish_non_exhaustive()
    }
}

fn max_timeout_ms(config: &TransactionConfig) -> i32 {
    i32::try_from(config.max_timeout.as_millis()).unwrap_or(i32::MAX)
}

/// The refusal of a request whose record could not be written.
fn write_failed(e: &Error) -> TxnError {
    match e {
        // The partition's leadership moved: find the coordinator again.
        Error::NotLeaderOrFollower { .. } | Error::Closed(_) => TxnError::NotCoordinator,
        other => TxnError::CoordinatorNotAvailable {
            reason: other.to_string(),
        },
    }
}

impl Slot {
    /// Replays the partition into a new coordinator at `epoch` and returns the markers
    /// of the transactions it found prepared.
    fn load(&self, st: &mut TxnCoordinator) -> Result<Vec<TxnMarkers>> {
        let mut fresh = TxnCoordinator::loading(st.coordinator_epoch(), st.max_timeout_ms());
        // Until the replay succeeds, the partition answers COORDINATOR_LOAD_IN_PROGRESS.
        *st = fresh.clone();
        self.log.read_all(&mut |k, v| fresh.replay(k, v))?;
        let markers = fresh.finish_loading();
        *st = fresh;
        self.needs_reload.store(false, Ordering::Release);
        Ok(markers)
    }

    /// Writes `write`; on an error reloads the partition (so the memory is what the log
    /// holds) and returns the refusal, with the markers the reload found.
    fn write(
        &self,
        st: &mut TxnCoordinator,
        write: &TxnLogWrite,
    ) -> std::result::Result<(), (TxnError, Vec<TxnMarkers>)> {
        let value = write.value_bytes();
        match self.log.append(&write.key_bytes(), value.as_deref()) {
            Ok(()) => Ok(()),
            Err(e) => {
                events::write_failed(self.partition, &write.transactional_id, &e);
                let markers = self.reload(st);
                Err((write_failed(&e), markers))
            }
        }
    }

    /// What an operation's `outcome` comes to once its record is written (under the
    /// lock of `st`): its answer, and the markers to send (its own, or those a reload
    /// after a failed write found).
    fn written<A>(
        &self,
        st: &mut TxnCoordinator,
        outcome: std::result::Result<TxnOutcome<A>, TxnError>,
    ) -> Done<A> {
        match outcome {
            Err(e) => Done {
                answer: Err(e),
                markers: Vec::new(),
            },
            Ok(outcome) => match outcome.write.as_ref().map(|w| self.write(st, w)) {
                Some(Err((e, markers))) => Done {
                    answer: Err(e),
                    markers,
                },
                _ => Done {
                    answer: Ok(outcome.answer),
                    markers: outcome.markers.into_iter().collect(),
                },
            },
        }
    }

    /// Parks `batch` (under `state`'s lock) until its transaction completes, unless
    /// an add of another producer or epoch is parked for that id already (the
    /// completion adds the parked batches of an id with one request): whether it was
    /// parked.
    fn park(&self, batch: &Arc<AddBatch>) -> bool {
        let request = batch.request.lock();
        let mut parked = self.parked.lock();
        let batches = parked.entry(request.transactional_id.clone()).or_default();
        let same_producer = |b: &Arc<AddBatch>| {
            let other = b.request.lock();
            (
                other.producer_id,
                other.producer_epoch,
                other.client_transaction_version,
            ) == (
                request.producer_id,
                request.producer_epoch,
                request.client_transaction_version,
            )
        };
        if !batches.iter().all(same_producer) {
            return false;
        }
        batch.parked.store(true, Ordering::Release);
        batches.push(Arc::clone(batch));
        true
    }

    fn reload(&self, st: &mut TxnCoordinator) -> Vec<TxnMarkers> {
        match self.load(st) {
            Ok(markers) => markers,
            Err(e) => {
                events::reload_failed(self.partition, &e);
                self.needs_reload.store(true, Ordering::Release);
                Vec::new()
            }
        }
    }
}

/// What a request did, for the caller to finish after the partition's lock is
/// released: its answer (or refusal) and the markers to send.
struct Done<A> {
    answer: std::result::Result<A, TxnError>,
    markers: Vec<TxnMarkers>,
}

impl TransactionCoordinator {
    /// A coordinator leading no partition yet.
    pub fn new(config: TransactionConfig) -> Self {
        TransactionCoordinator {
            inner: Arc::new(Inner {
                config,
                partition_count: AtomicI32::new(0),
                slots: RwLock::new(HashMap::new()),
                markers: RwLock::new(None),
                closed: AtomicBool::new(false),
                wake: Mutex::new(()),
                woken: Condvar::new(),
                timer: Mutex::new(None),
                queue: Mutex::new(None),
                senders: Mutex::new(Vec::new()),
                completed: Mutex::new(0),
                completed_cv: Condvar::new(),
            }),
        }
    }

    /// The coordinator's settings.
    pub fn config(&self) -> &TransactionConfig {
        &self.inner.config
    }

    /// Sets the number of partitions of `__transaction_state` (what
    /// [`partition_of`](Self::partition_of) divides by).
    pub fn set_partition_count(&self, count: i32) {
        self.inner.partition_count.store(count, Ordering::Release);
    }

    /// The partitions of `__transaction_state`, 0 while it does not exist.
    pub fn partition_count(&self) -> i32 {
        self.inner.partition_count.load(Ordering::Acquire)
    }

    /// The `__transaction_state` partition of `transactional_id`, `None` while the
    /// topic does not exist.
    pub fn partition_of(&self, transactional_id: &str) -> Option<i32> {
        let count = self.partition_count();
        (count > 0).then(|| partition_for(transactional_id, count))
    }

    /// Sets where markers are written.
    pub fn set_marker_writer(&self, writer: Arc<dyn MarkerWriter>) {
        *self.inner.markers.write() = Some(writer);
    }

    /// Whether `partition` of `__transaction_state` is led (loaded or loading) here.
    pub fn leads(&self, partition: i32) -> bool {
        self.inner.slots.read().contains_key(&partition)
    }

    /// Becomes the coordinator of `partition` at `coordinator_epoch` (its leader
    /// epoch): replays its records from `log` (requests of its ids get
    /// COORDINATOR_LOAD_IN_PROGRESS meanwhile), then queues the markers of the
    /// transactions that were prepared and not completed.
    pub fn load_partition(
        &self,
        partition: i32,
        coordinator_epoch: i32,
        log: Arc<dyn TxnStateLog>,
    ) -> Result<()> {
        let slot = Arc::new(Slot {
            partition,
            log,
            state: Mutex::new(TxnCoordinator::loading(
                coordinator_epoch,
                max_timeout_ms(&self.inner.config),
            )),
            needs_reload: AtomicBool::new(false),
            pending: Mutex::new(Vec::new()),
            adds: Mutex::new(HashMap::new()),
            parked: Mutex::new(HashMap::new()),
        });
        self.inner
            .slots
            .write()
            .insert(partition, Arc::clone(&slot));
        // Replayed without the partition's lock: meanwhile its ids are answered
        // COORDINATOR_LOAD_IN_PROGRESS.
        let mut fresh =
            TxnCoordinator::loading(coordinator_epoch, max_timeout_ms(&self.inner.config));
        if let Err(e) = slot.log.read_all(&mut |k, v| fresh.replay(k, v)) {
            slot.needs_reload.store(true, Ordering::Release);
            return Err(e);
        }
        let markers = fresh.finish_loading();
        *slot.state.lock() = fresh;
        events::partition_loaded(partition, coordinator_epoch);
        self.queue_markers(&slot, markers);
        Ok(())
    }

    /// Stops coordinating `partition` (its leadership moved): its ids get
    /// NOT_COORDINATOR and its pending markers are dropped (the new coordinator sends
    /// them again).
    pub fn unload_partition(&self, partition: i32) {
        self.inner.slots.write().remove(&partition);
    }

    fn slot(&self, transactional_id: &str) -> std::result::Result<Arc<Slot>, TxnError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(TxnError::CoordinatorNotAvailable {
                reason: "the broker is shutting down".into(),
            });
        }
        let partition = self
            .partition_of(transactional_id)
            .ok_or(TxnError::NotCoordinator)?;
        self.inner
            .slots
            .read()
            .get(&partition)
            .cloned()
            .ok_or(TxnError::NotCoordinator)
    }

    /// Runs `op` on the coordinator of `transactional_id`'s partition under its lock
    /// and writes the outcome's record before the lock is released; then queues the
    /// outcome's markers (or those a reload found) for the sender threads and answers.
    fn run<A, R>(
        &self,
        transactional_id: &str,
        op: impl FnOnce(&mut TxnCoordinator, i64) -> std::result::Result<TxnOutcome<A>, TxnError>,
        answer: impl FnOnce(A) -> R,
    ) -> std::result::Result<R, TxnError> {
        let slot = self.slot(transactional_id)?;
        let done = {
            let mut st = slot.state.lock();
            let outcome = op(&mut st, now_ms());
            slot.written(&mut st, outcome)
        };
        self.queue_markers(&slot, done.markers);
        done.answer.map(answer)
    }

    /// InitProducerId with a transactional id ([`TxnCoordinator::init_producer_id`]).
    /// `new_producer_id` hands out a producer id (the one allocator of idempotent and
    /// transactional producers); it is asked only when the id is new or its epochs
    /// are used up.
    pub fn init_producer_id(
        &self,
        request: &InitProducerIdRequest,
        new_producer_id: &dyn Fn() -> Result<i64>,
    ) -> std::result::Result<InitProducerIdAnswer, TxnError> {
        self.run(
            &request.transactional_id,
            |st, now| {
                let id = fresh_id(st.get(&request.transactional_id), new_producer_id)?;
                st.init_producer_id(request, now, || id)
            },
            |a| a,
        )
    }

    /// AddPartitionsToTxn ([`TxnCoordinator::add_partitions`]). Adds of the same
    /// producer and epoch that wait for the partition's lock meanwhile (the leaders of
    /// a transaction's partitions each adding theirs as its first batch comes, KIP-890
    /// part 2) join one batch: its first to get the lock adds every partition of the
    /// batch with one write, and all of them get its answer. Each add is answered only
    /// after the write of its partitions, as alone.
    pub fn add_partitions(
        &self,
        request: &AddPartitionsRequest,
    ) -> std::result::Result<(), TxnError> {
        match self.add_or_park(request, false)? {
            AddOrParked::Answered(answer) => answer,
            // Not asked to park.
            AddOrParked::Parked(_) => Err(TxnError::ConcurrentTransactions),
        }
    }

    /// [`add_partitions`](Self::add_partitions); with `park`, an add refused because
    /// the producer's previous transaction is completing (its markers being written)
    /// is parked in its slot instead, for the completion to add and answer.
    fn add_or_park(
        &self,
        request: &AddPartitionsRequest,
        park: bool,
    ) -> std::result::Result<AddOrParked, TxnError> {
        let slot = self.slot(&request.transactional_id)?;
        let key: AddKey = (
            request.transactional_id.clone(),
            request.producer_id,
            request.producer_epoch,
            request.client_transaction_version,
        );
        let batch = {
            let mut adds = slot.adds.lock();
            let batch = adds.entry(key.clone()).or_insert_with(|| {
                Arc::new(AddBatch {
                    request: Mutex::new(AddPartitionsRequest {
                        partitions: BTreeSet::new(),
                        ..request.clone()
                    }),
                    answer: Mutex::new(None),
                    parked: AtomicBool::new(false),
                })
            });
            let mut merged = batch.request.lock();
            merged.partitions.extend(request.partitions.iter().cloned());
            drop(merged);
            Arc::clone(batch)
        };
        let done = {
            let mut st = slot.state.lock();
            // Another add of the batch got the lock first and answered for all, or
            // parked the batch.
            if let Some(answer) = batch.answer.lock().clone() {
                return Ok(AddOrParked::Answered(answer));
            }
            if batch.parked.load(Ordering::Acquire) {
                return Ok(AddOrParked::Parked(batch));
            }
            // Closed: later adds start a batch of their own.
            let mut adds = slot.adds.lock();
            if adds.get(&key).is_some_and(|b| Arc::ptr_eq(b, &batch)) {
                adds.remove(&key);
            }
            drop(adds);
            let merged = batch.request.lock().clone();
            let outcome = st.add_partitions(&merged, now_ms());
            if park && matches!(outcome, Err(TxnError::ConcurrentTransactions)) && slot.park(&batch)
            {
                return Ok(AddOrParked::Parked(batch));
            }
            let done = slot.written(&mut st, outcome);
            *batch.answer.lock() = Some(done.answer.clone());
            done
        };
        self.queue_markers(&slot, done.markers);
        Ok(AddOrParked::Answered(done.answer))
    }

    /// [`add_partitions`](Self::add_partitions) for a partition leader (KIP-890 part 2:
    /// a producer's first batch of a transaction in one of its partitions). While the
    /// producer's previous transaction is completing here (CONCURRENT_TRANSACTIONS: its
    /// markers being written), waits until this coordinator has completed a
    /// transaction and asks again, for at most `patience`; then answers as
    /// `add_partitions` does. The leader is answered as soon as the markers are
    /// written, not after a backoff of its own (Kafka's leader asks again every
    /// `add.partitions.to.txn.retry.backoff.ms`, 20 ms).
    pub fn add_partitions_when_completed(
        &self,
        request: &AddPartitionsRequest,
        patience: Duration,
    ) -> std::result::Result<(), TxnError> {
        let deadline = Instant::now() + patience;
        // Bounded by `deadline`: each round waits for a completion or the deadline.
        loop {
            let seen = self.completed();
            let batch = match self.add_or_park(request, true)? {
                AddOrParked::Answered(Err(TxnError::ConcurrentTransactions))
                    if Instant::now() < deadline =>
                {
                    self.wait_completed(seen, deadline.saturating_duration_since(Instant::now()));
                    continue;
                }
                AddOrParked::Answered(answer) => return answer,
                AddOrParked::Parked(batch) => batch,
            };
            // Parked: the completion answers it, and counts a completion after.
            loop {
                let seen = self.completed();
                if let Some(answer) = batch.answer.lock().clone() {
                    return answer;
                }
                if Instant::now() >= deadline {
                    return self.unpark(request, &batch);
                }
                self.wait_completed(seen, deadline.saturating_duration_since(Instant::now()));
            }
        }
    }

    /// Takes a parked add whose patience ended out of its slot, unless the completion
    /// took it meanwhile: its answer then.
    fn unpark(
        &self,
        request: &AddPartitionsRequest,
        batch: &Arc<AddBatch>,
    ) -> std::result::Result<(), TxnError> {
        let Ok(slot) = self.slot(&request.transactional_id) else {
            return Err(TxnError::ConcurrentTransactions);
        };
        let _st = slot.state.lock();
        if let Some(answer) = batch.answer.lock().clone() {
            return answer;
        }
        let mut parked = slot.parked.lock();
        if let Some(batches) = parked.get_mut(&request.transactional_id) {
            batches.retain(|b| !Arc::ptr_eq(b, batch));
            if batches.is_empty() {
                parked.remove(&request.transactional_id);
            }
        }
        // Adds of the batch still waiting get the same answer.
        *batch.answer.lock() = Some(Err(TxnError::ConcurrentTransactions));
        Err(TxnError::ConcurrentTransactions)
    }

    /// AddOffsetsToTxn of the group whose offsets live in `offsets_partition` of
    /// `__consumer_offsets` ([`TxnCoordinator::add_offsets`]).
    pub fn add_offsets(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        offsets_partition: i32,
        client_transaction_version: i16,
    ) -> std::result::Result<(), TxnError> {
        self.run(
            transactional_id,
            |st, now| {
                st.add_offsets(
                    transactional_id,
                    producer,
                    offsets_partition,
                    client_transaction_version,
                    now,
                )
            },
            |a| a,
        )
    }

    /// KIP-890 part 1: whether each partition is in the ongoing transaction of
    /// `transactional_id` ([`TxnCoordinator::verify_partitions`]).
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<TopicPartition>,
    ) -> std::result::Result<PartitionVerdicts, TxnError> {
        let slot = self.slot(transactional_id)?;
        let st = slot.state.lock();
        st.verify_partitions(transactional_id, producer, partitions)
    }

    /// EndTxn ([`TxnCoordinator::end_txn`]): answers once the Prepare record is
    /// written, with the producer id and epoch to go on with (bumped for a client of
    /// transaction version 2). The markers are sent in the background; the
    /// transaction is CompleteCommit or CompleteAbort once all are written.
    pub fn end_txn(
        &self,
        request: &EndTxnRequest,
        new_producer_id: &dyn Fn() -> Result<i64>,
    ) -> std::result::Result<ProducerIdAndEpoch, TxnError> {
        self.run(
            &request.transactional_id,
            |st, now| {
                let exhausted = st
                    .get(&request.transactional_id)
                    .is_some_and(|m| is_epoch_exhausted(m.producer_epoch));
                let id = if exhausted {
                    new_producer_id().map_err(|e| TxnError::CoordinatorNotAvailable {
                        reason: format!("cannot allocate a producer id: {e}"),
                    })?
                } else {
                    -1
                };
                st.end_txn(request, now, || id)
            },
            |a| a,
        )
    }

    /// DescribeTransactions of one id.
    pub fn describe(
        &self,
        transactional_id: &str,
    ) -> std::result::Result<TransactionMetadata, TxnError> {
        let slot = self.slot(transactional_id)?;
        let st = slot.state.lock();
        st.describe(transactional_id).cloned()
    }

    /// The partitions of the adds of `transactional_id` waiting for its partition's
    /// lock, in open batches.
    #[cfg(test)]
    pub(crate) fn waiting_adds(&self, transactional_id: &str) -> usize {
        self.slot(transactional_id).map_or(0, |slot| {
            let adds = slot.adds.lock();
            adds.iter()
                .filter(|(k, _)| k.0 == transactional_id)
                .map(|(_, b)| b.request.lock().partitions.len())
                .sum()
        })
    }

    /// ListTransactions: every id of every led partition;
    /// COORDINATOR_LOAD_IN_PROGRESS while one is loading.
    pub fn list(&self) -> std::result::Result<Vec<TransactionMetadata>, TxnError> {
        let slots: Vec<Arc<Slot>> = self.inner.slots.read().values().cloned().collect();
        let mut out = Vec::new();
        for slot in slots {
            let st = slot.state.lock();
            if st.is_loading() {
                return Err(TxnError::CoordinatorLoadInProgress);
            }
            out.extend(st.transactions().cloned());
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// Hands `markers` to the marker sender threads (outside any partition lock);
    /// before they are started, leaves them in the partition's `pending` for the
    /// timer.
    fn queue_markers(&self, slot: &Arc<Slot>, markers: Vec<TxnMarkers>) {
        if markers.is_empty() {
            return;
        }
        let queue = self.inner.queue.lock().clone();
        let mut left = Vec::new();
        for m in markers {
            match &queue {
                Some(q) => {
                    let job = MarkerJob {
                        slot: Arc::clone(slot),
                        markers: m,
                    };
                    // Refused only once the senders stopped (shutdown).
                    if let Err(crossbeam_channel::SendError(job)) = q.send(job) {
                        left.push(job.markers);
                    }
                }
                None => left.push(m),
            }
        }
        if !left.is_empty() {
            slot.pending.lock().extend(left);
            self.wake_timer();
        }
    }

    /// Wakes the timer (under its lock, so a wake-up between its last pass and its
    /// wait is not lost).
    fn wake_timer(&self) {
        let _g = self.inner.wake.lock();
        self.inner.woken.notify_all();
    }

    /// Whether `slot` is still the partition's led slot (not unloaded or replaced).
    fn still_leads(&self, slot: &Arc<Slot>) -> bool {
        self.inner
            .slots
            .read()
            .get(&slot.partition)
            .is_some_and(|s| Arc::ptr_eq(s, slot))
    }

    /// Writes the markers of `jobs` with one [`MarkerWriter::write_batch`] on this
    /// thread (outside any partition lock); completes each transaction once its
    /// markers are all written and leaves the rest in their partition's `pending` for
    /// the timer.
    fn send_markers(&self, jobs: Vec<MarkerJob>) {
        if jobs.is_empty() {
            return;
        }
        let Some(writer) = self.inner.markers.read().clone() else {
            for job in jobs {
                job.slot.pending.lock().push(job.markers);
            }
            return;
        };
        let batch: Vec<TxnMarkers> = jobs.iter().map(|j| j.markers.clone()).collect();
        writer.write_batch(&batch, &|i, failed| {
            let Some(job) = jobs.get(i) else {
                return; // The writer answers the batch's indexes only.
            };
            self.delivered(&job.slot, &job.markers, failed);
        });
    }

    /// The partitions of `m` are answered, `failed` those not written: completes the
    /// transaction, or leaves the failed partitions for the timer.
    fn delivered(&self, slot: &Arc<Slot>, m: &TxnMarkers, failed: Vec<(TopicPartition, Error)>) {
        if failed.is_empty() {
            self.complete(slot, m);
            return;
        }
        for ((topic, partition), e) in &failed {
            events::marker_retried(&m.transactional_id, topic, *partition, e);
        }
        let left = TxnMarkers {
            partitions: failed.into_iter().map(|(tp, _)| tp).collect(),
            ..m.clone()
        };
        slot.pending.lock().push(left);
        self.wake_timer();
    }

    /// A marker sender thread: writes the markers queued until the coordinator shuts
    /// down, each time those of every transaction queued meanwhile (up to
    /// `MARKER_BATCH`) together; those of a partition no longer led here are dropped
    /// (its new coordinator sends them again).
    fn sender_loop(&self, jobs: crossbeam_channel::Receiver<MarkerJob>) {
        while let Ok(job) = jobs.recv() {
            if self.inner.closed.load(Ordering::Acquire) {
                break;
            }
            let mut batch = vec![job];
            while batch.len() < MARKER_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch.retain(|job| self.still_leads(&job.slot));
            self.send_markers(batch);
        }
    }

    /// A count that moves each time this coordinator has written every marker of a
    /// transaction and recorded (or tried to record) its completion: read it before
    /// the transaction's state, then pass it to [`wait_completed`](Self::wait_completed).
    pub(crate) fn completed(&self) -> u64 {
        *self.inner.completed.lock()
    }

    /// Waits until [`completed`](Self::completed) moves past `seen` or `timeout`
    /// passes; whether it moved.
    pub(crate) fn wait_completed(&self, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut count = self.inner.completed.lock();
        while *count == seen {
            if self
                .inner
                .completed_cv
                .wait_until(&mut count, deadline)
                .timed_out()
            {
                break;
            }
        }
        *count != seen
    }

    /// Every marker of the transaction is written: PrepareX → CompleteX, recorded.
    fn complete(&self, slot: &Arc<Slot>, m: &TxnMarkers) {
        let markers = {
            let mut st = slot.state.lock();
            let now = now_ms();
            match st.markers_written(&m.transactional_id, m.coordinator_epoch, now) {
                Ok(TxnOutcome {
                    write: Some(write), ..
                }) => {
                    // A leader's add of the producer's next transaction waiting for
                    // this completion is made now, and its record (the transaction
                    // Ongoing with its partitions, after this completion) is written
                    // instead of the completion's: the log keeps the last record of
                    // an id, and the markers are all written.
                    let parked = slot
                        .parked
                        .lock()
                        .remove(&m.transactional_id)
                        .unwrap_or_default();
                    let mut added = Ok(());
                    let mut write = write;
                    if let Some(first) = parked.first() {
                        let mut request = first.request.lock().clone();
                        for b in &parked[1..] {
                            request
                                .partitions
                                .extend(b.request.lock().partitions.iter().cloned());
                        }
                        match st.add_partitions(&request, now) {
                            Ok(TxnOutcome { write: Some(w), .. }) => write = w,
                            Ok(_) => {}
                            Err(e) => added = Err(e),
                        }
                    }
                    let (written, markers) = match slot.write(&mut st, &write) {
                        Ok(()) => (Ok(()), Vec::new()),
                        Err((e, markers)) => (Err(e), markers),
                    };
                    let answer = written.and(added);
                    for batch in parked {
                        *batch.answer.lock() = Some(answer.clone());
                    }
                    markers
                }
                Ok(_) => Vec::new(),
                // Reloaded or moved meanwhile: whoever holds the state now sends them.
                Err(e) => {
                    events::stale_markers(&m.transactional_id, &e);
                    Vec::new()
                }
            }
        };
        {
            let mut count = self.inner.completed.lock();
            *count = count.wrapping_add(1);
            self.inner.completed_cv.notify_all();
        }
        self.queue_markers(slot, markers);
    }

    /// Starts the marker sender threads and the timer thread (idempotent): markers
    /// sent and retried, timed-out transactions aborted
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`), idle
    /// transactional ids expired (`transaction.remove.expired.transaction.cleanup.interval.ms`).
    /// Until then markers wait for the timer's tick.
    pub fn start_timer(&self) -> Result<()> {
        let mut slot = self.inner.timer.lock();
        if slot.is_some() {
            return Ok(());
        }
        {
            let mut queue = self.inner.queue.lock();
            let mut senders = self.inner.senders.lock();
            if queue.is_none() && !self.inner.closed.load(Ordering::Acquire) {
                let (tx, rx) = crossbeam_channel::unbounded::<MarkerJob>();
                for i in 0..MARKER_SENDERS {
                    let me = self.clone();
                    let rx = rx.clone();
                    let handle = std::thread::Builder::new()
                        .name(format!("tidelog-txn-markers-{i}"))
                        .spawn(move || me.sender_loop(rx))
                        .map_err(|e| {
                            Error::io("spawn transaction marker thread for", "<coordinator>", e)
                        })?;
                    senders.push(handle);
                }
                *queue = Some(tx);
            }
        }
        // Markers queued before the senders existed.
        self.wake_timer();
        let me = self.clone();
        let handle = std::thread::Builder::new()
            .name("tidelog-txn-timer".into())
            .spawn(move || me.timer_loop())
            .map_err(|e| Error::io("spawn transaction timer thread for", "<coordinator>", e))?;
        *slot = Some(handle);
        Ok(())
    }

    /// Stops the timer and the marker sender threads (markers not written yet are
    /// sent again by whoever loads the partition next); later requests get
    /// COORDINATOR_NOT_AVAILABLE.
    pub fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Release);
        // The senders' queue disconnects: each ends after the markers it is writing.
        drop(self.inner.queue.lock().take());
        self.wake_timer();
        let mut handles: Vec<JoinHandle<()>> = std::mem::take(&mut *self.inner.senders.lock());
        handles.extend(self.inner.timer.lock().take());
        for h in handles {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    fn timer_loop(&self) {
        let config = &self.inner.config;
        let mut next_abort = Instant::now() + config.abort_timed_out_interval;
        let mut next_expire = Instant::now() + config.remove_expired_interval;
        while !self.inner.closed.load(Ordering::Acquire) {
            let now = Instant::now();
            let abort = now >= next_abort;
            let expire = now >= next_expire;
            if abort {
                next_abort = now + config.abort_timed_out_interval;
            }
            if expire {
                next_expire = now + config.remove_expired_interval;
            }
            let busy = self.tick(abort, expire);
            let mut wake = next_abort.min(next_expire);
            if busy {
                wake = wake.min(Instant::now() + RETRY_INTERVAL);
            }
            let mut g = self.inner.wake.lock();
            // Markers left for retry since the pass (checked under the lock their
            // writer wakes the timer with): retried soon.
            if self.any_pending() {
                wake = wake.min(Instant::now() + RETRY_INTERVAL);
            }
            if !self.inner.closed.load(Ordering::Acquire) {
                self.inner.woken.wait_until(&mut g, wake);
            }
        }
    }

    /// Whether markers wait in any led partition for the timer.
    fn any_pending(&self) -> bool {
        self.inner
            .slots
            .read()
            .values()
            .any(|s| !s.pending.lock().is_empty())
    }

    /// One pass of the timer over every led partition, on the calling thread: reloads
    /// retried, timed-out transactions aborted (`abort`), idle ids expired
    /// (`expire`), and the markers left for it written; true if something is left to
    /// retry.
    pub(crate) fn tick(&self, abort: bool, expire: bool) -> bool {
        let slots: Vec<Arc<Slot>> = self.inner.slots.read().values().cloned().collect();
        let expiration = i64::try_from(self.inner.config.transactional_id_expiration.as_millis())
            .unwrap_or(i64::MAX);
        let mut jobs = Vec::new();
        for slot in &slots {
            let mut markers = Vec::new();
            {
                let mut st = slot.state.lock();
                if slot.needs_reload.load(Ordering::Acquire) {
                    markers.extend(slot.reload(&mut st));
                }
                if abort {
                    for outcome in st.expire_timed_out(now_ms()) {
                        let Some(write) = &outcome.write else {
                            continue;
                        };
                        if let Err((_, found)) = slot.write(&mut st, write) {
                            markers.extend(found);
                            break;
                        }
                        events::timed_out(&write.transactional_id);
                        markers.extend(outcome.markers);
                    }
                }
                if expire {
                    for write in st.expire_transactional_ids(now_ms(), expiration) {
                        if let Err((_, found)) = slot.write(&mut st, &write) {
                            markers.extend(found);
                            break;
                        }
                    }
                }
            }
            markers.append(&mut slot.pending.lock());
            jobs.extend(markers.into_iter().map(|markers| MarkerJob {
                slot: Arc::clone(slot),
                markers,
            }));
        }
        // Every partition's markers together: one request per leader.
        self.send_markers(jobs);
        slots.iter().any(|slot| {
            slot.needs_reload.load(Ordering::Acquire) || !slot.pending.lock().is_empty()
        })
    }
}

/// The producer id InitProducerId may need: a new one when the id is unknown or its
/// epochs are used up, else -1 (not asked).
fn fresh_id(
    current: Option<&TransactionMetadata>,
    new_producer_id: &dyn Fn() -> Result<i64>,
) -> std::result::Result<i64, TxnError> {
    if current.is_none_or(|m| is_epoch_exhausted(m.producer_epoch)) {
        new_producer_id().map_err(|e| TxnError::CoordinatorNotAvailable {
            reason: format!("cannot allocate a producer id: {e}"),
        })
    } else {
        Ok(-1)
    }
}
