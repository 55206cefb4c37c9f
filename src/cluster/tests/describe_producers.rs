//! DescribeProducers on a cluster: the leader of a partition lists its idempotent
//! producers; a follower answers NOT_LEADER_OR_FOLLOWER, as Kafka's replica manager does
//! for a partition it does not lead.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::replication::{create, leader_index, part};
use super::*;
use crate::cluster::client::Client;
use crate::record::BatchBuilder;

const CALL: Duration = Duration::from_secs(10);

#[test]
fn the_leader_lists_producers_and_a_follower_is_not_leader() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "idem", 1, Vec::new());
    let l = leader_index(&c, "idem", 0);
    let leader = part(&c, l, "idem", 0);
    wait_until("leadership applied", || leader.leader_epoch().is_some());
    let mut b = BatchBuilder::new().producer(77, 2, 0);
    b.push(1_234, None, Some(b"a"), &[]);
    b.push(1_200, None, Some(b"b"), &[]);
    leader.append_idempotent(&b.finish()).unwrap();

    let request = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(TopicName(StrBytes::from_static_str("idem")))
            .with_partition_indexes(vec![0]),
    ]);
    let describe = |i: usize| {
        let addr = c.nodes[i].as_ref().unwrap().local_addr();
        let mut client = Client::new(addr.to_string(), "describe-producers-test");
        let resp = client.call(&request, 0, CALL).unwrap();
        resp.topics[0].partitions[0].clone()
    };
    let on_leader = describe(l);
    assert_eq!(on_leader.error_code, 0, "{on_leader:?}");
    let listed: Vec<_> = on_leader
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
            )
        })
        .collect();
    assert_eq!(listed, vec![(77, 2, 1, 1_234)]);

    let f = (l + 1) % 3;
    let on_follower = describe(f);
    assert_eq!(
        on_follower.error_code,
        ResponseError::NotLeaderOrFollower.code(),
        "{on_follower:?}"
    );
    assert!(on_follower.active_producers.is_empty());
    c.shutdown();
}
