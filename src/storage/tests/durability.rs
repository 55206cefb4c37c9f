//! The durability rule of durable appends (issue 17): an acknowledged append waits for
//! the fsync of the log's data only; the index files are fsynced when their segment is
//! sealed, before a checkpoint trusts them, by `sync` and on close. These tests take a
//! crash image of a log after durable acknowledgements, take index entries away as a
//! power loss could (they were never fsynced), and check that opening finds every
//! acknowledged record by offset and by timestamp.

use crate::record::BatchBuilder;
use crate::storage::*;
use std::fs;
use std::path::Path;

/// The timestamp of batch `i`: increasing, except batch 20, whose timestamp is larger
/// than any other (so the segment's largest timestamp is known only from the time
/// index entry after it, or from batch 20 itself).
fn ts(i: i64) -> i64 {
    if i == 20 { 9_000_000 } else { 1_000 + i }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 256,
        index_max_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Appends batch `i` (one record, timestamp `ts(i)`) and waits until it is durable.
fn append_durably(log: &PartitionLog, i: i64) {
    let mut b = BatchBuilder::new();
    b.push(ts(i), None, Some(format!("value-{i}").as_bytes()), &[]);
    let info = log.append_builder(&mut b).unwrap();
    assert_eq!(info.base_offset, i);
    log.sync_to(info.last_offset + 1).unwrap();
}

/// Checks that `log` holds exactly records `0..n`, each found by offset and by timestamp.
fn check(log: &PartitionLog, n: i64) {
    assert_eq!(log.log_end_offset(), n);
    for i in 0..n {
        let s = log.read(i, 1).unwrap();
        let b = s.batches().next().expect("a batch at every offset");
        let r = b.records().next().unwrap().unwrap();
        assert_eq!(r.offset, i);
        assert_eq!(r.value.unwrap(), format!("value-{i}").as_bytes());
        // The first record at or after ts(i).
        let want = (0..n).find(|&j| ts(j) >= ts(i)).unwrap();
        assert_eq!(
            log.offset_for_timestamp(ts(i)).unwrap(),
            Some((want, ts(want))),
            "lookup of timestamp {}",
            ts(i)
        );
    }
    assert_eq!(log.offset_for_timestamp(ts(20) + 1).unwrap(), None);
}

/// A copy of every file of `from` in `to`: what a process killed now leaves on disk.
fn crash_image(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

/// Zeroes an index file from entry `keep` on, as if the pages written after an earlier
/// writeback never reached the disk.
fn lose_entries(path: &Path, entry_size: usize, keep: usize) {
    let mut bytes = fs::read(path).unwrap();
    let from = (keep * entry_size).min(bytes.len());
    bytes[from..].fill(0);
    fs::write(path, bytes).unwrap();
}

/// Time index entries of `path` (timestamp, relative offset), up to the zero tail.
fn time_entries(path: &Path) -> Vec<(i64, u32)> {
    let bytes = fs::read(path).unwrap();
    bytes
        .chunks_exact(super::time_index::TIME_ENTRY)
        .map(super::time_index::read_time_entry)
        .take_while(|&(t, _)| t != 0)
        .collect()
}

#[test]
fn durable_appends_leave_the_active_indexes_to_be_synced_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", config()).unwrap();
    for i in 0..40 {
        append_durably(&log, i);
    }
    let active = log.segments().last().unwrap().clone();
    assert!(active.index_entries() > 0, "the test needs index entries");
    assert!(
        active.indexes_dirty(),
        "a durable append fsyncs the data, not the index entries"
    );
    // A roll: the data of the sealed segment is already durable, its final time entry
    // and trims are not; the checkpoint that trusts it syncs them first.
    log.roll().unwrap();
    append_durably(&log, 40);
    log.flush_sealed().unwrap();
    assert_eq!(log.recovery_point(), 41);
    assert!(
        !active.indexes_dirty(),
        "synced before the checkpoint trusts it"
    );
    assert!(
        !active.sync_indexes().unwrap(),
        "nothing written since: no fsync"
    );
    // `sync` makes everything durable, the active segment's indexes too.
    for i in 41..80 {
        append_durably(&log, i);
    }
    let active = log.segments().last().unwrap().clone();
    assert!(active.indexes_dirty());
    log.sync().unwrap();
    assert!(!active.indexes_dirty());
    log.close().unwrap();
}

#[test]
fn acknowledged_records_survive_index_entries_lost_in_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let log = PartitionLog::open(live.join("t-0"), "t-0", config()).unwrap();
    let n = 60;
    for i in 0..n {
        append_durably(&log, i);
    }
    // The maintenance thread checkpoints the recovery point the acks moved.
    log.flush_sealed().unwrap();
    assert_eq!(log.recovery_point(), n);
    let index = |d: &Path, ext: &str| d.join(format!("{:020}.{ext}", 0));
    let offset_entries = log.segments()[0].index_entries();
    let times = time_entries(&index(&live.join("t-0"), "timeindex"));
    // The entry carrying batch 20's timestamp, and the time entries before it.
    let first_max = times.iter().position(|&(t, _)| t == ts(20)).unwrap();
    assert!(first_max > 0 && offset_entries > 10, "{times:?}");

    // (time entries kept, offset entries kept); None: the file is gone.
    let cases: [(Option<usize>, Option<usize>); 4] = [
        // The time index lost the entry of the largest timestamp (and the ones after),
        // the offset index kept every entry: only a walk from the last time entry
        // finds the segment's largest timestamp.
        (Some(first_max), Some(offset_entries)),
        (Some(1), Some(2)),
        (Some(0), Some(0)),
        (None, None),
    ];
    for (k, (time_kept, offset_kept)) in cases.into_iter().enumerate() {
        let crashed = dir.path().join(format!("crash-{k}"));
        let d = crashed.join("t-0");
        crash_image(&live.join("t-0"), &d);
        for (kept, ext, size) in [
            (time_kept, "timeindex", super::time_index::TIME_ENTRY),
            (offset_kept, "index", super::index::OFFSET_ENTRY),
        ] {
            match kept {
                Some(keep) => lose_entries(&index(&d, ext), size, keep),
                None => fs::remove_file(index(&d, ext)).unwrap(),
            }
        }
        let reopened = PartitionLog::open(&d, "t-0", config()).unwrap();
        if k == 0 {
            let r = reopened.recovery_report();
            assert_eq!(
                (r.segments_trusted, r.bytes_validated),
                (1, 0),
                "the case is meant for the trusted walk: {r:?}"
            );
        }
        check(&reopened, n);
        // Appends after the crash extend the recovered indexes consistently.
        for i in n..n + 20 {
            append_durably(&reopened, i);
        }
        check(&reopened, n + 20);
        reopened.close().unwrap();
        drop(reopened);
        let again = PartitionLog::open(&d, "t-0", config()).unwrap();
        check(&again, n + 20);
    }
    log.close().unwrap();
}
