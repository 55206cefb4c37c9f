//! Rebalances: a member joining, leaving, panicking and going silent. After each, every
//! partition is owned by exactly one live member.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tidelog::{Broker, GroupConfig, GroupConsumer, TopicConfig};

const PARTITIONS: i32 = 4;

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Polls until told to stop, then closes (leaves the group).
    Poll,
    /// Panics once it owns partitions (the drop during unwinding leaves the group).
    PanicWhenAssigned,
    /// Stops polling once it owns partitions, without leaving: only the session
    /// timeout can remove it.
    SilentWhenAssigned,
}

struct Member {
    /// The member's generation and partitions after its last poll.
    assignment: Arc<Mutex<(i32, Vec<i32>)>>,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

fn start(broker: &Broker, name: &str, behaviour: Behaviour) -> Member {
    let assignment = Arc::new(Mutex::new((-1, Vec::new())));
    let stop = Arc::new(AtomicBool::new(false));
    let config = GroupConfig::new("workers", &["jobs"])
        .session_timeout(Duration::from_millis(400))
        .rebalance_timeout(Duration::from_secs(5))
        .heartbeat_interval(Duration::from_millis(20))
        .client_id(name);
    let mut member = GroupConsumer::join(broker, config).expect("join");
    let (a, s) = (Arc::clone(&assignment), Arc::clone(&stop));
    let handle = std::thread::spawn(move || {
        while !s.load(Ordering::Acquire) {
            member.poll(Duration::from_millis(20)).expect("poll");
            let owned: Vec<i32> = member.assignment().into_iter().map(|(_, p)| p).collect();
            let assigned = !owned.is_empty();
            *a.lock() = (member.generation(), owned);
            if assigned && behaviour == Behaviour::PanicWhenAssigned {
                panic!("member thread dies on purpose");
            }
            if assigned && behaviour == Behaviour::SilentWhenAssigned {
                // Never polls, heartbeats or leaves again.
                std::mem::forget(member);
                return;
            }
        }
        member.close();
    });
    Member {
        assignment,
        stop,
        handle,
    }
}

/// Waits until the live members, all in a generation after `after`, own every
/// partition exactly once, each owning some.
fn wait_balanced(live: &[&Member], after: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut owned: Vec<i32> = Vec::new();
        let mut each_has_some = true;
        for m in live {
            let (generation, a) = m.assignment.lock().clone();
            each_has_some &= !a.is_empty() && generation > after;
            owned.extend(a);
        }
        owned.sort_unstable();
        if each_has_some && owned == (0..PARTITIONS).collect::<Vec<_>>() {
            return;
        }
        assert!(Instant::now() < deadline, "group never settled: {owned:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop(m: Member) {
    m.stop.store(true, Ordering::Release);
    m.handle.join().expect("member thread");
}

#[test]
fn partitions_move_on_join_leave_and_death() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::builder(dir.path())
        .group_min_session_timeout(Duration::from_millis(100))
        .open()
        .expect("open broker");
    broker
        .create_topic("jobs", PARTITIONS, TopicConfig::new())
        .expect("create topic");

    let generation = || {
        broker
            .group_coordinator()
            .describe_group("workers")
            .unwrap()
            .generation_id
    };
    let a = start(&broker, "a", Behaviour::Poll);
    wait_balanced(&[&a], -1);

    // Join: b takes half.
    let b = start(&broker, "b", Behaviour::Poll);
    wait_balanced(&[&a, &b], -1);

    // Leave: a gets everything back.
    let before = generation();
    stop(b);
    wait_balanced(&[&a], before);

    // Death by panic: the member leaves as its thread unwinds.
    let c = start(&broker, "c", Behaviour::PanicWhenAssigned);
    assert!(c.handle.join().is_err(), "c should have panicked");
    wait_balanced(&[&a], c.assignment.lock().0);

    // Death by silence: the session timeout removes it and a takes its partitions.
    let d = start(&broker, "d", Behaviour::SilentWhenAssigned);
    d.handle.join().expect("d thread");
    wait_balanced(&[&a], d.assignment.lock().0);
    let described = broker
        .group_coordinator()
        .describe_group("workers")
        .unwrap();
    assert_eq!(described.members.len(), 1, "{described:?}");

    stop(a);
}
