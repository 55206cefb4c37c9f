//! The chaos test: three `tidelog serve` child processes, a topic with three partitions,
//! replication factor 3 and `min.insync.replicas=2`, and an idempotent acks=all producer
//! (librdkafka) sending numbered records to every partition while the test kills a node
//! with SIGKILL several times (the leader of a partition, then the controller, then
//! nodes chosen at random), restarting each after a pause. librdkafka retries what the
//! dead leader did not answer on the new leader (NOT_LEADER_OR_FOLLOWER, then a metadata
//! refresh), so the idempotent producer state on the new leader is what keeps a retried
//! batch from being written twice.
//!
//! At the end, after a clean stop of every node: each partition's log is byte-identical
//! on the three nodes; every acknowledged record is in it exactly once, at the offset the
//! acknowledgement gave, and the records of a partition are in the order they were sent.
//!
//! The run is seeded: the seed is printed, and `TIDELOG_CHAOS_SEED=N` replays its
//! choices (victims and pauses). `TIDELOG_CHAOS_SESSION_MS` sets the broker session
//! timeout (2000 here to keep the test short; 9000 is Kafka's default).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext};
use tidelog_interop::cluster::{Processes, Rng, describe, describe_any, eventually, read_log};

const TOPIC: &str = "chaos";
const PARTITIONS: i32 = 3;
const ROUNDS: usize = 6;
const WAIT: Duration = Duration::from_secs(60);

