//! The Raft loop of a node (one thread) and the metadata publisher (another).
//!
//! The loop owns raft-rs's `RawNode`: it ticks it every `tick` (100 ms), steps the
//! messages the transport receives, proposes records, and handles each `Ready` in the
//! order raft-rs requires: send the leader's messages, store a received snapshot, apply
//! the committed entries, append new entries and the hard state to disk (fsynced), then
//! send the messages that must follow persistence, advance, apply what became committed.
//! It also answers reads of the controller's commit index (raft-rs's `read_index`, a read
//! barrier on the metadata log), asking again while no read state comes back. It also
//! runs the node's broker lifecycle (register, ready) and, on the Raft leader,
//! proposes what [`super::controller::duties`] decides (cluster id, fencing by
//! liveness, leader rebalance, `__consumer_offsets`).
//!
//! Applied images go to the publisher thread, which calls the metadata listeners (the
//! broker's topic registry, later the replica manager), then makes the image visible to
//! readers and wakes the callers whose proposals it holds the outcome of. A caller's
//! change is therefore visible locally (logs created, registry updated) when it returns.
//! The loop never waits for the publisher (a topic's logs can take seconds to open, and
//! a loop silent for the session timeout gets its node fenced): it queues images, and
//! reads the broker's failed log directories from flags no log opening holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use raft::prelude::{ConfChangeType, Entry, EntryType, Message, MessageType};
use raft::{RawNode, StateRole};

use super::amnesia;
use super::config::ClusterConfig;
use super::controller::{self, Duty};
use super::features;
use super::image::{MetadataImage, Outcome};
use super::inbox::{Inbound, ReadIndex, node_of, raft_id};
use super::membership::{self, Membership, QuorumStatus, ReplicaStatus};
use super::meta_properties::{self, MetaProperties};
use super::records::{Envelope, MetadataRecord, TopicId};
use super::shared::Shared;
use super::storage::{self, RaftStorage};
use super::transport::Transport;
use super::voter_change::{QuorumRefusal, VoterChange};
use crate::broker::{CLUSTER_METADATA_DIR, WeakBroker};
use crate::error::Result;
use crate::storage::codec;

/// An applied image for the publisher, with the outcomes of this node's proposals.
pub(crate) struct PublishJob {
    pub image: Arc<MetadataImage>,
    pub outcomes: Vec<(u64, Outcome)>,
}

/// A read of the controller's commit index not answered yet.
struct PendingRead {
    reply: crossbeam_channel::Sender<u64>,
    deadline: Instant,
    /// When it was last asked of raft-rs; `None` while no controller is known.
    asked_at: Option<Instant>,
}

/// A proposal not applied yet.
struct Outstanding {
    data: Vec<u8>,
    proposed_at: Option<Instant>,
    deadline: Instant,
}

/// Proposals the loop makes itself, one in flight per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Internal {
    /// This node's registration and readiness.
    Lifecycle,
    /// This node's directory id, recorded once ([`MetadataRecord::RegisterVoterDirectory`]).
    Directory,
    /// This node's replicas that are offline here ([`MetadataRecord::ReplicasOffline`]).
    Offline,
    /// A controller's duty.
    Controller(Duty),
}

/// A proposal not applied after this long is proposed again (it may have been dropped
/// by a leader change; the image applies a proposal at most once).
const REPROPOSE_AFTER: Duration = Duration::from_secs(3);
/// How long the loop's own proposals are retried.
const INTERNAL_DEADLINE: Duration = Duration::from_secs(10);
/// A read of the controller's commit index without an answer after this long is asked
/// again: raft-rs drops one while no leader is known or the leader has committed nothing
/// in its term yet, and a leader change loses those in flight.
const READ_ASK_AGAIN: Duration = Duration::from_millis(300);
/// A broker-only node that has heard from no voter for this long says hello to them
/// again (a voter that restarted, or a new controller, learns its address then).
const ANNOUNCE_AFTER: Duration = Duration::from_secs(2);
/// A voter that knows no cluster id says hello to every voter this often until it has
/// heard from them all that they know none either.
const GREET_EVERY: Duration = Duration::from_millis(500);
/// A learner is added as a voter only if it lags the committed metadata log by at most
/// this many entries.
const CAUGHT_UP_WITHIN: u64 = 64;
/// At most one log line per this long for the peer messages the Raft loop refuses or
/// drops.
const REFUSED_LOG_EVERY: Duration = Duration::from_secs(10);

pub(crate) struct RaftLoop {
    pub raw: RawNode<RaftStorage>,
    pub config: Arc<ClusterConfig>,
    pub shared: Arc<Shared>,
    pub inbox: Receiver<Inbound>,
    pub transport: Transport,
    pub publish: Sender<PublishJob>,
    pub image: Arc<MetadataImage>,
    pub data_dir: PathBuf,
    pub incarnation: u64,
    pub clean_shutdown_epoch: Option<i64>,
    pub meta_props: Option<MetaProperties>,
    /// This data directory's id (`meta.properties`' `directory.id`).
    pub directory_id: String,
    /// The node's broker: which of its replicas are offline (their log directory failed).
    broker: WeakBroker,
    /// The last index of the metadata log at this start: committed entries up to it and
    /// after it are applied (and published) apart.
    log_end_at_start: u64,
    /// The directory had no `meta.properties` at this start: its Raft state may be that
    /// of a voter whose disk was lost ([`amnesia`]).
    fresh: bool,
    /// This node handled a Raft message while it knew of no cluster id: a founder of the
    /// cluster, which [`amnesia::may_vote`] lets vote before its directory id is
    /// recorded.
    founder: bool,
    /// The directory was formatted to join and the quorum has not recorded its id yet
    /// ([`storage::JOINING_FILE`]): it neither votes nor campaigns.
    joining: bool,
    /// Every voter said in a hello of this run that it knows no cluster id, as this
    /// node did: it may found the cluster ([`RaftLoop::awaited_founders`]).
    founding_unanimous: bool,
    /// The voters this node last said it waits for before founding the cluster, and
    /// when it last greeted the voters.
    awaited_logged: Vec<i32>,
    last_greeting: Option<Instant>,
    /// The metadata image of the latest snapshot a peer sent since the last `Ready`
    /// (decoded by the transport): what is installed if raft-rs restores it.
    received_snapshot: Option<Box<MetadataImage>>,
    /// The last scan for replicas offline here and not yet marked in the image.
    offline_scan: OfflineScan,
    /// A refused vote was logged (once per process).
    refusal_logged: bool,
    /// When a peer's message was last refused or dropped with a log line (at most one
    /// per [`REFUSED_LOG_EVERY`]).
    refused_logged_at: Option<Instant>,
    outstanding: BTreeMap<u64, Outstanding>,
    /// Reads of the controller's commit index not answered yet, by context.
    reads: HashMap<Vec<u8>, PendingRead>,
    internal: HashMap<Internal, u64>,
    leader_since: Option<Instant>,
    /// When the controller last checked the leaders' balance.
    last_balance_check: Option<Instant>,
    /// A broker-only node: when it last said hello to the voters.
    last_announce: Option<Instant>,
    /// Nodes unregistered (`UnregisterBroker`) since this process started: the
    /// controller removes them from the learners of the metadata log.
    retired: BTreeSet<i32>,
}

