//! Property test: the transactions of a [`PartitionLog`] against a model.
//!
//! Random sequences of idempotent appends, transactional appends from a few producers,
//! COMMIT and ABORT markers, plain appends, rolls, truncations, compactions (with the
//! markers' `delete.retention.ms` passed or not) and reopens (after a clean close, or
//! after a drop without one) run against the log and against a model that folds the
//! batches the log holds. A compaction may drop only the data of aborted transactions
//! and markers left without data (when old enough), never changes what a
//! read_committed reader sees nor the last stable offset, and the model then takes the
//! batches the log kept. After every step the log's last stable offset
//! and aborted transactions must be the model's, and after the last step the
//! `.txnindex` files must hold the model's aborted transactions byte for byte. Tiny
//! segments make the transactions span segments and the indexes roll. Seeded, 32
//! cases (`TIDELOG_MODEL_CASES`, `TIDELOG_MODEL_SEED` widen the search).
//!
//! With the `testing` feature, the same operations also run on a broker's partition
//! (a reopen reopens the broker), and after every step in-process consumers read it
//! from the start: a read_committed one must read exactly the model's committed
//! records (below the last stable offset, none of an aborted transaction) in order, a
//! read_uncommitted one every data record, and neither a control record.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
use std::path::Path;
use tidelog::record::{EndTxnMarker, TRANSACTIONAL_BIT};
use tidelog::storage::{AbortedTxn, PartitionLog};
use tidelog::{BatchBuilder, LogConfig};

/// Producer ids of the producers the test runs.
const PIDS: [i64; 3] = [100, 101, 102];

#[derive(Debug, Clone)]
enum Op {
    /// An idempotent, non-transactional batch of `n` records from producer `p`.
    Idempotent {
        p: usize,
        n: usize,
    },
    /// A transactional batch of `n` records from producer `p`.
    Txn {
        p: usize,
        n: usize,
    },
    /// A COMMIT (or ABORT) marker for producer `p`.
    Marker {
        p: usize,
        commit: bool,
    },
    /// A batch without a producer.
    Plain,
    Roll,
    /// `truncate_to` a point of `[start, end]` (per mille).
    Truncate {
        at: u16,
    },
    Reopen {
        clean: bool,
    },
    /// A compaction pass, with the markers' `delete.retention.ms` passed (`old`) or not.
    Compact {
        old: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..PIDS.len();
    prop_oneof![
        3 => (p.clone(), 1usize..4).prop_map(|(p, n)| Op::Idempotent { p, n }),
        5 => (p.clone(), 1usize..4).prop_map(|(p, n)| Op::Txn { p, n }),
        4 => (p, any::<bool>()).prop_map(|(p, commit)| Op::Marker { p, commit }),
        1 => Just(Op::Plain),
        1 => Just(Op::Roll),
        1 => (0u16..=1000).prop_map(|at| Op::Truncate { at }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        2 => any::<bool>().prop_map(|old| Op::Compact { old }),
    ]
}

/// One batch the log holds, as the model sees it.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Data {
        pid: i64,
        transactional: bool,
        /// Sequence of its last record (producers' batches).
        last_seq: i32,
    },
    Marker {
        pid: i64,
        commit: bool,
    },
    Plain,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    base: i64,
    last: i64,
    kind: Kind,
}

/// The batches of the log; everything else is folded from them.
#[derive(Debug, Default)]
struct Model {
    batches: Vec<Entry>,
    /// A compaction ran. From then on the aborted transactions are compared without
    /// their last stable offset (the index keeps the one written, as Kafka's does,
    /// which may count data compacted away since), a log's aborted transaction
    /// without data left is allowed (a replay from a producer snapshot taken before
    /// the compaction finds the marker of a transaction the snapshot holds open), and
    /// truncations are not run (a producer whose batches were compacted away is known
    /// to the log's state, or not, depending on the snapshot a rebuild starts from).
    compacted: bool,
    /// The log end offset once compaction removed the last batches (the offsets of a
    /// log never go back).
    tail: i64,
}

