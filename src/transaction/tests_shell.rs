//! The transaction coordinator's shell: records written before answers, markers sent
//! in the background, loading and replay, a failed write reloading the partition,
//! markers retried, timeouts aborted and fencing, over an in-memory
//! `__transaction_state` and marker writer.
//!
//! A coordinator without its threads (no `start_timer`) leaves every marker for
//! `tick`, so most tests here send them with `tick` where they want them written.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::error::{Error, Result};

/// A record: key and value (`None`: a tombstone).
type Rec = (Vec<u8>, Option<Vec<u8>>);

/// A `__transaction_state` partition in memory, which can be made to fail.
#[derive(Default)]
struct MemLog {
    records: Mutex<Vec<Rec>>,
    fail: AtomicBool,
    /// When set, `read_all` waits for a message before it reads.
    gate: Mutex<Option<mpsc::Receiver<()>>>,
}

impl TxnStateLog for MemLog {
    fn append(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::io(
                "append to",
                "__transaction_state-0",
                std::io::Error::other("disk full"),
            ));
        }
        self.records
            .lock()
            .push((key.to_vec(), value.map(<[u8]>::to_vec)));
        Ok(())
    }

    fn read_all(&self, f: &mut RecordVisitor<'_>) -> Result<()> {
        if let Some(gate) = self.gate.lock().take() {
            gate.recv_timeout(Duration::from_secs(10))
                .expect("the test opens the gate");
        }
        for (k, v) in self.records.lock().iter() {
            f(k, v.as_deref())?;
        }
        Ok(())
    }
}

/// Records every marker; fails the first `failures` calls.
#[derive(Default)]
struct MemMarkers {
    written: Mutex<Vec<(TopicPartition, TxnResult, i64, i16)>>,
    failures: AtomicUsize,
}

impl MarkerWriter for MemMarkers {
    fn write_markers(&self, m: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return m
                .partitions
                .iter()
                .map(|tp| (tp.clone(), Error::Timeout("leader busy".into())))
                .collect();
        }
        let mut w = self.written.lock();
        for tp in &m.partitions {
            w.push((tp.clone(), m.result, m.producer_id, m.producer_epoch));
        }
        Vec::new()
    }
}

/// A leader of topic [`STALLED`] that holds each marker until the test lets it go (a
/// broker that does not answer WriteTxnMarkers); markers of other topics are written
/// at once.
#[derive(Default)]
struct StalledMarkers {
    written: Mutex<Vec<TopicPartition>>,
    /// Markers of [`STALLED`] being held.
    held: AtomicUsize,
    open: Mutex<bool>,
    opened: parking_lot::Condvar,
}

const STALLED: &str = "stalled";

impl StalledMarkers {
    fn release(&self) {
        *self.open.lock() = true;
        self.opened.notify_all();
    }
}

impl MarkerWriter for StalledMarkers {
    fn write_markers(&self, m: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
        if m.partitions.iter().any(|(t, _)| t == STALLED) {
            self.held.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock();
            // Bounded: the test releases it (or fails) well before.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !*open && std::time::Instant::now() < deadline {
                self.opened.wait_until(&mut open, deadline);
            }
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        self.written.lock().extend(m.partitions.iter().cloned());
        Vec::new()
    }

    /// As a cluster's writer sends one request per leader: the transactions with a
    /// partition on the stalled leader wait for it on their own thread, the others
    /// are answered at once.
    fn write_batch(&self, batch: &[TxnMarkers], done: &MarkersDone<'_>) {
        std::thread::scope(|scope| {
            for (i, m) in batch.iter().enumerate() {
                if m.partitions.iter().any(|(t, _)| t == STALLED) {
                    scope.spawn(move || done(i, self.write_markers(m)));
                } else {
                    done(i, self.write_markers(m));
                }
            }
        });
    }
}

