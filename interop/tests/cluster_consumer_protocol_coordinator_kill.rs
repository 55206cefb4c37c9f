//! A KIP-848 consumer group (`group.protocol=consumer`) survives the death of its
//! coordinator: three `tidelog serve` child processes, a topic with replication factor
//! 3, two librdkafka consumer-protocol members reading it and committing each record.
//! The node coordinating their group (FindCoordinator) is killed with SIGKILL; the group
//! moves to the new leader of its `__consumer_offsets` partition, the members heartbeat
//! there, every record is read, no partition is ever owned by both members at once, no
//! record below a committed offset is read again, and the committed offsets the new
//! coordinator reports are those the members were told were committed.

mod rdkafka_support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ConsumerGroupDescribeRequest, FindCoordinatorRequest, GroupId};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use rdkafka_support::{admin_with_topic, idempotent_producer, send};
use tidelog_interop::cluster::{KafkaConn, Processes, eventually};

const WAIT: Duration = Duration::from_secs(45);
const TOPIC: &str = "orders";
const GROUP: &str = "kip848-survivors";
const PARTITIONS: i32 = 4;
/// Records produced before the kill, and as many after it.
const BATCH: usize = 200;

/// What the members did, as they saw it.
#[derive(Default)]
struct Log {
    /// Which member owns each partition (assigned and not yet revoked).
    owner: BTreeMap<i32, &'static str>,
    /// Every (partition, offset) read.
    read: HashSet<(i32, i64)>,
    /// The highest offset a commit was acknowledged for, per partition.
    committed: BTreeMap<i32, i64>,
    /// Commits acknowledged after the kill.
    commits_after_kill: usize,
    /// What must never happen: a partition assigned while another member owns it, a
    /// record read below an acknowledged commit.
    violations: Vec<String>,
}

struct Member {
    name: &'static str,
    log: Arc<Mutex<Log>>,
}

impl ClientContext for Member {}

impl ConsumerContext for Member {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut log = self.log.lock().unwrap();
        if let Rebalance::Assign(tpl) = rebalance {
            for e in tpl.elements() {
                let p = e.partition();
                if let Some(other) = log.owner.insert(p, self.name)
                    && other != self.name
                {
                    let v = format!(
                        "partition {p} assigned to {} while {other} owns it",
                        self.name
                    );
                    log.violations.push(v);
                }
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut log = self.log.lock().unwrap();
        if let Rebalance::Revoke(tpl) = rebalance {
            for e in tpl.elements() {
                if log.owner.get(&e.partition()) == Some(&self.name) {
                    log.owner.remove(&e.partition());
                }
            }
        }
    }
}

/// The node id coordinating `GROUP`, asked of node index `i`.
fn coordinator(nodes: &Processes, i: usize) -> Option<i32> {
    let mut conn = KafkaConn::connect(&nodes.layout.addr(i), Duration::from_secs(5))?;
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(GROUP))
        .with_key_type(0);
    let response = conn.call(&request, 2)?;
    (response.error_code == 0 && response.node_id.0 >= 0).then_some(response.node_id.0)
}

/// The partitions of each member of `GROUP` as node index `i` describes them
/// (ConsumerGroupDescribe), when the group is stable and every member has reached its
/// target assignment.
fn described(nodes: &Processes, i: usize) -> Option<BTreeSet<BTreeSet<i32>>> {
    let mut conn = KafkaConn::connect(&nodes.layout.addr(i), Duration::from_secs(5))?;
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(StrBytes::from_static_str(GROUP))]);
    let response = conn.call(&request, 0)?;
    let group = response.groups.into_iter().next()?;
    if group.error_code != 0 || group.group_state.as_str() != "Stable" {
        return None;
    }
    let mut members = BTreeSet::new();
    for m in group.members {
        if m.assignment != m.target_assignment || m.member_epoch != group.assignment_epoch {
            return None;
        }
        let partitions = m.assignment.topic_partitions.into_iter();
        members.insert(partitions.flat_map(|t| t.partitions).collect());
    }
    Some(members)
}

/// Each member's partitions as the members see them.
fn owned(log: &Log) -> BTreeSet<BTreeSet<i32>> {
    owners(log)
        .into_iter()
        .map(|name| {
            let mine = log.owner.iter().filter(|(_, n)| **n == name);
            mine.map(|(p, _)| *p).collect()
        })
        .collect()
}

