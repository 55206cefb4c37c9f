//! Unit tests of the partition log through its public surface; the rooms below test one
//! concern each (durable appends, damaged bytes, read-only following, open files,
//! idempotent producers, replication), with the helpers here.

mod durability;
mod faults;
mod follow;
mod limits;
pub(crate) mod log_dirs;
mod producers;
mod replication;
mod segment_files;

use super::*;
use crate::error::Error;
use crate::record::{BatchBuilder, batches};
use std::fs;
use std::path::Path;
use std::time::Duration;

pub(super) fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

pub(super) fn batch(first: u32, n: u32, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in first..first + n {
        let key = format!("k{}", i % 7);
        b.push(
            ts + i as i64,
            Some(key.as_bytes()),
            Some(format!("value-{i:06}").as_bytes()),
            &[],
        );
    }
    b.finish()
}

fn values(log: &PartitionLog, from: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut off = from;
    loop {
        let s = log.read(off, 1000).unwrap();
        if s.is_empty() {
            break;
        }
        for b in s.batches() {
            for r in b.records() {
                let r = r.unwrap();
                if r.offset >= from {
                    out.push((
                        r.offset,
                        String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                    ));
                }
            }
        }
        off = s.next_offset();
    }
    out
}

fn open(dir: &Path, c: LogConfig) -> PartitionLog {
    PartitionLog::open(dir.join("t-0"), "t-0", c).unwrap()
}

/// Writes 60 batches of 5 records into small segments and closes the log cleanly (every
/// segment is then trusted on the next open); returns the segment base offsets.
fn write_60_batches_and_close(dir: &Path) -> Vec<i64> {
    let log = open(dir, small());
    for i in 0..60 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    bases
}

#[test]
fn append_read_across_segments_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    for i in 0..100 {
        let info = log.append(&batch(i * 5, 5, 1000)).unwrap();
        assert_eq!(info.base_offset, i as i64 * 5);
        assert_eq!(info.last_offset, i as i64 * 5 + 4);
    }
    assert!(log.segment_count() > 3, "small segments roll");
    assert_eq!(log.log_end_offset(), 500);
    let all = values(&log, 0);
    assert_eq!(all.len(), 500);
    for (i, (o, v)) in all.iter().enumerate() {
        assert_eq!(*o, i as i64);
        assert_eq!(v, &format!("value-{i:06}"));
    }
    // A read in the middle of a batch starts with that batch.
    let s = log.read(7, 1).unwrap();
    assert_eq!(s.base_offset(), 5);
    assert_eq!(
        s.batches().count(),
        1,
        "max_bytes below one batch still gives one"
    );
    log.close().unwrap();
    assert!(matches!(log.append(&batch(0, 1, 0)), Err(Error::Closed(_))));

    let log = open(dir.path(), small());
    assert!(
        log.recovery_report().is_clean(),
        "{:?}",
        log.recovery_report()
    );
    assert_eq!(
        log.recovery_report().segments_validated,
        0,
        "a clean close needs no validation"
    );
    assert_eq!(values(&log, 0).len(), 500);
    assert_eq!(log.append(&batch(500, 1, 0)).unwrap().base_offset, 500);
}

#[test]
fn read_bounds_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    log.append(&batch(0, 3, 0)).unwrap();
    assert!(log.read(3, 100).unwrap().is_empty());
    match log.read(4, 100) {
        Err(Error::OffsetOutOfRange {
            offset,
            start,
            end,
            partition,
        }) => {
            assert_eq!((offset, start, end), (4, 0, 3));
            assert_eq!(partition, "t-0");
        }
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    assert!(log.read(-1, 100).is_err());
}

#[test]
fn bad_batches_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            max_message_bytes: 200,
            ..small()
        },
    );
    let big = batch(0, 20, 0);
    assert!(matches!(
        log.append(&big),
        Err(Error::MessageTooLarge { .. })
    ));
    let mut good_then_bad = batch(0, 1, 0);
    let mut bad = batch(1, 1, 0);
    bad[30] ^= 1;
    good_then_bad.extend_from_slice(&bad);
    assert!(log.append(&good_then_bad).unwrap_err().is_corruption());
    assert_eq!(log.log_end_offset(), 0, "nothing of a refused append lands");
    let mut neg = BatchBuilder::new();
    neg.push(-5, None, Some(b"x"), &[]);
    let e = log.append(&neg.finish()).unwrap_err().to_string();
    assert!(e.contains("negative timestamp"), "{e}");
    assert!(log.append(&[]).is_err());
}

