//! Unit tests of the replication primitives: the high watermark in replicated mode,
//! bounded reads and waits, wake-ups, follower appends, leader epochs, truncation that
//! never changes a held byte and survives a crash at every step, and the data
//! directory's high-watermark checkpoint.

use crate::error::Error;
use crate::record::{BatchBuilder, batches, set_partition_leader_epoch};
use crate::storage::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir.join("r-0"), "r-0", small()).unwrap()
}

/// A batch of `n` records whose values name `tag` and the record's position.
fn batch(tag: &str, n: u32, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b.push(
            ts + i as i64,
            Some(format!("k{}", i % 3).as_bytes()),
            Some(format!("{tag}-{i:04}-padding-padding-padding").as_bytes()),
            &[],
        );
    }
    b.finish()
}

/// Every byte from `from` up to `limit`, following `next_offset`.
fn bytes_from(log: &PartitionLog, from: i64, limit: ReadLimit) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    for _ in 0..100_000 {
        let s = log.read_bounded(at, 1000, limit).unwrap();
        if s.is_empty() {
            return out;
        }
        out.extend_from_slice(&s);
        at = s.next_offset();
    }
    panic!("reading {} never reached its end", log.name());
}

fn epochs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.epoch_entries()
        .unwrap()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

#[test]
fn a_replicated_log_moves_its_high_watermark_only_when_told() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for i in 0..3 {
        log.append(&batch(&format!("s{i}"), 5, 1_000)).unwrap();
    }
    assert_eq!((log.log_end_offset(), log.high_watermark()), (15, 15));
    assert!(!log.is_replicated());
    // Entering replicated mode may lower the high watermark, never below the start.
    assert_eq!(log.set_replicated(7), 7);
    assert!(log.is_replicated());
    for i in 0..20 {
        log.append(&batch(&format!("r{i}"), 5, 2_000)).unwrap();
    }
    assert_eq!((log.log_end_offset(), log.high_watermark()), (115, 7));
    assert!(log.segment_count() > 1, "the small segments rolled");
    // Consumers read whole batches below the high watermark; one that straddles it
    // waits (a follower's log end, hence a high watermark, falls between batches).
    assert_eq!(log.read(0, 1 << 20).unwrap().next_offset(), 5);
    assert!(log.read(5, 1 << 20).unwrap().is_empty());
    assert!(
        log.read(7, 10).unwrap().is_empty(),
        "at the high watermark: nothing"
    );
    assert_eq!(
        log.read_bounded(5, 1 << 20, ReadLimit::LogEnd)
            .unwrap()
            .base_offset(),
        5,
        "replica fetches read past it"
    );
    assert!(
        log.read(8, 10).unwrap().is_empty(),
        "above the high watermark, below the log end: nothing yet"
    );
    assert!(matches!(
        log.read(116, 10),
        Err(Error::OffsetOutOfRange { end: 115, .. })
    ));
    let all: Vec<_> = batches(&bytes_from(&log, 0, ReadLimit::LogEnd))
        .map(|b| b.unwrap().base_offset())
        .collect();
    assert_eq!(all.len(), 23);
    assert!(matches!(
        log.read_bounded(116, 10, ReadLimit::LogEnd),
        Err(Error::OffsetOutOfRange { end: 115, .. })
    ));
    // Timestamp lookups stay below the high watermark.
    assert_eq!(log.offset_for_timestamp(2_000).unwrap(), None);
    // Forwards only, and never past the log end.
    assert_eq!(log.set_high_watermark(3), 7);
    assert_eq!(log.set_high_watermark(40), 40);
    assert_eq!(log.offset_for_timestamp(2_000).unwrap(), Some((15, 2_000)));
    assert_eq!(
        log.set_replicated(20),
        40,
        "already replicated: forwards only"
    );
    assert_eq!(log.set_high_watermark(10_000), 115);
    assert_eq!(log.set_replicated(0), 115);
    // Back to standalone: the high watermark follows appends again.
    log.set_standalone();
    log.append(&batch("s", 1, 3_000)).unwrap();
    assert_eq!((log.log_end_offset(), log.high_watermark()), (116, 116));
    assert_eq!(
        log.set_high_watermark(3),
        116,
        "standalone: nothing to move"
    );
}

