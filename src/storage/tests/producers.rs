//! Unit tests of the idempotent producers' state kept by the log: check and append in
//! one step, followers keeping it, snapshots at rolls and on close, retention and
//! truncation of snapshots, damage.

use crate::error::Error;
use crate::record::BatchBuilder;
use crate::storage::*;
use std::fs;
use std::path::Path;

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir.join("p-0"), "p-0", small()).unwrap()
}

/// A batch of producer `pid` (epoch `epoch`) with `n` records from sequence `seq`.
fn idem(pid: i64, epoch: i16, seq: i32, n: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(pid, epoch, seq);
    for i in 0..n {
        b.push(
            1_000,
            None,
            Some(format!("p{pid} e{epoch} s{} padding-padding-padding", seq + i).as_bytes()),
            &[],
        );
    }
    b.finish()
}

fn appended(outcome: AppendOutcome) -> AppendInfo {
    match outcome {
        AppendOutcome::Appended(info) => info,
        AppendOutcome::Duplicate(base) => panic!("a duplicate of the batch at {base}"),
    }
}

fn snapshots(dir: &Path) -> Vec<i64> {
    producer_state::list_snapshots(&dir.join("p-0")).unwrap()
}

#[test]
fn sequences_are_checked_and_appended_in_one_step_with_typed_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    assert_eq!(
        appended(log.append_idempotent(&idem(7, 0, 0, 3)).unwrap()).base_offset,
        0
    );
    assert_eq!(
        log.append_idempotent(&idem(7, 0, 0, 3)).unwrap(),
        AppendOutcome::Duplicate(0)
    );
    // Two batches in one call: the second is judged after the first.
    let mut two = idem(7, 0, 3, 2);
    two.extend_from_slice(&idem(7, 0, 5, 1));
    assert_eq!(
        appended(log.append_idempotent(&two).unwrap()).base_offset,
        3
    );
    let end = log.log_end_offset();
    let refused = |bytes: Vec<u8>| {
        let e = log.append_idempotent(&bytes).unwrap_err();
        assert_eq!(log.log_end_offset(), end, "nothing appended after {e}");
        e
    };
    assert!(matches!(
        refused(idem(7, 0, 9, 1)),
        Error::OutOfOrderSequence {
            producer_id: 7,
            sequence: 9,
            expected: 6,
            ..
        }
    ));
    assert!(matches!(
        refused(idem(7, 0, 1, 1)),
        Error::DuplicateSequence {
            producer_id: 7,
            sequence: 1,
            ..
        }
    ));
    let mut dup_among_two = idem(7, 0, 5, 1);
    dup_among_two.extend_from_slice(&idem(7, 0, 6, 1));
    assert!(matches!(
        refused(dup_among_two),
        Error::DuplicateSequence { .. }
    ));
    let mut gap_in_call = idem(7, 0, 6, 1);
    gap_in_call.extend_from_slice(&idem(7, 0, 8, 1));
    assert!(matches!(
        refused(gap_in_call),
        Error::OutOfOrderSequence {
            sequence: 8,
            expected: 7,
            ..
        }
    ));
    // A new epoch starts again at 0; the old one is fenced.
    assert!(matches!(
        refused(idem(7, 1, 6, 1)),
        Error::OutOfOrderSequence { expected: 0, .. }
    ));
    appended(log.append_idempotent(&idem(7, 1, 0, 1)).unwrap());
    let e = log.append_idempotent(&idem(7, 0, 6, 1)).unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidProducerEpoch {
            epoch: 0,
            current: 1,
            ..
        }
    ));
    assert!(e.to_string().contains("p-0"), "{e}");
    // Batches without a producer go along unchecked.
    let mut plain = BatchBuilder::new();
    plain.push(1_000, None, Some(b"plain"), &[]);
    let mut mixed = plain.finish();
    mixed.extend_from_slice(&idem(8, 0, 40, 1));
    appended(log.append_idempotent(&mixed).unwrap());
}

