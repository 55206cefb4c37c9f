//! Property test of the replication primitives: a [`PartitionLog`] against a plain `Vec`
//! of batches.
//!
//! Random sequences of leader appends (stamped with the leader epoch when one is set),
//! leader-epoch changes, follower appends (`append_replica`, at the log end or past a
//! gap, some refused), truncations, high-watermark moves, mode switches, rolls,
//! `delete_records_before` and clean and unclean reopens are applied to the log and the
//! model. After every step the log must agree with the model: the bytes up to the log
//! end and up to the high watermark, the leader-epoch cache (the model follows Kafka's
//! `LeaderEpochFileCache` rules: assign, truncate from end, truncate from start) and its
//! OffsetForLeaderEpoch answers, also across reopens, and the high watermark itself, which must stay within
//! `[log start, log end]` and move backwards only by the rules in docs/design.md
//! (entering replicated mode, truncating below it). Seeded, 48 cases.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
use std::path::Path;
use std::time::Duration;
use tidelog::record::{batches, set_base_offset, set_partition_leader_epoch};
use tidelog::storage::{PartitionLog, ReadLimit};
use tidelog::{BatchBuilder, Error, LogConfig};

#[derive(Debug, Clone)]
enum Op {
    /// A leader append of batches of these record counts.
    Append(Vec<u8>),
    /// `set_leader_epoch(latest + delta)`; a negative delta must be refused when it
    /// goes below the latest epoch.
    SetEpoch(i8),
    ClearEpoch,
    /// A follower append of batches of these record counts, the first `gap` offsets
    /// past the log end, in epoch `latest + delta` (none when `delta` is negative).
    Replica {
        counts: Vec<u8>,
        gap: i64,
        delta: i8,
    },
    /// A follower append that overlaps the log: refused, nothing changes.
    ReplicaOverlap,
    /// `truncate_to` a point of `[start, end]` (per mille).
    Truncate(u16),
    /// `set_replicated` at a point of `[0, end + 10]` (per mille).
    SetReplicated(u16),
    SetStandalone,
    /// `set_high_watermark` at a point of `[0, end + 10]` (per mille).
    SetHighWatermark(u16),
    /// `delete_records_before` a point of `[start, high watermark]` (per mille).
    DeleteBefore(u16),
    Roll,
    Reopen {
        clean: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let counts = proptest::collection::vec(1u8..6, 1..3);
    prop_oneof![
        6 => counts.clone().prop_map(Op::Append),
        2 => (-2i8..3).prop_map(Op::SetEpoch),
        1 => Just(Op::ClearEpoch),
        5 => (
            counts,
            prop_oneof![4 => Just(0i64), 1 => Just(3), 1 => Just(1000), 1 => Just(5_000_000_000)],
            -1i8..3
        )
            .prop_map(|(counts, gap, delta)| Op::Replica { counts, gap, delta }),
        1 => Just(Op::ReplicaOverlap),
        2 => (0u16..=1000).prop_map(Op::Truncate),
        1 => (0u16..=1000).prop_map(Op::SetReplicated),
        1 => Just(Op::SetStandalone),
        3 => (0u16..=1000).prop_map(Op::SetHighWatermark),
        1 => (0u16..=1000).prop_map(Op::DeleteBefore),
        1 => Just(Op::Roll),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = 1500;
    c.index_interval_bytes = 150;
    c.index_max_bytes = 96;
    c.retention_ms = None;
    c.retention_bytes = None;
    c
}

/// One batch as the log must hold it.
struct MBatch {
    base: i64,
    count: i64,
    /// The bytes with baseOffset and partitionLeaderEpoch as stored.
    bytes: Vec<u8>,
}

impl MBatch {
    fn last(&self) -> i64 {
        self.base + self.count - 1
    }
}

struct Model {
    batches: Vec<MBatch>,
    start: i64,
    end: i64,
    hw: i64,
    replicated: bool,
    leader_epoch: Option<i32>,
    epochs: Vec<(i32, i64)>,
    /// Tells batch contents apart.
    serial: u64,
}

impl Model {
    fn new() -> Model {
        Model {
            batches: Vec::new(),
            start: 0,
            end: 0,
            hw: 0,
            replicated: false,
            leader_epoch: None,
            epochs: Vec::new(),
            serial: 0,
        }
    }

    fn point(&self, from: i64, to: i64, per_mille: u16) -> i64 {
        from + (to - from) * per_mille as i64 / 1000
    }

    /// The leader-epoch cache: what Kafka's `LeaderEpochFileCache` holds after the same
    /// steps.
    fn epochs(&self) -> Vec<(i32, i64)> {
        self.epochs.clone()
    }

    /// A batch of `epoch` at `base` was appended: an entry if the epoch is new and
    /// higher than every one before it.
    fn assign(&mut self, epoch: i32, base: i64) {
        if epoch >= 0 && self.epochs.last().is_none_or(|&(e, _)| epoch > e) {
            self.epochs.push((epoch, base));
        }
    }

    /// The log was truncated to `end`: entries that start there or later go.
    fn truncate_epochs_from_end(&mut self, end: i64) {
        self.epochs.retain(|&(_, s)| s < end);
    }

    /// The log start moved up to `start`: the entries at or below it go but the last,
    /// which now starts there.
    fn truncate_epochs_from_start(&mut self, start: i64) {
        let below = self.epochs.iter().filter(|&&(_, s)| s <= start).count();
        if below > 0 {
            self.epochs.drain(..below - 1);
            self.epochs[0].1 = start;
        }
    }

    fn latest_epoch(&self) -> i32 {
        self.epochs().last().map_or(-1, |&(e, _)| e)
    }

    /// OffsetForLeaderEpoch, written out plainly.
    fn end_offset_for(&self, requested: i32) -> (i32, i64) {
        let entries = self.epochs();
        if requested < 0 || entries.is_empty() {
            return (-1, -1);
        }
        if requested < entries[0].0 {
            return (requested, entries[0].1);
        }
        for (i, &(epoch, _)) in entries.iter().enumerate().rev() {
            if epoch <= requested {
                return match entries.get(i + 1) {
                    Some(&(_, next_start)) => (epoch, next_start),
                    None => (epoch, self.end),
                };
            }
        }
        unreachable!("the first entry is at or below requested")
    }

    fn encode(&mut self, count: u8) -> Vec<u8> {
        self.serial += 1;
        let mut b = BatchBuilder::new();
        for i in 0..count {
            b.push(
                1_000_000 + i as i64,
                Some(format!("k{i}").as_bytes()),
                Some(format!("batch {} record {i}", self.serial).as_bytes()),
                &[],
            );
        }
        b.finish()
    }

    fn push(&mut self, mut bytes: Vec<u8>, base: i64, count: u8, epoch: i32) {
        set_base_offset(&mut bytes, base);
        set_partition_leader_epoch(&mut bytes, epoch);
        self.assign(epoch, base);
        self.batches.push(MBatch {
            base,
            count: count as i64,
            bytes,
        });
        self.end = base + count as i64;
        if !self.replicated {
            self.hw = self.end;
        }
    }

    /// Forgets batches below the log's first segment.
    fn sync_first_base(&mut self, log: &PartitionLog) {
        let first = log.segment_base_offsets()[0];
        self.batches.retain(|b| b.base >= first);
    }
}

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, "model-0", config()).expect("open")
}

