//! Produce, Fetch, ListOffsets, Metadata and the admin APIs over a real socket, with
//! requests encoded and responses decoded by `kafka-protocol` (its client side), so the
//! hand-framed Fetch response is checked by an independent decoder.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::*;
use crate::record::{Batch, BatchBuilder, batches};

/// A client connection that speaks through `kafka-protocol`.
pub(crate) struct Client {
    s: TcpStream,
    next: i32,
    client_id: &'static str,
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        Client::connect_as(addr, "unit")
    }

    /// A connection whose requests carry `client_id`.
    pub(crate) fn connect_as(addr: SocketAddr, client_id: &'static str) -> Client {
        Client {
            s: TcpStream::connect(addr).unwrap(),
            next: 0,
            client_id,
        }
    }

    /// Send `req` as `key` v`version` without reading a response.
    pub(crate) fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, req: &R) -> i32 {
        self.next += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.next)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        let mut framed = (buf.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(&buf);
        self.s.write_all(&framed).unwrap();
        self.next
    }

    /// Read one response of type `R` at `version`; its correlation id and body.
    pub(crate) fn recv<R: Decodable + HeaderVersion>(&mut self, version: i16) -> (i32, R) {
        let mut size = [0u8; 4];
        self.s.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.s.read_exact(&mut body).unwrap();
        let mut b = Bytes::from(body);
        let header = ResponseHeader::decode(&mut b, R::header_version(version)).unwrap();
        (header.correlation_id, R::decode(&mut b, version).unwrap())
    }

    /// True if a response (or any byte) is waiting to be read, checked without waiting.
    pub(crate) fn has_pending_bytes(&mut self) -> bool {
        self.s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let got = self.s.peek(&mut b);
        self.s.set_nonblocking(false).unwrap();
        matches!(got, Ok(n) if n > 0)
    }

    /// Send `bytes` as one bare size-prefixed frame (a SASL token after a v0
    /// handshake).
    pub(crate) fn raw_send(&mut self, bytes: &[u8]) {
        let mut framed = (bytes.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(bytes);
        self.s.write_all(&framed).unwrap();
    }

    /// [`Client::raw_send`], then read one bare frame back.
    pub(crate) fn raw_call(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.raw_send(bytes);
        let mut size = [0u8; 4];
        self.s.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.s.read_exact(&mut body).unwrap();
        body
    }

    /// True once the server closed the connection (a read sees the end or an error).
    pub(crate) fn is_closed(&mut self) -> bool {
        self.s
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        matches!(self.s.read(&mut buf), Ok(0) | Err(_))
    }

    /// Send and receive.
    pub(crate) fn call<Q: Encodable, R: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Q,
    ) -> R {
        let corr = self.send(key, version, req);
        let (got, resp) = self.recv(version);
        assert_eq!(got, corr);
        resp
    }
}

pub(crate) fn start(dir: &std::path::Path) -> ServerHandle {
    Server::builder(crate::broker::Broker::open(dir).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap()
}

pub(crate) fn create(c: &mut Client, topic: &str, partitions: i32) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_num_partitions(partitions)
                .with_replication_factor(1),
        ]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
}

pub(crate) fn batch(values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for v in values {
        b.push(1_700_000_000_000, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

fn idempotent_batch(pid: i64, seq: i32, values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(pid, 0, seq);
    for v in values {
        b.push(1_700_000_000_000, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

pub(crate) fn produce_req(acks: i16, parts: Vec<(&str, i32, Vec<u8>)>) -> ProduceRequest {
    let topics = parts
        .into_iter()
        .map(|(t, p, bytes)| {
            produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(t.into())))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(p)
                        .with_records(Some(Bytes::from(bytes))),
                ])
        })
        .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
        .with_topic_data(topics)
}

fn produce(
    c: &mut Client,
    topic: &str,
    p: i32,
    bytes: Vec<u8>,
) -> produce_response::PartitionProduceResponse {
    let resp: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &produce_req(-1, vec![(topic, p, bytes)]),
    );
    resp.responses[0].partition_responses[0].clone()
}

fn fetch_req(
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    parts: &[(&str, i32, i64, i32)],
) -> FetchRequest {
    let topics = parts
        .iter()
        .map(|&(t, p, offset, pmax)| {
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(t.into())))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(pmax),
                ])
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(max_bytes)
        .with_topics(topics)
}

