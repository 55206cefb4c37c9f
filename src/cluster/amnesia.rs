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
//!   it holds every entry committed before its record;
//! - a voter on a directory formatted to join (`tidelog format
//!   --no-initial-controllers`, [`super::storage::JOINING_FILE`]) does not vote,
//!   and does not campaign, until the quorum has recorded its directory id, whatever it
//!   knows of the cluster: it was formatted to be added to a quorum that runs, which may
//!   count it as a voter that acknowledged entries this directory never held (a voter
//!   whose disk was lost and that was formatted anew), and it is no founder;
//! - unless it is a founder: one that took part in the quorum (handled a Raft message)
//!   while it knew of no cluster id took part in the new cluster before it had one, so
//!   it is no wiped voter (a peer's hello names the cluster once it has an id, and comes
//!   before that peer's Raft messages). Without this, a controller lost before the
//!   founders' directory ids were recorded would leave no voter willing to elect
//!   another;
//! - a voter that knows no cluster id (its directory was drawn at this start and no
//!   peer named one) founds a cluster only with every voter: until each voter of its
//!   voter list said in a hello of this run that it knows no cluster id either, it
//!   neither campaigns nor answers or counts a vote ([`Standing::awaits_founders`]).
//!   Nothing tells a wiped directory from a new one; a voter that holds the cluster's
//!   metadata names its id in its hellos, so while one may be down, the others wait.
//!
//! The leader judges its followers' answers too:
//!
//! - a rejection, in the term it leads, whose hint (where the follower's log ends, or
//!   where it stops matching) is below the committed part of what that follower
//!   acknowledged in this term (`min(matched, committed)`) says the follower lost
//!   entries it acknowledged: a follower that kept its log matches the leader up to
//!   what it acknowledged, so its hint is never below it. The leader drops the
//!   rejection rather than send that follower its log again from where it ends: its
//!   next heartbeat names that same index, and the follower stops on it (above). Taken,
//!   the rejection made raft-rs's leader probe from the hint (its probe ignores the
//!   matched index), and a wiped follower whose first message was an append rather than
//!   a heartbeat caught up silently, as if new;
//! - a peer whose hello said its directory joins ([`super::storage::JOINING_FILE`]),
//!   and whose directory id the applied metadata does not record as that peer's, may be
//!   counted as a voter whose disk was lost: its acknowledgement is stepped as one of
//!   the leader's commit index at most (its progress moves on, it is sent the log, but
//!   it raises no commit), and a candidate drops its granted vote;
//! - a peer's acknowledgement, in the term this node leads, of an index past this
//!   node's last is refused (a follower acknowledges only what its leader sent it).
//!   raft-rs's leader would take it as the follower's progress, send its appends past
//!   its own log, and the follower, whose log "matches" there (raft-rs reads the term of
//!   an index past the log as 0), would end its thread on the commit index they carry.

use raft::prelude::{Message, MessageType};

use super::inbox::node_of;

/// What to do with a Raft message from a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Step it.
    Step,
    /// Drop a vote request (or a leader's hand-over, on which raft-rs campaigns)
    /// unanswered: this node may not vote yet.
    RefuseVote,
    /// This node acknowledged entries up to `acknowledged` to the leader `leader` (a
    /// node id), but its log ends at `last`: its metadata log was lost.
    Lost {
        leader: i32,
        acknowledged: u64,
        last: u64,
    },
    /// Drop it, with an error naming the peer: it cannot come from raft-rs.
    Refuse(String),
    /// Step a joiner's acknowledgement as one of `index` (this node's commit index) at
    /// most: the peer `peer` (a node id) said in its hello that its directory is new to
    /// the cluster, and the quorum has not recorded it as that voter's, so what it
    /// acknowledges counts toward no commit, yet its progress moves on.
    CapAcknowledgement { peer: i32, index: u64 },
    /// Drop a joiner's granted vote (`peer`, a node id): it is not counted.
    DropJoinerVote { peer: i32 },
    /// Drop a vote request, a hand-over or a granted vote: this node knows no cluster
    /// id and has not heard from every voter that it knows none either, so it may not
    /// found the cluster yet.
    AwaitFounders,
    /// Drop a follower's rejection: the follower `peer` (a node id) acknowledged
    /// `acknowledged` (committed) in this term, but says its log ends at `hint`. Its
    /// metadata log was lost; this node's next heartbeat tells it so.
    PeerLost {
        peer: i32,
        acknowledged: u64,
        hint: u64,
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
    /// This node is the Raft leader (the controller).
    pub leads: bool,
    /// On the leader, the committed part of what the message's sender acknowledged in
    /// this term: `min(matched, committed)`, what a heartbeat to it names (0 elsewhere).
    pub sender_acknowledged: u64,
    /// This node's commit index.
    pub committed: u64,
    /// The message's sender said in its hello that its directory is new to the cluster
    /// (formatted to join, or marked so at its first start), and the quorum has not
    /// recorded that directory's id as the sender's: it may be counted as a voter whose
    /// disk was lost, so its acknowledgements and votes count for nothing.
    pub sender_joining: bool,
    /// This node knows no cluster id and some voter has not said in this run that it
    /// knows none either: it takes no part in an election.
    pub awaits_founders: bool,
}