/// The bytes from the log start up to `limit`, following `next_offset`.
fn read_all(log: &PartitionLog, from: i64, limit: ReadLimit) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    for _ in 0..100_000 {
        let s = log.read_bounded(at, 600, limit).expect("read in range");
        if s.is_empty() {
            return out;
        }
        assert!(s.next_offset() > at);
        out.extend_from_slice(&s);
        at = s.next_offset();
    }
    panic!("reads never reached the bound");
}

fn check(log: &PartitionLog, m: &Model) {
    assert_eq!(log.log_start_offset(), m.start, "log start");
    assert_eq!(log.log_end_offset(), m.end, "log end");
    assert_eq!(log.high_watermark(), m.hw, "high watermark");
    assert!(m.start <= m.hw && m.hw <= m.end, "start <= hw <= end");
    assert_eq!(log.is_replicated(), m.replicated);
    let from = m.batches.partition_point(|b| b.last() < m.start);
    let want_end: Vec<u8> = m.batches[from..]
        .iter()
        .flat_map(|b| b.bytes.clone())
        .collect();
    assert!(
        read_all(log, m.start, ReadLimit::LogEnd) == want_end,
        "bytes to the log end"
    );
    let want_hw: Vec<u8> = m.batches[from..]
        .iter()
        .take_while(|b| b.last() < m.hw)
        .flat_map(|b| b.bytes.clone())
        .collect();
    assert!(
        read_all(log, m.start, ReadLimit::HighWatermark) == want_hw,
        "bytes to the hw"
    );
    for b in batches(&want_end) {
        b.expect("every batch served is valid");
    }
    if m.hw < m.end {
        assert!(
            log.read(m.hw + 1, 10)
                .expect("below the log end")
                .is_empty(),
            "nothing read past the high watermark"
        );
    }
    assert!(
        matches!(log.read(m.end + 1, 10), Err(Error::OffsetOutOfRange { .. })),
        "no read past the log end"
    );
    assert!(!log.wait_for(m.hw, Duration::ZERO));
    if m.hw > m.start {
        assert!(log.wait_for(m.hw - 1, Duration::ZERO));
    }
    assert!(!log.wait_for_bounded(m.end, ReadLimit::LogEnd, Duration::ZERO));
    let entries: Vec<(i32, i64)> = log
        .epoch_entries()
        .expect("epochs")
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(entries, m.epochs(), "leader-epoch cache");
    let latest = m.latest_epoch();
    for requested in -1..=latest + 1 {
        assert_eq!(
            log.end_offset_for_epoch(requested).expect("epochs"),
            m.end_offset_for(requested),
            "end_offset_for_epoch({requested})"
        );
    }
    assert_eq!(log.leader_epoch(), m.leader_epoch);
}

