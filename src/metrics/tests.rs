//! `Broker::metrics` against a real broker (and, with the `server` feature, a server
//! answering raw requests).

use crate::broker::Broker;
use crate::config::TopicConfig;
use crate::coordinator::{CommitOffset, OffsetCommitRequest};
use crate::record::BatchBuilder;

fn batch(records: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..records {
        b.push(1_000 + i as i64, None, Some(b"value"), &[]);
    }
    b.finish()
}

/// A broker on `dir` with a topic `t` of one partition, and that partition.
fn one_partition(dir: &std::path::Path) -> (Broker, crate::topic::Partition) {
    let broker = Broker::open(dir).unwrap();
    let p = broker
        .create_topic_handle("t", 1, TopicConfig::new())
        .unwrap()
        .partition(0)
        .unwrap();
    (broker, p)
}

fn partition<'a>(m: &'a super::Metrics, topic: &str, p: i32) -> &'a super::PartitionMetrics {
    m.partitions
        .iter()
        .find(|x| x.topic == topic && x.partition == p)
        .unwrap_or_else(|| panic!("no {topic}-{p} in {:?}", m.partitions))
}

#[test]
fn partitions_count_what_is_appended_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let topic = broker
        .create_topic_handle("events", 2, TopicConfig::new())
        .unwrap();
    let p0 = topic.partition(0).unwrap();
    let first = batch(3);
    p0.append_batch(&first).unwrap();
    p0.append_batch(&batch(2)).unwrap();

    let m = broker.metrics();
    let events = partition(&m, "events", 0);
    assert_eq!((events.records_in, events.records_out), (5, 0));
    assert!(events.bytes_in > first.len() as u64);
    assert_eq!((events.log_end_offset, events.high_watermark), (5, 5));
    assert_eq!(events.segments, 1);
    assert_eq!(partition(&m, "events", 1).records_in, 0);
    assert!(
        m.partitions
            .iter()
            .any(|p| p.internal && p.topic == crate::broker::OFFSETS_TOPIC)
    );

    // A read from offset 1 hands out offsets 1..5 of both batches.
    let slice = p0.read(1, 1 << 20).unwrap();
    let m = broker.metrics();
    let events = partition(&m, "events", 0);
    assert_eq!(events.records_out, 4);
    assert_eq!(events.bytes_out, slice.len() as u64);
    assert_eq!(events.bytes_out, events.bytes_in, "both batches were read");
    // A read at the end hands out nothing.
    p0.read(5, 1 << 20).unwrap();
    assert_eq!(partition(&broker.metrics(), "events", 0).records_out, 4);

    // An fsync is timed.
    let before = broker.metrics().storage.fsync.count;
    p0.sync().unwrap();
    let fsync = broker.metrics().storage.fsync;
    assert_eq!(fsync.count, before + 1, "{fsync:?}");
    assert_eq!(fsync.buckets.iter().map(|b| b.1).sum::<u64>(), fsync.count);
    assert!(fsync.sum_seconds > 0.0);

    // Every open log's recovery report is counted.
    // (__consumer_offsets's fifty and the two of "events").
    assert_eq!(broker.metrics().storage.recovery.logs, 52);
    assert!(broker.metrics().server.is_none());
}

#[test]
fn recovery_totals_count_the_logs_a_reopen_validated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, p) = one_partition(dir.path());
        p.append_batch(&batch(10)).unwrap();
        broker.close().unwrap();
    }
    // A lost checkpoint makes the next open validate every batch of the log.
    std::fs::remove_file(dir.path().join("t-0").join("partition.checkpoint")).unwrap();
    let before = super::recovery_bytes_validated();
    let broker = Broker::open(dir.path()).unwrap();
    let r = broker.metrics().storage.recovery;
    assert!(r.segments_validated >= 1, "{r:?}");
    assert!(r.bytes_validated > 0, "{r:?}");
    assert!(super::recovery_bytes_validated() >= before + r.bytes_validated);
}

