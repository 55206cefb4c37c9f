//! The coordinator's side of consumer-protocol groups (KIP-848): the methods the
//! network server calls for ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69),
//! and the checks the classic APIs make so that a group id is either a classic group
//! or a consumer group, never both. The groups themselves are
//! [`ConsumerGroup`](super::ConsumerGroup) state machines, under the coordinator's
//! one lock; their committed offsets live in the classic group of the same id, which
//! then has no members (OffsetCommit, OffsetFetch and the offsets' expiry work
//! unchanged).

use std::sync::Arc;
use std::time::Instant;

use super::consumer_group::{ConsumerGroup, TopicsImage, validate_heartbeat};
use super::consumer_types::{
    ConsumerGroupDescription, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, GroupType,
    TypedListedGroup,
};
use super::offsets::OffsetJournal;
use super::{GroupCoordinator, GroupError, JournalRecord, Loaded, OffsetCommitRequest};

/// Journals what changed in `group` since its last write (types 3 to 8); on an error
/// nothing is taken as written and the next change writes it again.
fn persist(
    group: &mut ConsumerGroup,
    journal: Option<&Arc<dyn OffsetJournal>>,
) -> Result<(), GroupError> {
    let (records, state) = group.pending_records();
    if records.is_empty() {
        return Ok(());
    }
    if let Some(journal) = journal {
        journal
            .append(&records)
            .map_err(|e| GroupError::Journal(Arc::new(e)))?;
    }
    group.mark_written(state);
    Ok(())
}

/// Appends tombstones (a group forgotten or deleted).
fn forget(
    records: Vec<JournalRecord>,
    journal: Option<&Arc<dyn OffsetJournal>>,
) -> Result<(), GroupError> {
    match journal {
        Some(j) if !records.is_empty() => j
            .append(&records)
            .map_err(|e| GroupError::Journal(Arc::new(e))),
        _ => Ok(()),
    }
}

