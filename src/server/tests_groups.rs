//! The group administration APIs (ListGroups, DescribeGroups, DeleteGroups,
//! OffsetDelete), static membership and OffsetCommit's per-partition errors over a real
//! socket, with requests encoded and responses decoded by `kafka-protocol`.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, create as create_topic};
use super::*;
use crate::consumer::{Assignment, Subscription};

/// A server whose network groups form at once (no `group.initial.rebalance.delay.ms`).
pub(crate) fn start_without_initial_delay(dir: &std::path::Path) -> ServerHandle {
    let broker = crate::broker::Broker::builder(dir)
        .group_initial_rebalance_delay(Duration::ZERO)
        .open()
        .unwrap();
    Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn subscription(topics: &[&str]) -> Bytes {
    Bytes::from(
        Subscription {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
        .encode(),
    )
}

/// Joins `group` (JoinGroup v5, with an instance id if given) and syncs as its only
/// member or as a follower; returns (member id, generation).
fn join_and_sync(
    c: &mut Client,
    group: &str,
    instance: Option<&str>,
    assignment: &[(&str, Vec<i32>)],
) -> (StrBytes, i32) {
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_group_instance_id(instance.map(s))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(subscription(&["g"])),
        ]);
    let mut resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &join);
    if resp.error_code == 79 {
        resp = c.call(
            ApiKey::JoinGroup,
            5,
            &join.clone().with_member_id(resp.member_id.clone()),
        );
    }
    assert_eq!(resp.error_code, 0, "{resp:?}");
    let bytes = Bytes::from(
        Assignment {
            partitions: assignment
                .iter()
                .map(|(t, ps)| (t.to_string(), ps.clone()))
                .collect(),
            user_data: None,
        }
        .encode(),
    );
    let assignments = if resp.leader == resp.member_id {
        vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(resp.member_id.clone())
                .with_assignment(bytes),
        ]
    } else {
        Vec::new()
    };
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(resp.generation_id)
        .with_member_id(resp.member_id.clone())
        .with_group_instance_id(instance.map(s))
        .with_assignments(assignments);
    let synced: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(synced.error_code, 0);
    (resp.member_id, resp.generation_id)
}

fn commit(c: &mut Client, group: &str, topic: &str, partition: i32, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(partition)
                        .with_committed_offset(offset),
                ]),
        ]);
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 7, &req);
    resp.topics[0].partitions[0].error_code
}