#[test]
fn a_read_between_the_high_watermark_and_the_log_end_is_empty_not_out_of_range() {
    // A new leader's high watermark starts where it was as a follower (or at its
    // checkpoint after a restart), below records a consumer of the old leader read:
    // reading there waits for the commit, as Kafka's fetch does; only an offset past
    // the log end is out of range.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    assert_eq!(log.set_replicated(0), 0);
    for i in 0..4 {
        log.append(&batch(&format!("r{i}"), 5, 1_000)).unwrap();
    }
    log.set_high_watermark(5);
    assert_eq!((log.log_end_offset(), log.high_watermark()), (20, 5));
    for offset in [5, 6, 10, 19, 20] {
        let slice = log
            .read(offset, 1 << 20)
            .unwrap_or_else(|e| panic!("a read at {offset}, in [hw, log end], is refused: {e}"));
        assert!(
            slice.is_empty(),
            "nothing above the high watermark at {offset}"
        );
    }
    assert!(matches!(
        log.read(21, 1 << 20),
        Err(Error::OffsetOutOfRange { end: 20, .. })
    ));
    assert_eq!(log.read(0, 1 << 20).unwrap().next_offset(), 5);
}

#[test]
fn retention_and_delete_records_stay_below_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.set_replicated(0);
    for i in 0..40 {
        log.append(&batch(&format!("b{i}"), 5, 0)).unwrap();
    }
    assert!(matches!(
        log.delete_records_before(1),
        Err(Error::OffsetOutOfRange { end: 0, .. })
    ));
    let mut c = log.config();
    c.retention_ms = Some(1);
    log.set_config(c).unwrap();
    assert_eq!(log.apply_retention(now_ms()).unwrap().segments_deleted, 0);
    let bases = log.segment_base_offsets();
    log.set_high_watermark(bases[2]);
    let out = log.apply_retention(now_ms()).unwrap();
    assert_eq!(
        out.segments_deleted, 2,
        "only the segments below the high watermark"
    );
    assert_eq!(log.log_start_offset(), bases[2]);
}

#[test]
fn waits_and_watchers_wake_for_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.set_replicated(0);
    let hw_signal = Arc::new(Signal::default());
    let end_signal = Arc::new(Signal::default());
    log.watch(&hw_signal, ReadLimit::HighWatermark);
    log.watch(&end_signal, ReadLimit::LogEnd);
    let (hw_tx, hw_rx) = mpsc::channel();
    let l = log.clone();
    let hw_waiter =
        std::thread::spawn(move || hw_tx.send(l.wait_for(0, Duration::from_secs(120))).unwrap());
    let l = log.clone();
    let end_waiter = std::thread::spawn(move || {
        l.wait_for_bounded(0, ReadLimit::LogEnd, Duration::from_secs(120))
    });
    let (hw_seen, end_seen) = (hw_signal.current(), end_signal.current());
    log.append(&batch("a", 2, 0)).unwrap();
    assert!(
        end_waiter.join().unwrap(),
        "the append woke the log-end waiter"
    );
    assert_ne!(end_signal.current(), end_seen, "and the log-end watcher");
    assert_eq!(
        hw_signal.current(),
        hw_seen,
        "not the high-watermark watcher"
    );
    assert!(
        hw_rx.try_recv().is_err(),
        "the high-watermark waiter sleeps on: nothing is committed"
    );
    log.set_high_watermark(2);
    assert!(hw_rx.recv_timeout(Duration::from_secs(60)).unwrap());
    hw_waiter.join().unwrap();
    assert_ne!(hw_signal.current(), hw_seen, "the commit woke the watcher");
    // A standalone log's append moves both bounds.
    log.set_standalone();
    let seen = hw_signal.current();
    log.append(&batch("b", 1, 0)).unwrap();
    assert_ne!(hw_signal.current(), seen);
    log.unwatch(&hw_signal);
    log.unwatch(&end_signal);
    assert_eq!(log.inner.watchers.len(), 0, "waits unregister themselves");
}