#[test]
fn every_append_keeps_the_state_so_a_follower_that_leads_knows_the_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let leader = PartitionLog::open(dir.path().join("l-0"), "l-0", small()).unwrap();
    let follower = PartitionLog::open(dir.path().join("f-0"), "f-0", small()).unwrap();
    for seq in (0..40).step_by(4) {
        appended(leader.append_idempotent(&idem(3, 2, seq, 4)).unwrap());
    }
    // Appends that are not checked update a loaded state too.
    leader.append(&idem(4, 0, 100, 2)).unwrap();
    let mut at = 0;
    while at < leader.log_end_offset() {
        let s = leader.read_bounded(at, 500, ReadLimit::LogEnd).unwrap();
        follower.append_replica(&s).unwrap();
        at = s.next_offset();
    }
    // The follower becomes leader: the producer's retry of its last batch lands once.
    assert_eq!(
        follower.append_idempotent(&idem(3, 2, 36, 4)).unwrap(),
        AppendOutcome::Duplicate(36)
    );
    assert!(matches!(
        follower.append_idempotent(&idem(4, 0, 50, 1)),
        Err(Error::DuplicateSequence { .. })
    ));
    appended(follower.append_idempotent(&idem(4, 0, 102, 1)).unwrap());
}

#[test]
fn snapshots_at_rolls_and_on_close_bound_the_replay_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.append(&idem(1, 0, 0, 1)).unwrap();
    assert!(
        !log.producers_loaded(),
        "loaded on the first idempotent append"
    );
    assert!(
        snapshots(dir.path()).is_empty(),
        "no state loaded: no snapshot"
    );
    for seq in 1..60 {
        appended(log.append_idempotent(&idem(1, 0, seq, 1)).unwrap());
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 2, "{bases:?}");
    assert_eq!(snapshots(dir.path()), bases[1..].to_vec(), "one per roll");
    log.close().unwrap();
    assert_eq!(
        *snapshots(dir.path()).last().unwrap(),
        60,
        "and one on close"
    );

    let log = open(dir.path());
    assert!(log.producers_loaded(), "loaded on open from the snapshot");
    assert_eq!(log.recovery_report().producer_batches_replayed, 0);
    assert_eq!(
        log.append_idempotent(&idem(1, 0, 59, 1)).unwrap(),
        AppendOutcome::Duplicate(59)
    );
    for seq in 60..64 {
        appended(log.append_idempotent(&idem(1, 0, seq, 1)).unwrap());
    }
    // A crash: no snapshot on close; the batches after the latest snapshot (the
    // close's, or a roll's since) are replayed.
    drop(log);
    let latest = *snapshots(dir.path()).last().unwrap();
    let log = open(dir.path());
    assert_eq!(
        log.recovery_report().producer_batches_replayed as i64,
        64 - latest,
        "only the batches after the latest snapshot"
    );
    assert_eq!(
        log.append_idempotent(&idem(1, 0, 63, 1)).unwrap(),
        AppendOutcome::Duplicate(63)
    );
}

#[test]
fn a_damaged_or_stray_snapshot_is_removed_and_the_state_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for seq in 0..40 {
        appended(log.append_idempotent(&idem(5, 0, seq, 1)).unwrap());
    }
    log.close().unwrap();
    let snaps = snapshots(dir.path());
    let newest = *snaps.last().unwrap();
    let path = producer_state::snapshot_path(&dir.path().join("p-0"), newest);
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    // A snapshot past the log end (a crash lost what it covered).
    fs::copy(
        producer_state::snapshot_path(&dir.path().join("p-0"), snaps[0]),
        producer_state::snapshot_path(&dir.path().join("p-0"), 1000),
    )
    .unwrap();
    let log = open(dir.path());
    let r = log.recovery_report();
    assert_eq!(r.producer_snapshots_removed, vec![path.clone()]);
    assert!(!r.is_clean());
    assert!(r.producer_batches_replayed > 0, "from the older snapshot");
    assert!(!path.exists());
    assert!(
        !snapshots(dir.path()).contains(&1000),
        "the stray one is gone"
    );
    assert_eq!(
        log.append_idempotent(&idem(5, 0, 39, 1)).unwrap(),
        AppendOutcome::Duplicate(39)
    );
}

