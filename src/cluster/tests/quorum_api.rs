//! The metadata quorum over the wire (KIP-853) with tidelog's admin client, as
//! `tidelog quorum` and kafka-metadata-quorum use it: DescribeQuorum lists the voters
//! and the broker-only node as an observer, AddRaftVoter makes it a voter,
//! RemoveRaftVoter removes one, and refusals carry Kafka's error codes.

use super::failover::addr;
use super::*;
use crate::admin::AdminClient;

fn ids(r: &[crate::admin::QuorumReplica]) -> Vec<i32> {
    let mut ids: Vec<i32> = r.iter().map(|r| r.node).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn describe_add_and_remove_voters_through_the_kafka_apis() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let b = c.add_broker();
    c.wait_settled();
    wait_until("node 4 a learner on every node", || {
        c.running()
            .iter()
            .all(|&i| c.node(i).membership().learners == vec![4])
    });
    let bootstrap = (0..4)
        .map(|i| addr(&c, i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let admin = AdminClient::connect(&bootstrap).unwrap();
    let q = admin.describe_metadata_quorum().unwrap();
    assert!((1..=3).contains(&q.leader), "{q:?}");
    assert_eq!(
        (ids(&q.voters), ids(&q.observers)),
        (vec![1, 2, 3], vec![4])
    );
    assert!(q.high_watermark > 0, "{q:?}");
    let dir_4 = meta_properties::read(c.dir(b))
        .unwrap()
        .unwrap()
        .directory_id
        .unwrap();
    let observer = &q.observers[0];
    assert_eq!(observer.directory_id.as_deref(), Some(dir_4.as_str()));
    assert!(
        q.addresses.iter().any(|(n, _)| *n == 4),
        "no quorum address of node 4: {q:?}"
    );

    // A node that does not follow the log cannot be added; a wrong directory id is
    // INVALID_VOTER_KEY.
    let e = admin.add_raft_voter(9, None).unwrap_err().to_string();
    assert!(e.contains("INVALID_REQUEST") && e.contains("node 9"), "{e}");
    let other_dir = crate::storage::codec::uuid_base64(&[7; 16]);
    let e = admin
        .add_raft_voter(4, Some(&other_dir))
        .unwrap_err()
        .to_string();
    assert!(e.contains("INVALID_VOTER_KEY"), "{e}");

    admin.add_raft_voter(4, Some(&dir_4)).unwrap();
    let q = admin.describe_metadata_quorum().unwrap();
    assert_eq!(
        (ids(&q.voters), ids(&q.observers)),
        (vec![1, 2, 3, 4], vec![])
    );
    let e = admin.add_raft_voter(4, None).unwrap_err().to_string();
    assert!(e.contains("DUPLICATE_VOTER"), "{e}");

    // Remove a voter that is not the controller; it goes on as an observer.
    let gone = (1..=3).find(|n| *n != q.leader).unwrap();
    admin.remove_raft_voter(gone, None).unwrap();
    wait_until("the removed voter listed as an observer", || {
        let q = admin.describe_metadata_quorum().unwrap();
        !ids(&q.voters).contains(&gone) && ids(&q.observers) == vec![gone]
    });
    let e = admin.remove_raft_voter(gone, None).unwrap_err().to_string();
    assert!(e.contains("VOTER_NOT_FOUND"), "{e}");
    c.shutdown();
}

/// Removing the voter that is the controller is one admin call, as with Kafka's admin
/// client: the controller hands its leadership to another voter and answers
/// NOT_CONTROLLER, and the client asks again where fresh metadata names the new one.
#[test]
fn removing_the_controller_is_one_admin_call() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let bootstrap = (0..3)
        .map(|i| addr(&c, i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let admin = AdminClient::connect(&bootstrap).unwrap();
    let controller = admin.describe_metadata_quorum().unwrap().leader;
    admin.remove_raft_voter(controller, None).unwrap();
    let rest: Vec<i32> = (1..=3).filter(|n| *n != controller).collect();
    wait_until("the old controller listed as an observer", || {
        let q = admin.describe_metadata_quorum().unwrap();
        ids(&q.voters) == rest && ids(&q.observers) == vec![controller]
    });
    let q = admin.describe_metadata_quorum().unwrap();
    assert!(rest.contains(&q.leader), "{q:?}");
    c.shutdown();
}