#[test]
fn an_append_through_the_log_wakes_a_partition_watcher() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let partition = crate::topic::Partition::new(Arc::from("r"), 0, log.clone());
    let signal = Arc::new(Signal::default());
    partition.watch(&signal);
    let seen = signal.current();
    let waiter = {
        let signal = Arc::clone(&signal);
        std::thread::spawn(move || {
            signal.wait_past(seen, std::time::Instant::now() + Duration::from_secs(120))
        })
    };
    // Not through the partition: straight into its log.
    log.append(&batch("direct", 1, 0)).unwrap();
    assert!(
        waiter.join().unwrap(),
        "woken by the append, not by a timeout"
    );
    partition.unwatch(&signal);
}

#[test]
fn a_follower_holds_a_byte_identical_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small();
    config.log_append_time = true;
    let leader = PartitionLog::open(dir.path().join("l-0"), "l-0", config).unwrap();
    let follower = PartitionLog::open(dir.path().join("f-0"), "f-0", small()).unwrap();
    follower.set_replicated(0);
    leader.append(&batch("before-epochs", 3, 10)).unwrap();
    leader.set_leader_epoch(1).unwrap();
    for i in 0..10 {
        leader.append(&batch(&format!("e1-{i}"), 4, 10)).unwrap();
    }
    leader.set_leader_epoch(4).unwrap();
    let mut two = batch("e4-a", 2, 10);
    two.extend_from_slice(&batch("e4-b", 3, 10));
    for _ in 0..8 {
        leader.append(&two).unwrap();
    }
    // The follower fetches in pieces, as a fetcher does.
    let mut at = 0;
    for _ in 0..1000 {
        let s = leader.read_bounded(at, 700, ReadLimit::LogEnd).unwrap();
        if s.is_empty() {
            break;
        }
        let info = follower.append_replica(&s).unwrap();
        assert_eq!(info.base_offset, s.base_offset());
        assert_eq!(info.last_offset + 1, s.next_offset());
        at = s.next_offset();
    }
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(
        follower.high_watermark(),
        0,
        "replica appends commit nothing"
    );
    let leader_bytes = bytes_from(&leader, 0, ReadLimit::LogEnd);
    assert!(leader_bytes == bytes_from(&follower, 0, ReadLimit::LogEnd));
    let stamped: Vec<i32> = batches(&leader_bytes)
        .map(|b| b.unwrap().partition_leader_epoch())
        .collect();
    assert_eq!(
        stamped[0], -1,
        "before set_leader_epoch: as the client sent it"
    );
    assert!(stamped[1..11].iter().all(|&e| e == 1));
    assert!(stamped[11..].iter().all(|&e| e == 4));
    assert_eq!(epochs(&leader), vec![(1, 3), (4, 43)]);
    assert_eq!(epochs(&follower), epochs(&leader));
    // The follower's segments hold the same bytes (whatever their boundaries).
    assert_eq!(follower.size_bytes(), leader.size_bytes());
}

/// `bytes` with its base offset set to `base` and its leader epoch to `epoch`.
fn placed(mut bytes: Vec<u8>, base: i64, epoch: i32) -> Vec<u8> {
    crate::record::set_base_offset(&mut bytes, base);
    set_partition_leader_epoch(&mut bytes, epoch);
    bytes
}

