//! Kafka's quickstart failover with `tidelog serve` child processes: three nodes, a topic
//! with replication factor 3 and `min.insync.replicas=2`, an idempotent acks=all
//! producer (librdkafka) writing numbered records while the partition's leader is killed
//! with SIGKILL. The metadata then shows a new leader and an ISR without the dead node;
//! every acknowledged record is read back exactly once and in order; the killed node
//! restarts on its data directory, rejoins the ISR, and after a clean stop every
//! replica holds the same bytes.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use tidelog::LogConfig;
use tidelog::storage::{PartitionLog, ReadLimit};
use tidelog_interop::cluster::{Processes, eventually};

const TOPIC: &str = "failover";
const WAIT: Duration = Duration::from_secs(45);

/// Collects the values librdkafka says were acknowledged.
#[derive(Clone, Default)]
struct Acked(Arc<Mutex<Vec<u64>>>);

impl ClientContext for Acked {}

impl ProducerContext for Acked {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(m) = result {
            let v: u64 = std::str::from_utf8(m.payload().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            self.0.lock().unwrap().push(v);
        }
    }
}

/// `(leader, isr)` of partition 0 of [`TOPIC`] as `bootstrap` reports it.
fn leader_and_isr(bootstrap: &str) -> Option<(i32, Vec<i32>)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .ok()?;
    let m = c.fetch_metadata(Some(TOPIC), Duration::from_secs(3)).ok()?;
    let p = m.topics().first()?.partitions().first()?;
    let mut isr = p.isr().to_vec();
    isr.sort_unstable();
    (p.leader() >= 1 && p.error().is_none()).then_some((p.leader(), isr))
}

fn log_bytes(dir: &std::path::Path) -> (i64, Vec<u8>) {
    let name = format!("{TOPIC}-0");
    let log = PartitionLog::open(dir.join(&name), &name, LogConfig::default()).unwrap();
    let end = log.log_end_offset();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    for _ in 0..10_000 {
        if offset >= end {
            break;
        }
        let s = log
            .read_bounded(offset, 1 << 20, ReadLimit::LogEnd)
            .unwrap();
        if s.is_empty() {
            break;
        }
        out.extend_from_slice(&s);
        offset = s.next_offset();
    }
    log.close().unwrap();
    (end, out)
}

#[test]
fn killing_the_leader_loses_no_acknowledged_record() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &[
            "--broker-session-timeout-ms",
            "2000",
            "--replica-lag-time-max-ms",
            "3000",
        ],
    );
    let bootstrap = nodes.layout.bootstrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    eventually("three brokers", WAIT, || {
        admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(2))
            .ok()
            .filter(|m| m.brokers().len() == 3)
    });
    let created = block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2")],
        &AdminOptions::new().operation_timeout(Some(WAIT)),
    ))
    .unwrap();
    for r in created {
        r.unwrap();
    }
    let (leader, isr) = eventually("a leader", WAIT, || leader_and_isr(&bootstrap));
    assert_eq!(isr, vec![1, 2, 3]);

    let acked = Acked::default();
    let producer: BaseProducer<Acked> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "60000")
        .create_with_context(acked.clone())
        .unwrap();
    let send = |from: u64, to: u64| {
        for v in from..to {
            let value = v.to_string();
            let mut record: BaseRecord<(), String> =
                BaseRecord::to(TOPIC).payload(&value).partition(0);
            for _ in 0..10_000 {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        record = r;
                        producer.poll(Duration::from_millis(5));
                    }
                }
            }
            producer.poll(Duration::ZERO);
        }
    };
    send(0, 500);
    // The leader dies with SIGKILL while records are in flight.
    nodes.kill((leader - 1) as usize);
    send(500, 1000);
    producer.flush(Duration::from_secs(60)).unwrap();
    let acked: Vec<u64> = acked.0.lock().unwrap().clone();
    assert_eq!(acked.len(), 1000, "every record acknowledged in the end");

    let live = (0..3)
        .filter(|i| *i != (leader - 1) as usize)
        .map(|i| nodes.layout.addr(i))
        .collect::<Vec<_>>()
        .join(",");
    let (new_leader, isr) = eventually("a new leader and a shrunken ISR", WAIT, || {
        leader_and_isr(&live).filter(|(l, isr)| *l != leader && !isr.contains(&leader))
    });
    assert!(isr.contains(&new_leader) && isr.len() == 2, "{isr:?}");

    // Every acknowledged record, once, in the order sent.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &live)
        .set("group.id", "failover-check")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut read = Vec::new();
    let deadline = Instant::now() + WAIT;
    while read.len() < acked.len() && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            read.push(
                std::str::from_utf8(m.payload().unwrap())
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
            );
        }
    }
    let unique: HashSet<u64> = read.iter().copied().collect();
    assert_eq!(unique.len(), read.len(), "no record twice");
    assert!(read.windows(2).all(|w| w[0] < w[1]), "in the order sent");
    for v in &acked {
        assert!(unique.contains(v), "acknowledged record {v} is missing");
    }
    drop(consumer);

    // The killed node restarts on its data directory and rejoins the ISR.
    nodes.restart((leader - 1) as usize);
    // (Asked of the survivors: the restarted node answers from its own metadata until
    // it has caught up.)
    eventually("the restarted node back in the ISR", WAIT, || {
        leader_and_isr(&live).filter(|(_, isr)| isr.len() == 3)
    });
    drop(producer);
    drop(admin);
    nodes.terminate_all();
    let logs: Vec<(i64, Vec<u8>)> = (0..3).map(|i| log_bytes(&nodes.dir(i))).collect();
    for (i, l) in logs.iter().enumerate() {
        assert_eq!(
            l.0,
            read.len() as i64,
            "node {} holds every record\n{}",
            i + 1,
            nodes.logs()
        );
        assert!(l.1 == logs[0].1, "node {} holds the same bytes", i + 1);
    }
}
