//! Handlers over a fake [`ClusterView`]: Metadata, FindCoordinator and DescribeCluster
//! answer from a cluster of two brokers held in memory, no quorum or metadata log
//! involved.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::api::{self, Reply};
use super::cluster_view::fake::FakeCluster;
use super::cluster_view::{ClusterView, PartitionLayout, TopicLayout};
use super::tests_api_table::frame;
use super::{Config, Shared, broker_backend, connection, idempotence, limits};

/// Two brokers with an `INTERNAL` and an `EXTERNAL` listener each (broker 2 has no
/// `EXTERNAL` one); topic `orders` with two partitions, led by 1 and by 2;
/// `__consumer_offsets` with one partition led by 2; broker 2 is the controller.
fn two_brokers() -> FakeCluster {
    let partition = |leader: i32, replicas: Vec<i32>| PartitionLayout {
        leader,
        leader_epoch: 4,
        isr: replicas.clone(),
        replicas,
        offline: vec![],
    };
    let mut topics = std::collections::BTreeMap::new();
    topics.insert(
        "orders".to_string(),
        TopicLayout {
            id: [1; 16],
            internal: false,
            partitions: vec![partition(1, vec![1, 2]), partition(2, vec![2, 1])],
        },
    );
    topics.insert(
        crate::broker::OFFSETS_TOPIC.to_string(),
        TopicLayout {
            id: [2; 16],
            internal: true,
            partitions: vec![partition(2, vec![2, 1])],
        },
    );
    let ep = |name: &str, host: &str, port: i32| (name.to_string(), host.to_string(), port);
    FakeCluster {
        node_id: 1,
        cluster_id: Some("fake-cluster".into()),
        controller: Some(2),
        brokers: vec![
            (
                1,
                false,
                vec![
                    ep("INTERNAL", "b1.internal", 9093),
                    ep("EXTERNAL", "b1.example", 19093),
                ],
            ),
            (2, false, vec![ep("INTERNAL", "b2.internal", 9093)]),
        ],
        topics,
        ..FakeCluster::default()
    }
}

/// Sends `request` (`key` v`version`) to the handlers of a server whose broker is a node
/// of `cluster`, as a client of listener `listener`; returns the decoded response.
fn ask<Q: Encodable + Default, R: Decodable>(
    cluster: FakeCluster,
    listener: &str,
    key: ApiKey,
    version: i16,
    request: &Q,
) -> R {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let cluster: Arc<dyn ClusterView> = Arc::new(cluster);
    let backend = Arc::new(broker_backend::BrokerBackend {
        broker,
        cluster: Some(cluster),
        group_configs: None,
        broker_configs: None,
    });
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    let socket = TcpStream::connect(probe.local_addr().unwrap()).unwrap();
    let credentials =
        Arc::new(crate::security::credentials::FileCredentialStore::open(dir.path()).unwrap());
    let shared = Shared::new(
        Config::default(),
        backend,
        limits::Descriptors::now(&probe),
        Arc::default(),
        crate::security::Security::new(credentials),
        idempotence::ProducerIds::new(dir.path().to_path_buf()),
    );
    let ctx = api::Ctx {
        shared: &shared,
        peer: socket.local_addr().unwrap(),
        local: socket.peer_addr().unwrap(),
        listener,
        socket: &socket,
        principal: "User:ANONYMOUS",
    };
    let mut body = bytes::BytesMut::new();
    request.encode(&mut body, version).unwrap();
    let frame = frame(key, version, 5, &body)[4..].to_vec();
    let Ok(connection::Parsed::Request(req)) = connection::parse(frame) else {
        panic!("the request does not parse");
    };
    let Ok(Reply::Parts(parts)) = api::handle(&ctx, req) else {
        panic!("no response");
    };
    let mut bytes = Vec::new();
    for part in parts {
        let api::Part::Bytes(b) = part else {
            panic!("a file region in a response built in memory");
        };
        bytes.extend(b);
    }
    let mut bytes = Bytes::from(bytes);
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 5);
    let response = R::decode(&mut bytes, version).unwrap();
    assert!(bytes.is_empty());
    response
}

