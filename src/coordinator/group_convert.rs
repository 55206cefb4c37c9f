//! The classic group's side of KIP-848's online migration: what a classic group hands
//! over when it becomes a consumer-protocol group (its members, their protocols and
//! assignments), and how it takes back the classic members of a consumer group that
//! converts back.

use std::time::{Duration, Instant};

use super::{Group, GroupState, Member};

/// A member as it moves between a classic group and a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MigratingMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The JoinGroup protocols (name, `ConsumerProtocol` subscription), in preference
    /// order.
    pub protocols: Vec<(String, Vec<u8>)>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// Its `ConsumerProtocol` assignment (empty if it has none).
    pub assignment: Vec<u8>,
}

impl Group {
    /// The generation and members of a group that may become a consumer-protocol group:
    /// None unless it has members that use the consumer embedded protocol (protocol
    /// type "consumer", Kafka's `usesConsumerGroupProtocol`).
    pub(crate) fn migrating_members(&self) -> Option<(i32, Vec<MigratingMember>)> {
        if self.members.is_empty() || self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let members = self
            .members
            .iter()
            .map(|(id, m)| MigratingMember {
                member_id: id.clone(),
                instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                protocols: m.protocols.clone(),
                session_timeout: m.session_timeout,
                rebalance_timeout: m.rebalance_timeout,
                // Mid-rebalance, what the last Stable generation gave it (it may still
                // read it): no other member gets it before it is released.
                assignment: m.assignment.clone(),
            })
            .collect();
        Some((self.generation, members))
    }

    /// The group became a consumer-protocol group: its members move there, and it keeps
    /// only its offsets (Empty; the metadata is stored as for any emptied group).
    /// Waiting JoinGroups and SyncGroups of the members answer `UNKNOWN_MEMBER_ID` and
    /// the members rejoin, now into the consumer-protocol group.
    pub(crate) fn hand_over_members(&mut self) {
        self.pending.clear();
        self.fenced_joins.clear();
        self.generation += 1;
        self.become_empty();
        self.rebalances += 1;
    }

    /// A consumer-protocol group became this classic group again: its (classic)
    /// members join at `generation` with their current assignments, and a rebalance
    /// starts (their heartbeats answer `REBALANCE_IN_PROGRESS`, they rejoin and the
    /// leader they elect assigns), as Kafka does on a downgrade.
    pub(crate) fn take_over_members(
        &mut self,
        generation: i32,
        members: Vec<MigratingMember>,
        now: Instant,
    ) {
        self.members.clear();
        self.instances.clear();
        self.pending.clear();
        self.protocol_type = Some("consumer".to_string());
        self.generation = generation;
        let first = members
            .first()
            .and_then(|m| m.protocols.first())
            .map(|(n, _)| n.clone());
        for (i, m) in members.into_iter().enumerate() {
            if let Some(instance) = &m.instance_id {
                self.instances.insert(instance.clone(), m.member_id.clone());
            }
            self.members.insert(
                m.member_id,
                Member {
                    group_instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    protocols: m.protocols,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    last_heartbeat: now,
                    joined_seq: i as u64,
                    awaiting_join: None,
                    join_result: None,
                    awaiting_sync: 0,
                    pending_sync: false,
                    assignment: m.assignment,
                },
            );
        }
        self.seq = self.seq.max(self.members.len() as u64);
        self.protocol = self.select_protocol().or(first);
        self.leader = self.members.keys().next().cloned();
        self.state = GroupState::Stable;
        self.store_pending = true;
        self.prepare_rebalance(now);
    }
}
