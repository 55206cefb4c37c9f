//! One consumer group, two front doors: an in-process `GroupConsumer` member and a
//! librdkafka consumer over the network join the same group through the same group
//! coordinator, and split the topic's partitions between them.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tidelog::{Broker, GroupConfig, GroupConsumer, OffsetReset, Server, TopicConfig};

#[test]
fn an_in_process_member_and_a_network_member_split_the_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("shared", 4, TopicConfig::new())
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let local_assignment = Arc::new(Mutex::new(BTreeSet::new()));
    let local = {
        let (broker, done, local_assignment) =
            (broker.clone(), done.clone(), local_assignment.clone());
        thread::spawn(move || {
            let mut member = GroupConsumer::join(
                &broker,
                GroupConfig::new("mixed", &["shared"]).auto_offset_reset(OffsetReset::Earliest),
            )
            .unwrap();
            while !done.load(Ordering::Acquire) {
                member.poll(Duration::from_millis(50)).unwrap();
                *local_assignment.lock().unwrap() = member
                    .assignment()
                    .into_iter()
                    .map(|(_, p)| p)
                    .collect::<BTreeSet<i32>>();
            }
            member.close();
        })
    };

    let remote: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", server.local_addr().to_string())
        .set("group.id", "mixed")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "200")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    remote.subscribe(&["shared"]).unwrap();

    // Wait (up to 60 s: a hang, not a timing assertion) for a stable split.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut split = None;
    while Instant::now() < deadline {
        remote.poll(Duration::from_millis(50));
        let theirs: BTreeSet<i32> = remote
            .assignment()
            .unwrap()
            .elements()
            .iter()
            .map(|e| e.partition())
            .collect();
        let ours = local_assignment.lock().unwrap().clone();
        if !theirs.is_empty()
            && !ours.is_empty()
            && theirs.is_disjoint(&ours)
            && theirs.len() + ours.len() == 4
        {
            split = Some((ours, theirs));
            break;
        }
    }
    done.store(true, Ordering::Release);
    local.join().unwrap();
    let (ours, theirs) = split.expect("the two members never split the partitions");
    let all: BTreeSet<i32> = ours.union(&theirs).copied().collect();
    assert_eq!(all, (0..4).collect());
    drop(remote);
    server.shutdown().unwrap();
    broker.close().unwrap();
}