/// What the batches say of the transactions.
#[derive(Debug, Default)]
struct Folded {
    /// Producer id to the first offset of its open transaction.
    open: std::collections::BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
    /// Producer id to the sequence of its last record.
    last_seq: std::collections::BTreeMap<i64, i32>,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.tail, |e| (e.last + 1).max(self.tail))
    }

    fn fold(&self) -> Folded {
        let mut f = Folded::default();
        for e in &self.batches {
            match e.kind {
                Kind::Data {
                    pid,
                    transactional,
                    last_seq,
                } => {
                    f.last_seq.insert(pid, last_seq);
                    if transactional {
                        f.open.entry(pid).or_insert(e.base);
                    }
                }
                Kind::Marker { pid, commit } => {
                    if let Some(first) = f.open.remove(&pid)
                        && !commit
                    {
                        f.aborted.push(AbortedTxn {
                            producer_id: pid,
                            first_offset: first,
                            last_offset: e.base,
                            last_stable_offset: f
                                .open
                                .values()
                                .min()
                                .copied()
                                .unwrap_or(e.base + 1),
                        });
                    }
                }
                Kind::Plain => {}
            }
        }
        f
    }

    /// The offsets of the data records of batches not in an aborted transaction (those
    /// of open transactions included), in order.
    fn not_aborted(&self) -> Vec<i64> {
        let mut open: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
        let mut aborted = std::collections::BTreeSet::new();
        for (i, e) in self.batches.iter().enumerate() {
            match e.kind {
                Kind::Data {
                    pid,
                    transactional: true,
                    ..
                } => open.entry(pid).or_default().push(i),
                Kind::Marker { pid, commit } => {
                    let ended = open.remove(&pid).unwrap_or_default();
                    if !commit {
                        aborted.extend(ended);
                    }
                }
                Kind::Data { .. } | Kind::Plain => {}
            }
        }
        self.batches
            .iter()
            .enumerate()
            .filter(|(i, e)| !matches!(e.kind, Kind::Marker { .. }) && !aborted.contains(i))
            .flat_map(|(_, e)| e.base..=e.last)
            .collect()
    }

    /// The offsets of every data record, in order.
    #[cfg(feature = "testing")]
    fn data(&self) -> Vec<i64> {
        self.batches
            .iter()
            .filter(|e| !matches!(e.kind, Kind::Marker { .. }))
            .flat_map(|e| e.base..=e.last)
            .collect()
    }

    fn last_stable_offset(&self) -> i64 {
        self.fold()
            .open
            .values()
            .min()
            .copied()
            .unwrap_or(self.end())
    }
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = 600;
    c.index_interval_bytes = 100;
    c
}

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, "txn-0", config()).expect("open")
}

fn data_batch(pid: i64, seq: i32, n: usize, transactional: bool) -> Vec<u8> {
    let attrs = if transactional { TRANSACTIONAL_BIT } else { 0 };
    let mut b = BatchBuilder::new().producer(pid, 0, seq).attributes(attrs);
    for i in 0..n {
        b.push(1_000 + i as i64, None, Some(b"record"), &[]);
    }
    b.finish()
}

