//! `__consumer_offsets` has several partitions on a cluster: each group is coordinated
//! by the leader of its partition (Kafka's hash of the group id), so the groups of a
//! cluster are spread over its nodes; FindCoordinator names that node, the others
//! answer NOT_COORDINATOR, and when the node stops its groups move with their offsets.

use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::replication::{broker, create};
use super::*;
use crate::cluster::client::Client;
use crate::coordinator::{CommitOffset, GroupError, OffsetCommitRequest, partition_for};

const CALL: Duration = Duration::from_secs(10);

/// The node index leading partition `p` of `__consumer_offsets`, once its groups are
/// loaded there.
fn coordinator_of(c: &TestCluster, p: i32) -> Option<usize> {
    let img = c.node(c.running()[0]).image();
    let leader = img.topic(crate::broker::OFFSETS_TOPIC)?.partitions[p as usize].leader;
    let i = usize::try_from(leader - 1).ok()?;
    (c.running().contains(&i)
        && broker(c, i)
            .group_coordinator()
            .loaded_partitions()
            .contains(&p))
    .then_some(i)
}

fn commit(c: &TestCluster, i: usize, group: &str, offset: i64) -> Result<(), GroupError> {
    let results = broker(c, i)
        .group_coordinator()
        .offset_commit(OffsetCommitRequest {
            group_id: group.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        })?;
    results.into_iter().next().unwrap().result
}

#[test]
fn groups_are_coordinated_by_the_leaders_of_their_partitions() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    wait_until(
        "every __consumer_offsets partition loaded by its leader",
        || (0..OFFSETS_PARTITIONS).all(|p| coordinator_of(&c, p).is_some()),
    );
    create(&c, "t", 1, Vec::new());
    let groups: Vec<String> = (0..40).map(|i| format!("group-{i}")).collect();
    let mut nodes = std::collections::BTreeSet::new();
    for (n, g) in groups.iter().enumerate() {
        let p = partition_for(g, OFFSETS_PARTITIONS);
        let home = coordinator_of(&c, p).unwrap();
        nodes.insert(home);
        assert_eq!(broker(&c, home).group_coordinator().partition_of(g), p);
        commit(&c, home, g, n as i64).unwrap();
        for other in c.running().into_iter().filter(|&o| o != home) {
            assert!(
                matches!(commit(&c, other, g, 0), Err(GroupError::NotCoordinator)),
                "node {} does not coordinate {g}",
                other + 1
            );
        }
        // FindCoordinator, asked of any node, names the leader of the partition.
        let addr = c.nodes[n % 3].as_ref().unwrap().local_addr();
        let mut client = Client::new(addr.to_string(), "group-coordinators-test");
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_string(g.clone()));
        let resp: FindCoordinatorResponse = client.call(&request, 3, CALL).unwrap();
        assert_eq!(
            (resp.error_code, resp.node_id.0),
            (0, home as i32 + 1),
            "{g}"
        );
    }
    assert!(
        nodes.len() > 1,
        "the groups' coordinators are on several nodes: {nodes:?}"
    );

    // The coordinator of group-0 stops: its partition's new leader loads the group with
    // its offsets.
    let g = &groups[0];
    let p = partition_for(g, OFFSETS_PARTITIONS);
    let old = coordinator_of(&c, p).unwrap();
    c.halt(old);
    wait_until("a new coordinator of group-0", || {
        coordinator_of(&c, p).is_some()
    });
    let new = coordinator_of(&c, p).unwrap();
    assert_ne!(new, old);
    let fetched = broker(&c, new)
        .group_coordinator()
        .offset_fetch(g, Some(&[("t".into(), 0)]))
        .unwrap();
    assert_eq!(fetched[0].offset, 0);
    c.shutdown();
}
