//! ShareFetch and ShareAcknowledge at their edges, as Kafka answers them: a fetch of
//! `max_bytes` 0 acquires nothing, and a topic id no topic has (a topic deleted since
//! the member fetched it) is answered UNKNOWN_TOPIC_ID for each of its partitions
//! instead of being left out of the answer.

use kafka_protocol::messages::*;

use super::tests_api::Client;
use super::tests_share_groups::{heartbeat_q, produce_two, s, serving_q, share_fetch_q_bytes};

const UNKNOWN_TOPIC_ID: i16 = 100;

/// q-0 gets two records and member m1 joins `group`, which reads from the earliest.
fn two_records_for(c: &mut Client, group: &str) {
    let set = super::tests_consumer_groups::alter_group_config(
        c,
        group,
        "share.auto.offset.reset",
        "earliest",
    );
    assert_eq!(set.0, 0);
    produce_two(c);
    heartbeat_q(c, group, "m1", 0);
}

#[test]
fn a_share_fetch_of_no_bytes_acquires_nothing() {
    let (_dir, _server, mut c, id) = serving_q();
    two_records_for(&mut c, "zero");
    assert_eq!(
        share_fetch_q_bytes(&mut c, ("zero", "m1"), id, 0, 0, 0),
        vec![],
        "max_bytes 0: no record"
    );
    // Nothing was acquired: both records come next, delivered for the first time.
    assert_eq!(
        share_fetch_q_bytes(&mut c, ("zero", "m1"), id, 1, 0, 1 << 20),
        vec![(0, 1), (1, 1)]
    );
}

/// A ShareFetch at `epoch` of `member` of group "gone" for partition 0 of the topic
/// `id`, acknowledging offset 0 (accept) unless the epoch opens the session.
fn fetch_acking(c: &mut Client, member: &str, id: uuid::Uuid, epoch: i32) -> ShareFetchResponse {
    let mut partition = share_fetch_request::FetchPartition::default()
        .with_partition_index(0)
        .with_partition_max_bytes(1 << 20);
    if epoch > 0 {
        partition = partition.with_acknowledgement_batches(vec![
            share_fetch_request::AcknowledgementBatch::default()
                .with_first_offset(0)
                .with_last_offset(0)
                .with_acknowledge_types(vec![1]),
        ]);
    }
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("gone"))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10)
        .with_topics(vec![
            share_fetch_request::FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![partition]),
        ]);
    c.call(ApiKey::ShareFetch, 1, &req)
}

#[test]
fn a_deleted_topics_partitions_are_answered_unknown_topic_id() {
    let (_dir, _server, mut c, id) = serving_q();
    let id = uuid::Uuid::from_bytes(id);
    two_records_for(&mut c, "gone");
    let fetched = fetch_acking(&mut c, "m1", id, 0);
    assert_eq!(fetched.error_code, 0, "{:?}", fetched.error_message);
    assert_eq!(fetched.responses[0].partitions[0].acquired_records.len(), 1);

    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![TopicName(s("q"))]);
    let deleted: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 4, &req);
    assert_eq!(deleted.responses[0].error_code, 0);

    // ShareFetch with an acknowledgement: the partition is there, with the error for
    // its records and for its acknowledgement.
    let r = fetch_acking(&mut c, "m1", id, 1);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let t = &r.responses[0];
    assert_eq!(t.topic_id, id);
    let p = &t.partitions[0];
    assert_eq!(
        (p.partition_index, p.error_code, p.acknowledge_error_code),
        (0, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID)
    );
    assert!(p.acquired_records.is_empty());

    // ShareAcknowledge: the same, per partition.
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("gone"))))
        .with_member_id(Some(s("m1")))
        .with_share_session_epoch(2)
        .with_topics(vec![
            share_acknowledge_request::AcknowledgeTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![
                    share_acknowledge_request::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(vec![
                            share_acknowledge_request::AcknowledgementBatch::default()
                                .with_first_offset(1)
                                .with_last_offset(1)
                                .with_acknowledge_types(vec![1]),
                        ]),
                ]),
        ]);
    let r: ShareAcknowledgeResponse = c.call(ApiKey::ShareAcknowledge, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let t = &r.responses[0];
    assert_eq!(t.topic_id, id);
    assert_eq!(
        (t.partitions[0].partition_index, t.partitions[0].error_code),
        (0, UNKNOWN_TOPIC_ID)
    );
}