fn apply(log: &PartitionLog, m: &mut Model, op: &Op) {
    let folded = m.fold();
    let next_seq = |pid: i64| folded.last_seq.get(&pid).map_or(0, |s| s + 1);
    match *op {
        Op::Idempotent { p, n } | Op::Txn { p, n } => {
            let pid = PIDS[p];
            let transactional = matches!(op, Op::Txn { .. });
            let seq = next_seq(pid);
            let r = log.append_idempotent(&data_batch(pid, seq, n, transactional));
            if !transactional && folded.open.contains_key(&pid) {
                let e = r.expect_err("a non-transactional batch inside a transaction");
                assert!(e.to_string().contains("transaction open"), "{e}");
                return;
            }
            match r.expect("append") {
                tidelog::storage::AppendOutcome::Appended(info) => {
                    assert_eq!(info.base_offset, m.end());
                    m.batches.push(Entry {
                        base: info.base_offset,
                        last: info.last_offset,
                        kind: Kind::Data {
                            pid,
                            transactional,
                            last_seq: seq + n as i32 - 1,
                        },
                    });
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        Op::Marker { p, commit } => {
            let pid = PIDS[p];
            let marker = if commit {
                EndTxnMarker::commit(0)
            } else {
                EndTxnMarker::abort(0)
            };
            let info = log
                .append_end_txn_marker(pid, 0, marker, 2_000)
                .expect("marker");
            assert_eq!((info.base_offset, info.last_offset), (m.end(), m.end()));
            m.batches.push(Entry {
                base: info.base_offset,
                last: info.last_offset,
                kind: Kind::Marker { pid, commit },
            });
        }
        Op::Plain => {
            let mut b = BatchBuilder::new();
            b.push(1_000, None, Some(b"plain"), &[]);
            let info = log.append(&b.finish()).expect("append");
            m.batches.push(Entry {
                base: info.base_offset,
                last: info.last_offset,
                kind: Kind::Plain,
            });
        }
        Op::Roll => log.roll().expect("roll"),
        Op::Truncate { .. } if m.compacted => {}
        Op::Truncate { at } => {
            let (start, end) = (log.log_start_offset(), log.log_end_offset());
            let target = start + (end - start) * i64::from(at) / 1000;
            let new_end = log.truncate_to(target).expect("truncate");
            m.batches.retain(|e| e.base < new_end);
            assert_eq!(m.end(), new_end, "a truncation cuts between batches");
        }
        Op::Compact { old } => compact(log, m, old),
        Op::Reopen { .. } => unreachable!("handled by the runner"),
    }
}

/// The batches `log` holds, as the model sees them.
fn batches_of(log: &PartitionLog) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    for _ in 0..10_000 {
        let slice = log.read(offset, 1 << 20).expect("read");
        if slice.is_empty() {
            break;
        }
        for b in slice.batches() {
            let kind = match EndTxnMarker::of_batch(&b, "txn-0").expect("marker") {
                Some(marker) => Kind::Marker {
                    pid: b.producer_id(),
                    commit: marker.commit,
                },
                None if b.producer_id() < 0 => Kind::Plain,
                None => Kind::Data {
                    pid: b.producer_id(),
                    transactional: b.is_transactional(),
                    last_seq: b.base_sequence() + b.last_offset_delta(),
                },
            };
            out.push(Entry {
                base: b.base_offset(),
                last: b.last_offset(),
                kind,
            });
        }
        offset = slice.next_offset();
    }
    out
}

/// A compaction pass at a time past the markers' `delete.retention.ms` (`old`) or
/// not; checks what it dropped, then takes the log's batches into the model.
fn compact(log: &PartitionLog, m: &mut Model, old: bool) {
    let now = if old {
        2_001 + config().delete_retention_ms as i64
    } else {
        2_000
    };
    let lso = m.last_stable_offset();
    let committed: Vec<i64> = m.not_aborted().into_iter().filter(|&o| o < lso).collect();
    let before = m.fold().aborted;
    log.compact(now).expect("compact");
    let kept = batches_of(log);
    let mut rest = kept.iter().peekable();
    let mut dropped = Vec::new();
    for e in &m.batches {
        match rest.peek() {
            Some(k) if k.base == e.base => {
                assert_eq!(k.last, e.last, "a kept batch is unchanged");
                rest.next();
            }
            _ => dropped.push(*e),
        }
    }
    assert!(rest.next().is_none(), "compaction made no batch");
    for e in &dropped {
        match e.kind {
            Kind::Marker { .. } => assert!(old, "a marker younger than delete.retention.ms"),
            Kind::Data {
                pid,
                transactional: true,
                ..
            } => {
                assert!(
                    before.iter().any(|a| a.producer_id == pid
                        && (a.first_offset..a.last_offset).contains(&e.base)),
                    "only aborted data goes: {e:?}"
                )
            }
            _ => panic!("a batch that is neither aborted data nor a marker went: {e:?}"),
        }
    }
    m.tail = m.end();
    m.batches = kept;
    m.compacted = true;
    assert_eq!(m.last_stable_offset(), lso, "the last stable offset");
    let after: Vec<i64> = m.not_aborted().into_iter().filter(|&o| o < lso).collect();
    assert_eq!(after, committed, "what read_committed reads");
}

/// The aborted transactions `m` expects of `log` (see [`Model::compacted`]): those of
/// `from_log` as they are before any compaction, then without their last stable offset
/// and without those that have no data left.
fn comparable(m: &Model, from_log: Vec<AbortedTxn>) -> Vec<AbortedTxn> {
    if !m.compacted {
        return from_log;
    }
    from_log
        .into_iter()
        .filter(|a| {
            m.batches.iter().any(|e| {
                matches!(e.kind, Kind::Data { pid, transactional: true, .. } if pid == a.producer_id)
                    && (a.first_offset..a.last_offset).contains(&e.base)
            })
        })
        .map(|a| AbortedTxn {
            last_stable_offset: 0,
            ..a
        })
        .collect()
}

fn check(log: &PartitionLog, m: &Model) {
    let end = m.end();
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        log.last_stable_offset().expect("lso"),
        m.last_stable_offset(),
        "last stable offset of {:?}",
        m.batches
    );
    let aborted = comparable(m, m.fold().aborted);
    assert_eq!(
        comparable(m, log.aborted_transactions(0, end).expect("aborted")),
        aborted
    );
    // A range in the middle: markers at or after `from`, data below `to`.
    let (from, to) = (end / 3, end * 2 / 3);
    let expected: Vec<AbortedTxn> = aborted
        .iter()
        .filter(|a| a.last_offset >= from && a.first_offset < to)
        .copied()
        .collect();
    assert_eq!(
        comparable(m, log.aborted_transactions(from, to).expect("aborted")),
        expected
    );
}

/// The `.txnindex` files of `dir`, in base order, concatenated.
fn index_bytes(dir: &Path) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| std::fs::read(p).expect("read"))
        .collect()
}

