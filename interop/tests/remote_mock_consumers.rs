//! tidelog's network `Consumer` (assigned partitions over a `Cluster`) against an
//! implementation of the Kafka protocol that is not tidelog: librdkafka's mock cluster
//! (three brokers in this process). It negotiates each API's version with the mock
//! (which answers session id 0 to fetch sessions: every Fetch is a full one), consumes
//! every record, commits, and a new consumer of the group resumes at the committed
//! offsets; two network `GroupConsumer`s share a topic the same way.

use std::time::{Duration, Instant};

use rdkafka::mocking::MockCluster;
use tidelog::{
    ClientConfig, Cluster, Consumer, ConsumerConfig, ConsumerRecords, GroupConfig, GroupConsumer,
    OffsetReset, Producer, ProducerRecord,
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

/// Two network `GroupConsumer`s share the topic's partitions through the mock's group
/// coordinator: every record is read once, each commits what it read, and a member
/// that joins the group afterwards resumes at the commits.
#[test]
fn two_network_group_members_on_librdkafkas_mock_cluster() {
    use std::sync::{Arc, Mutex};
    let (_mock, cluster) = mock();
    produce(&cluster, "a", 40);
    let config = GroupConfig::new("pair", &["t"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .heartbeat_interval(Duration::from_millis(100));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let members: Vec<_> = (0..2)
        .map(|_| {
            let (cluster, config, seen) = (cluster.clone(), config.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut m = GroupConsumer::join(&cluster, config).unwrap();
                let deadline = Instant::now() + Duration::from_secs(30);
                // Until both members hold partitions and every record came.
                while (seen.lock().unwrap().len() < 40
                    || m.assignment().is_empty()
                    || m.assignment().len() == PARTITIONS as usize)
                    && Instant::now() < deadline
                {
                    for r in &m.poll(Duration::from_millis(100)).unwrap() {
                        let r = r.unwrap();
                        let value = String::from_utf8_lossy(r.value.unwrap_or_default());
                        seen.lock().unwrap().push(value.into_owned());
                    }
                }
                m.commit_sync().unwrap();
                let held = m.assignment();
                (m, held)
            })
        })
        .collect();
    let mut held = Vec::new();
    let mut done = Vec::new();
    for m in members {
        let (m, partitions) = m.join().unwrap();
        assert!(!partitions.is_empty(), "each member holds partitions");
        held.extend(partitions);
        done.push(m);
    }
    held.sort();
    let all: Vec<(String, i32)> = (0..PARTITIONS).map(|p| ("t".to_string(), p)).collect();
    assert_eq!(held, all, "the members share the partitions");
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, values("a", 40), "every record once");
    for mut m in done {
        m.close();
    }

    // A member joining later resumes at the commits: only the new records.
    produce(&cluster, "b", 8);
    let mut next = GroupConsumer::join(&cluster, config).unwrap();
    let got = read(&mut || next.poll(Duration::from_millis(100)).unwrap(), 8);
    assert_eq!(got, values("b", 8));
    for p in 0..PARTITIONS {
        assert_eq!(next.committed("t", p).unwrap(), Some(10));
    }
    next.commit_sync().unwrap();
    assert_eq!(next.committed("t", 0).unwrap(), Some(12));
    next.close();
}
