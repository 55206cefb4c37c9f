//! Share group members over the network (KIP-932): ShareGroupHeartbeat's member
//! epochs, session timeouts and assignments, and the share sessions of ShareFetch and
//! ShareAcknowledge.
//!
//! A member joins with epoch 0 and the member id it chose, and gets the group's next
//! epoch; it leaves with epoch -1. Every heartbeat must carry its current epoch
//! (FENCED_MEMBER_EPOCH otherwise). Kafka's simple assignor for share groups assigns
//! every member every partition of the topics it subscribes to: records, not
//! partitions, are divided between members. A member that does not heartbeat within
//! `group.share.session.timeout.ms` is removed and its records released.
//!
//! A share session ties a member's fetches together: epoch 0 opens one (replacing any
//! other of the member), each request carries the epoch the session expects next
//! (then incremented, wrapping to 1), and -1 closes it.
//!
//! Both are bounded as in Kafka: a share group has at most `group.share.max.size`
//! members (a new one beyond is refused with GROUP_MAX_SIZE_REACHED), a node holds at
//! most `group.share.max.share.sessions` share sessions (a new one beyond is refused
//! with SHARE_SESSION_LIMIT_REACHED until one closes, its member leaves, or it goes
//! unused for its group's session timeout).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::share_shell::{Inner, Member, ShareCoordinator};
use crate::error::{Error, Result, ShareError};

/// The epoch a member leaves with.
pub const LEAVE_EPOCH: i32 = -1;

/// One ShareGroupHeartbeat, as the coordinator takes it.
#[derive(Debug, Clone, Default)]
pub struct ShareHeartbeat {
    /// The share group.
    pub group_id: String,
    /// The member id the member chose (not empty).
    pub member_id: String,
    /// 0 to join, -1 to leave, else its current epoch.
    pub member_epoch: i32,
    /// The topics it subscribes to; `None` when unchanged (required when joining).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Its rack, if any.
    pub rack_id: Option<String>,
    /// Its client id and host.
    pub client_id: String,
    /// Its host as the server sees it.
    pub client_host: String,
}

/// The coordinator's answer to a [`ShareHeartbeat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatResponse {
    /// The member's id.
    pub member_id: String,
    /// Its epoch now (-1 after leaving).
    pub member_epoch: i32,
    /// How often it should heartbeat (`group.share.heartbeat.interval.ms`).
    pub heartbeat_interval: Duration,
    /// Its partitions by topic when they changed (on joining too), else `None`.
    pub assignment: Option<BTreeMap<String, Vec<i32>>>,
}

/// A member of a share group as ShareGroupDescribe tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMemberState {
    /// The member id.
    pub member_id: String,
    /// Its epoch.
    pub member_epoch: i32,
    /// Its client id, host and rack.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its rack.
    pub rack: Option<String>,
    /// The topics it subscribes to.
    pub topics: Vec<String>,
    /// Its partitions by topic.
    pub assigned: BTreeMap<String, Vec<i32>>,
}

/// A member's share session.
#[derive(Debug, Clone, Default)]
pub(super) struct ShareSession {
    /// The epoch its next request must carry.
    next_epoch: i32,
    /// The partitions it fetches.
    partitions: BTreeSet<(String, i32)>,
    /// When a request last used it.
    last_used: Option<Instant>,
}

fn refused(group: &str, source: ShareError) -> Error {
    Error::Share {
        group: group.to_string(),
        topic: String::new(),
        partition: -1,
        source,
    }
}