#[test]
fn a_follower_keeps_the_leaders_gaps_and_refuses_what_would_break_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let f = open(dir.path());
    f.append_replica(&placed(batch("a", 3, 0), 0, 2)).unwrap();
    // A gap, as a compacted leader has.
    let info = f.append_replica(&placed(batch("b", 2, 0), 10, 2)).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (10, 11));
    assert_eq!(f.log_end_offset(), 12);
    assert_eq!(
        f.read(5, 100).unwrap().base_offset(),
        10,
        "a read in the gap"
    );
    let before = bytes_from(&f, 0, ReadLimit::LogEnd);
    let refused = |bytes: Vec<u8>| {
        let e = f.append_replica(&bytes).unwrap_err();
        assert_eq!(f.log_end_offset(), 12, "nothing appended after {e}");
        e
    };
    match refused(placed(batch("c", 1, 0), 11, 2)) {
        Error::UnexpectedAppendOffset {
            partition,
            offset,
            expected,
        } => assert_eq!((partition.as_str(), offset, expected), ("r-0", 11, 12)),
        e => panic!("{e}"),
    }
    let mut two = placed(batch("d", 3, 0), 12, 2);
    two.extend_from_slice(&placed(batch("e", 1, 0), 14, 2));
    assert!(matches!(
        refused(two),
        Error::UnexpectedAppendOffset {
            offset: 14,
            expected: 15,
            ..
        }
    ));
    assert!(matches!(
        refused(placed(batch("f", 1, 0), 12, 1)),
        Error::StaleLeaderEpoch {
            epoch: 1,
            latest: 2,
            ..
        }
    ));
    let mut bad_crc = placed(batch("g", 1, 0), 12, 2);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x40;
    assert!(refused(bad_crc).is_corruption());
    let mut bad_magic = placed(batch("h", 1, 0), 12, 2);
    bad_magic[16] = 1;
    assert!(refused(bad_magic).is_corruption());
    let torn = placed(batch("i", 1, 0), 12, 2);
    assert!(refused(torn[..torn.len() - 3].to_vec()).is_corruption());
    assert!(before == bytes_from(&f, 0, ReadLimit::LogEnd));
    // A larger epoch and batches without one are fine.
    f.append_replica(&placed(batch("j", 1, 0), 12, 5)).unwrap();
    f.append_replica(&placed(batch("k", 1, 0), 13, -1)).unwrap();
    assert_eq!(epochs(&f), vec![(2, 0), (5, 12)]);
    assert!(matches!(
        f.set_leader_epoch(4),
        Err(Error::StaleLeaderEpoch { latest: 5, .. })
    ));
    assert!(matches!(
        f.set_leader_epoch(-3),
        Err(Error::InvalidConfig { .. })
    ));
}

#[test]
fn leader_epochs_persist_in_kafkas_file_and_answer_offset_for_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let file = dir.path().join("r-0").join(LEADER_EPOCH_FILE);
    assert_eq!(
        log.end_offset_for_epoch(0).unwrap(),
        (-1, -1),
        "no epoch yet"
    );
    assert_eq!(log.latest_epoch().unwrap(), None);
    log.set_leader_epoch(2).unwrap();
    assert!(
        !file.exists(),
        "an epoch enters the cache with its first batch"
    );
    assert_eq!(log.leader_epoch(), Some(2));
    log.append(&batch("a", 10, 0)).unwrap();
    log.set_leader_epoch(5).unwrap();
    log.append(&batch("b", 10, 0)).unwrap();
    log.append(&batch("c", 10, 0)).unwrap();
    log.set_leader_epoch(6).unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n2\n2 0\n5 10\n");
    assert_eq!(log.latest_epoch().unwrap(), Some(5));
    assert_eq!(log.end_offset_for_epoch(2).unwrap(), (2, 10));
    assert_eq!(log.end_offset_for_epoch(4).unwrap(), (2, 10));
    assert_eq!(log.end_offset_for_epoch(5).unwrap(), (5, 30));
    assert_eq!(
        log.end_offset_for_epoch(6).unwrap(),
        (5, 30),
        "not written in yet"
    );
    assert_eq!(log.end_offset_for_epoch(1).unwrap(), (1, 0));
    assert_eq!(log.end_offset_for_epoch(-1).unwrap(), (-1, -1));
    log.clear_leader_epoch();
    log.append(&placed(batch("d", 1, 0), 0, 9)).unwrap();
    assert_eq!(
        log.latest_epoch().unwrap(),
        Some(9),
        "unstamped: the batch's own"
    );
    log.close().unwrap();
    let log = open(dir.path());
    assert!(log.recovery_report().is_clean());
    assert_eq!(epochs(&log), vec![(2, 0), (5, 10), (9, 30)]);
    assert_eq!(log.leader_epoch(), None, "stamping is not remembered");
}

#[test]
fn a_large_batch_is_stamped_through_the_file_like_a_small_one_through_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path().join("r-0"), "r-0", LogConfig::default()).unwrap();
    log.set_leader_epoch(3).unwrap();
    let mut large = BatchBuilder::new();
    large.push(0, None, Some(&vec![7u8; 100 << 10]), &[]);
    let large = large.finish();
    for bytes in [batch("small", 2, 0), large.clone(), batch("small", 1, 0)] {
        log.append(&bytes).unwrap();
    }
    let stored = bytes_from(&log, 0, ReadLimit::LogEnd);
    let got: Vec<(i64, i32, usize)> = batches(&stored)
        .map(|b| {
            let b = b.unwrap();
            (b.base_offset(), b.partition_leader_epoch(), b.len())
        })
        .collect();
    assert_eq!(got[1], (2, 3, large.len()), "stamped, CRC still valid");
    assert!(got.iter().all(|&(_, e, _)| e == 3));
}