#[test]
fn retention_keeps_the_latest_snapshot_and_truncation_reloads_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for seq in 0..60 {
        appended(log.append_idempotent(&idem(9, 0, seq, 1)).unwrap());
    }
    let bases = log.segment_base_offsets();
    assert_eq!(snapshots(dir.path()), bases[1..].to_vec());
    // Truncation: snapshots past the cut go, the state forgets the cut batches.
    let cut = bases[bases.len() - 2] + 2;
    assert_eq!(log.truncate_to(cut).unwrap(), cut);
    assert_eq!(snapshots(dir.path()), bases[1..bases.len() - 1].to_vec());
    assert!(matches!(
        log.append_idempotent(&idem(9, 0, 59, 1)),
        Err(Error::OutOfOrderSequence { expected, .. }) if expected as i64 == cut
    ));
    assert_eq!(
        log.append_idempotent(&idem(9, 0, cut as i32 - 1, 1))
            .unwrap(),
        AppendOutcome::Duplicate(cut - 1)
    );
    appended(log.append_idempotent(&idem(9, 0, cut as i32, 1)).unwrap());
    // Retention deletes segments and their snapshots, but never the latest snapshot.
    log.delete_records_before(cut).unwrap();
    let left = snapshots(dir.path());
    let first = log.segment_base_offsets()[0];
    assert!(left.iter().all(|&s| s >= first), "{left:?} below {first}");
    assert_eq!(left.last(), Some(&bases[bases.len() - 2]));
    let before = log.segment_base_offsets();
    log.roll().unwrap();
    for seq in cut as i32 + 1..cut as i32 + 4 {
        appended(log.append_idempotent(&idem(9, 0, seq, 1)).unwrap());
    }
    log.roll().unwrap();
    log.delete_records_before(log.log_end_offset()).unwrap();
    let left = snapshots(dir.path());
    assert_eq!(
        left,
        vec![log.log_end_offset()],
        "the latest stays: {before:?}"
    );
    log.close().unwrap();
    let log = open(dir.path());
    assert_eq!(
        log.append_idempotent(&idem(9, 0, cut as i32 + 3, 1))
            .unwrap(),
        AppendOutcome::Duplicate(cut + 3),
        "the state of producers whose batches retention deleted survives"
    );
}

#[test]
fn active_producers_list_epoch_last_sequence_and_last_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::storage::LogConfig {
        segment_bytes: 1024,
        ..Default::default()
    };
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", config.clone()).unwrap();
    let batch = |pid: i64, epoch: i16, seq: i32, ts: &[i64]| {
        let mut b = crate::record::BatchBuilder::new().producer(pid, epoch, seq);
        for &t in ts {
            b.push(t, None, Some(&[7u8; 200]), &[]);
        }
        b.finish()
    };
    assert!(log.active_producers().unwrap().is_empty());
    log.append_idempotent(&batch(9, 0, 0, &[100, 300, 200]))
        .unwrap();
    log.append_idempotent(&batch(4, 1, 0, &[50])).unwrap();
    log.append_idempotent(&batch(9, 0, 3, &[400, 350])).unwrap();
    // Batches without a producer id make no producer.
    let mut plain = crate::record::BatchBuilder::new();
    plain.push(1, None, Some(b"x"), &[]);
    log.append(&plain.finish()).unwrap();
    let listed = |log: &PartitionLog| {
        log.active_producers()
            .unwrap()
            .into_iter()
            .map(|p| (p.producer_id, p.epoch, p.last_sequence, p.last_timestamp))
            .collect::<Vec<_>>()
    };
    let expected = vec![(4, 1, 0, 50), (9, 0, 4, 400)];
    assert_eq!(listed(&log), expected);
    // The same after a restart (the state from a snapshot and the segments).
    log.close().unwrap();
    let log = PartitionLog::open(dir.path().join("t-0"), "t-0", config.clone()).unwrap();
    assert!(log.segment_count() > 1, "segments rolled");
    assert_eq!(listed(&log), expected);
}