#[test]
fn transactions_match_the_model() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let config = Config {
        cases: env("TIDELOG_MODEL_CASES").unwrap_or(32) as u32,
        rng_seed: RngSeed::Fixed(env("TIDELOG_MODEL_SEED").unwrap_or(0x7A4E_1060)),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op(), 1..50);
    runner
        .run(&strategy, |ops| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("txn-0");
            let mut log = open(&path);
            let mut m = Model::default();
            for op in &ops {
                if let Op::Reopen { clean } = *op {
                    if clean {
                        log.close().expect("close");
                    }
                    drop(log);
                    log = open(&path);
                } else {
                    apply(&log, &mut m, op);
                }
                check(&log, &m);
            }
            log.close().expect("close");
            drop(log);
            let log = open(&path);
            check(&log, &m);
            let expected: Vec<u8> = m.fold().aborted.iter().flat_map(|a| a.encode()).collect();
            if m.compacted {
                let entries = index_bytes(&path)
                    .chunks_exact(tidelog::storage::ABORTED_TXN_LEN)
                    .map(|c| AbortedTxn::decode(c.try_into().expect("34")).expect("entry"))
                    .collect();
                assert_eq!(
                    comparable(&m, entries),
                    comparable(&m, m.fold().aborted),
                    "the .txnindex files"
                );
            } else {
                assert_eq!(index_bytes(&path), expected, "the .txnindex files");
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_marker_from_an_older_epoch_is_refused_and_one_ends_an_empty_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("txn-0"));
    log.append_idempotent(&data_batch(7, 0, 2, true))
        .expect("txn");
    assert_eq!(log.last_stable_offset().expect("lso"), 0);
    // The coordinator bumps the epoch with the marker (KIP-890).
    log.append_end_txn_marker(7, 1, EndTxnMarker::abort(3), 0)
        .expect("abort");
    assert_eq!(log.last_stable_offset().expect("lso"), 3);
    let e = log
        .append_end_txn_marker(7, 0, EndTxnMarker::commit(3), 0)
        .expect_err("older producer epoch");
    assert!(
        matches!(e, tidelog::Error::InvalidProducerEpoch { current: 1, .. }),
        "{e}"
    );
    let e = log
        .append_end_txn_marker(7, 1, EndTxnMarker::commit(2), 0)
        .expect_err("older coordinator");
    assert!(
        matches!(
            e,
            tidelog::Error::TransactionCoordinatorFenced {
                coordinator_epoch: 2,
                current: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("fenced"), "{e}");
    // A marker without data ends nothing and aborts nothing.
    log.append_end_txn_marker(7, 1, EndTxnMarker::abort(3), 0)
        .expect("empty abort");
    assert_eq!(log.aborted_transactions(0, 10).expect("aborted").len(), 1);
    assert_eq!(log.last_stable_offset().expect("lso"), 4);
    // A producer cannot write a control batch itself.
    let marker = EndTxnMarker::commit(3).batch(7, 1, 0);
    assert!(log.append_idempotent(&marker).is_err());
}

#[test]
fn the_last_stable_offset_stays_below_a_replicated_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(&dir.path().join("txn-0"));
    log.set_replicated(0);
    log.append_idempotent(&data_batch(7, 0, 1, false))
        .expect("data");
    log.append_idempotent(&data_batch(8, 0, 2, true))
        .expect("txn");
    log.append_end_txn_marker(8, 0, EndTxnMarker::commit(0), 0)
        .expect("commit");
    // The high watermark has not moved: nor has the last stable offset.
    assert_eq!(log.last_stable_offset().expect("lso"), 0);
    log.set_high_watermark(2);
    assert_eq!(log.last_stable_offset().expect("lso"), 1, "the transaction");
    log.set_high_watermark(3);
    assert_eq!(
        log.last_stable_offset().expect("lso"),
        1,
        "its marker is not below the high watermark yet"
    );
    log.set_high_watermark(4);
    assert_eq!(log.last_stable_offset().expect("lso"), 4);
}

/// The offsets a consumer of `level` reads of `t-0` from its start until it reaches its
/// end (the last stable offset or the high watermark), small fetches so that reads
/// start and end everywhere; with the end and the position it stopped at (before the
/// end only in a gap compaction left below a last stable offset that is not the log's
/// end: as in Kafka, nothing is there to move the consumer over it).
#[cfg(feature = "testing")]
fn consume(broker: &tidelog::Broker, level: tidelog::IsolationLevel) -> (Vec<i64>, i64, i64) {
    let config = tidelog::ConsumerConfig::default()
        .isolation_level(level)
        .max_partition_fetch_bytes(150);
    let mut consumer = tidelog::Consumer::new(broker, config);
    consumer.assign(&[("t", 0)]).expect("assign");
    consumer.seek_to_beginning().expect("seek");
    let end = consumer.end_offset("t", 0).expect("end");
    let mut got = Vec::new();
    let mut still = 0;
    for _ in 0..10_000 {
        let at = consumer.position("t", 0).expect("position");
        if at >= end || still == 3 {
            break;
        }
        let polled = consumer.poll(std::time::Duration::ZERO).expect("poll");
        got.extend(polled.iter().map(|r| r.expect("record").offset));
        let moved = consumer.position("t", 0).expect("position") != at;
        still = if moved || !polled.is_empty() {
            0
        } else {
            still + 1
        };
    }
    (got, end, consumer.position("t", 0).expect("position"))
}

#[cfg(feature = "testing")]
#[test]
fn consumers_read_what_the_model_says_at_each_isolation_level() {
    use tidelog::IsolationLevel::{ReadCommitted, ReadUncommitted};
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let config = Config {
        cases: env("TIDELOG_MODEL_CASES").unwrap_or(32) as u32,
        rng_seed: RngSeed::Fixed(env("TIDELOG_MODEL_SEED").unwrap_or(0x7A4E_1061)),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op(), 1..40);
    runner
        .run(&strategy, |ops| {
            let dir = tempfile::tempdir().expect("tempdir");
            let open_broker = || tidelog::Broker::open(dir.path()).expect("broker");
            let mut broker = open_broker();
            broker
                .create_topic("t", 1, tidelog::TopicConfig::new().segment_bytes(600))
                .expect("topic");
            let mut m = Model::default();
            for op in &ops {
                if let Op::Reopen { clean } = *op {
                    if clean {
                        broker.close().expect("close");
                    }
                    drop(broker);
                    broker = open_broker();
                } else {
                    let p = broker.topic("t").expect("topic").partition(0).expect("p");
                    apply(p.log(), &mut m, op);
                }
                let lso = m.last_stable_offset();
                let committed: Vec<i64> =
                    m.not_aborted().into_iter().filter(|&o| o < lso).collect();
                let (got, end, at) = consume(&broker, ReadCommitted);
                assert_eq!(end, lso, "a read_committed consumer ends at the LSO");
                assert!(
                    at == end
                        || (m.compacted && m.batches.iter().all(|e| e.last < at || e.base >= end)),
                    "a read_committed consumer stopped at {at} of {end}: {:?}",
                    m.batches
                );
                assert_eq!(got, committed, "read_committed of {:?}", m.batches);
                let (got, end, at) = consume(&broker, ReadUncommitted);
                assert_eq!(end, m.end());
                assert_eq!(at, end, "a read_uncommitted consumer reads to the end");
                assert_eq!(got, m.data(), "read_uncommitted of {:?}", m.batches);
            }
            Ok(())
        })
        .unwrap();
}

/// Compaction and transactions, as Kafka's cleaner: an aborted record never hides the
/// committed record of its key, the aborted data goes with its `.txnindex` entry, and
/// its marker only in a later pass past `delete.retention.ms`.
#[test]
fn compaction_drops_aborted_data_then_its_marker_and_keeps_committed_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("txn-0");
    let log = open(&path);
    let keyed = |pid: i64, seq: i32, value: &[u8]| {
        let mut b = BatchBuilder::new()
            .producer(pid, 0, seq)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1_000, Some(b"k"), Some(value), &[]);
        b.finish()
    };
    // Producer 7 commits k=v1; producer 8 writes k=v2 and aborts; producer 8 then
    // writes again, so the aborted batch is not its last.
    log.append_idempotent(&keyed(7, 0, b"v1")).expect("v1");
    log.append_end_txn_marker(7, 0, EndTxnMarker::commit(0), 2_000)
        .expect("commit");
    log.append_idempotent(&keyed(8, 0, b"v2")).expect("v2");
    log.append_end_txn_marker(8, 0, EndTxnMarker::abort(0), 2_000)
        .expect("abort");
    log.append_idempotent(&data_batch(8, 1, 1, false))
        .expect("later");
    log.roll().expect("roll");
    log.append_idempotent(&data_batch(9, 0, 1, false))
        .expect("active");
    assert_eq!(log.aborted_transactions(0, 10).expect("aborted").len(), 1);
    let young = 2_000;
    let old = 2_001 + config().delete_retention_ms as i64;

    log.compact(young).expect("compact");
    let kinds = |log: &PartitionLog| -> Vec<(i64, bool)> {
        batches_of(log)
            .iter()
            .map(|e| (e.base, matches!(e.kind, Kind::Marker { .. })))
            .collect()
    };
    // v1, its COMMIT, the ABORT (data of its transaction was there before this pass),
    // the later batch, the active segment's.
    assert_eq!(
        kinds(&log),
        vec![(0, false), (1, true), (3, true), (4, false), (5, false)]
    );
    assert!(log.aborted_transactions(0, 10).expect("aborted").is_empty());
    assert!(
        index_bytes(&path).is_empty(),
        "the entry left with its data"
    );
    let slice = log.read(0, 1 << 20).expect("read");
    let first = slice.batches().next().expect("v1");
    let value = first.records().next().expect("record").expect("ok").value;
    assert_eq!(value, Some(&b"v1"[..]), "the committed record of k stays");

    // A young marker stays; past delete.retention.ms the ABORT, without data, goes
    // (the COMMIT stays with v1).
    log.compact(young).expect("compact");
    assert_eq!(kinds(&log).len(), 5);
    log.compact(old).expect("compact");
    assert_eq!(
        kinds(&log),
        vec![(0, false), (1, true), (4, false), (5, false)],
        "the ABORT marker without data went; the COMMIT of v1 stays with v1"
    );
    log.close().expect("close");
    drop(log);
    let log = open(&path);
    assert_eq!(kinds(&log).len(), 4);
    assert_eq!(log.last_stable_offset().expect("lso"), 6);
}
