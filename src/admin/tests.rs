//! Tests of the admin client against a single node served in this process.

use std::time::Duration;

use super::*;
use crate::broker::Broker;
use crate::producer::{Producer, ProducerRecord};
use crate::server::{Server, ServerHandle};

fn serve() -> (tempfile::TempDir, Broker, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    (dir, broker, server)
}

fn admin(server: &ServerHandle) -> AdminClient {
    AdminClient::builder(server.local_addr().to_string())
        .retries(2)
        .retry_backoff(Duration::from_millis(10))
        .connect()
        .unwrap()
}

/// The Kafka error of a refusal.
#[track_caller]
fn code<T: std::fmt::Debug>(r: &Result<T>) -> ErrorCode {
    match r {
        Err(Error::Admin(e)) => e.code,
        other => panic!("not a broker's refusal: {other:?}"),
    }
}

#[test]
fn topics_are_created_described_altered_grown_and_deleted() {
    let (_dir, broker, server) = serve();
    let admin = admin(&server);

    let created = admin
        .create_topics(&[
            NewTopic::new("events")
                .partitions(2)
                .config("retention.ms", "86400000"),
            NewTopic::new("defaults"),
        ])
        .unwrap();
    assert!(
        created["events"].is_ok() && created["defaults"].is_ok(),
        "{created:?}"
    );
    assert_eq!(broker.topic("events").unwrap().partition_count(), 2);
    assert_eq!(broker.topic("defaults").unwrap().partition_count(), 1);

    let again = admin
        .create_topics(&[NewTopic::new("events").partitions(2)])
        .unwrap();
    assert_eq!(code(&again["events"]), ErrorCode::TOPIC_ALREADY_EXISTS);
    let rf = admin
        .create_topics(&[NewTopic::new("replicated").replication_factor(3)])
        .unwrap();
    assert_eq!(
        code(&rf["replicated"]),
        ErrorCode::INVALID_REPLICATION_FACTOR
    );
    let err = admin
        .create_topics(&[NewTopic::new("x"), NewTopic::new("x")])
        .unwrap_err();
    assert!(
        matches!(&err, Error::Admin(e) if e.code == ErrorCode::INVALID_REQUEST),
        "{err}"
    );

    let described = admin.describe_topics(&["events", "missing"]).unwrap();
    let events = described["events"].as_ref().unwrap();
    assert_eq!(events.partitions.len(), 2);
    assert_eq!(events.replication_factor(), 1);
    for (i, p) in events.partitions.iter().enumerate() {
        assert_eq!(p.partition, i as i32);
        assert_eq!(p.leader, Some(0));
        assert_eq!(p.replicas, [0]);
        assert_eq!(p.isr, [0]);
    }
    assert_eq!(
        code(&described["missing"]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(
        described["missing"]
            .as_ref()
            .unwrap_err()
            .to_string()
            .starts_with("topic \"missing\": UNKNOWN_TOPIC_OR_PARTITION")
    );

    let m = admin.metadata().unwrap();
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.controller, Some(0));
    let names: Vec<(&str, bool)> = m
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.internal))
        .collect();
    assert_eq!(
        names,
        [
            ("__consumer_offsets", true),
            ("defaults", false),
            ("events", false)
        ]
    );

    let configs = admin.describe_configs(&["events"]).unwrap();
    let retention = configs["events"]
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.name == "retention.ms")
        .cloned()
        .unwrap();
    assert_eq!(retention.value.as_deref(), Some("86400000"));
    assert_eq!(retention.source, ConfigSource::Topic);

    let altered = admin
        .alter_configs(&[(
            "events",
            vec![
                AlterConfigOp::Delete("retention.ms".into()),
                AlterConfigOp::Set("cleanup.policy".into(), "compact".into()),
            ],
        )])
        .unwrap();
    assert!(altered["events"].is_ok(), "{altered:?}");
    let overrides: Vec<(String, String)> = broker
        .topic("events")
        .unwrap()
        .config()
        .overrides()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        overrides,
        [("cleanup.policy".to_string(), "compact".to_string())]
    );
    let bad = admin
        .alter_configs(&[(
            "events",
            vec![AlterConfigOp::Set("retention.ms".into(), "soon".into())],
        )])
        .unwrap();
    assert_eq!(code(&bad["events"]), ErrorCode::INVALID_CONFIG);

    let grown = admin.create_partitions(&[("events", 5)]).unwrap();
    assert!(grown["events"].is_ok(), "{grown:?}");
    assert_eq!(broker.topic("events").unwrap().partition_count(), 5);
    let shrink = admin.create_partitions(&[("events", 3)]).unwrap();
    assert_eq!(code(&shrink["events"]), ErrorCode::INVALID_PARTITIONS);

    let deleted = admin.delete_topics(&["events", "missing"]).unwrap();
    assert!(deleted["events"].is_ok(), "{deleted:?}");
    assert_eq!(
        code(&deleted["missing"]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(!broker.topic_names().contains(&"events".to_string()));
    server.shutdown().unwrap();
}

#[test]
fn offsets_and_groups_over_the_wire() {
    let (_dir, broker, server) = serve();
    let admin = admin(&server);
    admin
        .create_topics(&[NewTopic::new("orders").partitions(2)])
        .unwrap()
        .remove("orders")
        .unwrap()
        .unwrap();
    let producer = Producer::new(&broker).unwrap();
    for i in 0..5 {
        let value = format!("order {i}");
        let record = ProducerRecord::new(value.as_bytes()).partition(0);
        producer.send("orders", record).unwrap();
    }

    let p0 = TopicPartition::new("orders", 0);
    let p1 = TopicPartition::new("orders", 1);
    let p9 = TopicPartition::new("orders", 9);
    let offsets = admin
        .list_offsets(&[
            (p0.clone(), OffsetSpec::Latest),
            (p1.clone(), OffsetSpec::Earliest),
            (p9.clone(), OffsetSpec::Latest),
        ])
        .unwrap();
    assert_eq!(offsets[&p0].as_ref().unwrap().offset, Some(5));
    assert_eq!(offsets[&p1].as_ref().unwrap().offset, Some(0));
    assert_eq!(code(&offsets[&p9]), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    let future = admin
        .list_offsets(&[(p0.clone(), OffsetSpec::Timestamp(i64::MAX / 2))])
        .unwrap();
    assert_eq!(
        future[&p0].as_ref().unwrap().offset,
        None,
        "no record that late"
    );

    assert!(admin.list_groups().unwrap().is_empty());
    let committed = admin
        .alter_consumer_group_offsets("audit", &[(p0.clone(), 3), (p1.clone(), 0)])
        .unwrap();
    assert!(committed.values().all(|r| r.is_ok()), "{committed:?}");
    let groups = admin.list_groups().unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].group_id, "audit");
    let offsets = admin.list_consumer_group_offsets("audit").unwrap();
    let pairs: Vec<(i32, i64)> = offsets
        .iter()
        .map(|o| (o.partition.partition, o.offset))
        .collect();
    assert_eq!(pairs, [(0, 3), (1, 0)]);
    assert!(
        admin
            .list_consumer_group_offsets("nobody")
            .unwrap()
            .is_empty()
    );

    let described = admin.describe_groups(&["audit", "nobody"]).unwrap();
    let audit = described["audit"].as_ref().unwrap();
    assert_eq!(audit.state, "Empty");
    assert!(audit.members.is_empty());
    assert_eq!(audit.coordinator, 0);
    assert_eq!(described["nobody"].as_ref().unwrap().state, "Dead");
    server.shutdown().unwrap();
}

