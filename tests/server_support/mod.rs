//! Helpers shared by the `server_*` tests: requests encoded with `kafka-protocol`, and
//! the test process's own threads, descriptors and memory read from `/proc/self`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, ProduceRequest, RequestHeader, TopicName, fetch_request,
    produce_request,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// `req` as a size-prefixed `key` v`version` request with correlation id `corr`.
pub fn frame<R: Encodable>(key: ApiKey, version: i16, corr: i32, req: &R) -> Vec<u8> {
    frame_as("test", key, version, corr, req)
}

/// [`frame`] sent as client id `client`.
pub fn frame_as<R: Encodable>(
    client: &str,
    key: ApiKey,
    version: i16,
    corr: i32,
    req: &R,
) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(corr)
        .with_client_id(Some(StrBytes::from_string(client.into())));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    req.encode(&mut buf, version).unwrap();
    let mut framed = (buf.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&buf);
    framed
}

/// A Produce v8 request (acks=1) of `batch` to `topic` partition `partition` from
/// `client`, framed with correlation id `corr`.
pub fn produce_as(
    client: &str,
    topic: &str,
    partition: i32,
    batch: &bytes::Bytes,
    corr: i32,
) -> Vec<u8> {
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch.clone())),
                ]),
        ]);
    frame_as(client, ApiKey::Produce, 8, corr, &req)
}

/// A Fetch of partition 0 of `topic` from offset 0 that waits up to `max_wait_ms` for
/// one byte.
pub fn fetch(topic: &str, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// An ApiVersions v0 request (header and no body), size-prefixed.
pub fn api_versions(corr: i32) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&18i16.to_be_bytes());
    msg.extend_from_slice(&0i16.to_be_bytes());
    msg.extend_from_slice(&corr.to_be_bytes());
    msg.extend_from_slice(&(-1i16).to_be_bytes());
    let mut out = (msg.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&msg);
    out
}

/// Reads one response frame; its correlation id and the rest of its bytes.
pub fn response(s: &mut TcpStream) -> std::io::Result<(i32, Vec<u8>)> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body)?;
    let corr = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    Ok((corr, body.split_off(4)))
}

/// Sends `req` as `key` v`version` on `s` and decodes the response of type `R` at that
/// version (its correlation id checked).
pub fn call<Q: Encodable, R: Decodable + HeaderVersion>(
    s: &mut TcpStream,
    key: ApiKey,
    version: i16,
    req: &Q,
) -> R {
    const CORRELATION_ID: i32 = 7;
    s.write_all(&frame(key, version, CORRELATION_ID, req))
        .unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    let mut body = bytes::Bytes::from(body);
    let header =
        kafka_protocol::messages::ResponseHeader::decode(&mut body, R::header_version(version))
            .unwrap();
    assert_eq!(header.correlation_id, CORRELATION_ID);
    R::decode(&mut body, version).unwrap()
}

/// True if the server answers an ApiVersions request on a new connection.
pub fn answers(addr: std::net::SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&api_versions(99)).is_ok() && matches!(response(&mut s), Ok((99, _)))
}

/// Threads of this process.
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Open descriptors of this process (less the one that lists them).
pub fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count() - 1
}

/// Resident memory of this process, in bytes.
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmRSS value");
    kb * 1024
}

/// Polls `cond` every 20 ms for up to `limit`; whether it became true.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Produces `values` to `partition` of `topic` with acks=all on whichever node of
/// `addrs` leads it, retrying (at most 30 s) while the partition has no leader yet.
pub fn produce_acks_all(addrs: &[String], topic: &str, partition: i32, values: &[&str]) {
    let mut b = tidelog::BatchBuilder::new();
    for v in values {
        b.push(0, None, Some(v.as_bytes()), &[]);
    }
    let batch = bytes::Bytes::from(b.finish());
    let req = kafka_protocol::messages::ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            kafka_protocol::messages::produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![
                    kafka_protocol::messages::produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch)),
                ]),
        ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut codes = Vec::new();
        for addr in addrs {
            let mut s = TcpStream::connect(addr).unwrap();
            let resp: kafka_protocol::messages::ProduceResponse =
                call(&mut s, ApiKey::Produce, 8, &req);
            let code = resp.responses[0].partition_responses[0].error_code;
            if code == 0 {
                return;
            }
            codes.push(code);
        }
        assert!(
            Instant::now() < deadline,
            "produce to {topic}-{partition}: errors {codes:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