/// A consumer-protocol member polling on its thread until `stop`, committing each
/// record it reads synchronously.
fn member(
    bootstrap: &str,
    name: &'static str,
    log: &Arc<Mutex<Log>>,
    killed: &Arc<AtomicBool>,
    stop: &Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let context = Member {
        name,
        log: log.clone(),
    };
    let consumer: BaseConsumer<Member> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create_with_context(context)
        .unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let (log, killed, stop) = (log.clone(), killed.clone(), stop.clone());
    thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            match consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    let (p, o) = (m.partition(), m.offset());
                    {
                        let mut log = log.lock().unwrap();
                        if log.committed.get(&p).is_some_and(|&c| o < c) {
                            let v = format!(
                                "{name} read {p}@{o} below the commit {:?}",
                                log.committed[&p]
                            );
                            log.violations.push(v);
                        }
                        log.read.insert((p, o));
                    }
                    let after_kill = killed.load(Ordering::Acquire);
                    match consumer.commit_message(&m, CommitMode::Sync) {
                        Ok(()) => {
                            let mut log = log.lock().unwrap();
                            let c = log.committed.entry(p).or_default();
                            *c = (*c).max(o + 1);
                            if after_kill {
                                log.commits_after_kill += 1;
                            }
                        }
                        Err(e) => eprintln!("{name}: commit of {p}@{o}: {e}"),
                    }
                }
                Some(Err(e)) => eprintln!("{name}: {e}"),
                None => {}
            }
        }
        consumer.unsubscribe();
    })
}

/// Waits (at most `WAIT`) until `done(log)` holds, failing with the node logs.
fn wait_for(what: &str, nodes: &Processes, log: &Arc<Mutex<Log>>, done: impl Fn(&Log) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(&log.lock().unwrap()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            nodes.logs()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

fn owners(log: &Log) -> BTreeSet<&'static str> {
    log.owner.values().copied().collect()
}

#[test]
fn consumer_protocol_members_survive_their_coordinator_being_killed() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &["--broker-session-timeout-ms", "2000"],
    );
    let bootstrap = nodes.layout.bootstrap();
    let admin = admin_with_topic(&bootstrap, 3, (TOPIC, PARTITIONS, 3), WAIT);
    let before = eventually("the group's coordinator", WAIT, || coordinator(&nodes, 0));
    let producer = idempotent_producer(&bootstrap);
    let produce = |from: usize| {
        for i in from..from + BATCH {
            let (key, value) = (format!("k-{i}"), format!("r-{i}"));
            send(&producer, BaseRecord::to(TOPIC).key(&key).payload(&value));
        }
        producer.flush(WAIT).unwrap();
    };
    produce(0);

    let log = Arc::new(Mutex::new(Log::default()));
    let flag = || Arc::new(AtomicBool::new(false));
    let (killed, stop_a, stop_b) = (flag(), flag(), flag());
    let a = member(&bootstrap, "a", &log, &killed, &stop_a);
    let b = member(&bootstrap, "b", &log, &killed, &stop_b);
    wait_for(
        "both members to own partitions and read the first records",
        &nodes,
        &log,
        |l| owners(l).len() == 2 && l.owner.len() == PARTITIONS as usize && l.read.len() == BATCH,
    );

    // The coordinator dies; the survivors elect new leaders and a new coordinator.
    nodes.kill((before - 1) as usize);
    killed.store(true, Ordering::Release);
    let survivor = (0..3).find(|i| *i != (before - 1) as usize).unwrap();
    let after = eventually("a new coordinator", WAIT, || {
        coordinator(&nodes, survivor).filter(|&c| c != before)
    });
    produce(BATCH);
    wait_for(
        "every record read and committed on the new coordinator",
        &nodes,
        &log,
        |l| {
            l.read.len() == 2 * BATCH
                && l.commits_after_kill > 0
                && owners(l).len() == 2
                && l.owner.len() == PARTITIONS as usize
        },
    );
    // The new coordinator has both members, with the partitions they own.
    let survivor_view = eventually(
        "the members' assignment on the new coordinator",
        WAIT,
        || {
            let i = (after - 1) as usize;
            described(&nodes, i).filter(|d| *d == owned(&log.lock().unwrap()))
        },
    );
    assert_eq!(survivor_view.len(), 2, "{survivor_view:?}");

    // A member leaves: the new coordinator reconciles the other onto every partition.
    stop_b.store(true, Ordering::Release);
    b.join().unwrap();
    produce(2 * BATCH);
    wait_for(
        "the remaining member to own and read everything",
        &nodes,
        &log,
        |l| l.read.len() == 3 * BATCH && l.owner.values().filter(|n| **n == "a").count() == 4,
    );
    eventually("one member on the new coordinator", WAIT, || {
        described(&nodes, (after - 1) as usize).filter(|d| *d == owned(&log.lock().unwrap()))
    });
    stop_a.store(true, Ordering::Release);
    a.join().unwrap();

    let log = log.lock().unwrap();
    assert!(log.violations.is_empty(), "{:#?}", log.violations);
    // What the new coordinator reports committed is what the members were told.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", nodes.layout.addr(survivor))
        .set("group.id", GROUP)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Invalid).unwrap();
    }
    let committed = eventually(
        "the committed offsets from the new coordinator",
        WAIT,
        || {
            reader
                .committed_offsets(tpl.clone(), Duration::from_secs(3))
                .ok()
        },
    );
    let committed: BTreeMap<i32, i64> = committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect();
    assert_eq!(
        committed, log.committed,
        "coordinator {after} after {before}"
    );
    drop(reader);
    drop(producer);
    drop(admin);
}