#[test]
fn a_missing_or_damaged_epoch_file_is_rebuilt_from_the_batch_headers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r-0").join(LEADER_EPOCH_FILE);
    let log = open(dir.path());
    for (epoch, n) in [(1, 5), (3, 8), (4, 2)] {
        log.set_leader_epoch(epoch).unwrap();
        for _ in 0..n {
            log.append(&batch("x", 3, 0)).unwrap();
        }
    }
    let want = epochs(&log);
    assert_eq!(want, vec![(1, 0), (3, 15), (4, 39)]);
    log.close().unwrap();
    fs::remove_file(&file).unwrap();
    let log = open(dir.path());
    assert!(!file.exists(), "not rebuilt until used");
    assert_eq!(epochs(&log), want);
    assert!(file.exists(), "written once rebuilt");
    log.close().unwrap();
    fs::write(&file, "0\n3\n1 0\n3 15\n").unwrap();
    let log = open(dir.path());
    assert!(log.recovery_report().leader_epochs_rebuilt);
    assert!(!log.recovery_report().is_clean());
    assert_eq!(epochs(&log), want);
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "0\n3\n1 0\n3 15\n4 39\n"
    );
}

#[test]
fn an_epoch_the_file_missed_before_a_crash_is_found_in_the_recovered_batches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r-0").join(LEADER_EPOCH_FILE);
    let log = open(dir.path());
    log.set_leader_epoch(1).unwrap();
    log.append(&batch("a", 3, 0)).unwrap();
    log.sync().unwrap();
    log.set_leader_epoch(2).unwrap();
    log.append(&batch("b", 3, 0)).unwrap();
    // A crash that lost the file's last write (the batch after the recovery point
    // survived in the page cache).
    let old = "0\n1\n1 0\n";
    drop(log);
    fs::write(&file, old).unwrap();
    let log = open(dir.path());
    assert_eq!(epochs(&log), vec![(1, 0), (2, 3)]);
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n2\n1 0\n2 3\n");
}

#[test]
fn a_standalone_log_writes_no_epoch_file_and_keeps_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let sent = placed(batch("client", 2, 0), 0, 7);
    log.append(&sent).unwrap();
    log.close().unwrap();
    let log = open(dir.path());
    let names: Vec<String> = fs::read_dir(dir.path().join("r-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.ends_with("log") || n.ends_with("index") || n == CHECKPOINT_FILE),
        "{names:?}"
    );
    assert!(log.read(0, 100).unwrap()[..] == sent[..], "stored as sent");
}

#[test]
fn truncation_and_retention_move_the_epoch_entries() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r-0").join(LEADER_EPOCH_FILE);
    let log = open(dir.path());
    for epoch in [1, 2, 3] {
        log.set_leader_epoch(epoch).unwrap();
        for _ in 0..4 {
            log.append(&batch("x", 5, 0)).unwrap();
        }
    }
    assert_eq!(epochs(&log), vec![(1, 0), (2, 20), (3, 40)]);
    log.set_replicated(50);
    assert_eq!(log.truncate_to(42).unwrap(), 40);
    assert_eq!(
        log.high_watermark(),
        40,
        "the cut took the high watermark down"
    );
    assert_eq!(epochs(&log), vec![(1, 0), (2, 20)]);
    assert_eq!(log.end_offset_for_epoch(3).unwrap(), (2, 40));
    assert_eq!(log.delete_records_before(22).unwrap(), 22);
    assert_eq!(epochs(&log), vec![(2, 22)]);
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n1\n2 22\n");
    assert_eq!(log.end_offset_for_epoch(1).unwrap(), (1, 22));
    // The next leader appends in a new epoch after the cut.
    log.set_leader_epoch(7).unwrap();
    log.append(&batch("y", 1, 0)).unwrap();
    assert_eq!(epochs(&log), vec![(2, 22), (7, 40)]);
}