#[test]
fn several_batches_in_one_append_get_consecutive_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    let mut two = batch(0, 2, 0);
    two.extend_from_slice(&batch(2, 3, 0));
    let info = log.append(&two).unwrap();
    assert_eq!(
        (info.base_offset, info.last_offset, info.record_count),
        (0, 4, 5)
    );
    let offs: Vec<i64> = values(&log, 0).into_iter().map(|(o, _)| o).collect();
    assert_eq!(offs, vec![0, 1, 2, 3, 4]);
}

#[test]
fn torn_tail_is_cut_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    for i in 0..10 {
        log.append(&batch(i * 2, 2, 0)).unwrap();
    }
    log.close().unwrap();
    drop(log);
    // Append half a batch to the active segment and drop the checkpoint, as a crash
    // in the middle of a write would leave it.
    let seg_dir = dir.path().join("t-0");
    let last = fs::read_dir(&seg_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let mut bytes = fs::read(&last).unwrap();
    let keep = bytes.len();
    let b = batch(100, 3, 0);
    bytes.extend_from_slice(&b[..b.len() / 2]);
    fs::write(&last, &bytes).unwrap();
    fs::remove_file(seg_dir.join(CHECKPOINT_FILE)).unwrap();

    let log = open(dir.path(), small());
    let r = log.recovery_report();
    assert_eq!(r.truncated.len(), 1, "{r:?}");
    assert_eq!(r.truncated[0].1, keep as u64);
    assert!(r.truncated[0].2.contains("torn"), "{r:?}");
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(values(&log, 0).len(), 20);
    assert_eq!(fs::metadata(&last).unwrap().len(), keep as u64);
}

#[test]
fn flipped_bit_cuts_the_log_and_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_60_batches_and_close(dir.path());
    assert!(bases.len() >= 3);
    let seg_dir = dir.path().join("t-0");
    // Damage the second segment; pretend nothing was flushed.
    let victim = seg_dir.join(format!("{:020}.log", bases[1]));
    let mut bytes = fs::read(&victim).unwrap();
    let at = bytes.len() - 1; // inside the last batch's records: covered by the CRC
    bytes[at] ^= 0x40;
    fs::write(&victim, &bytes).unwrap();
    fs::remove_file(seg_dir.join(CHECKPOINT_FILE)).unwrap();
    let log = open(dir.path(), small());
    let r = log.recovery_report().clone();
    assert_eq!(r.truncated.len(), 1, "{r:?}");
    assert!(r.truncated[0].2.contains("CRC"), "{r:?}");
    assert_eq!(r.segments_removed.len(), bases.len() - 2);
    let end = log.log_end_offset();
    assert!(
        end > bases[1] && end < bases[2],
        "cut inside the damaged segment: {end}"
    );
    assert_eq!(values(&log, 0).len() as i64, end);
}

#[test]
fn missing_or_damaged_index_of_trusted_segment_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_60_batches_and_close(dir.path());
    let seg_dir = dir.path().join("t-0");
    fs::remove_file(seg_dir.join(format!("{:020}.index", bases[0]))).unwrap();
    fs::write(seg_dir.join(format!("{:020}.index", bases[1])), [0xffu8; 5]).unwrap();
    let log = open(dir.path(), small());
    let r = log.recovery_report();
    assert_eq!(r.indexes_rebuilt.len(), 2, "{r:?}");
    assert!(r.truncated.is_empty());
    assert_eq!(values(&log, 0).len(), 300);
    // Lookups through the rebuilt indexes land on the right batch.
    for off in [0, 7, 123, 299] {
        let s = log.read(off, 1).unwrap();
        let b = s.batches().next().unwrap();
        assert!(b.base_offset() <= off && off <= b.last_offset());
    }
}

#[test]
fn offset_for_timestamp_finds_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    // Record i has timestamp 10_000 + 10 * i.
    for i in 0..100u32 {
        let mut b = BatchBuilder::new();
        for j in 0..3 {
            let n = i * 3 + j;
            b.push(10_000 + 10 * n as i64, None, Some(&[0u8; 40]), &[]);
        }
        log.append(&b.finish()).unwrap();
    }
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 10_000)));
    assert_eq!(log.offset_for_timestamp(10_000).unwrap(), Some((0, 10_000)));
    assert_eq!(log.offset_for_timestamp(10_001).unwrap(), Some((1, 10_010)));
    assert_eq!(
        log.offset_for_timestamp(12_345).unwrap(),
        Some((235, 12_350))
    );
    assert_eq!(
        log.offset_for_timestamp(12_990).unwrap(),
        Some((299, 12_990))
    );
    assert_eq!(log.offset_for_timestamp(13_000).unwrap(), None);
}

