//! A rolling restart with a producer running: three `tidelog serve` child processes with
//! the default settings, a topic with three partitions and three replicas, and an
//! idempotent acks=all producer (librdkafka) sending numbered records throughout. Each
//! node in turn gets SIGTERM (a controlled shutdown moves its leaderships to other
//! in-sync replicas before it exits), is started again, and rejoins every ISR before the
//! next one goes.
//!
//! Nothing is lost: every record is acknowledged, and after a clean stop every
//! partition's log is byte-identical on the three nodes and holds every acknowledged
//! record once, in order, at its acknowledged offset. The produce stall of each
//! partition around each shutdown (the longest gap between two acknowledgements) is
//! printed (docs/cluster.md, "Operations", points to it). The bound asserted only
//! catches a hang.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::Producer;
use tidelog_interop::cluster::{Processes, describe, describe_any, eventually};
use tidelog_interop::numbered::{self, Ack};

const TOPIC: &str = "rolling";
const PARTITIONS: i32 = 3;
const WAIT: Duration = Duration::from_secs(60);

/// The longest gap between consecutive acknowledgements of one partition that overlaps
/// `[from, to]`.
fn stall(acks: &BTreeMap<u64, Ack>, from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = acks.values().map(|a| a.at).collect();
    times.sort_unstable();
    times
        .windows(2)
        .filter(|w| w[1] >= from && w[0] <= to)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

#[test]
fn a_rolling_restart_loses_nothing_and_stalls_producers_briefly() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(tidelog_interop::tidelog_bin(), root.path(), 3, &[]);
    let layout = nodes.layout.clone();
    let all = [0usize, 1, 2];
    eventually("three brokers", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.brokers.len() == 3)
    });
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", layout.bootstrap())
        .create()
        .unwrap();
    for r in block_on(
        admin.create_topics(
            &[NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(3))
                .set("min.insync.replicas", "2")],
            &AdminOptions::new().operation_timeout(Some(WAIT)),
        ),
    )
    .unwrap()
    {
        r.unwrap();
    }
    drop(admin);
    eventually("every partition in sync", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3))
    });

    let producer = numbered::producer(&layout.bootstrap(), Duration::from_secs(120));
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
                300,
                &stop,
                Duration::from_secs(120),
            )
        })
    };
    eventually("records flowing", WAIT, || {
        (deliveries.acked_count() > 1000).then_some(())
    });

    let mut windows = Vec::new();
    for i in all {
        let view = describe_any(&layout, &all, TOPIC).expect("metadata");
        let led = view
            .partitions
            .iter()
            .filter(|p| p.leader == i as i32 + 1)
            .count();
        let from = Instant::now();
        assert!(
            nodes.terminate(i),
            "node {} stops cleanly\n{}",
            i + 1,
            nodes.logs()
        );
        let exited = Instant::now();
        // It moved its leaderships and left the ISRs before it exited.
        assert_eq!(
            nodes.count_in_logs(&format!("controlled shutdown done node={}", i + 1)),
            1,
            "node {} made a controlled shutdown\n{}",
            i + 1,
            nodes.logs()
        );
        eventually("the survivors' metadata without it", WAIT, || {
            describe_any(&layout, &all, TOPIC).filter(|v| {
                v.partitions
                    .iter()
                    .all(|p| p.leader != i as i32 + 1 && !p.isr.contains(&(i as i32 + 1)))
            })
        });
        println!(
            "node {} (leader of {led} partitions, controller: {}) stopped in {:?}",
            i + 1,
            view.controller == i as i32 + 1,
            exited - from
        );
        // Records keep flowing while it is down.
        std::thread::sleep(Duration::from_secs(1));
        windows.push((i, from, exited + Duration::from_secs(1)));
        nodes.restart(i);
        eventually(&format!("node {} back in every ISR", i + 1), WAIT, || {
            describe(&layout.addr(i), TOPIC, Duration::from_secs(2)).filter(|v| v.fully_in_sync(3))
        });
    }
    // Some more records after the last restart.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let (sent, flushed) = sender.join().unwrap();
    assert!(flushed, "the producer flushed");
    let failed = deliveries.failed.load(Ordering::Relaxed);
    assert_eq!(failed, 0, "librdkafka gave up on no record");
    assert_eq!(deliveries.acked_count(), sent, "every record acknowledged");
    let acked = deliveries.snapshot();
    let mut worst = Duration::ZERO;
    for (i, from, to) in &windows {
        let stalls: Vec<Duration> = (0..PARTITIONS)
            .map(|p| stall(&acked[&p], *from, *to))
            .collect();
        println!(
            "produce stall per partition around node {}'s shutdown: {stalls:?}",
            i + 1
        );
        worst = stalls.into_iter().fold(worst, Duration::max);
    }
    println!("{sent} records, worst stall {worst:?}");
    assert!(
        worst < Duration::from_secs(20),
        "a producer hung: {worst:?}"
    );

    eventually("every partition in sync at the end", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3))
    });
    let stopped = nodes.terminate_all();
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );
    let counts = numbered::check_logs(&nodes, &all, TOPIC, PARTITIONS, &acked);
    assert_eq!(counts.iter().sum::<usize>() as u64, sent);
}
