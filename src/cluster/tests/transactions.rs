//! The transaction coordinator on an in-process cluster: `__transaction_state` made
//! through the controller with Kafka's settings capped at the nodes, each partition's
//! coordinator loaded on its leader only, and unloaded when the leadership leaves a
//! running node (controlled shutdown).

use super::*;
use crate::config::TransactionConfig;
use crate::transaction::log::TRANSACTION_STATE_TOPIC;

const PARTITIONS: i32 = 6;

fn config() -> TransactionConfig {
    TransactionConfig {
        state_log_partitions: PARTITIONS,
        ..TransactionConfig::default()
    }
}

/// True when node index `i` coordinates exactly the `__transaction_state` partitions
/// it leads in its image, at the partition count of the topic.
fn coordinates_what_it_leads(c: &TestCluster, i: usize) -> bool {
    let node = c.node(i);
    let image = node.image();
    let Some(topic) = image.topic(TRANSACTION_STATE_TOPIC) else {
        return false;
    };
    let Some(broker) = node.broker.upgrade() else {
        return false;
    };
    let txns = broker.transaction_coordinator();
    txns.partition_count() == PARTITIONS
        && topic
            .partitions
            .iter()
            .enumerate()
            .all(|(p, layout)| txns.leads(p as i32) == (layout.leader == node.node_id()))
}

#[test]
fn each_transaction_state_partition_is_coordinated_by_its_leader_only() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.node(1).ensure_transaction_state(&config()).unwrap();
    // Again, from another node: it exists, nothing more is proposed.
    c.node(2).ensure_transaction_state(&config()).unwrap();
    let image = c.wait_same_image();
    let topic = image.topic(TRANSACTION_STATE_TOPIC).unwrap();
    assert!(topic.internal);
    assert_eq!(topic.partitions.len(), PARTITIONS as usize);
    assert!(topic.partitions.iter().all(|p| p.replicas.len() == 3));
    assert_eq!(
        topic.configs.get("min.insync.replicas").map(String::as_str),
        Some("2")
    );
    assert_eq!(
        topic.configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    wait_until("every node coordinating what it leads", || {
        (0..3).all(|i| coordinates_what_it_leads(&c, i))
    });

    // A controlled shutdown moves node 1's leaderships away while it still runs: it
    // stops coordinating them, and their new leaders load them.
    let led_by_first = topic.partitions.iter().filter(|p| p.leader == 1).count();
    assert!(led_by_first > 0, "node 1 leads a partition of {PARTITIONS}");
    c.node(0).controlled_shutdown(WAIT).unwrap();
    wait_until(
        "node 1 coordinating nothing, the others what they lead",
        || {
            let broker = c.node(0).broker.upgrade().unwrap();
            let txns = broker.transaction_coordinator();
            (0..PARTITIONS).all(|p| !txns.leads(p))
                && (1..3).all(|i| coordinates_what_it_leads(&c, i))
        },
    );
    c.halt(0);
    c.shutdown();
}

#[test]
fn the_replication_factor_is_capped_at_the_unfenced_nodes() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.halt(2);
    wait_until("node 3 fenced", || {
        c.node(0).image().unfenced_brokers() == vec![1, 2]
    });
    c.node(0).ensure_transaction_state(&config()).unwrap();
    let image = c.node(0).image();
    let topic = image.topic(TRANSACTION_STATE_TOPIC).unwrap();
    assert!(topic.partitions.iter().all(|p| p.replicas.len() == 2));
    assert_eq!(
        topic.configs.get("min.insync.replicas").map(String::as_str),
        Some("2")
    );
    c.shutdown();
}