#[test]
fn group_lag_is_the_high_watermark_minus_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, p) = one_partition(dir.path());
    p.append_batch(&batch(10)).unwrap();
    let commit = |offset: i64| {
        broker
            .group_coordinator()
            .offset_commit(OffsetCommitRequest {
                group_id: "g".into(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
                offsets: vec![CommitOffset {
                    topic: "t".into(),
                    partition: 0,
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                    commit_timestamp: None,
                }],
            })
            .unwrap();
    };
    commit(4);
    let g = broker.metrics().groups;
    assert_eq!(g.len(), 1, "{g:?}");
    assert_eq!((g[0].group_id.as_str(), g[0].members), ("g", 0));
    let o = &g[0].offsets[0];
    assert_eq!(
        (o.committed, o.high_watermark, o.lag),
        (4, Some(10), Some(6))
    );
    p.append_batch(&batch(5)).unwrap();
    assert_eq!(broker.metrics().groups[0].offsets[0].lag, Some(11));
    commit(15);
    assert_eq!(broker.metrics().groups[0].offsets[0].lag, Some(0));
    // The commits went to __consumer_offsets.
    let m = broker.metrics();
    let index = broker.group_coordinator().partition_of("g");
    assert_eq!(
        partition(&m, crate::broker::OFFSETS_TOPIC, index).records_in,
        2
    );
}

#[cfg(feature = "server")]
mod server {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};

    use bytes::BytesMut;
    use kafka_protocol::messages::{
        ApiKey, BrokerId, FetchRequest, MetadataRequest, RequestHeader, TopicName, fetch_request,
        metadata_request,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    fn frame<R: Encodable>(key: ApiKey, version: i16, req: &R) -> Vec<u8> {
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("metrics-test")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    fn answer(s: &mut TcpStream, request: &[u8]) {
        s.write_all(request).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut body).unwrap();
    }

    #[test]
    fn the_server_counts_connections_requests_and_error_codes() {
        let dir = tempfile::tempdir().unwrap();
        let (broker, p) = one_partition(dir.path());
        // Three records of 6,000 bytes: a Fetch sends 16 KiB and more with sendfile.
        let mut b = BatchBuilder::new();
        for i in 0..3 {
            b.push(1_000 + i, None, Some(&[b'v'; 6000][..]), &[]);
        }
        p.append_batch(&b.finish()).unwrap();
        let server = crate::server::Server::builder(broker.clone())
            .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
            .start()
            .unwrap();
        let mut s = TcpStream::connect(server.local_addr()).unwrap();
        // Two unknown topics: two UNKNOWN_TOPIC_OR_PARTITION codes in one response.
        let metadata = MetadataRequest::default().with_topics(Some(
            ["nope", "nada"]
                .iter()
                .map(|n| {
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str(n))))
                })
                .collect(),
        ));
        answer(&mut s, &frame(ApiKey::Metadata, 4, &metadata));
        // A fetch of "t" from 0 (sent with sendfile) and one past its end.
        let fetch = |offset: i64| {
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(vec![
                    fetch_request::FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![
                            fetch_request::FetchPartition::default()
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(1 << 20),
                        ]),
                ])
        };
        answer(&mut s, &frame(ApiKey::Fetch, 11, &fetch(0)));
        answer(&mut s, &frame(ApiKey::Fetch, 11, &fetch(99)));

        // A request is counted once its response is written, just after the client
        // may have read it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let m = loop {
            let m = broker.metrics();
            let requests: u64 = m
                .server
                .iter()
                .flat_map(|s| &s.requests)
                .map(|r| r.latency.count)
                .sum();
            if requests == 3 || std::time::Instant::now() > deadline {
                break m;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let srv = m.server.clone().expect("a server serves the broker");
        assert_eq!((srv.connections_open, srv.connections_accepted), (1, 1));
        let count = |api: &str| {
            srv.requests
                .iter()
                .find(|r| r.api == api)
                .map_or(0, |r| r.latency.count)
        };
        assert_eq!((count("Metadata"), count("Fetch")), (1, 2), "{srv:?}");
        let errors: Vec<(i16, &str, u64)> = srv
            .errors
            .iter()
            .map(|e| (e.code, e.name.as_str(), e.count))
            .collect();
        assert_eq!(
            errors,
            [
                (1, "OFFSET_OUT_OF_RANGE", 1),
                (3, "UNKNOWN_TOPIC_OR_PARTITION", 2)
            ]
        );
        assert!(srv.sendfile_bytes > 0);
        assert_eq!(partition(&m, "t", 0).records_out, 3);
        let text = super::super::prometheus_text(&m);
        assert!(
            text.contains("tidelog_server_request_duration_seconds_count{api=\"Fetch\"} 2"),
            "{text}"
        );

        drop(s);
        server.shutdown().unwrap();
        assert!(
            broker.metrics().server.is_none(),
            "a stopped server is gone"
        );
    }
}
