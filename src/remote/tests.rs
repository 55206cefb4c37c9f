//! The network client against a tidelog server in process, and against scripted nodes
//! (threads on 127.0.0.1 speaking the Kafka protocol) that advertise fewer versions,
//! move a partition's leader or never answer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{ClientConfig, Cluster};
use crate::error::{Error, ErrorCode, Resource};
use crate::{BatchBuilder, Broker, IsolationLevel, Server, TopicConfig};

pub(super) fn batch(values: &[&str]) -> Bytes {
    let mut b = BatchBuilder::new();
    for v in values {
        b.push(1_000, None, Some(v.as_bytes()), &[]);
    }
    Bytes::from(b.finish())
}

/// A fetched record: `(offset, value, key, timestamp)`.
pub(super) type FetchedRecord = (i64, Vec<u8>, Option<Vec<u8>>, i64);

/// One fetched batch: its producer id, epoch, base sequence, and its records.
pub(super) struct Fetched {
    pub producer: (i64, i16, i32),
    pub records: Vec<FetchedRecord>,
}

/// Partition `partition` of topic `t` from offset 0, read uncommitted, waiting
/// `max_wait` for a first record.
pub(super) fn fetch_t(
    cluster: &Cluster,
    partition: i32,
    max_wait: Duration,
) -> super::FetchedPartition {
    cluster
        .fetch(
            "t",
            partition,
            0,
            1 << 20,
            max_wait,
            IsolationLevel::ReadUncommitted,
        )
        .unwrap()
}

/// The whole batches of a Fetch answer's records.
pub(super) fn batches_of(bytes: &[u8]) -> Vec<Fetched> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(size) = crate::record::batch_size(rest).filter(|s| *s <= rest.len()) {
        let b = crate::record::Batch::parse(&rest[..size]).unwrap();
        out.push(Fetched {
            producer: (b.producer_id(), b.producer_epoch(), b.base_sequence()),
            records: b
                .records()
                .map(|r| {
                    let r = r.unwrap();
                    let key = r.key.map(<[u8]>::to_vec);
                    (
                        r.offset,
                        r.value.unwrap_or_default().to_vec(),
                        key,
                        r.timestamp,
                    )
                })
                .collect(),
        });
        rest = &rest[size..];
    }
    out
}

pub(super) fn serve(broker: &Broker, addr: &str) -> crate::ServerHandle {
    Server::builder(broker.clone())
        .listen(addr)
        .start()
        .expect("server")
}

#[test]
fn produces_fetches_and_lists_offsets_on_a_tidelog_node() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    cluster
        .create_topic_if_missing("t", 2, TopicConfig::new())
        .unwrap();
    cluster
        .create_topic_if_missing("t", 2, TopicConfig::new())
        .expect("existing topic with the same count");
    let err = cluster
        .create_topic_if_missing("t", 3, TopicConfig::new())
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig { key, .. } if key == "partitions"),
        "{err}"
    );
    assert!(matches!(
        cluster.create_topic("t", 2, TopicConfig::new()),
        Err(Error::TopicExists(_))
    ));
    assert_eq!(cluster.partition_count("t").unwrap(), 2);
    assert!(cluster.topics().unwrap().contains(&"t".to_string()));
    assert_eq!(cluster.describe_topic("t").unwrap().partitions.len(), 2);

    let (first, _) = cluster
        .produce("t", 1, &batch(&["a", "b"]), -1, None)
        .unwrap();
    let (second, _) = cluster.produce("t", 1, &batch(&["c"]), 1, None).unwrap();
    assert_eq!((first, second), (0, 2));
    assert_eq!(
        cluster.produce("t", 1, &batch(&["d"]), 0, None).unwrap(),
        (-1, -1)
    );
    let end = Instant::now() + Duration::from_secs(10);
    let fetched = loop {
        let f = fetch_t(&cluster, 1, Duration::from_millis(100));
        if f.high_watermark == 4 || Instant::now() > end {
            break f;
        }
    };
    assert_eq!(fetched.high_watermark, 4, "the acks=0 record arrived too");
    let values: Vec<Vec<u8>> = batches_of(&fetched.records)
        .iter()
        .flat_map(|b| b.records.iter().map(|r| r.1.clone()))
        .collect();
    assert_eq!(values, [b"a", b"b", b"c", b"d"].map(|v| v.to_vec()));
    assert_eq!(
        cluster
            .list_offset("t", 1, Cluster::EARLIEST, IsolationLevel::ReadUncommitted)
            .unwrap()
            .offset,
        0
    );
    assert_eq!(
        cluster
            .list_offset("t", 1, Cluster::LATEST, IsolationLevel::ReadUncommitted)
            .unwrap()
            .offset,
        4
    );
    assert_eq!(
        cluster
            .list_offset("t", 0, Cluster::LATEST, IsolationLevel::ReadCommitted)
            .unwrap()
            .offset,
        0
    );
    let by_time = |ts| {
        cluster
            .list_offset("t", 1, ts, IsolationLevel::ReadUncommitted)
            .unwrap()
    };
    assert_eq!(
        by_time(1_000).offset,
        0,
        "the first record stamped at or after 1000"
    );
    assert_eq!(by_time(1_000).timestamp, 1_000);
    assert_eq!(by_time(5_000).offset, -1, "none that late");

    assert!(matches!(
        cluster.produce("t", 7, &batch(&["x"]), -1, None),
        Err(Error::UnknownPartition {
            partition: 7,
            count: 2,
            ..
        })
    ));
    assert!(matches!(cluster.partition_count("nope"), Err(Error::UnknownTopic(t)) if t == "nope"));
    cluster.add_partitions("t", 3).unwrap();
    assert_eq!(cluster.partition_count("t").unwrap(), 3);
    cluster.delete_topic("t").unwrap();
    assert!(matches!(
        cluster.delete_topic("t"),
        Err(Error::UnknownTopic(_))
    ));
    server.shutdown().unwrap();
}