/// Values of every record in a Fetch partition's records.
fn values(records: &Option<Bytes>) -> Vec<(i64, String)> {
    let Some(bytes) = records else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for b in batches(bytes) {
        let b: Batch<'_> = b.unwrap();
        for r in b.records() {
            let r = r.unwrap();
            out.push((
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn produce_then_fetch_every_version_through_sendfile() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "events", 1);
    // Records large enough for sendfile (smaller slices are copied into the response).
    let (a, b, cc) = ("a".repeat(9000), "b".repeat(9000), "c".repeat(100));
    let r = produce(&mut c, "events", 0, batch(&[&a, &b]));
    assert_eq!((r.error_code, r.base_offset), (0, 0));
    let r = produce(&mut c, "events", 0, batch(&[&cc]));
    assert_eq!((r.error_code, r.base_offset), (0, 2));

    // From v13 topics are named by id, and answered by id.
    let id = uuid::Uuid::from_bytes(topic_ids(&mut c, &["events"])[0].1);
    for version in 4..=15 {
        let before = sendfile_bytes_sent();
        let mut req = fetch_req(0, 0, 1 << 20, &[("events", 0, 1, 1 << 20)]);
        req.topics[0].topic_id = id;
        let resp: FetchResponse = c.call(ApiKey::Fetch, version, &req);
        if version >= 13 {
            assert_eq!(resp.responses[0].topic_id, id, "v{version}");
        } else {
            assert_eq!(resp.responses[0].topic.0.as_str(), "events", "v{version}");
        }
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 3);
        // Whole batches from the one containing offset 1: the first batch again.
        assert_eq!(
            values(&p.records),
            vec![(0, a.clone()), (1, b.clone()), (2, cc.clone())],
            "v{version}"
        );
        let sent = p.records.as_ref().unwrap().len() as u64;
        assert!(
            sent >= 16 * 1024,
            "records under 16 KiB are copied, not sent with sendfile"
        );
        // The server thread counts after the kernel took the bytes; one more round trip
        // on the same connection orders that count before this check.
        let _: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
        assert!(
            sendfile_bytes_sent() >= before + sent,
            "v{version}: fetch did not use sendfile"
        );
    }
    // An id no topic has: UNKNOWN_TOPIC_ID, answered under that id.
    let unknown = uuid::Uuid::from_bytes([7; 16]);
    let mut req = fetch_req(0, 0, 1 << 20, &[("events", 0, 0, 1 << 20)]);
    req.topics[0].topic_id = unknown;
    let resp: FetchResponse = c.call(ApiKey::Fetch, 13, &req);
    assert_eq!(resp.responses[0].topic_id, unknown);
    assert_eq!(resp.responses[0].partitions[0].error_code, 100);
}

#[test]
fn a_consumer_fetch_is_capped_by_fetch_max_bytes_but_gets_a_whole_first_batch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let capped = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .fetch_max_bytes(250_000)
        .start()
        .unwrap();
    let uncapped = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .fetch_max_bytes(usize::MAX)
        .start()
        .unwrap();
    let mut c = Client::connect(capped.local_addr());
    create(&mut c, "big", 1);
    // Three batches of about 100 KB, then one of about 300 KB (above the cap).
    let stored: Vec<String> = (0..4u8)
        .map(|i| {
            char::from(b'p' + i)
                .to_string()
                .repeat(if i == 3 { 300_000 } else { 100_000 })
        })
        .collect();
    for (i, v) in stored.iter().enumerate() {
        let r = produce(&mut c, "big", 0, batch(&[v]));
        assert_eq!((r.error_code, r.base_offset), (0, i as i64));
    }
    let fetch = |c: &mut Client, offset: i64| -> Vec<(i64, String)> {
        let resp: FetchResponse = c.call(
            ApiKey::Fetch,
            11,
            &fetch_req(0, 1, 8 << 20, &[("big", 0, offset, 8 << 20)]),
        );
        let p = &resp.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 4));
        values(&p.records)
    };
    let offsets = |got: Vec<(i64, String)>| -> Vec<i64> {
        for (o, v) in &got {
            assert_eq!(v, &stored[*o as usize], "offset {o}");
        }
        got.into_iter().map(|(o, _)| o).collect()
    };
    // 8 MiB asked, 250,000 bytes served: the two batches that fit, then the next two.
    assert_eq!(offsets(fetch(&mut c, 0)), vec![0, 1]);
    assert_eq!(offsets(fetch(&mut c, 2)), vec![2]);
    // A batch larger than the cap still comes whole (the first partition's first batch).
    assert_eq!(offsets(fetch(&mut c, 3)), vec![3]);
    // Without the cap the client's 8 MiB hold everything.
    let mut c = Client::connect(uncapped.local_addr());
    assert_eq!(offsets(fetch(&mut c, 0)), vec![0, 1, 2, 3]);
}

