//! Members of a consumer-protocol group that use the classic protocol, as in Kafka 4.0's
//! online migration (KIP-848): a classic group whose members use the consumer embedded
//! protocol becomes a consumer group when a ConsumerGroupHeartbeat joins it
//! ([`ConsumerGroup::from_classic`]), and its classic members go on with JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup:
//!
//! - a JoinGroup updates the member's subscription (read from its `ConsumerProtocol`
//!   subscription) and reconciles it toward its target assignment, the partitions it
//!   reports as owned acknowledging revocations; it answers at once, with the member
//!   epoch as the generation and no leader (the server assigns);
//! - a SyncGroup answers the member's current assignment;
//! - a Heartbeat answers `REBALANCE_IN_PROGRESS` when the member must rejoin: the group
//!   epoch moved past its epoch, it has partitions to revoke, or partitions it waits for
//!   were released;
//! - a LeaveGroup removes the member.
//!
//! When the last consumer-protocol member leaves and only classic members remain, the
//! group goes back to a classic group ([`ConsumerGroup::downgrade_members`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::super::group::MigratingMember;
use super::super::protocol::{Assignment as WireAssignment, Subscription};
use super::super::types::{
    JoinGroupRequest, JoinGroupResponse, LeavingMember, SyncGroupRequest, SyncGroupResponse,
};
use super::{ConsumerGroup, GroupError, Member, MemberState, TopicsImage, from_list, to_list};
use crate::config::CoordinatorConfig;

/// The classic protocol's side of a member: how long its session lasts and the
/// protocols it joined with (name, `ConsumerProtocol` subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClassicMember {
    pub(super) session_timeout: Duration,
    pub(super) protocols: Vec<(String, Vec<u8>)>,
}

impl ClassicMember {
    /// The protocol the member was answered with (its first).
    fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n.as_str())
    }
}

/// The subscription a member's JoinGroup carries (every protocol carries the same; the
/// first is read, as Kafka does).
fn subscription(protocols: &[(String, Vec<u8>)]) -> Result<Subscription, GroupError> {
    let (_, meta) = protocols
        .first()
        .ok_or_else(|| GroupError::InconsistentGroupProtocol("no protocols".to_string()))?;
    Subscription::decode(meta).map_err(|e| {
        GroupError::InvalidRequest(format!("malformed consumer protocol subscription: {e}"))
    })
}

impl ConsumerGroup {
    /// A classic group's members as a consumer-protocol group (an upgrade): each keeps
    /// its member id, its assignment and the generation as its epoch; the target is
    /// their assignments. [`GroupError::GroupIdNotFound`] if a member's embedded
    /// protocol cannot be read (the group stays classic, as in Kafka).
    pub(crate) fn from_classic(
        id: &str,
        incarnation: u64,
        generation: i32,
        members: Vec<MigratingMember>,
        topics: &TopicsImage,
        now: Instant,
    ) -> Result<ConsumerGroup, GroupError> {
        let mut group = ConsumerGroup::new(id, incarnation);
        group.topics = topics.clone();
        for m in members {
            let sub = subscription(&m.protocols).map_err(|_| GroupError::GroupIdNotFound)?;
            let assigned = WireAssignment::decode(&m.assignment)
                .map_err(|_| GroupError::GroupIdNotFound)?
                .partitions;
            let mut member = Member::new(now, m.session_timeout);
            member.instance_id = m.instance_id.clone();
            member.client_id = m.client_id;
            member.client_host = m.client_host;
            member.epoch = generation;
            member.previous_epoch = generation;
            member.rebalance_timeout = m.rebalance_timeout;
            member.topic_names = sub.topics.into_iter().collect();
            member.assigned = from_list(&assigned);
            member.classic = Some(ClassicMember {
                session_timeout: m.session_timeout,
                protocols: m.protocols,
            });
            if let Some(i) = m.instance_id {
                group.instances.insert(i, m.member_id.clone());
            }
            group
                .target
                .insert(m.member_id.clone(), member.assigned.clone());
            group.members.insert(m.member_id, member);
        }
        group.group_epoch = generation;
        group.assignment_epoch = generation;
        group.subscribed_metadata = group.current_metadata();
        Ok(group)
    }

    /// True if every member uses the classic protocol (and there is one).
    pub(crate) fn all_classic(&self) -> bool {
        !self.members.is_empty() && self.members.values().all(|m| m.classic.is_some())
    }