#[test]
fn a_refusal_names_the_api_the_broker_and_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("t", 1, TopicConfig::new()).unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let addr = server.local_addr().to_string();
    let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
    let mut corrupt = batch(&["a"]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let err = cluster
        .produce("t", 0, &Bytes::from(corrupt), -1, None)
        .unwrap_err();
    let Error::Api(api) = &err else {
        panic!("{err:?}")
    };
    assert!(api.api.starts_with("Produce v"), "{err}");
    assert_eq!(api.broker, addr);
    assert_eq!(
        api.resource,
        Resource::Partition(crate::error::TopicPartition::new("t", 0))
    );
    assert_eq!(api.code.name(), "CORRUPT_MESSAGE");
    let text = err.to_string();
    assert!(
        text.contains(&addr) && text.contains("CORRUPT_MESSAGE"),
        "{text}"
    );
    server.shutdown().unwrap();
}

#[test]
fn settings_are_checked_by_their_kafka_names() {
    let bad = |config: ClientConfig, key: &str| match Cluster::connect(config) {
        Err(Error::InvalidConfig { key: k, .. }) => assert_eq!(k, key),
        other => panic!("{key}: {other:?}"),
    };
    bad(ClientConfig::new(""), "bootstrap.servers");
    bad(ClientConfig::new("nohost"), "bootstrap.servers");
    bad(ClientConfig::new("h:1").set("linger.ms", 5), "linger.ms");
    bad(
        ClientConfig::new("h:1").set("request.timeout.ms", "soon"),
        "request.timeout.ms",
    );
    bad(
        ClientConfig::new("h:1").set("request.timeout.ms", 0),
        "request.timeout.ms",
    );
    bad(
        ClientConfig::new("h:1").set("security.protocol", "TLS"),
        "security.protocol",
    );
    bad(
        ClientConfig::new("h:1").set("sasl.mechanism", "GSSAPI"),
        "sasl.mechanism",
    );
    bad(
        ClientConfig::new("h:1").set("security.protocol", "SSL"),
        "ssl.ca.location",
    );
    bad(
        ClientConfig::new("h:1").set("security.protocol", "SASL_PLAINTEXT"),
        "sasl.mechanism",
    );
    bad(
        ClientConfig::new("h:1")
            .set("retry.backoff.ms", 500)
            .set("retry.backoff.max.ms", 100),
        "retry.backoff.max.ms",
    );
}

