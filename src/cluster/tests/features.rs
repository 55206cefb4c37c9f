//! Finalized features (KIP-584) on an in-process cluster: a new cluster finalizes
//! `transaction.version` 2 and ApiVersions says so; UpdateFeatures downgrades it and
//! refuses an upgrade a node does not support, naming the node; a node that does not
//! support the finalized level stops; EndTxn v5 bumps the epoch only at level 2;
//! Produce v12 and TxnOffsetCommit v5 are offered and served only at level 2.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, UpdateFeaturesRequest,
    txn_offset_commit_request,
};
use kafka_protocol::protocol::StrBytes;

use super::acked_writes::bootstrap;
use super::failover::addr;
use super::*;
use crate::cluster::features::TRANSACTION_VERSION;
use crate::remote::{ClientConfig, Cluster};

/// INVALID_UPDATE_VERSION.
const INVALID_UPDATE_VERSION: i16 = 95;

/// UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;

/// ApiVersions v3 of node index `i`: its finalized `transaction.version` (None when
/// not finalized), the epoch of its finalized features, and the supported range.
fn api_versions(c: &TestCluster, i: usize) -> (Option<i16>, i64, (i16, i16)) {
    let remote = Cluster::connect(ClientConfig::new(addr(c, i).to_string())).unwrap();
    let (_, r) = remote
        .call(&addr(c, i).to_string(), 3..=3, |_| {
            ApiVersionsRequest::default()
        })
        .unwrap();
    let finalized = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == TRANSACTION_VERSION)
        .map(|f| {
            assert_eq!(f.min_version_level, f.max_version_level);
            f.max_version_level
        });
    let supported = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == TRANSACTION_VERSION)
        .map(|f| (f.min_version, f.max_version))
        .unwrap();
    (finalized, r.finalized_features_epoch, supported)
}

/// The highest Produce and TxnOffsetCommit versions ApiVersions of node index `i`
/// offers.
fn transaction_v2_maxima(c: &TestCluster, i: usize) -> (i16, i16) {
    let remote = Cluster::connect(ClientConfig::new(addr(c, i).to_string())).unwrap();
    let (_, r) = remote
        .call(&addr(c, i).to_string(), 3..=3, |_| {
            ApiVersionsRequest::default()
        })
        .unwrap();
    let max = |key: ApiKey| {
        r.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
            .unwrap()
    };
    (max(ApiKey::Produce), max(ApiKey::TxnOffsetCommit))
}

/// UpdateFeatures v1 of `transaction.version` to `level` with `upgrade_type`, sent to
/// node index `i`: the error code and message.
fn update(c: &TestCluster, i: usize, level: i16, upgrade_type: i8) -> (i16, Option<String>) {
    let remote = Cluster::connect(ClientConfig::new(bootstrap(c))).unwrap();
    let (_, r) = remote
        .call(&addr(c, i).to_string(), 1..=1, |_| {
            UpdateFeaturesRequest::default()
                .with_timeout_ms(10_000)
                .with_feature_updates(vec![
                    FeatureUpdateKey::default()
                        .with_feature(StrBytes::from_static_str(TRANSACTION_VERSION))
                        .with_max_version_level(level)
                        .with_upgrade_type(upgrade_type),
                ])
        })
        .unwrap();
    (r.error_code, r.error_message.map(|m| m.to_string()))
}

fn level_everywhere(c: &TestCluster, level: i16) {
    wait_until("the level on every running node", || {
        c.running()
            .iter()
            .all(|&i| c.node(i).image().finalized_level(TRANSACTION_VERSION) == level)
    });
}

#[test]
fn a_new_cluster_finalizes_transaction_version_2_and_api_versions_says_so() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    level_everywhere(&c, 2);
    let image = c.wait_same_image();
    for b in image.brokers.values() {
        assert_eq!(
            crate::cluster::features::range_of(&b.features, TRANSACTION_VERSION),
            (0, 2),
            "broker {}",
            b.id
        );
    }
    for i in 0..3 {
        let (finalized, epoch, supported) = api_versions(&c, i);
        assert_eq!(finalized, Some(2));
        assert!(epoch > 0, "the metadata index as the epoch: {epoch}");
        assert_eq!(supported, (0, 2));
    }
    c.shutdown();
}