#[test]
fn bootstrap_tries_each_address_and_checks_the_list() {
    let (_dir, _broker, server) = serve();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let list = format!("{dead_addr},{}", server.local_addr());
    let admin = AdminClient::connect(&list).unwrap();
    assert_eq!(admin.metadata().unwrap().brokers.len(), 1);

    for bad in ["", " , ", "localhost", "host:port", ":9092"] {
        let err = AdminClient::connect(bad).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig { key, .. } if key == "bootstrap.servers"),
            "{bad:?}: {err}"
        );
    }
    let err = AdminClient::builder(dead_addr.to_string())
        .retries(0)
        .connect()
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    server.shutdown().unwrap();
}

/// A fake two-broker Kafka cluster speaking just enough of the protocol to show the
/// client's routing: Metadata names a controller that has moved (NOT_CONTROLLER) the
/// first two times (or always, once `stale` is set), FindCoordinator has none the first time (COORDINATOR_NOT_AVAILABLE) and
/// the coordinator is loading the first time (COORDINATOR_LOAD_IN_PROGRESS).
mod moving_cluster {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::describe_groups_response::DescribedGroup;
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
    use kafka_protocol::messages::{
        ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, DescribeGroupsResponse,
        FindCoordinatorResponse, GroupId, MetadataResponse, RequestHeader, ResponseHeader,
        TopicName,
    };
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