    /// The generation and the members of a group whose members all use the classic
    /// protocol, to become a classic group (a downgrade); None otherwise. Each member
    /// takes its current assignment along.
    pub(crate) fn downgrade_members(&self) -> Option<(i32, Vec<MigratingMember>)> {
        if !self.all_classic() {
            return None;
        }
        let members = self
            .members
            .iter()
            .filter_map(|(id, m)| {
                let classic = m.classic.as_ref()?;
                Some(MigratingMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    protocols: classic.protocols.clone(),
                    session_timeout: classic.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    assignment: WireAssignment {
                        partitions: to_list(&m.assigned),
                        user_data: None,
                    }
                    .encode(),
                })
            })
            .collect();
        // The generation is the newest epoch a member is at (the group epoch before the
        // leave that triggered the downgrade), so members at it heartbeat into the
        // rebalance and a laggard is told its generation is stale; both rejoin.
        let generation = self.members.values().map(|m| m.epoch).max()?;
        Some((generation, members))
    }

    /// Kafka's `supportsClassicProtocols`: a classic member must use the consumer
    /// embedded protocol and share a protocol name with every classic member.
    fn check_classic_protocols(&self, req: &JoinGroupRequest) -> Result<(), GroupError> {
        let names: BTreeSet<&str> = req.protocols.iter().map(|(n, _)| n.as_str()).collect();
        let shared = self
            .members
            .iter()
            .filter(|(id, _)| **id != req.member_id)
            .filter_map(|(_, m)| m.classic.as_ref())
            .all(|c| c.protocols.iter().any(|(n, _)| names.contains(n.as_str())));
        if req.protocol_type != "consumer" || names.is_empty() || !shared {
            return Err(GroupError::InconsistentGroupProtocol(format!(
                "member {:?}'s protocols are not supported by consumer group {}",
                req.member_id, self.id
            )));
        }
        Ok(())
    }

    /// The member a classic request names (by instance id when it has one), as
    /// Kafka's `validateConsumerGroupMember`, which must use the classic protocol.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&Member, GroupError> {
        if let Some(i) = instance_id {
            match self.instances.get(i) {
                None => return Err(GroupError::UnknownMemberId(member_id.to_string())),
                Some(id) if id != member_id => {
                    return Err(GroupError::FencedInstanceId(i.to_string()));
                }
                Some(_) => {}
            }
        }
        self.members
            .get(member_id)
            .filter(|m| m.classic.is_some())
            .ok_or_else(|| GroupError::UnknownMemberId(member_id.to_string()))
    }

    /// A classic JoinGroup into this group: creates or updates the member, recomputes
    /// the target if its subscription changed and reconciles it (the partitions its
    /// subscription says it owns acknowledge its revocations). Answered at once with
    /// the member epoch as generation and no leader.
    pub(crate) fn classic_join(
        &mut self,
        req: &JoinGroupRequest,
        cfg: &CoordinatorConfig,
        now: Instant,
    ) -> Result<JoinGroupResponse, GroupError> {
        self.check_classic_protocols(req)?;
        let sub = subscription(&req.protocols)?;
        if req.member_id.is_empty()
            && req.group_instance_id.is_none()
            && req.require_known_member_id
        {
            return Err(GroupError::MemberIdRequired {
                member_id: self.next_member_id(),
            });
        }
        let member_id = self.classic_member_id(req)?;
        let (mut member, mut bump) = match self.members.remove(&member_id) {
            Some(m) => (m, false),
            None => {
                if self.members.len() >= cfg.max_group_size {
                    return Err(GroupError::GroupMaxSizeReached(cfg.max_group_size));
                }
                (Member::new(now, req.session_timeout), true)
            }
        };
        let topics: BTreeSet<String> = sub.topics.iter().cloned().collect();
        bump |= topics != member.topic_names;
        member.topic_names = topics;
        member.instance_id = req.group_instance_id.clone().or(member.instance_id);
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.rebalance_timeout = req.rebalance_timeout;
        member.session_deadline = now + req.session_timeout;
        if member.state != MemberState::UnrevokedPartitions {
            member.revocation_deadline = None;
        }
        member.classic = Some(ClassicMember {
            session_timeout: req.session_timeout,
            protocols: req.protocols.clone(),
        });
        let owned = from_list(&sub.owned_partitions);
        self.admit(&member_id, member, bump, Some(&owned), cfg, now);
        let m = self.members.get_mut(&member_id).expect("admitted");
        // It must send SyncGroup within its rebalance timeout (Kafka's sync timeout).
        m.sync_deadline = Some(now + req.rebalance_timeout);
        let m = &self.members[&member_id];
        let protocol = m.classic.as_ref().map(|c| c.protocol_name().to_string());
        Ok(JoinGroupResponse {
            generation_id: m.epoch,
            protocol_type: Some("consumer".to_string()),
            protocol_name: protocol,
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        })
    }

    /// The member id a classic JoinGroup is for: its own, a new one, or (a static
    /// member rejoining without its id) the one its instance id maps to.
    fn classic_member_id(&mut self, req: &JoinGroupRequest) -> Result<String, GroupError> {
        if let Some(i) = &req.group_instance_id
            && let Some(id) = self.instances.get(i)
        {
            if req.member_id.is_empty() || *id == req.member_id {
                return Ok(id.clone());
            }
            return Err(GroupError::FencedInstanceId(i.clone()));
        }
        Ok(if req.member_id.is_empty() {
            self.next_member_id()
        } else {
            req.member_id.clone()
        })
    }

    /// A classic SyncGroup: the member's current assignment, as `ConsumerProtocol`
    /// bytes. `ILLEGAL_GENERATION` unless the generation is its epoch,
    /// `INCONSISTENT_GROUP_PROTOCOL` for another protocol, `REBALANCE_IN_PROGRESS` if
    /// the group epoch moved on and it has nothing to revoke (it must rejoin).
    pub(crate) fn classic_sync(
        &mut self,
        req: &SyncGroupRequest,
        now: Instant,
    ) -> Result<SyncGroupResponse, GroupError> {
        let m = self.classic_member(&req.member_id, req.group_instance_id.as_deref())?;
        check_generation(m, req.generation_id)?;
        let classic = m.classic.as_ref().expect("a classic member");
        let name = classic.protocol_name().to_string();
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != "consumer")
            || req.protocol_name.as_deref().is_some_and(|n| n != name)
        {
            return Err(GroupError::InconsistentGroupProtocol(format!(
                "SyncGroup of member {} does not match its protocol {name}",
                req.member_id
            )));
        }
        if self.group_epoch > m.epoch && m.state != MemberState::UnrevokedPartitions {
            // It must rejoin within its rebalance timeout, as after a Heartbeat that
            // tells it so.
            let m = self.members.get_mut(&req.member_id).expect("checked above");
            m.revocation_deadline
                .get_or_insert(now + m.rebalance_timeout);
            return Err(GroupError::RebalanceInProgress);
        }
        // At its subscription's version, as Kafka answers.
        let version = classic
            .protocols
            .first()
            .map_or(0, |(_, meta)| Subscription::version_of(meta));
        let assignment = WireAssignment {
            partitions: to_list(&m.assigned),
            user_data: None,
        }
        .encode_at(version);
        let session = classic.session_timeout;
        let m = self.members.get_mut(&req.member_id).expect("checked above");
        m.session_deadline = now + session;
        m.sync_deadline = None;
        Ok(SyncGroupResponse {
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some(name),
            assignment,
        })
    }

    /// A classic Heartbeat: keeps the member's session; `REBALANCE_IN_PROGRESS` when it
    /// must rejoin (the group epoch is past its epoch, it has partitions to revoke, or
    /// the partitions it waits for are free), and then it must rejoin within its
    /// rebalance timeout or be removed.
    pub(crate) fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        let m = self.classic_member(member_id, instance_id)?;
        check_generation(m, generation)?;
        let rejoin = m.epoch < self.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions
                && !self.waits_on_unreleased(member_id));
        let m = self.members.get_mut(member_id).expect("checked above");
        let session = m.classic.as_ref().map(|c| c.session_timeout);
        m.session_deadline = now + session.unwrap_or_default();
        if !rejoin {
            return Ok(());
        }
        if m.revocation_deadline.is_none() {
            m.revocation_deadline = Some(now + m.rebalance_timeout);
        }
        Err(GroupError::RebalanceInProgress)
    }

    /// True if a partition of the member's target it does not have yet is still owned
    /// by another member.
    fn waits_on_unreleased(&self, id: &str) -> bool {
        let Some(member) = self.members.get(id) else {
            return false;
        };
        let target = self.target.get(id).cloned().unwrap_or_default();
        target.iter().any(|(t, ps)| {
            ps.iter().any(|&p| {
                !member.assigned.get(t).is_some_and(|a| a.contains(&p))
                    && self.members.iter().any(|(o, m)| o != id && m.owns(t, p))
            })
        })
    }

    /// A classic LeaveGroup: removes each member named; one result per member.
    pub(crate) fn classic_leave(
        &mut self,
        members: &[LeavingMember],
        cfg: &CoordinatorConfig,
    ) -> Vec<Result<(), GroupError>> {
        members
            .iter()
            .map(|l| {
                let id = match &l.group_instance_id {
                    Some(i) => {
                        let id = self
                            .instances
                            .get(i)
                            .cloned()
                            .ok_or_else(|| GroupError::UnknownMemberId(l.member_id.clone()))?;
                        if !l.member_id.is_empty() && id != l.member_id {
                            return Err(GroupError::FencedInstanceId(i.clone()));
                        }
                        id
                    }
                    None => l.member_id.clone(),
                };
                if !self.members.contains_key(&id) {
                    return Err(GroupError::UnknownMemberId(id));
                }
                self.remove_member(&id, cfg);
                Ok(())
            })
            .collect()
    }
}