#[test]
fn truncate_then_append_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    for i in 0..60 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let held = log.read(290, 100).unwrap(); // a reader holding bytes past the cut
    let new_end = log.truncate_to(102).unwrap();
    assert_eq!(new_end, 100, "the batch containing 102 goes whole");
    assert_eq!(log.log_end_offset(), 100);
    assert!(held.batches().count() >= 1, "old slices stay readable");
    assert_eq!(log.append(&batch(100, 5, 0)).unwrap().base_offset, 100);
    assert_eq!(values(&log, 0).len(), 105);
    drop(log);
    // Without the checkpoint the truncated batches must not come back (with nothing
    // synced, the recovery point and log start are 0: there may be none to remove).
    match fs::remove_file(dir.path().join("t-0").join(CHECKPOINT_FILE)) {
        Ok(()) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
    }
    let log = open(dir.path(), small());
    assert_eq!(log.log_end_offset(), 105);
    assert_eq!(values(&log, 0).len(), 105);
}

#[test]
fn a_retention_hold_keeps_the_records_at_and_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            retention_ms: Some(1000),
            retention_bytes: None,
            ..small()
        },
    );
    for i in 0..100 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 3, "{bases:?}");
    let held_at = bases[2] + 1;
    log.hold_retention("forward-a", Some(held_at));
    log.hold_retention("forward-b", Some(bases[3]));
    assert_eq!(log.retention_floor(), Some(held_at));
    log.apply_retention(now_ms()).unwrap();
    assert_eq!(
        log.log_start_offset(),
        bases[2],
        "the segment holding the lowest hold stays"
    );
    assert!(log.read(held_at, 10).is_ok());
    log.hold_retention("forward-a", None);
    log.apply_retention(now_ms()).unwrap();
    assert_eq!(
        log.log_start_offset(),
        bases[3],
        "the other hold still holds"
    );
    log.hold_retention("forward-b", None);
    assert_eq!(log.retention_floor(), None);
    log.apply_retention(now_ms()).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "released: every sealed segment expired"
    );
}

#[test]
fn a_durable_retention_hold_of_a_read_only_opener_outlives_the_writers_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: Some(1000),
        retention_bytes: None,
        ..small()
    };
    let writer = LogManager::open(dir.path()).unwrap();
    let w = writer.open_log("t-0", config.clone()).unwrap();
    for i in 0..100 {
        w.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let bases = w.segment_base_offsets();
    assert!(bases.len() > 4, "{bases:?}");
    // A reader of the directory the writer holds sets its hold in a file.
    let reader = LogManager::open_read_only(dir.path()).unwrap();
    let r = reader.open_log("t-0", config.clone()).unwrap();
    let held_at = bases[2] + 1;
    r.hold_retention_durably("forward-a", Some(held_at))
        .unwrap();
    assert_eq!(
        r.durable_retention_hold("forward-a").unwrap(),
        Some(held_at)
    );
    assert_eq!(r.durable_retention_hold("forward-b").unwrap(), None);
    // The writer restarts: nothing in its memory holds, the file does.
    drop(w);
    writer.close().unwrap();
    drop(writer);
    let writer = LogManager::open(dir.path()).unwrap();
    let w = writer.open_log("t-0", config.clone()).unwrap();
    assert_eq!(w.retention_floor(), None);
    assert_eq!(
        w.durable_retention_holds().unwrap(),
        vec![("forward-a".to_string(), held_at)]
    );
    w.apply_retention(now_ms()).unwrap();
    assert_eq!(
        w.log_start_offset(),
        bases[2],
        "kept from the hold's segment on"
    );
    assert!(w.read(held_at, 10).is_ok());
    // Released: retention deletes what it held.
    r.hold_retention_durably("forward-a", None).unwrap();
    w.apply_retention(now_ms()).unwrap();
    assert_eq!(w.segment_count(), 1, "every sealed segment expired");
    // Bad names and damaged files are errors naming them, never a silent release.
    let e = w.hold_retention_durably("../x", Some(0)).unwrap_err();
    assert!(e.to_string().contains("../x"), "{e}");
    let path = dir.path().join("t-0").join("forward-c.retention-hold");
    fs::write(&path, b"TLCP garbage").unwrap();
    for _ in 0..30 {
        w.append(&batch(500, 5, 0)).unwrap();
    }
    let e = w.apply_retention(now_ms()).unwrap_err();
    assert!(e.to_string().contains("forward-c.retention-hold"), "{e}");
    assert!(w.segment_count() > 1, "nothing deleted past a damaged hold");
}