#[test]
fn follows_the_leader_through_a_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("t", 1, TopicConfig::new()).unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let addr = server.local_addr();
    let cluster = Cluster::connect(
        ClientConfig::new(addr.to_string())
            .set("request.timeout.ms", 10_000)
            .set("retry.backoff.ms", 20),
    )
    .unwrap();
    cluster
        .produce("t", 0, &batch(&["before"]), -1, None)
        .unwrap();
    server.shutdown().unwrap();
    let restarted = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            serve(&broker, &addr.to_string())
        })
    };
    let (offset, _) = cluster
        .produce("t", 0, &batch(&["after"]), -1, None)
        .expect("retried until the broker came back");
    assert_eq!(offset, 1);
    restarted.join().unwrap().shutdown().unwrap();
}

/// What a scripted node answers: the API versions it advertises, and a handler of the
/// requests after ApiVersions (`None`: never answer).
pub(super) type Handler = dyn Fn(ApiKey, i16, &mut Bytes) -> Option<BytesMut> + Send + Sync;

/// A node on 127.0.0.1 that speaks the Kafka protocol by script; returns its address.
pub(super) fn scripted_node(versions: Vec<(ApiKey, i16, i16)>, handler: Arc<Handler>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(50) {
            let Ok(conn) = conn else { return };
            let versions = versions.clone();
            let handler = handler.clone();
            std::thread::spawn(move || answer(conn, &versions, &*handler));
        }
    });
    addr
}

fn answer(mut conn: TcpStream, versions: &[(ApiKey, i16, i16)], handler: &Handler) {
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    for _ in 0..1000 {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        conn.read_exact(&mut buf).unwrap();
        let mut bytes = Bytes::from(buf);
        let key = ApiKey::try_from(i16::from_be_bytes([bytes[0], bytes[1]])).unwrap();
        let version = i16::from_be_bytes([bytes[2], bytes[3]]);
        let header =
            RequestHeader::decode(&mut bytes, key.request_header_version(version)).unwrap();
        let body = if key == ApiKey::ApiVersions {
            let advertised = versions
                .iter()
                .find(|v| v.0 == ApiKey::ApiVersions)
                .map_or(3, |v| v.2);
            let mut r = ApiVersionsResponse::default().with_api_keys(
                versions
                    .iter()
                    .map(|(k, min, max)| {
                        ApiVersion::default()
                            .with_api_key(*k as i16)
                            .with_min_version(*min)
                            .with_max_version(*max)
                    })
                    .collect(),
            );
            // A node that does not speak this version answers UNSUPPORTED_VERSION in a
            // v0 body, as Kafka does.
            let answered = if version > advertised {
                r.error_code = ErrorCode::UNSUPPORTED_VERSION.code();
                0
            } else {
                version
            };
            let mut out = BytesMut::new();
            r.encode(&mut out, answered).unwrap();
            Some(out)
        } else {
            handler(key, version, &mut bytes)
        };
        let Some(body) = body else {
            std::thread::sleep(Duration::from_secs(60));
            return;
        };
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, key.response_header_version(version))
            .unwrap();
        out.extend_from_slice(&body);
        conn.write_all(&(out.len() as i32).to_be_bytes()).unwrap();
        conn.write_all(&out).unwrap();
    }
}

/// A Metadata answer naming `brokers` (`(node id, address)`) and topic `t` with one
/// partition led by `leader` at `epoch`.
pub(super) fn metadata(version: i16, brokers: &[(i32, &str)], leader: i32, epoch: i32) -> BytesMut {
    let r = MetadataResponse::default()
        .with_brokers(
            brokers
                .iter()
                .map(|(id, addr)| {
                    let (host, port) = addr.rsplit_once(':').unwrap();
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(*id))
                        .with_host(StrBytes::from_string(host.into()))
                        .with_port(port.parse().unwrap())
                })
                .collect(),
        )
        .with_topics(vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![
                    MetadataResponsePartition::default()
                        .with_partition_index(0)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let mut out = BytesMut::new();
    r.encode(&mut out, version).unwrap();
    out
}

pub(super) fn produce_answer(version: i16, code: i16, base_offset: i64) -> BytesMut {
    let r = ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_error_code(code)
                    .with_base_offset(base_offset),
            ]),
    ]);
    let mut out = BytesMut::new();
    r.encode(&mut out, version).unwrap();
    out
}

