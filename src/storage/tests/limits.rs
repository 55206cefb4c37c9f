//! What logs hold open does not grow with partitions or segments: no descriptor per
//! segment, maps of sealed segments bounded, and an empty partition costs an empty file.

use super::batch;
use crate::storage::*;
use std::fs;
use std::path::Path;

fn tiny() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Every record of `log` from its start, checked against what `write` appended.
fn read_back(log: &PartitionLog, batches: u32) {
    let mut at = log.log_start_offset();
    let mut n = 0;
    while at < log.high_watermark() {
        let s = log.read(at, 700).unwrap();
        assert!(!s.is_empty());
        for b in s.batches() {
            for r in b.records() {
                let r = r.unwrap();
                assert_eq!(r.offset, n);
                assert_eq!(r.value.unwrap(), format!("value-{n:06}").as_bytes());
                n += 1;
            }
        }
        at = s.next_offset();
    }
    assert_eq!(n, i64::from(batches) * 5);
}

#[test]
fn many_logs_and_segments_stay_within_the_descriptor_and_map_limits() {
    let dir = tempfile::tempdir().unwrap();
    let limits = StorageLimits {
        open_files: 4,
        mapped_segments: 3,
    };
    let manager = LogManager::open_with_limits(dir.path(), limits).unwrap();
    let logs: Vec<PartitionLog> = (0..12)
        .map(|i| manager.open_log(&format!("t-{i}"), tiny()).unwrap())
        .collect();
    for (i, log) in logs.iter().enumerate() {
        for b in 0..40u32 {
            log.append(&batch(b * 5, 5, i as i64)).unwrap();
        }
        assert!(log.segment_count() > 5, "{}", log.segment_count());
    }
    assert!(manager.open_files() <= 4, "{}", manager.open_files());
    for log in &logs {
        read_back(log, 40);
        assert!(manager.open_files() <= 4);
        assert!(
            manager.mapped_segments() <= 3,
            "{}",
            manager.mapped_segments()
        );
    }
    // Lookups and time lookups in segments unmapped since still find their batch.
    for log in &logs {
        for off in [0, 57, 123, 199] {
            let s = log.read(off, 1).unwrap();
            let b = s.batches().next().unwrap();
            assert!(b.base_offset() <= off && off <= b.last_offset());
        }
        assert!(log.offset_for_timestamp(0).unwrap().is_some());
    }
    // A slice keeps its bytes and, once asked, its descriptor, however the cache and
    // the budget move on.
    let held = logs[0].read(0, 100).unwrap();
    let copy = held.to_vec();
    let fd = held.file().expect("a descriptor for sendfile");
    for log in &logs[1..] {
        read_back(log, 40);
    }
    assert_eq!(&held[..], &copy[..]);
    let mut from_fd = vec![0u8; copy.len()];
    std::os::unix::fs::FileExt::read_exact_at(fd, &mut from_fd, held.file_position()).unwrap();
    assert_eq!(from_fd, copy);
    manager.close().unwrap();
    drop(manager);

    // Reopened: nothing is opened or mapped until it is read.
    let manager = LogManager::open_with_limits(dir.path(), limits).unwrap();
    let logs: Vec<PartitionLog> = (0..12)
        .map(|i| manager.open_log(&format!("t-{i}"), tiny()).unwrap())
        .collect();
    assert_eq!(manager.open_files(), 0);
    assert_eq!(manager.mapped_segments(), 0);
    assert!(
        logs.iter()
            .all(|l| l.segments().iter().all(|s| !s.is_mapped()))
    );
    for log in &logs {
        assert!(
            log.recovery_report().is_clean(),
            "{:?}",
            log.recovery_report()
        );
        read_back(log, 40);
        log.append(&batch(200, 5, 0)).unwrap();
    }
    assert!(manager.open_files() <= 4);
    assert!(manager.mapped_segments() <= 3);
}

/// Files and bytes under `dir`.
fn files_and_bytes(dir: &Path) -> (Vec<String>, u64) {
    let mut names = Vec::new();
    let mut bytes = 0;
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        names.push(e.file_name().to_string_lossy().into_owned());
        bytes += e.metadata().unwrap().len();
    }
    names.sort();
    (names, bytes)
}

#[test]
fn an_empty_partition_is_an_empty_segment_file_and_its_indexes_come_with_their_first_entry() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", tiny()).unwrap();
    let (names, bytes) = files_and_bytes(&dir.path().join("t-0"));
    assert_eq!(names, ["00000000000000000000.log"]);
    assert_eq!(bytes, 0);
    // A batch smaller than the index interval: still no index file.
    log.append(&batch(0, 1, 0)).unwrap();
    let (names, _) = files_and_bytes(&dir.path().join("t-0"));
    assert_eq!(names, ["00000000000000000000.log"]);
    for i in 1..8 {
        log.append(&batch(i, 1, 0)).unwrap();
    }
    let (names, _) = files_and_bytes(&dir.path().join("t-0"));
    assert_eq!(
        names,
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex"
        ]
    );
    log.close().unwrap();
    drop(log);
    // Without index files, a small segment reopens clean; with them, as written.
    let empty = PartitionLog::open(dir.path().join("t-1"), "t-1", tiny()).unwrap();
    empty.append(&batch(0, 1, 0)).unwrap();
    empty.close().unwrap();
    drop(empty);
    for name in ["t-0", "t-1"] {
        let log = PartitionLog::open(dir.path().join(name), name, tiny()).unwrap();
        assert!(
            log.recovery_report().is_clean(),
            "{name}: {:?}",
            log.recovery_report()
        );
        assert!(log.read(0, 100).unwrap().batches().next().is_some());
    }
}

#[test]
fn a_lost_index_of_a_segment_that_had_entries_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", tiny()).unwrap();
    for i in 0..30 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let first = log.segment_base_offsets()[0];
    log.close().unwrap();
    drop(log);
    let index = dir.path().join("t-0").join(format!("{first:020}.index"));
    assert!(index.exists());
    fs::remove_file(&index).unwrap();
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", tiny()).unwrap();
    assert_eq!(
        log.recovery_report().indexes_rebuilt,
        std::slice::from_ref(&index)
    );
    assert!(index.exists());
}
