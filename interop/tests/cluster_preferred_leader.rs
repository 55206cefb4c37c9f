//! Automatic preferred-leader election (Kafka's `auto.leader.rebalance.enable`): three
//! `tidelog serve` child processes checking the leaders' balance every second
//! (`--leader-imbalance-check-interval-seconds 1`; Kafka's default is 300). A rolling
//! restart of nodes 1 and 2 (SIGTERM, restart, rejoin) leaves every leader on node 3;
//! once they are back in the ISR the controller moves each partition's leadership back
//! to its preferred replica, the first of its replicas, with a new leader epoch.

use std::time::Duration;

use futures_executor::block_on;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use tidelog_interop::cluster::{Processes, describe, describe_any, eventually};

const TOPIC: &str = "balanced";
const WAIT: Duration = Duration::from_secs(45);

#[test]
fn leaderships_return_to_the_preferred_replicas_after_a_rolling_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &["--leader-imbalance-check-interval-seconds", "1"],
    );
    let layout = nodes.layout.clone();
    let all = [0usize, 1, 2];
    eventually("three brokers", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.brokers.len() == 3)
    });
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", layout.bootstrap())
        .create()
        .unwrap();
    for r in block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, 6, TopicReplication::Fixed(3))],
        &AdminOptions::new().operation_timeout(Some(WAIT)),
    ))
    .unwrap()
    {
        r.unwrap();
    }
    drop(admin);
    let start = eventually("every partition in sync", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(3))
    });
    for p in &start.partitions {
        assert_eq!(
            p.leader, p.replicas[0],
            "the preferred replica leads at first"
        );
    }

    for i in [0usize, 1] {
        assert!(nodes.terminate(i), "node {} stops cleanly", i + 1);
        // Its leaderships moved before it exited.
        let moved = eventually("leaders moved away", WAIT, || {
            describe_any(&layout, &[2], TOPIC)
        });
        assert!(
            moved.partitions.iter().all(|p| p.leader != i as i32 + 1),
            "{moved:?}"
        );
        nodes.restart(i);
        eventually(&format!("node {} back in every ISR", i + 1), WAIT, || {
            describe(&layout.addr(i), TOPIC, Duration::from_secs(2)).filter(|v| v.fully_in_sync(3))
        });
    }

    let balanced = eventually(
        "every partition led by its preferred replica again",
        WAIT,
        || {
            describe_any(&layout, &all, TOPIC)
                .filter(|v| v.fully_in_sync(3))
                .filter(|v| v.partitions.iter().all(|p| p.leader == p.replicas[0]))
        },
    );
    for (before, after) in start.partitions.iter().zip(&balanced.partitions) {
        if before.leader != 3 {
            assert!(
                after.leader_epoch >= before.leader_epoch + 2,
                "moved away and back: {before:?} -> {after:?}"
            );
        }
    }
    let stopped = nodes.terminate_all();
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );
}
