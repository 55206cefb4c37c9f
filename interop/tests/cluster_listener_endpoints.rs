//! Every node registers all its listeners by name (Kafka's `advertised.listeners`), and
//! Metadata, FindCoordinator and DescribeCluster answer with the brokers' endpoints of
//! the listener the request came in on. Three nodes in this process, each with a
//! PLAINTEXT listener and a PLAINTEXT listener named EXTERNAL (advertised as
//! `localhost` on nodes 1 and 2, at its bound address on node 3); node 3 also has an
//! ADMIN listener no other node has. A raw Metadata request on each listener of each
//! node lists every node at that listener's endpoint; rdkafka produces and consumes
//! with a group through the EXTERNAL listeners only; on ADMIN, only node 3 is listed
//! and partitions led by the others are LEADER_NOT_AVAILABLE.

use std::time::Duration;

use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseProducer;
use tidelog::TopicConfig;
use tidelog::security::SecurityProtocol;
use tidelog_interop::cluster::{
    KafkaConn, Layout, eventually, free_ports, produce_values, shutdown_all, start_nodes,
};

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "events";
const GROUP: &str = "outside";
const LEADER_NOT_AVAILABLE: i16 = 5;

/// `(node id, host, port)` of each broker a Metadata v8 request on `addr` lists, and
/// `(partition, error, leader)` of each partition of `TOPIC`; None if it does not answer.
#[allow(clippy::type_complexity)]
fn metadata(addr: &str) -> Option<(Vec<(i32, String, i32)>, Vec<(i32, i16, i32)>)> {
    let request = MetadataRequest::default().with_topics(None);
    let response = KafkaConn::connect(addr, Duration::from_secs(5))?.call(&request, 8)?;
    let mut brokers: Vec<_> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    brokers.sort();
    let partitions = response
        .topics
        .iter()
        .filter(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code, p.leader_id.0))
        .collect();
    Some((brokers, partitions))
}

#[test]
fn each_listener_lists_the_brokers_at_their_endpoints_of_that_listener() {
    let layout = Layout::new(3);
    let external = free_ports(4);
    let admin_port = external[3];
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |i, b| {
        let b = b
            .add_named_listener(
                "EXTERNAL",
                SecurityProtocol::Plaintext,
                format!("127.0.0.1:{}", external[i]),
            )
            .offsets_topic_replication_factor(3);
        if i < 2 {
            b.advertised(format!("EXTERNAL://localhost:{}", external[i]))
        } else {
            b.add_named_listener(
                "ADMIN",
                SecurityProtocol::Plaintext,
                format!("127.0.0.1:{admin_port}"),
            )
        }
    });
    let plaintext: Vec<(i32, String, i32)> = (0..3)
        .map(|i| (i as i32 + 1, "127.0.0.1".into(), i32::from(layout.kafka[i])))
        .collect();
    let outside: Vec<(i32, String, i32)> = (0..3)
        .map(|i| {
            let host = if i < 2 { "localhost" } else { "127.0.0.1" };
            (i as i32 + 1, host.into(), i32::from(external[i]))
        })
        .collect();
    let external_addr = |i: usize| format!("127.0.0.1:{}", external[i]);
    // Every node, asked on either listener, lists all three at that listener's endpoint.
    for i in 0..3 {
        for (addr, expected) in [(layout.addr(i), &plaintext), (external_addr(i), &outside)] {
            eventually(&format!("{addr} lists every node"), WAIT, || {
                (metadata(&addr)?.0 == *expected).then_some(())
            });
        }
    }

    // A topic led by every node in turn; rdkafka through the EXTERNAL listeners only.
    eventually("the topic is created", WAIT, || {
        brokers[0]
            .create_topic_if_missing(TOPIC, 3, TopicConfig::new())
            .ok()
    });
    let bootstrap = (0..3).map(external_addr).collect::<Vec<_>>().join(",");
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("broker.address.family", "v4")
        .set("acks", "all")
        .create()
        .unwrap();
    produce_values(&producer, TOPIC, 3, (0, 10), WAIT);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("broker.address.family", "v4")
        .set("group.id", GROUP)
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while values.len() < 30 && std::time::Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("a message");
            values.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    values.sort();
    let mut expected: Vec<String> = (0..3)
        .flat_map(|p| (0..10).map(move |o| format!("v{p}-{o}")))
        .collect();
    expected.sort();
    assert_eq!(
        values, expected,
        "the group read everything through EXTERNAL"
    );

    // FindCoordinator answers with the coordinator's endpoint of the asking listener.
    let find = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str(GROUP));
    let mut on_plaintext = KafkaConn::connect(&layout.addr(0), WAIT).unwrap();
    let mut on_external = KafkaConn::connect(&external_addr(0), WAIT).unwrap();
    let (p, e) = eventually("the coordinator on both listeners", WAIT, || {
        let p = on_plaintext.call(&find, 2)?;
        let e = on_external.call(&find, 2)?;
        (p.error_code == 0 && e.error_code == 0 && p.node_id == e.node_id).then_some((p, e))
    });
    let coordinator = (p.node_id.0 - 1) as usize;
    assert_eq!(
        (p.host.to_string(), p.port),
        (plaintext[coordinator].1.clone(), plaintext[coordinator].2)
    );
    assert_eq!(
        (e.host.to_string(), e.port),
        (outside[coordinator].1.clone(), outside[coordinator].2)
    );

    // DescribeCluster too.
    let describe = DescribeClusterRequest::default().with_endpoint_type(1);
    let dc = on_external
        .call(&describe, 1)
        .expect("a DescribeCluster answer");
    let mut listed: Vec<_> = dc
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
        .collect();
    listed.sort();
    assert_eq!(listed, outside);

    // Only node 3 has ADMIN: it alone is listed there, and partitions the others lead
    // have no leader a client of that listener could reach.
    let admin_addr = format!("127.0.0.1:{admin_port}");
    let (listed, partitions) = metadata(&admin_addr).expect("a Metadata answer on ADMIN");
    assert_eq!(
        listed,
        vec![(3, "127.0.0.1".to_string(), i32::from(admin_port))]
    );
    assert_eq!(partitions.len(), 3);
    let (_, on_plain) = metadata(&layout.addr(2)).expect("a Metadata answer");
    for ((p, error, leader), (_, _, real_leader)) in partitions.iter().zip(&on_plain) {
        if *real_leader == 3 {
            assert_eq!((*error, *leader), (0, 3), "partition {p}");
        } else {
            assert_eq!(
                (*error, *leader),
                (LEADER_NOT_AVAILABLE, -1),
                "partition {p}"
            );
        }
    }
    let dc = KafkaConn::connect(&admin_addr, WAIT)
        .and_then(|mut c| c.call(&describe, 1))
        .expect("a DescribeCluster answer on ADMIN");
    assert_eq!(
        dc.brokers.iter().map(|b| b.broker_id).collect::<Vec<_>>(),
        vec![BrokerId(3)]
    );
    drop(consumer);
    shutdown_all(servers);
}
