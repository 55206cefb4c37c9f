//! The read side of transactions over a real socket: read_committed Fetch (last stable
//! offset, aborted transactions, sendfile kept), ListOffsets by isolation level, and
//! TxnOffsetCommit with OffsetFetch's `require_stable`. The transactional data and
//! markers are written with the storage API (no transactional producer is served yet).

use std::collections::HashSet;
use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::Client;
use super::*;
use crate::record::{Compression, EndTxnMarker, batches, test_batch};

const BIG: usize = 20_000;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// A broker with `t-0` holding, by offset: 0 a plain record of [`BIG`] bytes (so that a
/// fetch of it goes out with sendfile), 1-2 producer 7's records then its ABORT at 4,
/// 3 producer 8's record then its COMMIT at 5, 6 plain "d", 7 producer 9's record of
/// an open transaction, 8 plain "f".
fn serve() -> (tempfile::TempDir, crate::broker::Broker, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let p = broker
        .create_topic_handle("t", 1, crate::TopicConfig::new())
        .unwrap()
        .partition(0)
        .unwrap();
    let append = |txn: Option<i64>, values: &[&str]| {
        p.append_batch(&test_batch(txn, Compression::None, values))
            .unwrap();
    };
    append(None, &[&"a".repeat(BIG)]);
    append(Some(7), &["b1", "b2"]);
    append(Some(8), &["c1"]);
    let log = p.log();
    log.append_end_txn_marker(7, 0, EndTxnMarker::abort(0), 1)
        .unwrap();
    log.append_end_txn_marker(8, 0, EndTxnMarker::commit(0), 1)
        .unwrap();
    append(None, &["d"]);
    append(Some(9), &["e"]);
    append(None, &["f"]);
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (dir, broker, server)
}

fn fetch(
    c: &mut Client,
    version: i16,
    isolation: i8,
    offset: i64,
) -> fetch_response::PartitionData {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let resp: FetchResponse = c.call(ApiKey::Fetch, version, &req);
    resp.responses[0].partitions[0].clone()
}

/// What a Kafka consumer hands out of a Fetch partition (its `CompletedFetch`): control
/// batches never, and with read_committed not the batches of a producer from its
/// aborted transaction's first offset until its ABORT marker.
fn consumed(p: &fetch_response::PartitionData) -> Vec<String> {
    let mut aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    aborted.sort_by_key(|a| std::cmp::Reverse(a.1));
    let mut active = HashSet::new();
    let mut out = Vec::new();
    for b in batches(p.records.as_deref().unwrap_or_default()) {
        let b = b.unwrap();
        while aborted.last().is_some_and(|a| a.1 <= b.last_offset()) {
            active.insert(aborted.pop().unwrap().0);
        }
        if b.is_control() {
            let marker = EndTxnMarker::of_batch(&b, "t-0").unwrap().unwrap();
            if !marker.commit {
                active.remove(&b.producer_id());
            }
            continue;
        }
        if b.is_transactional() && active.contains(&b.producer_id()) {
            continue;
        }
        for r in b.records() {
            let v = r.unwrap().value.unwrap().to_vec();
            out.push(String::from_utf8(v).unwrap());
        }
    }
    out
}

fn short(values: Vec<String>) -> Vec<String> {
    values
        .into_iter()
        .map(|v| if v.len() == BIG { "a".into() } else { v })
        .collect()
}

