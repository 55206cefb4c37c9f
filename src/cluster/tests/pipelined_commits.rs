//! A connection's OffsetCommits wait for their replicas together: the coordinator
//! appends a commit sent behind one still waiting (it is not held until the first is
//! answered), answers neither before the in-sync replicas have them, and answers them
//! in the order they came; a request of another kind behind them is handled only once
//! they are answered, and sees their offsets.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest as WireCommit, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::failover::{addr, pause};
use super::replication::{broker, create, part};
use super::*;
use crate::coordinator::partition_for;
use crate::server::tests_api::Client;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn commit(group: &str, offset: i64) -> WireCommit {
    WireCommit::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_retention_time_ms(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ])
}

/// The committed offset of partition 0 of `t` in the answer to an OffsetFetch v7.
fn fetched(resp: &OffsetFetchResponse) -> i64 {
    assert_eq!(resp.error_code, 0, "{resp:?}");
    resp.topics[0].partitions[0].committed_offset
}

#[test]
fn a_connections_commits_wait_for_their_replicas_together_and_are_answered_in_order() {
    // No replica leaves the ISR while the followers are held.
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(120));
    c.wait_settled();
    create(&c, "t", 1, Vec::new());
    // Three groups of one __consumer_offsets partition, coordinated by its leader with
    // every replica in sync.
    let groups: Vec<String> = (0..1000)
        .map(|i| format!("pipelined-{i}"))
        .filter(|g| partition_for(g, OFFSETS_PARTITIONS) == 0)
        .take(3)
        .collect();
    let offsets = |i: usize| part(&c, i, crate::broker::OFFSETS_TOPIC, 0);
    let mut home = None;
    wait_until(
        "the coordinator of partition 0 with its replicas in sync",
        || {
            let img = c.node(c.running()[0]).image();
            let Some(p) = img
                .topic(crate::broker::OFFSETS_TOPIC)
                .map(|t| t.partitions[0].clone())
            else {
                return false;
            };
            let Ok(i) = usize::try_from(p.leader - 1) else {
                return false;
            };
            home = Some(i);
            p.isr.len() == 3
                && broker(&c, i)
                    .group_coordinator()
                    .loaded_partitions()
                    .contains(&0)
        },
    );
    let home = home.unwrap();
    let mut client = Client::connect(addr(&c, home));
    // Each group exists with offset 1, replicated.
    for g in &groups {
        let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &commit(g, 1));
        assert_eq!(resp.topics[0].partitions[0].error_code, 0, "{resp:?}");
    }
    let followers: Vec<usize> = c.running().into_iter().filter(|&i| i != home).collect();
    let end = offsets(home).log_end_offset();
    wait_until("the followers have every commit", || {
        followers
            .iter()
            .all(|&i| offsets(i).log_end_offset() == end)
    });
    for &i in &followers {
        pause(&c, i, true);
    }

    // Three commits sent back to back, then an OffsetFetch of the first group.
    let sent: Vec<i32> = groups
        .iter()
        .zip([10, 20, 30])
        .map(|(g, o)| client.send(ApiKey::OffsetCommit, 8, &commit(g, o)))
        .collect();
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(&groups[0])))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0]),
        ]));
    let fetch_id = client.send(ApiKey::OffsetFetch, 7, &fetch);
    // Every commit is appended while the first still waits for the replicas.
    wait_until("the three commits appended", || {
        offsets(home).log_end_offset() == end + 3
    });
    // None is answered (nor stored) before its replicas have it.
    assert!(!client.has_pending_bytes(), "a commit was answered early");
    let coordinator = broker(&c, home).group_coordinator().clone();
    for g in &groups {
        let now = coordinator
            .offset_fetch(g, Some(&[("t".to_string(), 0)]))
            .unwrap();
        assert_eq!(now[0].offset, 1, "{g} stored before its replicas had it");
    }

    for &i in &followers {
        pause(&c, i, false);
    }
    for &id in &sent {
        let (got, resp): (i32, OffsetCommitResponse) = client.recv(8);
        assert_eq!(got, id, "answers come in the order of the requests");
        assert_eq!(resp.topics[0].partitions[0].error_code, 0, "{resp:?}");
    }
    let (got, resp): (i32, OffsetFetchResponse) = client.recv(7);
    assert_eq!(got, fetch_id);
    assert_eq!(
        fetched(&resp),
        10,
        "the fetch sees the commit sent before it"
    );
    for &i in &followers {
        assert!(offsets(i).log_end_offset() >= end + 3);
    }
    c.shutdown();
}