#[test]
fn fetch_out_of_range_reports_the_valid_range() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "t", 1);
    produce(&mut c, "t", 0, batch(&["x"]));
    let resp: FetchResponse = c.call(
        ApiKey::Fetch,
        11,
        &fetch_req(0, 0, 1 << 20, &[("t", 0, 5, 1 << 20)]),
    );
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 1);
    assert_eq!((p.log_start_offset, p.high_watermark), (0, 1));
    let resp: FetchResponse = c.call(
        ApiKey::Fetch,
        11,
        &fetch_req(0, 0, 1 << 20, &[("nope", 0, 0, 1 << 20)]),
    );
    assert_eq!(resp.responses[0].partitions[0].error_code, 3);
}

#[test]
fn max_bytes_is_honoured_but_the_first_batch_always_comes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "a", 1);
    create(&mut c, "b", 1);
    let big = "x".repeat(5000);
    produce(&mut c, "a", 0, batch(&[&big]));
    produce(&mut c, "a", 0, batch(&["small"]));
    produce(&mut c, "b", 0, batch(&["other"]));
    let resp: FetchResponse = c.call(
        ApiKey::Fetch,
        11,
        &fetch_req(0, 0, 100, &[("a", 0, 0, 100), ("b", 0, 0, 100)]),
    );
    let a = &resp.responses[0].partitions[0];
    assert_eq!(
        values(&a.records).len(),
        1,
        "exactly the first (oversized) batch"
    );
    assert!(values(&resp.responses[1].partitions[0].records).is_empty());
}

#[test]
fn a_long_poll_returns_when_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    create(&mut c, "lp", 2);
    for parts in [
        vec![("lp", 0, 0, 1 << 20)],
        vec![("lp", 0, 0, 1 << 20), ("lp", 1, 0, 1 << 20)],
    ] {
        let n = parts.len() as i32;
        let corr = c.send(ApiKey::Fetch, 11, &fetch_req(60_000, 1, 1 << 20, &parts));
        let producer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let mut p = Client::connect(addr);
            produce(&mut p, "lp", n - 1, batch(&["late"]));
        });
        let (got, resp): (i32, FetchResponse) = c.recv(11);
        producer.join().unwrap();
        assert_eq!(got, corr);
        let found: Vec<_> = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .flat_map(|p| values(&p.records))
            .collect();
        assert_eq!(found, vec![(0, "late".to_string())]);
    }
}

#[test]
fn bad_batches_fail_only_their_partition_and_acks_zero_gets_no_response() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "t", 2);
    let mut corrupt = batch(&["bad"]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let resp: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &produce_req(
            1,
            vec![
                ("t", 0, corrupt),
                ("t", 1, batch(&["good"])),
                ("missing", 0, batch(&["x"])),
            ],
        ),
    );
    let codes: Vec<i16> = resp
        .responses
        .iter()
        .map(|t| t.partition_responses[0].error_code)
        .collect();
    assert_eq!(codes, vec![2, 0, 3]);
    assert_eq!(
        produce(&mut c, "__consumer_offsets", 0, batch(&["x"])).error_code,
        17
    );
    // A batch claiming more bytes than it has is corrupt too.
    let mut short = batch(&["short"]);
    short.truncate(40);
    assert_eq!(produce(&mut c, "t", 0, short).error_code, 2);

    // acks = 0: nothing comes back; the next response is the next request's.
    c.send(
        ApiKey::Produce,
        8,
        &produce_req(0, vec![("t", 0, batch(&["quiet"]))]),
    );
    let corr = c.send(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    let (got, _): (i32, ApiVersionsResponse) = c.recv(0);
    assert_eq!(got, corr);
    let resp: ListOffsetsResponse = c.call(
        ApiKey::ListOffsets,
        5,
        &ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![
                        list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1),
                        list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-2),
                        list_offsets_request::ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(1_600_000_000_000),
                    ]),
            ]),
    );
    let offsets: Vec<i64> = resp.topics[0].partitions.iter().map(|p| p.offset).collect();
    assert_eq!(offsets, vec![1, 0, 0], "the acks=0 batch landed");
}

