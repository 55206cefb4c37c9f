//! Retiring a node: a broker-only node is drained (every replica it holds moved to the
//! other nodes with reassignments) under an `acks=all` producer without losing an
//! acknowledged record, then unregistered (UnregisterBroker), after which no node lists
//! it; unregistering is refused while it is a voter, holds replicas or runs.

use super::acked_writes::{AckedWriter, assert_acked_stored, bootstrap};
use super::*;
use crate::admin::{AdminClient, ErrorCode, drain_plan};
use crate::error::Error;

/// The error code and message of a refused admin call.
fn refusal(r: crate::error::Result<()>) -> (ErrorCode, String) {
    match r {
        Err(Error::Admin(e)) => (e.code, e.to_string()),
        other => panic!("not refused by the broker: {other:?}"),
    }
}

/// Partitions (by topic and index) with a replica on node `id`, as node index `i` sees
/// them.
fn held_by(c: &TestCluster, i: usize, id: i32) -> Vec<String> {
    c.node(i).image().replicas_of(id)
}

#[test]
fn a_drained_node_is_unregistered_without_losing_an_acknowledged_record() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let b = c.add_broker();
    c.wait_settled();
    c.node(0)
        .create_topic(
            &NewTopic {
                name: "retire".into(),
                partitions: -1,
                replication_factor: -1,
                assignment: Some(vec![vec![4, 1, 2], vec![2, 4, 3]]),
                configs: vec![("min.insync.replicas".into(), "2".into())],
            },
            false,
            WAIT,
        )
        .unwrap();
    c.wait_same_image();
    let writer = AckedWriter::start(&c, "retire", 2);
    wait_until("writes acknowledged", || writer.count() >= 50);

    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    // Refused: an unknown node, a voter, a node holding replicas.
    let (code, _) = refusal(admin.unregister_broker(9));
    assert_eq!(code, ErrorCode::BROKER_ID_NOT_REGISTERED);
    let (code, message) = refusal(admin.unregister_broker(2));
    assert_eq!(code, ErrorCode::INVALID_REQUEST);
    assert!(message.contains("voter"), "{message}");
    let (code, message) = refusal(admin.unregister_broker(4));
    assert_eq!(code, ErrorCode::INVALID_REQUEST);
    assert!(
        message.contains("retire-0") && message.contains("retire-1"),
        "{message}"
    );
    assert!(c.node(0).image().brokers.contains_key(&4));

    // Drain: node 4's replicas move, each in place, to the least loaded other node.
    let plan = drain_plan(&admin.metadata().unwrap(), 4).unwrap();
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert!(plan.iter().all(|(_, r)| !r.contains(&4)), "{plan:?}");
    let moves: Vec<_> = plan
        .iter()
        .map(|(tp, r)| (tp.clone(), Some(r.clone())))
        .collect();
    let out = admin.alter_partition_reassignments(&moves).unwrap();
    assert!(out.values().all(|r| r.is_ok()), "{out:?}");
    wait_until("node 4 drained", || {
        admin.list_partition_reassignments(None).unwrap().is_empty()
            && (0..3).all(|i| held_by(&c, i, 4).is_empty())
    });
    assert!(
        drain_plan(&admin.metadata().unwrap(), 4)
            .unwrap()
            .is_empty()
    );
    wait_until("node 4's copies deleted", || {
        (0..2).all(|p| !partition_dir(c.dir(b), "retire", p).exists())
    });
    writer.wait_for_more("writes acknowledged after the drain", 50);
    let (acked, failed) = writer.finish();

    // Every acknowledged record is on its partition's leader, at its offset.
    let img = c.wait_same_image();
    for p in 0..2 {
        let leader = img.topic("retire").unwrap().partitions[p as usize].leader;
        assert_acked_stored(&c, leader as usize - 1, "retire", p, &acked);
    }
    eprintln!(
        "{} records acknowledged across the drain, {failed} sends failed",
        acked.len()
    );

    // Still running: refused (it would register again).
    let (code, message) = refusal(admin.unregister_broker(4));
    assert_eq!(code, ErrorCode::INVALID_REQUEST);
    assert!(message.contains("running"), "{message}");
    // Stopped, drained: unregistered, and no node lists it any more.
    c.nodes[b].take().unwrap().shutdown().unwrap();
    wait_until("node 4 fenced", || !c.node(0).image().is_unfenced(4));
    admin.unregister_broker(4).unwrap();
    wait_until(
        "node 4 gone from every node's metadata and the quorum",
        || {
            (0..3).all(|i| {
                !c.node(i).image().brokers.contains_key(&4) && !c.node(i).membership().contains(4)
            })
        },
    );
    let m = admin.metadata().unwrap();
    assert!(m.brokers.iter().all(|b| b.id != 4), "{m:?}");
    assert!(
        m.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| !p.replicas.contains(&4))
    );
    let (code, _) = refusal(admin.unregister_broker(4));
    assert_eq!(code, ErrorCode::BROKER_ID_NOT_REGISTERED);
    let q = admin.describe_metadata_quorum().unwrap();
    assert!(q.observers.iter().all(|r| r.node != 4), "{q:?}");
    c.shutdown();
}