/// The log's files and their contents, as a crash would leave them.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// What a reader can observe of a log.
#[derive(Debug, PartialEq)]
struct State {
    start: i64,
    end: i64,
    bytes_hash: u64,
    epochs: Vec<(i32, i64)>,
}

fn state(log: &PartitionLog) -> State {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes_from(log, log.log_start_offset(), ReadLimit::LogEnd).hash(&mut h);
    State {
        start: log.log_start_offset(),
        end: log.log_end_offset(),
        bytes_hash: h.finish(),
        epochs: epochs(log),
    }
}

/// A log of 60 batches of 5 records in small segments (about 14 batches each), in
/// epoch 1 but for the last batch, in epoch 2.
fn sixty_batches(path: &Path) -> PartitionLog {
    let log = PartitionLog::open(path, "r-0", small()).unwrap();
    for i in 0..60 {
        log.set_leader_epoch(if i < 59 { 1 } else { 2 }).unwrap();
        log.append(&batch(&format!("b{i}"), 5, 0)).unwrap();
    }
    log
}

/// Where a follower's second segment starts: past a gap too wide for the first one's
/// relative offsets.
const FAR: i64 = 5_000_000_000;

/// A follower's log of 10 batches at 0, then, in epoch 2, 10 batches at [`FAR`].
fn gapped(path: &Path) -> PartitionLog {
    let log = PartitionLog::open(path, "r-0", small()).unwrap();
    for (i, base) in (0..10)
        .map(|i| i * 5)
        .chain((0..10).map(|i| FAR + i * 5))
        .enumerate()
    {
        let epoch = if base < FAR { 1 } else { 2 };
        log.append_replica(&placed(batch(&format!("g{i}"), 5, 0), base, epoch))
            .unwrap();
    }
    log
}

#[test]
fn a_slice_held_across_a_truncation_keeps_its_bytes_and_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = sixty_batches(&dir.path().join("r-0"));
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 3, "{bases:?}");
    // One slice in the segment the cut falls in, after the cut; one in a later segment.
    let cut_segment = bases[bases.len() - 3];
    let in_cut = log.read(cut_segment + 6, 200).unwrap();
    let later = log.read(*bases.last().unwrap(), 1 << 20).unwrap();
    let held: Vec<(LogSlice, Vec<u8>)> = [in_cut, later]
        .into_iter()
        .map(|s| {
            let copy = s.to_vec();
            // A sendfile takes the descriptor before it starts; the slice keeps it.
            assert!(s.file().is_some());
            (s, copy)
        })
        .collect();
    let new_end = log.truncate_to(cut_segment + 5).unwrap();
    assert_eq!(new_end, cut_segment + 5);
    assert_eq!(log.segment_count(), bases.len() - 2);
    // New batches land at the same offsets, with other bytes.
    for i in 0..20 {
        log.append(&batch(&format!("new{i}"), 5, 0)).unwrap();
    }
    assert!(log.read(cut_segment + 6, 200).unwrap()[..] != held[0].1[..]);
    for (slice, copy) in &held {
        assert!(
            slice[..] == copy[..],
            "the slice still reads the original bytes"
        );
        let mut from_fd = vec![0u8; slice.len()];
        slice
            .file()
            .unwrap()
            .read_exact_at(&mut from_fd, slice.file_position())
            .unwrap();
        assert!(from_fd == *copy, "so does its file descriptor (sendfile)");
    }
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.log_end_offset(), new_end + 100);
    let first_new = log.read(new_end, 1).unwrap();
    let value = first_new
        .batches()
        .next()
        .unwrap()
        .records()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(value.value.unwrap(), b"new0-0000-padding-padding-padding");
}

