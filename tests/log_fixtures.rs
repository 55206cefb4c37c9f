//! Committed damaged logs under `tests/fixtures/<case>/fixture-0/`: each is copied to a
//! temporary directory, opened, recovered, and must report what it repaired in its
//! [`RecoveryReport`]; afterwards every surviving record reads back intact and a second
//! open finds nothing left to repair.
//!
//! | case                  | damage                                             |
//! |-----------------------|----------------------------------------------------|
//! | `torn-tail`           | a prefix of one more batch after the last segment's data (after a clean close: the checkpoint trusts the data) |
//! | `flipped-crc`         | one bit of a batch's CRC flipped in the last segment, past the recovery point |
//! | `missing-index`       | the first segment's `.index` deleted               |
//! | `truncated-timeindex` | the first segment's `.timeindex` cut mid-entry     |
//!
//! The fixtures were written by `generate_fixtures` below (ignored; run it with
//! `TIDELOG_REGENERATE_FIXTURES=1 cargo test --features testing --test log_fixtures generate_fixtures -- --ignored`
//! to rebuild them). Needs the `testing` feature (to write a checkpoint).
#![cfg(feature = "testing")]

use std::fs;
use std::path::{Path, PathBuf};
use tidelog::record::batches;
use tidelog::storage::{PartitionLog, RecoveryReport};
use tidelog::{BatchBuilder, LogConfig};

const NAME: &str = "fixture-0";
const BATCHES: i64 = 24;
const PER_BATCH: i64 = 3;
const TS0: i64 = 1_600_000_000_000;

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = 1024;
    c.index_interval_bytes = 256;
    c.index_max_bytes = 4096;
    c
}

fn value(offset: i64) -> String {
    format!("fixture-value-{offset:04}")
}

fn fixture_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
        .join(NAME)
}

/// Copies a committed fixture to a fresh temporary directory and opens it there.
fn open_copy(case: &str) -> (tempfile::TempDir, PathBuf, PartitionLog) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dst = tmp.path().join(NAME);
    fs::create_dir(&dst).expect("mkdir");
    for e in fs::read_dir(fixture_dir(case)).expect("fixture exists") {
        let e = e.expect("list fixture");
        fs::copy(e.path(), dst.join(e.file_name())).expect("copy fixture");
    }
    let log = PartitionLog::open(&dst, NAME, config()).expect("a damaged log still opens");
    (tmp, dst, log)
}

/// Reads the log from its start: offsets dense from 0, values as written.
fn check_records(log: &PartitionLog) -> i64 {
    let mut at = log.log_start_offset();
    assert_eq!(at, 0);
    while at < log.log_end_offset() {
        let s = log.read(at, 4096).expect("read");
        for b in batches(&s) {
            let b = b.expect("every batch served is valid");
            for r in b.records() {
                let r = r.expect("record");
                assert_eq!(r.offset, at);
                assert_eq!(r.value, Some(value(at).as_bytes()));
                assert_eq!(r.timestamp, TS0 + at * 10);
                at += 1;
            }
        }
    }
    at
}

/// Opening the repaired copy again must find nothing to repair.
fn reopen_is_clean(dir: &Path, log: PartitionLog, end: i64) {
    log.close().expect("close");
    drop(log);
    let log = PartitionLog::open(dir, NAME, config()).expect("reopen");
    let r = log.recovery_report();
    assert!(r.is_clean(), "the repair did not stick: {r:?}");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(check_records(&log), end);
}

fn seg_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

#[test]
fn torn_tail_is_cut_and_reported() {
    let (_tmp, dir, log) = open_copy("torn-tail");
    let r: RecoveryReport = log.recovery_report().clone();
    assert_eq!(r.truncated.len(), 1, "{r:?}");
    let (file, pos, why) = &r.truncated[0];
    let last = *log.segment_base_offsets().last().unwrap();
    assert_eq!(file, &seg_path(&dir, last, "log"));
    assert!(why.contains("truncated batch header"), "{why}");
    assert!(
        why.contains(&format!("byte {pos}")),
        "names the position: {why}"
    );
    assert!(r.segments_removed.is_empty());
    // Nothing acknowledged is lost: every batch that was written is there.
    assert_eq!(log.log_end_offset(), BATCHES * PER_BATCH);
    assert_eq!(check_records(&log), BATCHES * PER_BATCH);
    assert_eq!(
        fs::metadata(seg_path(&dir, last, "log")).unwrap().len(),
        *pos,
        "the tail is gone from the file"
    );
    reopen_is_clean(&dir, log, BATCHES * PER_BATCH);
}

#[test]
fn flipped_crc_bit_cuts_the_log_at_that_batch() {
    let (_tmp, dir, log) = open_copy("flipped-crc");
    let r = log.recovery_report().clone();
    assert_eq!(r.truncated.len(), 1, "{r:?}");
    let (file, pos, why) = &r.truncated[0];
    assert!(why.contains("CRC-32C mismatch"), "{why}");
    assert!(
        why.contains(&file.display().to_string()),
        "names the file: {why}"
    );
    assert!(
        why.contains(&format!("byte {pos}")),
        "names the position: {why}"
    );
    // The segments below the recovery point were trusted, the last one validated.
    assert!(r.segments_trusted >= 2, "{r:?}");
    assert_eq!(r.segments_validated, 1, "{r:?}");
    // The log ends just before the damaged batch, every record below it intact.
    let end = log.log_end_offset();
    assert!(end > 0 && end < BATCHES * PER_BATCH && end % PER_BATCH == 0);
    assert_eq!(check_records(&log), end);
    assert_eq!(fs::metadata(file).unwrap().len(), *pos);
    // Appends continue at the cut.
    let mut b = BatchBuilder::new();
    b.push(TS0 + end * 10, None, Some(value(end).as_bytes()), &[]);
    assert_eq!(log.append(&b.finish()).unwrap().base_offset, end);
    reopen_is_clean(&dir, log, end + 1);
}

