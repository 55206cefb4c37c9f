//! A [`GroupConsumer`] speaking the consumer group protocol (KIP-848,
//! `group.protocol = consumer`): the broker's coordinator assigns the partitions and
//! the member reconciles on each heartbeat. An assignment without some partition it
//! owns is applied at once (auto-commit, `on_partitions_revoked`, then the next poll
//! heartbeats to acknowledge the revocation); partitions it gains are added
//! (`on_partitions_assigned`). Commits carry the member epoch as their generation.

use std::collections::BTreeMap;
use std::time::Instant;

use super::{LocalMember, MemberState, RETRY_BACKOFF};
use crate::coordinator::{
    ConsumerHeartbeatRequest, GroupError, JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
    TopicPartitionList, TopicsImage,
};
use crate::error::Result;

impl LocalMember {
    /// The broker's topics with their partition counts.
    fn topics_image(&self) -> TopicsImage {
        let broker = &self.fetcher.broker;
        broker
            .topic_names()
            .into_iter()
            .filter_map(|t| {
                let n = broker.topic(&t).ok()?.partition_count();
                Some((t, n))
            })
            .collect()
    }

    fn owned_list(&self) -> TopicPartitionList {
        let mut owned: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in self.assignment() {
            owned.entry(t).or_default().push(p);
        }
        owned.into_iter().collect()
    }

    /// Joins (epoch 0) while unjoined; true once a member.
    pub(super) fn ensure_joined_consumer(&mut self, deadline: Instant) -> Result<bool> {
        while !matches!(self.state, MemberState::Stable) {
            if let Err(e) = self.consumer_heartbeat_once() {
                return Err(self.group_error(e));
            }
            if matches!(self.state, MemberState::Stable) {
                break;
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            let pause = deadline
                .saturating_duration_since(Instant::now())
                .min(RETRY_BACKOFF);
            std::thread::sleep(pause);
        }
        Ok(true)
    }

    /// The periodic heartbeat of `poll`. A refusal other than fencing leaves the member
    /// unjoined: the next poll rejoins and reports it.
    pub(super) fn consumer_heartbeat(&mut self) {
        let _ = self.consumer_heartbeat_once();
    }

    /// One ConsumerGroupHeartbeat: joins when unjoined, else heartbeats with the owned
    /// partitions and applies the assignment it is given. Fenced or removed, the
    /// member drops its partitions (they may be another's now) and rejoins; a
    /// retriable refusal keeps them; any other refusal is returned.
    fn consumer_heartbeat_once(&mut self) -> std::result::Result<(), GroupError> {
        self.last_heartbeat = Instant::now();
        let joining = !matches!(self.state, MemberState::Stable);
        let req = ConsumerHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: if joining { JOIN_EPOCH } else { self.generation },
            instance_id: self.config.group_instance_id.clone(),
            rebalance_timeout_ms: i32::try_from(self.config.rebalance_timeout.as_millis())
                .unwrap_or(i32::MAX),
            subscribed_topic_names: joining.then(|| self.config.topics.clone()),
            owned_partitions: Some(if joining {
                Vec::new()
            } else {
                self.owned_list()
            }),
            client_id: self.config.client_id.clone(),
            ..Default::default()
        };
        let topics = self.topics_image();
        match self.coordinator().consumer_group_heartbeat(req, &topics) {
            Ok(r) => {
                self.member_id = r.member_id;
                self.generation = r.member_epoch;
                self.state = MemberState::Stable;
                if let Some(a) = r.assignment {
                    let list: Vec<(String, i32)> = a
                        .into_iter()
                        .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
                        .collect();
                    self.reconcile(&list);
                }
                Ok(())
            }
            Err(e) if e.is_retriable() => Ok(()),
            Err(
                GroupError::FencedMemberEpoch { .. }
                | GroupError::UnknownMemberId(_)
                | GroupError::FencedInstanceId(_),
            ) => {
                self.revoke(false);
                Ok(())
            }
            Err(e) => {
                self.revoke(false);
                Err(e)
            }
        }
    }

    /// Applies an assignment: revokes what it no longer has (committing it first if
    /// auto-commit is on), adds what it gains.
    fn reconcile(&mut self, list: &[(String, i32)]) {
        let (revoked, added) = self.revoke_for(list);
        if !revoked.is_empty() {
            // Acknowledge the revocation on the next poll, without waiting out the
            // heartbeat interval.
            self.last_heartbeat = Instant::now() - self.config.heartbeat_interval;
        }
        // A partition that vanished meanwhile (topic deleted): start over.
        if self.fetcher.update_assignment(list).is_err() {
            self.revoke(false);
            return;
        }
        if !added.is_empty() {
            self.notify_assigned(&added);
        }
    }

    /// Leaves the group on close: epoch -1, or -2 for a static member (which keeps its
    /// partitions for its session timeout, so a restart gets them back).
    pub(super) fn consumer_leave(&mut self) {
        if self.member_id.is_empty() || !matches!(self.state, MemberState::Stable) {
            return;
        }
        let epoch = if self.config.group_instance_id.is_some() {
            STATIC_LEAVE_EPOCH
        } else {
            LEAVE_EPOCH
        };
        let req = ConsumerHeartbeatRequest {
            group_id: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: epoch,
            instance_id: self.config.group_instance_id.clone(),
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        let topics = self.topics_image();
        let _ = self.coordinator().consumer_group_heartbeat(req, &topics);
    }
}