fn list(c: &mut Client, version: i16, states: &[&str]) -> Vec<(String, String, String)> {
    let req =
        ListGroupsRequest::default().with_states_filter(states.iter().map(|v| s(v)).collect());
    let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, version, &req);
    assert_eq!(resp.error_code, 0);
    let mut out: Vec<(String, String, String)> = resp
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.protocol_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn list_describe_delete_groups_and_offsets_over_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "g", 2);
    create_topic(&mut c, "other", 1);
    let (member, generation) = join_and_sync(&mut c, "live", None, &[("g", vec![0, 1])]);
    assert_eq!(commit(&mut c, "offsets-only", "g", 0, 5), 0);
    assert_eq!(commit(&mut c, "offsets-only", "other", 0, 9), 0);

    // OffsetCommit for a topic or a partition that does not exist.
    assert_eq!(commit(&mut c, "offsets-only", "nope", 0, 1), 3);
    assert_eq!(commit(&mut c, "offsets-only", "g", 7, 1), 3);

    // ListGroups: every version; states from v4, with a filter.
    for v in 0..=4 {
        let got = list(&mut c, v, &[]);
        let ids: Vec<&str> = got.iter().map(|(id, _, _)| id.as_str()).collect();
        assert_eq!(ids, vec!["live", "offsets-only"], "ListGroups v{v}");
        assert_eq!(got[0].1, "consumer");
        if v >= 4 {
            assert_eq!(got[0].2, "Stable");
            assert_eq!(got[1].2, "Empty");
        }
    }
    let stable = list(&mut c, 4, &["stable"]);
    assert_eq!(stable.len(), 1);
    assert_eq!(stable[0].0, "live");
    assert!(list(&mut c, 4, &["Dead"]).is_empty());
    // v5: every group is of type "classic"; a filter by another type lists none.
    for (types, expected) in [(vec![], 2), (vec!["Classic"], 2), (vec!["consumer"], 0)] {
        let req =
            ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect());
        let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 5, &req);
        assert_eq!(resp.groups.len(), expected, "types {types:?}");
        assert!(
            resp.groups
                .iter()
                .all(|g| g.group_type.as_str() == "classic")
        );
    }

    // DescribeGroups: every version.
    for v in 0..=5 {
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("live")), GroupId(s("unknown"))]);
        let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, v, &req);
        let live = &resp.groups[0];
        assert_eq!(live.error_code, 0, "DescribeGroups v{v}");
        assert_eq!(live.group_state.as_str(), "Stable");
        assert_eq!(live.protocol_type.as_str(), "consumer");
        assert_eq!(live.protocol_data.as_str(), "range");
        assert_eq!(live.members.len(), 1);
        let m = &live.members[0];
        assert_eq!(m.member_id, member);
        assert_eq!(m.client_id.as_str(), "unit");
        let a = Assignment::decode(&m.member_assignment).unwrap();
        assert_eq!(a.partitions, vec![("g".to_string(), vec![0, 1])]);
        let sub = Subscription::decode(&m.member_metadata).unwrap();
        assert_eq!(sub.topics, vec!["g".to_string()]);
        let unknown = &resp.groups[1];
        assert_eq!(unknown.group_state.as_str(), "Dead");
        assert!(unknown.members.is_empty());
    }

    // OffsetDelete: refused for a topic the live group subscribes to; allowed for the
    // offsets-only group.
    let del = |group: &str, topic: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(0),
                    ]),
            ])
    };
    let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &del("live", "g"));
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        resp.topics[0].partitions[0].error_code, 86,
        "GROUP_SUBSCRIBED_TO_TOPIC"
    );
    let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &del("offsets-only", "g"));
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &del("nobody", "g"));
    assert_eq!(resp.error_code, 69, "GROUP_ID_NOT_FOUND");
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("offsets-only")))
        .with_topics(None);
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 5, &fetch);
    let left: Vec<String> = resp.topics.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(left, vec!["other".to_string()]);

    // DeleteGroups: every version; a live group is NON_EMPTY_GROUP.
    for v in 0..=2 {
        let group = format!("doomed-v{v}");
        assert_eq!(commit(&mut c, &group, "g", 1, 3), 0);
        let req = DeleteGroupsRequest::default().with_groups_names(vec![
            GroupId(s(&group)),
            GroupId(s("live")),
            GroupId(s("nobody")),
        ]);
        let resp: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, v, &req);
        let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![0, 68, 69], "DeleteGroups v{v}");
    }
    let ids: Vec<String> = list(&mut c, 4, &[]).into_iter().map(|g| g.0).collect();
    assert_eq!(ids, vec!["live".to_string(), "offsets-only".to_string()]);

    // The live member is undisturbed.
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("live")))
        .with_generation_id(generation)
        .with_member_id(member);
    let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &hb);
    assert_eq!(resp.error_code, 0);
    server.shutdown().unwrap();
}