/// Every entry of the `.txnindex` files in the log's directory, in marker order.
fn aborted_on_disk(dir: &Path) -> Vec<AbortedTxn> {
    let dir = dir.join("p-0");
    let mut all = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("txnindex") {
            continue;
        }
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap();
        let base: i64 = stem.parse().unwrap();
        all.extend(crate::storage::txn_index::read(&dir, base).unwrap());
    }
    all.sort_by_key(|e| e.last_offset);
    all
}

/// Thirty transactions of one batch each, every other one aborted, spread over
/// several segments.
fn log_with_aborted_transactions(dir: &Path) -> PartitionLog {
    let log = open(dir);
    for i in 0..30i64 {
        let pid = 100 + i;
        let mut b = BatchBuilder::new()
            .producer(pid, 0, 0)
            .attributes(crate::record::TRANSACTIONAL_BIT);
        for r in 0..4 {
            b.push(
                1_000,
                None,
                Some(format!("txn {i} record {r} padding-padding-padding-padding").as_bytes()),
                &[],
            );
        }
        appended(log.append_idempotent(&b.finish()).unwrap());
        let marker = if i % 2 == 0 {
            crate::record::EndTxnMarker::abort(0)
        } else {
            crate::record::EndTxnMarker::commit(0)
        };
        log.append_end_txn_marker(pid, 0, marker, 2_000).unwrap();
    }
    log
}

/// DeleteRecords and retention take the aborted transactions of the segments they
/// delete out of the log's list as the `.txnindex` files go: the list stays what the
/// files hold, and what a reopen reads back.
#[test]
fn the_aborted_list_follows_the_log_start_as_the_txnindex_files_do() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with_aborted_transactions(dir.path());
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4, "several segments: {bases:?}");
    let all = log.aborted_transactions(0, i64::MAX).unwrap();
    assert_eq!(all.len(), 15);
    assert_eq!(all, aborted_on_disk(dir.path()));

    // DeleteRecords past the first two segments.
    log.delete_records_before(bases[2]).unwrap();
    let left = log.aborted_transactions(0, i64::MAX).unwrap();
    assert!(
        left.len() < all.len(),
        "{} of {} left",
        left.len(),
        all.len()
    );
    assert!(left.iter().all(|e| e.last_offset >= bases[2]), "{left:?}");
    assert_eq!(left, aborted_on_disk(dir.path()));
    log.close().unwrap();
    let log = open(dir.path());
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), left);

    // Retention by size: all but the active segment go.
    let mut config = small();
    config.retention_bytes = Some(1);
    log.set_config(config).unwrap();
    assert!(log.apply_retention(3_000).unwrap().segments_deleted > 0);
    let first = log.segment_base_offsets()[0];
    let kept = log.aborted_transactions(0, i64::MAX).unwrap();
    assert!(
        kept.len() < left.len(),
        "{} of {} left",
        kept.len(),
        left.len()
    );
    assert!(kept.iter().all(|e| e.last_offset >= first), "{kept:?}");
    assert_eq!(kept, aborted_on_disk(dir.path()));
    log.close().unwrap();
    let log = open(dir.path());
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), kept);
}

fn open_with(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(dir.join("p-0"), "p-0", config).unwrap()
}

/// A one-record transactional batch of producer `pid` from sequence `seq`.
fn txn_batch(pid: i64, seq: i32) -> Vec<u8> {
    txn_batch_at(pid, 0, seq)
}