#[test]
fn picks_the_highest_version_both_sides_speak() {
    let versions = vec![
        (ApiKey::ApiVersions, 0, 2),
        (ApiKey::Metadata, 0, 5),
        (ApiKey::Produce, 3, 7),
    ];
    let addr_cell: Arc<Mutex<String>> = Arc::default();
    let seen: Arc<Mutex<Vec<(ApiKey, i16)>>> = Arc::default();
    let handler: Arc<Handler> = {
        let (addr_cell, seen) = (addr_cell.clone(), seen.clone());
        Arc::new(move |key, version, _body| {
            seen.lock().unwrap().push((key, version));
            let addr = addr_cell.lock().unwrap().clone();
            match key {
                ApiKey::Metadata => Some(metadata(version, &[(1, &addr)], 1, 0)),
                ApiKey::Produce => Some(produce_answer(version, 0, 7)),
                _ => None,
            }
        })
    };
    let addr = scripted_node(versions, handler);
    *addr_cell.lock().unwrap() = addr.clone();
    // The node answers ApiVersions up to v2: the client's v3 gets UNSUPPORTED_VERSION
    // and it asks again in v0.
    let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
    assert_eq!(
        cluster
            .negotiated::<MetadataRequest>(&addr, 1..=12)
            .unwrap(),
        5
    );
    assert_eq!(
        cluster.negotiated::<ProduceRequest>(&addr, 3..=12).unwrap(),
        7
    );
    assert_eq!(
        cluster.produce("t", 0, &batch(&["a"]), -1, None).unwrap().0,
        7
    );
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains(&(ApiKey::Metadata, 5)), "{seen:?}");
    assert!(seen.contains(&(ApiKey::Produce, 7)), "{seen:?}");
    match cluster.negotiated::<FetchRequest>(&addr, 4..=12) {
        Err(Error::UnsupportedApi { broker, api, .. }) => {
            assert_eq!((broker.as_str(), api.as_str()), (addr.as_str(), "Fetch"));
        }
        other => panic!("{other:?}"),
    }
    let err = cluster
        .fetch(
            "t",
            0,
            0,
            1024,
            Duration::from_millis(0),
            IsolationLevel::ReadUncommitted,
        )
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedApi { .. }), "{err}");
}

/// The `(key, version)` of each request a scripted node answered.
type Seen = Arc<Mutex<Vec<(ApiKey, i16)>>>;

/// A scripted node that answers CreateTopics, DeleteTopics and CreatePartitions (each
/// naming the topics its request named, as decoded in the version it came in) within
/// the versions `topic_apis` gives: `(key, min, max)` for each. Returns its address and
/// the `(key, version)` of every topic request it answered.
fn topic_admin_node(topic_apis: [(ApiKey, i16, i16); 3]) -> (String, Seen) {
    use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    use kafka_protocol::messages::{
        CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
        CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    };
    let mut versions = vec![(ApiKey::ApiVersions, 0, 3), (ApiKey::Metadata, 0, 12)];
    versions.extend(topic_apis);
    let addr_cell: Arc<Mutex<String>> = Arc::default();
    let seen: Seen = Arc::default();
    let handler: Arc<Handler> = {
        let (addr_cell, seen) = (addr_cell.clone(), seen.clone());
        Arc::new(move |key, version, body| {
            let mut out = BytesMut::new();
            match key {
                ApiKey::Metadata => {
                    let addr = addr_cell.lock().unwrap().clone();
                    return Some(metadata(version, &[(1, &addr)], 1, 0));
                }
                ApiKey::CreateTopics => {
                    let request = CreateTopicsRequest::decode(body, version).unwrap();
                    let topics = request
                        .topics
                        .into_iter()
                        .map(|t| CreatableTopicResult::default().with_name(t.name));
                    CreateTopicsResponse::default()
                        .with_topics(topics.collect())
                        .encode(&mut out, version)
                        .unwrap();
                }
                ApiKey::DeleteTopics => {
                    let request = DeleteTopicsRequest::decode(body, version).unwrap();
                    let names = request.topic_names.into_iter().map(Some);
                    let names = names.chain(request.topics.into_iter().map(|t| t.name));
                    let results = names.map(|n| DeletableTopicResult::default().with_name(n));
                    DeleteTopicsResponse::default()
                        .with_responses(results.collect())
                        .encode(&mut out, version)
                        .unwrap();
                }
                ApiKey::CreatePartitions => {
                    let request = CreatePartitionsRequest::decode(body, version).unwrap();
                    let results = request
                        .topics
                        .into_iter()
                        .map(|t| CreatePartitionsTopicResult::default().with_name(t.name));
                    CreatePartitionsResponse::default()
                        .with_results(results.collect())
                        .encode(&mut out, version)
                        .unwrap();
                }
                _ => return None,
            }
            seen.lock().unwrap().push((key, version));
            Some(out)
        })
    };
    let addr = scripted_node(versions, handler);
    *addr_cell.lock().unwrap() = addr.clone();
    (addr, seen)
}

