//! Transactional offsets in the coordinator: pending until the marker, the KIP-447
//! checks, `require_stable`, and the reload from `__consumer_offsets` with and without
//! markers.

use std::sync::Arc;
use std::time::Duration;

use super::tests::{MemJournal, commit_req, coordinator, join_req, stable_member};
use super::*;
use crate::record::EndTxnMarker;

fn offset(topic: &str, partition: i32, offset: i64) -> CommitOffset {
    CommitOffset {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: None,
        commit_timestamp: None,
    }
}

/// A TxnOffsetCommit of producer `pid` at `epoch` without group information.
fn txn_req(pid: i64, epoch: i16, offsets: Vec<CommitOffset>) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: "g".into(),
        producer_id: pid,
        producer_epoch: epoch,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        offsets,
    }
}

/// The group's committed offsets of t-0 and t-1 (-1: none).
fn visible(c: &GroupCoordinator) -> Vec<i64> {
    let asked = [("t".to_string(), 0), ("t".to_string(), 1)];
    c.offset_fetch("g", Some(&asked))
        .expect("fetch")
        .iter()
        .map(|o| o.offset)
        .collect()
}

/// Per partition (t-0, t-1): whether OffsetFetch with `require_stable` says unstable.
fn unstable(c: &GroupCoordinator) -> Vec<bool> {
    let asked = [("t".to_string(), 0), ("t".to_string(), 1)];
    c.offset_fetch_stable("g", Some(&asked))
        .expect("fetch")
        .iter()
        .map(|r| matches!(r, Err(GroupError::UnstableOffsetCommit { .. })))
        .collect()
}

fn all_ok(results: Vec<OffsetCommitResult>) {
    for r in results {
        assert!(
            r.result.is_ok(),
            "{}-{}: {:?}",
            r.topic,
            r.partition,
            r.result
        );
    }
}

#[test]
fn txn_offsets_are_pending_until_a_commit_marker_and_dropped_by_an_abort() {
    let journal = Arc::new(MemJournal::default());
    let c = coordinator(&journal);
    all_ok(c.offset_commit(commit_req(-1, "", 3)).expect("commit"));
    let req = txn_req(5, 0, vec![offset("t", 0, 10), offset("t", 1, 20)]);
    all_ok(c.txn_offset_commit(req).expect("txn commit"));
    assert_eq!(visible(&c), [3, -1], "pending offsets are not shown");
    assert_eq!(unstable(&c), [true, true]);
    // Another producer's marker decides nothing of producer 5.
    c.complete_txn_offsets(0, 6, 0, true).expect("complete");
    assert_eq!(visible(&c), [3, -1]);
    c.complete_txn_offsets(0, 5, 0, true).expect("complete");
    assert_eq!(visible(&c), [10, 20]);
    assert_eq!(unstable(&c), [false, false]);

    all_ok(
        c.txn_offset_commit(txn_req(5, 1, vec![offset("t", 0, 30)]))
            .expect("txn commit"),
    );
    assert_eq!(unstable(&c), [true, false]);
    c.complete_txn_offsets(0, 5, 1, false).expect("abort");
    assert_eq!(visible(&c), [10, 20], "an abort drops them");
    assert_eq!(unstable(&c), [false, false]);
    // A marker written again finds nothing pending.
    c.complete_txn_offsets(0, 5, 1, false).expect("abort again");
}

#[test]
fn a_plain_commit_after_a_txn_offset_commit_wins() {
    let journal = Arc::new(MemJournal::default());
    let c = coordinator(&journal);
    all_ok(
        c.txn_offset_commit(txn_req(5, 0, vec![offset("t", 0, 10)]))
            .expect("txn"),
    );
    all_ok(c.offset_commit(commit_req(-1, "", 12)).expect("commit"));
    assert_eq!(
        unstable(&c),
        [true, false],
        "still pending until the marker"
    );
    c.complete_txn_offsets(0, 5, 0, true).expect("complete");
    assert_eq!(visible(&c), [12, -1]);
}