/// `producer.id.expiration.ms`: a producer whose last write is that old is forgotten
/// (its next batch is a new producer's), unless its transaction is open; the time is
/// the broker's clock at the append, passed in here as `now_ms`.
#[test]
fn producers_expire_after_their_last_write_unless_a_transaction_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small();
    config.producer_id_expiration_ms = 60_000;
    let log = open_with(dir.path(), config);
    let before = crate::storage::clock::now_ms();
    appended(log.append_idempotent(&idem(1, 0, 0, 1)).unwrap());
    appended(log.append_idempotent(&idem(1, 0, 1, 1)).unwrap());
    let open_txn = appended(log.append_idempotent(&txn_batch(2, 0)).unwrap());
    let after = crate::storage::clock::now_ms();

    assert_eq!(log.remove_expired_producers(before + 59_999).unwrap(), 0);
    assert!(matches!(
        log.append_idempotent(&idem(1, 0, 5, 1)),
        Err(Error::OutOfOrderSequence { expected: 2, .. })
    ));
    assert_eq!(
        log.remove_expired_producers(after + 60_000).unwrap(),
        1,
        "producer 2 has a transaction open"
    );
    // Producer 1 is forgotten: a batch from any sequence starts it afresh.
    appended(log.append_idempotent(&idem(1, 0, 5, 1)).unwrap());
    // Producer 2 is not: its retry is still caught.
    assert_eq!(
        log.append_idempotent(&txn_batch(2, 0)).unwrap(),
        AppendOutcome::Duplicate(open_txn.base_offset)
    );
    // Once its transaction ends, it expires too.
    log.append_end_txn_marker(2, 0, crate::record::EndTxnMarker::commit(0), 2_000)
        .unwrap();
    let ended = crate::storage::clock::now_ms();
    assert_eq!(log.remove_expired_producers(ended + 60_000).unwrap(), 2);
    appended(log.append_idempotent(&txn_batch(2, 7)).unwrap());
}

/// The times survive a close (in the snapshot), and a reopen forgets the producers
/// whose last write is older than the log's `producer.id.expiration.ms`.
#[test]
fn a_reload_forgets_expired_producers() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    appended(log.append_idempotent(&idem(1, 0, 0, 1)).unwrap());
    let written = crate::storage::clock::now_ms();
    log.close().unwrap();

    // The default (a day): still known after a reopen.
    let log = open(dir.path());
    assert!(matches!(
        log.append_idempotent(&idem(1, 0, 5, 1)),
        Err(Error::OutOfOrderSequence { expected: 1, .. })
    ));
    log.close().unwrap();

    // A bounded wait for the clock to pass the write by 1 ms.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while crate::storage::clock::now_ms() <= written + 1 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let mut config = small();
    config.producer_id_expiration_ms = 1;
    let log = open_with(dir.path(), config);
    appended(log.append_idempotent(&idem(1, 0, 5, 1)).unwrap());
}

#[test]
fn the_expiration_is_a_setting_with_kafkas_name() {
    let mut config = LogConfig::default();
    assert_eq!(config.producer_id_expiration_ms, 86_400_000);
    config.set("producer.id.expiration.ms", "1000").unwrap();
    assert_eq!(config.producer_id_expiration_ms, 1_000);
    assert!(
        config
            .to_pairs()
            .contains(&("producer.id.expiration.ms".into(), "1000".into()))
    );
    assert!(matches!(
        config.set("producer.id.expiration.ms", "0"),
        Err(Error::InvalidConfig { key, .. }) if key == "producer.id.expiration.ms"
    ));
}

/// The maintenance thread of a log manager expires producers on its retention
/// passes.
#[test]
fn the_maintenance_thread_expires_producers() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::open(dir.path()).unwrap();
    let mut config = small();
    config.producer_id_expiration_ms = 1;
    let log = manager.open_log("p-0", config).unwrap();
    appended(log.append_idempotent(&idem(1, 0, 0, 1)).unwrap());
    assert_eq!(log.active_producers().unwrap().len(), 1);
    manager.start_background(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(5),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !log.active_producers().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(log.active_producers().unwrap(), []);
    appended(log.append_idempotent(&idem(1, 0, 9, 1)).unwrap());
}