/// Waits (bounded) until `id` is no longer being completed; its state then.
fn settled(c: &TransactionCoordinator, id: &str) -> TxnState {
    for _ in 0..1000 {
        let state = c.describe(id).unwrap().state;
        if !matches!(state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return state;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    c.describe(id).unwrap().state
}

fn config() -> TransactionConfig {
    TransactionConfig {
        state_log_partitions: 1,
        abort_timed_out_interval: Duration::from_millis(20),
        ..TransactionConfig::default()
    }
}

/// A coordinator of one loaded partition whose markers go to `markers`.
fn coordinator<M: MarkerWriter + 'static>(
    log: &Arc<MemLog>,
    markers: &Arc<M>,
) -> TransactionCoordinator {
    let c = TransactionCoordinator::new(config());
    c.set_marker_writer(Arc::clone(markers) as Arc<dyn MarkerWriter>);
    c.set_partition_count(1);
    c.load_partition(0, 0, Arc::clone(log) as Arc<dyn TxnStateLog>)
        .unwrap();
    c
}

/// [`coordinator`] with its marker threads and timer started.
fn started(log: &Arc<MemLog>, markers: &Arc<StalledMarkers>) -> TransactionCoordinator {
    let c = coordinator(log, markers);
    c.start_timer().unwrap();
    c
}

fn ids_from(counter: &AtomicUsize) -> impl Fn() -> Result<i64> + '_ {
    move || Ok(1000 + counter.fetch_add(1, Ordering::SeqCst) as i64)
}

fn init(c: &TransactionCoordinator, id: &str, timeout_ms: i32) -> InitProducerIdAnswer {
    let ids = AtomicUsize::new(0);
    let request = InitProducerIdRequest {
        transactional_id: id.into(),
        timeout_ms,
        expected: None,
    };
    c.init_producer_id(&request, &ids_from(&ids)).unwrap()
}

fn ready(answer: InitProducerIdAnswer) -> ProducerIdAndEpoch {
    match answer {
        InitProducerIdAnswer::Ready(p) => p,
        InitProducerIdAnswer::Fencing => panic!("expected a producer id, got Fencing"),
    }
}

fn add(
    c: &TransactionCoordinator,
    id: &str,
    p: ProducerIdAndEpoch,
    partitions: &[(&str, i32)],
) -> std::result::Result<(), TxnError> {
    c.add_partitions(&add_request(id, p, partitions, 0))
}

/// An AddPartitionsToTxn of `partitions` by a client of transaction `version`.
fn add_request(
    id: &str,
    p: ProducerIdAndEpoch,
    partitions: &[(&str, i32)],
    version: i16,
) -> AddPartitionsRequest {
    AddPartitionsRequest {
        transactional_id: id.into(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        partitions: partitions
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect(),
        client_transaction_version: version,
    }
}

fn end(
    c: &TransactionCoordinator,
    id: &str,
    p: ProducerIdAndEpoch,
    result: TxnResult,
) -> std::result::Result<ProducerIdAndEpoch, TxnError> {
    let none = || -> Result<i64> { Err(Error::Timeout("no id needed".into())) };
    c.end_txn(
        &EndTxnRequest {
            transactional_id: id.into(),
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            result,
            client_transaction_version: 0,
        },
        &none,
    )
}

#[test]
fn a_commit_is_written_marked_and_survives_a_reload() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers::default());
    let c = coordinator(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    assert_eq!(p.epoch, 0);
    assert_eq!(
        log.records.lock().len(),
        1,
        "Empty written before the answer"
    );
    add(&c, "tx", p, &[("a", 0), ("b", 1)]).unwrap();
    end(&c, "tx", p, TxnResult::Commit).unwrap();
    // Answered once PrepareCommit is written; the markers are sent after.
    assert_eq!(c.describe("tx").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(log.records.lock().len(), 3);
    assert!(!c.tick(false, false), "every marker written");
    let written = markers.written.lock().clone();
    assert_eq!(
        written,
        vec![
            (("a".into(), 0), TxnResult::Commit, p.producer_id, 0),
            (("b".into(), 1), TxnResult::Commit, p.producer_id, 0),
        ]
    );
    assert_eq!(c.describe("tx").unwrap().state, TxnState::CompleteCommit);
    // Empty, Ongoing, PrepareCommit, CompleteCommit.
    assert_eq!(log.records.lock().len(), 4);

    let again = coordinator(&log, &Arc::new(MemMarkers::default()));
    let m = again.describe("tx").unwrap();
    assert_eq!(m.state, TxnState::CompleteCommit);
    assert_eq!((m.producer_id, m.producer_epoch), (p.producer_id, 0));
    assert_eq!(
        again.list().unwrap().len(),
        1,
        "the reloaded partition lists the id"
    );
}

#[test]
fn requests_wait_for_the_load_and_unled_ids_are_not_coordinated() {
    let log = Arc::new(MemLog::default());
    let (open, gate) = mpsc::channel();
    *log.gate.lock() = Some(gate);
    let c = TransactionCoordinator::new(config());
    c.set_partition_count(1);
    let loader = {
        let c = c.clone();
        let log = Arc::clone(&log);
        std::thread::spawn(move || c.load_partition(0, 3, log as Arc<dyn TxnStateLog>))
    };
    let ids = AtomicUsize::new(0);
    let request = InitProducerIdRequest {
        transactional_id: "tx".into(),
        timeout_ms: 1000,
        expected: None,
    };
    // Bounded: the loader thread takes the slot within a moment.
    let mut answer = c.init_producer_id(&request, &ids_from(&ids));
    for _ in 0..200 {
        if answer != Err(TxnError::NotCoordinator) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        answer = c.init_producer_id(&request, &ids_from(&ids));
    }
    assert_eq!(answer, Err(TxnError::CoordinatorLoadInProgress));
    open.send(()).unwrap();
    loader.join().unwrap().unwrap();
    assert!(matches!(
        c.init_producer_id(&request, &ids_from(&ids)),
        Ok(InitProducerIdAnswer::Ready(_))
    ));
    c.unload_partition(0);
    assert_eq!(c.describe("tx"), Err(TxnError::NotCoordinator));
}

#[test]
fn a_failed_write_reloads_the_partition_from_its_log() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers::default());
    let c = coordinator(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    log.fail.store(true, Ordering::SeqCst);
    let refused = add(&c, "tx", p, &[("a", 0)]);
    assert!(
        matches!(refused, Err(TxnError::CoordinatorNotAvailable { .. })),
        "{refused:?}"
    );
    // The memory is what the log holds: the transaction never started.
    let m = c.describe("tx").unwrap();
    assert_eq!(m.state, TxnState::Empty);
    assert!(m.partitions.is_empty());
    log.fail.store(false, Ordering::SeqCst);
    add(&c, "tx", p, &[("a", 0)]).unwrap();
    assert_eq!(c.describe("tx").unwrap().state, TxnState::Ongoing);
}