fn topic(name: &str) -> metadata_request::MetadataRequestTopic {
    metadata_request::MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

#[test]
fn metadata_lists_the_brokers_of_the_listener_and_the_partitions_layout() {
    let request =
        MetadataRequest::default().with_topics(Some(vec![topic("orders"), topic("nope")]));
    let r: MetadataResponse = ask(two_brokers(), "INTERNAL", ApiKey::Metadata, 8, &request);
    let brokers: Vec<(i32, String, i32)> = r
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    assert_eq!(
        brokers,
        [
            (1, "b1.internal".into(), 9093),
            (2, "b2.internal".into(), 9093)
        ]
    );
    assert_eq!(r.controller_id.0, 2);
    assert_eq!(r.cluster_id.as_deref(), Some("fake-cluster"));
    assert_eq!(r.topics.len(), 2);
    let orders = &r.topics[0];
    assert_eq!(orders.error_code, 0);
    let layout: Vec<(i16, i32, i32, Vec<i32>)> = orders
        .partitions
        .iter()
        .map(|p| {
            (
                p.error_code,
                p.leader_id.0,
                p.leader_epoch,
                p.replica_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    assert_eq!(layout, [(0, 1, 4, vec![1, 2]), (0, 2, 4, vec![2, 1])]);
    assert_eq!(r.topics[1].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");

    // On EXTERNAL, broker 2 is not listed and its partition has no reachable leader.
    let r: MetadataResponse = ask(two_brokers(), "EXTERNAL", ApiKey::Metadata, 8, &request);
    assert_eq!(r.brokers.len(), 1);
    assert_eq!((r.brokers[0].node_id.0, r.brokers[0].port), (1, 19093));
    let p = &r.topics[0].partitions[1];
    assert_eq!(
        (p.error_code, p.leader_id.0),
        (5, -1),
        "LEADER_NOT_AVAILABLE"
    );
}

#[test]
fn metadata_of_a_topic_being_created_on_this_node_is_leader_not_available() {
    // Committed, and this node is opening its partitions: a client retries
    // LEADER_NOT_AVAILABLE, where UNKNOWN_TOPIC_OR_PARTITION (or a topic left out of
    // Metadata of every topic) tells a consumer that its subscribed topic does not exist.
    let codes = |topics: Option<Vec<metadata_request::MetadataRequestTopic>>| {
        let mut cluster = two_brokers();
        cluster.being_created = vec!["fresh".into()];
        let request = MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(true);
        let r: MetadataResponse = ask(cluster, "INTERNAL", ApiKey::Metadata, 8, &request);
        r.topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().to_string(), t.error_code))
            .collect::<Vec<(String, i16)>>()
    };
    assert_eq!(
        codes(Some(vec![topic("fresh"), topic("nope")])),
        [("fresh".into(), 5), ("nope".into(), 3)],
        "LEADER_NOT_AVAILABLE for the topic being created, UNKNOWN_TOPIC_OR_PARTITION else"
    );
    assert_eq!(
        codes(None),
        [
            ("__consumer_offsets".into(), 0),
            ("fresh".into(), 5),
            ("orders".into(), 0)
        ]
    );
}

#[test]
fn metadata_of_a_fenced_replica_lists_it_offline() {
    let mut cluster = two_brokers();
    cluster.brokers[1].1 = true;
    let request = MetadataRequest::default().with_topics(Some(vec![topic("orders")]));
    let r: MetadataResponse = ask(cluster, "INTERNAL", ApiKey::Metadata, 8, &request);
    assert_eq!(r.brokers.len(), 1, "a fenced broker is not listed");
    let offline: Vec<i32> = r.topics[0].partitions[0]
        .offline_replicas
        .iter()
        .map(|b| b.0)
        .collect();
    assert_eq!(offline, [2]);
}

#[test]
fn metadata_lists_a_replica_whose_log_directory_failed_offline() {
    let mut cluster = two_brokers();
    let orders = cluster.topics.get_mut("orders").unwrap();
    orders.partitions[0] = PartitionLayout {
        leader: 2,
        leader_epoch: 5,
        replicas: vec![1, 2],
        isr: vec![2],
        offline: vec![1],
    };
    let request = MetadataRequest::default().with_topics(Some(vec![topic("orders")]));
    let r: MetadataResponse = ask(cluster, "INTERNAL", ApiKey::Metadata, 8, &request);
    assert_eq!(
        r.brokers.len(),
        2,
        "its broker is listed: it serves the others"
    );
    let p = &r.topics[0].partitions[0];
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    assert_eq!(ids(&p.offline_replicas), [1]);
    assert_eq!((p.leader_id.0, ids(&p.isr_nodes)), (2, vec![2]));
}

#[test]
fn find_coordinator_answers_the_leader_of_the_groups_offsets_partition() {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("payments"))
        .with_key_type(0);
    let r: FindCoordinatorResponse = ask(
        two_brokers(),
        "INTERNAL",
        ApiKey::FindCoordinator,
        2,
        &request,
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        (r.node_id.0, r.host.as_str(), r.port),
        (2, "b2.internal", 9093)
    );
    // The coordinator has no EXTERNAL listener.
    let r: FindCoordinatorResponse = ask(
        two_brokers(),
        "EXTERNAL",
        ApiKey::FindCoordinator,
        2,
        &request,
    );
    assert_eq!(r.error_code, 15, "COORDINATOR_NOT_AVAILABLE");
    assert!(
        r.error_message
            .as_deref()
            .unwrap_or("")
            .contains("no listener named EXTERNAL"),
        "{:?}",
        r.error_message
    );
}

#[test]
fn describe_cluster_answers_the_clusters_id_controller_and_brokers() {
    let request = DescribeClusterRequest::default();
    let r: DescribeClusterResponse = ask(
        two_brokers(),
        "INTERNAL",
        ApiKey::DescribeCluster,
        0,
        &request,
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        (r.cluster_id.as_str(), r.controller_id.0),
        ("fake-cluster", 2)
    );
    let ids: Vec<i32> = r.brokers.iter().map(|b| b.broker_id.0).collect();
    assert_eq!(ids, [1, 2]);
}

#[test]
fn find_coordinator_answers_the_leader_of_the_transactional_ids_state_partition() {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("payments-tx"))
        .with_key_type(1);
    // Until __transaction_state exists (and has leaders): COORDINATOR_NOT_AVAILABLE.
    let r: FindCoordinatorResponse = ask(
        two_brokers(),
        "INTERNAL",
        ApiKey::FindCoordinator,
        3,
        &request,
    );
    assert_eq!(r.error_code, 15, "{r:?}");
    let mut cluster = two_brokers();
    let partitions = (0..50)
        .map(|p| {
            let leader = 1 + p % 2;
            PartitionLayout {
                leader,
                leader_epoch: 3,
                replicas: vec![leader, 3 - leader],
                isr: vec![leader, 3 - leader],
                offline: vec![],
            }
        })
        .collect();
    cluster.topics.insert(
        crate::transaction::log::TRANSACTION_STATE_TOPIC.to_string(),
        TopicLayout {
            id: [3; 16],
            internal: true,
            partitions,
        },
    );
    let index = crate::transaction::log::partition_for("payments-tx", 50);
    let leader = 1 + index % 2;
    let r: FindCoordinatorResponse = ask(cluster, "INTERNAL", ApiKey::FindCoordinator, 3, &request);
    assert_eq!(r.error_code, 0, "{r:?}");
    let host = if leader == 1 {
        "b1.internal"
    } else {
        "b2.internal"
    };
    assert_eq!((r.node_id.0, r.host.as_str(), r.port), (leader, host, 9093));
}