/// WriteTxnMarkers is idempotent at the leader: a coordinator's retry of a marker
/// already in the log (same producer and coordinator epochs, no transaction of the
/// producer opened since) is not appended again, across a reopen too; a newer epoch,
/// or a marker ending a transaction opened since, is appended; an older coordinator is
/// still fenced.
#[test]
fn a_retried_marker_lands_once() {
    use crate::record::EndTxnMarker;
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let commit = EndTxnMarker::commit(3);
    log.append_idempotent(&txn_batch(7, 0)).unwrap();
    let first = match log
        .append_end_txn_marker_once(7, 0, commit, 0, 2_000)
        .unwrap()
    {
        MarkerOutcome::Appended(info) => info,
        other => panic!("the first marker was not appended: {other:?}"),
    };
    assert_eq!((first.base_offset, first.last_offset), (1, 1));
    assert_eq!(
        log.append_end_txn_marker_once(7, 0, commit, 0, 2_001)
            .unwrap(),
        MarkerOutcome::Repeated { log_end_offset: 2 }
    );
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.last_stable_offset().unwrap(), 2);
    // The refusals come first: an older coordinator is fenced, not taken as a repeat.
    assert!(matches!(
        log.append_end_txn_marker_once(7, 0, EndTxnMarker::commit(2), 0, 2_002),
        Err(Error::TransactionCoordinatorFenced { current: 3, .. })
    ));
    log.close().unwrap();

    // The state is the log's (snapshot or replay): the retry is still a repeat.
    let log = open(dir.path());
    assert_eq!(
        log.append_end_txn_marker_once(7, 0, commit, 0, 2_003)
            .unwrap(),
        MarkerOutcome::Repeated { log_end_offset: 2 }
    );
    // A transaction opened since is ended by a marker of the same epochs.
    log.append_idempotent(&txn_batch(7, 1)).unwrap();
    assert_eq!(log.last_stable_offset().unwrap(), 2);
    assert!(matches!(
        log.append_end_txn_marker_once(7, 0, EndTxnMarker::abort(3), 0, 2_004)
            .unwrap(),
        MarkerOutcome::Appended(AppendInfo { base_offset: 3, .. })
    ));
    assert_eq!(log.last_stable_offset().unwrap(), 4);
    assert_eq!(log.aborted_transactions(0, 4).unwrap().len(), 1);
    // KIP-890: the marker of a bumped epoch is new, and then repeats.
    for expected in [
        MarkerOutcome::Appended(AppendInfo {
            base_offset: 4,
            last_offset: 4,
            log_append_time: None,
            max_timestamp: 2_005,
            record_count: 1,
        }),
        MarkerOutcome::Repeated { log_end_offset: 5 },
    ] {
        assert_eq!(
            log.append_end_txn_marker_once(7, 1, commit, 0, 2_005)
                .unwrap(),
            expected
        );
    }
    // A producer the log has not seen takes its marker (it ends nothing), once.
    assert!(matches!(
        log.append_end_txn_marker_once(8, 0, commit, 0, 2_006)
            .unwrap(),
        MarkerOutcome::Appended(_)
    ));
    assert_eq!(
        log.append_end_txn_marker_once(8, 0, commit, 0, 2_006)
            .unwrap(),
        MarkerOutcome::Repeated { log_end_offset: 6 }
    );
    // The plain append is Kafka's log append: it always appends.
    log.append_end_txn_marker(8, 0, commit, 2_007).unwrap();
    assert_eq!(log.log_end_offset(), 7);
}

