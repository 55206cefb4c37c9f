//! A [`ConsumerGroup`]'s state as `__consumer_offsets` records (types 3 to 8, see
//! `consumer_records`), and the group rebuilt from them when a coordinator loads.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::super::consumer_records::{
    self as records, CURRENT_MEMBER, CurrentAssignment, GROUP_EPOCH, IdPartitions, MEMBER_METADATA,
    MemberMeta, PARTITION_METADATA, Record, TARGET_EPOCH, TARGET_MEMBER, TopicId, Value, topic_id,
};
use super::super::offsets::JournalRecord;
use super::{Assignment, ConsumerGroup, Member, MemberState, compile_regex};
use crate::config::CoordinatorConfig;

fn by_id(a: &Assignment) -> IdPartitions {
    a.iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| (topic_id(t), p.iter().copied().collect()))
        .collect()
}

fn by_name(list: &IdPartitions, names: &BTreeMap<TopicId, String>) -> Assignment {
    let mut out = Assignment::new();
    for (id, parts) in list {
        if let Some(t) = names.get(id) {
            out.entry(t.clone())
                .or_default()
                .extend(parts.iter().copied());
        }
    }
    out
}

fn state_code(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

impl ConsumerGroup {
    /// Every record of the group's state, by key.
    fn records(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let id = self.id.as_str();
        let mut out = BTreeMap::new();
        let mut put = |kind: i16, member: Option<&str>, v: Value| {
            out.insert(records::key(kind, id, member), records::encode(&v));
        };
        put(GROUP_EPOCH, None, Value::GroupEpoch(self.group_epoch));
        // Every topic the records name, so that loading maps their ids back.
        let mut topics: BTreeMap<String, i32> = self.subscribed_metadata.clone();
        let assigned = self
            .members
            .values()
            .flat_map(|m| m.assigned.keys().chain(m.revoking.keys()));
        for t in assigned.chain(self.target.values().flat_map(|a| a.keys())) {
            let n = self.topics.get(t).copied().unwrap_or(0);
            topics.entry(t.clone()).or_insert(n);
        }
        let topics = topics
            .into_iter()
            .map(|(t, n)| (topic_id(&t), t, n))
            .collect();
        put(PARTITION_METADATA, None, Value::Topics(topics));
        put(
            TARGET_EPOCH,
            None,
            Value::TargetEpoch(self.assignment_epoch),
        );
        for (member_id, a) in &self.target {
            put(
                TARGET_MEMBER,
                Some(member_id),
                Value::TargetMember(by_id(a)),
            );
        }
        for (member_id, m) in &self.members {
            let meta = MemberMeta {
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topic_names: m.topic_names.iter().cloned().collect(),
                regex: m.regex.as_ref().map(|(r, _)| r.clone()),
                rebalance_timeout_ms: i32::try_from(m.rebalance_timeout.as_millis())
                    .unwrap_or(i32::MAX),
                server_assignor: m.server_assignor.clone(),
                classic: m.classic.as_ref().map(|c| {
                    let ms = i32::try_from(c.session_timeout.as_millis()).unwrap_or(i32::MAX);
                    (ms, c.protocols.clone())
                }),
            };
            put(MEMBER_METADATA, Some(member_id), Value::Member(meta));
            let current = CurrentAssignment {
                epoch: m.epoch,
                previous_epoch: m.previous_epoch,
                state: state_code(m.state),
                assigned: by_id(&m.assigned),
                revoking: by_id(&m.revoking),
            };
            put(CURRENT_MEMBER, Some(member_id), Value::Current(current));
        }
        out
    }

    /// The records to journal for what changed since the last [`mark_written`]
    /// (tombstones for what is gone), with the state they bring the journal to.
    ///
    /// [`mark_written`]: Self::mark_written
    pub(crate) fn pending_records(&self) -> (Vec<JournalRecord>, BTreeMap<Vec<u8>, Vec<u8>>) {
        let now = self.records();
        let mut out: Vec<JournalRecord> = now
            .iter()
            .filter(|(k, v)| self.written.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        out.extend(
            self.written
                .keys()
                .filter(|k| !now.contains_key(*k))
                .map(|k| (k.clone(), None)),
        );
        (out, now)
    }

    /// The journal holds `state` (from [`pending_records`](Self::pending_records)).
    pub(crate) fn mark_written(&mut self, state: BTreeMap<Vec<u8>, Vec<u8>>) {
        self.written = state;
    }

    /// Tombstones for every record the group wrote (it is deleted or forgotten).
    pub(crate) fn tombstones(&self) -> Vec<JournalRecord> {
        self.written.keys().map(|k| (k.clone(), None)).collect()
    }

    /// The group as its records (latest per key, in log order, tombstones applied)
    /// describe it; None if they hold no group epoch. Sessions start over at `now`.
    pub(crate) fn restore(
        id: &str,
        recs: &[Record],
        cfg: &CoordinatorConfig,
        now: Instant,
        incarnation: u64,
    ) -> Option<ConsumerGroup> {
        let mut g = ConsumerGroup::new(id, incarnation);
        let mut names: BTreeMap<TopicId, String> = BTreeMap::new();
        let mut currents: BTreeMap<String, CurrentAssignment> = BTreeMap::new();
        let mut metas: BTreeMap<String, MemberMeta> = BTreeMap::new();
        let mut targets: BTreeMap<String, IdPartitions> = BTreeMap::new();
        let mut epoch = None;
        for r in recs {
            let member = r.member.clone().unwrap_or_default();
            match &r.value {
                Some(Value::GroupEpoch(e)) => epoch = Some(*e),
                Some(Value::TargetEpoch(e)) => g.assignment_epoch = *e,
                Some(Value::Topics(t)) => {
                    g.subscribed_metadata = t.iter().map(|(_, n, c)| (n.clone(), *c)).collect();
                    names = t.iter().map(|(i, n, _)| (*i, n.clone())).collect();
                }
                Some(Value::Member(m)) => drop(metas.insert(member, m.clone())),
                Some(Value::TargetMember(a)) => drop(targets.insert(member, a.clone())),
                Some(Value::Current(c)) => drop(currents.insert(member, c.clone())),
                None => match r.kind {
                    GROUP_EPOCH => epoch = None,
                    MEMBER_METADATA => drop(metas.remove(&member)),
                    TARGET_MEMBER => drop(targets.remove(&member)),
                    CURRENT_MEMBER => drop(currents.remove(&member)),
                    _ => {}
                },
            }
        }
        g.group_epoch = epoch?;
        g.topics = g.subscribed_metadata.clone();
        g.target = targets
            .iter()
            .map(|(m, a)| (m.clone(), by_name(a, &names)))
            .collect();
        for (member_id, meta) in metas {
            let c = currents.remove(&member_id).unwrap_or_default();
            let member = restore_member(meta, c, &names, cfg, now);
            if let Some(i) = &member.instance_id {
                g.instances.insert(i.clone(), member_id.clone());
            }
            g.members.insert(member_id, member);
        }
        g.assignor = g.choose_assignor(cfg);
        g.written = g.records();
        Some(g)
    }
}

fn restore_member(
    meta: MemberMeta,
    c: CurrentAssignment,
    names: &BTreeMap<TopicId, String>,
    cfg: &CoordinatorConfig,
    now: Instant,
) -> Member {
    let mut m = Member::new(now, cfg.consumer_session_timeout);
    m.instance_id = meta.instance_id;
    m.rack_id = meta.rack_id;
    m.client_id = meta.client_id;
    m.client_host = meta.client_host;
    m.topic_names = meta.topic_names.into_iter().collect::<BTreeSet<_>>();
    // An expression that no longer compiles is dropped (it was valid when stored).
    m.regex = meta
        .regex
        .and_then(|r| compile_regex(&r).ok().map(|re| (r, re)));
    m.server_assignor = meta.server_assignor;
    if let Some((session_ms, protocols)) = meta.classic {
        let session = Duration::from_millis(u64::try_from(session_ms).unwrap_or(0));
        m.session_deadline = now + session;
        m.classic = Some(super::classic::ClassicMember {
            session_timeout: session,
            protocols,
        });
    }
    m.rebalance_timeout =
        Duration::from_millis(u64::try_from(meta.rebalance_timeout_ms).unwrap_or(0));
    m.epoch = c.epoch;
    m.previous_epoch = c.previous_epoch;
    m.state = match c.state {
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => MemberState::Stable,
    };
    m.assigned = by_name(&c.assigned, names);
    m.revoking = by_name(&c.revoking, names);
    if m.state == MemberState::UnrevokedPartitions {
        m.revocation_deadline = Some(now + m.rebalance_timeout);
    }
    m
}
