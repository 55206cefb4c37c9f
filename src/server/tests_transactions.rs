//! Transactions over a real socket: FindCoordinator (TRANSACTION), InitProducerId with a
//! transactional id, AddPartitionsToTxn (client and verify-only forms), transactional
//! Produce, EndTxn, WriteTxnMarkers, DescribeTransactions and ListTransactions, with
//! the markers checked in the partition's log and the state checked across a restart.

use std::net::SocketAddr;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::Client;
use super::*;
use crate::broker::Broker;
use crate::record::{BatchBuilder, TRANSACTIONAL_BIT};

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(super) fn start(broker: &Broker) -> ServerHandle {
    Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap()
}

pub(super) fn init(c: &mut Client, id: &str) -> (i64, i16) {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(60_000);
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    (r.producer_id.0, r.producer_epoch)
}

/// AddPartitionsToTxn v`version` (0-3) of `partitions` of topic `t`; every code.
fn add(c: &mut Client, version: i16, id: &str, p: (i64, i16), partitions: &[i32]) -> Vec<i16> {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(p.0))
        .with_v3_and_below_producer_epoch(p.1)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(partitions.to_vec()),
        ]);
    let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, version, &req);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .collect()
}

/// AddPartitionsToTxn v`version` (4+) with verify_only, as a partition leader asks.
fn verify(c: &mut Client, version: i16, id: &str, p: (i64, i16), partition: i32) -> i16 {
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(p.0))
            .with_producer_epoch(p.1)
            .with_verify_only(true)
            .with_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![partition]),
            ]),
    ]);
    let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, version, &req);
    assert_eq!(r.error_code, 0);
    r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code
}

fn produce(c: &mut Client, id: &str, p: (i64, i16), partition: i32, seq: i32) -> i16 {
    let r: ProduceResponse = c.call(ApiKey::Produce, 8, &produce_request(id, p, partition, seq));
    r.responses[0].partition_responses[0].error_code
}

/// A Produce (acks=all) of transaction `id`'s batch of one record at sequence `seq`
/// from producer `p` to `t`-`partition`.
pub(crate) fn produce_request(id: &str, p: (i64, i16), partition: i32, seq: i32) -> ProduceRequest {
    let mut b = BatchBuilder::new()
        .producer(p.0, p.1, seq)
        .attributes(TRANSACTIONAL_BIT);
    b.push(1_700_000_000_000, None, Some(b"v"), &[]);
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(b.finish().into())),
                ]),
        ])
}

pub(super) fn end(
    c: &mut Client,
    version: i16,
    id: &str,
    p: (i64, i16),
    commit: bool,
) -> EndTxnResponse {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_committed(commit);
    c.call(ApiKey::EndTxn, version, &req)
}

fn describe(c: &mut Client, id: &str) -> describe_transactions_response::TransactionState {
    let req =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(s(id))]);
    let r: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &req);
    r.transaction_states[0].clone()
}