#[test]
fn topic_admin_calls_go_in_the_highest_version_both_sides_speak() {
    use crate::TopicAdmin;
    // An older broker: each API answered only below what this client speaks.
    let older = [
        (ApiKey::CreateTopics, 0, 3),
        (ApiKey::DeleteTopics, 0, 2),
        (ApiKey::CreatePartitions, 0, 1),
    ];
    // A newer one: each answered above it.
    let newer = [
        (ApiKey::CreateTopics, 0, 9),
        (ApiKey::DeleteTopics, 0, 9),
        (ApiKey::CreatePartitions, 0, 9),
    ];
    for (apis, expected) in [(older, [3, 2, 1]), (newer, [7, 6, 3])] {
        let (addr, seen) = topic_admin_node(apis);
        let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
        TopicAdmin::create_topic(&cluster, "t", 1, TopicConfig::new()).unwrap();
        TopicAdmin::add_partitions(&cluster, "t", 2).unwrap();
        TopicAdmin::delete_topic(&cluster, "t").unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                (ApiKey::CreateTopics, expected[0]),
                (ApiKey::CreatePartitions, expected[2]),
                (ApiKey::DeleteTopics, expected[1]),
            ],
            "{apis:?}"
        );
    }
    // A broker without CreatePartitions: the refusal names the API and the broker.
    let (addr, _) = topic_admin_node([
        (ApiKey::CreateTopics, 0, 3),
        (ApiKey::DeleteTopics, 0, 2),
        (ApiKey::Produce, 3, 7),
    ]);
    let cluster = Cluster::connect(ClientConfig::new(&addr)).unwrap();
    match TopicAdmin::add_partitions(&cluster, "t", 2) {
        Err(Error::UnsupportedApi { broker, api, .. }) => {
            assert_eq!(
                (broker.as_str(), api.as_str()),
                (addr.as_str(), "CreatePartitions")
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Two scripted nodes: node 1 leads partition t-0 at epoch 1 until it is asked to
/// produce, then answers `refusal` and metadata names node 2 at epoch 2.
fn leader_move(refusal: ErrorCode) {
    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
    ];
    let addrs: Arc<Mutex<Vec<String>>> = Arc::default();
    let moved = Arc::new(AtomicUsize::new(0));
    let produced_on_2 = Arc::new(AtomicUsize::new(0));
    let node = |id: i32| -> Arc<Handler> {
        let (addrs, moved, produced_on_2) = (addrs.clone(), moved.clone(), produced_on_2.clone());
        Arc::new(move |key, version, _body| {
            let addrs = addrs.lock().unwrap().clone();
            let brokers = [(1, addrs[0].as_str()), (2, addrs[1].as_str())];
            let leader = if moved.load(Ordering::SeqCst) > 0 {
                (2, 2)
            } else {
                (1, 1)
            };
            match key {
                ApiKey::Metadata => Some(metadata(version, &brokers, leader.0, leader.1)),
                ApiKey::Produce if id == 1 => {
                    moved.fetch_add(1, Ordering::SeqCst);
                    Some(produce_answer(version, refusal.code(), -1))
                }
                ApiKey::Produce => {
                    produced_on_2.fetch_add(1, Ordering::SeqCst);
                    Some(produce_answer(version, 0, 42))
                }
                _ => None,
            }
        })
    };
    let a = scripted_node(versions.clone(), node(1));
    let b = scripted_node(versions, node(2));
    *addrs.lock().unwrap() = vec![a.clone(), b];
    let cluster = Cluster::connect(ClientConfig::new(&a).set("retry.backoff.ms", 10)).unwrap();
    assert_eq!(
        cluster.produce("t", 0, &batch(&["a"]), -1, None).unwrap().0,
        42
    );
    assert_eq!(moved.load(Ordering::SeqCst), 1, "node 1 was asked once");
    assert_eq!(produced_on_2.load(Ordering::SeqCst), 1, "then node 2, once");
}

/// Whether the Metadata request in `body` names topic `t`, and the answer of node 1 at
/// `me` leading `t`-0 ([`metadata`]), without `t` when the request does not name it.
pub(super) fn metadata_naming_t(
    body: &mut Bytes,
    version: i16,
    me: &str,
) -> (bool, MetadataResponse) {
    let request = MetadataRequest::decode(body, version).unwrap();
    let names_t = request
        .topics
        .iter()
        .flatten()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "t"));
    let m = metadata(version, &[(1, me)], 1, 1);
    let mut r = MetadataResponse::decode(&mut m.freeze(), version).unwrap();
    if !names_t {
        r.topics.clear();
    }
    (names_t, r)
}