/// KIP-890 (transaction version 2): every transaction end bumps the producer epoch and
/// its markers carry the bumped epoch, so a leader refuses a version 2 marker that is
/// not newer than the producer's epoch. A COMMIT of transaction 1 delivered late, after
/// transaction 2 of the producer began here, does not end transaction 2; its retry
/// before that is still a repeat; version 1 markers keep Kafka's older rule.
#[test]
fn a_delayed_tv2_marker_does_not_end_a_later_transaction() {
    use crate::record::EndTxnMarker;
    let txn = |epoch: i16, seq: i32| {
        let mut b = BatchBuilder::new()
            .producer(7, epoch, seq)
            .attributes(crate::record::TRANSACTIONAL_BIT);
        b.push(1_000, None, Some(b"in a transaction"), &[]);
        b.finish()
    };
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let commit = EndTxnMarker::commit(0);
    // Transaction 1 at epoch 0, ended by its marker at the bumped epoch 1.
    log.append_idempotent(&txn(0, 0)).unwrap();
    assert!(matches!(
        log.append_end_txn_marker_once(7, 1, commit, EPOCH_BUMP_MARKER_VERSION, 2_000)
            .unwrap(),
        MarkerOutcome::Appended(AppendInfo { base_offset: 1, .. })
    ));
    // The coordinator's retry before transaction 2: a repeat, not a refusal.
    assert_eq!(
        log.append_end_txn_marker_once(7, 1, commit, EPOCH_BUMP_MARKER_VERSION, 2_001)
            .unwrap(),
        MarkerOutcome::Repeated { log_end_offset: 2 }
    );
    // Transaction 2 at epoch 1 begins here; the delayed marker of transaction 1 comes.
    log.append_idempotent(&txn(1, 0)).unwrap();
    let refused = log.append_end_txn_marker_once(7, 1, commit, EPOCH_BUMP_MARKER_VERSION, 2_002);
    match refused {
        Err(Error::InvalidProducerEpoch {
            ref partition,
            producer_id: 7,
            epoch: 1,
            current: 1,
        }) => assert_eq!(partition, log.name()),
        other => panic!("the delayed marker was not refused: {other:?}"),
    }
    assert_eq!(log.log_end_offset(), 3, "nothing appended");
    assert!(
        log.has_open_transaction(7).unwrap(),
        "transaction 2 is open"
    );
    assert_eq!(log.last_stable_offset().unwrap(), 2);
    // Its own marker, at the next bumped epoch, ends it.
    assert!(matches!(
        log.append_end_txn_marker_once(7, 2, commit, EPOCH_BUMP_MARKER_VERSION, 2_003)
            .unwrap(),
        MarkerOutcome::Appended(AppendInfo { base_offset: 3, .. })
    ));
    assert!(!log.has_open_transaction(7).unwrap());
    // Version 1 (no bump at the end): a marker of the current epoch ends a transaction.
    log.append_idempotent(&txn(2, 0)).unwrap();
    assert!(matches!(
        log.append_end_txn_marker_once(7, 2, commit, 1, 2_004)
            .unwrap(),
        MarkerOutcome::Appended(AppendInfo { base_offset: 5, .. })
    ));
    assert!(!log.has_open_transaction(7).unwrap());
}

/// A transactional batch of producer `pid` at `epoch` from sequence `seq` (one record).
fn txn_batch_at(pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new()
        .producer(pid, epoch, seq)
        .attributes(crate::record::TRANSACTIONAL_BIT);
    b.push(1_000, None, Some(b"in a transaction"), &[]);
    b.finish()
}

/// Transaction version 2: each transaction's data is at epoch `e` and its marker at
/// `e + 1`, the next transaction's epoch. While markers end transaction after
/// transaction, a leader asking whether the producer has a transaction open at the
/// next transaction's epoch must never hear yes: none of that epoch has a batch here
/// yet (a yes let the next transaction's first batch skip the coordinator). Bounded:
/// 2,000 transactions, the asking thread stopping with them.
#[test]
fn a_transaction_is_never_open_at_the_epoch_its_marker_brings() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open_with(
        dir.path(),
        LogConfig {
            segment_bytes: 1 << 20,
            ..small()
        },
    ));
    let done = Arc::new(AtomicBool::new(false));
    // The epoch of the transaction being written; its marker brings epoch + 1.
    let current = Arc::new(AtomicI32::new(0));
    let asker = {
        let (log, done, current) = (Arc::clone(&log), Arc::clone(&done), Arc::clone(&current));
        std::thread::spawn(move || {
            let mut wrong = 0u32;
            while !done.load(Ordering::Acquire) {
                let next = current.load(Ordering::Acquire) + 1;
                if log.transaction_open_at(9, next as i16).unwrap() {
                    // Only wrong if no batch of `next` was appended meanwhile.
                    if current.load(Ordering::Acquire) + 1 == next {
                        wrong += 1;
                    }
                }
            }
            wrong
        })
    };
    for epoch in 0..2_000i16 {
        current.store(i32::from(epoch), Ordering::Release);
        appended(log.append_idempotent(&txn_batch_at(9, epoch, 0)).unwrap());
        log.append_end_txn_marker(9, epoch + 1, crate::record::EndTxnMarker::commit(0), 1_000)
            .unwrap();
    }
    done.store(true, Ordering::Release);
    assert_eq!(
        asker.join().unwrap(),
        0,
        "a transaction seen open at an epoch no batch has"
    );
}