impl Standing {
    /// Where the node `raft` stands for a message from `from` (a raft id).
    pub(crate) fn of<S: raft::Storage>(
        raft: &raft::Raft<S>,
        from: u64,
        votes_refused: bool,
        sender_joining: bool,
        awaits_founders: bool,
    ) -> Standing {
        let leads = raft.state == raft::StateRole::Leader;
        Standing {
            term: raft.term,
            last_index: raft.raft_log.last_index(),
            votes_refused,
            leads,
            committed: raft.raft_log.committed,
            sender_joining,
            awaits_founders,
            sender_acknowledged: if leads {
                raft.prs()
                    .get(from)
                    .map_or(0, |p| p.matched.min(raft.raft_log.committed))
            } else {
                0
            },
        }
    }
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
        // A leader's hand-over (`MsgTimeoutNow`) makes raft-rs campaign at once, voting
        // for itself.
        MessageType::MsgRequestVote
        | MessageType::MsgRequestPreVote
        | MessageType::MsgTimeoutNow
            if standing.awaits_founders =>
        {
            Verdict::AwaitFounders
        }
        MessageType::MsgRequestVoteResponse | MessageType::MsgRequestPreVoteResponse
            if standing.awaits_founders && !m.reject =>
        {
            Verdict::AwaitFounders
        }
        MessageType::MsgRequestVote
        | MessageType::MsgRequestPreVote
        | MessageType::MsgTimeoutNow
            if standing.votes_refused =>
        {
            Verdict::RefuseVote
        }
        MessageType::MsgAppendResponse
            if standing.leads
                && m.reject
                && m.term == standing.term
                && m.reject_hint < standing.sender_acknowledged =>
        {
            Verdict::PeerLost {
                peer: node_of(m.from),
                acknowledged: standing.sender_acknowledged,
                hint: m.reject_hint,
            }
        }
        MessageType::MsgAppendResponse
            if standing.leads
                && !m.reject
                && m.term == standing.term
                && m.index > standing.last_index =>
        {
            Verdict::Refuse(format!(
                "an acknowledgement of index {} in term {}, past this node's last index {}: a follower acknowledges only what its leader sent",
                m.index, m.term, standing.last_index
            ))
        }
        MessageType::MsgAppendResponse
            if standing.leads
                && standing.sender_joining
                && !m.reject
                && m.term == standing.term
                && m.index > standing.committed =>
        {
            Verdict::CapAcknowledgement {
                peer: node_of(m.from),
                index: standing.committed,
            }
        }
        MessageType::MsgRequestVoteResponse | MessageType::MsgRequestPreVoteResponse
            if standing.sender_joining && !m.reject =>
        {
            Verdict::DropJoinerVote {
                peer: node_of(m.from),
            }
        }
        _ => Verdict::Step,
    }
}

/// What a voter knows of its own data directory, as [`may_vote`] judges it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Origin {
    /// The directory had no `meta.properties` at this start (its id was drawn now).
    pub fresh: bool,
    /// It handled a Raft message while it knew of no cluster id: a founder.
    pub founder: bool,
    /// It knows the cluster has an id (from its applied metadata or a peer's hello).
    pub cluster_known: bool,
    /// The quorum's applied metadata records its directory id as this directory's.
    pub recorded: bool,
    /// The directory was formatted to join and its id was not recorded since
    /// ([`super::storage::JOINING_FILE`]).
    pub joining: bool,
}

