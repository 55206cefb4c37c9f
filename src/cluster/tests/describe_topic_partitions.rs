//! DescribeTopicPartitions (KIP-966) of a cluster node answers from its metadata image:
//! each partition's leader, leader epoch, replicas and ISR as the image has them, and a
//! stopped (fenced) node among the offline replicas.

use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::server::tests_api::Client;

/// Each partition of a DescribeTopicPartitions answer as `(leader, leader epoch,
/// replicas, ISR, offline replicas)`.
type Described = Vec<(i32, i32, Vec<i32>, Vec<i32>, Vec<i32>)>;

fn describe(c: &mut Client, topics: &[&str]) -> DescribeTopicPartitionsResponse {
    let req = DescribeTopicPartitionsRequest::default().with_topics(
        topics
            .iter()
            .map(|t| {
                TopicRequest::default().with_name(TopicName(StrBytes::from_string(t.to_string())))
            })
            .collect(),
    );
    c.call(ApiKey::DescribeTopicPartitions, 0, &req)
}

fn ids(v: &[BrokerId]) -> Vec<i32> {
    v.iter().map(|b| b.0).collect()
}

#[test]
fn a_cluster_node_describes_partitions_from_its_image_with_a_fenced_node_offline() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    super::replication::create(&c, "events", 2, Vec::new());
    // Stop a node that is neither the one asked nor the controller; wait until the
    // others fenced it and it leads nothing and is in no ISR.
    let controller = c.node(0).controller_id().unwrap();
    let gone = (2..=3).find(|id| *id != controller).unwrap();
    c.halt((gone - 1) as usize);
    wait_until("the stopped node fenced and out of every ISR", || {
        let img = c.node(0).image();
        !img.is_unfenced(gone)
            && img
                .topic("events")
                .unwrap()
                .partitions
                .iter()
                .all(|p| p.leader != gone && !p.isr.contains(&gone))
    });
    let mut client = Client::connect(c.nodes[0].as_ref().unwrap().local_addr());
    // The image may change while the request is answered (an ISR grown back): compared
    // with an image that was the same before and after the answer.
    let mut checked = false;
    for _ in 0..50 {
        let before = c.node(0).image();
        let r = describe(&mut client, &["events", "nope"]);
        let after = c.node(0).image();
        let image = before.topic("events").unwrap();
        if after.topic("events").unwrap() != image {
            continue;
        }
        assert_eq!(r.topics.len(), 2, "{r:?}");
        let t = &r.topics[0];
        assert_eq!(t.name.as_ref().unwrap().as_str(), "events");
        assert_eq!((t.error_code, t.is_internal), (0, false));
        assert_eq!(*t.topic_id.as_bytes(), image.id);
        let described: Described = t
            .partitions
            .iter()
            .map(|p| {
                assert_eq!(p.error_code, 0);
                assert_eq!(p.eligible_leader_replicas, Some(vec![]));
                assert_eq!(p.last_known_elr, Some(vec![]));
                (
                    p.leader_id.0,
                    p.leader_epoch,
                    ids(&p.replica_nodes),
                    ids(&p.isr_nodes),
                    ids(&p.offline_replicas),
                )
            })
            .collect();
        let expected: Described = image
            .partitions
            .iter()
            .map(|p| {
                (
                    p.leader,
                    p.leader_epoch,
                    p.replicas.clone(),
                    p.isr.clone(),
                    vec![gone],
                )
            })
            .collect();
        assert_eq!(described, expected);
        assert!(described.iter().all(|p| p.2.len() == 3 && p.0 != gone));
        assert_eq!(
            (
                r.topics[1].name.as_ref().unwrap().as_str(),
                r.topics[1].error_code
            ),
            ("nope", 3),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
        checked = true;
        break;
    }
    assert!(checked, "the image kept changing under every request");
    // Every topic: the internal offsets topic is flagged.
    wait_until("__consumer_offsets", || {
        c.node(0)
            .image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .is_some()
    });
    let r = describe(&mut client, &[]);
    let offsets = r
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().as_str() == crate::broker::OFFSETS_TOPIC)
        .unwrap();
    assert!(offsets.is_internal);
    c.shutdown();
}