#[test]
fn a_downgrade_takes_a_downgrade_type_and_an_upgrade_names_the_node_that_blocks_it() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    level_everywhere(&c, 2);
    // A lower level without a downgrade type is refused.
    let (code, message) = update(&c, 0, 1, 1);
    assert_eq!(code, INVALID_UPDATE_VERSION);
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("without setting the upgrade type")),
        "{message:?}"
    );
    // A safe downgrade to 1, sent to any node.
    assert_eq!(update(&c, 1, 1, 2), (0, None));
    level_everywhere(&c, 1);
    assert_eq!(api_versions(&c, 2).0, Some(1));
    // Node 3 comes back on a version that supports level 1 at most.
    c.halt(2);
    c.tv_max.insert(2, 1);
    c.restart(2);
    c.wait_settled();
    // Restarted within its session timeout, node 3 stays unfenced on its former
    // registration (levels 0-2) until its new one is applied: wait for that one, the
    // controller checks an update against the registered levels.
    wait_until(
        "node 3's new registration (levels 0-1) on every node",
        || {
            c.running().iter().all(|&i| {
                c.node(i).image().brokers.get(&3).is_some_and(|b| {
                    crate::cluster::features::range_of(&b.features, TRANSACTION_VERSION) == (0, 1)
                })
            })
        },
    );
    let (code, message) = update(&c, 0, 2, 1);
    assert_eq!(code, INVALID_UPDATE_VERSION);
    let message = message.unwrap();
    assert!(
        message.contains("Invalid update version 2 for feature transaction.version")
            && message.contains("Broker 3 only supports versions 0-1"),
        "{message}"
    );
    level_everywhere(&c, 1);
    c.shutdown();
}

#[test]
fn a_node_that_does_not_support_the_finalized_level_stops() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    level_everywhere(&c, 2);
    c.halt(2);
    c.tv_max.insert(2, 1);
    c.restart(2);
    wait_until("node 3 stopped", || c.node(2).check_running().is_err());
    let e = c.node(2).check_running().unwrap_err().to_string();
    assert!(
        e.contains("node 3 is unable to register")
            && e.contains("finalized version 2 of transaction.version"),
        "{e}"
    );
    // Its registration was never taken: the two others go on at level 2.
    let image = c.node(0).image();
    assert_eq!(
        crate::cluster::features::range_of(&image.brokers[&3].features, TRANSACTION_VERSION),
        (0, 2)
    );
    assert_eq!(image.finalized_level(TRANSACTION_VERSION), 2);
    c.halt(2);
    c.shutdown();
}

/// InitProducerId v4 for `id` at its coordinator (the leader of its partition of a
/// `__transaction_state` of 6 partitions): the client, the coordinator's address and
/// the producer id and epoch.
fn init_at_coordinator(c: &TestCluster, id: &str) -> (Cluster, String, i64, i16) {
    let remote = Cluster::connect(ClientConfig::new(bootstrap(c))).unwrap();
    let tid = || TransactionalId(StrBytes::from_string(id.to_string()));
    let image = c.node(0).image();
    let p = crate::transaction::log::partition_for(id, 6);
    let leader = image
        .topic(crate::transaction::log::TRANSACTION_STATE_TOPIC)
        .unwrap()
        .partitions[p as usize]
        .leader;
    let at = addr(c, (leader - 1) as usize).to_string();
    let mut init = None;
    wait_until("the coordinator to answer", || {
        let (_, r) = remote
            .call(&at, 4..=4, |_| {
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(tid()))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            })
            .unwrap();
        init = (r.error_code == 0).then_some((r.producer_id, r.producer_epoch));
        init.is_some()
    });
    let (pid, epoch) = init.unwrap();
    (remote, at, pid.0, epoch)
}

