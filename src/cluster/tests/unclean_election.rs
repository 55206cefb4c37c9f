//! An unclean leader election on an in-process cluster, through the admin client over
//! the wire: a partition whose leader and every other ISR member are gone has no leader,
//! and its one live replica (out of the ISR) is not elected by a preferred election, even
//! where it is the preferred replica (PREFERRED_LEADER_NOT_AVAILABLE), but is by an
//! unclean election named for the partition; an unclean election of every partition (no
//! partition list, as Kafka's broker takes it) elects the other leaderless partition.
//! The new leader then takes writes and serves reads over the wire; what only the old
//! ISR had is gone (the operator asked for it), and the old leader, back, truncates its
//! log to the new leader's.

use std::collections::BTreeMap;

use super::acked_writes::bootstrap;
use super::failover::pause;
use super::replication::{broker, bytes_to, part};
use super::*;
use crate::admin::{AdminClient, ElectionType, ErrorCode, TopicPartition};
use crate::consumer::{Consumer, ConsumerConfig};
use crate::error::Error;
use crate::producer::{Acks, Producer, ProducerRecord};
use crate::remote::{ClientConfig, Cluster};

fn refusal(r: &crate::error::Result<()>) -> Option<ErrorCode> {
    match r {
        Err(Error::Admin(e)) => Some(e.code),
        _ => None,
    }
}

/// (leader, ISR) of `topic`-`p` in node index `i`'s image.
fn leadership(c: &TestCluster, i: usize, topic: &str, p: usize) -> (i32, Vec<i32>) {
    let img = c.node(i).image();
    let p = &img.topic(topic).unwrap().partitions[p];
    (p.leader, p.isr.clone())
}

/// Every record of `topic`-`p`, read over the wire from the start: offset → value.
fn read_all(remote: &Cluster, topic: &str, p: i32, want: usize) -> BTreeMap<i64, String> {
    let mut consumer = Consumer::new(remote, ConsumerConfig::default());
    consumer.assign(&[(topic, p)]).unwrap();
    consumer.seek_to_beginning().unwrap();
    let mut got = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < want && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(100)).unwrap().iter() {
            let r = r.unwrap();
            got.insert(
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            );
        }
    }
    got
}