#[test]
fn missing_index_is_rebuilt() {
    let (_tmp, dir, log) = open_copy("missing-index");
    let r = log.recovery_report().clone();
    assert_eq!(r.indexes_rebuilt, vec![seg_path(&dir, 0, "index")], "{r:?}");
    assert!(
        r.truncated.is_empty() && r.segments_removed.is_empty(),
        "{r:?}"
    );
    assert!(seg_path(&dir, 0, "index").exists());
    assert_eq!(check_records(&log), BATCHES * PER_BATCH);
    // Lookups through the rebuilt index land on the right batch.
    for o in 0..BATCHES * PER_BATCH {
        let s = log.read(o, 1).unwrap();
        assert_eq!(s.base_offset(), o / PER_BATCH * PER_BATCH, "read({o})");
    }
    reopen_is_clean(&dir, log, BATCHES * PER_BATCH);
}

#[test]
fn truncated_timeindex_is_rebuilt() {
    let (_tmp, dir, log) = open_copy("truncated-timeindex");
    let r = log.recovery_report().clone();
    // The report names the damaged file.
    assert_eq!(
        r.indexes_rebuilt,
        vec![seg_path(&dir, 0, "timeindex")],
        "{r:?}"
    );
    assert!(
        r.truncated.is_empty() && r.segments_removed.is_empty(),
        "{r:?}"
    );
    assert_eq!(
        fs::metadata(seg_path(&dir, 0, "timeindex")).unwrap().len() % 12,
        0,
        "whole entries again"
    );
    assert_eq!(check_records(&log), BATCHES * PER_BATCH);
    for o in [0, 1, 7, 20, 41, BATCHES * PER_BATCH - 1] {
        assert_eq!(
            log.offset_for_timestamp(TS0 + o * 10).unwrap(),
            Some((o, TS0 + o * 10)),
            "offset_for_timestamp of record {o}"
        );
    }
    assert_eq!(log.offset_for_timestamp(TS0 + 10_000_000).unwrap(), None);
    reopen_is_clean(&dir, log, BATCHES * PER_BATCH);
}

/// Rebuilds the committed fixtures: a clean log of `BATCHES` batches in several small
/// segments, closed cleanly, then damaged as each case says.
#[test]
#[ignore = "generator of tests/fixtures; run explicitly to rebuild them"]
fn generate_fixtures() {
    // Guard against `--include-ignored` rewriting fixtures while other tests read them.
    if std::env::var_os("TIDELOG_REGENERATE_FIXTURES").is_none() {
        eprintln!("set TIDELOG_REGENERATE_FIXTURES=1 to rebuild tests/fixtures");
        return;
    }
    for case in [
        "torn-tail",
        "flipped-crc",
        "missing-index",
        "truncated-timeindex",
    ] {
        let dir = fixture_dir(case);
        let _ = fs::remove_dir_all(&dir);
        let log = PartitionLog::open(&dir, NAME, config()).unwrap();
        for i in 0..BATCHES {
            let mut b = BatchBuilder::new();
            for o in i * PER_BATCH..(i + 1) * PER_BATCH {
                b.push(TS0 + o * 10, Some(b"key"), Some(value(o).as_bytes()), &[]);
            }
            log.append(&b.finish()).unwrap();
        }
        let bases = log.segment_base_offsets();
        assert!(bases.len() >= 3, "several segments: {bases:?}");
        log.close().unwrap();
        drop(log);
        let last = *bases.last().unwrap();
        match case {
            "torn-tail" => {
                let p = seg_path(&dir, last, "log");
                let mut bytes = fs::read(&p).unwrap();
                let mut b = BatchBuilder::new();
                b.push(TS0, None, Some(b"a batch cut short by a crash"), &[]);
                let torn = b.finish();
                bytes.extend_from_slice(&torn[..torn.len() / 2]);
                fs::write(&p, bytes).unwrap();
            }
            "flipped-crc" => {
                // The data below the last segment is known flushed; the last segment
                // is past the recovery point, so recovery validates it.
                let mut payload = last.to_be_bytes().to_vec();
                payload.extend_from_slice(&0i64.to_be_bytes());
                tidelog::testing::write_checkpoint(&dir.join("partition.checkpoint"), &payload)
                    .unwrap();
                let p = seg_path(&dir, last, "log");
                let mut bytes = fs::read(&p).unwrap();
                let second = batches(&bytes).next().unwrap().unwrap().len();
                bytes[second + 17] ^= 0x04; // a bit of the second batch's CRC
                fs::write(&p, bytes).unwrap();
            }
            "missing-index" => fs::remove_file(seg_path(&dir, 0, "index")).unwrap(),
            "truncated-timeindex" => {
                let p = seg_path(&dir, 0, "timeindex");
                let bytes = fs::read(&p).unwrap();
                assert!(bytes.len() >= 24, "the first segment has time entries");
                fs::write(&p, &bytes[..bytes.len() - 7]).unwrap();
            }
            _ => unreachable!(),
        }
    }
}
