//! A voter that lost its Raft state (a wiped or replaced data directory) must not take
//! part in the quorum as if new: with an empty log and a term of 0 it would vote for a
//! candidate that lacks entries it once acknowledged. The quorum refuses a voter whose
//! directory id is not the one it recorded (`RegisterVoterDirectory`); this module
//! covers the voter no peer has a record of yet, judging each Raft message before it is
//! stepped:
//!
//! - a leader's heartbeat names a commit index of at most what this node acknowledged
//!   (raft-rs sends `min(matched, committed)`), so one above this node's last index says
//!   it acknowledged entries it no longer has: its metadata log was lost, and it stops
//!   (raft-rs would end the thread on the commit index its log lacks);
//! - a voter on a directory drawn at this start (no `meta.properties`) that joins a
//!   cluster which already has an id does not vote (pre-vote or vote) until the quorum
//!   has recorded its directory id: it may be a voter whose disk was lost, and by then
//!   it holds every entry committed before its record.

use raft::prelude::{Message, MessageType};

use super::inbox::node_of;

/// What to do with a Raft message from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Step it.
    Step,
    /// Drop a vote request unanswered: this node may not vote yet.
    RefuseVote,
    /// This node acknowledged entries up to `acknowledged` to the leader `leader` (a
    /// node id), but its log ends at `last`: its metadata log was lost.
    Lost {
        leader: i32,
        acknowledged: u64,
        last: u64,
    },
}

/// Where this node stands, as the judgement of a message needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    /// raft-rs's current term of this node.
    pub term: u64,
    /// The last index of this node's metadata log (its snapshot's if the log is empty).
    pub last_index: u64,
    /// This node may not vote (see [`may_vote`]).
    pub votes_refused: bool,
}

/// The verdict on message `m` for a node in `standing`.
pub(crate) fn judge(m: &Message, standing: Standing) -> Verdict {
    match m.get_msg_type() {
        MessageType::MsgHeartbeat if m.term >= standing.term && m.commit > standing.last_index => {
            Verdict::Lost {
                leader: node_of(m.from),
                acknowledged: m.commit,
                last: standing.last_index,
            }
        }
        MessageType::MsgRequestVote | MessageType::MsgRequestPreVote if standing.votes_refused => {
            Verdict::RefuseVote
        }
        _ => Verdict::Step,
    }
}

/// Whether a voter may vote: always, unless its data directory was drawn at this start
/// (`fresh`), it knows the cluster already has an id (`cluster_known`: from its applied
/// metadata or its peers' hellos), and the quorum has not yet recorded its directory id
/// (`recorded`). A new cluster's voters all start fresh and know no id, so they elect
/// the first leader.
pub(crate) fn may_vote(fresh: bool, cluster_known: bool, recorded: bool) -> bool {
    !fresh || !cluster_known || recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(t: MessageType, term: u64, commit: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(t);
        m.term = term;
        m.commit = commit;
        m.from = 2;
        m
    }

    fn standing(term: u64, last_index: u64, votes_refused: bool) -> Standing {
        Standing {
            term,
            last_index,
            votes_refused,
        }
    }

    #[test]
    fn a_heartbeat_naming_a_commit_beyond_the_log_means_it_was_lost() {
        let hb = message(MessageType::MsgHeartbeat, 5, 40);
        assert_eq!(
            judge(&hb, standing(0, 0, false)),
            Verdict::Lost {
                leader: 1,
                acknowledged: 40,
                last: 0
            }
        );
        // A log that holds the commit index, or one that is behind only in what it was
        // not told is committed, is stepped.
        assert_eq!(judge(&hb, standing(5, 40, false)), Verdict::Step);
        assert_eq!(
            judge(
                &message(MessageType::MsgHeartbeat, 5, 0),
                standing(0, 0, false)
            ),
            Verdict::Step
        );
        // A stale leader's heartbeat (a lower term) is raft-rs's to ignore.
        assert_eq!(judge(&hb, standing(6, 10, false)), Verdict::Step);
        // Appends carry no such claim: a mismatch is answered with a rejection.
        assert_eq!(
            judge(
                &message(MessageType::MsgAppend, 5, 40),
                standing(0, 0, false)
            ),
            Verdict::Step
        );
    }

    #[test]
    fn a_node_that_may_not_vote_drops_vote_requests_only() {
        for t in [MessageType::MsgRequestVote, MessageType::MsgRequestPreVote] {
            assert_eq!(
                judge(&message(t, 3, 0), standing(0, 0, true)),
                Verdict::RefuseVote
            );
            assert_eq!(
                judge(&message(t, 3, 0), standing(0, 0, false)),
                Verdict::Step
            );
        }
        assert_eq!(
            judge(&message(MessageType::MsgAppend, 3, 0), standing(0, 0, true)),
            Verdict::Step
        );
    }

    #[test]
    fn only_a_fresh_directory_of_a_known_cluster_without_a_record_may_not_vote() {
        assert!(!may_vote(true, true, false));
        // A new cluster's first election; a recorded directory; a directory that was
        // there before this start (its Raft state is its own).
        assert!(may_vote(true, false, false));
        assert!(may_vote(true, true, true));
        assert!(may_vote(false, true, false));
    }
}