impl RaftLoop {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        raw: RawNode<RaftStorage>,
        config: Arc<ClusterConfig>,
        shared: Arc<Shared>,
        inbox: Receiver<Inbound>,
        transport: Transport,
        publish: Sender<PublishJob>,
        image: MetadataImage,
        data_dir: PathBuf,
        clean_shutdown_epoch: Option<i64>,
        meta_props: Option<MetaProperties>,
        directory_id: String,
        broker: WeakBroker,
    ) -> RaftLoop {
        let incarnation = shared.incarnation;
        let fresh = meta_props.is_none();
        let joining = storage::is_joining(&data_dir.join(CLUSTER_METADATA_DIR));
        transport.set_joining(joining);
        let log_end_at_start = raw.raft.raft_log.last_index();
        RaftLoop {
            raw,
            config,
            shared,
            inbox,
            transport,
            publish,
            image: Arc::new(image),
            data_dir,
            incarnation,
            clean_shutdown_epoch,
            meta_props,
            directory_id,
            broker,
            log_end_at_start,
            fresh,
            founder: false,
            joining,
            founding_unanimous: false,
            awaited_logged: Vec::new(),
            last_greeting: None,
            received_snapshot: None,
            offline_scan: OfflineScan::default(),
            refusal_logged: false,
            refused_logged_at: None,
            outstanding: BTreeMap::new(),
            reads: HashMap::new(),
            internal: HashMap::new(),
            leader_since: None,
            last_balance_check: None,
            last_announce: None,
            retired: BTreeSet::new(),
        }
    }

    fn me(&self) -> i32 {
        self.config.node_id
    }

    /// Runs until stopped or until the node cannot go on (a failed fsync, a foreign
    /// cluster id); the reason is then recorded for callers.
    pub(crate) fn run(mut self) {
        let _ = self.publish.send(PublishJob {
            image: self.image.clone(),
            outcomes: Vec::new(),
        });
        self.share_membership();
        if let Err(e) = self.check_directory() {
            self.shared.fail(e.to_string());
            self.transport.shutdown();
            return;
        }
        let mut next_tick = Instant::now() + self.config.tick;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let first = match self.inbox.recv_timeout(wait) {
                Ok(ev) => Some(ev),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut stop = false;
            let mut next = first;
            let mut handled = 0;
            while let Some(ev) = next.take() {
                if !self.handle(ev) {
                    stop = true;
                }
                handled += 1;
                if handled < 1024 {
                    next = self.inbox.try_recv().ok();
                }
            }
            if stop {
                break;
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + self.config.tick;
                // A directory formatted to join does not campaign (a candidate votes
                // for itself) before it may vote, nor does a voter that may not found
                // the cluster yet; raft-rs's follower ticks do nothing else.
                let awaited = self.awaited_founders();
                self.await_founders(awaited.clone());
                if (!self.joining && awaited.is_empty()) || self.raw.raft.state == StateRole::Leader
                {
                    self.raw.tick();
                    // A voter elected while it knows of no cluster id founds it (the
                    // only voter of a new cluster elects itself without a peer).
                    if !self.founder
                        && self.raw.raft.state == StateRole::Leader
                        && !self.cluster_known()
                    {
                        self.founder = true;
                    }
                }
                self.on_tick();
            }
            if let Err(e) = self.handle_ready() {
                self.shared.fail(e.to_string());
                break;
            }
        }
        self.shared.set_leader(-1);
        self.transport.shutdown();
    }

    /// False to stop.
    fn handle(&mut self, ev: Inbound) -> bool {
        match ev {
            Inbound::Raft(m) => return self.step_peer(m),
            Inbound::Snapshot(m, image) => {
                // raft-rs restores a later snapshot only past an earlier one's index.
                if self
                    .received_snapshot
                    .as_ref()
                    .is_none_or(|r| image.index > r.index)
                {
                    self.received_snapshot = Some(image);
                }
                return self.step_peer(m);
            }
            Inbound::Propose {
                request_id,
                data,
                deadline,
            } => {
                self.outstanding.insert(
                    request_id,
                    Outstanding {
                        data,
                        proposed_at: None,
                        deadline,
                    },
                );
                self.propose_outstanding(request_id);
            }
            Inbound::Unreachable(peer) => self.raw.report_unreachable(peer),
            Inbound::SnapshotStatus(peer, status) => self.raw.report_snapshot(peer, status),
            Inbound::DirectoryLost { known } => {
                let e = meta_properties::lost_directory(
                    &self.data_dir,
                    self.me(),
                    self.is_voter(),
                    &known,
                    &self.directory_id,
                );
                self.shared.fail(e.to_string());
                return false;
            }
            Inbound::ReadIndex(read) => self.read_index(read),
            Inbound::Join(node) => self.add_learner(node),
            Inbound::ChangeVoters(change) => {
                let outcome = self.change_voters(&change);
                let _ = change.reply.send(outcome);
            }
            Inbound::Stop => return false,
        }
        true
    }

    /// Judges and steps peer message `m`; false to stop.
    fn step_peer(&mut self, mut m: Message) -> bool {
        if let Err(e) = self.note_origin() {
            self.shared.fail(e.to_string());
            return false;
        }
        let awaits_founders = !self.awaited_founders().is_empty();
        match amnesia::judge(&m, self.standing(m.from, awaits_founders)) {
            amnesia::Verdict::Step => {}
            amnesia::Verdict::AwaitFounders => {
                tracing::debug!(
                    node = self.me(),
                    from = node_of(m.from),
                    "a vote dropped: this node knows no cluster id and has not heard from every voter that it knows none either"
                );
                return true;
            }
            amnesia::Verdict::RefuseVote => {
                self.log_refused_vote(&m);
                return true;
            }
            amnesia::Verdict::Lost {
                leader,
                acknowledged,
                last,
            } => {
                let e = meta_properties::lost_log(
                    &self.data_dir,
                    self.me(),
                    self.is_voter(),
                    leader,
                    acknowledged,
                    last,
                );
                self.shared.fail(e.to_string());
                return false;
            }
            amnesia::Verdict::Refuse(why) => {
                if self.may_log_refusal() {
                    tracing::error!(
                        node = self.me(),
                        from = node_of(m.from),
                        "node {} sent {why}; refused",
                        node_of(m.from)
                    );
                }
                return true;
            }
            amnesia::Verdict::PeerLost {
                peer,
                acknowledged,
                hint,
            } => {
                if self.may_log_refusal() {
                    tracing::warn!(
                        node = self.me(),
                        peer,
                        acknowledged,
                        hint,
                        "node {peer} acknowledged the metadata log up to index {acknowledged} but now says its log ends at {hint}: its metadata log was lost. It is not sent the log again; it stops on this node's next heartbeat"
                    );
                }
                return true;
            }
            amnesia::Verdict::CapAcknowledgement { peer, index } => {
                if self.may_log_refusal() {
                    tracing::warn!(
                        node = self.me(),
                        peer,
                        "node {peer} joins on a new data directory that the quorum has not recorded as its own: its acknowledgements count toward no commit until it is (if it is a voter whose data directory was lost, remove it from the voters and add it back)"
                    );
                }
                m.index = index;
            }
            amnesia::Verdict::DropJoinerVote { peer } => {
                if self.may_log_refusal() {
                    tracing::warn!(
                        node = self.me(),
                        peer,
                        "node {peer} granted a vote while it joins on a new data directory that the quorum has not recorded as its own: not counted"
                    );
                }
                return true;
            }
        }
        // Only the leader takes a peer's proposal: raft-rs would pass it on from
        // a follower, and the transport takes a forwarded proposal only from its
        // proposer (`transport::refusal`). The proposer proposes it again to the
        // leader it learns of (REPROPOSE_AFTER).
        if m.get_msg_type() == MessageType::MsgPropose && self.raw.raft.state != StateRole::Leader {
            tracing::debug!(
                node = self.me(),
                from = node_of(m.from),
                "a peer's proposal dropped: this node does not lead"
            );
            return true;
        }
        // Nor a peer's read of the commit index: raft-rs would pass it on in the peer's
        // name, which the leader's transport refuses. The peer asks again
        // (READ_ASK_AGAIN), of the leader it learns of.
        if m.get_msg_type() == MessageType::MsgReadIndex && self.raw.raft.state != StateRole::Leader
        {
            tracing::debug!(
                node = self.me(),
                from = node_of(m.from),
                "a peer's read of the commit index dropped: this node does not lead"
            );
            return true;
        }
        if let Err(e) = self.raw.step(m) {
            tracing::debug!(node = self.me(), error = %e, "raft message not stepped");
        }
        true
    }

    /// The controller adds broker-only node `node`, which said hello, to the learners
    /// of the metadata log (one configuration change at a time; the node says hello
    /// again until it is one).
    fn add_learner(&mut self, node: i32) {
        if self.raw.raft.state != StateRole::Leader
            || self.raw.raft.has_pending_conf()
            || self.membership().contains(node)
        {
            return;
        }
        let Some(addr) = self.transport.address_of(node).or_else(|| {
            self.config
                .voters
                .iter()
                .find(|v| v.id == node)
                .map(|v| v.addr.clone())
        }) else {
            return;
        };
        match self.raw.propose_conf_change(
            Vec::new(),
            membership::change(ConfChangeType::AddLearnerNode, node, &addr),
        ) {
            Ok(()) => tracing::info!(
                node = self.me(),
                broker = node,
                "adding a broker-only node to the metadata log's learners"
            ),
            Err(e) => {
                tracing::warn!(node = self.me(), broker = node, error = %e, "cannot add a broker-only node to the learners")
            }
        }
    }

    /// The controller removes an unregistered node from the learners of the metadata
    /// log (one configuration change at a time), so DescribeQuorum no longer lists it as
    /// an observer. A node that registered again since (it was restarted) stays.
    fn remove_retired_learner(&mut self) {
        if self.retired.is_empty() || self.raw.raft.has_pending_conf() {
            return;
        }
        let learners = self.membership().learners;
        let image = self.image.clone();
        self.retired
            .retain(|n| learners.contains(n) && !image.brokers.contains_key(n));
        let Some(&node) = self.retired.iter().next() else {
            return;
        };
        match self.raw.propose_conf_change(
            Vec::new(),
            membership::change(ConfChangeType::RemoveNode, node, ""),
        ) {
            Ok(()) => tracing::info!(
                node = self.me(),
                broker = node,
                "removing an unregistered node from the metadata log's learners"
            ),
            Err(e) => {
                tracing::warn!(node = self.me(), broker = node, error = %e, "cannot remove an unregistered node from the learners")
            }
        }
    }

    /// The controller checks a voter change and proposes it.
    fn change_voters(&mut self, change: &VoterChange) -> std::result::Result<(), QuorumRefusal> {
        let node = change.node;
        if self.raw.raft.state != StateRole::Leader {
            return Err(QuorumRefusal::NotController {
                leader: node_of(self.raw.raft.leader_id),
            });
        }
        if self.raw.raft.has_pending_conf() {
            return Err(QuorumRefusal::ChangeInProgress);
        }
        if let Some(given) = &change.directory_id {
            let known = self.image.directories.get(&node).cloned();
            if known.as_ref() != Some(given) {
                return Err(QuorumRefusal::InvalidVoterKey {
                    node,
                    known,
                    given: given.clone(),
                });
            }
        }
        let m = self.membership();
        let (kind, addr) = if change.add {
            if m.voters.contains(&node) {
                return Err(QuorumRefusal::DuplicateVoter { node });
            }
            if !m.learners.contains(&node) {
                return Err(QuorumRefusal::NotFollowing { node });
            }
            let committed = self.raw.raft.raft_log.committed;
            let matched = self
                .raw
                .raft
                .prs()
                .get(raft_id(node))
                .map_or(0, |p| p.matched);
            let behind = committed.saturating_sub(matched);
            if behind > CAUGHT_UP_WITHIN {
                return Err(QuorumRefusal::NotCaughtUp { node, behind });
            }
            let addr = self.transport.address_of(node).or_else(|| {
                self.config
                    .voters
                    .iter()
                    .find(|v| v.id == node)
                    .map(|v| v.addr.clone())
            });
            (ConfChangeType::AddNode, addr.unwrap_or_default())
        } else {
            if !m.voters.contains(&node) {
                return Err(QuorumRefusal::VoterNotFound { node });
            }
            if m.voters.len() == 1 {
                return Err(QuorumRefusal::LastVoter { node });
            }
            if node == self.me() {
                // The controller does not remove itself: it hands its leadership to
                // the most caught-up other voter, and the caller asks that one.
                let to = m
                    .voters
                    .iter()
                    .filter(|v| **v != node)
                    .max_by_key(|v| {
                        self.raw
                            .raft
                            .prs()
                            .get(raft_id(**v))
                            .map_or(0, |p| p.matched)
                    })
                    .copied()
                    .unwrap_or(-1);
                if to >= 0 {
                    self.raw.transfer_leader(raft_id(to));
                }
                return Err(QuorumRefusal::NotController { leader: to });
            }
            (ConfChangeType::RemoveNode, String::new())
        };
        self.raw
            .propose_conf_change(Vec::new(), membership::change(kind, node, &addr))
            .map_err(|e| QuorumRefusal::Failed {
                reason: format!("the controller cannot propose the change: {e}"),
            })?;
        tracing::info!(
            node = self.me(),
            voter = node,
            add = change.add,
            "proposed a change of the voters"
        );
        Ok(())
    }

    /// Whether this node is a voter of raft-rs's current configuration (as this node
    /// knows it: on an empty directory, the voters of `--quorum`).
    fn is_voter(&self) -> bool {
        self.membership().voters.contains(&self.me())
    }

    /// The voters and learners of raft-rs's current configuration.
    fn membership(&self) -> Membership {
        Membership::of(&self.raw.raft.prs().conf().to_conf_state())
    }

    /// Publishes the membership for [`super::ClusterNode::membership`].
    fn share_membership(&self) {
        // The quorum's state first: a caller that sees the new membership then
        // describes the quorum with it.
        self.share_quorum();
        *self.shared.membership.write() = self.membership();
    }

    /// Publishes the quorum's state for DescribeQuorum: the controller knows each
    /// member's progress; another node only the membership, the leader and the term.
    fn share_quorum(&self) {
        let raft = &self.raw.raft;
        let m = self.membership();
        let leader = raft.state == StateRole::Leader;
        let heard = self.shared.liveness.snapshot();
        let now = Instant::now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let status = |node: &i32| {
            let me = *node == self.me();
            let log_end = if me {
                raft.raft_log.last_index() as i64
            } else if leader {
                raft.prs()
                    .get(raft_id(*node))
                    .map_or(-1, |p| p.matched as i64)
            } else {
                -1
            };
            let last_heard_ms = if me {
                wall
            } else {
                heard
                    .get(node)
                    .map_or(-1, |t| wall - now.duration_since(*t).as_millis() as i64)
            };
            ReplicaStatus {
                node: *node,
                log_end,
                last_heard_ms,
            }
        };
        let addresses = m
            .voters
            .iter()
            .chain(&m.learners)
            .filter_map(|n| {
                self.transport
                    .address_of(*n)
                    .or_else(|| {
                        self.config
                            .voters
                            .iter()
                            .find(|v| v.id == *n)
                            .map(|v| v.addr.clone())
                    })
                    .map(|a| (*n, a))
            })
            .collect();
        *self.shared.quorum.write() = QuorumStatus {
            leader: node_of(raft.leader_id),
            term: raft.term,
            committed: raft.raft_log.committed,
            voters: m.voters.iter().map(status).collect(),
            learners: m.learners.iter().map(status).collect(),
            addresses,
        };
    }

    /// A node that has heard from no peer for [`ANNOUNCE_AFTER`] says hello to every
    /// peer again: a broker-only node not added yet, or a node the quorum removed (or
    /// that came back on a new directory after its removal), is added as a learner by
    /// the controller; for a member the hello changes nothing.
    fn announce(&mut self, now: Instant) {
        if self
            .last_announce
            .is_some_and(|t| now.duration_since(t) < ANNOUNCE_AFTER)
        {
            return;
        }
        let heard = self.shared.liveness.snapshot();
        let quiet = heard
            .values()
            .all(|t| now.duration_since(*t) >= ANNOUNCE_AFTER);
        if quiet {
            self.last_announce = Some(now);
            self.transport.announce();
        }
    }

    fn propose_outstanding(&mut self, id: u64) {
        let Some(o) = self.outstanding.get_mut(&id) else {
            return;
        };
        if self.raw.propose(vec![], o.data.clone()).is_ok() {
            o.proposed_at = Some(Instant::now());
        }
    }

    /// Takes a caller's read of the controller's commit index and asks it of raft-rs.
    fn read_index(&mut self, read: ReadIndex) {
        self.reads.insert(
            read.ctx.clone(),
            PendingRead {
                reply: read.reply,
                deadline: read.deadline,
                asked_at: None,
            },
        );
        self.ask_read(&read.ctx, Instant::now());
    }

    /// Asks raft-rs for the commit index under read context `ctx` (ReadOnlySafe: the
    /// leader confirms with a heartbeat round that it still leads; a follower forwards
    /// the read to the leader), unless no leader is known: raft-rs would drop it.
    fn ask_read(&mut self, ctx: &[u8], now: Instant) {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return;
        }
        let Some(read) = self.reads.get_mut(ctx) else {
            return;
        };
        read.asked_at = Some(now);
        self.raw.read_index(ctx.to_vec());
    }

    /// Forgets the reads whose callers stopped waiting and asks again those not
    /// answered for [`READ_ASK_AGAIN`] (or never asked: no leader was known).
    fn retry_reads(&mut self, now: Instant) {
        self.reads.retain(|_, r| r.deadline > now);
        let due: Vec<Vec<u8>> = self
            .reads
            .iter()
            .filter(|(_, r)| {
                r.asked_at
                    .is_none_or(|t| now.duration_since(t) >= READ_ASK_AGAIN)
            })
            .map(|(ctx, _)| ctx.clone())
            .collect();
        for ctx in due {
            self.ask_read(&ctx, now);
        }
    }

    /// Tells the callers of the read states raft-rs returned the controller's commit
    /// index (a read state of another context, one asked before a restart, is none of
    /// this process's).
    fn answer_reads(&mut self, states: Vec<raft::ReadState>) {
        for rs in states {
            if let Some(read) = self.reads.remove(&rs.request_ctx) {
                let _ = read.reply.send(rs.index);
            }
        }
    }

    fn propose_internal(&mut self, kind: Internal, record: MetadataRecord) {
        if let Some(id) = self.internal.get(&kind)
            && self.outstanding.contains_key(id)
        {
            return;
        }
        let (request_id, data) = self.shared.envelope(record, INTERNAL_DEADLINE);
        self.outstanding.insert(
            request_id,
            Outstanding {
                data,
                proposed_at: None,
                deadline: Instant::now() + INTERNAL_DEADLINE,
            },
        );
        self.internal.insert(kind, request_id);
        self.propose_outstanding(request_id);
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        self.outstanding.retain(|_, o| o.deadline > now);
        let due: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, o)| {
                o.proposed_at
                    .is_none_or(|t| now.duration_since(t) >= REPROPOSE_AFTER)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.propose_outstanding(id);
        }
        self.retry_reads(now);
        let leader = node_of(self.raw.raft.leader_id);
        self.shared.set_leader(leader);
        let is_leader = self.raw.raft.state == StateRole::Leader;
        match (is_leader, self.leader_since) {
            (true, None) => {
                tracing::info!(
                    node = self.me(),
                    term = self.raw.raft.term,
                    "this node is the controller"
                );
                self.leader_since = Some(now);
            }
            (false, Some(_)) => {
                self.leader_since = None;
                self.last_balance_check = None;
            }
            _ => {}
        }
        self.announce(now);
        self.share_quorum();
        self.lifecycle();
        self.register_directory();
        if is_leader {
            self.remove_retired_learner();
            self.controller_duties(now);
        }
    }

    /// Register this process, then ask to be unfenced once caught up.
    fn lifecycle(&mut self) {
        if self.shared.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let me = self.me();
        match self.image.brokers.get(&me) {
            Some(r) if r.incarnation == self.incarnation => {
                self.shared.broker_epoch.store(r.epoch, Ordering::Release);
                let caught_up = self.shared.published.load(Ordering::Acquire) >= r.epoch as u64;
                if r.shut_down || !caught_up {
                    return;
                }
                let (epoch, fenced) = (r.epoch, r.fenced);
                // Its offline replicas are marked before it is unfenced: none of them
                // may be elected in the meantime.
                let offline = self.unreported_offline();
                if !offline.is_empty() {
                    let pending = self
                        .internal
                        .get(&Internal::Offline)
                        .is_some_and(|id| self.outstanding.contains_key(id));
                    if !pending {
                        let names: Vec<String> =
                            offline.iter().map(|(_, t, p)| format!("{t}-{p}")).collect();
                        tracing::warn!(node = me, partitions = ?names, "replicas offline here (their log directory failed): asking the controller to take them out of their ISRs and leaderships");
                    }
                    self.propose_internal(
                        Internal::Offline,
                        MetadataRecord::ReplicasOffline {
                            broker_id: me,
                            broker_epoch: epoch,
                            partitions: offline.into_iter().map(|(id, _, p)| (id, p)).collect(),
                        },
                    );
                } else if fenced {
                    self.propose_internal(
                        Internal::Lifecycle,
                        MetadataRecord::BrokerReady {
                            broker_id: me,
                            broker_epoch: epoch,
                        },
                    );
                }
            }
            _ => {
                let record = MetadataRecord::RegisterBroker {
                    broker_id: me,
                    incarnation: self.incarnation,
                    listener: self.config.advertised_listener.clone(),
                    clean_shutdown_epoch: self.clean_shutdown_epoch,
                    replication_listener: self.config.replication_listener.clone(),
                    endpoints: self.config.endpoints.clone(),
                    rack: self.config.rack.clone(),
                    features: self.config.supported_features.clone(),
                };
                self.propose_internal(Internal::Lifecycle, record);
            }
        }
    }

    /// This node's replicas that are offline here (kept offline at start, or in a log
    /// directory that failed since) and that the image does not mark offline yet, as
    /// `(topic id, topic, partition)`. Empty, and cheap, while every log directory is
    /// usable; scanned again only when the image, what the listeners applied or the
    /// failed directories changed.
    fn unreported_offline(&mut self) -> Vec<(TopicId, String, i32)> {
        let Some(broker) = self.broker.upgrade() else {
            return Vec::new();
        };
        let published = self.shared.published.load(Ordering::Acquire);
        let me = self.me();
        self.offline_scan
            .unreported(&self.image, published, &broker, me)
            .to_vec()
    }

    /// Decides, at the first peer message, whether this node founds the cluster: one
    /// that takes part while it knows of no cluster id does. A directory drawn at this
    /// start whose first peer message comes once the cluster has an id is new to a
    /// cluster that runs (a late voter, or one whose disk was lost): it is marked to
    /// join ([`storage::JOINING_FILE`]) before anything of the cluster's is written to
    /// it, so it neither votes nor campaigns until the quorum records its directory id,
    /// restarts included (its `meta.properties` is written on joining, and a directory
    /// with one is no longer drawn at its start).
    fn note_origin(&mut self) -> Result<()> {
        if self.founder || self.joining {
            return Ok(());
        }
        if !self.cluster_known() {
            self.founder = true;
        } else if self.fresh && !self.recorded() {
            self.set_joining(
                true,
                "started on a new data directory of a cluster that already has an id: marked to join; it does not vote until the quorum has recorded its directory id",
            )?;
        }
        Ok(())
    }

    /// Whether the quorum's applied metadata records this node's directory id as this
    /// directory's.
    fn recorded(&self) -> bool {
        self.image.directories.get(&self.me()) == Some(&self.directory_id)
    }

    /// Marks (or unmarks) the directory as joining ([`storage::JOINING_FILE`]), saying
    /// `why`.
    fn set_joining(&mut self, on: bool, why: &str) -> Result<()> {
        let meta_dir = self.data_dir.join(CLUSTER_METADATA_DIR);
        match on {
            true => storage::mark_joining(&meta_dir)?,
            false => storage::clear_joining(&meta_dir)?,
        }
        self.joining = on;
        self.transport.set_joining(on);
        tracing::info!(node = self.me(), directory_id = %self.directory_id, "{why}");
        Ok(())
    }

    /// Whether this node knows the cluster has an id: from its applied metadata or a
    /// peer's hello.
    fn cluster_known(&self) -> bool {
        self.image.cluster_id.is_some() || self.transport.cluster_presented()
    }

    /// Whether this node knows its cluster's id: from its applied metadata, a peer's
    /// hello, or `meta.properties` (a directory formatted with a cluster id).
    fn knows_cluster_id(&self) -> bool {
        self.cluster_known() || self.shared.cluster_id.read().is_some()
    }

    /// The voters this node waits to hear from before it takes part in an election:
    /// a voter that knows no cluster id founds the cluster only once every voter of its
    /// voter list said in a hello of this run that it knows none either ([`amnesia`]).
    /// Nothing tells a data directory that was lost from a new one; a voter that holds
    /// the cluster's metadata names its id, so while one may be down, the others wait.
    /// Empty once it knows a cluster id (the rules of a directory new to a cluster
    /// that has one apply), once all were heard from, and on a node that is no voter.
    fn awaited_founders(&mut self) -> Vec<i32> {
        if self.founding_unanimous || self.knows_cluster_id() {
            return Vec::new();
        }
        let me = self.me();
        let voters = self.membership().voters;
        if !voters.contains(&me) {
            return Vec::new();
        }
        let awaited: Vec<i32> = voters
            .into_iter()
            .filter(|v| *v != me && !self.transport.heard_without_cluster_id(*v))
            .collect();
        self.founding_unanimous = awaited.is_empty();
        awaited
    }

    /// While `awaited` (voters not heard from) is not empty, says hello to every voter
    /// (each [`GREET_EVERY`]: a voter started later hears it then), and says which
    /// voters it waits for whenever they change.
    fn await_founders(&mut self, awaited: Vec<i32>) {
        if awaited == self.awaited_logged {
            if awaited.is_empty() {
                return;
            }
        } else {
            match (awaited.is_empty(), self.founding_unanimous) {
                (true, true) => tracing::info!(
                    node = self.me(),
                    "every voter said it knows no cluster id either: founding the cluster"
                ),
                (true, false) => tracing::info!(
                    node = self.me(),
                    "a peer named the cluster id: this node no longer waits to found the cluster"
                ),
                (false, _) => tracing::info!(
                    node = self.me(),
                    waiting_for = ?awaited,
                    "this node knows no cluster id (its data directory had no meta.properties at this start, and no peer named one): it founds the cluster with every voter, and waits to hear from voters {awaited:?} that they know none either. A voter that holds the cluster's metadata names its id; a voter whose data directory was lost must not found a new cluster without it. Start every voter (a directory formatted first, tidelog format --initial-controllers, knows its cluster id and does not wait)"
                ),
            }
            self.awaited_logged = awaited.clone();
        }
        if awaited.is_empty() {
            return;
        }
        let now = Instant::now();
        if self
            .last_greeting
            .is_none_or(|at| now.duration_since(at) >= GREET_EVERY)
        {
            self.last_greeting = Some(now);
            self.transport.greet_voters();
        }
    }

    /// Whether a refused peer message may be logged now: at most one per
    /// [`REFUSED_LOG_EVERY`].
    fn may_log_refusal(&mut self) -> bool {
        let now = Instant::now();
        if self
            .refused_logged_at
            .is_some_and(|at| now.duration_since(at) < REFUSED_LOG_EVERY)
        {
            return false;
        }
        self.refused_logged_at = Some(now);
        true
    }

    /// What [`amnesia::judge`] needs to know of this node, for a message from `from` (a
    /// raft id).
    fn standing(&self, from: u64, awaits_founders: bool) -> amnesia::Standing {
        let votes_refused = !amnesia::may_vote(amnesia::Origin {
            fresh: self.fresh,
            founder: self.founder,
            cluster_known: self.cluster_known(),
            recorded: self.recorded(),
            joining: self.joining,
        });
        let peer = node_of(from);
        let sender_joining = self
            .transport
            .joining_directory(peer)
            .is_some_and(|dir| self.image.directories.get(&peer) != Some(&dir));
        amnesia::Standing::of(
            &self.raw.raft,
            from,
            votes_refused,
            sender_joining,
            awaits_founders,
        )
    }

    /// Says once why this node does not vote yet.
    fn log_refused_vote(&mut self, m: &Message) {
        self.shared.refused_vote.store(true, Ordering::Release);
        if self.refusal_logged {
            return;
        }
        self.refusal_logged = true;
        let why = if self.joining {
            "this node's data directory is new to a cluster that already runs (formatted to join with --no-initial-controllers, or first started once the cluster had an id): it does not vote until the quorum has recorded its directory id. Add it as a voter (tidelog quorum add-voter) if it is none; if the quorum counts it as a voter already and its data directory was lost, remove it first (tidelog quorum remove-voter)"
        } else {
            "this voter started on a new data directory of a cluster that already exists: it does not vote until the quorum has recorded its directory id. If its data directory was lost, remove it from the voters and add it back (tidelog quorum remove-voter / add-voter)"
        };
        tracing::warn!(
            node = self.me(),
            candidate = node_of(m.from),
            directory_id = %self.directory_id,
            "{why}"
        );
    }

    /// Records this node's directory id with the quorum once the cluster has an id and
    /// knows none for this node ([`RaftLoop::check_directory`] stops a node it knows by
    /// another one).
    fn register_directory(&mut self) {
        if !self.config.record_directory
            || self.image.cluster_id.is_none()
            || self.image.directories.contains_key(&self.me())
        {
            return;
        }
        let record = MetadataRecord::RegisterVoterDirectory {
            node_id: self.me(),
            directory_id: self.directory_id.clone(),
        };
        self.propose_internal(Internal::Directory, record);
    }

    /// Shares the voters' directory ids of the image with the transport, and fails if
    /// the image knows this node by another directory id than its own: its data
    /// directory was lost, and it must not take part in the quorum as if new.
    fn check_directory(&mut self) -> Result<()> {
        if *self.shared.directories.read() != self.image.directories {
            *self.shared.directories.write() = self.image.directories.clone();
        }
        if self.joining && self.recorded() {
            self.set_joining(
                false,
                "the quorum recorded this node's directory id: it votes from now on if it is a voter",
            )?;
        }
        match self.image.directories.get(&self.me()) {
            Some(known) if *known != self.directory_id => Err(meta_properties::lost_directory(
                &self.data_dir,
                self.me(),
                self.is_voter(),
                known,
                &self.directory_id,
            )),
            _ => Ok(()),
        }
    }

    /// Fails if the cluster finalized a feature level this node does not support: the
    /// controller refuses its registration (as Kafka's refuses a broker's), and it must
    /// not serve with a protocol it does not speak.
    fn check_features(&self) -> Result<()> {
        match features::unsupported_finalized(
            self.me(),
            &self.image.features,
            &self.config.supported_features,
        ) {
            Some((feature, reason)) => Err(crate::error::Error::InvalidConfig {
                key: feature,
                reason: format!(
                    "{reason}: run a version of tidelog that supports it, or downgrade the cluster's level first (tidelog features downgrade)"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The Raft leader's duties that the clock decides ([`controller::duties`]),
    /// proposed one in flight per duty.
    fn controller_duties(&mut self, now: Instant) {
        let last_heard = self.shared.liveness.snapshot();
        let tick = controller::Tick {
            now,
            leader_since: self.leader_since.unwrap_or(now),
            last_heard: &last_heard,
            last_balance_check: self.last_balance_check,
            known_cluster_id: self.meta_props.as_ref().map(|p| p.cluster_id.as_str()),
            fresh_id: codec::random_uuid(),
        };
        let duties = controller::duties(&self.image, &tick, &self.config);
        self.last_balance_check = duties.last_balance_check;
        for (duty, record) in duties.proposals {
            match (&duty, &record) {
                (Duty::Fence(broker), _) => tracing::warn!(
                    node = self.me(),
                    broker,
                    "fencing a broker not heard from for the session timeout"
                ),
                (Duty::Rebalance, MetadataRecord::ElectPreferredLeaders { partitions }) => {
                    tracing::info!(
                        node = self.me(),
                        partitions = partitions.len(),
                        "leaders are imbalanced: moving leaderships back to the preferred replicas"
                    )
                }
                _ => {}
            }
            self.propose_internal(Internal::Controller(duty), record);
        }
    }

    fn send(&self, msgs: Vec<Message>) {
        for m in msgs {
            self.transport.send(m);
        }
    }

    fn handle_ready(&mut self) -> Result<()> {
        // A snapshot raft-rs restores is in the next `Ready`; one it did not is dropped.
        let received = self.received_snapshot.take();
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if !ready.messages().is_empty() {
            self.send(ready.take_messages());
        }
        if !ready.read_states().is_empty() {
            self.answer_reads(ready.take_read_states());
        }
        if !ready.snapshot().is_empty() {
            let snapshot = ready.snapshot().clone();
            let index = snapshot.get_metadata().index;
            let image = match received {
                Some(image) if image.index == index => *image,
                // Every peer's snapshot was decoded by the transport; decoded again
                // only if raft-rs restored another than the latest.
                _ => {
                    let location = format!("snapshot at index {index} from the leader");
                    MetadataImage::decode(&snapshot.data, &location)?
                }
            };
            self.raw.mut_store().apply_snapshot(&snapshot)?;
            tracing::info!(
                node = self.me(),
                index,
                "installed a metadata snapshot from the controller"
            );
            self.adopt_cluster_id(&image)?;
            self.image = Arc::new(image);
            self.check_directory()?;
            self.share_membership();
            self.publish(Vec::new());
        }
        self.apply_apart(ready.take_committed_entries())?;
        self.raw.mut_store().append(ready.entries())?;
        if let Some(hs) = ready.hs() {
            self.raw.mut_store().set_hard_state(hs)?;
        }
        if !ready.persisted_messages().is_empty() {
            self.send(ready.take_persisted_messages());
        }
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit);
        }
        self.send(light.take_messages());
        self.apply_apart(light.take_committed_entries())?;
        self.raw.advance_apply();
        self.maybe_compact()
    }

    fn maybe_compact(&mut self) -> Result<()> {
        let store = self.raw.store();
        let applied = self.image.index;
        if store.entry_count() < self.config.snapshot_after_entries
            || applied <= store.snapshot_ref().get_metadata().index
        {
            return Ok(());
        }
        let bytes = self.image.encode();
        self.raw.mut_store().compact(applied, bytes)?;
        tracing::debug!(
            node = self.me(),
            index = applied,
            "metadata snapshot taken; log compacted"
        );
        Ok(())
    }

    /// Checks (and on first sight records) the cluster id against `meta.properties`.
    fn adopt_cluster_id(&mut self, image: &MetadataImage) -> Result<()> {
        let Some(id) = &image.cluster_id else {
            return Ok(());
        };
        match &self.meta_props {
            Some(p) => meta_properties::check_cluster(&self.data_dir, p, id)?,
            None => {
                let props = MetaProperties {
                    node_id: self.me(),
                    cluster_id: id.clone(),
                    directory_id: Some(self.directory_id.clone()),
                };
                meta_properties::write(&self.data_dir, &props)?;
                tracing::info!(node = self.me(), cluster_id = %id, "joined the cluster; wrote meta.properties");
                self.meta_props = Some(props);
            }
        }
        *self.shared.cluster_id.write() = Some(id.clone());
        Ok(())
    }

    fn apply(&mut self, entries: Vec<Entry>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let me = self.me();
        let had_cluster_id = self.image.cluster_id.is_some();
        let image = Arc::make_mut(&mut self.image);
        let mut outcomes = Vec::new();
        let mut conf_changes = Vec::new();
        for e in entries {
            if e.data.is_empty() || e.get_entry_type() != EntryType::EntryNormal {
                image.index = image.index.max(e.index);
                if !e.data.is_empty()
                    && let Some(cc) = membership::conf_change_of(&e)?
                {
                    conf_changes.push((e.index, cc));
                }
                continue;
            }
            let location = format!("metadata log entry {}", e.index);
            match Envelope::decode(&e.data, &location) {
                Ok(env) => {
                    let outcome = image.apply_envelope(e.index, &env);
                    match &outcome {
                        Ok(_) => tracing::info!(
                            node = me,
                            index = e.index,
                            record = env.record.name(),
                            "applied"
                        ),
                        Err(why) => {
                            tracing::info!(node = me, index = e.index, record = env.record.name(), reason = %why, "rejected")
                        }
                    }
                    // The first application of a request is its outcome. A request
                    // proposed again (REPROPOSE_AFTER) can be committed twice: the
                    // image applies it once (`image::once`), and the copy's rejection
                    // must not overwrite what its proposer is told.
                    // Entries of an earlier incarnation are nobody's request here.
                    if let (MetadataRecord::UnregisterBroker { broker_id }, Ok(_)) =
                        (&env.record, &outcome)
                    {
                        self.retired.insert(*broker_id);
                    }
                    if env.proposer == me && self.outstanding.remove(&env.request_id).is_some() {
                        outcomes.push((env.request_id, outcome));
                    }
                }
                Err(err) => {
                    tracing::error!(node = me, error = %err, "a committed metadata entry does not decode; skipped on every node alike");
                    image.index = e.index;
                }
            }
        }
        for (index, cc) in conf_changes {
            let cs = self.raw.apply_conf_change(&cc).map_err(|e| {
                crate::error::Error::corrupt(
                    format!("metadata log entry {index}"),
                    0,
                    format!("configuration change not applied: {e}"),
                )
            })?;
            let added = membership::added(&cc);
            for node in membership::removed(&cc) {
                // A removed voter may come back on a new data directory (remove, then
                // add): the quorum forgets the directory id it knew it by.
                Arc::make_mut(&mut self.image).directories.remove(&node);
            }
            if let Some((node, addr)) = &added {
                self.transport.note_address(*node, addr);
            }
            self.raw
                .mut_store()
                .set_conf_state(&cs, added.map(|(n, a)| (raft_id(n), a)))?;
            tracing::info!(node = me, index, change = %membership::describe(&cc), voters = ?cs.voters, learners = ?cs.learners, "applied a quorum configuration change");
            self.share_membership();
        }
        if !had_cluster_id && self.image.cluster_id.is_some() {
            let image = self.image.clone();
            self.adopt_cluster_id(&image)?;
        }
        if let Some(r) = self.image.brokers.get(&me)
            && r.incarnation == self.incarnation
        {
            self.shared.broker_epoch.store(r.epoch, Ordering::Release);
        }
        self.check_directory()?;
        self.check_features()?;
        *self.shared.applied.write() = self.image.clone();
        self.publish(outcomes);
        Ok(())
    }

    /// Applies committed `entries`, those up to the log's end at this start apart from
    /// those after it: a listener tells a replica assigned after it (new to this node)
    /// from one an earlier process may have held.
    fn apply_apart(&mut self, mut entries: Vec<Entry>) -> Result<()> {
        match entries.iter().position(|e| e.index > self.log_end_at_start) {
            Some(i) if i > 0 => {
                let after = entries.split_off(i);
                self.apply(entries)?;
                self.apply(after)
            }
            _ => self.apply(entries),
        }
    }

    fn publish(&self, outcomes: Vec<(u64, Outcome)>) {
        let _ = self.publish.send(PublishJob {
            image: self.image.clone(),
            outcomes,
        });
    }
}

/// What [`RaftLoop::unreported_offline`] found, and what it was found from.
#[derive(Default)]
pub(crate) struct OfflineScan {
    /// What the last scan was made from.
    key: Option<ScanKey>,
    found: Vec<(TopicId, String, i32)>,
    /// Scans made (tests).
    pub scans: u64,
}

/// The image index, the index the listeners applied (the broker's topics), and the
/// failed log directories (with why) of an [`OfflineScan`].
#[derive(PartialEq)]
struct ScanKey(u64, u64, Vec<(PathBuf, String)>);

impl OfflineScan {
    /// The replicas of node `me` that `broker` has offline (their log directory
    /// failed) and `image` does not mark offline. Walks the image's topics only when
    /// the image, the index its listeners applied (`published`: the broker's topics)
    /// or the failed directories changed since the last call.
    pub(crate) fn unreported(
        &mut self,
        image: &MetadataImage,
        published: u64,
        broker: &crate::broker::Broker,
        me: i32,
    ) -> &[(TopicId, String, i32)] {
        let failed: Vec<(PathBuf, String)> = broker
            .log_dir_states()
            .into_iter()
            .filter_map(|(dir, why)| why.map(|why| (dir, why)))
            .collect();
        if failed.is_empty() {
            self.key = None;
            self.found.clear();
            return &self.found;
        }
        let key = ScanKey(image.index, published, failed);
        if self.key.as_ref() == Some(&key) {
            return &self.found;
        }
        self.scans += 1;
        self.found.clear();
        for (name, t) in &image.topics {
            if !t
                .partitions
                .iter()
                .any(|p| p.hosts(me) && !p.is_offline(me))
            {
                continue;
            }
            for p in broker.offline_partitions(name).into_keys() {
                let marked = usize::try_from(p)
                    .ok()
                    .and_then(|i| t.partitions.get(i))
                    .is_none_or(|x| !x.hosts(me) || x.is_offline(me));
                if !marked {
                    self.found.push((t.id, name.clone(), p));
                }
            }
        }
        self.key = Some(key);
        &self.found
    }
}

/// Runs `raft_loop` on this thread; a panic in it (raft-rs's `fatal!` on a message it
/// cannot accept, or any bug) fails the node with the panic's message rather than
/// ending the thread silently.
pub(crate) fn run_raft_thread(raft_loop: RaftLoop) {
    let shared = raft_loop.shared.clone();
    fail_on_panic(&shared, "the Raft thread", move || raft_loop.run());
}

/// Runs `f`; a panic in it fails the node with what panicked (`what`) and the panic's
/// message.
fn fail_on_panic(shared: &Shared, what: &str, f: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        shared.fail(format!("{what} panicked: {message}"));
    }
}

/// The publisher thread: listeners, then visibility, then waiting callers. Images
/// queued together are published as one, but never one up to the metadata log's end
/// at this start (`log_end_at_start`) with one after it.
pub(crate) fn publisher_loop(shared: Arc<Shared>, rx: Receiver<PublishJob>, log_end_at_start: u64) {
    let mut previous = Arc::new(MetadataImage::default());
    let mut held = None;
    while let Some(first) = held.take().or_else(|| rx.recv().ok()) {
        let mut image: Arc<MetadataImage> = first.image;
        let mut outcomes = first.outcomes;
        while let Ok(next) = rx.try_recv() {
            if image.index <= log_end_at_start && next.image.index > log_end_at_start {
                held = Some(next);
                break;
            }
            image = next.image;
            outcomes.extend(next.outcomes);
        }
        shared.publish(&previous, &image, outcomes);
        previous = image;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// raft-rs's `fatal!` (a panic) in the Raft thread fails the node with its message:
    /// never a node that looks alive and no longer follows the metadata.
    #[test]
    fn a_panic_of_the_raft_thread_stops_the_node_with_a_clear_error() {
        let shared = Shared::new(1, None);
        fail_on_panic(&shared, "the Raft thread", || {});
        assert!(shared.check_running().is_ok());
        fail_on_panic(&shared, "the Raft thread", || {
            panic!("unable to restore config: {}", "removed all voters")
        });
        let e = shared.check_running().unwrap_err().to_string();
        assert!(
            e.contains("the Raft thread panicked: unable to restore config: removed all voters"),
            "{e}"
        );
        let other = Shared::new(2, None);
        fail_on_panic(&other, "the Raft thread", || std::panic::panic_any(7));
        let e = other.check_running().unwrap_err().to_string();
        assert!(e.contains("a panic without a message"), "{e}");
    }
}