/// Truncates a fresh sixty-batch log to `offset` with a hook at every durable step;
/// each step's directory is copied, opened and must show the log as it was before the
/// truncation or as it is after (not a mix). Also checks that a failure injected at
/// each step poisons the log and that reopening completes the truncation.
fn check_truncation_steps(build: fn(&Path) -> PartitionLog, offset: i64) -> Vec<&'static str> {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("r-0");
    let log = build(&live);
    let before_dir = dir.path().join("before");
    copy_dir(&live, &before_dir);
    let before = state(&log);
    let snaps: Arc<std::sync::Mutex<Vec<(&'static str, PathBuf)>>> = Arc::default();
    {
        let (snaps, live, root) = (Arc::clone(&snaps), live.clone(), dir.path().to_path_buf());
        log.set_step_hook(Some(Box::new(move |step| {
            let mut s = snaps.lock().unwrap();
            let to = root.join(format!("step-{}", s.len()));
            copy_dir(&live, &to);
            s.push((step, to));
            Ok(())
        })));
    }
    log.truncate_to(offset).unwrap();
    log.set_step_hook(None);
    let after = state(&log);
    assert_ne!(before, after);
    let before_log = PartitionLog::open(&before_dir, "r-0", small()).unwrap();
    assert_eq!(state(&before_log), before);
    let snaps = snaps.lock().unwrap().clone();
    for (step, path) in &snaps {
        let recovered = PartitionLog::open(path, "r-0", small()).unwrap();
        assert_eq!(state(&recovered), after, "a crash after {step:?}");
        assert_eq!(
            recovered.recovery_report().truncation_completed,
            Some(offset)
        );
        assert!(!path.join(TRUNCATION_FILE).exists());
        recovered.close().unwrap();
        let again = PartitionLog::open(path, "r-0", small()).unwrap();
        assert!(
            again.recovery_report().is_clean(),
            "{step:?}: {:?}",
            again.recovery_report()
        );
    }
    // A failure at each step: the log is poisoned; reopening completes the cut.
    for (k, (step, _)) in snaps.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r-0");
        let log = build(&path);
        let mut seen = 0;
        log.set_step_hook(Some(Box::new(move |_| {
            seen += 1;
            if seen > k {
                Err(Error::Timeout(format!("injected failure at step {k}")))
            } else {
                Ok(())
            }
        })));
        assert!(log.truncate_to(offset).is_err(), "a failure at {step:?}");
        assert!(
            matches!(log.append(&batch("z", 1, 0)), Err(Error::Poisoned { .. })),
            "a truncation that failed after {step:?} poisons the log"
        );
        drop(log);
        let reopened = PartitionLog::open(&path, "r-0", small()).unwrap();
        assert_eq!(
            state(&reopened),
            after,
            "reopened after a failure at {step:?}"
        );
    }
    snaps.iter().map(|(s, _)| *s).collect()
}

/// The steps of a truncation that copies the kept prefix of the segment it cuts.
const COPYING_STEPS: [&str; 7] = [
    "intent recorded",
    "prefix copied",
    "indexes rewritten",
    "prefix swapped in",
    "later segments removed",
    "leader epochs truncated",
    "checkpoint written",
];

#[test]
fn a_truncation_inside_the_active_segment_survives_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let log = sixty_batches(&dir.path().join("r-0"));
    let last = *log.segment_base_offsets().last().unwrap();
    assert!(
        log.log_end_offset() > last + 10,
        "the last segment has batches to cut"
    );
    drop(log);
    assert_eq!(
        check_truncation_steps(sixty_batches, last + 7),
        COPYING_STEPS
    );
}

#[test]
fn a_truncation_inside_a_sealed_segment_survives_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let log = sixty_batches(&dir.path().join("r-0"));
    let second = log.segment_base_offsets()[1];
    drop(log);
    assert_eq!(
        check_truncation_steps(sixty_batches, second + 7),
        COPYING_STEPS
    );
}

#[test]
fn a_truncation_into_a_gap_keeps_the_sealed_file_and_survives_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let log = gapped(&dir.path().join("r-0"));
    assert_eq!(
        log.segment_base_offsets(),
        vec![0, FAR],
        "the gap rolled the log"
    );
    drop(log);
    // Nothing of the first segment is cut: its file is reopened for appending.
    assert_eq!(
        check_truncation_steps(gapped, FAR / 2),
        [
            "intent recorded",
            "indexes rewritten",
            "later segments removed",
            "leader epochs truncated",
            "checkpoint written"
        ]
    );
    let log = gapped(&dir.path().join("g-0"));
    assert_eq!(log.truncate_to(FAR / 2).unwrap(), 50);
    log.append_replica(&placed(batch("after", 5, 0), 50, 3))
        .unwrap();
    log.append(&batch("leader", 1, 0)).unwrap();
    drop(log);
    let log = PartitionLog::open(dir.path().join("g-0"), "r-0", small()).unwrap();
    assert_eq!(log.log_end_offset(), 56);
    assert_eq!(epochs(&log), vec![(1, 0), (3, 50)]);
}