#[test]
fn an_unclean_election_elects_the_live_replica_out_of_the_isr_and_a_preferred_one_does_not() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    // Node 3 (index 2) never copies anything: its fetchers are paused from the start.
    pause(&c, 2, true);
    // Two partitions on nodes 3 then 2: node 3 is their preferred replica.
    c.node(0)
        .create_topic(
            &NewTopic {
                name: "dirty".into(),
                partitions: -1,
                replication_factor: -1,
                assignment: Some(vec![vec![3, 2], vec![3, 2]]),
                configs: vec![("min.insync.replicas".into(), "1".into())],
            },
            false,
            WAIT,
        )
        .unwrap();
    c.wait_same_image();
    // Fence node 3 as a lost session would: node 2 leads both partitions alone.
    let epoch = c.node(0).image().brokers[&3].epoch;
    c.node(0)
        .propose(
            MetadataRecord::FenceBroker {
                broker_id: 3,
                broker_epoch: epoch,
            },
            WAIT,
        )
        .unwrap();
    // Node 3 asks to be unfenced again, but cannot rejoin the ISR without fetching.
    wait_until(
        "node 2 leads both partitions alone, node 3 unfenced",
        || {
            let img = c.node(0).image();
            img.is_unfenced(3)
                && img
                    .topic("dirty")
                    .unwrap()
                    .partitions
                    .iter()
                    .all(|p| p.leader == 2 && p.isr == [2])
        },
    );
    for p in 0..2 {
        let lead = part(&c, 1, "dirty", p);
        wait_until("node 2's leadership applied", || lead.is_leader());
    }
    // Records only node 2 has, acknowledged by the ISR of one.
    let producer = Producer::builder(&broker(&c, 1))
        .acks(Acks::All)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    for p in 0..2 {
        for i in 0..5 {
            let v = format!("old-{p}-{i}");
            producer
                .send("dirty", ProducerRecord::new(v.as_bytes()).partition(p))
                .unwrap();
        }
    }
    drop(producer);
    for p in 0..2 {
        assert_eq!(part(&c, 1, "dirty", p).high_watermark(), 5);
        assert_eq!(part(&c, 2, "dirty", p).log_end_offset(), 0);
    }
    // The last ISR member dies: no replica may be elected cleanly.
    c.halt(1);
    wait_until("both partitions leaderless, node 2 fenced", || {
        let img = c.node(0).image();
        !img.is_unfenced(2)
            && img.is_unfenced(3)
            && (0..2).all(|p| leadership(&c, 0, "dirty", p) == (NO_LEADER, vec![2]))
    });

    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let dirty0 = TopicPartition::new("dirty", 0);
    let dirty1 = TopicPartition::new("dirty", 1);
    // A preferred election does not elect the preferred replica out of the ISR.
    let out = admin
        .elect_leaders(ElectionType::Preferred, Some(std::slice::from_ref(&dirty0)))
        .unwrap();
    assert_eq!(
        refusal(&out[&dirty0]),
        Some(ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE),
        "{out:?}"
    );
    // Every partition, preferred: the leaderless ones are refused the same way.
    let out = admin.elect_leaders(ElectionType::Preferred, None).unwrap();
    for tp in [&dirty0, &dirty1] {
        assert_eq!(
            refusal(&out[tp]),
            Some(ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE),
            "{out:?}"
        );
    }
    c.wait_same_image();
    for p in 0..2 {
        assert_eq!(leadership(&c, 0, "dirty", p), (NO_LEADER, vec![2]));
    }

    // Unclean, named: only dirty-0 gets a leader, node 3, alone in its ISR.
    let out = admin
        .elect_leaders(ElectionType::Unclean, Some(std::slice::from_ref(&dirty0)))
        .unwrap();
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(out[&dirty0], Ok(())), "{out:?}");
    c.wait_same_image();
    assert_eq!(leadership(&c, 0, "dirty", 0), (3, vec![3]));
    assert_eq!(leadership(&c, 0, "dirty", 1), (NO_LEADER, vec![2]));
    let out = admin
        .elect_leaders(ElectionType::Unclean, Some(std::slice::from_ref(&dirty0)))
        .unwrap();
    assert_eq!(
        refusal(&out[&dirty0]),
        Some(ErrorCode::ELECTION_NOT_NEEDED),
        "{out:?}"
    );
    // Unclean, every partition (a null list): Kafka's broker takes it for every
    // partition too; the led ones need no election and are left out of the answer.
    let out = admin.elect_leaders(ElectionType::Unclean, None).unwrap();
    assert!(matches!(out.get(&dirty1), Some(Ok(()))), "{out:?}");
    assert!(!out.contains_key(&dirty0), "{out:?}");
    assert!(out.values().all(|r| r.is_ok()), "{out:?}");
    c.wait_same_image();
    assert_eq!(leadership(&c, 0, "dirty", 1), (3, vec![3]));

    // Node 3 leads both and takes writes and reads over the wire; node 2's records
    // are gone.
    for p in 0..2 {
        let lead = part(&c, 2, "dirty", p);
        wait_until("node 3's leadership applied", || lead.is_leader());
    }
    let remote = Cluster::connect(ClientConfig::new(bootstrap(&c))).unwrap();
    let producer = Producer::builder(&remote)
        .acks(Acks::All)
        .linger(Duration::ZERO)
        .build()
        .unwrap();
    for p in 0..2 {
        for i in 0..3 {
            let v = format!("new-{p}-{i}");
            let m = producer
                .send("dirty", ProducerRecord::new(v.as_bytes()).partition(p))
                .unwrap();
            assert_eq!((m.partition, m.offset), (p, i));
        }
    }
    producer.close().unwrap();
    for p in 0..2 {
        let got = read_all(&remote, "dirty", p, 3);
        let want: BTreeMap<i64, String> = (0..3).map(|i| (i, format!("new-{p}-{i}"))).collect();
        assert_eq!(got, want, "dirty-{p} read from node 3");
    }

    // Node 2 comes back: its old records go, it copies node 3's and rejoins the ISR.
    pause(&c, 2, false);
    c.restart(1);
    wait_until("node 2 has the topic again", || {
        broker(&c, 1)
            .topic("dirty")
            .is_ok_and(|t| t.partition(0).is_ok() && t.partition(1).is_ok())
    });
    for p in 0..2 {
        let leader = part(&c, 2, "dirty", p);
        let back = part(&c, 1, "dirty", p);
        let expected = bytes_to(&leader, 3);
        wait_until("node 2 converges on node 3's log", || {
            back.log_end_offset() == 3 && bytes_to(&back, 3) == expected
        });
        wait_until("node 2 back in the ISR", || {
            let (leader, mut isr) = leadership(&c, 0, "dirty", p as usize);
            isr.sort_unstable();
            (leader, isr) == (3, vec![2, 3])
        });
    }
    c.shutdown();
}
