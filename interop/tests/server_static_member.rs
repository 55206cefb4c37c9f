//! Static membership (KIP-345) with librdkafka: a member with `group.instance.id`
//! restarts within its session timeout and gets its partitions back under a new member
//! id, in the same generation: the other member sees no rebalance.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use tidelog::TopicConfig;
use tidelog_interop::groups::{assert_disjoint, free_port, serve_on, stable_assignment};

const TOPIC: &str = "static";
const GROUP: &str = "static-group";
const PARTITIONS: i32 = 4;

/// Counts the rebalances a member goes through.
struct Counting(Arc<AtomicUsize>);

impl rdkafka::ClientContext for Counting {}

impl ConsumerContext for Counting {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(_) | Rebalance::Revoke(_) = rebalance {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }
}

fn member(
    bootstrap: &str,
    instance: &str,
    rebalances: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let (bootstrap, instance) = (bootstrap.to_string(), instance.to_string());
    thread::spawn(move || {
        let consumer: BaseConsumer<Counting> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", GROUP)
            .set("group.instance.id", &instance)
            .set("session.timeout.ms", "30000")
            .set("heartbeat.interval.ms", "300")
            .set("auto.offset.reset", "earliest")
            .create_with_context(Counting(rebalances))
            .expect("consumer");
        consumer.subscribe(&[TOPIC]).expect("subscribe");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        // A static member closes without LeaveGroup: its entry waits for it.
    })
}

fn wait_stable_with(broker: &tidelog::Broker, members: usize) -> (i32, Vec<(String, Vec<i32>)>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((generation, assignment)) = stable_assignment(broker, GROUP) {
            assert_disjoint(generation, &assignment);
            let covered: usize = assignment.values().map(Vec::len).sum();
            if assignment.len() == members && covered == PARTITIONS as usize {
                return (generation, assignment.into_iter().collect());
            }
        }
        assert!(Instant::now() < deadline, "the group never settled");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_static_member_restarts_without_a_rebalance_of_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (broker, server) = serve_on(dir.path(), port);
    broker
        .create_topic(TOPIC, PARTITIONS, TopicConfig::new())
        .unwrap();
    let bootstrap = format!("127.0.0.1:{port}");

    let b_rebalances = Arc::new(AtomicUsize::new(0));
    let stop_b = Arc::new(AtomicBool::new(false));
    let b = member(&bootstrap, "b", b_rebalances.clone(), stop_b.clone());
    let stop_a = Arc::new(AtomicBool::new(false));
    let a = member(&bootstrap, "a", Arc::default(), stop_a.clone());
    let (generation, before) = wait_stable_with(&broker, 2);
    // Let b see its (last) assignment, then count from here.
    thread::sleep(Duration::from_millis(500));
    let b_before = b_rebalances.load(Ordering::Acquire);

    // a's process stops and a new one with the same instance id starts.
    stop_a.store(true, Ordering::Release);
    a.join().unwrap();
    let stop_a = Arc::new(AtomicBool::new(false));
    let a2_rebalances = Arc::new(AtomicUsize::new(0));
    let a2 = member(&bootstrap, "a", a2_rebalances.clone(), stop_a.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while a2_rebalances.load(Ordering::Acquire) == 0 {
        assert!(
            Instant::now() < deadline,
            "the restarted static member got nothing"
        );
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(500));
    let (generation_after, after) = wait_stable_with(&broker, 2);
    assert_eq!(
        generation_after, generation,
        "a static restart must not start a generation"
    );
    let parts = |v: &[(String, Vec<i32>)]| {
        let mut p: Vec<Vec<i32>> = v.iter().map(|(_, ps)| ps.clone()).collect();
        p.sort();
        p
    };
    assert_eq!(
        parts(&after),
        parts(&before),
        "the same partitions, under a new id for a"
    );
    assert_ne!(after, before, "a rejoined under a new member id");
    assert_eq!(
        b_rebalances.load(Ordering::Acquire),
        b_before,
        "the other member went through a rebalance"
    );
    stop_a.store(true, Ordering::Release);
    stop_b.store(true, Ordering::Release);
    a2.join().unwrap();
    b.join().unwrap();
    server.shutdown().unwrap();
    broker.close().unwrap();
}