#[test]
fn the_manager_checkpoints_the_high_watermarks_of_replicated_logs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(HIGH_WATERMARK_FILE);
    {
        let m = LogManager::open(dir.path()).unwrap();
        let logs: Vec<PartitionLog> = ["a-0", "my-topic-12", "plain-3"]
            .iter()
            .map(|n| m.open_log(n, small()).unwrap())
            .collect();
        for log in &logs {
            log.append(&batch("x", 10, 0)).unwrap();
        }
        m.checkpoint_high_watermarks().unwrap();
        assert!(!file.exists(), "no replicated log: no file");
        logs[0].set_replicated(4);
        logs[1].set_replicated(0);
        logs[1].set_high_watermark(7);
        m.checkpoint_high_watermarks().unwrap();
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "0\n2\na 0 4\nmy-topic 12 7\n"
        );
        // The maintenance thread writes what moved.
        m.start_background(Duration::from_millis(5), Duration::from_secs(3600));
        logs[0].set_high_watermark(9);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !fs::read_to_string(&file).unwrap().contains("a 0 9") {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(Duration::from_millis(5));
        }
        logs[1].set_high_watermark(10);
        m.close().unwrap();
        assert!(
            fs::read_to_string(&file)
                .unwrap()
                .contains("my-topic 12 10")
        );
    }
    let m = LogManager::open(dir.path()).unwrap();
    assert_eq!(m.recorded_high_watermark("a-0"), Some(9));
    assert_eq!(m.recorded_high_watermark("my-topic-12"), Some(10));
    assert_eq!(m.recorded_high_watermark("plain-3"), None);
    // A log that is not open keeps its entry; a deleted one loses it at once.
    let a = m.open_log("a-0", small()).unwrap();
    assert_eq!(
        a.set_replicated(m.recorded_high_watermark("a-0").unwrap()),
        9
    );
    m.checkpoint_high_watermarks().unwrap();
    m.delete_log("my-topic-12").unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n1\na 0 9\n");
    // A replicated log Kafka's format cannot name is reported, the others written.
    let odd = m.open_log("odd", small()).unwrap();
    odd.set_replicated(0);
    a.append(&batch("y", 1, 0)).unwrap();
    a.set_high_watermark(11);
    let e = m.checkpoint_high_watermarks().unwrap_err();
    assert!(e.to_string().contains("\"odd\""), "{e}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "0\n1\na 0 11\n");
    drop(odd);
    drop(a);
    m.delete_log("odd").unwrap();
    m.close().unwrap();
    drop(m);
    // A damaged file is reported and ignored: nothing is known, nothing exposed.
    fs::write(&file, "0\n2\na 0 9\n").unwrap();
    let m = LogManager::open(dir.path()).unwrap();
    assert_eq!(m.recorded_high_watermark("a-0"), None);
    let errors = m.background_errors();
    assert!(
        errors.len() == 1 && errors[0].contains(HIGH_WATERMARK_FILE),
        "{errors:?}"
    );
}

#[test]
fn standalone_appends_end_for_good_under_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let one = batch("a", 1, 1_000);
    let valid = crate::record::ValidBatches::parse(&one, "r-0").unwrap();
    assert!(log.is_standalone());
    let info = log
        .append_valid_standalone(&valid)
        .expect("standalone")
        .unwrap();
    assert_eq!((info.base_offset, log.high_watermark()), (0, 1));
    // A bad batch is refused as `append_valid` refuses it, nothing written.
    let empty = crate::record::ValidBatches::parse(&[], "r-0").unwrap();
    assert!(matches!(
        log.append_valid_standalone(&empty),
        Some(Err(Error::InvalidBatch(_)))
    ));
    // Once a handle takes a role, the log takes no standalone append, now or later.
    log.end_standalone();
    assert!(!log.is_standalone());
    assert!(log.append_valid_standalone(&valid).is_none());
    assert_eq!(log.log_end_offset(), 1, "nothing appended after the end");
    log.end_standalone();
    assert!(log.append_valid_standalone(&valid).is_none());
}