#[test]
fn markers_that_fail_are_retried_and_prepared_ones_resent_on_load() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers {
        failures: AtomicUsize::new(usize::MAX),
        ..MemMarkers::default()
    });
    let c = coordinator(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    add(&c, "tx", p, &[("a", 0)]).unwrap();
    end(&c, "tx", p, TxnResult::Abort).unwrap();
    assert_eq!(c.describe("tx").unwrap().state, TxnState::PrepareAbort);
    assert!(c.tick(false, false), "the marker is still to write");

    // Another coordinator loading the same log sends the prepared transaction's
    // markers again and completes it.
    let fresh = Arc::new(MemMarkers::default());
    let other = coordinator(&log, &fresh);
    assert_eq!(other.describe("tx").unwrap().state, TxnState::PrepareAbort);
    assert!(!other.tick(false, false));
    assert_eq!(other.describe("tx").unwrap().state, TxnState::CompleteAbort);
    assert_eq!(fresh.written.lock().len(), 1);

    // The first coordinator's timer retries until the leader takes the marker.
    markers.failures.store(1, Ordering::SeqCst);
    assert!(c.tick(false, false));
    assert!(!c.tick(false, false), "nothing left to retry");
    assert_eq!(markers.written.lock().len(), 1);
    assert_eq!(c.describe("tx").unwrap().state, TxnState::CompleteAbort);
}