/// What librdkafka reported: per partition, `value -> offset` of acknowledged records,
/// and the count of records it gave up on.
#[derive(Clone, Default)]
struct Deliveries {
    acked: Arc<Mutex<HashMap<i32, BTreeMap<u64, i64>>>>,
    failed: Arc<AtomicU64>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => {
                let (_, seq) = parse(m.payload().expect("a value"));
                self.acked
                    .lock()
                    .unwrap()
                    .entry(m.partition())
                    .or_default()
                    .insert(seq, m.offset());
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// `partition:sequence`.
fn parse(value: &[u8]) -> (i32, u64) {
    let s = std::str::from_utf8(value).expect("utf-8 value");
    let (p, n) = s.split_once(':').expect("partition:sequence");
    (p.parse().expect("partition"), n.parse().expect("sequence"))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Sends `partition:n` records round-robin over the partitions until `stop`, keeping at
/// most 2000 unacknowledged.
fn produce(producer: &BaseProducer<Deliveries>, d: &Deliveries, stop: &AtomicBool) -> u64 {
    let mut next = [0u64; PARTITIONS as usize];
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
        let done = d
            .acked
            .lock()
            .unwrap()
            .values()
            .map(|m| m.len() as u64)
            .sum::<u64>()
            + d.failed.load(Ordering::Relaxed);
        if sent - done >= 2000 {
            producer.poll(Duration::from_millis(10));
            continue;
        }
        let p = (sent % PARTITIONS as u64) as i32;
        let value = format!("{p}:{}", next[p as usize]);
        match producer.send(
            BaseRecord::<(), String>::to(TOPIC)
                .payload(&value)
                .partition(p),
        ) {
            Ok(()) => {
                next[p as usize] += 1;
                sent += 1;
            }
            Err(_) => {
                producer.poll(Duration::from_millis(10));
                continue;
            }
        }
        producer.poll(Duration::ZERO);
        if sent.is_multiple_of(20) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    sent
}

#[test]
fn kill_nine_of_any_node_loses_no_acknowledged_record() {
    let seed = env_u64("TIDELOG_CHAOS_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let session_ms = env_u64("TIDELOG_CHAOS_SESSION_MS").unwrap_or(2000);
    println!(
        "chaos seed {seed} (replay with TIDELOG_CHAOS_SEED={seed}), session timeout {session_ms} ms"
    );
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    // Produce at debug: each duplicate batch a new leader did not append again is a line.
    let mut nodes = Processes::start_logged(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &[
            "--broker-session-timeout-ms",
            &session_ms.to_string(),
            "--replica-lag-time-max-ms",
            "3000",
        ],
        "info,tidelog::server::api::produce=debug",
    );
    let all = [0usize, 1, 2];
    let layout = nodes.layout.clone();
    let bootstrap = layout.bootstrap();
    eventually("three brokers", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.brokers.len() == 3)
    });
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let created = block_on(
        admin.create_topics(
            &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(3))
                .set("min.insync.replicas", "2")],
            &AdminOptions::new().operation_timeout(Some(WAIT)),
        ),
    )
    .unwrap();
    for r in created {
        r.unwrap();
    }
    drop(admin);
    eventually(
        "every partition led with three in-sync replicas",
        WAIT,
        || describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3)),
    );

    let deliveries = Deliveries::default();
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "none")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "180000")
        .set("request.timeout.ms", "10000")
        .create_with_context(deliveries.clone())
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        let d = deliveries.clone();
        std::thread::spawn(move || {
            let sent = produce(&producer, &d, &stop);
            let flushed = producer.flush(Duration::from_secs(180));
            (sent, flushed.is_ok())
        })
    };

    for round in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200)));
        let view = eventually("metadata before a kill", WAIT, || {
            describe_any(&layout, &all, TOPIC)
        });
        let (victim, why) = match round {
            0 => {
                let p = rng.below(PARTITIONS as u64) as usize;
                (
                    view.partitions[p].leader,
                    format!("the leader of partition {p}"),
                )
            }
            1 if view.controller >= 1 => (view.controller, "the controller".to_string()),
            _ => (rng.below(3) as i32 + 1, "chosen at random".to_string()),
        };
        let i = (victim - 1) as usize;
        let acked_before: usize = deliveries
            .acked
            .lock()
            .unwrap()
            .values()
            .map(BTreeMap::len)
            .sum();
        nodes.kill(i);
        let pause = Duration::from_millis(500 + rng.below(3000));
        println!(
            "round {round}: kill -9 node {victim} ({why}; controller {}), {acked_before} acknowledged so far, restart after {pause:?}",
            view.controller
        );
        std::thread::sleep(pause);
        nodes.restart(i);
        let started = Instant::now();
        // Healed: the restarted node answers (it caught up with the metadata) and every
        // partition has three in-sync replicas again.
        eventually(
            &format!("node {victim} back in every ISR\n{}", nodes.logs()),
            WAIT,
            || {
                describe(&layout.addr(i), TOPIC, Duration::from_secs(2))
                    .filter(|v| v.fully_in_sync(3))
            },
        );
        println!(
            "round {round}: healed {:?} after the restart",
            started.elapsed()
        );
    }

    stop.store(true, Ordering::Release);
    let (sent, flushed) = sender.join().unwrap();
    assert!(flushed, "the producer flushed within 180 s");
    let acked = deliveries.acked.lock().unwrap().clone();
    let failed = deliveries.failed.load(Ordering::Relaxed);
    let total: usize = acked.values().map(BTreeMap::len).sum();
    println!("{sent} sent, {total} acknowledged, {failed} failed");
    assert_eq!(failed, 0, "librdkafka gave up on no record");
    assert_eq!(total as u64, sent, "every record sent was acknowledged");
    eventually("every partition fully in sync at the end", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3))
    });
    println!(
        "{} retried batches answered as duplicates (idempotence across failover)",
        nodes.count_in_logs("duplicate batch not appended again")
    );
    for i in all {
        assert!(
            nodes.terminate(i),
            "node {} stops cleanly\n{}",
            i + 1,
            nodes.logs()
        );
    }

    for p in 0..PARTITIONS {
        let logs: Vec<_> = all
            .iter()
            .map(|i| read_log(&nodes.dir(*i), TOPIC, p))
            .collect();
        for (i, l) in logs.iter().enumerate().skip(1) {
            assert_eq!(
                (l.end, l.bytes.len()),
                (logs[0].end, logs[0].bytes.len()),
                "{TOPIC}-{p}: node {} and node 1 end alike",
                i + 1
            );
            assert!(
                l.bytes == logs[0].bytes,
                "{TOPIC}-{p}: node {} holds the same bytes as node 1",
                i + 1
            );
        }
        let mut at: HashMap<u64, i64> = HashMap::new();
        let mut last: Option<u64> = None;
        for (offset, value) in &logs[0].records {
            let (part, seq) = parse(value);
            assert_eq!(part, p, "{TOPIC}-{p} holds only its own records");
            assert!(
                at.insert(seq, *offset).is_none(),
                "{TOPIC}-{p}: record {seq} is in the log twice (offsets {} and {offset})",
                at[&seq]
            );
            assert!(
                last.is_none_or(|l| seq > l),
                "{TOPIC}-{p}: record {seq} at offset {offset} follows record {last:?}"
            );
            last = Some(seq);
        }
        let mine = acked.get(&p).cloned().unwrap_or_default();
        assert!(!mine.is_empty(), "{TOPIC}-{p} got records");
        for (seq, offset) in &mine {
            assert_eq!(
                at.get(seq),
                Some(offset),
                "{TOPIC}-{p}: acknowledged record {seq} at offset {offset}"
            );
        }
        println!(
            "{TOPIC}-{p}: {} records, {} acknowledged, identical on 3 nodes",
            logs[0].records.len(),
            mine.len()
        );
    }
}