#[test]
fn read_committed_fetch_stops_at_the_lso_with_the_aborted_transactions() {
    let (_dir, _broker, server) = serve();
    let mut c = Client::connect(server.local_addr());
    for version in [4, 5, 7, 11] {
        let p = fetch(&mut c, version, 1, 0);
        assert_eq!(p.error_code, 0);
        assert_eq!(
            (p.high_watermark, p.last_stable_offset),
            (9, 7),
            "v{version}"
        );
        let aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        assert_eq!(aborted, [(7, 1)], "v{version}");
        let last = batches(p.records.as_deref().unwrap())
            .map(|b| b.unwrap().last_offset())
            .last();
        assert_eq!(last, Some(6), "v{version}: whole batches below the LSO");
        assert_eq!(short(consumed(&p)), ["a", "c1", "d"], "v{version}");

        // From past the ABORT marker, its transaction is not returned again.
        let p = fetch(&mut c, version, 1, 5);
        assert_eq!(p.aborted_transactions, Some(Vec::new()));
        assert_eq!(consumed(&p), ["d"]);
        // At the LSO: nothing yet, not an error.
        let p = fetch(&mut c, version, 1, 7);
        assert_eq!((p.error_code, p.last_stable_offset), (0, 7));
        assert_eq!(p.aborted_transactions, Some(Vec::new()));
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));

        // read_uncommitted: everything to the high watermark, no aborted list.
        let p = fetch(&mut c, version, 0, 0);
        assert_eq!((p.high_watermark, p.last_stable_offset), (9, 9));
        assert_eq!(p.aborted_transactions, None);
        let all = short(consumed(&p));
        assert_eq!(all, ["a", "b1", "b2", "c1", "d", "e", "f"], "v{version}");
    }
}

#[test]
fn list_offsets_latest_is_the_lso_for_read_committed() {
    let (_dir, _broker, server) = serve();
    let mut c = Client::connect(server.local_addr());
    for version in 1..=5 {
        let levels: &[i8] = if version >= 2 { &[0, 1] } else { &[0] };
        for &isolation in levels {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(isolation)
                .with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1),
                        ]),
                ]);
            let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, version, &req);
            let p = &resp.topics[0].partitions[0];
            // v1 has no isolation level: it reads uncommitted.
            let want = if isolation == 1 { 7 } else { 9 };
            assert_eq!(
                (p.error_code, p.offset),
                (0, want),
                "v{version} {isolation}"
            );
        }
    }
}

/// The codes of a TxnOffsetCommit of `t`-0 and `u`-0 by `c`.
fn txn_commit_codes(c: &mut Client, txn_id: &str, group: &str) -> Vec<(String, i16)> {
    let partition = || {
        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(1)
    };
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(txn_id.into())))
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_producer_id(ProducerId(3))
        .with_topics(
            ["t", "u"]
                .iter()
                .map(|t| {
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(name(t))
                        .with_partitions(vec![partition()])
                })
                .collect(),
        );
    let resp: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, 3, &req);
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.error_code))
        })
        .collect()
}

#[test]
fn txn_offset_commit_needs_write_on_the_transactional_id_and_read_on_group_and_topic() {
    use super::tests_security::{binding, broker, create_acls, login, sasl_server};
    use crate::security::acl::ResourceType::{Group, Topic, TransactionalId as TxnId};
    use crate::security::acl::{AclOperation as Op, AclPermission as Perm, PatternType};
    let (_dir, broker) = broker(&["t", "u"], &[("admin", "a"), ("app", "p")]);
    let server = sasl_server(broker, true);
    let mut admin = login(server.local_addr(), "PLAIN", "admin", "a").unwrap();
    let allow = |kind, name: &str, op| {
        binding(
            kind,
            name,
            PatternType::Literal,
            "User:app",
            op,
            Perm::Allow,
        )
    };
    create_acls(
        &mut admin,
        vec![
            allow(TxnId, "tx", Op::Write),
            allow(Group, "g", Op::Read),
            allow(Topic, "t", Op::Read),
        ],
    );
    let mut app = login(server.local_addr(), "PLAIN", "app", "p").unwrap();
    let codes = |c: &mut Client, txn_id, group| txn_commit_codes(c, txn_id, group);
    let all = |code: i16| vec![("t".to_string(), code), ("u".to_string(), code)];
    assert_eq!(codes(&mut app, "other", "g"), all(53), "no Write on the id");
    assert_eq!(codes(&mut app, "tx", "h"), all(30), "no Read on the group");
    assert_eq!(
        codes(&mut app, "tx", "g"),
        [("t".to_string(), 0), ("u".to_string(), 29)],
        "Read on t only"
    );
}