#[test]
fn size_and_time_retention_delete_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            retention_ms: None,
            retention_bytes: Some(8192),
            ..small()
        },
    );
    for i in 0..100 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let before = log.segment_count();
    let held = log.read(0, 100).unwrap();
    let out = log.apply_retention(now_ms()).unwrap();
    assert!(out.segments_deleted > 0);
    assert_eq!(log.segment_count(), before - out.segments_deleted);
    assert!(log.size_bytes() >= 8192);
    let start = log.log_start_offset();
    assert_eq!(start, log.segment_base_offsets()[0]);
    assert!(matches!(
        log.read(0, 10),
        Err(Error::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        held.batches().next().unwrap().base_offset(),
        0,
        "a held slice survives deletion"
    );
    // Time: everything has timestamps near 0, far in the past.
    let mut c = log.config();
    c.retention_ms = Some(1000);
    c.retention_bytes = None;
    log.set_config(c).unwrap();
    log.apply_retention(now_ms()).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "all sealed segments expired; the active stays"
    );
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(
        log.log_start_offset(),
        log.segment_base_offsets()[0],
        "log start survives reopen"
    );
}

#[test]
fn compaction_keeps_latest_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = small();
    c.cleanup_policy = CleanupPolicy::Compact;
    c.delete_retention_ms = 0;
    let log = open(dir.path(), c);
    // 7 keys, 300 records.
    for i in 0..60 {
        log.append(&batch(i * 5, 5, 0)).unwrap();
    }
    let out = log.apply_retention(now_ms()).unwrap();
    assert!(
        out.segments_compacted > 0 && out.records_removed > 0,
        "{out:?}"
    );
    let vals = values(&log, 0);
    // Every key's latest record survives with its original offset.
    for k in 0..7 {
        let last = (0..300).filter(|i| i % 7 == k).max().unwrap();
        assert!(
            vals.iter()
                .any(|(o, v)| *o == last as i64 && v == &format!("value-{last:06}"))
        );
    }
    assert!(vals.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(log.log_end_offset(), 300);
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(values(&log, 0), vals, "compacted segments survive reopen");
}

#[test]
fn wait_for_wakes_on_append_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    assert!(!log.wait_for(0, Duration::from_millis(20)));
    let l2 = log.clone();
    let t = std::thread::spawn(move || l2.wait_for(0, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(50));
    log.append(&batch(0, 1, 0)).unwrap();
    assert!(t.join().unwrap());
    let l3 = log.clone();
    let t = std::thread::spawn(move || l3.wait_for(5, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(50));
    log.close().unwrap();
    assert!(!t.join().unwrap(), "close wakes waiters");
}

#[test]
fn log_append_time_restamps() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            log_append_time: true,
            ..small()
        },
    );
    let info = log.append(&batch(0, 3, 5)).unwrap();
    let t = info.log_append_time.unwrap();
    assert!(t > 1_600_000_000_000);
    let s = log.read(0, 1000).unwrap();
    let b = batches(&s).next().unwrap().unwrap(); // CRC still valid after restamp
    assert!(b.records().all(|r| r.unwrap().timestamp == t));
}

#[test]
fn manager_locks_directory_and_runs_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let m = LogManager::open(dir.path()).unwrap();
    assert!(matches!(
        LogManager::open(dir.path()),
        Err(Error::DirectoryLocked(_))
    ));
    let c = LogConfig {
        flush_ms: Some(1),
        ..small()
    };
    let log = m.open_log("a-0", c).unwrap();
    assert!(m.open_log("../x", LogConfig::default()).is_err());
    log.append(&batch(0, 1, 0)).unwrap();
    assert_eq!(log.recovery_point(), 0);
    m.start_background(Duration::from_millis(5), Duration::from_secs(3600));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while log.recovery_point() < 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(log.recovery_point(), 1, "flush.ms made the flusher sync");
    assert_eq!(m.names_on_disk().unwrap(), vec!["a-0".to_string()]);
    m.delete_log("a-0").unwrap();
    assert!(!dir.path().join("a-0").exists());
    drop(m);
    let m2 = LogManager::open(dir.path()).unwrap();
    m2.close().unwrap();
}

