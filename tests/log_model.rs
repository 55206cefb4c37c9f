//! Property test: a [`PartitionLog`] against a plain `Vec` of batches.
//!
//! Random sequences of appends (one or several batches per call), reads at random
//! offsets and sizes, timestamp lookups, rolls, clean and unclean reopens,
//! `truncate_to`, `delete_records_before` and size/time retention are applied to both
//! the log and the model; after every step the log must agree with the model byte for
//! byte. Tiny segments and index intervals make every path (index lookups, rolls, full
//! indexes) run in each case. Seeded, 64 cases.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
use std::path::Path;
use tidelog::storage::PartitionLog;
use tidelog::{BatchBuilder, CleanupPolicy, Error, LogConfig};

/// The fake "now" for retention: every record timestamp is below it.
const NOW_MS: i64 = 1_010_000;
const TS_BASE: i64 = 1_000_000;

#[derive(Debug, Clone)]
struct Rec {
    ts: i64,
    key: Option<Vec<u8>>,
    value: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Op {
    /// One append call with one or more batches.
    Append(Vec<Vec<Rec>>),
    /// Read at a point of `[start, end]` (per mille), up to `max_bytes`.
    Read {
        at: u16,
        max_bytes: usize,
    },
    /// Reads just outside the valid range must fail.
    ReadOutOfRange,
    Timestamp(i64),
    Roll,
    /// Close (or just drop) and open again.
    Reopen {
        clean: bool,
    },
    /// `truncate_to` a point of `[start, end]` (per mille).
    Truncate {
        at: u16,
    },
    /// `delete_records_before` a point of `[start, end]` (per mille).
    DeleteBefore {
        at: u16,
    },
    Retention {
        bytes: Option<u64>,
        ms: Option<u64>,
    },
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        0i64..1_000,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
        proptest::collection::vec(any::<u8>(), 0..160),
    )
        .prop_map(|(dt, key, value)| Rec {
            ts: TS_BASE + dt,
            key,
            value,
        })
}

fn op() -> impl Strategy<Value = Op> {
    let batch = proptest::collection::vec(rec(), 1..8);
    prop_oneof![
        8 => proptest::collection::vec(batch, 1..3).prop_map(Op::Append),
        4 => (0u16..=1000, 1usize..3000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => Just(Op::ReadOutOfRange),
        2 => (TS_BASE - 5..TS_BASE + 1_005).prop_map(Op::Timestamp),
        1 => Just(Op::Roll),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        1 => (0u16..=1000).prop_map(|at| Op::Truncate { at }),
        1 => (0u16..=1000).prop_map(|at| Op::DeleteBefore { at }),
        1 => (
            proptest::option::of(0u64..6_000),
            proptest::option::of(prop_oneof![Just(9_500u64), Just(9_900), Just(50_000)]),
        )
            .prop_map(|(bytes, ms)| Op::Retention { bytes, ms }),
    ]
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = 2048;
    c.index_interval_bytes = 200;
    // Room for a few entries only: full indexes force rolls too.
    c.index_max_bytes = 96;
    c.retention_ms = None;
    c.retention_bytes = None;
    c.cleanup_policy = CleanupPolicy::Delete;
    c
}

/// One batch as the log must store it.
struct MBatch {
    base: i64,
    /// The bytes as appended, with baseOffset stamped.
    bytes: Vec<u8>,
    /// Record timestamps in offset order.
    ts: Vec<i64>,
}

impl MBatch {
    fn last(&self) -> i64 {
        self.base + self.ts.len() as i64 - 1
    }
}

#[derive(Default)]
struct Model {
    batches: Vec<MBatch>,
    start: i64,
    end: i64,
    /// Base offset of the log's first segment (batches below it were deleted).
    first_base: i64,
}

impl Model {
    fn point(&self, per_mille: u16) -> i64 {
        self.start + (self.end - self.start) * per_mille as i64 / 1000
    }

    /// Index of the batch holding `offset` (the first with a last offset >= it).
    fn batch_index(&self, offset: i64) -> usize {
        self.batches.partition_point(|b| b.last() < offset)
    }

    /// Forgets batches below the log's first segment.
    fn sync_first_base(&mut self, log: &PartitionLog) {
        let first = log.segment_base_offsets()[0];
        assert!(first >= self.first_base, "first segment went back: {first}");
        self.first_base = first;
        self.batches.retain(|b| b.base >= first);
        if let Some(b) = self.batches.first() {
            assert_eq!(b.base, first, "a segment starts at a batch boundary");
        } else {
            assert_eq!(first, self.end, "only the empty active segment is left");
        }
    }
}

fn encode(recs: &[Rec]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for r in recs {
        b.push(r.ts, r.key.as_deref(), Some(&r.value), &[("h", b"v")]);
    }
    b.finish()
}

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, "model-0", config()).expect("open")
}

