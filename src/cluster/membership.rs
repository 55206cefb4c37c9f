//! The metadata quorum's membership: the voters (the controllers) and the learners
//! (broker-only nodes, Kafka's `process.roles=broker`), as raft-rs's configuration
//! holds them.
//!
//! A node whose id is not among `--quorum`'s voters is a broker only: it follows the
//! metadata log as a raft-rs learner (it is sent every entry, applies it, and never
//! votes or counts towards a majority). It says hello to every voter with its own quorum
//! address; the controller then adds it to the learners through a configuration change
//! ([`learner_change`]), a Raft entry of its own that every node applies
//! ([`conf_change_of`]) and persists in its `raft-state`.

use protobuf::Message as _;
use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType};

use super::inbox::{node_of, raft_id};
use crate::error::{Error, Result};

/// Who takes part in the metadata quorum, by node id, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Membership {
    /// Voters: they elect the controller among themselves.
    pub voters: Vec<i32>,
    /// Learners: broker-only nodes that follow the metadata log.
    pub learners: Vec<i32>,
}

impl Membership {
    /// The membership of raft-rs's `cs`.
    pub(crate) fn of(cs: &ConfState) -> Membership {
        let ids = |v: &[u64]| {
            let mut ids: Vec<i32> = v.iter().map(|r| node_of(*r)).collect();
            ids.sort_unstable();
            ids
        };
        Membership {
            voters: ids(&cs.voters),
            learners: ids(&cs.learners),
        }
    }

    /// True if `node` is a voter or a learner.
    pub(crate) fn contains(&self, node: i32) -> bool {
        self.voters.contains(&node) || self.learners.contains(&node)
    }
}

/// One member of the quorum as the controller sees it (Kafka's DescribeQuorum
/// `ReplicaState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaStatus {
    /// Node id.
    pub node: i32,
    /// The last metadata log index the controller knows it has (-1 unknown).
    pub log_end: i64,
    /// Milliseconds since the epoch it was last heard from (-1 unknown).
    pub last_heard_ms: i64,
}

/// The quorum as this node last saw it (Kafka's DescribeQuorum).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QuorumStatus {
    /// The controller (Raft leader), -1 if unknown.
    pub leader: i32,
    /// Its term (Kafka's leader epoch of the metadata partition).
    pub term: u64,
    /// The committed index (Kafka's high watermark).
    pub committed: u64,
    /// The voters, with their progress on the controller.
    pub voters: Vec<ReplicaStatus>,
    /// The learners (Kafka's observers), likewise.
    pub learners: Vec<ReplicaStatus>,
    /// Quorum addresses by node, where known.
    pub addresses: Vec<(i32, String)>,
}

/// The configuration change of `kind` for `node`; `addr`, the quorum address of a node
/// it adds, goes in its context, so that every node learns where to reach it.
pub(crate) fn change(kind: ConfChangeType, node: i32, addr: &str) -> ConfChangeV2 {
    let mut single = ConfChangeSingle::default();
    single.set_change_type(kind);
    single.node_id = raft_id(node);
    let mut cc = ConfChangeV2::default();
    cc.mut_changes().push(single);
    cc.context = addr.as_bytes().to_vec().into();
    cc
}

/// The node a change adds (as a learner or a voter) with the quorum address in its
/// context, if it adds one and names an address.
pub(crate) fn added(cc: &ConfChangeV2) -> Option<(i32, String)> {
    let addr = std::str::from_utf8(&cc.context).ok()?;
    if addr.is_empty() {
        return None;
    }
    cc.changes
        .iter()
        .find(|c| {
            matches!(
                c.get_change_type(),
                ConfChangeType::AddNode | ConfChangeType::AddLearnerNode
            )
        })
        .map(|c| (node_of(c.node_id), addr.to_string()))
}

/// The nodes a change removes.
pub(crate) fn removed(cc: &ConfChangeV2) -> Vec<i32> {
    cc.changes
        .iter()
        .filter(|c| c.get_change_type() == ConfChangeType::RemoveNode)
        .map(|c| node_of(c.node_id))
        .collect()
}

/// The configuration change a committed entry carries, if it is one (None for a
/// normal entry). An entry that does not decode is corruption of the metadata log.
pub(crate) fn conf_change_of(e: &Entry) -> Result<Option<ConfChangeV2>> {
    let location = || format!("metadata log entry {}", e.index);
    match e.get_entry_type() {
        EntryType::EntryNormal => Ok(None),
        EntryType::EntryConfChangeV2 => {
            ConfChangeV2::parse_from_bytes(&e.data)
                .map(Some)
                .map_err(|err| {
                    Error::corrupt(location(), 0, format!("not a configuration change: {err}"))
                })
        }
        EntryType::EntryConfChange => Err(Error::corrupt(
            location(),
            0,
            "a version 1 configuration change, which tidelog never writes",
        )),
    }
}

/// The learners and voters a change names, for the log.
pub(crate) fn describe(cc: &ConfChangeV2) -> String {
    cc.changes
        .iter()
        .map(|c| format!("{:?} {}", c.get_change_type(), node_of(c.node_id)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_change_round_trips_through_an_entry() {
        let cc = change(ConfChangeType::AddLearnerNode, 4, "h:9");
        let mut e = Entry {
            index: 7,
            data: cc.write_to_bytes().unwrap().into(),
            ..Default::default()
        };
        e.set_entry_type(EntryType::EntryConfChangeV2);
        let back = conf_change_of(&e).unwrap().unwrap();
        assert_eq!(back, cc);
        assert_eq!(describe(&back), "AddLearnerNode 4");
        assert_eq!(added(&back), Some((4, "h:9".to_string())));
        assert!(removed(&back).is_empty());
        let out = change(ConfChangeType::RemoveNode, 2, "");
        assert_eq!((added(&out), removed(&out)), (None, vec![2]));
        e.data = vec![0xff, 0xff, 0xff].into();
        let err = conf_change_of(&e).unwrap_err().to_string();
        assert!(err.contains("entry 7"), "{err}");
        e.set_entry_type(EntryType::EntryNormal);
        assert_eq!(conf_change_of(&e).unwrap(), None);
    }

    #[test]
    fn membership_is_by_node_id() {
        let cs = ConfState {
            voters: vec![3, 2, 4],
            learners: vec![5],
            ..Default::default()
        };
        let m = Membership::of(&cs);
        assert_eq!(m.voters, vec![1, 2, 3]);
        assert_eq!(m.learners, vec![4]);
        assert!(m.contains(4) && m.contains(1) && !m.contains(5));
    }
}
