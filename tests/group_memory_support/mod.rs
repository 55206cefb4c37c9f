//! The memory of idle consumer groups in a group coordinator, counted in bytes asked of
//! the allocator: shared by the `group_memory` test (an upper bound) and the `groups`
//! benchmark (the figures). Both install `stats_alloc`'s counting allocator as the
//! global allocator and pass it here.
//!
//! A group is made idle the way a client makes it: a standalone group (generation -1, no
//! member id, as `assign()` consumers and `kafka-consumer-groups --reset-offsets` use)
//! by one OffsetCommit of one partition; a group with one member by a JoinGroup, the
//! leader's SyncGroup with an assignment of that partition, then the same commit with
//! the member's generation. What is counted is the coordinator's memory that stays
//! once those calls returned: bytes allocated minus bytes freed, divided by the groups.
#![allow(dead_code)]

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{Region, StatsAlloc};
use tidelog::coordinator::{
    CommitOffset, CoordinatorConfig, GroupCoordinator, JoinGroupRequest, MemberOrigin,
    OffsetCommitRequest, SyncGroupRequest,
};

/// The topic every group commits an offset of.
pub const TOPIC: &str = "perf-groups";

/// What kind of idle group is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Committed offsets only.
    Standalone,
    /// One member (classic protocol) in a Stable group, with committed offsets.
    OneMember,
}

/// The id of group `i`, as `tidelog perf groups` names them.
pub fn group_id(i: usize) -> String {
    format!("perf-group-{i:06}")
}

/// The start of a `ConsumerProtocol` message (version 0) naming one topic, `TOPIC`.
const ONE_TOPIC: [u8; 8] = [0, 0, 0, 0, 0, 1, 0, TOPIC.len() as u8];

/// A `ConsumerProtocol` subscription to `TOPIC`, without user data.
pub fn subscription() -> Vec<u8> {
    [&ONE_TOPIC[..], TOPIC.as_bytes(), &[0xff; 4]].concat()
}

/// A `ConsumerProtocol` assignment of partition 0 of `TOPIC`, without user data.
pub fn assignment() -> Vec<u8> {
    [
        &ONE_TOPIC[..],
        TOPIC.as_bytes(),
        &[0, 0, 0, 1, 0, 0, 0, 0],
        &[0xff; 4],
    ]
    .concat()
}

/// Makes group `id` idle as `kind` says (see the module documentation).
pub fn make_idle(coordinator: &GroupCoordinator, id: &str, kind: Kind) {
    let (generation_id, member_id) = match kind {
        Kind::Standalone => (-1, String::new()),
        Kind::OneMember => {
            let joined = coordinator
                .join_group(
                    JoinGroupRequest {
                        group_id: id.to_string(),
                        protocol_type: "consumer".into(),
                        protocols: vec![("range".into(), subscription())],
                        session_timeout: Duration::from_secs(45),
                        rebalance_timeout: Duration::from_secs(300),
                        client_id: "consumer-1".into(),
                        client_host: "/127.0.0.1".into(),
                        origin: MemberOrigin::Network,
                        ..JoinGroupRequest::default()
                    },
                    Duration::from_secs(10),
                )
                .expect("join");
            coordinator
                .sync_group(
                    SyncGroupRequest {
                        group_id: id.to_string(),
                        generation_id: joined.generation_id,
                        member_id: joined.member_id.clone(),
                        assignments: vec![(joined.member_id.clone(), assignment())],
                        ..SyncGroupRequest::default()
                    },
                    Duration::from_secs(10),
                )
                .expect("sync");
            (joined.generation_id, joined.member_id)
        }
    };
    let results = coordinator
        .offset_commit(OffsetCommitRequest {
            group_id: id.to_string(),
            generation_id,
            member_id,
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: TOPIC.into(),
                partition: 0,
                offset: 42,
                leader_epoch: 0,
                metadata: None,
                commit_timestamp: None,
            }],
        })
        .expect("commit");
    assert!(results.iter().all(|r| r.result.is_ok()), "{results:?}");
}

/// Bytes the coordinator keeps per idle group of `kind`, over `groups` groups: live
/// bytes (allocated minus freed) after making them idle, less those before, divided by
/// `groups`. Counts the group table's growth too (its share per group depends on how
/// full it is at `groups`).
pub fn bytes_per_idle_group(alloc: &StatsAlloc<System>, groups: usize, kind: Kind) -> f64 {
    let coordinator = GroupCoordinator::new(CoordinatorConfig {
        // A network client's first join waits for more members (3 s by default): here
        // there is one.
        initial_rebalance_delay: Duration::ZERO,
        ..CoordinatorConfig::default()
    });
    let ids: Vec<String> = (0..groups).map(group_id).collect();
    let region = Region::new(alloc);
    for id in &ids {
        make_idle(&coordinator, id, kind);
    }
    let change = region.change();
    let live = change.bytes_allocated as f64 - change.bytes_deallocated as f64;
    drop(coordinator);
    live / groups.max(1) as f64
}
