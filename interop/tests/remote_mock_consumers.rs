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

/// The mock's answer to a member whose SyncGroup comes after the leader's: the mock
/// counts the leader's assignments as every member synced, marks the group stable,
/// and answers INVALID_REQUEST to a SyncGroup of a stable group (a Kafka broker
/// hands the member its assignment). On a busy machine the other member's thread
/// can be that late; its next poll joins again, which rebalances the group.
fn late_sync(e: &tidelog::Error) -> bool {
    matches!(e, tidelog::Error::Api(a)
        if a.api.starts_with("SyncGroup") && a.code == tidelog::admin::ErrorCode::INVALID_REQUEST)
}

/// Two network `GroupConsumer`s share the topic's partitions through the mock's group
/// coordinator: every record is read, each commits what it read, and a member
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
    // Distinct values: a member that read before the other joined (a busy machine can
    // delay a join past the mock's initial rebalance delay) has its partitions read
    // again after the rebalance, as nothing was committed yet.
    let seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
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
                    let records = match m.poll(Duration::from_millis(100)) {
                        Err(e) if late_sync(&e) => continue,
                        records => records.unwrap(),
                    };
                    for r in &records {
                        let r = r.unwrap();
                        let value = String::from_utf8_lossy(r.value.unwrap_or_default());
                        seen.lock().unwrap().insert(value.into_owned());
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
    let got: Vec<String> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(got, values("a", 40), "every record read");
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

/// A network `GroupConsumer`'s asynchronous commit that the coordinator refuses (the
/// mock answers OffsetCommit with OFFSET_METADATA_TOO_LARGE, an error not worth
/// retrying): without a callback, the failure is returned by the next `commit_sync`
/// (which still commits its own offsets); with one, the callback gets it, and the next
/// commit succeeds.
#[test]
fn a_failed_async_commit_is_reported_by_the_next_commit_on_the_mock() {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    use std::sync::{Arc, Mutex};
    /// Kafka's OFFSET_METADATA_TOO_LARGE.
    const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    let (mock, cluster) = mock();
    produce(&cluster, "a", 8);
    let config = GroupConfig::new("async-failure", &["t"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false);
    let mut m = GroupConsumer::join(&cluster, config).unwrap();
    let got = read(&mut || m.poll(Duration::from_millis(100)).unwrap(), 8);
    assert_eq!(got, values("a", 8));
    let refuse = |mock: &MockCluster<'static, _>| {
        mock.request_errors(
            RDKafkaApiKey::OffsetCommit,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE],
        )
    };

    // Without a callback: the next commit_sync returns the failure, after committing.
    refuse(&mock);
    m.seek("t", 0, 1).unwrap();
    m.commit_async().unwrap();
    m.seek("t", 0, 2).unwrap();
    let e = m.commit_sync().unwrap_err();
    let text = e.to_string();
    assert!(text.contains("OffsetCommit"), "{text}");
    assert!(
        matches!(&e, tidelog::Error::Api(a) if a.code.code() == OFFSET_METADATA_TOO_LARGE),
        "{e:?}"
    );
    assert_eq!(
        m.committed("t", 0).unwrap(),
        Some(2),
        "commit_sync's own commit"
    );
    m.commit_sync().unwrap();

    // The same through commit_async: the next one returns it.
    refuse(&mock);
    m.seek("t", 0, 3).unwrap();
    m.commit_async().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reported = None;
    while reported.is_none() && Instant::now() < deadline {
        m.poll(Duration::from_millis(50)).unwrap();
        m.seek("t", 0, 4).unwrap();
        reported = m.commit_async().err();
    }
    assert!(
        matches!(&reported, Some(tidelog::Error::Api(a)) if a.code.code() == OFFSET_METADATA_TOO_LARGE),
        "{reported:?}"
    );
    m.commit_sync().unwrap();
    assert_eq!(m.committed("t", 0).unwrap(), Some(4));

    // With a callback: the callback gets the failure, the next commit is clean.
    refuse(&mock);
    let heard = Arc::new(Mutex::new(Vec::new()));
    m.seek("t", 0, 5).unwrap();
    m.commit_async_with({
        let heard = heard.clone();
        move |offsets: &[(String, i32, i64)], result: tidelog::Result<()>| {
            heard.lock().unwrap().push((offsets.to_vec(), result.err()));
        }
    });
    m.seek("t", 0, 6).unwrap();
    m.commit_sync().unwrap();
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 1);
    assert!(heard[0].0.contains(&("t".to_string(), 0, 5)), "{heard:?}");
    assert!(
        matches!(&heard[0].1, Some(tidelog::Error::Api(a)) if a.code.code() == OFFSET_METADATA_TOO_LARGE),
        "{heard:?}"
    );
    assert_eq!(m.committed("t", 0).unwrap(), Some(6));
    m.close();
}

