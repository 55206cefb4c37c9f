//! `tidelog forward --no-transactions` (an idempotent producer only) killed while the
//! remote leader holds a batch it sent that is appended and not replicated yet: a
//! follower of the remote partition is paused (SIGSTOP) and stays in the ISR (a long
//! `replica.lag.time.max.ms`), so the high watermark stops below that batch, which no
//! reader sees. The forwarder started again must not read the tail below the high
//! watermark, miss the batch and send its records again (both copies would be kept once
//! the follower resumes): it waits, its status saying why, until the leader has
//! committed the batch, then resumes after it. The remote partition holds every record
//! once, in local order.

use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog::forward::Forwarder;
use tidelog::{Broker, Cluster, IsolationLevel, TopicConfig};
use tidelog_interop::cluster::{KafkaConn, eventually};

mod remote_cluster_support;
use remote_cluster_support::{
    WAIT, check_every_number_once_in_order, forward_child_with, local_log, three_nodes,
    write_numbers,
};

const TOPIC: &str = "readings";
const FIRST: u32 = 1_000;
const RECORDS: u32 = 2_000;
/// The forwarder without transactions: the wait for unreplicated records is its own.
const IDEMPOTENT: &[&str] = &["--no-transactions"];

/// The records the forwarder's positions say are forwarded, and its last error.
fn status(local: &Broker) -> (u64, Option<String>) {
    Forwarder::positions(local, "edge").map_or((0, None), |s| {
        let done = s.partitions.iter().map(|p| p.position as u64).sum();
        (done, s.last_error)
    })
}

/// The producers the leader at `addr` says appended to partition 0, each as its id
/// and last sequence.
fn appended(addr: &str) -> Option<Vec<(i64, i32)>> {
    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_indexes(vec![0]),
    ]);
    let response = KafkaConn::connect(addr, Duration::from_secs(2))?.call(&request, 0)?;
    let p = response.topics.first()?.partitions.first()?;
    (p.error_code == 0).then(|| {
        p.active_producers
            .iter()
            .map(|s| (s.producer_id.0, s.last_sequence))
            .collect()
    })
}

#[test]
fn a_restarted_forwarder_waits_for_the_batch_its_predecessor_left_unreplicated() {
    let root = tempfile::tempdir().unwrap();
    // Nothing leaves the ISR or is fenced while the follower is paused.
    let (nodes, bootstrap, cluster) = three_nodes(root.path(), "120000", "120000");
    eventually("the topic", WAIT, || {
        cluster
            .create_topic_if_missing(TOPIC, 1, TopicConfig::new())
            .ok()
    });
    let (leader, follower) = eventually("an in-sync leader", WAIT, || {
        let t = cluster.describe_topic(TOPIC).ok()?;
        let p = t.partitions.first()?;
        let leader = p.leader?;
        let follower = *p.replicas.iter().find(|r| **r != leader)?;
        (p.isr.len() == 3).then_some((leader, follower))
    });
    let leader_addr = nodes.layout.addr((leader - 1) as usize);

    let (dir, local) = local_log(TOPIC, 1);
    let log = root.path().join("forward.log");
    write_numbers(&local, TOPIC, 1, (0, FIRST));
    let mut forwarder = forward_child_with(dir.path(), &bootstrap, TOPIC, &log, IDEMPOTENT);
    eventually("the first records forwarded", WAIT, || {
        (status(&local).0 == u64::from(FIRST)).then_some(())
    });

    let before = eventually("the leader's producers", WAIT, || appended(&leader_addr));

    // A follower stops: what is sent next is appended on the leader and waits for it.
    nodes.signal((follower - 1) as usize, "STOP");
    write_numbers(&local, TOPIC, 1, (FIRST, RECORDS));
    let last = eventually("more appended on the leader", WAIT, || {
        appended(&leader_addr).filter(|p| *p != before)
    });
    let readable = cluster
        .list_offset(TOPIC, 0, Cluster::LATEST, IsolationLevel::ReadUncommitted)
        .unwrap()
        .offset;
    assert_eq!(readable, i64::from(FIRST), "the high watermark waits");
    forwarder.kill();

    // Its successor must not send the batch again. (It is told of the running nodes:
    // one stopped would answer nothing until the request timeout.)
    let running: Vec<String> = (1..=3)
        .filter(|n| *n != follower)
        .map(|n| nodes.layout.addr((n - 1) as usize))
        .collect();
    let forwarder = forward_child_with(dir.path(), &running.join(","), TOPIC, &log, IDEMPOTENT);
    let deadline = Instant::now() + WAIT;
    let said = loop {
        let (_, error) = status(&local);
        if let Some(e) = error.filter(|e| e.contains("did not replicate yet")) {
            break e;
        }
        let now = appended(&leader_addr).unwrap_or_else(|| last.clone());
        assert!(
            now == last,
            "the forwarder sent again what the leader holds (producers {last:?}, now {now:?}):\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(
            Instant::now() < deadline,
            "the forwarder did not say it waits:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(said.contains(&format!("{TOPIC}-0")), "{said}");

    // The follower resumes: the batch is committed, and the forwarder goes on after it.
    nodes.signal((follower - 1) as usize, "CONT");
    eventually("every record forwarded", WAIT, || {
        (status(&local).0 == u64::from(RECORDS)).then_some(())
    });
    write_numbers(&local, TOPIC, 1, (RECORDS, RECORDS + 10));
    eventually("the records written after it forwarded", WAIT, || {
        (status(&local).0 == u64::from(RECORDS + 10)).then_some(())
    });
    assert!(tidelog_interop::cluster::terminate_child(
        forwarder.into_inner()
    ));
    check_every_number_once_in_order(&cluster, TOPIC, 1, RECORDS + 10);
    drop(nodes);
}