#[test]
fn txn_offset_commit_checks_the_member_as_kip_447() {
    let journal = Arc::new(MemJournal::default());
    let c = coordinator(&journal);
    let (member, generation) = stable_member(&c);
    let with = |generation_id: i32, member_id: &str, instance: Option<&str>| {
        c.txn_offset_commit(TxnOffsetCommitRequest {
            generation_id,
            member_id: member_id.into(),
            group_instance_id: instance.map(str::to_string),
            ..txn_req(5, 0, vec![offset("t", 0, 1)])
        })
    };
    assert!(matches!(
        with(generation + 1, &member, None),
        Err(GroupError::IllegalGeneration { .. })
    ));
    assert!(matches!(
        with(generation, "stranger", None),
        Err(GroupError::UnknownMemberId(_))
    ));
    all_ok(with(generation, &member, None).expect("the member"));
    // A producer without group information (KIP-447's older clients) may commit.
    all_ok(with(-1, "", None).expect("no group information"));

    // A static member's instance used with another member id is fenced.
    let mut join = join_req("");
    join.group_id = "s".into();
    join.group_instance_id = Some("i1".into());
    let a = c.join_group(join, Duration::from_secs(5)).expect("join");
    let fenced = c.txn_offset_commit(TxnOffsetCommitRequest {
        group_id: "s".into(),
        generation_id: a.generation_id,
        member_id: "old-id".into(),
        group_instance_id: Some("i1".into()),
        ..txn_req(5, 0, vec![offset("t", 0, 1)])
    });
    assert!(
        matches!(fenced, Err(GroupError::FencedInstanceId(_))),
        "{fenced:?}"
    );
}

#[test]
fn an_older_producer_epoch_is_refused() {
    let journal = Arc::new(MemJournal::default());
    let c = coordinator(&journal);
    c.complete_txn_offsets(0, 5, 2, false).expect("abort");
    let results = c
        .txn_offset_commit(txn_req(5, 1, vec![offset("t", 0, 10)]))
        .expect("answered");
    assert!(matches!(
        results[0].result,
        Err(GroupError::InvalidProducerEpoch { current: 2, .. })
    ));
    assert!(matches!(
        c.txn_offset_commit(txn_req(-1, 0, vec![offset("t", 0, 10)])),
        Err(GroupError::InvalidProducerIdMapping { .. })
    ));
    assert_eq!(unstable(&c), [false, false]);
}

/// Through a broker: the offsets are written to `__consumer_offsets` as transactional
/// batches, and a reopened broker keeps those its producer committed, drops those it
/// aborted, and keeps pending those without a marker.
#[test]
fn a_reload_decides_txn_offsets_by_the_markers_in_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let broker = crate::Broker::open(dir.path()).expect("broker");
        broker
            .create_topic("t", 2, crate::TopicConfig::new())
            .expect("topic");
        let c = broker.group_coordinator();
        all_ok(
            c.txn_offset_commit(txn_req(5, 0, vec![offset("t", 0, 10)]))
                .expect("txn"),
        );
        all_ok(
            c.txn_offset_commit(txn_req(6, 0, vec![offset("t", 1, 20)]))
                .expect("txn"),
        );
        all_ok(
            c.txn_offset_commit(txn_req(7, 0, vec![offset("t", 1, 30)]))
                .expect("txn"),
        );
        let offsets = broker
            .topic(crate::OFFSETS_TOPIC)
            .expect("offsets topic")
            .partition(c.partition_of("g"))
            .expect("partition");
        assert_eq!(
            offsets.last_stable_offset().expect("lso"),
            0,
            "the transactional batches hold the last stable offset"
        );
        // The markers are written, and the broker stops before it is told.
        let log = offsets.log();
        log.append_end_txn_marker(5, 0, EndTxnMarker::commit(0), 1)
            .expect("commit marker");
        log.append_end_txn_marker(6, 0, EndTxnMarker::abort(0), 1)
            .expect("abort marker");
        assert_eq!(visible(c), [-1, -1]);
        broker.close().expect("close");
    }
    let broker = crate::Broker::open(dir.path()).expect("reopen");
    let c = broker.group_coordinator();
    assert_eq!(visible(c), [10, -1]);
    assert_eq!(unstable(c), [false, true], "producer 7 has no marker yet");
    c.complete_txn_offsets(c.partition_of("g"), 7, 0, true)
        .expect("complete");
    assert_eq!(visible(c), [10, 30]);
}