#[test]
fn flush_messages_syncs_inline() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            flush_messages: Some(4),
            ..small()
        },
    );
    log.append(&batch(0, 3, 0)).unwrap();
    assert_eq!(log.recovery_point(), 0);
    log.append(&batch(3, 1, 0)).unwrap();
    assert_eq!(log.recovery_point(), 4);
}

#[test]
fn damaged_middle_index_entry_of_trusted_segment_costs_a_scan_not_a_wrong_read() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_60_batches_and_close(dir.path());
    // Shift the position of the first entry of the first (trusted) segment's index by a
    // few bytes: still increasing, so only a lookup can notice.
    let idx = dir
        .path()
        .join("t-0")
        .join(format!("{:020}.index", bases[0]));
    let mut bytes = fs::read(&idx).unwrap();
    assert!(
        bytes.len() >= 16,
        "the segment has at least two index entries"
    );
    let pos = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
    bytes[4..8].copy_from_slice(&(pos + 3).to_be_bytes());
    fs::write(&idx, &bytes).unwrap();
    let log = open(dir.path(), small());
    assert_eq!(
        log.recovery_report().segments_validated,
        0,
        "every segment is trusted"
    );
    for off in 0..bases[1] {
        let s = log.read(off, 1).unwrap();
        let b = s.batches().next().expect("a batch for every offset");
        assert!(
            b.base_offset() <= off && off <= b.last_offset(),
            "read({off})"
        );
    }
}

#[test]
fn closing_an_unchanged_log_does_not_rewrite_its_checkpoint() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    log.append(&batch(0, 3, 0)).unwrap();
    log.close().unwrap();
    drop(log);
    let cp = dir.path().join("t-0").join(CHECKPOINT_FILE);
    let inode = fs::metadata(&cp).unwrap().ino();
    let log = open(dir.path(), small());
    log.close().unwrap();
    drop(log);
    assert_eq!(
        fs::metadata(&cp).unwrap().ino(),
        inode,
        "no rewrite (rename) happened"
    );
    let log = open(dir.path(), small());
    log.append(&batch(3, 1, 0)).unwrap();
    log.close().unwrap();
    assert_ne!(
        fs::metadata(&cp).unwrap().ino(),
        inode,
        "a change is checkpointed"
    );
}

#[test]
fn a_new_partition_writes_no_checkpoint_until_an_offset_moves() {
    // A missing checkpoint reads as recovery point 0 and log start 0: writing those
    // zeros is an fsync and a directory sync that say nothing (a broker creating the 50
    // `__consumer_offsets` partitions paid 107 fsyncs for them).
    let dir = tempfile::tempdir().unwrap();
    let cp = dir.path().join("t-0").join(CHECKPOINT_FILE);
    let log = open(dir.path(), small());
    log.sync().unwrap();
    log.flush_sealed().unwrap();
    log.close().unwrap();
    drop(log);
    assert!(!cp.exists(), "an empty log has nothing to checkpoint");
    let log = open(dir.path(), small());
    log.flush_sealed().unwrap();
    assert!(!cp.exists(), "reopening an empty log writes none either");
    log.append(&batch(0, 2, 0)).unwrap();
    log.flush_sealed().unwrap();
    assert!(!cp.exists(), "the recovery point has not moved yet");
    log.sync().unwrap();
    assert_eq!(
        super::checkpoint::read(&cp).unwrap(),
        Some(super::recovery::encode_checkpoint(2, 0).to_vec()),
        "the first move is checkpointed"
    );
    log.close().unwrap();
}

#[test]
fn sync_to_moves_the_recovery_point_and_the_flush_check_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), small());
    let cp = dir.path().join("t-0").join(CHECKPOINT_FILE);
    let on_disk = || super::checkpoint::read(&cp).unwrap();
    log.append(&batch(0, 3, 0)).unwrap();
    log.sync().unwrap();
    assert_eq!(
        on_disk(),
        Some(super::recovery::encode_checkpoint(3, 0).to_vec())
    );
    log.append(&batch(3, 2, 0)).unwrap();
    log.append(&batch(5, 1, 0)).unwrap();
    // One sync covers both appends, whichever offset is asked for.
    log.sync_to(5).unwrap();
    assert_eq!(log.recovery_point(), 6);
    log.sync_to(6).unwrap();
    // The durable path leaves the checkpoint behind (never ahead) ...
    assert_eq!(
        on_disk(),
        Some(super::recovery::encode_checkpoint(3, 0).to_vec())
    );
    // ... and the maintenance thread's flush check writes it.
    log.flush_sealed().unwrap();
    assert_eq!(
        on_disk(),
        Some(super::recovery::encode_checkpoint(6, 0).to_vec())
    );
    // A poisoned log is not synced again: the caller hears why.
    log.append(&batch(6, 1, 0)).unwrap();
    log.poison(&Error::Timeout("injected fsync failure".into()));
    match log.sync_to(7) {
        Err(Error::Poisoned { partition, reason }) => {
            assert_eq!(partition, "t-0");
            assert!(reason.contains("injected fsync failure"), "{reason}");
        }
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert_eq!(log.recovery_point(), 6);
}

