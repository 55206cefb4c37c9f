//! Client quotas on the wire for consumers (KIP-13's `consumer_byte_rate`): a client id
//! over its quota is held near it by Fetch responses held back, each carrying a non-zero
//! `throttle_time_ms`, and never disconnected; another client id fetching from the same
//! server at the same time is not throttled. (The producer's side is
//! `server_client_quotas.rs`; a test binary of its own, so the two rate measurements do
//! not share the machine.)
#![cfg(feature = "server")]

mod server_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName, fetch_request,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use server_support::{frame_as, response};
use tidelog::admin::{AdminClient, QuotaMatch};
use tidelog::security::{CONSUMER_BYTE_RATE, EntityName, QuotaChange, QuotaEntity};
use tidelog::{Broker, Producer, ProducerRecord, Server, TopicConfig};

const QUOTA: f64 = 1_048_576.0;
/// Bytes asked for per Fetch: a sixteenth of the quota per response.
const FETCH_BYTES: i32 = 64 << 10;

/// A Fetch v11 of partition 0 of `topic` from `offset` as `client`.
fn fetch(topic: &str, client: &str, offset: i64, corr: i32) -> Vec<u8> {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(FETCH_BYTES),
                ]),
        ]);
    frame_as(client, ApiKey::Fetch, 11, corr, &req)
}

/// What one client saw: response bytes received in the measured span, the span, the
/// largest `throttle_time_ms`, how many responses carried one, and the requests.
struct Seen {
    measured_bytes: u64,
    measured: Duration,
    max_throttle_ms: i32,
    throttled: u64,
    requests: u64,
}

/// Fetches the topic from its start over and over (back to offset 0 at its end) as
/// `client` for `run`, counting the bytes of the responses received after `warmup`.
fn drive(addr: SocketAddr, client: &str, end: i64, warmup: Duration, run: Duration) -> Seen {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let start = Instant::now();
    let mut seen = Seen {
        measured_bytes: 0,
        measured: Duration::ZERO,
        max_throttle_ms: 0,
        throttled: 0,
        requests: 0,
    };
    let (mut corr, mut offset) = (0, 0);
    // Bounded: at most `run` of fetching (one request at a time, each answered within
    // the read timeout or the test fails).
    while start.elapsed() < run {
        s.write_all(&fetch("quota", client, offset, corr))
            .expect("the connection stays open");
        let (got, body) = response(&mut s).expect("an answer, not a disconnection");
        assert_eq!(got, corr);
        // The size prefix and the correlation id are bytes of the response too.
        let size = body.len() as u64 + 8;
        let r = FetchResponse::decode(&mut Bytes::from(body), 11).unwrap();
        assert_eq!(r.error_code, 0, "a throttled client is not refused");
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "a throttled client is not refused");
        let records = p.records.as_ref().map_or(0, |b| b.len());
        assert!(
            records > 0,
            "every fetch gets records (at {offset} of {end})"
        );
        for b in tidelog::record::batches(p.records.as_ref().unwrap()) {
            offset = b.unwrap().last_offset() + 1;
        }
        if offset >= end {
            offset = 0;
        }
        seen.max_throttle_ms = seen.max_throttle_ms.max(r.throttle_time_ms);
        seen.throttled += u64::from(r.throttle_time_ms > 0);
        seen.requests += 1;
        if start.elapsed() >= warmup {
            seen.measured_bytes += size;
        }
        corr += 1;
    }
    seen.measured = start.elapsed().saturating_sub(warmup);
    seen
}

#[test]
fn a_consumer_over_its_quota_is_held_to_it_and_others_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker.create_topic("quota", 1, TopicConfig::new()).unwrap();
    // 8 MiB of 1 KiB records.
    let producer = Producer::new(&broker).unwrap();
    let value = vec![7u8; 1024];
    let mut end = 0;
    for _ in 0..8192 {
        end = producer
            .send("quota", ProducerRecord::new(&value).partition(0))
            .unwrap()
            .offset
            + 1;
    }
    producer.close().unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        // Usage over the last 2 windows of 1 s: a first burst of at most a second's
        // quota goes through unthrottled.
        .client_quota_window(Duration::from_secs(1), 2)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let admin = AdminClient::builder(addr.to_string()).connect().unwrap();
    let limited = QuotaEntity {
        user: None,
        client_id: Some(EntityName::Name("limited".into())),
    };
    let set = admin
        .alter_client_quotas(
            &[QuotaChange {
                entity: limited.clone(),
                key: CONSUMER_BYTE_RATE.into(),
                value: Some(QUOTA),
            }],
            false,
        )
        .unwrap();
    assert_eq!(set.len(), 1);
    set[0].1.as_ref().unwrap();
    let described = admin
        .describe_client_quotas(&[("client-id", QuotaMatch::Exact("limited".into()))], true)
        .unwrap();
    assert_eq!(described[&limited][CONSUMER_BYTE_RATE], QUOTA);

    let (warmup, run) = (Duration::from_secs(3), Duration::from_secs(15));
    let free = std::thread::spawn(move || drive(addr, "free", end, warmup, run));
    let slow = drive(addr, "limited", end, warmup, run);
    let free = free.join().unwrap();

    let rate = slow.measured_bytes as f64 / slow.measured.as_secs_f64();
    let free_rate = free.measured_bytes as f64 / free.measured.as_secs_f64();
    println!(
        "limited: {rate:.0} B/s (quota {QUOTA}), {} of {} responses throttled, largest throttle_time_ms {}; free: {free_rate:.0} B/s in {} requests",
        slow.throttled, slow.requests, slow.max_throttle_ms, free.requests
    );
    // A wide bound: the machine is shared, and the quota is measured over 1 s windows.
    assert!(
        (0.5 * QUOTA..=1.5 * QUOTA).contains(&rate),
        "the limited consumer ran at {rate:.0} B/s against a quota of {QUOTA} B/s ({} requests)",
        slow.requests
    );
    assert!(
        slow.max_throttle_ms > 0,
        "its responses said it was throttled"
    );
    assert_eq!(
        free.max_throttle_ms, 0,
        "the client without a quota never was"
    );
    assert!(
        free_rate > 2.0 * QUOTA,
        "the client without a quota ran at {free_rate:.0} B/s, not held to the other's quota"
    );
    drop(admin);
    server.shutdown().unwrap();
}