    use super::*;

    /// Requests seen: (node id, api, detail).
    type Log = Arc<Mutex<Vec<(i32, ApiKey, String)>>>;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn encode<R: Encodable + HeaderVersion>(correlation: i32, version: i16, r: &R) -> Vec<u8> {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut buf, R::header_version(version))
            .unwrap();
        r.encode(&mut buf, version).unwrap();
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    /// Serves one connection to node `node` of the cluster whose brokers are `ports`.
    fn serve(mut c: TcpStream, node: i32, ports: [u16; 2], log: Log, stale: Arc<AtomicBool>) {
        loop {
            let mut size = [0u8; 4];
            if c.read_exact(&mut size).is_err() {
                return;
            }
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            c.read_exact(&mut body).unwrap();
            let key = ApiKey::try_from(i16::from_be_bytes([body[0], body[1]])).unwrap();
            let version = i16::from_be_bytes([body[2], body[3]]);
            let mut bytes = Bytes::from(body);
            let header =
                RequestHeader::decode(&mut bytes, key.request_header_version(version)).unwrap();
            let seen = |detail: String| {
                let mut log = log.lock().unwrap();
                log.push((node, key, detail));
                log.iter().filter(|(_, k, _)| *k == key).count()
            };
            let corr = header.correlation_id;
            let out = match key {
                ApiKey::Metadata => {
                    // The first answers name node 1 as controller; it has moved to 2.
                    let n = seen(String::new());
                    let brokers = (0..2)
                        .map(|i| {
                            MetadataResponseBroker::default()
                                .with_node_id(BrokerId(i + 1))
                                .with_host(s("127.0.0.1"))
                                .with_port(i32::from(ports[i as usize]))
                        })
                        .collect();
                    let controller = if n <= 2 || stale.load(Ordering::SeqCst) {
                        1
                    } else {
                        2
                    };
                    encode(
                        corr,
                        version,
                        &MetadataResponse::default()
                            .with_brokers(brokers)
                            .with_controller_id(BrokerId(controller)),
                    )
                }
                ApiKey::CreateTopics => {
                    let r = CreateTopicsRequest::decode(&mut bytes, version).unwrap();
                    let name = r.topics[0].name.0.to_string();
                    seen(name.clone());
                    let code = if node == 2 {
                        0
                    } else {
                        ErrorCode::NOT_CONTROLLER.code()
                    };
                    let result = CreatableTopicResult::default()
                        .with_name(TopicName(s(&name)))
                        .with_error_code(code);
                    encode(
                        corr,
                        version,
                        &CreateTopicsResponse::default().with_topics(vec![result]),
                    )
                }
                ApiKey::FindCoordinator => {
                    let r = if seen(String::new()) == 1 {
                        FindCoordinatorResponse::default()
                            .with_error_code(ErrorCode::COORDINATOR_NOT_AVAILABLE.code())
                            .with_node_id(BrokerId(-1))
                    } else {
                        FindCoordinatorResponse::default()
                            .with_node_id(BrokerId(2))
                            .with_host(s("127.0.0.1"))
                            .with_port(i32::from(ports[1]))
                    };
                    encode(corr, version, &r)
                }
                ApiKey::DescribeGroups => {
                    let n = seen(String::new());
                    let g = DescribedGroup::default().with_group_id(GroupId(s("g")));
                    let g = if node != 2 {
                        g.with_error_code(ErrorCode::NOT_COORDINATOR.code())
                    } else if n == 1 {
                        g.with_error_code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.code())
                    } else {
                        g.with_group_state(s("Empty"))
                    };
                    encode(
                        corr,
                        version,
                        &DescribeGroupsResponse::default().with_groups(vec![g]),
                    )
                }
                other => panic!("the fake cluster does not answer {other:?}"),
            };
            c.write_all(&out).unwrap();
        }
    }

    #[test]
    fn requests_follow_the_controller_and_the_coordinator() {
        let listeners = [
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.1:0").unwrap(),
        ];
        let ports = [0, 1].map(|i| listeners[i].local_addr().unwrap().port());
        let log: Log = Arc::default();
        let stale = Arc::new(AtomicBool::new(false));
        for (i, l) in listeners.into_iter().enumerate() {
            let (log, stale) = (log.clone(), stale.clone());
            // Accepts for at most 30 s; each connection ends when the client closes it
            // or after 30 s without a request.
            l.set_nonblocking(true).unwrap();
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::time::Instant::now() < deadline {
                    let Ok((c, _)) = l.accept() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    let (log, stale) = (log.clone(), stale.clone());
                    std::thread::spawn(move || serve(c, i as i32 + 1, ports, log, stale));
                }
            });
        }
        let admin = AdminClient::builder(format!("127.0.0.1:{}", ports[0]))
            .retries(3)
            .retry_backoff(Duration::from_millis(1))
            .connect()
            .unwrap();

        let created = admin.create_topics(&[NewTopic::new("t")]).unwrap();
        assert!(created["t"].is_ok(), "{created:?}");
        let creates: Vec<i32> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, k, _)| *k == ApiKey::CreateTopics)
            .map(|(node, _, _)| *node)
            .collect();
        assert_eq!(
            creates,
            [1, 2],
            "to the stale controller, then to the new one"
        );

        let groups = admin.describe_groups(&["g"]).unwrap();
        let g = groups["g"].as_ref().unwrap();
        assert_eq!((g.state.as_str(), g.coordinator), ("Empty", 2));
        let log = log.lock().unwrap();
        let describes: Vec<i32> = log
            .iter()
            .filter(|(_, k, _)| *k == ApiKey::DescribeGroups)
            .map(|(node, _, _)| *node)
            .collect();
        assert_eq!(
            describes,
            [2, 2],
            "to the coordinator only, again while it loaded"
        );
        let finds = log
            .iter()
            .filter(|(_, k, _)| *k == ApiKey::FindCoordinator)
            .count();
        assert_eq!(
            finds, 3,
            "no coordinator yet, then one for each DescribeGroups"
        );

        // With retries used up, a retriable error is the item's error.
        drop(log);
        stale.store(true, Ordering::SeqCst);
        let admin = AdminClient::builder(format!("127.0.0.1:{}", ports[0]))
            .retries(0)
            .connect()
            .unwrap();
        let created = admin.create_topics(&[NewTopic::new("u")]).unwrap();
        assert_eq!(code(&created["u"]), ErrorCode::NOT_CONTROLLER);
    }
}