/// Minor page faults this thread has taken (Linux: field 10 of /proc/thread-self/stat).
#[cfg(target_os = "linux")]
fn minor_faults() -> u64 {
    let stat = fs::read_to_string("/proc/thread-self/stat").unwrap();
    // The command name (field 2) may hold spaces; fields after it are plain.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(7).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn sequential_reads_of_on_disk_bytes_are_mapped_ahead_random_reads_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 64 << 20,
        ..LogConfig::default()
    };
    {
        let m = LogManager::open(dir.path()).unwrap();
        let log = m.open_log("r-0", c.clone()).unwrap();
        let value = vec![7u8; 1000];
        while log.size_bytes() < 24 << 20 {
            let mut b = BatchBuilder::new();
            for _ in 0..100 {
                b.push(0, None, Some(&value), &[]);
            }
            log.append(&b.finish()).unwrap();
        }
        m.close().unwrap();
    }
    let m = LogManager::open(dir.path()).unwrap();
    let log = m.open_log("r-0", c).unwrap();
    let seg = log.segments()[0].clone();
    let end = log.high_watermark();
    // A read in the middle (a lookup) maps nothing ahead.
    log.read(end / 2, 1).unwrap();
    assert_eq!(seg.read_ahead_mark(), 0);
    // A reader from offset 0 continues where it stopped: the next window is requested
    // before it gets there.
    let mut off = 0;
    let mut first = true;
    while off < end * 3 / 4 {
        let s = log.read(off, 1 << 20).unwrap();
        assert!(seg.read_ahead_mark() >= s.file_position() as usize + s.len());
        if first {
            // Once the thread has mapped the window, touching it takes no page fault.
            m.prefaulter().wait_idle();
            let before = minor_faults();
            let window = log.read(s.next_offset(), 4 << 20).unwrap();
            let sum: u64 = window.iter().step_by(4096).map(|&b| b as u64).sum();
            let faults = minor_faults() - before;
            assert!(sum > 0 && faults < 8, "{faults} faults in a mapped window");
            first = false;
        }
        off = s.next_offset();
    }
    assert!(seg.read_ahead_mark() >= (16 << 20));
    m.close().unwrap();
}

#[test]
fn append_builder_checks_limits_like_append_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            max_message_bytes: 2000,
            ..small()
        },
    );
    let mut b = BatchBuilder::new();
    for i in 0..3 {
        b.push(
            10 + i,
            Some(b"k"),
            Some(format!("value-{i:06}").as_bytes()),
            &[],
        );
    }
    let info = log.append_builder(&mut b).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 2));
    assert!(b.is_empty());
    log.append(&batch(3, 2, 0)).unwrap();
    let got = values(&log, 0);
    assert_eq!(got.len(), 5);
    assert_eq!(got[1], (1, "value-000001".to_string()));
    // Too large, negative timestamp, empty: refused, nothing written, builder emptied.
    b.push(0, None, Some(&[0u8; 3000]), &[]);
    assert!(matches!(
        log.append_builder(&mut b),
        Err(Error::MessageTooLarge { .. })
    ));
    assert!(b.is_empty());
    b.push(-5, None, Some(b"x"), &[]);
    assert!(matches!(
        log.append_builder(&mut b),
        Err(Error::InvalidBatch(_))
    ));
    assert!(log.append_builder(&mut b).is_err());
    assert_eq!(log.high_watermark(), 5);
}

