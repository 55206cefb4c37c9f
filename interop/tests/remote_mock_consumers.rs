//! tidelog's network `Consumer` (assigned partitions over a `Cluster`) against an
//! implementation of the Kafka protocol that is not tidelog: librdkafka's mock cluster
//! (three brokers in this process). It negotiates each API's version with the mock
//! (which answers session id 0 to fetch sessions: every Fetch is a full one), consumes
//! every record, commits, and a new consumer of the group resumes at the committed
//! offsets. (The network `GroupConsumer` does not pass against the mock yet: see
//! docs/design.md, "The network client".)

use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use tidelog::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, ConsumerRecords, OffsetReset, Producer,
    ProducerRecord,
};

const PARTITIONS: i32 = 4;

/// Sends `n` records `prefix-i` round-robin over the partitions of `t`.
fn produce(cluster: &Cluster, prefix: &str, n: i32) {
    let producer = Producer::new(cluster).unwrap();
    for i in 0..n {
        let value = format!("{prefix}-{i}");
        producer
            .send(
                "t",
                ProducerRecord::new(value.as_bytes()).partition(i % PARTITIONS),
            )
            .unwrap();
    }
    producer.flush().unwrap();
}

/// Polls until `n` records came (at most 30 s); their values, sorted.
fn read(poll: &mut dyn FnMut() -> ConsumerRecords, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        for r in &poll() {
            let r = r.unwrap();
            got.push(String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned());
        }
    }
    got.sort();
    got
}

fn values(prefix: &str, n: i32) -> Vec<String> {
    let mut v: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    v.sort();
    v
}

fn mock() -> (
    MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    Cluster,
) {
    let mock = MockCluster::new(3).unwrap();
    mock.create_topic("t", PARTITIONS, 3).unwrap();
    let cluster = Cluster::connect(
        ClientConfig::new(mock.bootstrap_servers())
            .set("client.id", "mock-consumer-test")
            .set("retry.backoff.ms", 10),
    )
    .unwrap();
    (mock, cluster)
}

#[test]
fn the_network_consumer_on_librdkafkas_mock_cluster() {
    let (_mock, cluster) = mock();
    produce(&cluster, "a", 40);
    let config = ConsumerConfig::default()
        .group_id("solo")
        .auto_offset_reset(OffsetReset::Earliest);
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| ("t", p)).collect();
    let mut c = Consumer::new(&cluster, config.clone());
    c.assign(&all).unwrap();
    let got = read(&mut || c.poll(Duration::from_millis(100)).unwrap(), 40);
    assert_eq!(got, values("a", 40));
    for p in 0..PARTITIONS {
        assert_eq!(c.position("t", p).unwrap(), 10);
        assert_eq!(c.end_offset("t", p).unwrap(), 10);
    }
    c.commit_sync().unwrap();
    c.seek("t", 0, 4).unwrap();
    c.commit_offsets(&[("t", 0, 4)]).unwrap();
    assert_eq!(c.committed("t", 0).unwrap(), Some(4));
    assert_eq!(c.committed("t", 1).unwrap(), Some(10));
    c.seek_to_beginning().unwrap();
    assert_eq!(c.position("t", 2).unwrap(), 0);
    c.close();

    // The next consumer of the group resumes at the commits.
    produce(&cluster, "b", 4);
    let mut next = Consumer::new(&cluster, config);
    next.assign(&all).unwrap();
    assert_eq!(next.position("t", 0).unwrap(), 4);
    let got = read(&mut || next.poll(Duration::from_millis(100)).unwrap(), 10);
    let mut want: Vec<String> = (4..10).map(|i| format!("a-{}", i * 4)).collect();
    want.extend(values("b", 4));
    want.sort();
    assert_eq!(got, want);
}