/// Whether a voter may vote: a directory formatted to join only once the quorum
/// recorded its directory id; any other always, unless its data directory was drawn at
/// this start, it knows the cluster already has an id, the quorum has not yet recorded
/// its directory id, and it is no founder of the cluster. A new cluster's voters all
/// start fresh and know no id, so they elect the first leader, and take part in the
/// quorum before it has an id, so they keep voting after.
pub(crate) fn may_vote(o: Origin) -> bool {
    if o.joining {
        return o.recorded;
    }
    !o.fresh || o.founder || !o.cluster_known || o.recorded
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::storage::MemStorage;
    use raft::{Config, RawNode};

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
            leads: false,
            sender_acknowledged: 0,
            committed: 0,
            sender_joining: false,
            awaits_founders: false,
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
    fn a_rejection_below_what_the_follower_acknowledged_means_it_lost_its_log() {
        // The leader in term 5; the follower acknowledged index 30, all committed.
        let leader = |term| Standing {
            leads: true,
            sender_acknowledged: 30,
            ..standing(term, 40, false)
        };
        let mut rejection = message(MessageType::MsgAppendResponse, 5, 0);
        rejection.reject = true;
        rejection.index = 35;
        rejection.reject_hint = 0;
        assert_eq!(
            judge(&rejection, leader(5)),
            Verdict::PeerLost {
                peer: 1,
                acknowledged: 30,
                hint: 0
            }
        );
        // A hint at or above what it acknowledged is a follower that kept its log.
        for hint in [30, 34] {
            rejection.reject_hint = hint;
            assert_eq!(judge(&rejection, leader(5)), Verdict::Step);
        }
        // Another term's rejection, an acknowledgement, and a follower's view are
        // raft-rs's to weigh.
        rejection.reject_hint = 0;
        assert_eq!(judge(&rejection, leader(6)), Verdict::Step);
        let follower = Standing {
            leads: false,
            ..leader(5)
        };
        assert_eq!(judge(&rejection, follower), Verdict::Step);
        rejection.reject = false;
        rejection.index = 30;
        assert_eq!(judge(&rejection, leader(5)), Verdict::Step);
    }

    #[test]
    fn an_acknowledgement_past_the_log_is_refused() {
        let leader = |term| Standing {
            leads: true,
            ..standing(term, 40, false)
        };
        let mut ack = message(MessageType::MsgAppendResponse, 5, 0);
        ack.index = 41;
        let Verdict::Refuse(why) = judge(&ack, leader(5)) else {
            panic!("an acknowledgement past the log was taken");
        };
        assert!(
            why.contains("index 41 in term 5") && why.contains("last index 40"),
            "{why}"
        );
        // What the log holds, a rejection (its hint is raft-rs's to weigh), and another
        // term's (raft-rs ignores an older one, and steps down for a newer one) are
        // stepped.
        ack.index = 40;
        assert_eq!(judge(&ack, leader(5)), Verdict::Step);
        ack.index = 41;
        ack.reject = true;
        assert_eq!(judge(&ack, leader(5)), Verdict::Step);
        ack.reject = false;
        assert_eq!(judge(&ack, leader(6)), Verdict::Step);
        assert_eq!(judge(&ack, leader(4)), Verdict::Step);
        // A follower ignores acknowledgements; one that led in this term before a
        // restart may have sent entries it had not yet written, and lost them.
        assert_eq!(judge(&ack, standing(5, 40, false)), Verdict::Step);
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

    /// A fresh directory of a known cluster, not recorded, not a founder's.
    const HELD_BACK: Origin = Origin {
        fresh: true,
        founder: false,
        cluster_known: true,
        recorded: false,
        joining: false,
    };

    #[test]
    fn only_a_fresh_directory_of_a_known_cluster_without_a_record_may_not_vote() {
        assert!(!may_vote(HELD_BACK));
        // A new cluster's first election; a recorded directory; a directory that was
        // there before this start (its Raft state is its own).
        for o in [
            Origin {
                cluster_known: false,
                ..HELD_BACK
            },
            Origin {
                recorded: true,
                ..HELD_BACK
            },
            Origin {
                fresh: false,
                ..HELD_BACK
            },
        ] {
            assert!(may_vote(o), "{o:?}");
        }
    }

    #[test]
    fn a_founder_votes_before_its_directory_id_is_recorded() {
        // It took part before the cluster had an id: the same node as one held back
        // otherwise votes.
        assert!(may_vote(Origin {
            founder: true,
            ..HELD_BACK
        }));
        // A directory that was there before this start votes either way; a founder's
        // record, once applied, changes nothing.
        assert!(may_vote(Origin {
            founder: true,
            fresh: false,
            ..HELD_BACK
        }));
        assert!(may_vote(Origin {
            founder: true,
            recorded: true,
            ..HELD_BACK
        }));
    }

    /// A leader hands its leadership over with `MsgTimeoutNow`, on which raft-rs
    /// campaigns at once, voting for itself: a node that may not vote drops it.
    #[test]
    fn a_node_that_may_not_vote_is_not_handed_the_leadership() {
        let timeout_now = message(MessageType::MsgTimeoutNow, 3, 0);
        assert_eq!(
            judge(&timeout_now, standing(3, 10, true)),
            Verdict::RefuseVote
        );
        assert_eq!(judge(&timeout_now, standing(3, 10, false)), Verdict::Step);
    }

    #[test]
    fn a_directory_formatted_to_join_votes_only_once_recorded() {
        // Formatted (not fresh), whatever it knows of the cluster, founder or not.
        for cluster_known in [false, true] {
            for founder in [false, true] {
                let joining = Origin {
                    fresh: false,
                    founder,
                    cluster_known,
                    recorded: false,
                    joining: true,
                };
                assert!(!may_vote(joining), "{joining:?}");
                assert!(may_vote(Origin {
                    recorded: true,
                    ..joining
                }));
            }
        }
    }

    /// Three raft-rs nodes in memory, stepped by hand: the assumption the lost-log rule
    /// rests on, that a leader's heartbeat names `min(matched, committed)`.
    struct Model {
        nodes: Vec<RawNode<MemStorage>>,
        /// Nodes (raft ids) whose messages are dropped, as if down.
        down: Vec<u64>,
        /// Nodes (raft ids) that may not vote ([`may_vote`]).
        refusing: Vec<u64>,
        /// Nodes (raft ids) that said in their hellos that they join.
        joiners: Vec<u64>,
    }

    impl Model {
        fn new() -> Model {
            Model {
                nodes: (1..=3).map(fresh).collect(),
                down: Vec::new(),
                refusing: Vec::new(),
                joiners: Vec::new(),
            }
        }

        /// Runs the nodes' `Ready`s and delivers their messages until none is left,
        /// keeping what `keep` picks of them; a message [`judge`] does not let through is
        /// dropped (raft-rs would end the thread on the heartbeat of a lost log).
        fn settle(&mut self, keep: impl Fn(&Message) -> bool) -> Vec<Message> {
            let mut kept = Vec::new();
            for _ in 0..100 {
                let mut msgs = Vec::new();
                for n in self.nodes.iter_mut() {
                    if !n.has_ready() {
                        continue;
                    }
                    let mut rd = n.ready();
                    msgs.extend(rd.take_messages());
                    if !rd.snapshot().is_empty() {
                        n.mut_store()
                            .wl()
                            .apply_snapshot(rd.snapshot().clone())
                            .unwrap();
                    }
                    n.mut_store().wl().append(rd.entries()).unwrap();
                    if let Some(hs) = rd.hs() {
                        n.mut_store().wl().set_hardstate(hs.clone());
                    }
                    msgs.extend(rd.take_persisted_messages());
                    let mut light = n.advance(rd);
                    if let Some(c) = light.commit_index() {
                        n.mut_store().wl().mut_hard_state().commit = c;
                    }
                    msgs.extend(light.take_messages());
                    n.advance_apply();
                }
                if msgs.is_empty() {
                    return kept;
                }
                for m in msgs {
                    if self.down.contains(&m.to) || self.down.contains(&m.from) {
                        continue;
                    }
                    if keep(&m) {
                        kept.push(m.clone());
                    }
                    // As the Raft loop does: only what the judgement lets through.
                    let to = m.to as usize - 1;
                    match judge(&m, self.standing(m.to, m.from)) {
                        Verdict::Step => {
                            let _ = self.nodes[to].step(m);
                        }
                        Verdict::CapAcknowledgement { index, .. } => {
                            let mut m = m;
                            m.index = index;
                            let _ = self.nodes[to].step(m);
                        }
                        _ => {}
                    }
                }
            }
            panic!("the model did not settle in 100 rounds");
        }

        /// Node 1 campaigns and proposes `n` entries, which commit.
        fn lead_and_commit(&mut self, n: usize) {
            self.nodes[0].campaign().unwrap();
            self.settle(|_| false);
            for _ in 0..n {
                self.nodes[0].propose(vec![], b"x".to_vec()).unwrap();
                self.settle(|_| false);
            }
        }

        /// The heartbeats node 1 sends on its next heartbeat tick.
        fn heartbeats(&mut self) -> Vec<Message> {
            self.nodes[0].tick();
            self.settle(|m| m.get_msg_type() == MessageType::MsgHeartbeat)
        }

        /// Node 1 heartbeats five times; node 3 then holds node 1's whole log, whose last
        /// index is returned.
        fn heartbeats_until_node_3_holds_the_log(&mut self) -> u64 {
            for _ in 0..5 {
                self.heartbeats();
            }
            let last = self.nodes[0].raft.raft_log.last_index();
            assert_eq!(
                self.nodes[2].raft.raft_log.last_index(),
                last,
                "node 3 was not sent the log"
            );
            last
        }

        /// Node 1's next heartbeats to node 3, whose log is empty, say it lost the
        /// entries up to `acknowledged`.
        fn assert_next_heartbeats_tell_node_3_lost(&mut self, acknowledged: u64) {
            let to_3: Vec<_> = self
                .heartbeats()
                .into_iter()
                .filter(|h| h.to == 3)
                .collect();
            assert!(!to_3.is_empty(), "no heartbeat to node 3");
            for hb in &to_3 {
                assert_eq!(
                    judge(hb, self.standing(3, 1)),
                    Verdict::Lost {
                        leader: node_of(1),
                        acknowledged,
                        last: 0
                    }
                );
            }
        }

        /// Where node `raft_id` stands for a message from `from`, as the Raft loop
        /// judges it.
        fn standing(&self, raft_id: u64, from: u64) -> Standing {
            let r = &self.nodes[raft_id as usize - 1].raft;
            Standing::of(
                r,
                from,
                self.refusing.contains(&raft_id),
                self.joiners.contains(&from),
                false,
            )
        }
    }

    /// A raft-rs node with an empty log, of voters 1, 2 and 3.
    fn fresh(id: u64) -> RawNode<MemStorage> {
        let config = Config {
            id,
            election_tick: 10,
            heartbeat_tick: 1,
            ..Default::default()
        };
        let store = MemStorage::new_with_conf_state((vec![1, 2, 3], vec![]));
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        RawNode::new(&config, store, &logger).unwrap()
    }

    #[test]
    fn a_leader_that_counted_a_wiped_voter_names_what_it_acknowledged() {
        let mut m = Model::new();
        m.lead_and_commit(3);
        let committed = m.nodes[0].raft.raft_log.committed;
        assert!(committed >= 4, "committed {committed}");
        // Node 3 acknowledged them; its disk is lost and it comes back empty.
        m.nodes[2] = fresh(3);
        m.assert_next_heartbeats_tell_node_3_lost(committed);
        // Node 2 holds what it acknowledged: stepped.
        let to_2: Vec<_> = m.heartbeats().into_iter().filter(|h| h.to == 2).collect();
        assert!(!to_2.is_empty(), "no heartbeat to node 2");
        for hb in &to_2 {
            assert_eq!(judge(hb, m.standing(2, 1)), Verdict::Step);
        }
    }

    /// The leader's first message to a wiped follower is an append, not a heartbeat (an
    /// entry was proposed as the follower came back): raft-rs's leader would probe from
    /// the follower's rejection and send it the whole log, and the follower would catch
    /// up silently, as if new, its loss never told.
    #[test]
    fn a_wiped_voter_answering_an_append_first_is_not_sent_the_log_again() {
        let mut m = Model::new();
        m.lead_and_commit(3);
        let acknowledged = m.nodes[0].raft.prs().get(3).unwrap().matched;
        assert!(acknowledged >= 4, "node 3 acknowledged {acknowledged}");
        // Node 3's disk is lost; the leader found it unreachable meanwhile (it probes).
        m.nodes[2] = fresh(3);
        m.nodes[0].report_unreachable(3);
        m.nodes[0].propose(vec![], b"y".to_vec()).unwrap();
        let rejections = m.settle(|r| {
            r.from == 3 && r.get_msg_type() == MessageType::MsgAppendResponse && r.reject
        });
        assert!(!rejections.is_empty(), "node 3 rejected no append");
        assert_eq!(
            m.nodes[2].raft.raft_log.last_index(),
            0,
            "sent the log again"
        );
        let lost = Verdict::PeerLost {
            peer: node_of(3),
            acknowledged,
            hint: 0,
        };
        let verdicts: Vec<_> = rejections
            .iter()
            .map(|r| judge(r, m.standing(1, 3)))
            .collect();
        assert!(verdicts.iter().all(|v| *v == lost), "{verdicts:?}");
        // The next heartbeat names what it acknowledged: it stops on it.
        m.assert_next_heartbeats_tell_node_3_lost(acknowledged);
    }

    #[test]
    fn a_voter_that_never_acknowledged_is_not_taken_for_lost() {
        let mut m = Model::new();
        // Node 3 is down from the start: a late voter of a new cluster.
        m.down.push(3);
        m.lead_and_commit(3);
        m.down.clear();
        let to_3: Vec<_> = m.heartbeats().into_iter().filter(|h| h.to == 3).collect();
        assert!(!to_3.is_empty(), "no heartbeat to node 3");
        // The first heartbeat names commit 0; node 3 then catches up and stays stepped.
        for hb in &to_3 {
            assert_eq!(hb.commit, 0);
            assert_eq!(judge(hb, m.standing(3, 1)), Verdict::Step);
        }
        assert_eq!(
            m.nodes[2].raft.raft_log.last_index(),
            m.nodes[0].raft.raft_log.last_index()
        );
    }

    /// Node 2 missed an entry that nodes 1 and 3 committed; node 1 is down and node 3
    /// lost its disk. Whether node 2 wins an election with node 3's vote.
    fn lagging_candidate_wins(node_3_may_vote: bool) -> bool {
        let mut m = Model::new();
        m.lead_and_commit(1);
        m.down.push(2);
        m.nodes[0].propose(vec![], b"acked".to_vec()).unwrap();
        m.settle(|_| false);
        let committed = m.nodes[0].raft.raft_log.committed;
        assert_eq!(m.nodes[2].raft.raft_log.last_index(), committed);
        assert!(m.nodes[1].raft.raft_log.last_index() < committed);
        m.down = vec![1];
        m.nodes[2] = fresh(3);
        if !node_3_may_vote {
            m.refusing.push(3);
        }
        m.nodes[1].campaign().unwrap();
        m.settle(|_| false);
        m.nodes[1].raft.state == raft::StateRole::Leader
    }

    /// The model shows `danger` when `happens` is given false (the rule off), and it
    /// does not happen with the rule on.
    fn closed_by_the_rule(happens: impl Fn(bool) -> bool, danger: &str) {
        assert!(happens(false), "the model shows the danger: {danger}");
        assert!(!happens(true), "{danger}");
    }

    #[test]
    fn a_wiped_voter_that_may_not_vote_elects_no_one_lacking_what_it_acknowledged() {
        closed_by_the_rule(
            |refused| lagging_candidate_wins(!refused),
            "a wiped voter's vote elects a leader without a committed entry",
        );
    }

    /// Node 3 joins on a new directory (it may be a voter whose disk was lost) while
    /// node 2 is down; node 1 leads and proposes an entry. Whether the entry commits
    /// with node 3's acknowledgement, and node 3 holds it either way.
    fn commits_with_a_joiner(said_joining: bool) -> bool {
        let mut m = Model::new();
        m.down.push(3);
        m.lead_and_commit(1);
        m.down = vec![2];
        if said_joining {
            m.joiners.push(3);
        }
        m.nodes[0].propose(vec![], b"x".to_vec()).unwrap();
        m.settle(|_| false);
        let last = m.heartbeats_until_node_3_holds_the_log();
        let committed = m.nodes[0].raft.raft_log.committed == last;
        // Node 2 back: the entry commits without node 3, which learns so.
        m.down.clear();
        for _ in 0..5 {
            m.heartbeats();
        }
        assert_eq!(m.nodes[0].raft.raft_log.committed, last);
        assert_eq!(m.nodes[2].raft.raft_log.committed, last);
        committed
    }

    #[test]
    fn a_joiners_acknowledgements_commit_nothing_yet_it_is_sent_the_log() {
        closed_by_the_rule(
            commits_with_a_joiner,
            "a joiner's acknowledgement commits an entry",
        );
    }

    /// Node 3 acknowledged entries in node 1's term, lost its disk and came back at once:
    /// node 1 found it unreachable (it probes from what node 3 acknowledged), but its log
    /// is compacted past that, so its first message to node 3 is a snapshot, not a
    /// heartbeat or an append. No rejection and no heartbeat naming what node 3 lacks
    /// reaches it: the lost-log rules never fire, and node 3 catches up from the
    /// snapshot. Whether an entry proposed while node 2 is down commits with node 3's
    /// acknowledgement (the Raft loop marks such a node to join before its first answer
    /// leaves, and says so in its hello: `said_joining`).
    fn commits_with_a_voter_restored_by_a_snapshot(said_joining: bool) -> bool {
        let mut m = Model::new();
        m.lead_and_commit(3);
        let acknowledged = m.nodes[0].raft.prs().get(3).unwrap().matched;
        assert!(acknowledged >= 4, "node 3 acknowledged {acknowledged}");
        // Node 3 down; node 1 commits with node 2 and compacts its log past what node
        // 3 acknowledged.
        m.down.push(3);
        for _ in 0..4 {
            m.nodes[0].propose(vec![], b"z".to_vec()).unwrap();
            m.settle(|_| false);
        }
        let compacted = m.nodes[0].raft.raft_log.committed;
        assert!(compacted > acknowledged + 1);
        m.nodes[0].mut_store().wl().compact(compacted).unwrap();
        // Node 3 is back wiped, node 2 goes down; node 1 probes node 3.
        m.nodes[2] = fresh(3);
        m.down = vec![2];
        if said_joining {
            m.joiners.push(3);
        }
        m.nodes[0].report_unreachable(3);
        m.nodes[0].propose(vec![], b"x".to_vec()).unwrap();
        let to_3 = m.settle(|r| r.to == 3);
        assert_eq!(
            to_3.first().map(|r| r.get_msg_type()),
            Some(MessageType::MsgSnapshot),
            "node 1's first message to node 3 is no snapshot: {to_3:?}"
        );
        let last = m.heartbeats_until_node_3_holds_the_log();
        assert!(m.nodes[2].raft.raft_log.first_index() > acknowledged);
        // Node 3 now holds every entry it acknowledged: no heartbeat tells it lost.
        for hb in m.heartbeats().iter().filter(|h| h.to == 3) {
            assert_eq!(judge(hb, m.standing(3, 1)), Verdict::Step);
        }
        m.nodes[0].raft.raft_log.committed == last
    }

    #[test]
    fn a_wiped_voter_restored_by_a_snapshot_commits_nothing_as_a_joiner() {
        closed_by_the_rule(
            commits_with_a_voter_restored_by_a_snapshot,
            "a wiped voter restored by a snapshot commits an entry with its acknowledgement",
        );
    }

    #[test]
    fn a_joiners_granted_vote_is_dropped() {
        for t in [
            MessageType::MsgRequestVoteResponse,
            MessageType::MsgRequestPreVoteResponse,
        ] {
            let mut grant = message(t, 3, 0);
            let joiner = Standing {
                sender_joining: true,
                ..standing(3, 10, false)
            };
            assert_eq!(judge(&grant, joiner), Verdict::DropJoinerVote { peer: 1 });
            assert_eq!(judge(&grant, standing(3, 10, false)), Verdict::Step);
            // A refusal is counted: it only lowers the candidate's chances.
            grant.reject = true;
            assert_eq!(judge(&grant, joiner), Verdict::Step);
        }
    }

    #[test]
    fn a_voter_awaiting_founders_takes_no_part_in_an_election() {
        let waits = Standing {
            awaits_founders: true,
            ..standing(0, 0, false)
        };
        for t in [
            MessageType::MsgRequestVote,
            MessageType::MsgRequestPreVote,
            MessageType::MsgTimeoutNow,
            MessageType::MsgRequestVoteResponse,
            MessageType::MsgRequestPreVoteResponse,
        ] {
            assert_eq!(judge(&message(t, 1, 0), waits), Verdict::AwaitFounders);
            assert_eq!(
                judge(&message(t, 1, 0), standing(0, 0, false)),
                Verdict::Step
            );
        }
        // A refused vote is counted, and a leader's messages are stepped.
        let mut refusal = message(MessageType::MsgRequestVoteResponse, 1, 0);
        refusal.reject = true;
        assert_eq!(judge(&refusal, waits), Verdict::Step);
        for t in [MessageType::MsgAppend, MessageType::MsgHeartbeat] {
            assert_eq!(judge(&message(t, 1, 0), waits), Verdict::Step);
        }
    }
}
