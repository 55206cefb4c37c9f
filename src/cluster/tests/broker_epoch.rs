//! KIP-903 in process: a follower's fetch counts toward the high watermark only from the
//! incarnation of that broker the leader's metadata has registered (the broker epoch in
//! Fetch v15's `replica_state`), and only on the inter-broker listener where one is
//! named. Followers are cut off (`pause_fetchers`) so that only the fetches the test
//! sends move the high watermark.

use std::net::SocketAddr;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::failover::{addr, pause, send, values};
use super::replication::{create, leader_index, part};
use super::*;
use crate::cluster::client::Client;
use crate::producer::Acks;

/// The leader's log end in [`uncommitted_tail`].
const END: i64 = 5;

/// A follower fetch of `topic`-0 from [`END`] as node index `i` sends it, to `at`: v15
/// with its broker `epoch`, or (`epoch` None) v11 as a node of an older version does.
/// The partition's error code.
fn follower_fetch(
    at: SocketAddr,
    c: &TestCluster,
    topic: &str,
    i: usize,
    epoch: Option<i64>,
) -> i16 {
    let (replica, offset) = (i as i32 + 1, END);
    let image = c.node(c.running()[0]).image();
    let t = image.topic(topic).unwrap();
    let partition = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_current_leader_epoch(t.partitions[0].leader_epoch)
        .with_partition_max_bytes(1 << 20);
    let topic = FetchTopic::default().with_partitions(vec![partition]);
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1);
    let (request, version) = match epoch {
        Some(epoch) => (
            request
                .with_replica_state(
                    ReplicaState::default()
                        .with_replica_id(BrokerId(replica))
                        .with_replica_epoch(epoch),
                )
                .with_topics(vec![topic.with_topic_id(uuid::Uuid::from_bytes(t.id))]),
            15,
        ),
        None => (
            request.with_replica_id(BrokerId(replica)).with_topics(vec![
                topic.with_topic(TopicName(StrBytes::from_string(topic_name(c, t.id)))),
            ]),
            11,
        ),
    };
    let mut client = Client::new(at.to_string(), "kip903-test");
    let r = client
        .call(&request, version, Duration::from_secs(10))
        .unwrap();
    r.responses[0].partitions[0].error_code
}

fn topic_name(c: &TestCluster, id: [u8; 16]) -> String {
    let image = c.node(c.running()[0]).image();
    image
        .topics
        .iter()
        .find(|(_, t)| t.id == id)
        .map(|(n, _)| n.clone())
        .unwrap()
}

/// The broker epoch node index `i` is registered at, as `on` sees it.
fn epoch_of(c: &TestCluster, on: usize, i: usize) -> i64 {
    c.node(on).image().brokers[&(i as i32 + 1)].epoch
}

/// A topic of three replicas whose leader holds 5 records of which 2 are committed,
/// its followers cut off: (leader index, follower indexes).
fn uncommitted_tail(c: &TestCluster, topic: &str) -> (usize, [usize; 2]) {
    c.wait_settled();
    create(c, topic, 1, Vec::new());
    let l = leader_index(c, topic, 0);
    let leader = part(c, l, topic, 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    send(c, l, topic, Acks::All, &values("committed", 2));
    let followers: Vec<usize> = (0..3).filter(|i| *i != l).collect();
    for &i in &followers {
        pause(c, i, true);
    }
    send(c, l, topic, Acks::Leader, &values("pending", 3));
    assert_eq!((leader.log_end_offset(), leader.high_watermark()), (END, 2));
    (l, [followers[0], followers[1]])
}

#[test]
fn a_follower_fetch_of_another_incarnation_never_moves_the_high_watermark() {
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(60));
    let (l, [a, b]) = uncommitted_tail(&c, "incarnations");
    let leader = part(&c, l, "incarnations", 0);
    let epoch = leader.leader_epoch();
    let at = addr(&c, l);
    // b's current incarnation caught up: counted, and the high watermark waits on a.
    let fetched = follower_fetch(at, &c, "incarnations", b, Some(epoch_of(&c, l, b)));
    assert_eq!(fetched, 0);
    assert_eq!(leader.high_watermark(), 2);
    // An incarnation of a before its registration (a stale process), and one the leader
    // has not seen registered (a restart, as on a wiped disk): refused, not counted.
    let registered = epoch_of(&c, l, a);
    for other in [registered - 1, registered + 1] {
        let fetched = follower_fetch(at, &c, "incarnations", a, Some(other));
        assert_eq!(
            fetched,
            ResponseError::NotLeaderOrFollower.code(),
            "broker epoch {other}, registered {registered}"
        );
        assert_eq!(
            leader.high_watermark(),
            2,
            "broker epoch {other} was counted"
        );
    }
    // a's registered incarnation: counted.
    let fetched = follower_fetch(at, &c, "incarnations", a, Some(registered));
    assert_eq!(fetched, 0);
    // A new leadership (the leader's session lapsed on a loaded machine) forgets b's
    // fetch: the message tells that apart from a fetch that was not counted.
    assert_eq!(
        leader.high_watermark(),
        END,
        "leader epoch {epoch:?} then {:?}, ISR {:?}",
        leader.leader_epoch(),
        leader.isr()
    );
    for i in [a, b] {
        pause(&c, i, false);
    }
}