/// `client.rack` against the mock, whose leader names the partition's follower as the
/// preferred read replica (KIP-392) and sends no records with it: every record comes
/// from the follower. While the follower lags (its high watermark held at 5), its
/// OFFSET_OUT_OF_RANGE sends the consumer back to the leader without resetting the
/// position (nothing is read twice); once the follower is no replica of the partition
/// any more (NOT_LEADER_OR_FOLLOWER), the leader serves.
#[test]
fn the_network_consumer_reads_from_the_preferred_replica_of_the_mock() {
    let (mock, cluster) = mock();
    mock.partition_leader("t", 0, Some(1)).unwrap();
    let producer = Producer::new(&cluster).unwrap();
    let send = |from: i32, to: i32| {
        for i in from..to {
            // One batch per record: the follower's watermark may cut between them.
            let value = format!("r-{i}");
            producer
                .send("t", ProducerRecord::new(value.as_bytes()).partition(0))
                .unwrap();
            producer.flush().unwrap();
        }
    };
    send(0, 10);
    mock.partition_follower("t", 0, 2).unwrap();
    // The mock's follower serves offsets up to its high watermark inclusive: 0 to 4.
    mock.follower_watermarks("t", 0, None, Some(4)).unwrap();
    let config = ConsumerConfig::default()
        .auto_offset_reset(OffsetReset::Earliest)
        .client_rack("rack-2");
    let mut c = Consumer::new(&cluster, config);
    c.assign(&[("t", 0)]).unwrap();
    let mut got = Vec::new();
    let poll_until = |c: &mut Consumer, n: usize, got: &mut Vec<(i64, String)>, limit: u64| {
        let deadline = Instant::now() + Duration::from_secs(limit);
        while got.len() < n && Instant::now() < deadline {
            for r in &c.poll(Duration::from_millis(50)).unwrap() {
                let r = r.unwrap();
                let value = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                got.push((r.offset, value));
            }
        }
    };
    poll_until(&mut c, 5, &mut got, 20);
    // The follower has no more: a while of polls brings nothing, and no reset.
    poll_until(&mut c, 6, &mut got, 3);
    let want = |n: i32| -> Vec<(i64, String)> {
        (0..n).map(|i| (i64::from(i), format!("r-{i}"))).collect()
    };
    // (The loop above waited its 3 s for a sixth record that must not come.)
    assert_eq!(got, want(5), "the follower's records, once");
    assert_eq!(c.position("t", 0).unwrap(), 5);

    // The follower catches up: the rest comes from it.
    mock.follower_watermarks("t", 0, None, None).unwrap();
    poll_until(&mut c, 10, &mut got, 20);
    assert_eq!(got, want(10));

    // The partition has no follower any more: broker 2 answers NOT_LEADER_OR_FOLLOWER
    // and the consumer goes back to the leader, which serves.
    mock.partition_follower("t", 0, -1).unwrap();
    send(10, 13);
    poll_until(&mut c, 13, &mut got, 20);
    assert_eq!(got, want(13), "every record once, in order");
}