#[test]
fn idempotent_retries_land_once_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let pid;
    {
        let server = start(dir.path());
        let mut c = Client::connect(server.local_addr());
        create(&mut c, "idem", 1);
        let resp: InitProducerIdResponse = c.call(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        );
        assert_eq!(resp.error_code, 0);
        pid = resp.producer_id.0;
        assert_eq!(
            produce(&mut c, "idem", 0, idempotent_batch(pid, 0, &["a", "b"])).base_offset,
            0
        );
        // The retry of the same batch lands once, answered with the original offset.
        let r = produce(&mut c, "idem", 0, idempotent_batch(pid, 0, &["a", "b"]));
        assert_eq!((r.error_code, r.base_offset), (0, 0));
        assert_eq!(
            produce(&mut c, "idem", 0, idempotent_batch(pid, 2, &["c"])).base_offset,
            2
        );
        assert_eq!(
            produce(&mut c, "idem", 0, idempotent_batch(pid, 9, &["gap"])).error_code,
            45
        );
        server.shutdown().unwrap();
    }
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    let r = produce(&mut c, "idem", 0, idempotent_batch(pid, 2, &["c"]));
    assert_eq!(
        (r.error_code, r.base_offset),
        (0, 2),
        "duplicate after restart"
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, 1, &["b"])).error_code,
        46
    );
    assert_eq!(
        produce(&mut c, "idem", 0, idempotent_batch(pid, 3, &["d"])).base_offset,
        3
    );
    let resp: InitProducerIdResponse =
        c.call(ApiKey::InitProducerId, 0, &InitProducerIdRequest::default());
    assert!(
        resp.producer_id.0 > pid,
        "producer ids are not reused after a restart"
    );
}

#[test]
fn metadata_creates_topics_and_advertises_a_reachable_address() {
    let dir = tempfile::tempdir().unwrap();
    // The server keeps the broker's auto-creation setting.
    let broker = crate::broker::Broker::builder(dir.path())
        .auto_create_topics(true)
        .open()
        .unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .advertised("broker.example:19092")
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("auto")))),
        ]))
        .with_allow_auto_topic_creation(true);
    for version in [1i16, 4, 8] {
        let resp: MetadataResponse = c.call(ApiKey::Metadata, version, &req);
        assert_eq!(resp.brokers[0].host.as_str(), "broker.example");
        assert_eq!(resp.brokers[0].port, 19092);
        assert_eq!(resp.controller_id.0, 0);
        assert_eq!(resp.topics[0].error_code, 0, "v{version}");
        assert_eq!(resp.topics[0].partitions.len(), 1);
    }
    let no_create = req
        .clone()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("other")))),
        ]));
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 8, &no_create);
    assert_eq!(resp.topics[0].error_code, 3);
    let all: MetadataResponse = c.call(
        ApiKey::Metadata,
        0,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    let names: Vec<_> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect();
    assert_eq!(
        names,
        vec!["__consumer_offsets".to_string(), "auto".to_string()]
    );
    let all: MetadataResponse = c.call(
        ApiKey::Metadata,
        1,
        &MetadataRequest::default().with_topics(None),
    );
    assert!(all.topics[0].is_internal && !all.topics[1].is_internal);
}

/// Metadata v12 of `topics` by name: each topic's error code and id.
pub(super) fn topic_ids(c: &mut Client, topics: &[&'static str]) -> Vec<(i16, [u8; 16])> {
    let req = MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| {
                metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str(t))))
            })
            .collect(),
    ));
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    resp.topics
        .iter()
        .map(|t| (t.error_code, *t.topic_id.as_bytes()))
        .collect()
}

#[test]
fn metadata_gives_each_incarnation_of_a_topic_its_own_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "twice", 2);
    let [(0, first)] = topic_ids(&mut c, &["twice"])[..] else {
        panic!("no id for the topic");
    };
    assert_ne!(first, [0; 16]);
    // Asked for by id (v12): the same topic; an id no topic has is UNKNOWN_TOPIC_ID.
    let by_id = |id: [u8; 16]| {
        MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(id.to_vec().try_into().unwrap()),
        ]))
    };
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &by_id(first));
    assert_eq!(resp.topics[0].name.as_ref().unwrap().as_str(), "twice");
    assert_eq!(resp.topics[0].partitions.len(), 2);
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &by_id([9; 16]));
    assert_eq!(resp.topics[0].error_code, 100, "UNKNOWN_TOPIC_ID");

    // Deleted and created again: another id, kept across a restart.
    let resp: DeleteTopicsResponse = c.call(
        ApiKey::DeleteTopics,
        3,
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_static_str("twice"))]),
    );
    assert_eq!(resp.responses[0].error_code, 0);
    create(&mut c, "twice", 1);
    let [(0, second)] = topic_ids(&mut c, &["twice"])[..] else {
        panic!("no id for the topic created again");
    };
    assert_ne!(second, first);
    drop(c);
    server.shutdown().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    assert_eq!(topic_ids(&mut c, &["twice"]), vec![(0, second)]);
}