#[test]
fn the_timer_aborts_a_timed_out_transaction_and_fences_its_producer() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers::default());
    let c = coordinator(&log, &markers);
    let p = ready(init(&c, "tx", 1));
    add(&c, "tx", p, &[("a", 0)]).unwrap();
    c.start_timer().unwrap();
    // Bounded wait for the timer (every 20 ms here).
    for _ in 0..500 {
        if c.describe("tx").unwrap().state == TxnState::CompleteAbort {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = c.describe("tx").unwrap();
    c.shutdown();
    assert!(matches!(
        c.describe("tx"),
        Err(TxnError::CoordinatorNotAvailable { .. })
    ));
    assert_eq!(m.state, TxnState::CompleteAbort);
    assert_eq!(m.producer_epoch, 1, "the abort bumped the epoch");
    let written = markers.written.lock().clone();
    assert_eq!(
        written,
        vec![(("a".into(), 0), TxnResult::Abort, p.producer_id, 1)]
    );
}

#[test]
fn a_new_instance_fences_the_old_one_after_aborting_its_transaction() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers::default());
    let c = coordinator(&log, &markers);
    let first = ready(init(&c, "tx", 60_000));
    add(&c, "tx", first, &[("a", 0)]).unwrap();
    assert_eq!(init(&c, "tx", 60_000), InitProducerIdAnswer::Fencing);
    // The fenced transaction's abort completes in the background.
    let ids = AtomicUsize::new(0);
    let again = InitProducerIdRequest {
        transactional_id: "tx".into(),
        timeout_ms: 60_000,
        expected: None,
    };
    assert_eq!(
        c.init_producer_id(&again, &ids_from(&ids)),
        Err(TxnError::ConcurrentTransactions)
    );
    assert!(!c.tick(false, false));
    assert_eq!(
        markers.written.lock().first().map(|m| m.1),
        Some(TxnResult::Abort)
    );
    let second = ready(init(&c, "tx", 60_000));
    assert_eq!(second.producer_id, first.producer_id);
    assert!(second.epoch > first.epoch + 1);
    assert!(matches!(
        add(&c, "tx", first, &[("a", 0)]),
        Err(TxnError::ProducerFenced { .. })
    ));
    assert!(matches!(
        end(&c, "tx", first, TxnResult::Commit),
        Err(TxnError::ProducerFenced { .. })
    ));
    add(&c, "tx", second, &[("a", 0)]).unwrap();
    let partitions: BTreeSet<TopicPartition> = [("a".to_string(), 0)].into();
    let verdicts = c.verify_partitions("tx", second, &partitions).unwrap();
    assert_eq!(verdicts[&("a".to_string(), 0)], Ok(()));
    let other: BTreeSet<TopicPartition> = [("b".to_string(), 0)].into();
    assert!(matches!(
        c.verify_partitions("tx", second, &other).unwrap()[&("b".to_string(), 0)],
        Err(TxnError::TransactionAbortable { .. })
    ));
}

/// A state record is written with acks=all semantics: refused while the partition's
/// ISR is below `min.insync.replicas` (as Kafka's coordinator's writes are), so no
/// answer rests on a record a single replica holds.
#[test]
fn a_state_write_needs_min_insync_replicas() {
    use crate::storage::{LogConfig, PartitionLog};
    use crate::topic::Partition;
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(
        dir.path().join("__transaction_state-0"),
        "__transaction_state-0",
        LogConfig::default(),
    )
    .unwrap();
    let p = Partition::new(Arc::from("__transaction_state"), 0, log);
    p.become_leader(
        1,
        1,
        1,
        vec![1, 2],
        vec![1],
        2,
        Duration::from_secs(30),
        0,
        std::time::Instant::now(),
    )
    .unwrap();
    let refused = TxnStateLog::append(&p, b"key", Some(b"value")).unwrap_err();
    assert!(
        matches!(refused, Error::NotEnoughReplicas { .. }),
        "{refused}"
    );
    assert_eq!(p.log_end_offset(), 0, "nothing written");
}

