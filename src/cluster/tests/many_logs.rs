//! A node busy opening many partition logs at once (a topic with many partitions, or
//! the first share group's `__share_group_state`) keeps answering the controller: the
//! metadata publisher opens the logs, and the Raft thread, which answers the
//! controller's heartbeats, waits on nothing the opening holds. The controller neither
//! fences it nor loses its majority, and no leadership moves.

use std::collections::BTreeMap;

use super::replication::broker;
use super::*;

/// How long each log takes to open on the slow node (a test hook: a slow disk).
const OPEN_DELAY: Duration = Duration::from_millis(100);
/// Partitions of the topic: the slow node opens its replicas one after another for twice
/// the session timeout.
const PARTITIONS: i32 = (2 * SESSION.as_millis() / OPEN_DELAY.as_millis()) as i32;

/// Every partition's leader and leader epoch in `img`, by topic and index.
fn leaderships(img: &MetadataImage) -> BTreeMap<(String, usize), (i32, i32)> {
    img.topics
        .iter()
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .map(move |(p, x)| ((name.clone(), p), (x.leader, x.leader_epoch)))
        })
        .collect()
}

/// Panics if a running node's image has a broker fenced.
fn assert_none_fenced(c: &TestCluster, when: &str) {
    for i in c.running() {
        let unfenced = c.node(i).image().unfenced_brokers();
        assert_eq!(
            unfenced,
            vec![1, 2, 3],
            "node {}'s image has a broker fenced {when}",
            i + 1
        );
    }
}

/// A follower opens its logs slowly: the controller and the other node, a majority, go
/// on without it, and would fence it if it went silent.
#[test]
fn a_node_opening_many_logs_at_once_is_not_fenced() {
    opening_slowly(false);
}

/// The controller opens its logs slowly: the followers would elect another if it went
/// silent.
#[test]
fn a_controller_opening_many_logs_at_once_stays_the_controller() {
    opening_slowly(true);
}

/// Creates a topic with [`PARTITIONS`] partitions on three nodes, one of which (the
/// controller if `controller_slow`) opens each log [`OPEN_DELAY`] slowly: no broker is
/// fenced, the controller stays, and no leadership moves.
fn opening_slowly(controller_slow: bool) {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let controller = c.node(0).controller_id().expect("a controller");
    let before = leaderships(&c.node(0).image());
    let slow = (0..3)
        .find(|&i| (i as i32 + 1 == controller) == controller_slow)
        .unwrap();
    broker(&c, slow).slow_log_opens(OPEN_DELAY);
    let creator = (controller - 1) as usize;
    std::thread::scope(|s| {
        let create = s.spawn(|| {
            c.node(creator).create_topic(
                &NewTopic {
                    name: "wide".into(),
                    partitions: PARTITIONS,
                    replication_factor: 3,
                    ..Default::default()
                },
                false,
                WAIT,
            )
        });
        // Until every node has opened its replica of every partition (the slow one for
        // twice the session timeout), no broker is fenced anywhere.
        wait_until("every replica of the topic open", || {
            assert_none_fenced(&c, "while a node opens its logs");
            create.is_finished()
                && (0..3).all(|i| {
                    (0..PARTITIONS).all(|p| broker(&c, i).hosted_partition("wide", p).is_some())
                })
        });
        create.join().unwrap().unwrap();
    });
    // A node silent for the session timeout would be fenced by now: the controller
    // checks every tick.
    std::thread::sleep(SESSION);
    c.wait_same_image();
    assert_none_fenced(&c, "after a node opened its logs");
    for i in c.running() {
        assert_eq!(
            c.node(i).controller_id(),
            Some(controller),
            "node {}'s controller",
            i + 1
        );
    }
    // No leadership moved: the leaders the topics had, and the new topic's first ones.
    let after = leaderships(&c.node(0).image());
    for (key, now) in &after {
        let expected = match before.get(key) {
            Some(b) => *b,
            None => {
                let img = c.node(0).image();
                (img.topic(&key.0).unwrap().partitions[key.1].replicas[0], 0)
            }
        };
        assert_eq!(*now, expected, "leader and leader epoch of {key:?}");
    }
    assert_eq!(
        after.keys().filter(|(t, _)| t == "wide").count(),
        PARTITIONS as usize
    );
}