/// The state of `id` once its markers are written (EndTxn answers before they are;
/// bounded wait).
pub(super) fn settled(
    c: &mut Client,
    id: &str,
) -> describe_transactions_response::TransactionState {
    for _ in 0..1000 {
        let state = describe(c, id);
        if !state.transaction_state.as_str().starts_with("Prepare") {
            return state;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    describe(c, id)
}

/// The control markers of partition `p` of `t`, in log order.
fn markers(broker: &Broker, p: i32) -> Vec<bool> {
    crate::broker::transactions::tests::markers_of(
        &broker.topic("t").unwrap().partition(p).unwrap(),
    )
}

#[test]
fn a_transaction_commits_aborts_and_fences_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 2, crate::TopicConfig::new())
        .unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());

    // FindCoordinator v4, batched: this node, __transaction_state made on first use.
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("tx"), s("other")]);
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
    assert_eq!(r.coordinators.len(), 2);
    assert!(
        r.coordinators
            .iter()
            .all(|k| k.error_code == 0 && k.node_id.0 == 0)
    );
    assert_eq!(
        r.coordinators[0].port,
        i32::from(server.local_addr().port())
    );
    assert_eq!(
        broker
            .topic("__transaction_state")
            .unwrap()
            .partition_count(),
        50
    );

    let p = init(&mut c, "tx");
    assert_eq!(p.1, 0);
    // KIP-890 part 1: not in the transaction yet, the leader refuses the batch.
    assert_eq!(produce(&mut c, "tx", p, 0, 0), 48, "INVALID_TXN_STATE");
    assert_eq!(add(&mut c, 3, "tx", p, &[0, 1]), vec![0, 0]);
    assert_eq!(produce(&mut c, "tx", p, 0, 0), 0);
    assert_eq!(verify(&mut c, 4, "tx", p, 1), 0, "in the transaction");
    let ongoing = describe(&mut c, "tx");
    assert_eq!(ongoing.transaction_state.as_str(), "Ongoing");
    assert_eq!(ongoing.topics[0].partitions, vec![0, 1]);
    assert_eq!(end(&mut c, 3, "tx", p, true).error_code, 0);
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteCommit"
    );
    assert_eq!(markers(&broker, 0), vec![true]);
    assert_eq!(markers(&broker, 1), vec![true]);

    // A second transaction, aborted.
    assert_eq!(add(&mut c, 3, "tx", p, &[0]), vec![0]);
    assert_eq!(produce(&mut c, "tx", p, 0, 1), 0);
    assert_eq!(end(&mut c, 3, "tx", p, false).error_code, 0);
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteAbort"
    );
    assert_eq!(markers(&broker, 0), vec![true, false]);
    // The retried EndTxn is answered like the first; the opposite one is refused.
    assert_eq!(end(&mut c, 3, "tx", p, false).error_code, 0);
    assert_eq!(end(&mut c, 3, "tx", p, true).error_code, 48);

    let list: ListTransactionsResponse = c.call(
        ApiKey::ListTransactions,
        1,
        &ListTransactionsRequest::default().with_state_filters(vec![s("CompleteAbort"), s("Nope")]),
    );
    assert_eq!(list.unknown_state_filters, vec![s("Nope")]);
    assert_eq!(list.transaction_states.len(), 1);
    assert_eq!(list.transaction_states[0].transactional_id.0.as_str(), "tx");

    // A second instance fences the first: older clients hear INVALID_PRODUCER_EPOCH.
    let second = init(&mut c, "tx");
    assert_eq!(second, (p.0, 1));
    assert_eq!(add(&mut c, 3, "tx", p, &[0]), vec![90], "PRODUCER_FENCED");
    assert_eq!(
        add(&mut c, 1, "tx", p, &[0]),
        vec![47],
        "INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(produce(&mut c, "tx", p, 0, 2), 47);
    // Verify-only for a partition outside the transaction: TRANSACTION_ABORTABLE from
    // v5, INVALID_TXN_STATE for v4.
    assert_eq!(add(&mut c, 3, "tx", second, &[1]), vec![0]);
    assert_eq!(verify(&mut c, 5, "tx", second, 0), 120);
    assert_eq!(verify(&mut c, 4, "tx", second, 0), 48);
    // EndTxn v5 (KIP-890 part 2): the answer carries the bumped epoch.
    let r = end(&mut c, 5, "tx", second, true);
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, p.0, 2)
    );
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteCommit"
    );

    // A coordinator's WriteTxnMarkers to a partition led here.
    let req = WriteTxnMarkersRequest::default().with_markers(vec![
        write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(99))
            .with_producer_epoch(0)
            .with_transaction_result(false)
            .with_topics(vec![
                write_txn_markers_request::WritableTxnMarkerTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0]),
            ]),
    ]);
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &req);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0);
    assert_eq!(markers(&broker, 0), vec![true, false, false]);
    // A marker from an older coordinator than the producer's last one is fenced.
    let mut older = req.clone();
    older.markers[0].coordinator_epoch = -1;
    let mut newer = req;
    newer.markers[0].coordinator_epoch = 5;
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &newer);
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0);
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &older);
    assert_eq!(
        r.markers[0].topics[0].partitions[0].error_code, 52,
        "TRANSACTION_COORDINATOR_FENCED"
    );
    assert_eq!(markers(&broker, 0), vec![true, false, false, false]);
    drop(c);
    server.shutdown().unwrap();
    broker.close().unwrap();

    // After a restart the coordinator loads its partition from the log.
    let broker = Broker::open(dir.path()).unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let after = describe(&mut c, "tx");
    assert_eq!(after.transaction_state.as_str(), "CompleteCommit");
    assert_eq!((after.producer_id.0, after.producer_epoch), (p.0, 2));
    server.shutdown().unwrap();
}

/// AddOffsetsToTxn adds the group's `__consumer_offsets` partition; a transaction that
/// committed no offsets in it leaves the group coordinator's journal as it was, so the
/// broker opens again.
#[test]
fn a_transaction_with_a_group_but_no_offsets_keeps_the_offsets_journal_readable() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let p = init(&mut c, "tx");
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("tx")))
        .with_producer_id(ProducerId(p.0))
        .with_producer_epoch(p.1)
        .with_group_id(GroupId(s("g")));
    let r: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, 3, &req);
    assert_eq!(r.error_code, 0);
    let ongoing = describe(&mut c, "tx");
    assert_eq!(
        ongoing.topics[0].topic.0.as_str(),
        crate::broker::OFFSETS_TOPIC
    );
    assert_eq!(end(&mut c, 3, "tx", p, true).error_code, 0);
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteCommit"
    );
    drop(c);
    server.shutdown().unwrap();
    broker.close().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    assert!(broker.group_coordinator().is_loaded());
}