/// InitProducerId, AddPartitionsToTxn v3 of `t`-0 and EndTxn v5 (commit) at the
/// coordinator of `id`: the epoch InitProducerId gave and the one EndTxn answered.
fn one_transaction(c: &TestCluster, id: &str) -> (i16, i16) {
    let tid = || TransactionalId(StrBytes::from_string(id.to_string()));
    let (remote, at, pid, epoch) = init_at_coordinator(c, id);
    let pid = ProducerId(pid);
    let (_, r) = remote
        .call(&at, 3..=3, |_| {
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(tid())
                .with_v3_and_below_producer_id(pid)
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![0]),
                ])
        })
        .unwrap();
    let codes: Vec<i16> = r
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, vec![0]);
    let (_, r) = remote
        .call(&at, 5..=5, |_| {
            EndTxnRequest::default()
                .with_transactional_id(tid())
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_committed(true)
        })
        .unwrap();
    assert_eq!(r.error_code, 0);
    (epoch, r.producer_epoch)
}

/// A cluster of 3 at `transaction.version` 2 with a `__transaction_state` of 6
/// partitions and a topic `t` of one partition, 3 replicas.
fn cluster_at_2_with_topic_t() -> TestCluster {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    level_everywhere(&c, 2);
    c.node(0)
        .ensure_transaction_state(&crate::config::TransactionConfig {
            state_log_partitions: 6,
            ..Default::default()
        })
        .unwrap();
    c.wait_settled();
    super::replication::create(&c, "t", 1, Vec::new());
    c
}

#[test]
fn end_txn_v5_bumps_the_epoch_only_at_transaction_version_2() {
    let c = cluster_at_2_with_topic_t();
    let (epoch, ended) = one_transaction(&c, "at-2");
    assert_eq!(ended, epoch + 1, "level 2: bumped");
    assert_eq!(update(&c, 0, 1, 2), (0, None));
    level_everywhere(&c, 1);
    let (epoch, ended) = one_transaction(&c, "at-1");
    assert_eq!(ended, epoch, "level 1: EndTxn v5 keeps the epoch");
    c.shutdown();
}

/// A transactional Produce v12 of one record to `t`-0, sent to node index `i` whatever
/// it offers: the partition's error code.
fn produce_v12(c: &TestCluster, i: usize, id: &str, producer: (i64, i16)) -> i16 {
    let req = crate::server::tests_transactions::produce_request(id, producer, 0, 0);
    let mut client = crate::server::tests_api::Client::connect(addr(c, i));
    let r: ProduceResponse = client.call(ApiKey::Produce, 12, &req);
    r.responses[0].partition_responses[0].error_code
}

/// A TxnOffsetCommit v5 of group `g`'s offset 1 of `t`-0, sent to node index `i`
/// whatever it offers: the partition's error code.
fn txn_offset_commit_v5(c: &TestCluster, i: usize, id: &str, (pid, epoch): (i64, i16)) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let mut client = crate::server::tests_api::Client::connect(addr(c, i));
    let r: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 5, &req);
    r.topics[0].partitions[0].error_code
}

/// Kafka 4's clients send Produce v12 and TxnOffsetCommit v5 (which have the partition
/// leader and the group coordinator add partitions to the transaction) only when
/// `transaction.version` 2 is finalized. Below it ApiVersions offers v11 and v4, and a
/// client that sends the newer versions anyway is refused: nothing joins a
/// transaction of version 0 or 1 behind its client's back.
#[test]
fn produce_v12_and_txn_offset_commit_v5_wait_for_transaction_version_2() {
    let c = cluster_at_2_with_topic_t();
    for i in 0..3 {
        assert_eq!(transaction_v2_maxima(&c, i), (12, 5), "node index {i}");
    }
    assert_eq!(update(&c, 0, 0, 2), (0, None));
    level_everywhere(&c, 0);
    for i in 0..3 {
        assert_eq!(transaction_v2_maxima(&c, i), (11, 4), "node index {i}");
    }
    let (_, _, pid, epoch) = init_at_coordinator(&c, "below-2");
    let leader = super::replication::leader_index(&c, "t", 0);
    assert_eq!(
        produce_v12(&c, leader, "below-2", (pid, epoch)),
        UNSUPPORTED_VERSION
    );
    assert_eq!(
        super::replication::part(&c, leader, "t", 0).log_end_offset(),
        0,
        "nothing appended"
    );
    for i in 0..3 {
        assert_eq!(
            txn_offset_commit_v5(&c, i, "below-2", (pid, epoch)),
            UNSUPPORTED_VERSION,
            "node index {i}"
        );
    }
    c.shutdown();
}