/// Reads from `start` to the end following `next_offset` and compares with the model.
fn check_all(log: &PartitionLog, m: &Model) {
    assert_eq!(log.log_start_offset(), m.start, "log start offset");
    assert_eq!(log.log_end_offset(), m.end, "log end offset");
    let mut got = Vec::new();
    let mut at = m.start;
    while at < m.end {
        let s = log.read(at, 700).expect("read");
        assert!(!s.is_empty(), "empty read at {at} below end {}", m.end);
        assert!(s.next_offset() > at);
        got.extend_from_slice(&s);
        at = s.next_offset();
    }
    assert_eq!(at, m.end);
    let want: Vec<u8> = m.batches[m.batch_index(m.start)..]
        .iter()
        .flat_map(|b| b.bytes.iter().copied())
        .collect();
    assert!(got == want, "sequential read differs from the model");
    // Every batch served is valid and its offsets follow.
    let mut next = None;
    for b in tidelog::record::batches(&got) {
        let b = b.expect("valid batch");
        if let Some(n) = next {
            assert_eq!(b.base_offset(), n);
        }
        next = Some(b.last_offset() + 1);
    }
}

fn apply(log: &PartitionLog, m: &mut Model, op: &Op) {
    match op {
        Op::Append(batches) => {
            let mut bytes = Vec::new();
            let encoded: Vec<Vec<u8>> = batches.iter().map(|b| encode(b)).collect();
            for e in &encoded {
                bytes.extend_from_slice(e);
            }
            let info = log.append(&bytes).expect("append");
            assert_eq!(info.base_offset, m.end);
            let n: usize = batches.iter().map(Vec::len).sum();
            assert_eq!(info.last_offset, m.end + n as i64 - 1);
            assert_eq!(info.record_count, n as i64);
            for (recs, mut e) in batches.iter().zip(encoded) {
                tidelog::record::set_base_offset(&mut e, m.end);
                m.batches.push(MBatch {
                    base: m.end,
                    bytes: e,
                    ts: recs.iter().map(|r| r.ts).collect(),
                });
                m.end += recs.len() as i64;
            }
        }
        Op::Read { at, max_bytes } => {
            let offset = m.point(*at);
            let s = log.read(offset, *max_bytes).expect("read in range");
            if offset == m.end {
                assert!(s.is_empty());
                assert_eq!(s.next_offset(), offset);
                return;
            }
            let i = m.batch_index(offset);
            assert_eq!(s.base_offset(), m.batches[i].base, "read({offset})");
            // A whole-batch prefix of the model from batch i: at least one batch, no
            // more than max_bytes unless it is the only one.
            let mut want = Vec::new();
            let mut j = i;
            while want.len() < s.len() && j < m.batches.len() {
                want.extend_from_slice(&m.batches[j].bytes);
                j += 1;
            }
            assert!(s[..] == want[..], "read({offset}) bytes differ");
            assert!(j == i + 1 || s.len() <= *max_bytes, "read over max_bytes");
            assert_eq!(s.next_offset(), m.batches[j - 1].last() + 1);
            let p = s.path().expect("a slice names its file");
            let f = std::fs::read(p).expect("read segment file");
            let pos = s.file_position() as usize;
            assert!(f[pos..pos + s.len()] == s[..], "file/position agree");
        }
        Op::ReadOutOfRange => {
            for offset in [m.start - 1, m.end + 1] {
                if offset < 0 {
                    continue;
                }
                match log.read(offset, 100) {
                    Err(Error::OffsetOutOfRange { start, end, .. }) => {
                        assert_eq!((start, end), (m.start, m.end));
                    }
                    other => panic!("read({offset}) outside the log gave {other:?}"),
                }
            }
        }
        Op::Timestamp(ts) => {
            let want = m
                .batches
                .iter()
                .flat_map(|b| {
                    b.ts.iter()
                        .enumerate()
                        .map(move |(i, t)| (b.base + i as i64, *t))
                })
                .find(|&(o, t)| o >= m.start && t >= *ts);
            assert_eq!(
                log.offset_for_timestamp(*ts).expect("lookup"),
                want,
                "offset_for_timestamp({ts})"
            );
        }
        Op::Roll => log.roll().expect("roll"),
        Op::Reopen { .. } => unreachable!("handled by reopen()"),
        Op::Truncate { at } => {
            let offset = m.point(*at);
            let new_end = log.truncate_to(offset).expect("truncate");
            if offset < m.end {
                m.batches.retain(|b| b.last() < offset);
                m.end = m.batches.last().map_or(m.first_base, |b| b.last() + 1);
                m.start = m.start.min(m.end);
            }
            assert_eq!(new_end, m.end, "truncate_to({offset})");
        }
        Op::DeleteBefore { at } => {
            let offset = m.point(*at);
            let s = log.delete_records_before(offset).expect("delete records");
            m.start = m.start.max(offset);
            assert_eq!(s, m.start);
            m.sync_first_base(log);
            assert!(
                m.first_base <= m.start,
                "delete_records_before({offset}) deleted a segment holding offsets >= it"
            );
            assert!(
                matches!(
                    log.delete_records_before(m.end + 1),
                    Err(Error::OffsetOutOfRange { .. })
                ),
                "delete_records_before past the end must fail"
            );
        }
        Op::Retention { bytes, ms } => {
            let mut c = config();
            c.retention_bytes = *bytes;
            c.retention_ms = *ms;
            log.set_config(c).expect("config");
            let before = log.segment_count();
            let out = log.apply_retention(NOW_MS).expect("retention");
            log.set_config(config()).expect("config");
            assert_eq!(before - log.segment_count(), out.segments_deleted);
            m.sync_first_base(log);
            m.start = m.start.max(m.first_base);
            if let (Some(limit), None) = (bytes, ms) {
                // Size retention alone never takes the log below its limit.
                let size = log.size_bytes();
                assert!(
                    out.segments_deleted == 0 || size >= *limit,
                    "size retention went below {limit}: {size}"
                );
            }
        }
    }
}