/// EndTxn answers once PrepareCommit is written, while a leader of the transaction
/// still holds its marker (as Kafka's coordinator, whose markers are sent in the
/// background); the id answers CONCURRENT_TRANSACTIONS until the marker is written,
/// then the transaction is CompleteCommit. Another transaction's markers are not held
/// behind the stalled leader.
#[test]
fn end_txn_answers_while_a_leader_holds_the_markers() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(StalledMarkers::default());
    let c = started(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    add(&c, "tx", p, &[(STALLED, 0), ("a", 0)]).unwrap();

    let (answers, answered) = mpsc::channel();
    let ender = {
        let c = c.clone();
        std::thread::spawn(move || answers.send(end(&c, "tx", p, TxnResult::Commit)))
    };
    // Bounded: the leader holds the marker until released below, so an EndTxn that
    // waited for it would not answer within this.
    let answer = answered.recv_timeout(Duration::from_secs(10));
    let state = c.describe("tx").map(|m| m.state);
    let retried = end(&c, "tx", p, TxnResult::Commit);
    let added = add(&c, "tx", p, &[("b", 0)]);

    // Meanwhile another id's transaction completes.
    let q = ready(init(&c, "other", 60_000));
    add(&c, "other", q, &[("a", 1)]).unwrap();
    end(&c, "other", q, TxnResult::Commit).unwrap();
    let other = settled(&c, "other");
    // Bounded: the sender that took the stalled marker is in the leader's hands.
    for _ in 0..1000 {
        if markers.held.load(Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let still_held = markers.held.load(Ordering::SeqCst);

    markers.release();
    ender.join().unwrap().ok();
    assert_eq!(
        answer.expect("EndTxn answered while the leader held the marker"),
        Ok(p)
    );
    assert_eq!(state, Ok(TxnState::PrepareCommit));
    assert_eq!(retried, Err(TxnError::ConcurrentTransactions));
    assert_eq!(added, Err(TxnError::ConcurrentTransactions));
    assert_eq!(
        other,
        TxnState::CompleteCommit,
        "not held behind the stalled leader"
    );
    assert_eq!(still_held, 1, "the stalled leader still held the marker");

    assert_eq!(settled(&c, "tx"), TxnState::CompleteCommit);
    let written = markers.written.lock().clone();
    assert!(written.contains(&(STALLED.to_string(), 0)), "{written:?}");
    assert!(written.contains(&("a".to_string(), 0)), "{written:?}");
    // A retried EndTxn now answers like the first; the next transaction starts.
    assert_eq!(end(&c, "tx", p, TxnResult::Commit), Ok(p));
    add(&c, "tx", p, &[("b", 0)]).unwrap();
    c.shutdown();
}

/// Markers queued before the sender threads start (a partition loaded first) are
/// sent once they are.
#[test]
fn markers_queued_before_the_senders_start_are_sent() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(MemMarkers::default());
    let c = coordinator(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    add(&c, "tx", p, &[("a", 0)]).unwrap();
    end(&c, "tx", p, TxnResult::Abort).unwrap();
    assert!(markers.written.lock().is_empty(), "left for the timer");
    c.start_timer().unwrap();
    assert_eq!(settled(&c, "tx"), TxnState::CompleteAbort);
    assert_eq!(markers.written.lock().len(), 1);
    c.shutdown();
}

/// Writes each batch as one call (a cluster's one WriteTxnMarkers per leader) and
/// records the transactional ids of each; refuses the markers of topic `busy` while
/// `busy` is set.
#[derive(Default)]
struct BatchMarkers {
    calls: Mutex<Vec<Vec<String>>>,
    busy: AtomicBool,
}

impl MarkerWriter for BatchMarkers {
    fn write_markers(&self, _: &TxnMarkers) -> Vec<(TopicPartition, Error)> {
        panic!("the shell writes markers in batches");
    }

    fn write_batch(&self, batch: &[TxnMarkers], done: &MarkersDone<'_>) {
        self.calls
            .lock()
            .push(batch.iter().map(|m| m.transactional_id.clone()).collect());
        // Answered in reverse: each transaction gets its own result, whatever the order.
        for (i, m) in batch.iter().enumerate().rev() {
            let failed = m
                .partitions
                .iter()
                .filter(|(t, _)| t == "busy" && self.busy.load(Ordering::SeqCst))
                .map(|tp| (tp.clone(), Error::Timeout("leader busy".into())))
                .collect();
            done(i, failed);
        }
    }
}

#[test]
fn the_markers_of_several_transactions_are_written_in_one_batch() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(BatchMarkers::default());
    let c = coordinator(&log, &markers);
    markers.busy.store(true, Ordering::SeqCst);
    for (id, topic) in [("a", "t"), ("b", "busy"), ("c", "t")] {
        let p = ready(init(&c, id, 60_000));
        add(&c, id, p, &[(topic, 0), ("t", 1)]).unwrap();
        end(&c, id, p, TxnResult::Commit).unwrap();
    }
    assert!(c.tick(false, false), "b's marker on busy is left to retry");
    assert_eq!(
        markers.calls.lock().clone(),
        vec![vec!["a".to_string(), "b".into(), "c".into()]],
        "one batch"
    );
    assert_eq!(c.describe("a").unwrap().state, TxnState::CompleteCommit);
    assert_eq!(c.describe("b").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(c.describe("c").unwrap().state, TxnState::CompleteCommit);
    markers.busy.store(false, Ordering::SeqCst);
    assert!(!c.tick(false, false), "nothing left to retry");
    assert_eq!(markers.calls.lock().len(), 2);
    assert_eq!(markers.calls.lock()[1], vec!["b".to_string()]);
    assert_eq!(c.describe("b").unwrap().state, TxnState::CompleteCommit);
}

/// A producer waiting for its transaction's markers is woken when the sender thread
/// has written them (`wait_completed`), not at its next poll; with nothing completing,
/// the wait ends at its timeout.
#[test]
fn writing_a_transactions_markers_wakes_who_waits_for_them() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(StalledMarkers::default());
    let c = started(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    add(&c, "tx", p, &[(STALLED, 0)]).unwrap();
    let seen = c.completed();
    end(&c, "tx", p, TxnResult::Commit).unwrap();
    assert_eq!(c.describe("tx").unwrap().state, TxnState::PrepareCommit);
    assert!(
        !c.wait_completed(seen, Duration::from_millis(5)),
        "nothing completed while the leader holds the marker"
    );
    let waiter = {
        let c = c.clone();
        // Bounded: woken when the marker is written, long before this.
        std::thread::spawn(move || c.wait_completed(seen, Duration::from_secs(60)))
    };
    markers.release();
    assert!(waiter.join().unwrap(), "woken by the completion");
    assert_eq!(c.describe("tx").unwrap().state, TxnState::CompleteCommit);
    assert_ne!(c.completed(), seen);
    c.shutdown();
}

/// A leader's add (KIP-890 part 2) that comes while the producer's previous
/// transaction is completing waits for its markers and is answered then, instead of
/// CONCURRENT_TRANSACTIONS for the leader to ask again after a backoff; with the
/// markers still held when its patience ends, it answers CONCURRENT_TRANSACTIONS.
#[test]
fn a_leaders_add_is_answered_when_the_previous_transactions_markers_are_written() {
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(StalledMarkers::default());
    let c = started(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    add(&c, "tx", p, &[(STALLED, 0)]).unwrap();
    end(&c, "tx", p, TxnResult::Commit).unwrap();
    let request = AddPartitionsRequest {
        transactional_id: "tx".into(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        partitions: [("b".to_string(), 0)].into(),
        client_transaction_version: 0,
    };
    let impatient = c.add_partitions_when_completed(&request, Duration::from_millis(20));
    let adder = {
        let (c, request) = (c.clone(), request.clone());
        // Bounded: answered when the markers are written, long before this.
        std::thread::spawn(move || {
            c.add_partitions_when_completed(&request, Duration::from_secs(60))
        })
    };
    // The adder asks while the markers are still held (a quick answer would have come
    // by now).
    std::thread::sleep(Duration::from_millis(50));
    let waited = !adder.is_finished();
    markers.release();
    assert_eq!(impatient, Err(TxnError::ConcurrentTransactions));
    assert_eq!(adder.join().unwrap(), Ok(()));
    assert!(
        waited,
        "the add was answered before the markers were written"
    );
    assert_eq!(c.describe("tx").unwrap().state, TxnState::Ongoing);
    c.shutdown();
}

/// A `__transaction_state` partition whose appends wait while it is held (a write
/// waiting for its in-sync replicas); counts the appends.
#[derive(Default)]
struct HeldLog {
    log: MemLog,
    held: Mutex<bool>,
    released: parking_lot::Condvar,
    /// Appends that waited, and that are waiting.
    waiting: AtomicUsize,
}

impl TxnStateLog for HeldLog {
    fn append(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let mut held = self.held.lock();
        if *held {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // Bounded: the test releases it well before.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while *held && std::time::Instant::now() < deadline {
                self.released.wait_until(&mut held, deadline);
            }
        }
        drop(held);
        self.log.append(key, value)
    }

    fn read_all(&self, f: &mut RecordVisitor<'_>) -> Result<()> {
        self.log.read_all(f)
    }
}

/// Adds of one producer's transaction that wait while a write of its partition is in
/// flight (the leaders of its partitions each adding theirs) are written together, in
/// one record, and each is answered after it.
#[test]
fn adds_waiting_for_a_write_are_written_together() {
    let log = Arc::new(HeldLog::default());
    let c = TransactionCoordinator::new(config());
    c.set_marker_writer(Arc::new(MemMarkers::default()) as Arc<dyn MarkerWriter>);
    c.set_partition_count(1);
    c.load_partition(0, 0, Arc::clone(&log) as Arc<dyn TxnStateLog>)
        .unwrap();
    let p = ready(init(&c, "tx", 60_000));
    let before = log.log.records.lock().len();
    *log.held.lock() = true;
    let adding = |partition: i32| {
        let c = c.clone();
        std::thread::spawn(move || add(&c, "tx", p, &[("t", partition)]))
    };
    let first = adding(0);
    // Bounded: the first add's write waits in the log.
    for _ in 0..1000 {
        if log.waiting.load(Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let others: Vec<_> = (1..4).map(adding).collect();
    // Bounded: the three others join one batch behind the first's write.
    for _ in 0..1000 {
        if c.waiting_adds("tx") == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let batched = c.waiting_adds("tx");
    *log.held.lock() = false;
    log.released.notify_all();
    assert_eq!(first.join().unwrap(), Ok(()));
    for other in others {
        assert_eq!(other.join().unwrap(), Ok(()));
    }
    assert_eq!(batched, 3, "the three adds waited in one batch");
    assert_eq!(
        log.log.records.lock().len() - before,
        2,
        "the first add's record, then one for the three others"
    );
    let added = c.describe("tx").unwrap().partitions;
    assert_eq!(added, (0..4).map(|p| ("t".to_string(), p)).collect());
    c.shutdown();
}

/// Leaders' adds of the producer's next transaction (transaction version 2) that come
/// while the markers of its previous one are being written wait, and the completion
/// adds them all: one record for the completion and the adds (the transaction Ongoing
/// with their partitions), not one for the completion and one per add; a reload of
/// the log finds the same.
#[test]
fn adds_waiting_for_a_completion_are_written_with_it() {
    let version = EPOCH_BUMP_TRANSACTION_VERSION;
    let log = Arc::new(MemLog::default());
    let markers = Arc::new(StalledMarkers::default());
    let c = started(&log, &markers);
    let p = ready(init(&c, "tx", 60_000));
    let request = |p, partitions: &[(&str, i32)]| add_request("tx", p, partitions, version);
    c.add_partitions(&request(p, &[(STALLED, 0)])).unwrap();
    let none = || -> Result<i64> { Err(Error::Timeout("no id needed".into())) };
    let next = c
        .end_txn(
            &EndTxnRequest {
                transactional_id: "tx".into(),
                producer_id: p.producer_id,
                producer_epoch: p.epoch,
                result: TxnResult::Commit,
                client_transaction_version: version,
            },
            &none,
        )
        .unwrap();
    assert_eq!(next.epoch, p.epoch + 1, "version 2 bumps the epoch");
    let before = log.records.lock().len();
    let adders: Vec<_> = ["b", "c"]
        .into_iter()
        .map(|topic| {
            let (c, request) = (c.clone(), request(next, &[(topic, 0)]));
            // Bounded: answered when the markers are written, long before this.
            std::thread::spawn(move || {
                c.add_partitions_when_completed(&request, Duration::from_secs(60))
            })
        })
        .collect();
    // Both adds come while the markers are held (and wait).
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        adders.iter().all(|a| !a.is_finished()),
        "an add was answered"
    );
    markers.release();
    for a in adders {
        assert_eq!(a.join().unwrap(), Ok(()));
    }
    assert_eq!(
        log.records.lock().len(),
        before + 1,
        "one record for the completion and both adds"
    );
    let expected: BTreeSet<TopicPartition> = [("b".to_string(), 0), ("c".to_string(), 0)].into();
    let described = c.describe("tx").unwrap();
    assert_eq!(described.state, TxnState::Ongoing);
    assert_eq!(described.partitions, expected);
    assert_eq!(described.producer_epoch, next.epoch);
    c.shutdown();

    let again = coordinator(&log, &Arc::new(MemMarkers::default()));
    let reloaded = again.describe("tx").unwrap();
    assert_eq!(reloaded.state, TxnState::Ongoing);
    assert_eq!(reloaded.partitions, expected);
    again.shutdown();
}
