//! No unclean leader election, end to end (Kafka's `unclean.leader.election.enable=false`):
//! three `tidelog serve` child processes and a partition with two replicas, on nodes 1
//! (the leader) and 2. The follower is killed, so the ISR shrinks to the leader, which
//! then acknowledges records with acks=all alone (`min.insync.replicas=1`). Then the
//! leader is killed too and the follower comes back: it is out of the ISR, so once the
//! controller fenced the dead leader the partition stays offline (LEADER_NOT_AVAILABLE
//! in Metadata, a produce fails) however long the follower is up. When the old leader
//! comes back it leads again, every record it acknowledged is there, and the follower
//! catches up and rejoins the ISR. (Two replicas on three nodes keep a Raft majority of
//! nodes up at every step but while both replicas are down.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::Producer;
use tidelog_interop::cluster::{Processes, describe, describe_any, eventually};
use tidelog_interop::numbered;

const TOPIC: &str = "offline";
const WAIT: Duration = Duration::from_secs(45);
/// LEADER_NOT_AVAILABLE.
const LEADER_NOT_AVAILABLE: i16 = 5;

/// Sends `count` numbered records from `first` and waits for their acknowledgements.
fn produce(bootstrap: &str, first: u64, count: u64) -> std::sync::Arc<numbered::Deliveries> {
    let producer = numbered::producer(bootstrap, Duration::from_secs(30));
    let d = producer.context().clone();
    let stop = AtomicBool::new(false);
    let sender = numbered::run(&producer, TOPIC, 1, first, count, 100, &stop, WAIT);
    assert!(sender.1, "flushed");
    d
}

#[test]
fn a_partition_without_a_live_in_sync_replica_stays_offline_until_one_returns() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &[
            "--broker-session-timeout-ms",
            "2000",
            "--replica-lag-time-max-ms",
            "2000",
        ],
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
    for r in block_on(
        admin.create_topics(
            &[
                NewTopic::new(TOPIC, 1, TopicReplication::Variable(&[&[1, 2]]))
                    .set("min.insync.replicas", "1"),
            ],
            &AdminOptions::new().operation_timeout(Some(WAIT)),
        ),
    )
    .unwrap()
    {
        r.unwrap();
    }
    drop(admin);
    let view = eventually("two in-sync replicas", WAIT, || {
        describe_any(&layout, &all, TOPIC).filter(|v| v.fully_in_sync(2))
    });
    assert_eq!(view.partitions[0].leader, 1, "the first replica leads");
    let (leader, follower, bystander) = (0usize, 1usize, 2usize);

    // Acknowledged by both replicas.
    let first = produce(&layout.bootstrap(), 0, 200);
    assert_eq!(first.acked_count(), 200);

    // The follower dies: the ISR shrinks to the leader, which acknowledges alone.
    nodes.kill(follower);
    eventually("the ISR shrunk to the leader", WAIT, || {
        describe(&layout.addr(leader), TOPIC, Duration::from_secs(2))
            .filter(|v| v.partitions[0].isr == vec![1])
    });
    let second = produce(&layout.addr(leader), 200, 200);
    assert_eq!(second.acked_count(), 200, "the leader alone acknowledges");

    // The leader dies; the out-of-ISR follower comes back (and with it a majority).
    nodes.kill(leader);
    nodes.restart(follower);
    let live = [follower, bystander];
    eventually("the dead leader fenced", WAIT, || {
        describe_any(&layout, &live, TOPIC).filter(|v| v.brokers == vec![2, 3])
    });
    // Offline for as long as we look: three session timeouts.
    let until = Instant::now() + Duration::from_secs(6);
    let mut looks = 0;
    while Instant::now() < until {
        for i in live {
            if let Some(v) = describe(&layout.addr(i), TOPIC, Duration::from_secs(2)) {
                let p = &v.partitions[0];
                assert_eq!(
                    (p.error, p.leader),
                    (LEADER_NOT_AVAILABLE, -1),
                    "node {} shows {TOPIC}-0 offline: {v:?}\n{}",
                    i + 1,
                    nodes.logs()
                );
                assert_eq!(p.isr, vec![1], "the ISR keeps its last member");
                looks += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        looks > 10,
        "the live nodes answered Metadata ({looks} times)"
    );
    let live_bootstrap = format!("{},{}", layout.addr(follower), layout.addr(bystander));
    let refused = numbered::producer(&live_bootstrap, Duration::from_secs(3));
    let d = refused.context().clone();
    let _ = refused.send(
        rdkafka::producer::BaseRecord::<(), String>::to(TOPIC)
            .payload(&"0:999999".to_string())
            .partition(0),
    );
    let _ = refused.flush(Duration::from_secs(10));
    refused.poll(Duration::from_millis(100));
    assert_eq!(
        (d.acked_count(), d.failed.load(Ordering::Relaxed)),
        (0, 1),
        "a produce to the offline partition fails"
    );
    drop(refused);

    // The old leader returns: it leads again, and the follower rejoins.
    nodes.restart(leader);
    let back = eventually("the old leader leads again", WAIT, || {
        describe(&layout.addr(leader), TOPIC, Duration::from_secs(2))
            .filter(|v| v.partitions[0].leader == 1)
    });
    assert!(back.partitions[0].leader_epoch > view.partitions[0].leader_epoch);
    eventually("both replicas back in the ISR", WAIT, || {
        describe(&layout.addr(leader), TOPIC, Duration::from_secs(2)).filter(|v| v.fully_in_sync(2))
    });
    let stopped = nodes.terminate_all();
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );
    let mut acked = first.snapshot();
    for (p, m) in second.snapshot() {
        acked.entry(p).or_default().extend(m);
    }
    let counts = numbered::check_logs(&nodes, &[leader, follower], TOPIC, 1, &acked);
    assert_eq!(
        counts,
        vec![400],
        "every acknowledged record, on both replicas"
    );
}