#[test]
fn static_members_are_fenced_and_leave_by_instance_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "g", 2);
    let (first, generation) = join_and_sync(&mut c, "static", Some("host-1"), &[("g", vec![0, 1])]);

    // The instance restarts: same instance id, empty member id. It gets a new member id
    // in the same generation, without a rebalance, and its assignment back.
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("static")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_group_instance_id(Some(s("host-1")))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(subscription(&["g"])),
        ]);
    let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &join);
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, generation, "no new generation");
    assert_ne!(resp.member_id, first);
    let second = resp.member_id.clone();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("static")))
        .with_generation_id(generation)
        .with_member_id(second.clone())
        .with_group_instance_id(Some(s("host-1")));
    let synced: SyncGroupResponse = c.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(synced.error_code, 0);
    let a = Assignment::decode(&synced.assignment).unwrap();
    assert_eq!(a.partitions, vec![("g".to_string(), vec![0, 1])]);

    // The old instance is fenced.
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("static")))
        .with_generation_id(generation)
        .with_member_id(first)
        .with_group_instance_id(Some(s("host-1")));
    let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, 3, &hb);
    assert_eq!(resp.error_code, 82, "FENCED_INSTANCE_ID");

    // LeaveGroup v3 by instance id alone.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("static")))
        .with_members(vec![
            leave_group_request::MemberIdentity::default()
                .with_group_instance_id(Some(s("host-1"))),
            leave_group_request::MemberIdentity::default()
                .with_group_instance_id(Some(s("host-9"))),
        ]);
    let resp: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 3, &leave);
    assert_eq!(resp.error_code, 0);
    let codes: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![0, 25]);
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("static"))]);
    let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req);
    // Empty, or already forgotten (nothing left to keep): no members either way.
    let state = resp.groups[0].group_state.as_str();
    assert!(matches!(state, "Empty" | "Dead"), "{state}");
    assert!(resp.groups[0].members.is_empty());
    server.shutdown().unwrap();
}

#[test]
fn a_static_leader_back_with_join_group_v9_is_told_to_skip_the_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_without_initial_delay(dir.path());
    let mut c = Client::connect(server.local_addr());
    create_topic(&mut c, "g", 2);
    let (first, generation) = join_and_sync(&mut c, "lead", Some("host-1"), &[("g", vec![0, 1])]);
    let join = |instance: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("lead")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(s("consumer"))
            .with_group_instance_id(Some(s(instance)))
            .with_reason(Some(s("restarted")))
            .with_protocols(vec![
                join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(subscription(&["g"])),
            ])
    };
    // The leader's process restarts and joins with JoinGroup v9: it leads under its new
    // id, gets the member list, and is told not to assign.
    let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 9, &join("host-1"));
    assert_eq!(resp.error_code, 0, "{resp:?}");
    assert_eq!(resp.generation_id, generation, "no new generation");
    assert_ne!(resp.member_id, first);
    assert_eq!(resp.leader, resp.member_id);
    assert!(resp.skip_assignment);
    assert_eq!(resp.protocol_type.as_deref(), Some("consumer"));
    let listed: Vec<_> = resp.members.iter().map(|m| m.member_id.clone()).collect();
    assert_eq!(listed, vec![resp.member_id.clone()]);
    // It syncs with no assignment (SyncGroup v5) and gets the group's.
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("lead")))
        .with_generation_id(generation)
        .with_member_id(resp.member_id.clone())
        .with_group_instance_id(Some(s("host-1")))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")));
    let synced: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &sync);
    assert_eq!(synced.error_code, 0);
    let a = Assignment::decode(&synced.assignment).unwrap();
    assert_eq!(a.partitions, vec![("g".to_string(), vec![0, 1])]);
    let hb = HeartbeatRequest::default()
        .with_group_id(GroupId(s("lead")))
        .with_generation_id(generation)
        .with_member_id(resp.member_id.clone())
        .with_group_instance_id(Some(s("host-1")));
    let beat: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &hb);
    assert_eq!(beat.error_code, 0, "the group stays Stable");

    // The same return before v9 (JoinGroup v7): the old leader id, no member list.
    let second = resp.member_id;
    let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 7, &join("host-1").with_reason(None));
    assert_eq!(resp.error_code, 0, "{resp:?}");
    assert_eq!(resp.generation_id, generation);
    assert_eq!(resp.leader, second, "the leader id before this join");
    assert!(resp.members.is_empty());

    // LeaveGroup v5 with the instance id and its member id, and a reason.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("lead")))
        .with_members(vec![
            leave_group_request::MemberIdentity::default()
                .with_member_id(second)
                .with_group_instance_id(Some(s("host-1")))
                .with_reason(Some(s("shutting down"))),
            leave_group_request::MemberIdentity::default()
                .with_member_id(resp.member_id)
                .with_group_instance_id(Some(s("host-1"))),
        ]);
    let left: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 5, &leave);
    let codes: Vec<i16> = left.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes,
        vec![82, 0],
        "the stale id is fenced, the current one leaves"
    );
    server.shutdown().unwrap();
}