/// `__transaction_state`'s 50 partitions count in the broker's `max_partitions`: a
/// node without room for them answers COORDINATOR_NOT_AVAILABLE and makes nothing.
#[test]
fn no_room_for_the_transaction_state_is_coordinator_not_available() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::builder(dir.path())
        .max_partitions(20)
        .offsets_topic_num_partitions(1)
        .open()
        .unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(s("tx"));
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &req);
    assert_eq!(r.error_code, 15, "{r:?}");
    assert!(
        r.error_message
            .as_ref()
            .is_some_and(|m| m.contains("max_partitions")),
        "{r:?}"
    );
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx"))))
        .with_transaction_timeout_ms(60_000);
    let r: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(r.error_code, 15);
    assert!(broker.topic("__transaction_state").is_err());
    server.shutdown().unwrap();
}

/// KIP-890 part 1, as Kafka's leader does: only the first transactional batch of a
/// transaction in a partition is verified with the coordinator; later ones continue
/// the transaction the log holds open for the producer at that epoch.
#[test]
fn only_the_first_batch_of_a_transaction_in_a_partition_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 2, crate::TopicConfig::new())
        .unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let p = init(&mut c, "tx");
    assert_eq!(add(&mut c, 3, "tx", p, &[0, 1]), vec![0, 0]);
    assert_eq!(produce(&mut c, "tx", p, 0, 0), 0);
    // The coordinator stops answering for the id (its partition moved away).
    let txns = broker.transaction_coordinator();
    txns.unload_partition(txns.partition_of("tx").unwrap());
    // The transaction open in partition 0 goes on without asking it.
    assert_eq!(produce(&mut c, "tx", p, 0, 1), 0);
    // Partition 1's first batch must be verified: the coordinator is elsewhere now,
    // which a Produce v8 client is told as the retriable NOT_ENOUGH_REPLICAS.
    assert_eq!(produce(&mut c, "tx", p, 1, 0), 19);
    server.shutdown().unwrap();
}

/// A coordinator that lost the answer to its WriteTxnMarkers (a timeout) sends it
/// again: both are answered, and each partition holds the marker once.
#[test]
fn a_retried_write_txn_markers_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 2, crate::TopicConfig::new())
        .unwrap();
    let topic = broker.topic("t").unwrap();
    for p in 0..2 {
        let mut b = BatchBuilder::new()
            .producer(99, 0, 0)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1, None, Some(b"v"), &[]);
        topic
            .partition(p)
            .unwrap()
            .append_idempotent(&b.finish())
            .unwrap();
    }
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let request = |partitions: Vec<i32>| {
        WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(99))
                .with_producer_epoch(0)
                .with_coordinator_epoch(2)
                .with_transaction_result(true)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partition_indexes(partitions),
                ]),
        ])
    };
    let codes = |r: WriteTxnMarkersResponse| -> Vec<i16> {
        r.markers[0].topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect()
    };
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &request(vec![0]));
    assert_eq!(codes(r), vec![0]);
    // The retry carries partition 1 too, whose marker was not written yet.
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &request(vec![0, 1]));
    assert_eq!(codes(r), vec![0, 0]);
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &request(vec![0, 1]));
    assert_eq!(codes(r), vec![0, 0]);
    assert_eq!(markers(&broker, 0), vec![true]);
    assert_eq!(markers(&broker, 1), vec![true]);
    for p in 0..2 {
        let part = topic.partition(p).unwrap();
        assert_eq!(part.log_end_offset(), 2);
        assert_eq!(part.log().last_stable_offset().unwrap(), 2);
    }

    // Markers of several transactions in one request, each answered on its own: a
    // deposed coordinator's (epoch 1 < 2) is fenced, producer 77's is written.
    let mut both = request(vec![0]);
    both.markers[0].coordinator_epoch = 1;
    let mut other = request(vec![0]).markers.remove(0);
    other.producer_id = ProducerId(77);
    both.markers.push(other);
    let r: WriteTxnMarkersResponse = c.call(ApiKey::WriteTxnMarkers, 1, &both);
    let answers: Vec<(i64, i16)> = r
        .markers
        .iter()
        .map(|m| (m.producer_id.0, m.topics[0].partitions[0].error_code))
        .collect();
    assert_eq!(
        answers,
        vec![(99, 52), (77, 0)],
        "TRANSACTION_COORDINATOR_FENCED"
    );
    assert_eq!(markers(&broker, 0), vec![true, true]);
    server.shutdown().unwrap();
}

