//! librdkafka (the `rdkafka` crate) against `tidelog::Server`: 100,000 records produced
//! with acks=all and idempotence on, consumed by a group of three consumers over six
//! partitions with commits, then the server and broker restart and the group resumes
//! from its committed offsets: nothing lost, nothing twice.

mod rdkafka_support;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka_support::{idempotent_producer, send};
use tidelog::{Broker, Server, ServerHandle, TopicConfig};

const TOPIC: &str = "orders";
const GROUP: &str = "order-processors";
const RECORDS: usize = 100_000;

/// Commits what this member consumed before its partitions move to another member,
/// so a rebalance never hands out a record twice.
struct CommitOnRevoke;

impl rdkafka::ClientContext for CommitOnRevoke {}

impl ConsumerContext for CommitOnRevoke {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            let _ = consumer.commit_consumer_state(CommitMode::Sync);
        }
    }
}

fn serve(dir: &Path) -> (Broker, ServerHandle) {
    let broker = Broker::open(dir).unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (broker, server)
}

/// What the consumers saw: `(partition, offset)` and the value of every record.
#[derive(Default)]
struct Seen {
    positions: HashSet<(i32, i64)>,
    values: HashSet<String>,
    duplicates: usize,
}

/// Run a group of three consumers until `stop_at` distinct records were seen in total,
/// nothing arrives for 30 s, or for at most 3 minutes. Every member commits what it
/// consumed before leaving.
fn consume(bootstrap: &str, seen: &Arc<Mutex<Seen>>, stop_at: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let idle_members = Arc::new(AtomicUsize::new(0));
    let members: Vec<_> = (0..3)
        .map(|_| {
            let (bootstrap, seen, stop, idle_members) = (
                bootstrap.to_string(),
                seen.clone(),
                stop.clone(),
                idle_members.clone(),
            );
            thread::spawn(move || {
                let consumer: BaseConsumer<CommitOnRevoke> = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("group.id", GROUP)
                    .set("enable.auto.commit", "false")
                    .set("auto.offset.reset", "earliest")
                    .set("session.timeout.ms", "6000")
                    .set("heartbeat.interval.ms", "500")
                    .create_with_context(CommitOnRevoke)
                    .unwrap();
                consumer.subscribe(&[TOPIC]).unwrap();
                let mut idle = 0;
                let mut counted_idle = false;
                let deadline = Instant::now() + Duration::from_secs(180);
                while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                    match consumer.poll(Duration::from_millis(100)) {
                        Some(Ok(m)) => {
                            idle = 0;
                            let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
                            let mut s = seen.lock().unwrap();
                            if !s.positions.insert((m.partition(), m.offset())) {
                                s.duplicates += 1;
                            }
                            s.values.insert(value);
                            if s.positions.len() >= stop_at {
                                stop.store(true, Ordering::Release);
                            }
                        }
                        Some(Err(e)) => panic!("consumer error: {e}"),
                        None => {
                            idle += 1;
                            if idle == 300 && !counted_idle {
                                counted_idle = true;
                                if idle_members.fetch_add(1, Ordering::AcqRel) + 1 == 3 {
                                    stop.store(true, Ordering::Release);
                                }
                            }
                        }
                    }
                }
                consumer.commit_consumer_state(CommitMode::Sync).ok();
                consumer.unsubscribe();
            })
        })
        .collect();
    for m in members {
        m.join().unwrap();
    }
}

#[test]
fn a_group_of_three_resumes_after_a_restart_with_nothing_lost_or_duplicated() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve(dir.path());
    broker.create_topic(TOPIC, 6, TopicConfig::new()).unwrap();
    let bootstrap = server.local_addr().to_string();

    let producer = idempotent_producer(&bootstrap);
    for i in 0..RECORDS {
        let (key, value) = (format!("key-{i}"), format!("order-{i}"));
        send(&producer, BaseRecord::to(TOPIC).key(&key).payload(&value));
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    drop(producer);
    let total: i64 = (0..6)
        .map(|p| {
            broker
                .topic(TOPIC)
                .unwrap()
                .partition(p)
                .unwrap()
                .high_watermark()
        })
        .sum();
    assert_eq!(
        total, RECORDS as i64,
        "idempotent producer wrote each record once"
    );

    // First run: consume about half, commit, stop.
    let seen = Arc::new(Mutex::new(Seen::default()));
    consume(&bootstrap, &seen, RECORDS / 2);
    let first = seen.lock().unwrap().positions.len();
    assert!(
        (RECORDS / 2..RECORDS).contains(&first),
        "first run consumed {first}"
    );

    // Restart the server and the broker on the same data directory.
    server.shutdown().unwrap();
    broker.close().unwrap();
    drop(broker);
    let (broker, server) = serve(dir.path());
    let bootstrap = server.local_addr().to_string();

    // Second run: the group resumes from its committed offsets.
    consume(&bootstrap, &seen, RECORDS);
    let s = seen.lock().unwrap();
    assert_eq!(s.duplicates, 0, "records delivered twice");
    assert_eq!(s.positions.len(), RECORDS, "records lost");
    assert_eq!(s.values.len(), RECORDS);
    drop(s);
    server.shutdown().unwrap();
    broker.close().unwrap();
}