impl GroupCoordinator {
    /// ConsumerGroupHeartbeat: joins, heartbeats or leaves a consumer-protocol group
    /// (created on the first join), with `topics` the cluster's topics now. A group id
    /// used by a classic group with members answers [`GroupError::GroupIdNotFound`];
    /// a classic group with only offsets becomes a consumer group and keeps them.
    pub fn consumer_group_heartbeat(
        &self,
        req: ConsumerHeartbeatRequest,
        topics: &TopicsImage,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        self.check_open()?;
        // The group's own session timeout and heartbeat interval, if it has them.
        let settings = self.group_settings(&req.group_id);
        let cfg = &*settings;
        validate_heartbeat(&req, cfg)?;
        let now = Instant::now();
        let mut st = self.inner.state.lock();
        let loaded = st.coordinating(&req.group_id)?;
        let journal = loaded.journal.clone();
        upgrade(loaded, &req.group_id, topics, cfg, now)?;
        let incarnation = loaded.incarnation;
        let group = match loaded.consumer.entry(req.group_id.clone()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                if req.member_epoch != 0 {
                    return Err(GroupError::UnknownMemberId(req.member_id.clone()));
                }
                e.insert(ConsumerGroup::new(&req.group_id, incarnation))
            }
        };
        let out = group.heartbeat(&req, topics, cfg, now);
        // Answered once the new state is in the journal.
        let mut stored = persist(group, journal.as_ref());
        if stored.is_ok() {
            stored = downgrade(loaded, &req.group_id, cfg, now).map(drop);
        }
        // The reaper learns the new session deadlines.
        self.inner.changed.notify_all();
        let out = out?;
        stored?;
        Ok(out)
    }

    /// Rebuilds the consumer-protocol groups of partition `index` from the records of
    /// that `__consumer_offsets` partition (oldest first), as a load does.
    pub(super) fn restore_consumer_groups(
        &self,
        index: i32,
        records: &[JournalRecord],
    ) -> crate::error::Result<()> {
        let mut by_group: std::collections::BTreeMap<String, Vec<super::consumer_records::Record>> =
            std::collections::BTreeMap::new();
        for (key, value) in records {
            if let Some(r) = super::consumer_records::decode(key, value.as_deref())? {
                by_group.entry(r.group.clone()).or_default().push(r);
            }
        }
        let now = Instant::now();
        let mut st = self.inner.state.lock();
        if let Some(loaded) = st.loaded.get_mut(&index) {
            let incarnation = loaded.incarnation;
            for (id, recs) in by_group {
                let cfg = self.group_settings(&id);
                if let Some(g) = ConsumerGroup::restore(&id, &recs, &cfg, now, incarnation) {
                    loaded.consumer.insert(id, g);
                }
            }
        }
        self.inner.changed.notify_all();
        Ok(())
    }

    /// ConsumerGroupDescribe for one group: [`GroupError::GroupIdNotFound`] if it is
    /// not a consumer-protocol group.
    pub fn consumer_group_describe(
        &self,
        group_id: &str,
    ) -> Result<ConsumerGroupDescription, GroupError> {
        self.check_open()?;
        let st = self.inner.state.lock();
        let loaded = st.shard(group_id).ok_or(GroupError::NotCoordinator)?;
        loaded
            .consumer
            .get(group_id)
            .map(ConsumerGroup::describe)
            .ok_or(GroupError::GroupIdNotFound)
    }

    /// The protocol of a known group, None if the coordinator does not know it.
    pub fn group_type(&self, group_id: &str) -> Option<GroupType> {
        let st = self.inner.state.lock();
        let loaded = st.shard(group_id)?;
        if loaded.consumer.contains_key(group_id) {
            Some(GroupType::Consumer)
        } else {
            loaded
                .groups
                .contains_key(group_id)
                .then_some(GroupType::Classic)
        }
    }

    /// ListGroups with types (v5): every group, sorted by id; only those whose state
    /// (by Kafka's name, case-insensitively) is in `states` and whose type is in
    /// `types`, when these are not empty.
    pub fn list_typed_groups(
        &self,
        states: &[String],
        types: &[GroupType],
    ) -> Result<Vec<TypedListedGroup>, GroupError> {
        self.check_open()?;
        let st = self.inner.state.lock();
        if st.loaded.is_empty() {
            return Err(GroupError::NotCoordinator);
        }
        let classic = st
            .loaded
            .values()
            .flat_map(|l| {
                l.groups
                    .values()
                    .filter(|g| !l.consumer.contains_key(g.id()))
            })
            .map(|g| {
                let l = g.listed();
                TypedListedGroup {
                    group_id: l.group_id,
                    protocol_type: l.protocol_type,
                    state: l.state.as_str(),
                    group_type: GroupType::Classic,
                }
            });
        let consumer = st
            .loaded
            .values()
            .flat_map(|l| l.consumer.values())
            .map(|g| TypedListedGroup {
                group_id: g.id().to_string(),
                protocol_type: "consumer".into(),
                state: g.state().as_str(),
                group_type: GroupType::Consumer,
            });
        let mut out: Vec<TypedListedGroup> = classic
            .chain(consumer)
            .filter(|g| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(g.state)))
            .filter(|g| types.is_empty() || types.contains(&g.group_type))
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// A classic JoinGroup on a consumer-protocol group: one with members takes the
    /// member as a member that uses the classic protocol, answered at once (Some); an
    /// empty one is dropped and becomes a classic group (None: the classic path goes
    /// on).
    pub(super) fn classic_join_to_consumer(
        &self,
        req: &super::JoinGroupRequest,
    ) -> Result<Option<super::JoinGroupResponse>, GroupError> {
        {
            let mut st = self.inner.state.lock();
            let Some(loaded) = st.shard_mut(&req.group_id) else {
                return Ok(None);
            };
            if let Some(g) = loaded.consumer.get(&req.group_id)
                && g.is_empty()
            {
                forget(g.tombstones(), loaded.journal.as_ref())?;
                loaded.consumer.remove(&req.group_id);
                return Ok(None);
            }
        }
        let cfg = &self.inner.config;
        self.with_consumer_group(&req.group_id, |g, now| g.classic_join(req, cfg, now))
    }

    /// Runs a classic request (SyncGroup, Heartbeat, LeaveGroup, a JoinGroup) against
    /// the consumer-protocol group of that id when it has members: Some(answer), its
    /// changes journaled (and the group converted back to a classic one if only
    /// classic members remain); None when there is no such group.
    pub(super) fn with_consumer_group<T>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut ConsumerGroup, Instant) -> Result<T, GroupError>,
    ) -> Result<Option<T>, GroupError> {
        let now = Instant::now();
        let cfg = &self.inner.config;
        let mut st = self.inner.state.lock();
        let Some(loaded) = st.shard_mut(group_id) else {
            return Ok(None);
        };
        let Some(group) = loaded.consumer.get_mut(group_id).filter(|g| !g.is_empty()) else {
            return Ok(None);
        };
        let out = f(group, now);
        let mut stored = persist(group, loaded.journal.as_ref());
        if stored.is_ok() {
            stored = downgrade(loaded, group_id, cfg, now).map(drop);
        }
        self.inner.changed.notify_all();
        let out = out?;
        stored?;
        Ok(Some(out))
    }

    /// DescribeGroups (the classic API) on a consumer-protocol group: Kafka answers
    /// GROUP_ID_NOT_FOUND ("not a classic group").
    pub(super) fn refuse_classic_describe(&self, group_id: &str) -> Result<(), GroupError> {
        match self.group_type(group_id) {
            Some(GroupType::Consumer) => Err(GroupError::GroupIdNotFound),
            _ => Ok(()),
        }
    }

    /// OffsetCommit's member check for a consumer-protocol group (the member epoch is
    /// the request's generation, KIP-848). Ok(true) if the group is one (the classic
    /// check is then skipped), Ok(false) if it is not.
    pub(super) fn check_consumer_commit(
        &self,
        req: &OffsetCommitRequest,
    ) -> Result<bool, GroupError> {
        let st = self.inner.state.lock();
        let Some(g) = st
            .shard(&req.group_id)
            .and_then(|l| l.consumer.get(&req.group_id))
        else {
            return Ok(false);
        };
        g.check_commit(&req.member_id, req.generation_id)?;
        Ok(true)
    }

    /// OffsetFetch v9's member check (KIP-848): for a consumer-protocol group, a
    /// member id with a non-negative epoch must name a member at that epoch
    /// ([`GroupError::UnknownMemberId`], [`GroupError::StaleMemberEpoch`]); classic
    /// groups and requests without a member (an admin client's) are not checked.
    pub fn check_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let st = self.inner.state.lock();
        match st.shard(group_id).and_then(|l| l.consumer.get(group_id)) {
            Some(g) => g.check_offset_fetch(member_id, member_epoch),
            None => Ok(()),
        }
    }

    /// DeleteGroups on a consumer-protocol group: refused while it has members,
    /// otherwise forgotten (its offsets are deleted with the classic group of the same
    /// id). True if there was one.
    pub(super) fn delete_consumer_group(&self, group_id: &str) -> Result<bool, GroupError> {
        let mut st = self.inner.state.lock();
        let Some(loaded) = st.shard_mut(group_id) else {
            return Ok(false);
        };
        match loaded.consumer.get(group_id) {
            Some(g) if !g.is_empty() => Err(GroupError::NonEmptyGroup),
            Some(g) => {
                forget(g.tombstones(), loaded.journal.as_ref())?;
                loaded.consumer.remove(group_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The topics the members of a consumer-protocol group subscribe to (OffsetDelete
    /// refuses their offsets).
    pub(super) fn consumer_subscribed_topics(
        &self,
        group_id: &str,
    ) -> std::collections::BTreeSet<String> {
        let st = self.inner.state.lock();
        st.shard(group_id)
            .and_then(|l| l.consumer.get(group_id))
            .map(ConsumerGroup::subscribed_topics)
            .unwrap_or_default()
    }

    /// Removes a consumer-protocol group's member as if its session had timed out
    /// (for tests that simulate a dead member without waiting).
    #[doc(hidden)]
    pub fn expire_consumer_member(&self, group_id: &str, member_id: &str) {
        let cfg = &self.inner.config;
        let mut st = self.inner.state.lock();
        if let Some(l) = st.shard_mut(group_id)
            && let Some(g) = l.consumer.get_mut(group_id)
        {
            g.expire_member(member_id, cfg);
            let _ = persist(g, l.journal.as_ref());
            let _ = downgrade(l, group_id, cfg, Instant::now());
        }
        self.inner.changed.notify_all();
    }
}

/// Converts the classic group `group_id` into a consumer-protocol group if it has
/// members (an online upgrade, KIP-848): allowed by `group.consumer.migration.policy`
/// when its members use the consumer embedded protocol, else
/// [`GroupError::GroupIdNotFound`] ("not a consumer group"), as Kafka answers.
fn upgrade(
    loaded: &mut Loaded,
    group_id: &str,
    topics: &TopicsImage,
    cfg: &crate::config::CoordinatorConfig,
    now: Instant,
) -> Result<(), GroupError> {
    let Some(classic) = loaded
        .groups
        .get_mut(group_id)
        .filter(|g| !g.member_ids().is_empty())
    else {
        return Ok(());
    };
    let (generation, members) = classic
        .migrating_members()
        .filter(|(_, m)| {
            cfg.consumer_migration_policy.upgrade_enabled() && m.len() <= cfg.max_group_size
        })
        .ok_or(GroupError::GroupIdNotFound)?;
    let converted = ConsumerGroup::from_classic(
        group_id,
        loaded.incarnation,
        generation,
        members,
        topics,
        now,
    )?;
    let mut back = classic.clone();
    classic.hand_over_members();
    if let Err(e) = super::persist(classic, loaded.journal.as_ref(), now) {
        // The classic group stays as it was.
        std::mem::swap(classic, &mut back);
        return Err(e);
    }
    loaded.consumer.insert(group_id.to_string(), converted);
    Ok(())
}

/// Converts the consumer-protocol group `group_id` back into a classic group when all
/// its members use the classic protocol and `group.consumer.migration.policy` allows
/// it (an online downgrade): its state is tombstoned, its members join the classic
/// group of the same id (which holds its offsets) and a rebalance starts. True if it
/// did.
pub(super) fn downgrade(
    loaded: &mut Loaded,
    group_id: &str,
    cfg: &crate::config::CoordinatorConfig,
    now: Instant,
) -> Result<bool, GroupError> {
    if !cfg.consumer_migration_policy.downgrade_enabled() {
        return Ok(false);
    }
    let Some(g) = loaded.consumer.get(group_id) else {
        return Ok(false);
    };
    let Some((generation, members)) = g
        .downgrade_members()
        .filter(|(_, m)| m.len() <= cfg.max_group_size)
    else {
        return Ok(false);
    };
    forget(g.tombstones(), loaded.journal.as_ref())?;
    loaded.consumer.remove(group_id);
    let incarnation = loaded.incarnation;
    let classic = loaded
        .groups
        .entry(group_id.to_string())
        .or_insert_with(|| Box::new(super::Group::new(group_id, incarnation)));
    classic.take_over_members(generation, members, now);
    super::persist(classic, loaded.journal.as_ref(), now)?;
    Ok(true)
}

/// The reaper's pass over consumer-protocol groups: expires sessions and revocations,
/// forgets empty groups that have no offsets. Returns the next instant something may
/// expire.
pub(super) fn tick_consumer_groups(
    loaded: &mut Loaded,
    journal: Option<&Arc<dyn OffsetJournal>>,
    cfg: &crate::config::CoordinatorConfig,
    now: Instant,
) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    for g in loaded.consumer.values_mut() {
        if let Some(t) = g.tick(cfg, now) {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        // A failed write is tried again on the next pass.
        let _ = persist(g, journal);
    }
    // A group whose last consumer-protocol member expired may go back to classic.
    let ids: Vec<String> = loaded.consumer.keys().cloned().collect();
    for id in ids {
        let _ = downgrade(loaded, &id, cfg, now);
    }
    let groups = &loaded.groups;
    // An empty group with no offsets goes, with tombstones for its records.
    loaded.consumer.retain(|id, g| {
        !g.is_empty() || groups.contains_key(id) || forget(g.tombstones(), journal).is_err()
    });
    next
}

/// The consumer-protocol groups with members (their offsets do not expire while they
/// have some).
pub(super) fn active_consumer_groups(loaded: &Loaded) -> std::collections::HashSet<String> {
    loaded
        .consumer
        .iter()
        .filter(|(_, g)| !g.is_empty())
        .map(|(id, _)| id.clone())
        .collect()
}

/// OffsetDelete on a consumer-protocol group: the partitions of topics its members
/// subscribe to are refused (GROUP_SUBSCRIBED_TO_TOPIC) and their tombstones dropped.
pub(super) fn refuse_subscribed(
    group_id: &str,
    partitions: &[(String, i32)],
    subscribed: &std::collections::BTreeSet<String>,
    (results, records): (
        &mut Vec<Result<(), GroupError>>,
        &mut Vec<super::JournalRecord>,
    ),
) {
    for ((t, p), r) in partitions.iter().zip(results.iter_mut()) {
        if subscribed.contains(t) && r.is_ok() {
            *r = Err(GroupError::GroupSubscribedToTopic(t.clone()));
            let key = super::offsets::encode_key(group_id, t, *p);
            records.retain(|(k, _)| *k != key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::super::{CommitOffset, CoordinatorConfig, GroupState, JoinGroupRequest};
    use super::*;

    fn topics() -> TopicsImage {
        BTreeMap::from([("t".to_string(), 2)])
    }

    fn join(group: &str, member: &str) -> ConsumerHeartbeatRequest {
        ConsumerHeartbeatRequest {
            group_id: group.into(),
            member_id: member.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        }
    }

    fn commit(group: &str, member: &str, epoch: i32) -> OffsetCommitRequest {
        OffsetCommitRequest {
            group_id: group.into(),
            generation_id: epoch,
            member_id: member.into(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset: 7,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        }
    }

    fn classic_join(group: &str) -> JoinGroupRequest {
        JoinGroupRequest {
            group_id: group.into(),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), vec![1])],
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            ..Default::default()
        }
    }

    fn coordinator() -> GroupCoordinator {
        GroupCoordinator::new(CoordinatorConfig {
            min_session_timeout: Duration::from_millis(1),
            initial_rebalance_delay: Duration::ZERO,
            ..CoordinatorConfig::default()
        })
    }

    #[test]
    fn a_group_id_is_classic_or_consumer_never_both() {
        let c = coordinator();
        c.consumer_group_heartbeat(join("g", "a"), &topics())
            .unwrap();
        assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
        // A classic member joins it only with the consumer embedded protocol.
        let mut connect = classic_join("g");
        connect.protocol_type = "connect".into();
        assert!(matches!(
            c.join_group(connect, Duration::from_secs(1)),
            Err(GroupError::InconsistentGroupProtocol(_))
        ));
        assert!(matches!(
            c.describe_group("g"),
            Err(GroupError::GroupIdNotFound)
        ));
        // A classic group whose members' embedded protocol cannot be read stays classic.
        c.join_group(classic_join("old"), Duration::from_secs(5))
            .unwrap();
        assert!(matches!(
            c.consumer_group_heartbeat(join("old", "a"), &topics()),
            Err(GroupError::GroupIdNotFound)
        ));
        // An unknown group with a non-zero epoch: the member must rejoin.
        let mut beat = join("new", "a");
        beat.member_epoch = 3;
        assert!(matches!(
            c.consumer_group_heartbeat(beat, &topics()),
            Err(GroupError::UnknownMemberId(_))
        ));
        let listed = c.list_typed_groups(&[], &[]).unwrap();
        let types: Vec<(&str, GroupType, &str)> = listed
            .iter()
            .map(|g| (g.group_id.as_str(), g.group_type, g.state))
            .collect();
        assert_eq!(
            types,
            vec![
                ("g", GroupType::Consumer, "Stable"),
                ("old", GroupType::Classic, "CompletingRebalance")
            ]
        );
        let only = c
            .list_typed_groups(&["stable".into()], &[GroupType::Consumer])
            .unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(c.consumer_group_describe("g").unwrap().members.len(), 1);
        assert!(matches!(
            c.consumer_group_describe("old"),
            Err(GroupError::GroupIdNotFound)
        ));
    }

    #[test]
    fn offsets_commit_with_the_member_epoch() {
        let c = coordinator();
        let r = c
            .consumer_group_heartbeat(join("g", "a"), &topics())
            .unwrap();
        let results = c.offset_commit(commit("g", "a", r.member_epoch)).unwrap();
        assert!(results[0].result.is_ok(), "{:?}", results[0].result);
        assert!(matches!(
            c.offset_commit(commit("g", "a", r.member_epoch - 1)),
            Err(GroupError::StaleMemberEpoch { .. })
        ));
        assert!(matches!(
            c.offset_commit(commit("g", "zz", r.member_epoch)),
            Err(GroupError::UnknownMemberId(_))
        ));
        let fetched = c.offset_fetch("g", Some(&[("t".into(), 0)])).unwrap();
        assert_eq!(fetched[0].offset, 7);
        // The offsets of a subscribed topic cannot be deleted, and the group not at all
        // while it has members.
        let deleted = c.offset_delete("g", &[("t".into(), 0)]).unwrap();
        assert!(matches!(
            deleted[0],
            Err(GroupError::GroupSubscribedToTopic(_))
        ));
        assert!(matches!(
            c.delete_group("g"),
            Err(GroupError::NonEmptyGroup)
        ));
        // The member expires; the group keeps its offsets, then is deleted.
        c.expire_consumer_member("g", "a");
        assert_eq!(c.group_type("g"), Some(GroupType::Consumer));
        c.delete_group("g").unwrap();
        assert_eq!(c.group_type("g"), None);
        assert_eq!(
            c.offset_fetch("g", Some(&[("t".into(), 0)])).unwrap()[0].offset,
            -1
        );
    }

    /// A journal in memory, which can be made to fail.
    #[derive(Default)]
    struct Mem(
        parking_lot::Mutex<Vec<JournalRecord>>,
        std::sync::atomic::AtomicBool,
    );

    impl OffsetJournal for Mem {
        fn append(&self, records: &[JournalRecord]) -> crate::error::Result<()> {
            if self.1.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(crate::error::Error::io(
                    "append to",
                    "__consumer_offsets-0",
                    std::io::Error::other("disk full"),
                ));
            }
            self.0.lock().extend_from_slice(records);
            Ok(())
        }

        fn append_txn(
            &self,
            _producer_id: i64,
            _producer_epoch: i16,
            records: &[JournalRecord],
        ) -> crate::error::Result<()> {
            self.append(records)
        }
    }

    #[test]
    fn a_journal_error_fails_the_heartbeat_and_the_next_one_writes_it() {
        let journal = Arc::new(Mem::default());
        let c = reload(&journal);
        journal.1.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(matches!(
            c.consumer_group_heartbeat(join("g", "a"), &topics()),
            Err(GroupError::Journal(_))
        ));
        assert!(journal.0.lock().is_empty());
        journal.1.store(false, std::sync::atomic::Ordering::Relaxed);
        let mut beat = join("g", "a");
        beat.member_epoch = 1;
        beat.subscribed_topic_names = None;
        beat.owned_partitions = Some(vec![("t".into(), vec![0, 1])]);
        c.consumer_group_heartbeat(beat, &topics()).unwrap();
        let d = reload(&journal).consumer_group_describe("g").unwrap();
        assert_eq!((d.group_epoch, d.members[0].member_epoch), (1, 1));
    }

    /// A coordinator loaded from what `journal` holds (a restart), writing to it.
    fn reload(journal: &Arc<Mem>) -> GroupCoordinator {
        let c = coordinator();
        let records = journal.0.lock().clone();
        c.load(Vec::new(), Arc::clone(journal) as Arc<dyn OffsetJournal>);
        c.restore_consumer_groups(0, &records).unwrap();
        c
    }

    #[test]
    fn a_restart_keeps_member_epochs_and_assignments() {
        let journal = Arc::new(Mem::default());
        let c = reload(&journal);
        let topics = BTreeMap::from([("t".to_string(), 4)]);
        let mut a = join("g", "a");
        a.instance_id = Some("host-a".into());
        let ra = c.consumer_group_heartbeat(a, &topics).unwrap();
        c.consumer_group_heartbeat(join("g", "b"), &topics).unwrap();
        // a is told to revoke half: it is mid-reconciliation when the coordinator stops.
        let mut beat = join("g", "a");
        beat.member_epoch = ra.member_epoch;
        beat.instance_id = Some("host-a".into());
        beat.subscribed_topic_names = None;
        beat.owned_partitions = ra.assignment.clone();
        let kept = c.consumer_group_heartbeat(beat.clone(), &topics).unwrap();
        let before = c.consumer_group_describe("g").unwrap();
        assert_eq!(before.state, super::super::ConsumerGroupState::Reconciling);

        let c2 = reload(&journal);
        assert_eq!(c2.consumer_group_describe("g").unwrap(), before);
        // a goes on at its epoch: it acknowledges the revocation and moves on.
        beat.owned_partitions = kept.assignment;
        let r = c2.consumer_group_heartbeat(beat, &topics).unwrap();
        assert_eq!(r.member_epoch, 2);
        // b leaves; after another restart it is gone and the static member remains.
        let mut leave = join("g", "b");
        leave.member_epoch = -1;
        c2.consumer_group_heartbeat(leave, &topics).unwrap();
        let c3 = reload(&journal);
        let d = c3.consumer_group_describe("g").unwrap();
        assert_eq!(d.members.len(), 1);
        assert_eq!(d.members[0].instance_id.as_deref(), Some("host-a"));
        assert_eq!(d, c2.consumer_group_describe("g").unwrap());
        // Deleted once empty: nothing comes back.
        c3.expire_consumer_member("g", "a");
        c3.delete_group("g").unwrap();
        assert_eq!(reload(&journal).group_type("g"), None);
    }

    #[test]
    fn the_reaper_expires_consumer_sessions() {
        let c = GroupCoordinator::new(CoordinatorConfig {
            consumer_session_timeout: Duration::from_millis(50),
            ..CoordinatorConfig::default()
        });
        c.start_reaper().unwrap();
        c.consumer_group_heartbeat(join("g", "a"), &topics())
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.group_type("g").is_some() {
            assert!(Instant::now() < deadline, "the member never expired");
            std::thread::sleep(Duration::from_millis(10));
        }
        // An empty consumer group becomes a classic group on a classic join.
        c.consumer_group_heartbeat(join("h", "a"), &topics())
            .unwrap();
        let mut leave = join("h", "a");
        leave.member_epoch = -1;
        c.consumer_group_heartbeat(leave, &topics()).unwrap();
        let r = c
            .join_group(classic_join("h"), Duration::from_secs(5))
            .unwrap();
        assert_eq!(r.generation_id, 1);
        assert_eq!(
            c.describe_group("h").unwrap().state,
            GroupState::CompletingRebalance
        );
        c.shutdown();
    }
}
