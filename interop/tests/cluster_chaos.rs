//! The chaos test: three `tidelog serve` child processes, a topic with three partitions,
//! replication factor 3 and `min.insync.replicas=2`, and an idempotent acks=all producer
//! (librdkafka) sending numbered records to every partition while the test kills a node
//! with SIGKILL seven times (the leader of a partition, the controller, then nodes
//! chosen at random and leaders of partitions), restarting each after a pause. Before
//! two of the leader kills, one follower of that partition is frozen (SIGSTOP) for a
//! moment and resumed just after the kill: the leader's acks=all requests then wait,
//! replicated to the other follower but unanswered, when it dies. librdkafka retries them
//! on the new leader (NOT_LEADER_OR_FOLLOWER or a lost connection, then a metadata
//! refresh), whose idempotent producer state must answer them as duplicates, not
//! append them twice; and if the frozen follower becomes the leader, it must have every
//! record that was acknowledged.
//!
//! At the end, after a clean stop of every node: each partition's log is byte-identical
//! on the three nodes; every acknowledged record is in it exactly once, at the offset the
//! acknowledgement gave, and the records of a partition are in the order they were sent.
//!
//! The run is seeded: the seed is printed, and `TIDELOG_CHAOS_SEED=N` replays its
//! choices (victims and pauses). `TIDELOG_CHAOS_SESSION_MS` sets the broker session
//! timeout (2000 here to keep the test short; 9000 is Kafka's default).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_executor::block_on;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::Producer;
use tidelog_interop::cluster::{Processes, Rng, describe, describe_any, eventually};
use tidelog_interop::numbered;

const TOPIC: &str = "chaos";
const PARTITIONS: i32 = 3;
const ROUNDS: usize = 7;
const WAIT: Duration = Duration::from_secs(60);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
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

    let producer = numbered::producer(&bootstrap, Duration::from_secs(180));
    let deliveries = producer.context().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            numbered::run(
                &producer,
                TOPIC,
                PARTITIONS,
                0,
                u64::MAX,
                2000,
                &stop,
                Duration::from_secs(180),
            )
        })
    };

    for round in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200)));
        let view = eventually("metadata before a kill", WAIT, || {
            describe_any(&layout, &all, TOPIC)
        });
        // Odd rounds from 3 on first freeze a follower of the partition whose leader
        // dies: the leader goes on appending what that follower does not fetch, so
        // acks=all requests wait, replicated to the other follower but unanswered, when
        // the leader dies; librdkafka retries them on the new leader, which must answer
        // them as duplicates.
        let freeze = round >= 3 && round % 2 == 1;
        let p = rng.below(PARTITIONS as u64) as usize;
        let (victim, why) = match round {
            1 if view.controller >= 1 => (view.controller, "the controller".to_string()),
            0 | 3 | 5 => (
                view.partitions[p].leader,
                format!("the leader of partition {p}"),
            ),
            _ => (rng.below(3) as i32 + 1, "chosen at random".to_string()),
        };
        let i = (victim - 1) as usize;
        let acked_before = deliveries.acked_count();
        let frozen = freeze.then(|| {
            let others: Vec<usize> = all.iter().copied().filter(|k| *k != i).collect();
            let f = others[rng.below(2) as usize];
            nodes.signal(f, "STOP");
            let hold = Duration::from_millis(200 + rng.below(600));
            println!(
                "round {round}: node {} frozen (SIGSTOP) for {hold:?} before the kill",
                f + 1
            );
            std::thread::sleep(hold);
            f
        });
        nodes.kill(i);
        if let Some(f) = frozen {
            // Back before the session timeout: the cluster keeps a majority.
            std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
            nodes.signal(f, "CONT");
        }
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
    let acked = deliveries.snapshot();
    let failed = deliveries.failed.load(Ordering::Relaxed);
    let total = deliveries.acked_count();
    println!("{sent} sent, {total} acknowledged, {failed} failed");
    assert_eq!(failed, 0, "librdkafka gave up on no record");
    assert_eq!(total, sent, "every record sent was acknowledged");
    eventually("every partition fully in sync at the end", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3))
    });
    println!(
        "{} retried batches answered as duplicates (idempotence across failover)",
        nodes.count_in_logs("duplicate batch not appended again")
    );
    let stopped = nodes.terminate_all();
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );

    let counts = numbered::check_logs(&nodes, &all, TOPIC, PARTITIONS, &acked);
    for (p, n) in counts.iter().enumerate() {
        println!(
            "{TOPIC}-{p}: {n} records, {} acknowledged, identical on 3 nodes",
            acked.get(&(p as i32)).map_or(0, |m| m.len())
        );
        assert!(*n > 0, "{TOPIC}-{p} got records");
    }
}