#[test]
fn follower_fetches_are_taken_only_on_the_inter_broker_listener() {
    let c = TestCluster::with_inter_broker_listener(3, Duration::from_secs(60));
    // Replication itself goes through the REPLICATION listeners (acks=all returns).
    let (l, followers) = uncommitted_tail(&c, "listeners");
    let leader = part(&c, l, "listeners", 0);
    let client_listener = addr(&c, l);
    let replication = c.nodes[l]
        .as_ref()
        .unwrap()
        .listener_addr_by_name("REPLICATION")
        .unwrap();
    // On the client listener: refused, with or without a broker epoch.
    for &i in &followers {
        for epoch in [None, Some(epoch_of(&c, l, i))] {
            let fetched = follower_fetch(client_listener, &c, "listeners", i, epoch);
            assert_eq!(
                fetched,
                ResponseError::NotLeaderOrFollower.code(),
                "a follower fetch of broker {} on the client listener",
                i + 1
            );
        }
    }
    assert_eq!(leader.high_watermark(), 2);
    // On the inter-broker listener: counted with the broker epoch (without one: refused,
    // see `a_follower_fetch_without_a_broker_epoch_is_refused_unless_allowed`).
    let [a, b] = followers;
    assert_eq!(
        follower_fetch(replication, &c, "listeners", a, None),
        ResponseError::NotLeaderOrFollower.code()
    );
    for i in [a, b] {
        let fetched = follower_fetch(replication, &c, "listeners", i, Some(epoch_of(&c, l, i)));
        assert_eq!(fetched, 0);
    }
    assert_eq!(leader.high_watermark(), END);
    for i in followers {
        pause(&c, i, false);
    }
}

#[test]
fn a_follower_fetch_without_a_broker_epoch_is_refused_unless_allowed() {
    // Without an inter-broker listener any connection may say it is a follower: a fetch
    // that carries no broker epoch (Fetch v11, or v15 with -1) cannot be checked against
    // the follower's registration, so it is refused and never moves the high watermark.
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(60));
    let (l, [a, b]) = uncommitted_tail(&c, "no-epoch");
    let leader = part(&c, l, "no-epoch", 0);
    let at = addr(&c, l);
    for i in [a, b] {
        for epoch in [None, Some(-1)] {
            assert_eq!(
                follower_fetch(at, &c, "no-epoch", i, epoch),
                ResponseError::NotLeaderOrFollower.code(),
                "broker {} without an epoch ({epoch:?})",
                i + 1
            );
        }
    }
    assert_eq!(
        leader.high_watermark(),
        2,
        "no fetch without an epoch was counted"
    );
    for i in [a, b] {
        pause(&c, i, false);
    }

    // A rolling upgrade from a version that sends no broker epoch: the switch takes them.
    let mut c = TestCluster::with_lag(3, 1024, Duration::from_secs(60));
    c.fetch_without_epoch = true;
    for i in 0..3 {
        c.halt(i);
        c.restart(i);
    }
    let (l, [a, b]) = uncommitted_tail(&c, "upgrade");
    let leader = part(&c, l, "upgrade", 0);
    let at = addr(&c, l);
    for i in [a, b] {
        assert_eq!(follower_fetch(at, &c, "upgrade", i, None), 0);
    }
    assert_eq!(leader.high_watermark(), END);
    for i in [a, b] {
        pause(&c, i, false);
    }
}
