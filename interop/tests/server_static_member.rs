//! Static membership (KIP-345) with librdkafka: a member with `group.instance.id`
//! restarts within its session timeout and gets its partitions back under a new member
//! id, in the same generation: the other member sees no rebalance. Both the follower
//! and the leader of the group are restarted (a returning leader is answered with the
//! group's assignment as it stands, it does not assign again), and the other member is
//! watched for several heartbeat intervals after the restart, long enough to be told
//! of a rebalance.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use tidelog::TopicConfig;
use tidelog_interop::groups::{assert_disjoint, free_port, serve_on, stable_assignment};

const TOPIC: &str = "static";
const GROUP: &str = "static-group";
const PARTITIONS: i32 = 4;
const HEARTBEAT_MS: u64 = 300;

/// The rebalance callbacks a member went through, in order.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    fn push(&self, e: String) {
        self.0.lock().unwrap().push(e);
    }

    fn list(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Records the rebalance callbacks of a member.
struct Recording(Events);

impl rdkafka::ClientContext for Recording {}

impl ConsumerContext for Recording {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => self.0.push(format!("assign {}", tpl.count())),
            Rebalance::Revoke(tpl) => self.0.push(format!("revoke {}", tpl.count())),
            Rebalance::Error(e) => self.0.push(format!("error {e}")),
        }
    }
}

/// A consumer process with `group.instance.id` = `instance`; it polls until `stop`,
/// then closes (a static member sends no LeaveGroup when it closes).
fn member(
    bootstrap: &str,
    instance: &str,
    events: Events,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let (bootstrap, instance) = (bootstrap.to_string(), instance.to_string());
    thread::spawn(move || {
        let consumer: BaseConsumer<Recording> = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", GROUP)
            .set("group.instance.id", &instance)
            .set("session.timeout.ms", "30000")
            .set("heartbeat.interval.ms", HEARTBEAT_MS.to_string())
            .set("auto.offset.reset", "earliest")
            .create_with_context(Recording(events))
            .expect("consumer");
        consumer.subscribe(&[TOPIC]).expect("subscribe");
        let deadline = Instant::now() + Duration::from_secs(90);
        while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
            let _ = consumer.poll(Duration::from_millis(100));
        }
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

/// The member id of instance `instance` and whether it leads the group.
fn role(broker: &tidelog::Broker, instance: &str) -> (String, bool) {
    let d = broker.group_coordinator().describe_group(GROUP).unwrap();
    let m = d
        .members
        .iter()
        .find(|m| m.group_instance_id.as_deref() == Some(instance))
        .expect("the instance is a member");
    (m.member_id.clone(), m.member_id == d.leader)
}

/// Two static members "first" and "second" (the first one to join leads the group);
/// `restarted` restarts within its session timeout; the other must see nothing.
fn restart_without_rebalance(restarted: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (broker, server) = serve_on(dir.path(), port);
    broker
        .create_topic(TOPIC, PARTITIONS, TopicConfig::new())
        .unwrap();
    let bootstrap = format!("127.0.0.1:{port}");

    let mut stops = std::collections::BTreeMap::new();
    let mut events = std::collections::BTreeMap::new();
    let mut threads = std::collections::BTreeMap::new();
    for (i, name) in ["first", "second"].into_iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let ev = Events::default();
        threads.insert(name, member(&bootstrap, name, ev.clone(), stop.clone()));
        stops.insert(name, stop);
        events.insert(name, ev);
        if i == 0 {
            wait_stable_with(&broker, 1);
        }
    }
    let (generation, before) = wait_stable_with(&broker, 2);
    assert!(role(&broker, "first").1, "the first member leads");
    let other = if restarted == "first" {
        "second"
    } else {
        "first"
    };
    let (old_id, was_leader) = role(&broker, restarted);
    // Let the other member see its (last) assignment, then watch it from here.
    thread::sleep(Duration::from_millis(10 * HEARTBEAT_MS));
    let other_before = events[other].list();

    // The process stops (no LeaveGroup) and a new one with the same instance id starts
    // a moment later.
    stops[restarted].store(true, Ordering::Release);
    threads.remove(restarted).unwrap().join().unwrap();
    thread::sleep(Duration::from_millis(1_000));
    let stop = Arc::new(AtomicBool::new(false));
    let ev = Events::default();
    let again = member(&bootstrap, restarted, ev.clone(), stop.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ev.list().iter().any(|e| e.starts_with("assign")) {
        assert!(
            Instant::now() < deadline,
            "the restarted static member got nothing: {:?}",
            ev.list()
        );
        thread::sleep(Duration::from_millis(20));
    }
    // Several heartbeat intervals: a rebalance would reach the other member by then.
    thread::sleep(Duration::from_millis(10 * HEARTBEAT_MS));
    let (generation_after, after) = wait_stable_with(&broker, 2);
    assert_eq!(
        events[other].list(),
        other_before,
        "the other member went through a rebalance when {restarted} restarted"
    );
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
        "the same partitions, under a new id for {restarted}"
    );
    let (new_id, is_leader) = role(&broker, restarted);
    assert_ne!(new_id, old_id, "{restarted} rejoined under a new member id");
    assert_eq!(is_leader, was_leader, "the leader stays the leader");
    assert_eq!(
        ev.list(),
        vec![format!(
            "assign {}",
            before.iter().find(|(id, _)| *id == old_id).unwrap().1.len()
        )],
        "the restarted member got its old partitions once"
    );

    stop.store(true, Ordering::Release);
    again.join().unwrap();
    stops[other].store(true, Ordering::Release);
    threads.remove(other).unwrap().join().unwrap();
    server.shutdown().unwrap();
    broker.close().unwrap();
}

#[test]
fn a_static_follower_restarts_without_a_rebalance_of_the_other() {
    restart_without_rebalance("second");
}

#[test]
fn a_static_leader_restarts_without_a_rebalance_of_the_other() {
    restart_without_rebalance("first");
}