/// Every partition of the subscribed topics that exist (`topics`: name to partition
/// count).
fn assign(
    subscribed: &BTreeSet<String>,
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<i32>> {
    subscribed
        .iter()
        .filter_map(|t| Some((t.clone(), (0..*topics.get(t)?).collect())))
        .collect()
}

impl ShareCoordinator {
    /// Answers one ShareGroupHeartbeat (see the module documentation); `topics` are
    /// the topics the member may see with their partition counts. Members whose
    /// session ended by `now` are removed first.
    pub fn heartbeat(
        &self,
        hb: ShareHeartbeat,
        topics: &BTreeMap<String, i32>,
        now: Instant,
    ) -> Result<ShareHeartbeatResponse> {
        let group = hb.group_id.clone();
        if group.is_empty() || hb.member_id.is_empty() {
            let what = "the group id and member id must not be empty";
            return Err(refused(&group, ShareError::InvalidRequest(what.into())));
        }
        self.expire_members(now)?;
        // The group's own session timeout and heartbeat interval, if it has them.
        let settings = self.group_settings(&group);
        let interval = settings.heartbeat_interval;
        if hb.member_epoch == LEAVE_EPOCH {
            // Its records stay held until its share session closes (its last
            // ShareFetch or ShareAcknowledge, with its final acknowledgements) or their
            // locks expire, as Kafka's share-partitions do.
            if let Some(members) = self.lock().groups.get_mut(&group) {
                members.remove(&hb.member_id);
            }
            return Ok(ShareHeartbeatResponse {
                member_id: hb.member_id,
                member_epoch: LEAVE_EPOCH,
                heartbeat_interval: interval,
                assignment: None,
            });
        }
        let deadline = now + settings.session_timeout;
        let mut inner = self.lock();
        let Inner {
            groups,
            group_epochs,
            ..
        } = &mut *inner;
        let members = groups.entry(group.clone()).or_default();
        let group_epoch = group_epochs.entry(group.clone()).or_insert(0);
        let member = match (hb.member_epoch, members.get_mut(&hb.member_id)) {
            (0, _) => {
                let Some(names) = hb.subscribed_topic_names.clone().filter(|n| !n.is_empty())
                else {
                    let what = "SubscribedTopicNames must be set when joining";
                    return Err(refused(&group, ShareError::InvalidRequest(what.into())));
                };
                let max = self.config().max_size;
                if !members.contains_key(&hb.member_id) && members.len() >= max {
                    return Err(refused(&group, ShareError::GroupMaxSizeReached(max)));
                }
                *group_epoch += 1;
                let member = Member {
                    topics: names.into_iter().collect(),
                    client_id: hb.client_id.clone(),
                    epoch: *group_epoch,
                    deadline: Some(deadline),
                    assigned: BTreeMap::new(),
                    client_host: hb.client_host.clone(),
                    rack: hb.rack_id.clone(),
                };
                members.insert(hb.member_id.clone(), member);
                members.get_mut(&hb.member_id).expect("just inserted")
            }
            (_, None) => {
                let source = ShareError::UnknownMember(hb.member_id.clone());
                return Err(refused(&group, source));
            }
            (given, Some(m)) if given != m.epoch => {
                let current = m.epoch;
                return Err(refused(
                    &group,
                    ShareError::FencedMemberEpoch { given, current },
                ));
            }
            (_, Some(m)) => {
                m.deadline = Some(deadline);
                if let Some(names) = hb.subscribed_topic_names.clone() {
                    m.topics = names.into_iter().collect();
                }
                m
            }
        };
        let assigned = assign(&member.topics, topics);
        let changed = assigned != member.assigned || hb.member_epoch == 0;
        if changed {
            if hb.member_epoch != 0 {
                *group_epoch += 1;
                member.epoch = *group_epoch;
            }
            member.assigned = assigned.clone();
        }
        Ok(ShareHeartbeatResponse {
            member_id: hb.member_id,
            member_epoch: member.epoch,
            heartbeat_interval: interval,
            assignment: changed.then_some(assigned),
        })
    }

    /// Removes every network member whose session ended by `now` (releasing what it
    /// holds, as a leave does).
    pub fn expire_members(&self, now: Instant) -> Result<()> {
        let expired: Vec<(String, String)> = {
            let inner = self.lock();
            inner
                .groups
                .iter()
                .flat_map(|(g, members)| {
                    members
                        .iter()
                        .filter(|(_, m)| m.deadline.is_some_and(|d| d <= now))
                        .map(|(id, _)| (g.clone(), id.clone()))
                })
                .collect()
        };
        for (group, member) in expired {
            self.leave(&group, &member, now)?;
        }
        Ok(())
    }

    /// The epoch of `group` (0 for a group never joined over the network) and its
    /// members with their epochs and assignments.
    pub fn describe_members(&self, group: &str) -> (i32, Vec<ShareMemberState>) {
        let inner = self.lock();
        let epoch = inner.group_epochs.get(group).copied().unwrap_or(0);
        let members = inner.groups.get(group).map_or_else(Vec::new, |members| {
            members
                .iter()
                .map(|(id, m)| ShareMemberState {
                    member_id: id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rack: m.rack.clone(),
                    topics: m.topics.iter().cloned().collect(),
                    assigned: m.assigned.clone(),
                })
                .collect()
        });
        (epoch, members)
    }

    /// Checks and advances `member`'s share session for a request carrying `epoch`:
    /// 0 opens a new session (the member must be in the group), -1 is its last
    /// request, any other must be the epoch the session expects. Adds `add` and drops
    /// `forget`; returns the partitions the session fetches. A new session on a node
    /// holding `group.share.max.share.sessions` first drops those no request used for
    /// their group's `share.session.timeout.ms` by `now` (their members are gone
    /// without closing them: on a cluster, a member's heartbeats go to another node).
    pub fn share_session(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        add: &[(String, i32)],
        forget: &[(String, i32)],
        now: Instant,
    ) -> Result<Vec<(String, i32)>> {
        let mut inner = self.lock();
        let known = inner
            .groups
            .get(group)
            .is_some_and(|m| m.contains_key(member));
        let key = (group.to_string(), member.to_string());
        let on_cluster = inner.store.is_some();
        if epoch == 0 {
            if !known && !on_cluster {
                return Err(refused(group, ShareError::UnknownMember(member.into())));
            }
            let max = self.config().max_share_sessions;
            if !inner.sessions.contains_key(&key) && inner.sessions.len() >= max {
                inner.sessions.retain(|(g, _), s| {
                    let timeout = self.group_settings(g).session_timeout;
                    s.last_used
                        .is_none_or(|t| now.saturating_duration_since(t) < timeout)
                });
            }
            if !inner.sessions.contains_key(&key) && inner.sessions.len() >= max {
                return Err(refused(group, ShareError::ShareSessionLimitReached(max)));
            }
            inner.sessions.insert(key.clone(), ShareSession::default());
        }
        let Some(session) = inner.sessions.get_mut(&key) else {
            // Closing a session already gone (its member left first) closes nothing.
            if epoch == LEAVE_EPOCH {
                return Ok(Vec::new());
            }
            return Err(refused(
                group,
                ShareError::ShareSessionNotFound(member.into()),
            ));
        };
        if epoch != 0 && epoch != LEAVE_EPOCH && epoch != session.next_epoch {
            let expected = session.next_epoch;
            let source = ShareError::InvalidShareSessionEpoch {
                given: epoch,
                expected,
            };
            return Err(refused(group, source));
        }
        session.next_epoch = session.next_epoch.checked_add(1).unwrap_or(1);
        session.last_used = Some(now);
        session.partitions.extend(add.iter().cloned());
        for f in forget {
            session.partitions.remove(f);
        }
        let out = session.partitions.iter().cloned().collect();
        if epoch == LEAVE_EPOCH {
            inner.sessions.remove(&key);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ShareConfig;

    fn hb(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
        ShareHeartbeat {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            subscribed_topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "c".into(),
            ..ShareHeartbeat::default()
        }
    }

    fn code(e: Error) -> ShareError {
        match e {
            Error::Share { source, .. } => source,
            other => panic!("not a share error: {other:?}"),
        }
    }

    #[test]
    fn members_join_share_every_partition_and_are_fenced_by_epoch() {
        let share = ShareCoordinator::new(ShareConfig::default());
        let topics: BTreeMap<String, i32> = [("t".to_string(), 2)].into();
        let now = Instant::now();
        let a = share
            .heartbeat(hb("a", 0, Some(&["t"])), &topics, now)
            .unwrap();
        let b = share
            .heartbeat(hb("b", 0, Some(&["t", "x"])), &topics, now)
            .unwrap();
        let all: BTreeMap<String, Vec<i32>> = [("t".to_string(), vec![0, 1])].into();
        assert_eq!(a.assignment.as_ref(), Some(&all));
        assert_eq!(
            b.assignment.as_ref(),
            Some(&all),
            "every member, every partition"
        );
        assert_eq!((a.member_epoch, b.member_epoch), (1, 2));
        assert_eq!(a.heartbeat_interval, Duration::from_secs(5));
        // Unchanged: no assignment in the answer, the same epoch.
        let again = share.heartbeat(hb("a", 1, None), &topics, now).unwrap();
        assert_eq!((again.member_epoch, again.assignment), (1, None));
        assert_eq!(
            code(share.heartbeat(hb("a", 7, None), &topics, now).unwrap_err()),
            ShareError::FencedMemberEpoch {
                given: 7,
                current: 1
            }
        );
        assert!(matches!(
            code(
                share
                    .heartbeat(hb("zz", 3, None), &topics, now)
                    .unwrap_err()
            ),
            ShareError::UnknownMember(_)
        ));
        // A partition more: a new epoch with the new assignment.
        let grown: BTreeMap<String, i32> = [("t".to_string(), 3)].into();
        let a2 = share.heartbeat(hb("a", 1, None), &grown, now).unwrap();
        assert_eq!(a2.member_epoch, 3);
        assert_eq!(a2.assignment.unwrap()["t"], vec![0, 1, 2]);
        let (epoch, members) = share.describe_members("g");
        assert_eq!((epoch, members.len()), (3, 2));
        let left = share
            .heartbeat(hb("b", LEAVE_EPOCH, None), &topics, now)
            .unwrap();
        assert_eq!(left.member_epoch, LEAVE_EPOCH);
        assert_eq!(share.describe_members("g").1.len(), 1);
    }

    #[test]
    fn a_join_needs_topics_and_a_silent_member_expires() {
        let share = ShareCoordinator::new(ShareConfig::default());
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let now = Instant::now();
        assert!(matches!(
            code(share.heartbeat(hb("a", 0, None), &topics, now).unwrap_err()),
            ShareError::InvalidRequest(_)
        ));
        share
            .heartbeat(hb("a", 0, Some(&["t"])), &topics, now)
            .unwrap();
        share
            .heartbeat(hb("b", 0, Some(&["t"])), &topics, now)
            .unwrap();
        let later = now + Duration::from_secs(30);
        share.heartbeat(hb("b", 2, None), &topics, later).unwrap();
        // a's 45 s session ended; b heartbeated at 30 s.
        share.expire_members(now + Duration::from_secs(46)).unwrap();
        let ids: Vec<String> = share
            .describe_members("g")
            .1
            .into_iter()
            .map(|m| m.member_id)
            .collect();
        assert_eq!(ids, vec!["b".to_string()]);
    }

    #[test]
    fn share_sessions_check_their_epochs() {
        let share = ShareCoordinator::new(ShareConfig::default());
        let topics: BTreeMap<String, i32> = [("t".to_string(), 2)].into();
        let now = Instant::now();
        assert!(matches!(
            code(share.share_session("g", "a", 0, &[], &[], now).unwrap_err()),
            ShareError::UnknownMember(_)
        ));
        share
            .heartbeat(hb("a", 0, Some(&["t"])), &topics, now)
            .unwrap();
        assert!(matches!(
            code(share.share_session("g", "a", 1, &[], &[], now).unwrap_err()),
            ShareError::ShareSessionNotFound(_)
        ));
        let t0 = ("t".to_string(), 0);
        let t1 = ("t".to_string(), 1);
        let open = share.share_session("g", "a", 0, &[t0.clone(), t1.clone()], &[], now);
        assert_eq!(open.unwrap(), vec![t0.clone(), t1.clone()]);
        assert_eq!(
            code(share.share_session("g", "a", 2, &[], &[], now).unwrap_err()),
            ShareError::InvalidShareSessionEpoch {
                given: 2,
                expected: 1
            }
        );
        let next = share.share_session("g", "a", 1, &[], std::slice::from_ref(&t1), now);
        assert_eq!(next.unwrap(), vec![t0.clone()]);
        assert_eq!(
            share.share_session("g", "a", -1, &[], &[], now).unwrap(),
            vec![t0]
        );
        assert!(matches!(
            code(share.share_session("g", "a", 3, &[], &[], now).unwrap_err()),
            ShareError::ShareSessionNotFound(_)
        ));
        // A member's last request after it left: nothing to close, no error.
        share
            .heartbeat(hb("a", LEAVE_EPOCH, None), &topics, now)
            .unwrap();
        assert_eq!(
            share.share_session("g", "a", -1, &[], &[], now).unwrap(),
            Vec::new()
        );
    }

    #[test]
    fn a_full_share_group_refuses_a_new_member_until_one_leaves() {
        let share = ShareCoordinator::new(ShareConfig {
            max_size: 2,
            ..ShareConfig::default()
        });
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let now = Instant::now();
        for m in ["a", "b"] {
            share
                .heartbeat(hb(m, 0, Some(&["t"])), &topics, now)
                .unwrap();
        }
        assert_eq!(
            code(
                share
                    .heartbeat(hb("c", 0, Some(&["t"])), &topics, now)
                    .unwrap_err()
            ),
            ShareError::GroupMaxSizeReached(2)
        );
        assert_eq!(
            code(
                share
                    .join("g", &["t".to_string()], "in-process")
                    .unwrap_err()
            ),
            ShareError::GroupMaxSizeReached(2)
        );
        // A member joining again (epoch 0, its own id) is no new member.
        share
            .heartbeat(hb("a", 0, Some(&["t"])), &topics, now)
            .unwrap();
        // Another group has room.
        let mut other = hb("c", 0, Some(&["t"]));
        other.group_id = "h".into();
        share.heartbeat(other, &topics, now).unwrap();
        share
            .heartbeat(hb("b", LEAVE_EPOCH, None), &topics, now)
            .unwrap();
        share
            .heartbeat(hb("c", 0, Some(&["t"])), &topics, now)
            .unwrap();
        assert_eq!(share.describe_members("g").1.len(), 2);
    }

    #[test]
    fn a_node_holds_at_most_max_share_sessions() {
        let share = ShareCoordinator::new(ShareConfig {
            max_share_sessions: 2,
            ..ShareConfig::default()
        });
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let now = Instant::now();
        for m in ["a", "b", "c"] {
            share
                .heartbeat(hb(m, 0, Some(&["t"])), &topics, now)
                .unwrap();
        }
        share.share_session("g", "a", 0, &[], &[], now).unwrap();
        share.share_session("g", "b", 0, &[], &[], now).unwrap();
        assert_eq!(
            code(share.share_session("g", "c", 0, &[], &[], now).unwrap_err()),
            ShareError::ShareSessionLimitReached(2)
        );
        // Opening again replaces a member's own session: no new one.
        share.share_session("g", "a", 0, &[], &[], now).unwrap();
        // A session closed, or its member gone, makes room.
        share.share_session("g", "a", -1, &[], &[], now).unwrap();
        share.share_session("g", "c", 0, &[], &[], now).unwrap();
        assert_eq!(
            code(share.share_session("g", "a", 0, &[], &[], now).unwrap_err()),
            ShareError::ShareSessionLimitReached(2)
        );
        share.expire_members(now + Duration::from_secs(46)).unwrap();
        share
            .heartbeat(hb("a", 0, Some(&["t"])), &topics, now)
            .unwrap();
        share.share_session("g", "a", 0, &[], &[], now).unwrap();
    }

    #[test]
    fn a_full_node_drops_share_sessions_idle_for_a_session_timeout() {
        let share = ShareCoordinator::new(ShareConfig {
            max_share_sessions: 2,
            ..ShareConfig::default()
        });
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let t0 = Instant::now();
        for m in ["a", "b", "c", "d"] {
            share
                .heartbeat(hb(m, 0, Some(&["t"])), &topics, t0)
                .unwrap();
        }
        share.share_session("g", "a", 0, &[], &[], t0).unwrap();
        share.share_session("g", "b", 0, &[], &[], t0).unwrap();
        share
            .share_session("g", "b", 1, &[], &[], t0 + Duration::from_secs(30))
            .unwrap();
        let later = t0 + Duration::from_secs(46);
        // a's session was not used for the 45 s session timeout: c takes its place.
        share.share_session("g", "c", 0, &[], &[], later).unwrap();
        assert_eq!(
            code(
                share
                    .share_session("g", "d", 0, &[], &[], later)
                    .unwrap_err()
            ),
            ShareError::ShareSessionLimitReached(2)
        );
        assert!(matches!(
            code(
                share
                    .share_session("g", "a", 1, &[], &[], later)
                    .unwrap_err()
            ),
            ShareError::ShareSessionNotFound(_)
        ));
    }
}