/// The error code of a Metadata v8 request for `topic` that allows auto-creation.
fn metadata_error(c: &mut Client, topic: &'static str) -> i16 {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str(topic)))),
        ]))
        .with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 8, &req);
    resp.topics[0].error_code
}

#[test]
fn auto_creation_follows_the_broker_unless_the_server_says_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    // Off by default, as for in-process users of the broker; a name string listens.
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(
        metadata_error(&mut c, "typo"),
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert!(broker.topic("typo").is_err());
    drop(c);
    server.shutdown().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen(("127.0.0.1", 0))
        .auto_create_topics(true)
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(metadata_error(&mut c, "fresh"), 0);
    assert_eq!(broker.topic("fresh").unwrap().partition_count(), 1);
}

#[test]
fn an_address_that_does_not_parse_fails_start_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    match Server::builder(broker).listen("127.0.0.1:port").start() {
        Err(crate::error::Error::InvalidConfig { key, reason }) => {
            assert_eq!(key, "listen");
            assert!(reason.contains("\"127.0.0.1:port\""), "{reason}");
        }
        other => panic!("expected InvalidConfig for listen, got {other:?}"),
    }
}

#[test]
fn admin_apis_create_describe_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "adm", 3);
    let creatable = |name: &'static str, replication_factor: i16| {
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(name)))
            .with_num_partitions(1)
            .with_replication_factor(replication_factor)
    };
    let again = CreateTopicsRequest::default()
        .with_topics(vec![creatable("adm-rf3", 3), creatable("adm", 1)]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 2, &again);
    assert_eq!(resp.topics[0].error_code, 38);
    assert_eq!(resp.topics[1].error_code, 36);
    // A name listed twice: INVALID_REQUEST for every copy, as Kafka answers.
    let twice = CreateTopicsRequest::default()
        .with_topics(vec![creatable("adm-twice", 1), creatable("adm-twice", 1)]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 2, &twice);
    assert_eq!(resp.topics[0].error_code, 42);
    assert_eq!(resp.topics[1].error_code, 42);
    // v5+: the created topic's partitions, replication factor and settings.
    let with_config = creatable("adm-v6", 1)
        .with_num_partitions(2)
        .with_configs(vec![
            create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("1000"))),
        ]);
    let req = CreateTopicsRequest::default().with_topics(vec![with_config]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 6, &req);
    let created = &resp.topics[0];
    assert_eq!(created.error_code, 0);
    assert_eq!((created.num_partitions, created.replication_factor), (2, 1));
    let configs = created.configs.as_ref().expect("the topic's settings");
    let find = |name: &str| configs.iter().find(|c| c.name.as_str() == name).unwrap();
    let retention = find("retention.ms");
    assert_eq!(retention.value.as_deref(), Some("1000"));
    assert_eq!(retention.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    let policy = find("cleanup.policy");
    assert_eq!(policy.value.as_deref(), Some("delete"));
    assert_eq!(policy.config_source, 5, "DEFAULT_CONFIG");
    let resp: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        1,
        &DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("adm"))
                .with_configuration_keys(Some(vec![StrBytes::from_static_str("cleanup.policy")])),
        ]),
    );
    let cfg = &resp.results[0];
    assert_eq!(cfg.error_code, 0);
    assert_eq!(cfg.configs.len(), 1);
    assert_eq!(cfg.configs[0].value.as_ref().unwrap().as_str(), "delete");
    let resp: DeleteTopicsResponse = c.call(
        ApiKey::DeleteTopics,
        3,
        &DeleteTopicsRequest::default().with_topic_names(vec![
            TopicName(StrBytes::from_static_str("adm")),
            TopicName(StrBytes::from_static_str("ghost")),
        ]),
    );
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 3]);
}