/// A node whose topic `t` has no leader for its first `electing` Metadata answers
/// naming it (LEADER_NOT_AVAILABLE at the topic, as a just-created topic is answered),
/// then one; counts the Metadata requests naming `t` it was sent.
fn electing_node(electing: usize, asked: Arc<AtomicUsize>) -> String {
    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
    ];
    let addr: Arc<Mutex<String>> = Arc::default();
    let handler: Arc<Handler> = {
        let addr = addr.clone();
        Arc::new(move |key, version, body| {
            let me = addr.lock().unwrap().clone();
            match key {
                ApiKey::Metadata => {
                    let (names_t, mut r) = metadata_naming_t(body, version, &me);
                    if names_t && asked.fetch_add(1, Ordering::SeqCst) < electing {
                        r.topics[0].error_code = ErrorCode::LEADER_NOT_AVAILABLE.code();
                        r.topics[0].partitions.clear();
                    }
                    let mut out = BytesMut::new();
                    r.encode(&mut out, version).unwrap();
                    Some(out)
                }
                ApiKey::Produce => Some(produce_answer(version, 0, 7)),
                _ => None,
            }
        })
    };
    let a = scripted_node(versions, handler);
    *addr.lock().unwrap() = a.clone();
    a
}

#[test]
fn a_topic_whose_leaders_are_being_elected_is_asked_for_again() {
    let asked = Arc::new(AtomicUsize::new(0));
    let node = electing_node(3, asked.clone());
    let cluster = Cluster::connect(ClientConfig::new(&node).set("retry.backoff.ms", 5)).unwrap();
    assert_eq!(cluster.partition_count("t").unwrap(), 1);
    assert_eq!(
        asked.load(Ordering::SeqCst),
        4,
        "three answers without a leader, then one with"
    );
    assert_eq!(
        cluster.produce("t", 0, &batch(&["a"]), -1, None).unwrap().0,
        7
    );
}