/// Closes (or, unclean, just drops) the log and opens it again.
fn reopen(log: PartitionLog, clean: bool, dir: &Path) -> PartitionLog {
    if clean {
        log.close().expect("close");
    }
    drop(log);
    let log = open(dir);
    let r = log.recovery_report();
    assert!(r.truncated.is_empty(), "reopen cut data: {r:?}");
    assert!(
        r.segments_removed.is_empty(),
        "reopen removed segments: {r:?}"
    );
    if clean {
        assert!(r.is_clean(), "a clean close must reopen clean: {r:?}");
    }
    log
}

#[test]
fn partition_log_matches_vec_model() {
    // TIDELOG_MODEL_CASES / TIDELOG_MODEL_SEED widen the search when hunting bugs.
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let config = Config {
        cases: env("TIDELOG_MODEL_CASES").unwrap_or(64) as u32,
        rng_seed: RngSeed::Fixed(env("TIDELOG_MODEL_SEED").unwrap_or(0x71DE_1060)),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op(), 1..60);
    runner
        .run(&strategy, |ops| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("model-0");
            let mut log = open(&path);
            let mut m = Model::default();
            for op in &ops {
                if let Op::Reopen { clean } = op {
                    log = reopen(log, *clean, &path);
                } else {
                    apply(&log, &mut m, op);
                }
                check_all(&log, &m);
            }
            log.close().expect("close");
            drop(log);
            let log = open(&path);
            assert!(log.recovery_report().truncated.is_empty());
            check_all(&log, &m);
            Ok(())
        })
        .unwrap();
}
