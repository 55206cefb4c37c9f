//! librdkafka consumers of both group protocols in one group (Kafka 4.0's online
//! migration, KIP-848): a classic member (`group.protocol=classic`) consumes alone; a
//! consumer-protocol member (`group.protocol=consumer`) joins and the group becomes a
//! consumer group, each partition owned by one member; the consumer-protocol member
//! leaves and the group is classic again, the classic member owning everything. Every
//! record is read once, each member committing what it read.

mod rdkafka_support;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka_support::send;
use tidelog::coordinator::GroupType;
use tidelog::{Broker, ServerHandle};
use tidelog_interop::groups::{assert_disjoint, serve_topic, stable_assignment};

const TOPIC: &str = "migrate";
const GROUP: &str = "migrating";

/// What the members read: every (partition, offset), and how many of them twice.
#[derive(Default)]
struct Seen {
    positions: HashSet<(i32, i64)>,
    by_member: BTreeMap<&'static str, usize>,
    duplicates: usize,
}

fn produce(bootstrap: &str, from: usize, count: usize) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for i in from..from + count {
        let value = format!("r-{i}");
        let key = format!("k-{i}");
        send(&producer, BaseRecord::to(TOPIC).key(&key).payload(&value));
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// A member polling on its thread until `stop`, committing each record it reads.
fn member(
    bootstrap: &str,
    name: &'static str,
    protocol: &str,
    seen: &Arc<Mutex<Seen>>,
    stop: &Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("group.protocol", protocol)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    if protocol == "classic" {
        config
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "200");
    }
    let consumer: BaseConsumer = config.create().unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let (seen, stop) = (seen.clone(), stop.clone());
    thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            match consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    consumer.commit_message(&m, CommitMode::Sync).unwrap();
                    let mut s = seen.lock().unwrap();
                    if !s.positions.insert((m.partition(), m.offset())) {
                        s.duplicates += 1;
                    }
                    *s.by_member.entry(name).or_default() += 1;
                }
                Some(Err(e)) => eprintln!("{name}: {e}"),
                None => {}
            }
        }
        consumer.unsubscribe();
        // Dropping the consumer closes it: a consumer-protocol member leaves the group.
    })
}

/// Waits (bounded) until `done` holds.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn read(seen: &Arc<Mutex<Seen>>) -> usize {
    seen.lock().unwrap().positions.len()
}

/// The consumer group's members and their partitions, checked disjoint.
fn consumer_owners(broker: &Broker) -> Option<BTreeMap<String, Vec<i32>>> {
    let d = broker
        .group_coordinator()
        .consumer_group_describe(GROUP)
        .ok()?;
    let owners: BTreeMap<String, Vec<i32>> = d
        .members
        .into_iter()
        .map(|m| {
            let ps = m.assignment.into_iter().flat_map(|(_, ps)| ps).collect();
            (m.member_id, ps)
        })
        .collect();
    assert_disjoint(d.group_epoch, &owners);
    Some(owners)
}

#[test]
fn classic_and_consumer_protocol_members_share_a_group_that_converts_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server): (Broker, ServerHandle) = serve_topic(dir.path(), TOPIC, 4);
    let bootstrap = server.local_addr().to_string();
    let seen = Arc::new(Mutex::new(Seen::default()));

    // The classic member reads alone.
    produce(&bootstrap, 0, 400);
    let stop_a = Arc::new(AtomicBool::new(false));
    let a = member(&bootstrap, "classic", "classic", &seen, &stop_a);
    wait_for("the classic member to read everything", || {
        read(&seen) == 400
    });
    assert_eq!(
        broker.group_coordinator().group_type(GROUP),
        Some(GroupType::Classic)
    );

    // The consumer-protocol member joins: the group converts and the partitions are
    // split between the two members, never owned by both.
    let stop_b = Arc::new(AtomicBool::new(false));
    let b = member(&bootstrap, "consumer", "consumer", &seen, &stop_b);
    wait_for("both members to own partitions", || {
        consumer_owners(&broker).is_some_and(|o| {
            o.len() == 2
                && o.values().all(|ps| !ps.is_empty())
                && o.values().map(Vec::len).sum::<usize>() == 4
        })
    });
    assert_eq!(
        broker.group_coordinator().group_type(GROUP),
        Some(GroupType::Consumer)
    );
    produce(&bootstrap, 400, 400);
    wait_for("both members to read the new records", || {
        read(&seen) == 800
    });
    let by_member = seen.lock().unwrap().by_member.clone();
    assert!(
        by_member.get("consumer").is_some_and(|&n| n > 0),
        "{by_member:?}"
    );

    // The consumer-protocol member leaves: the group is classic again and the classic
    // member owns every partition.
    stop_b.store(true, Ordering::Release);
    b.join().unwrap();
    wait_for(
        "the group to be classic with one member owning everything",
        || {
            broker.group_coordinator().group_type(GROUP) == Some(GroupType::Classic)
                && stable_assignment(&broker, GROUP).is_some_and(|(g, m)| {
                    assert_disjoint(g, &m);
                    m.len() == 1 && m.values().all(|ps| ps.len() == 4)
                })
        },
    );
    produce(&bootstrap, 800, 200);
    wait_for("the classic member to read the rest", || {
        read(&seen) == 1000
    });
    stop_a.store(true, Ordering::Release);
    a.join().unwrap();
    assert_eq!(
        seen.lock().unwrap().duplicates,
        0,
        "a record was read twice"
    );
}