#[test]
fn a_thousand_concurrent_connections_produce_and_fetch() {
    use std::sync::{Arc, Barrier};
    const CONNS: usize = 1000;
    const PARTITIONS: i32 = 8;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.local_addr();
    create(&mut Client::connect(addr), "load", PARTITIONS);
    // Every client holds its connection open until all of them are connected, then
    // they all produce and fetch at once.
    let barrier = Arc::new(Barrier::new(CONNS));
    let clients: Vec<_> = (0..CONNS)
        .map(|i| {
            let barrier = barrier.clone();
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut c = Client::connect(addr);
                    let _: ApiVersionsResponse =
                        c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
                    barrier.wait();
                    let p = i as i32 % PARTITIONS;
                    let value = format!("client-{i}");
                    let r = produce(&mut c, "load", p, batch(&[&value]));
                    assert_eq!(r.error_code, 0);
                    let resp: FetchResponse = c.call(
                        ApiKey::Fetch,
                        11,
                        &fetch_req(0, 0, 1 << 20, &[("load", p, r.base_offset, 1 << 20)]),
                    );
                    let got = values(&resp.responses[0].partitions[0].records);
                    assert_eq!(got.first(), Some(&(r.base_offset, value)));
                })
                .unwrap()
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // Every record is in the log exactly once.
    let mut total = 0;
    for p in 0..PARTITIONS {
        total += server
            .shared
            .backend
            .partition("load", p)
            .unwrap()
            .high_watermark();
    }
    assert_eq!(total, CONNS as i64);
}

#[test]
fn the_group_apis_answer_every_supported_version() {
    let dir = tempfile::tempdir().unwrap();
    let server = super::tests_groups::start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "g", 2);
    let s = |v: &str| StrBytes::from_string(v.to_string());
    for v in 0..=5i16 {
        let group = format!("group-v{v}");
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![
                join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(Bytes::from_static(b"subscription")),
            ]);
        let mut resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, v, &join);
        if v >= 4 {
            assert_eq!(resp.error_code, 79, "v{v}: MEMBER_ID_REQUIRED first");
            resp = c.call(
                ApiKey::JoinGroup,
                v,
                &join.clone().with_member_id(resp.member_id.clone()),
            );
        }
        assert_eq!(resp.error_code, 0, "JoinGroup v{v}");
        assert_eq!(resp.leader, resp.member_id);
        assert_eq!(resp.members.len(), 1);
        let member = resp.member_id.clone();
        let generation = resp.generation_id;

        let sv = v.min(3);
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_generation_id(generation)
            .with_member_id(member.clone())
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(member.clone())
                    .with_assignment(Bytes::from_static(b"assignment")),
            ]);
        let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, sv, &sync);
        assert_eq!(resp.error_code, 0, "SyncGroup v{sv}");
        assert_eq!(&resp.assignment[..], b"assignment");

        let hb = HeartbeatRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_generation_id(generation)
            .with_member_id(member.clone());
        let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, sv, &hb);
        assert_eq!(resp.error_code, 0, "Heartbeat v{sv}");

        let cv = (v + 2).min(7);
        let commit = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(member.clone())
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("g")))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(1)
                            .with_committed_offset(42),
                    ]),
            ]);
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, cv, &commit);
        assert_eq!(
            resp.topics[0].partitions[0].error_code, 0,
            "OffsetCommit v{cv}"
        );

        let fv = (v + 1).min(5);
        let fetch = OffsetFetchRequest::default()
            .with_group_id(GroupId(s(&group)))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("g")))
                    .with_partition_indexes(vec![0, 1]),
            ]));
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, fv, &fetch);
        let got: Vec<(i32, i64)> = resp.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset))
            .collect();
        assert_eq!(got, vec![(0, -1), (1, 42)], "OffsetFetch v{fv}");

        let leave = if sv >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s(&group)))
                .with_members(vec![
                    leave_group_request::MemberIdentity::default().with_member_id(member),
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(s(&group)))
                .with_member_id(member)
        };
        let resp: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, sv, &leave);
        assert_eq!(resp.error_code, 0, "LeaveGroup v{sv}");
        let resp: FindCoordinatorResponse = c.call(
            ApiKey::FindCoordinator,
            sv.min(2),
            &FindCoordinatorRequest::default().with_key(s(&group)),
        );
        assert_eq!(
            (resp.error_code, resp.port),
            (0, i32::from(server.local_addr().port()))
        );
    }
}

/// A broker with `topic` (of `partitions` partitions) in `dir`, served on a free port.
fn serve_topic(
    dir: &std::path::Path,
    topic: &str,
    partitions: i32,
) -> (crate::broker::Broker, ServerHandle) {
    let broker = crate::broker::Broker::open(dir).unwrap();
    broker
        .create_topic(topic, partitions, crate::config::TopicConfig::new())
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (broker, server)
}

