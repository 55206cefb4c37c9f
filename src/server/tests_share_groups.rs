//! Share groups (KIP-932) over a real socket: ShareGroupHeartbeat, ShareGroupDescribe
//! and the share session errors of ShareFetch and ShareAcknowledge, with requests
//! encoded and responses decoded by `kafka-protocol`.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::Client;
use super::tests_groups::start_without_initial_delay;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn fetch(c: &mut Client, epoch: i32) -> ShareFetchResponse {
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("sg"))))
        .with_member_id(Some(s("m1")))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10);
    c.call(ApiKey::ShareFetch, 1, &req)
}

#[test]
fn a_share_member_joins_is_described_and_its_session_checks_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    let create = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s("t")))
            .with_num_partitions(2)
            .with_replication_factor(1),
    ]);
    let created: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &create);
    assert_eq!(created.topics[0].error_code, 0);

    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]));
    let joined: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &join);
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(
        (joined.member_epoch, joined.heartbeat_interval_ms),
        (1, 5000)
    );
    let assigned = &joined.assignment.as_ref().unwrap().topic_partitions;
    assert_eq!(assigned[0].partitions, vec![0, 1]);
    let fenced = join.clone().with_member_epoch(9);
    let fenced: ShareGroupHeartbeatResponse = c.call(ApiKey::ShareGroupHeartbeat, 1, &fenced);
    assert_eq!(fenced.error_code, 110);

    let described: ShareGroupDescribeResponse = c.call(
        ApiKey::ShareGroupDescribe,
        1,
        &ShareGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("sg")), GroupId(s("nope"))]),
    );
    let g = &described.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!(g.members[0].member_id.as_str(), "m1");
    assert_eq!(g.assignor_name.as_str(), "simple");
    assert_eq!(described.groups[1].error_code, 69);

    // No session yet: SHARE_SESSION_NOT_FOUND; epoch 0 opens one, then 1 is next.
    assert_eq!(fetch(&mut c, 1).error_code, 122);
    assert_eq!(fetch(&mut c, 0).error_code, 0);
    assert_eq!(fetch(&mut c, 5).error_code, 123);
    assert_eq!(fetch(&mut c, 1).error_code, 0);
    let ack: ShareAcknowledgeResponse = c.call(
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("sg"))))
            .with_member_id(Some(s("m1")))
            .with_share_session_epoch(3),
    );
    assert_eq!(ack.error_code, 123);
}