#[test]
fn a_topic_that_never_gets_a_leader_fails_after_the_delivery_timeout() {
    let asked = Arc::new(AtomicUsize::new(0));
    let node = electing_node(usize::MAX, asked);
    let cluster = Cluster::connect(
        ClientConfig::new(&node)
            .set("retry.backoff.ms", 5)
            .set("delivery.timeout.ms", 300)
            .set("request.timeout.ms", 200),
    )
    .unwrap();
    let started = Instant::now();
    let err = cluster.partition_count("t").unwrap_err();
    assert!(
        matches!(&err, Error::Api(e) if e.code == ErrorCode::LEADER_NOT_AVAILABLE),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"t\""), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn asks_the_broker_that_answered_last_before_one_that_hangs() {
    let versions = vec![(ApiKey::ApiVersions, 0, 3), (ApiKey::Metadata, 0, 12)];
    let addrs: Arc<Mutex<Vec<String>>> = Arc::default();
    let asked_hung = Arc::new(AtomicUsize::new(0));
    // Node 1 never answers a Metadata (a stopped process); node 2 names both.
    let hung = {
        let asked_hung = asked_hung.clone();
        scripted_node(
            versions.clone(),
            Arc::new(move |_key, _version, _body| {
                asked_hung.fetch_add(1, Ordering::SeqCst);
                None
            }),
        )
    };
    let good = {
        let addrs = addrs.clone();
        scripted_node(
            versions,
            Arc::new(move |key, version, _body| {
                let addrs = addrs.lock().unwrap().clone();
                let brokers = [(1, addrs[0].as_str()), (2, addrs[1].as_str())];
                (key == ApiKey::Metadata).then(|| metadata(version, &brokers, 2, 1))
            }),
        )
    };
    *addrs.lock().unwrap() = vec![hung, good.clone()];
    let cluster =
        Cluster::connect(ClientConfig::new(&good).set("request.timeout.ms", 300)).unwrap();
    assert_eq!(cluster.brokers().len(), 2);
    for _ in 0..3 {
        cluster.invalidate("t");
        assert_eq!(cluster.partition_count("t").unwrap(), 1);
    }
    assert_eq!(
        asked_hung.load(Ordering::SeqCst),
        0,
        "the node that answered was asked again, not the first one known"
    );
}

#[test]
fn follows_a_leader_that_moved_after_not_leader_or_follower() {
    leader_move(ErrorCode::NOT_LEADER_OR_FOLLOWER);
}

#[test]
fn follows_a_leader_that_moved_after_fenced_leader_epoch() {
    leader_move(ErrorCode::FENCED_LEADER_EPOCH);
}

#[test]
fn a_broker_that_never_answers_times_out() {
    let versions = vec![
        (ApiKey::ApiVersions, 0, 3),
        (ApiKey::Metadata, 0, 12),
        (ApiKey::Produce, 3, 12),
    ];
    let addr_cell: Arc<Mutex<String>> = Arc::default();
    let handler: Arc<Handler> = {
        let addr_cell = addr_cell.clone();
        Arc::new(move |key, version, _body| {
            let addr = addr_cell.lock().unwrap().clone();
            (key == ApiKey::Metadata).then(|| metadata(version, &[(1, &addr)], 1, 0))
        })
    };
    let addr = scripted_node(versions, handler);
    *addr_cell.lock().unwrap() = addr.clone();
    let cluster = Cluster::connect(
        ClientConfig::new(&addr)
            .set("request.timeout.ms", 200)
            .set("delivery.timeout.ms", 300)
            .set("retry.backoff.ms", 50),
    )
    .unwrap();
    let started = Instant::now();
    let err = cluster
        .produce("t", 0, &batch(&["a"]), -1, None)
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(err.to_string().contains(&addr), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// `describe_topic` answers with the same [`TopicDescription`](crate::TopicDescription)
/// over the network as in process: name, partitions, offsets, the topic's overrides and
/// the effective settings; sizes and segment counts only in process.
#[test]
fn describe_topic_is_the_same_description_over_the_network() {
    use crate::TopicAdmin;
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, "127.0.0.1:0");
    let cluster = Cluster::connect(ClientConfig::new(server.local_addr().to_string())).unwrap();
    let config = TopicConfig::new().set("retention.ms", "60000");
    TopicAdmin::create_topic(&cluster, "described", 2, config).unwrap();
    cluster
        .produce("described", 1, &batch(&["a", "b", "c"]), -1, None)
        .unwrap();

    let remote = TopicAdmin::describe_topic(&cluster, "described").unwrap();
    let local = TopicAdmin::describe_topic(&broker, "described").unwrap();
    assert_eq!(remote.name, "described");
    assert!(!remote.internal);
    assert_eq!(remote.config.get("retention.ms"), Some("60000"));
    assert_eq!(
        remote.config.get("retention.ms"),
        local.config.get("retention.ms")
    );
    assert_eq!(
        remote.log_config.retention_ms,
        local.log_config.retention_ms
    );
    assert_eq!(remote.partitions.len(), 2);
    for (r, l) in remote.partitions.iter().zip(&local.partitions) {
        assert_eq!(r.partition, l.partition);
        assert_eq!(
            (r.log_start_offset, r.log_end_offset),
            (l.log_start_offset, l.log_end_offset),
            "partition {}",
            r.partition
        );
        assert!(r.leader.is_some(), "a served partition has a leader");
        assert_eq!(r.isr, r.replicas);
        assert_eq!((r.size_bytes, r.segments), (None, None));
        assert!(l.size_bytes.is_some() && l.segments == Some(1));
    }
    assert_eq!(remote.partitions[1].log_end_offset, 3);

    assert_eq!(
        TopicAdmin::topics(&cluster).unwrap(),
        TopicAdmin::topics(&broker).unwrap()
    );
    assert!(matches!(
        TopicAdmin::describe_topic(&cluster, "missing"),
        Err(Error::UnknownTopic(t)) if t == "missing"
    ));
    server.shutdown().unwrap();
}