#[test]
fn an_in_process_append_ends_a_network_long_poll() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(dir.path(), "mixed", 3);
    let mut c = Client::connect(server.local_addr());
    let parts = [
        ("mixed", 0, 0, 1 << 20),
        ("mixed", 1, 0, 1 << 20),
        ("mixed", 2, 0, 1 << 20),
    ];
    c.send(ApiKey::Fetch, 11, &fetch_req(60_000, 1, 1 << 20, &parts));
    let appender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let p = broker.topic("mixed").unwrap().partition(2).unwrap();
        p.append_batch(&batch(&["from inside"])).unwrap();
    });
    let (_, resp): (i32, FetchResponse) = c.recv(11);
    appender.join().unwrap();
    assert_eq!(
        values(&resp.responses[2].partitions[0].records),
        vec![(0, "from inside".to_string())]
    );
}

#[test]
fn an_append_straight_into_the_partition_log_ends_a_network_long_poll() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(dir.path(), "direct", 1);
    let mut c = Client::connect(server.local_addr());
    // A poll far longer than the test: only a wake-up answers it in time.
    c.s.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    c.send(
        ApiKey::Fetch,
        11,
        &fetch_req(600_000, 1, 1 << 20, &[("direct", 0, 0, 1 << 20)]),
    );
    let appender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let log = broker.topic("direct").unwrap().partition(0).unwrap();
        // Not through the partition: through its log, as a replica fetcher appends.
        log.log().append(&batch(&["into the log"])).unwrap();
    });
    let (_, resp): (i32, FetchResponse) = c.recv(11);
    appender.join().unwrap();
    assert_eq!(
        values(&resp.responses[0].partitions[0].records),
        vec![(0, "into the log".to_string())]
    );
}

#[test]
fn shutdown_lets_an_in_flight_long_poll_finish_with_its_response() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "sd", 1);
    // Shut down once the server is inside the long poll (the CreateTopics before it
    // counts as in flight until its response is written, so wait for that to end first).
    let shared = server.shared.clone();
    let in_flight = || shared.in_flight.load(std::sync::atomic::Ordering::Acquire);
    while in_flight() != 0 {
        std::thread::yield_now();
    }
    let corr = c.send(
        ApiKey::Fetch,
        11,
        &fetch_req(i32::MAX, 1, 1 << 20, &[("sd", 0, 0, 1 << 20)]),
    );
    while in_flight() == 0 {
        std::thread::yield_now();
    }
    server.shutdown().unwrap();
    let (got, resp): (i32, FetchResponse) = c.recv(11);
    assert_eq!(got, corr);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
}

#[test]
fn a_batch_above_max_message_bytes_is_message_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    broker
        .create_topic(
            "small",
            1,
            crate::config::TopicConfig::new().max_message_bytes(1000),
        )
        .unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let big = "y".repeat(5000);
    assert_eq!(produce(&mut c, "small", 0, batch(&[&big])).error_code, 10);
    assert_eq!(produce(&mut c, "small", 0, batch(&["fits"])).error_code, 0);
}

#[test]
fn a_new_leaders_uncommitted_offsets_fetch_empty_and_list_offsets_answers_not_available() {
    // A new leader's high watermark (0, what it knew as a follower) lags records it has
    // (0..3) that an earlier leader's consumers may have read: a fetch there waits
    // (empty, no error) and ListOffsets latest is OFFSET_NOT_AVAILABLE (KIP-207) until
    // the high watermark reaches the start of the leader's epoch (3).
    const OFFSET_OUT_OF_RANGE: i16 = 1;
    const OFFSET_NOT_AVAILABLE: i16 = 78;
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(dir.path(), "moved", 1);
    let p = broker.topic("moved").unwrap().partition(0).unwrap();
    p.become_follower(2, 0);
    p.log().append(&batch(&["a", "b", "c"])).unwrap();
    let lead = |epoch: i32| {
        p.become_leader(
            1,
            epoch,
            epoch,
            vec![1, 2],
            vec![1, 2],
            1,
            Duration::from_secs(30),
            0,
            std::time::Instant::now(),
        )
        .unwrap()
    };
    lead(2);
    assert_eq!((p.high_watermark(), p.log_end_offset()), (0, 3));
    let mut c = Client::connect(server.local_addr());
    let fetch_code = |c: &mut Client, offset: i64| {
        let resp: FetchResponse = c.call(
            ApiKey::Fetch,
            11,
            &fetch_req(0, 1, 1 << 20, &[("moved", 0, offset, 1 << 20)]),
        );
        let part = &resp.responses[0].partitions[0];
        (part.error_code, values(&part.records).len())
    };
    assert_eq!(
        fetch_code(&mut c, 2),
        (0, 0),
        "below the log end: nothing yet"
    );
    assert_eq!(fetch_code(&mut c, 3), (0, 0), "at the log end: nothing yet");
    assert_eq!(
        fetch_code(&mut c, 4).0,
        OFFSET_OUT_OF_RANGE,
        "past the log end"
    );
    let latest = |c: &mut Client| {
        let resp: ListOffsetsResponse = c.call(
            ApiKey::ListOffsets,
            5,
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("moved")))
                        .with_partitions(vec![
                            list_offsets_request::ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(-1),
                        ]),
                ]),
        );
        let part = &resp.topics[0].partitions[0];
        (part.error_code, part.offset)
    };
    assert_eq!(latest(&mut c).0, OFFSET_NOT_AVAILABLE);
    // Once the high watermark reaches the epoch's start, both answer as usual.
    p.log().set_high_watermark(3);
    assert_eq!(latest(&mut c), (0, 3));
    assert_eq!(fetch_code(&mut c, 0), (0, 3));
}

