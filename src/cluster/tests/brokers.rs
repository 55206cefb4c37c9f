//! Broker-only nodes: a node that is not among the voters follows the metadata log as
//! a learner, registers, hosts replicas of new topics, and its death does not touch the
//! quorum.

use super::*;

impl TestCluster {
    /// Starts one more node, with the next id, as a broker only: the same `--quorum`
    /// (which does not list it) and its own quorum listener (see [`quorum_listener`]).
    pub(super) fn add_broker(&mut self) -> usize {
        let i = self.nodes.len();
        self.dirs.push(tempfile::tempdir().unwrap());
        let listener = quorum_listener();
        self.addrs.push(listener.local_addr().unwrap());
        self.nodes.push(None);
        self.nodes[i] = Some(self.start_with(i, listener));
        i
    }
}

#[test]
fn a_broker_only_node_learns_the_log_hosts_replicas_and_never_votes() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let b = c.add_broker();
    // Node 4 registers and is unfenced: it applies the metadata log up to its own
    // registration, which it can only learn from the voters.
    c.wait_settled();
    wait_until("node 4 a learner on every node", || {
        c.running().iter().all(|&i| {
            c.node(i).membership()
                == membership::Membership {
                    voters: vec![1, 2, 3],
                    learners: vec![4],
                }
        })
    });

    // A topic created after it joined places replicas on it.
    let topic = NewTopic {
        name: "wide".into(),
        partitions: 4,
        replication_factor: 3,
        ..Default::default()
    };
    c.node(0).create_topic(&topic, false, WAIT).unwrap();
    let img = c.wait_same_image();
    let on_4: Vec<usize> = img
        .topic("wide")
        .unwrap()
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| p.replicas.contains(&4))
        .map(|(i, _)| i)
        .collect();
    assert!(!on_4.is_empty(), "no replica of wide on node 4: {img:?}");
    for p in &on_4 {
        assert!(partition_dir(c.dir(b), "wide", *p).exists(), "wide-{p}");
    }
    wait_until("node 4 in the ISR of its partitions", || {
        let img = c.node(0).image();
        let t = img.topic("wide").unwrap();
        on_4.iter().all(|p| t.partitions[*p].isr.contains(&4))
    });

    // Node 4 and a voter die: the two other voters are still a majority of the three
    // voters (they would not be of four) and keep committing metadata.
    c.halt(b);
    c.halt(2);
    let after = NewTopic {
        name: "after".into(),
        partitions: 1,
        replication_factor: 1,
        ..Default::default()
    };
    c.node(0).create_topic(&after, false, WAIT).unwrap();
    c.wait_settled();

    // Node 4 comes back on its data directory as the same learner and catches up.
    c.restart(b);
    c.wait_settled();
    wait_until("node 4 has the topic created while it was down", || {
        c.node(b).image().topic("after").is_some()
    });
    assert_eq!(c.node(b).membership().learners, vec![4]);
    c.shutdown();
}