fn offset_fetch(c: &mut Client, version: i16, require_stable: bool) -> (i16, i64) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_require_stable(require_stable)
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(name("t"))
                .with_partition_indexes(vec![0]),
        ]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, version, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

#[test]
fn txn_offset_commit_is_pending_until_the_marker_and_require_stable_says_so() {
    let (_dir, broker, server) = serve();
    let mut c = Client::connect(server.local_addr());
    for version in 0..=4 {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx")))
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_producer_id(ProducerId(20 + i64::from(version)))
            .with_producer_epoch(0)
            .with_generation_id(-1)
            .with_topics(vec![
                txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(100 + i64::from(version)),
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(5)
                            .with_committed_offset(1),
                    ]),
            ]);
        let resp: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, version, &req);
        let codes: Vec<(i32, i16)> = resp.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(codes, [(0, 0), (5, 3)], "v{version}");
    }
    // Pending: not shown, and unstable for a fetch that requires stable offsets.
    assert_eq!(offset_fetch(&mut c, 5, false), (0, -1));
    assert_eq!(offset_fetch(&mut c, 7, false), (0, -1));
    assert_eq!(offset_fetch(&mut c, 7, true), (88, -1));
    let coordinator = broker.group_coordinator();
    for version in 0..=4i64 {
        let commit = version != 4;
        coordinator
            .complete_txn_offsets(coordinator.partition_of("g"), 20 + version, 0, commit)
            .unwrap();
    }
    assert_eq!(offset_fetch(&mut c, 7, true), (0, 103));
    assert_eq!(offset_fetch(&mut c, 6, false), (0, 103));
}

/// With the transaction coordinator: offsets sent to a transaction (AddOffsetsToTxn,
/// TxnOffsetCommit) become the group's when EndTxn commits (its marker on
/// `__consumer_offsets`), are dropped when it aborts, and stay so after a restart.
#[test]
fn end_txn_decides_the_offsets_of_a_transaction() {
    use super::tests_transactions::{end, init, s, settled, start};
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 1, crate::TopicConfig::new())
        .unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let p = init(&mut c, "tx");
    let send_offset = |c: &mut Client, offset: i64| {
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s("tx")))
            .with_producer_id(ProducerId(p.0))
            .with_producer_epoch(p.1)
            .with_group_id(GroupId(s("g")));
        let r: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, 3, &add);
        assert_eq!(r.error_code, 0);
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s("tx")))
            .with_group_id(GroupId(s("g")))
            .with_producer_id(ProducerId(p.0))
            .with_producer_epoch(p.1)
            .with_generation_id(-1)
            .with_topics(vec![
                txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset),
                    ]),
            ]);
        let r: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, 3, &commit);
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
    };
    // EndTxn answers before its markers are written: UNSTABLE_OFFSET_COMMIT until
    // the marker on __consumer_offsets lands (bounded wait).
    let stable = |c: &mut Client| {
        for _ in 0..1000 {
            let answer = offset_fetch(c, 7, true);
            if answer.0 != 88 {
                return answer;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        offset_fetch(c, 7, true)
    };
    send_offset(&mut c, 7);
    assert_eq!(offset_fetch(&mut c, 7, true), (88, -1));
    assert_eq!(end(&mut c, 3, "tx", p, true).error_code, 0);
    assert_eq!(stable(&mut c), (0, 7));
    // The offsets are the group's once the marker is written; the transaction is
    // CompleteCommit (the next one may start) just after.
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteCommit"
    );
    send_offset(&mut c, 9);
    assert_eq!(end(&mut c, 3, "tx", p, false).error_code, 0);
    assert_eq!(stable(&mut c), (0, 7));
    drop(c);
    server.shutdown().unwrap();
    broker.close().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let fetched = broker
        .group_coordinator()
        .offset_fetch_stable("g", Some(&[("t".to_string(), 0)]))
        .unwrap();
    assert_eq!(fetched[0].as_ref().map(|o| o.offset).ok(), Some(7));
}