#[test]
fn a_reopened_segment_reserves_from_the_smallest_step_again() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 64 << 20,
        ..LogConfig::default()
    };
    let value = vec![3u8; 1000];
    let fill = |log: &PartitionLog, bytes: u64| {
        while log.size_bytes() < bytes {
            let mut b = BatchBuilder::new();
            for _ in 0..100 {
                b.push(0, None, Some(&value), &[]);
            }
            log.append_builder(&mut b).unwrap();
        }
    };
    let file = dir.path().join("t-0").join(segment::file_name(0, "log"));
    {
        let log = open(dir.path(), c.clone());
        fill(&log, 20 << 20);
        log.close().unwrap();
    }
    let data = fs::metadata(&file).unwrap().len();
    let log = open(dir.path(), c);
    log.append(&batch(0, 1, 0)).unwrap();
    let reserved = fs::metadata(&file).unwrap().len() - data;
    // One small append after a reopen reserves the smallest step, not a step as large
    // as the segment (the 16 MiB cap): an idle partition holds little past its data.
    assert!(reserved <= 512 << 10, "reserved {reserved} bytes");
    log.close().unwrap();
}

#[test]
fn large_batches_are_written_to_the_file_and_read_back_like_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 8 << 20,
        ..LogConfig::default()
    };
    let m = LogManager::open(dir.path()).unwrap();
    let log = m.open_log("t-0", c.clone()).unwrap();
    // Alternate bulk batches (100 KB, pwritev) with small ones (through the map), over
    // several segments, each record's value naming its offset.
    let mut next = 0i64;
    let mut push = |log: &PartitionLog, records: usize, size: usize| {
        let mut b = BatchBuilder::new();
        for i in 0..records as i64 {
            let mut v = format!("value-{:08}-", next + i).into_bytes();
            v.resize(size, b'.');
            b.push(0, None, Some(&v), &[]);
        }
        let info = log.append_builder(&mut b).unwrap();
        assert_eq!(info.base_offset, next);
        next = info.last_offset + 1;
    };
    for round in 0..120 {
        push(&log, 100, 1000);
        push(&log, 1 + round % 5, 100);
    }
    m.prefaulter().wait_idle();
    // A writer of bulk batches has nothing faulted in ahead of it.
    assert_eq!(m.prefaulter().write_jobs(), 0);
    assert!(log.segments().len() >= 2);
    let check = |log: &PartitionLog| {
        let got = values(log, 0);
        assert_eq!(got.len() as i64, next);
        for (off, v) in &got {
            assert!(
                v.starts_with(&format!("value-{off:08}-")),
                "offset {off}: {v}"
            );
        }
    };
    check(&log);
    // A writer of small batches still has its next pages faulted in ahead once it uses
    // a reservation step up fast enough (`PREFAULT_MIN_BYTES_PER_SEC`). The batch is
    // built and checked once, so that even a debug build sharing its cores with other
    // tests writes at that rate; every step is another chance, up to 64 MiB. The reads
    // of `check` queued read ranges first: they are drained before.
    m.prefaulter().wait_idle();
    let small_log = m.open_log("s-0", c.clone()).unwrap();
    let mut b = BatchBuilder::new();
    for _ in 0..100 {
        b.push(0, None, Some(&[5u8; 100]), &[]);
    }
    let bytes = b.finish();
    let small = crate::record::ValidBatches::parse(&bytes, "small batches").unwrap();
    while m.prefaulter().write_jobs() == 0 && small_log.size_bytes() < 64 << 20 {
        small_log.append_valid(&small).unwrap();
    }
    assert!(
        m.prefaulter().write_jobs() > 0,
        "a writer of small batches had nothing faulted in ahead after {} bytes",
        small_log.size_bytes()
    );
    drop((log, small_log));
    m.close().unwrap();
    drop(m);
    // What was written with pwritev is on disk like the rest.
    let m = LogManager::open(dir.path()).unwrap();
    check(&m.open_log("t-0", c).unwrap());
    m.close().unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn lookups_in_bytes_on_disk_read_headers_without_faulting_the_log_in() {
    let dir = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 64 << 20,
        ..LogConfig::default()
    };
    // Large batches (one index entry each, 64 KiB pages apart) and runs of small ones
    // (several batches between two index entries), then reopened: every byte is on disk.
    let mut expect = Vec::new();
    {
        let log = open(dir.path(), c.clone());
        for round in 0..150u32 {
            let mut b = BatchBuilder::new();
            let n = if round % 3 == 0 { 60 } else { 1 + round % 4 };
            let size = if round % 3 == 0 { 1200 } else { 40 };
            for _ in 0..n {
                let off = expect.len();
                let mut v = format!("v{off:07}").into_bytes();
                v.resize(size, b'-');
                b.push(0, None, Some(&v), &[]);
                expect.push(off as i64);
            }
            log.append_builder(&mut b).unwrap();
        }
        log.close().unwrap();
    }
    let log = open(dir.path(), c);
    // Every offset is found, and the batch found holds it.
    let mut rng = 12345u64;
    let mut offsets: Vec<i64> = expect.clone();
    for i in (1..offsets.len()).rev() {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        offsets.swap(i, (rng >> 33) as usize % (i + 1));
    }
    log.read(0, 1).unwrap(); // maps the offset index pages
    let mut found = vec![(-1i64, -1i64); offsets.len()]; // written: no fault later
    let before = minor_faults();
    for (&off, f) in offsets.iter().zip(found.iter_mut()) {
        let s = log.read(off, 1).unwrap();
        *f = (s.base_offset(), s.next_offset());
    }
    let faults = minor_faults() - before;
    // Through the map, each lookup of a large batch would fault a page in.
    assert!(faults < 8, "{faults} faults for {} lookups", offsets.len());
    for (&(base, next), &off) in found.iter().zip(&offsets) {
        assert!(
            base <= off && off < next,
            "offset {off} found in {base}..{next}"
        );
        let s = log.read(off, 1).unwrap();
        let b = s.batches().next().unwrap();
        let r = b
            .records()
            .find(|r| r.as_ref().unwrap().offset == off)
            .unwrap()
            .unwrap();
        assert!(
            r.value
                .unwrap()
                .starts_with(format!("v{off:07}").as_bytes())
        );
    }
    // Reads of more than one batch stop at max_bytes past the first, as before.
    let s = log.read(1, 1 << 20).unwrap();
    let more = log.read(s.next_offset(), 1).unwrap();
    assert_eq!(s.base_offset(), 0);
    assert!(s.len() <= 1 << 20 && s.len() + more.len() > 1 << 20);
    assert_eq!(
        s.batches().count(),
        found
            .iter()
            .filter(|f| f.0 < s.next_offset())
            .map(|f| f.0)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
}