#[test]
fn replicas_move_between_log_directories() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let broker = Broker::builder(&a).log_dirs([&b]).open().unwrap();
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    let admin = admin(&server);
    admin
        .create_topics(&[NewTopic::new("events").partitions(1)])
        .unwrap();
    let tp = TopicPartition::new("events", 0);
    let holder = |admin: &AdminClient| -> (i32, Vec<(String, bool)>) {
        let all = admin.describe_log_dirs().unwrap();
        let (id, dirs) = all.into_iter().next().unwrap();
        let dirs = dirs.unwrap();
        let held = dirs
            .iter()
            .map(|d| (d.path.clone(), d.replicas.iter().any(|r| r.partition == tp)))
            .collect();
        (id, held)
    };
    let (id, held) = holder(&admin);
    assert_eq!(held.len(), 2, "{held:?}");
    let target = held.iter().find(|(_, h)| !h).unwrap().0.clone();
    let moved = admin
        .alter_replica_log_dirs(id, &[(tp.clone(), target.clone())])
        .unwrap();
    assert!(moved[&tp].is_ok(), "{moved:?}");
    let mut done = false;
    for _ in 0..400 {
        let (_, held) = holder(&admin);
        if held.iter().any(|(d, h)| *h && *d == target) && broker.future_logs().is_empty() {
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(done, "{:?}", holder(&admin));
    let elsewhere = root.path().join("elsewhere").display().to_string();
    let refused = admin
        .alter_replica_log_dirs(id, &[(tp.clone(), elsewhere)])
        .unwrap();
    assert_eq!(code(&refused[&tp]), ErrorCode::LOG_DIR_NOT_FOUND);
    let unknown = admin
        .alter_replica_log_dirs(id, &[(TopicPartition::new("nope", 0), target.clone())])
        .unwrap();
    assert_eq!(
        code(&unknown[&TopicPartition::new("nope", 0)]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        code(&admin.alter_replica_log_dirs(id + 100, &[(tp, target)])),
        ErrorCode::BROKER_ID_NOT_REGISTERED
    );
    server.shutdown().unwrap();
    broker.close().unwrap();
}
