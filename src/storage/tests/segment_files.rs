//! The files of a segment: a sealed segment has its `.log`, `.index` and `.timeindex`,
//! as in Kafka, even when it never got an offset index entry (its `.index` is empty:
//! a directory entry, no map, no descriptor); recovery and the read-only opener take
//! the empty index.

use super::batch;
use crate::record::BatchBuilder;
use crate::storage::*;
use std::path::Path;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Sizes of the three files of the segment at `base` in `dir` (`None`: missing).
fn files(dir: &Path, base: i64) -> [Option<u64>; 3] {
    ["log", "index", "timeindex"].map(|ext| {
        std::fs::metadata(dir.join(format!("{base:020}.{ext}")))
            .ok()
            .map(|m| m.len())
    })
}

/// Reads offsets `0..n` of `log`, checking the values of the big batch and the next.
fn check(log: &PartitionLog, big: &[u8]) {
    assert_eq!(log.log_end_offset(), 6);
    let s = log.read(0, 1).unwrap();
    let b = s.batches().next().expect("the big batch");
    assert_eq!(b.records().next().unwrap().unwrap().value.unwrap(), big);
    for o in 1..6 {
        let s = log.read(o, 1).unwrap();
        let b = s.batches().next().expect("a batch");
        assert!(b.base_offset() <= o && o <= b.last_offset(), "offset {o}");
    }
    assert_eq!(log.offset_for_timestamp(1_000).unwrap(), Some((0, 1_000)));
    assert_eq!(log.offset_for_timestamp(2_001).unwrap(), Some((1, 2_001)));
}

#[test]
fn a_segment_rolled_after_one_big_batch_has_its_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("t-0");
    let big = vec![7u8; 10_000];
    {
        let m = LogManager::open(dir.path()).unwrap();
        let log = m.open_log("t-0", config()).unwrap();
        let mut b = BatchBuilder::new();
        b.push(1_000, None, Some(&big), &[]);
        log.append_builder(&mut b).unwrap();
        // One batch at position 0 takes no offset index entry.
        assert_eq!(
            files(&part, 0),
            [Some(files(&part, 0)[0].unwrap()), None, None]
        );
        log.roll().unwrap();
        let [data, index, time] = files(&part, 0);
        assert!(data.unwrap() > 10_000, "{data:?}");
        assert_eq!(index, Some(0), "an empty .index after the roll");
        assert_eq!(time, Some(12), "the .timeindex holds the final entry");
        log.append(&batch(1, 5, 2_000)).unwrap();
        check(&log, &big);

        // A reader of the directory takes the empty index.
        let reader = LogManager::open_read_only(dir.path()).unwrap();
        check(&reader.open_log("t-0", config()).unwrap(), &big);
        m.close().unwrap();
    }
    // Reopened: recovery trusts the sealed segment and keeps its files.
    let m = LogManager::open(dir.path()).unwrap();
    let log = m.open_log("t-0", config()).unwrap();
    check(&log, &big);
    assert_eq!(files(&part, 0)[1..], [Some(0), Some(12)]);
    m.close().unwrap();
    drop((log, m));

    // Without a checkpoint (every segment validated and its indexes rebuilt) too.
    std::fs::remove_file(part.join("partition.checkpoint")).unwrap();
    let m = LogManager::open(dir.path()).unwrap();
    let log = m.open_log("t-0", config()).unwrap();
    check(&log, &big);
    // (A rebuilt time index lacks the final entry: its file may be empty too.)
    let [_, index, time] = files(&part, 0);
    assert_eq!(index, Some(0));
    assert!(time.is_some());
    m.close().unwrap();
}