#[test]
fn a_segment_older_than_segment_ms_is_rolled_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    // Alone, a log reads the system clock.
    let alone = open(
        dir.path(),
        LogConfig {
            segment_ms: 30,
            ..LogConfig::default()
        },
    );
    alone.append(&batch(0, 2, 0)).unwrap();
    alone.append(&batch(2, 2, 0)).unwrap();
    assert_eq!(alone.segments().len(), 1);
    std::thread::sleep(Duration::from_millis(60));
    alone.append(&batch(4, 2, 0)).unwrap();
    assert_eq!(alone.segments().len(), 2);
    assert_eq!(alone.segments()[1].base_offset, 4);
    alone.close().unwrap();
    drop(alone);
    // Under a manager whose maintenance thread ticks every 5 ms, a segment.ms of 50
    // ticks and more is checked against the maintenance clock: same outcome.
    let m = LogManager::open(dir.path().join("managed")).unwrap();
    m.start_background(Duration::from_millis(5), Duration::from_secs(3600));
    let log = m
        .open_log(
            "m-0",
            LogConfig {
                segment_ms: 250,
                ..LogConfig::default()
            },
        )
        .unwrap();
    log.append(&batch(0, 2, 0)).unwrap();
    log.append(&batch(2, 2, 0)).unwrap();
    assert_eq!(log.segments().len(), 1);
    std::thread::sleep(Duration::from_millis(400));
    log.append(&batch(4, 2, 0)).unwrap();
    assert_eq!(log.segments().len(), 2);
    assert!(m.clock().now_within(250).is_some(), "the clock ticks");
    assert!(m.clock().now_within(249).is_none(), "too coarse for 249 ms");
    drop(log);
    m.close().unwrap();
    assert!(
        m.clock().now_within(u64::MAX).is_none(),
        "stopped with the thread"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_first_index_entry_brings_in_pages_not_megabytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig::default());
    // Two batches over the index interval: the second gets the first index entries.
    let value = vec![1u8; 5000];
    for _ in 0..2 {
        let mut b = BatchBuilder::new();
        b.push(0, None, Some(&value), &[]);
        log.append_builder(&mut b).unwrap();
    }
    let seg = log.segments()[0].clone();
    assert_eq!(seg.index_entries(), 1);
    // The index files are holes up to index_max_bytes (10 MB): read-ahead on the first
    // fault would zero-fill up to the device's read_ahead_kb of them.
    let maps = seg.index_maps();
    assert_eq!(maps.len(), 2);
    for (map, path) in maps {
        let cached = map.cached_pages(LogConfig::default().index_max_bytes as usize);
        assert!(cached <= 4, "{cached} pages of {} cached", path.display());
    }
}