fn apply(log: &PartitionLog, m: &mut Model, op: &Op) {
    match op {
        Op::Append(counts) => {
            let encoded: Vec<(u8, Vec<u8>)> = counts.iter().map(|&c| (c, m.encode(c))).collect();
            let bytes: Vec<u8> = encoded.iter().flat_map(|(_, e)| e.clone()).collect();
            let info = log.append(&bytes).expect("append");
            assert_eq!(info.base_offset, m.end);
            for (count, e) in encoded {
                let epoch = m.leader_epoch.unwrap_or(-1);
                m.push(e, m.end, count, epoch);
            }
            assert_eq!(info.last_offset, m.end - 1);
        }
        Op::SetEpoch(delta) => {
            let epoch = (m.latest_epoch().max(0) + *delta as i32).max(0);
            match log.set_leader_epoch(epoch) {
                Ok(()) => {
                    assert!(epoch >= m.latest_epoch());
                    m.leader_epoch = Some(epoch);
                }
                Err(Error::StaleLeaderEpoch { latest, .. }) => {
                    assert!(epoch < m.latest_epoch());
                    assert_eq!(latest, m.latest_epoch());
                }
                Err(e) => panic!("set_leader_epoch({epoch}): {e}"),
            }
        }
        Op::ClearEpoch => {
            log.clear_leader_epoch();
            m.leader_epoch = None;
        }
        Op::Replica { counts, gap, delta } => {
            let epoch = if *delta < 0 {
                -1
            } else {
                m.latest_epoch().max(0) + *delta as i32
            };
            let mut base = m.end + gap;
            let mut bytes = Vec::new();
            let mut placed = Vec::new();
            for &c in counts {
                let mut e = m.encode(c);
                set_base_offset(&mut e, base);
                set_partition_leader_epoch(&mut e, epoch);
                bytes.extend_from_slice(&e);
                placed.push((e, base, c));
                base += c as i64;
            }
            let info = log.append_replica(&bytes).expect("replica append");
            assert_eq!(info.base_offset, m.end + gap);
            for (e, base, c) in placed {
                m.push(e, base, c, epoch);
            }
            assert_eq!(info.last_offset, m.end - 1);
        }
        Op::ReplicaOverlap => {
            let Some(last) = m.batches.last().map(MBatch::last) else {
                return;
            };
            let mut e = m.encode(1);
            set_base_offset(&mut e, last);
            assert!(matches!(
                log.append_replica(&e),
                Err(Error::UnexpectedAppendOffset { .. })
            ));
        }
        Op::Truncate(at) => {
            let offset = m.point(m.start, m.end, *at);
            let bases = log.segment_base_offsets();
            let new_end = log.truncate_to(offset).expect("truncate");
            if offset < m.end {
                m.batches.retain(|b| b.last() < offset);
                // The cut keeps the segment holding `offset`, maybe emptied.
                let target = bases.iter().copied().filter(|&b| b <= offset).max();
                let kept = m.batches.last().map(|b| b.last() + 1);
                m.end = kept.into_iter().chain(target).max().unwrap_or(0);
                m.start = m.start.min(m.end);
                m.hw = if m.replicated { m.hw.min(m.end) } else { m.end };
                m.truncate_epochs_from_end(m.end);
            }
            assert_eq!(new_end, m.end, "truncate_to({offset})");
        }
        Op::SetReplicated(at) => {
            let x = m.point(0, m.end + 10, *at);
            let hw = log.set_replicated(x);
            m.hw = if m.replicated {
                m.hw.max(x.min(m.end))
            } else {
                x.clamp(m.start, m.end)
            };
            m.replicated = true;
            assert_eq!(hw, m.hw);
        }
        Op::SetStandalone => {
            log.set_standalone();
            m.replicated = false;
            m.hw = m.end;
        }
        Op::SetHighWatermark(at) => {
            let x = m.point(0, m.end + 10, *at);
            let before = m.hw;
            if m.replicated {
                m.hw = m.hw.max(x.min(m.end));
            }
            assert_eq!(log.set_high_watermark(x), m.hw);
            assert!(m.hw >= before, "set_high_watermark never moves it back");
        }
        Op::DeleteBefore(at) => {
            let offset = m.point(m.start, m.hw, *at);
            let start = log.delete_records_before(offset).expect("delete records");
            m.sync_first_base(log);
            m.start = m.start.max(offset);
            assert_eq!(start, m.start);
            m.truncate_epochs_from_start(m.start);
            assert!(
                matches!(
                    log.delete_records_before(m.hw + 1),
                    Err(Error::OffsetOutOfRange { .. })
                ),
                "never past the high watermark"
            );
        }
        Op::Roll => log.roll().expect("roll"),
        Op::Reopen { .. } => unreachable!("handled by the runner"),
    }
}

#[test]
fn replication_primitives_match_a_vec_model() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let config = Config {
        cases: env("TIDELOG_MODEL_CASES").unwrap_or(48) as u32,
        rng_seed: RngSeed::Fixed(env("TIDELOG_MODEL_SEED").unwrap_or(0x0E90_C4A5)),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    runner
        .run(&proptest::collection::vec(op(), 1..50), |ops| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("model-0");
            let mut log = open(&path);
            let mut m = Model::new();
            for op in &ops {
                if let Op::Reopen { clean } = op {
                    if *clean {
                        log.close().expect("close");
                    }
                    drop(log);
                    log = open(&path);
                    let r = log.recovery_report();
                    assert!(
                        r.truncated.is_empty() && r.segments_removed.is_empty(),
                        "{r:?}"
                    );
                    // A reopened log is standalone, stamps no epoch, and shows its end.
                    m.replicated = false;
                    m.leader_epoch = None;
                    m.hw = m.end;
                } else {
                    apply(&log, &mut m, op);
                }
                check(&log, &m);
            }
            Ok(())
        })
        .unwrap();
}
