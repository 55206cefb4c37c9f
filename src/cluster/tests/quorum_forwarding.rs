//! DescribeQuorum, AddRaftVoter and RemoveRaftVoter asked of any node, as Kafka's admin
//! clients and `kafka-metadata-quorum --bootstrap-server` ask them: a node that is not
//! the controller forwards the request to the controller and relays the controller's
//! answer (every voter's progress; the change made), at every version; a request a
//! node forwarded is answered where it arrives, never forwarded again.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, ApiKey, DescribeQuorumRequest,
    DescribeQuorumResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::failover::addr;
use super::*;
use crate::cluster::quorum_forward::FORWARDED_CLIENT_PREFIX;
use crate::server::tests_api::Client;

fn request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
    ])
}

#[test]
fn every_node_answers_describe_quorum_with_the_controllers_view() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let controller = c.node(0).controller_id().unwrap();
    wait_until("every node knows the controller", || {
        (0..3).all(|i| c.node(i).quorum_status().leader == controller)
    });
    for i in 0..3 {
        let mut client = Client::connect(addr(&c, i));
        for version in 0..=2 {
            let r: DescribeQuorumResponse =
                client.call(ApiKey::DescribeQuorum, version, &request());
            let node = i + 1;
            assert_eq!(r.error_code, 0, "node {node} v{version}: {r:?}");
            let p = &r.topics[0].partitions[0];
            assert_eq!(
                p.error_code, 0,
                "node {node} v{version}: {:?}",
                p.error_message
            );
            assert_eq!(p.leader_id.0, controller, "node {node} v{version}");
            let mut voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
            voters.sort_unstable();
            assert_eq!(voters, [1, 2, 3], "node {node} v{version}");
            assert!(p.high_watermark > 0, "node {node} v{version}: {p:?}");
            // The controller's view: it knows how far every voter's log is.
            assert!(
                p.current_voters.iter().all(|v| v.log_end_offset > 0),
                "node {node} v{version}: {p:?}"
            );
            if version >= 2 {
                assert_eq!(r.nodes.len(), 3, "node {node}: {r:?}");
            }
        }
    }
    // A request another node forwarded is answered where it arrives.
    let follower = (0..3).find(|i| *i as i32 + 1 != controller).unwrap();
    let forwarder: &'static str = Box::leak(format!("{FORWARDED_CLIENT_PREFIX}9").into_boxed_str());
    let mut client = Client::connect_as(addr(&c, follower), forwarder);
    let r: DescribeQuorumResponse = client.call(ApiKey::DescribeQuorum, 2, &request());
    let p = &r.topics[0].partitions[0];
    assert_eq!(
        p.error_code,
        ResponseError::NotLeaderOrFollower.code(),
        "{r:?}"
    );
    assert_eq!(p.leader_id.0, controller);
    c.shutdown();
}

#[test]
fn a_node_that_is_not_the_controller_forwards_voter_changes() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.add_broker();
    c.wait_settled();
    wait_until("node 4 a learner on every node", || {
        c.running()
            .iter()
            .all(|&i| c.node(i).membership().learners == vec![4])
    });
    let controller = c.node(0).controller_id().unwrap();
    wait_until("every node knows the controller", || {
        (0..3).all(|i| c.node(i).quorum_status().leader == controller)
    });
    let follower = (0..3).find(|i| *i as i32 + 1 != controller).unwrap();
    let add = AddRaftVoterRequest::default()
        .with_timeout_ms(30_000)
        .with_voter_id(4);
    let remove = RemoveRaftVoterRequest::default().with_voter_id(4);

    // Forwarded once, a request is answered where it arrives: NOT_CONTROLLER.
    let forwarder: &'static str = Box::leak(format!("{FORWARDED_CLIENT_PREFIX}9").into_boxed_str());
    let mut as_forwarder = Client::connect_as(addr(&c, follower), forwarder);
    let r: AddRaftVoterResponse = as_forwarder.call(ApiKey::AddRaftVoter, 0, &add);
    assert_eq!(r.error_code, ResponseError::NotController.code(), "{r:?}");

    // From a client, the node that is not the controller has the controller do it.
    let mut client = Client::connect(addr(&c, follower));
    let r: AddRaftVoterResponse = client.call(ApiKey::AddRaftVoter, 0, &add);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    wait_until("node 4 a voter on every node", || {
        c.running()
            .iter()
            .all(|&i| c.node(i).membership().voters.contains(&4))
    });
    // The controller's refusal comes back as it said it.
    let r: AddRaftVoterResponse = client.call(ApiKey::AddRaftVoter, 0, &add);
    assert_eq!(r.error_code, ResponseError::DuplicateVoter.code(), "{r:?}");

    let r: RemoveRaftVoterResponse = as_forwarder.call(ApiKey::RemoveRaftVoter, 0, &remove);
    assert_eq!(r.error_code, ResponseError::NotController.code(), "{r:?}");
    let r: RemoveRaftVoterResponse = client.call(ApiKey::RemoveRaftVoter, 0, &remove);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    wait_until("node 4 a learner again on every node", || {
        c.running()
            .iter()
            .all(|&i| c.node(i).membership().learners == vec![4])
    });
    c.shutdown();
}