/// KIP-890 over the wire: WriteTxnMarkers v2 carries each marker's transaction version,
/// and a leader refuses a version 2 marker whose producer epoch is not newer than the
/// producer's (INVALID_PRODUCER_EPOCH): the COMMIT of transaction 1, delivered late
/// after transaction 2 of the producer began on the partition, does not end it.
#[test]
fn a_delayed_tv2_write_txn_markers_does_not_end_a_later_transaction() {
    use crate::cluster::txn_markers_wire::{MarkersRequest, MarkersResponse};
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 1, crate::TopicConfig::new())
        .unwrap();
    let part = broker.topic("t").unwrap().partition(0).unwrap();
    let data = |epoch: i16| {
        let mut b = BatchBuilder::new()
            .producer(99, epoch, 0)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1, None, Some(b"v"), &[]);
        part.append_idempotent(&b.finish()).unwrap();
    };
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    // A COMMIT at the bumped `epoch`, transaction version 2, sent as v2.
    let mut commit = |epoch: i16| -> i16 {
        let request = MarkersRequest {
            request: WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(99))
                    .with_producer_epoch(epoch)
                    .with_coordinator_epoch(0)
                    .with_transaction_result(true)
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(TopicName(s("t")))
                            .with_partition_indexes(vec![0]),
                    ]),
            ]),
            transaction_versions: vec![2],
        };
        let r: MarkersResponse = c.call(ApiKey::WriteTxnMarkers, 2, &request);
        r.0.markers[0].topics[0].partitions[0].error_code
    };
    // Transaction 1 at epoch 0, committed at epoch 1 (its retry is a repeat).
    data(0);
    assert_eq!(commit(1), 0);
    assert_eq!(commit(1), 0);
    assert_eq!(part.log_end_offset(), 2);
    // Transaction 2 at epoch 1 begins; the delayed COMMIT of transaction 1 comes.
    data(1);
    assert_eq!(
        commit(1),
        kafka_protocol::ResponseError::InvalidProducerEpoch.code()
    );
    assert!(part.log().has_open_transaction(99).unwrap());
    assert_eq!(part.log().last_stable_offset().unwrap(), 2);
    assert_eq!(markers(&broker, 0), vec![true]);
    // Its own COMMIT, at epoch 2, ends it.
    assert_eq!(commit(2), 0);
    assert!(!part.log().has_open_transaction(99).unwrap());
    assert_eq!(markers(&broker, 0), vec![true, true]);
}

/// Transaction version 2 (Produce v12): one Produce carrying the first batch of a
/// transaction in four partitions adds all four to it (together: see
/// `add_together`), appends each batch, and the commit marks each partition.
#[test]
fn one_produce_adds_its_partitions_to_the_transaction_together() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("t", 4, crate::TopicConfig::new())
        .unwrap();
    let server = start(&broker);
    let mut c = Client::connect(server.local_addr());
    let p = init(&mut c, "tx");
    let batch = || {
        let mut b = BatchBuilder::new()
            .producer(p.0, p.1, 0)
            .attributes(TRANSACTIONAL_BIT);
        b.push(1_700_000_000_000, None, Some(b"v"), &[]);
        b.finish()
    };
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_transactional_id(Some(TransactionalId(s("tx"))))
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(
                    (0..4)
                        .map(|i| {
                            produce_request::PartitionProduceData::default()
                                .with_index(i)
                                .with_records(Some(batch().into()))
                        })
                        .collect(),
                ),
        ]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 12, &req);
    let codes: Vec<i16> = r.responses[0]
        .partition_responses
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![0; 4], "{r:?}");
    let state = describe(&mut c, "tx");
    assert_eq!(state.transaction_state.as_str(), "Ongoing");
    let mut added: Vec<i32> = state
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().copied())
        .collect();
    added.sort_unstable();
    assert_eq!(added, vec![0, 1, 2, 3]);
    // EndTxn v5 (transaction version 2) commits; every partition gets its marker.
    assert_eq!(end(&mut c, 5, "tx", p, true).error_code, 0);
    assert_eq!(
        settled(&mut c, "tx").transaction_state.as_str(),
        "CompleteCommit"
    );
    for i in 0..4 {
        assert_eq!(markers(&broker, i), vec![true], "partition {i}");
    }
}