/// Kafka's `throwIfGenerationIdUnmatched`: a classic member's generation is its epoch.
fn check_generation(m: &Member, generation: i32) -> Result<(), GroupError> {
    if generation != m.epoch {
        return Err(GroupError::IllegalGeneration {
            given: generation,
            current: m.epoch,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::super::consumer_records;
    use super::*;

    fn cfg() -> CoordinatorConfig {
        CoordinatorConfig::default()
    }

    fn topics() -> TopicsImage {
        BTreeMap::from([("t".to_string(), 4)])
    }

    fn subscribed(owned: &[i32]) -> Vec<(String, Vec<u8>)> {
        let sub = Subscription {
            topics: vec!["t".into()],
            user_data: None,
            owned_partitions: if owned.is_empty() {
                vec![]
            } else {
                vec![("t".into(), owned.to_vec())]
            },
        };
        vec![("range".into(), sub.encode())]
    }

    fn migrating(id: &str, partitions: Vec<i32>) -> MigratingMember {
        MigratingMember {
            member_id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            protocols: subscribed(&[]),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(20),
            assignment: WireAssignment {
                partitions: vec![("t".into(), partitions)],
                user_data: None,
            }
            .encode(),
        }
    }

    fn join(id: &str, owned: &[i32]) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: "g".into(),
            member_id: id.into(),
            protocol_type: "consumer".into(),
            protocols: subscribed(owned),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(20),
            ..Default::default()
        }
    }

    #[test]
    fn upgraded_members_keep_their_assignment_and_reconcile_through_joins() {
        let now = Instant::now();
        let members = vec![migrating("a", vec![0, 1]), migrating("b", vec![2, 3])];
        let mut g = ConsumerGroup::from_classic("g", 1, 5, members, &topics(), now).unwrap();
        assert_eq!((g.group_epoch(), g.member_epoch("a")), (5, Some(5)));
        assert_eq!(
            g.current_assignment("b"),
            Some(vec![("t".into(), vec![2, 3])])
        );
        assert_eq!(g.state().as_str(), "Stable");
        g.classic_heartbeat("a", None, 5, now).unwrap();
        assert!(matches!(
            g.classic_heartbeat("a", None, 4, now),
            Err(GroupError::IllegalGeneration { .. })
        ));
        // Unchanged subscriptions: a rejoin keeps everything, no new epoch.
        let j = g.classic_join(&join("a", &[0, 1]), &cfg(), now).unwrap();
        assert_eq!(j.generation_id, 5);
        // The downgrade hands the members back with their assignments.
        let (generation, back) = g.downgrade_members().unwrap();
        assert_eq!(generation, 5);
        let a = back.iter().find(|m| m.member_id == "a").unwrap();
        assert_eq!(
            WireAssignment::decode(&a.assignment).unwrap().partitions,
            vec![("t".to_string(), vec![0, 1])]
        );
        assert_eq!(a.protocols, subscribed(&[0, 1]));
    }

    #[test]
    fn a_malformed_embedded_protocol_keeps_the_group_classic() {
        let mut m = migrating("a", vec![0]);
        m.protocols = vec![("range".into(), vec![9])];
        assert!(matches!(
            ConsumerGroup::from_classic("g", 1, 3, vec![m], &topics(), Instant::now()),
            Err(GroupError::GroupIdNotFound)
        ));
    }

    #[test]
    fn classic_members_survive_a_restore_from_the_journal() {
        let now = Instant::now();
        let g = ConsumerGroup::from_classic(
            "g",
            1,
            2,
            vec![migrating("a", vec![0, 1, 2, 3])],
            &topics(),
            now,
        )
        .unwrap();
        let (records, _) = g.pending_records();
        let decoded: Vec<_> = records
            .iter()
            .filter_map(|(k, v)| consumer_records::decode(k, v.as_deref()).unwrap())
            .collect();
        let mut back = ConsumerGroup::restore("g", &decoded, &cfg(), now, 2).unwrap();
        assert!(back.all_classic());
        back.classic_heartbeat("a", None, 2, now).unwrap();
        let s = back
            .classic_sync(
                &SyncGroupRequest {
                    group_id: "g".into(),
                    generation_id: 2,
                    member_id: "a".into(),
                    protocol_name: Some("range".into()),
                    ..Default::default()
                },
                now,
            )
            .unwrap();
        assert_eq!(
            WireAssignment::decode(&s.assignment).unwrap().partitions,
            vec![("t".to_string(), vec![0, 1, 2, 3])]
        );
    }
}