/// ListOffsets of `topic`-0 at `timestamp` with `version`: (error, offset, timestamp).
fn list_offset_at(c: &mut Client, version: i16, topic: &str, timestamp: i64) -> (i16, i64, i64) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, version, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

#[test]
fn produce_up_to_v11_and_list_offsets_v7_to_v9_answer_as_kafka_3_9() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "lo", 1);
    // An empty log has no largest timestamp.
    assert_eq!(list_offset_at(&mut c, 7, "lo", -3), (0, -1, -1));
    let mut b = BatchBuilder::new();
    const T: i64 = 1_800_000_000_000; // after `batch`'s timestamps
    for ts in [T + 100, T + 300, T + 200] {
        b.push(ts, None, Some(b"v"), &[]);
    }
    for (version, bytes) in [(9, b.finish()), (10, batch(&["x"])), (11, batch(&["y"]))] {
        let resp: ProduceResponse = c.call(
            ApiKey::Produce,
            version,
            &produce_req(-1, vec![("lo", 0, bytes)]),
        );
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "Produce v{version}: {p:?}");
    }
    // The record with the largest timestamp (-3), the earliest local offset (-4), the
    // latest tiered one (-5: nothing is tiered).
    assert_eq!(list_offset_at(&mut c, 7, "lo", -3), (0, 1, T + 300));
    assert_eq!(list_offset_at(&mut c, 8, "lo", -4).1, 0);
    assert_eq!(list_offset_at(&mut c, 9, "lo", -5).1, -1);
    assert_eq!(list_offset_at(&mut c, 9, "lo", -1).1, 5);
    assert_eq!(list_offset_at(&mut c, 6, "lo", T + 250), (0, 1, T + 300));
}

#[test]
fn acks_all_answers_ready_at_once_stay_in_order_behind_one_waiting_for_an_fsync() {
    // On one node an `acks=all` Produce whose append moved the high watermark is
    // answered at once by the connection's thread; one to a `durable.acks` topic waits
    // for its fsync on the connection's writer. Pipelined, every answer still comes in
    // the order of the requests, each with its own offsets.
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    broker
        .create_topic("plain", 1, crate::config::TopicConfig::new())
        .unwrap();
    broker
        .create_topic(
            "durable",
            1,
            crate::config::TopicConfig::new().set("durable.acks", "true"),
        )
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let mut sent = Vec::new();
    for round in 0..20 {
        for topic in ["durable", "plain", "plain"] {
            let value = format!("{topic}-{round}");
            let req = produce_req(-1, vec![(topic, 0, batch(&[&value]))]);
            sent.push((c.send(ApiKey::Produce, 9, &req), topic));
        }
    }
    let mut next = std::collections::HashMap::new();
    for (correlation_id, topic) in sent {
        let (got, resp): (i32, ProduceResponse) = c.recv(9);
        assert_eq!(got, correlation_id, "answers out of order");
        let t = &resp.responses[0];
        assert_eq!(t.name.0.as_str(), topic);
        let p = &t.partition_responses[0];
        assert_eq!(p.error_code, 0, "{topic}: {:?}", p.error_message);
        let expected = next.entry(topic).or_insert(0i64);
        assert_eq!(p.base_offset, *expected, "{topic}");
        *expected += 1;
    }
    assert_eq!(next.get("plain"), Some(&40));
    assert_eq!(next.get("durable"), Some(&20));
}
