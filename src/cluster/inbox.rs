//! What the Raft loop is told by the other threads ([`Inbound`]), and the mapping
//! between Kafka node ids and raft-rs ids that the loop and the transport share.

use std::time::Instant;

use crossbeam_channel::Sender;
use raft::SnapshotStatus;
use raft::prelude::Message;

use super::image::MetadataImage;

/// raft-rs ids start at 1 (0 means "none"); Kafka node ids at 0.
pub(crate) fn raft_id(node: i32) -> u64 {
    node as u64 + 1
}

/// The node id of a raft-rs id (-1 for raft-rs's "none").
pub(crate) fn node_of(raft: u64) -> i32 {
    (raft as i64 - 1) as i32
}

/// The longest context of a read of the controller's commit index (raft-rs's
/// `read_index`) a peer may send: a [`read_context`] is 20 bytes.
pub(crate) const MAX_READ_CONTEXT: usize = 64;

/// The context of read `request` of node `node`'s process `incarnation`: unique in the
/// cluster (the controller keeps one pending read per context), and naming its node
/// first, which the transport checks against the peer that sends or receives it.
pub(crate) fn read_context(node: i32, incarnation: u64, request: u64) -> Vec<u8> {
    let mut ctx = Vec::with_capacity(20);
    ctx.extend_from_slice(&node.to_be_bytes());
    ctx.extend_from_slice(&incarnation.to_be_bytes());
    ctx.extend_from_slice(&request.to_be_bytes());
    ctx
}

/// The node whose read a context is ([`read_context`]), if it is one.
pub(crate) fn read_context_node(ctx: &[u8]) -> Option<i32> {
    let node: [u8; 4] = ctx.get(..4)?.try_into().ok()?;
    (ctx.len() == 20).then(|| i32::from_be_bytes(node))
}

/// A caller's read of the controller's commit index (a read barrier on the metadata
/// log, [`super::ClusterNode::read_barrier`]).
pub(crate) struct ReadIndex {
    /// The read's context ([`read_context`]).
    pub ctx: Vec<u8>,
    /// Told the controller's commit index once the controller confirmed it still leads.
    pub reply: Sender<u64>,
    /// When the caller stops waiting: the loop forgets the read then.
    pub deadline: Instant,
}

/// What the loop is told by the other threads.
pub(crate) enum Inbound {
    /// A message from a peer.
    Raft(Message),
    /// A snapshot from a peer, with the metadata image its data holds (decoded and
    /// checked by the connection's reader, `transport::snapshot_image`).
    Snapshot(Message, Box<MetadataImage>),
    /// A record to propose, by a caller waiting for its outcome.
    Propose {
        /// Matches the outcome to the waiting caller.
        request_id: u64,
        /// The encoded envelope.
        data: Vec<u8>,
        /// When the caller stops waiting.
        deadline: Instant,
    },
    /// A message to that raft peer could not be delivered.
    Unreachable(u64),
    /// A snapshot to that raft peer was delivered or not.
    SnapshotStatus(u64, SnapshotStatus),
    /// A peer knows this node by directory id `known`, not by its own: its data
    /// directory was lost, and the loop stops without voting.
    DirectoryLost {
        /// The directory id the quorum recorded for this node.
        known: String,
    },
    /// A broker-only node said hello: the controller adds it to the metadata log's
    /// learners if it is not one yet.
    Join(i32),
    /// Read the controller's commit index.
    ReadIndex(ReadIndex),
    /// Add or remove a voter (on the controller).
    ChangeVoters(super::voter_change::VoterChange),
    /// Stop the loop.
    Stop,
}
