//! Raft messages between the members of the quorum over TCP: the `--quorum` voters,
//! and the nodes that announced a quorum address of their own (broker-only nodes, the
//! learners; voters added online), whose senders start when raft-rs first sends to them.
//!
//! Each node listens on its own quorum address. For each peer a sender thread keeps one
//! connection, writes the messages raft-rs produces for that peer, reconnects with a
//! backoff (50 ms doubling to 2 s) and drops what it cannot deliver, telling raft-rs the
//! peer is unreachable (Raft retries by itself). Connections are one-way: a node reads
//! on the connections its peers opened and writes on the ones it opened.
//!
//! Frames: `length (u32) | CRC32 of the body (u32) | body`, at most [`MAX_FRAME`] bytes
//! of body. The first frame of a connection is a hello (magic `TLRQ`, version, sender and
//! receiver node ids, the cluster id the sender knows, from version 2 the sender's
//! directory id and the one it knows the receiver by, from version 3 the sender's own
//! quorum address, which a node not among `--quorum` must send); the others are raft-rs messages
//! in their protobuf encoding. A frame that is too large, fails its CRC, does not decode,
//! or names the wrong nodes or another cluster closes the connection with a log line
//! (at most one per peer address per 10 s).
//!
//! With [`QuorumTls`] (`--quorum-security-protocol SSL`) every connection is mutual TLS
//! first: a peer without a certificate of the cluster's CA is refused in the handshake,
//! and one whose certificate does not name the voter its hello claims to be is refused
//! before any of its Raft messages is read (see the `quorum_tls` module).
//!
//! Only what raft-rs sends between nodes, as tidelog drives it, is taken from a peer
//! ([`refusal`]): a message raft-rs makes for its own node (`MsgHup`, `MsgBeat`, ...),
//! one tidelog never sends (a leadership transfer asked of another node), a forwarded
//! proposal that is not the peer's own record (another node's, a configuration change,
//! none, or one with a term), a read of the commit index (the read barrier) or its
//! answer that is not of the peer's own read (resp. the receiver's), or one raft-rs would end its thread
//! on or step as its own node's (no term, a snapshot of a configuration it cannot
//! restore or without the receiver, an append whose entries do not follow its index) is
//! logged as an error naming the peer and closes the connection, unstepped.
//!
//! Directory ids (KIP-853's voter directory ids, `meta.properties`' `directory.id`): a
//! hello from a node whose directory id is not the one the quorum recorded for it (it
//! came back on an empty data directory) is refused, and a node told by a peer that the
//! quorum knows it by another directory id stops ([`Inbound::DirectoryLost`]) before
//! any Raft message is read: a voter that lost its disk never votes as if new.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use parking_lot::{Mutex, RwLock};
use protobuf::Message as _;
use raft::SnapshotStatus;
use raft::prelude::{EntryType, Message, MessageType};

use super::image::MetadataImage;
use super::inbox::{Inbound, MAX_READ_CONTEXT, node_of, raft_id, read_context_node};
use super::liveness::Liveness;
use super::quorum_tls::{self, QuorumTls};
use super::records::Envelope;
use super::voters::Voter;
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::security::peer_log::{PeerLog, peer_warn};
use crate::storage::codec::{Reader, Writer};

/// Largest frame body accepted (a metadata snapshot is the largest message).
pub(crate) const MAX_FRAME: usize = 128 << 20;
const HELLO_MAGIC: &[u8; 4] = b"TLRQ";
/// Hello version written (2 adds the directory ids, 3 a broker's quorum address, 4
/// whether the sender's directory joins; 1 to 3 are still read).
const HELLO_VERSION: u16 = 4;
/// Messages queued for one peer before new ones are dropped.
const QUEUE: usize = 4096;
/// How often blocked reads and waits look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// The longest a peer may take, once connected (and through its TLS handshake), to send
/// its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections read at once beyond two per peer (a peer reconnecting overlaps its old
/// connection for a moment); more are closed as they are accepted.
const SPARE_CONNECTIONS: usize = 8;

/// Reads from `inner` until `deadline`; a read that times out after it fails (a peer that
/// does not say who it is in time is closed, not waited for).
struct Until<'a, R: ?Sized> {
    inner: &'a mut R,
    deadline: Instant,
}

impl<R: Read + ?Sized> Read for Until<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && Instant::now() >= self.deadline =>
            {
                Err(std::io::Error::other(format!(
                    "no hello within {} s",
                    HELLO_TIMEOUT.as_secs()
                )))
            }
            r => r,
        }
    }
}

/// A frame: length, CRC32, body.
pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crate::storage::crc32(body).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The hello frame's body, without directory ids.
#[cfg(test)]
pub(crate) fn hello(from: i32, to: i32, cluster_id: Option<&str>) -> Vec<u8> {
    hello_with_directories(from, to, cluster_id, None, None)
}

/// The hello frame's body: `from_directory` is the sender's directory id, `to_directory`
/// the one the sender's metadata knows the receiver by.
#[cfg(test)]
pub(crate) fn hello_with_directories(
    from: i32,
    to: i32,
    cluster_id: Option<&str>,
    from_directory: Option<&str>,
    to_directory: Option<&str>,
) -> Vec<u8> {
    hello_body(
        from,
        to,
        cluster_id,
        from_directory,
        to_directory,
        None,
        false,
    )
}

/// The hello frame's body; `from_addr` is the quorum address of a sender that is not
/// a voter (a broker-only node asking to follow the metadata log); `joining` whether
/// the sender's directory is new to the cluster and not recorded yet.
pub(crate) fn hello_body(
    from: i32,
    to: i32,
    cluster_id: Option<&str>,
    from_directory: Option<&str>,
    to_directory: Option<&str>,
    from_addr: Option<&str>,
    joining: bool,
) -> Vec<u8> {
    let mut w = Writer::new();
    w.raw(HELLO_MAGIC);
    w.u16(HELLO_VERSION);
    w.i32(from);
    w.i32(to);
    w.str(cluster_id.unwrap_or(""));
    w.str(from_directory.unwrap_or(""));
    w.str(to_directory.unwrap_or(""));
    w.str(from_addr.unwrap_or(""));
    w.u8(u8::from(joining));
    w.into_bytes()
}

/// A decoded hello.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub from: i32,
    pub to: i32,
    pub cluster_id: Option<String>,
    /// The sender's directory id (None from a version 1 hello).
    pub from_directory: Option<String>,
    /// The directory id the sender knows the receiver by, if any.
    pub to_directory: Option<String>,
    /// A broker-only node's quorum address (from version 3; None from a voter).
    pub from_addr: Option<String>,
    /// The sender's directory is new to the cluster and its id not recorded yet (from
    /// version 4; false before): formatted to join, or marked so at its first start.
    pub joining: bool,
}

pub(crate) fn decode_hello(body: &[u8], peer: &str) -> Result<Hello> {
    let location = format!("hello from {peer}");
    let mut r = Reader::new(body, &location);
    if &r.fixed::<4>()? != HELLO_MAGIC {
        return Err(Error::corrupt(
            &location,
            0,
            "not a tidelog quorum connection (bad magic)",
        ));
    }
    let version = r.u16()?;
    if !(1..=HELLO_VERSION).contains(&version) {
        return Err(r.error(format!(
            "quorum protocol version {version}; this node speaks 1 to {HELLO_VERSION}"
        )));
    }
    let from = r.i32()?;
    let to = r.i32()?;
    let some = |s: String| (!s.is_empty()).then_some(s);
    let cluster_id = some(r.str()?);
    let (from_directory, to_directory) = if version >= 2 {
        (some(r.str()?), some(r.str()?))
    } else {
        (None, None)
    };
    let from_addr = if version >= 3 { some(r.str()?) } else { None };
    let joining = version >= 4 && r.u8()? != 0;
    r.finish()?;
    Ok(Hello {
        from,
        to,
        cluster_id,
        from_directory,
        to_directory,
        from_addr,
        joining,
    })
}

/// Reads one frame body; `Ok(None)` at a clean end of stream or when `stop` is raised.
/// Read timeouts (the stream has one of [`POLL`]) only make it look at `stop`.
pub(crate) fn read_frame(
    stream: &mut impl Read,
    stop: &AtomicBool,
    peer: &str,
) -> Result<Option<Vec<u8>>> {
    let mut header = [0u8; 8];
    if !read_full(stream, &mut header, stop, peer, true)? {
        return Ok(None);
    }
    let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
    if len > MAX_FRAME {
        return Err(Error::corrupt(
            format!("connection from {peer}"),
            0,
            format!("frame of {len} bytes is over the {MAX_FRAME}-byte limit"),
        ));
    }
    let mut body = vec![0u8; len];
    if !read_full(stream, &mut body, stop, peer, false)? {
        return Ok(None);
    }
    if crate::storage::crc32(&body) != crc {
        return Err(Error::corrupt(
            format!("connection from {peer}"),
            0,
            "frame CRC32 mismatch",
        ));
    }
    Ok(Some(body))
}

/// Fills `buf`; false at end of stream before the first byte (if `eof_ok`) or on stop.
fn read_full(
    stream: &mut impl Read,
    buf: &mut [u8],
    stop: &AtomicBool,
    peer: &str,
    eof_ok: bool,
) -> Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match stream.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 && eof_ok => return Ok(false),
            // A TLS peer that closes without close_notify, between frames.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && filled == 0 && eof_ok => {
                return Ok(false);
            }
            Ok(0) => {
                return Err(Error::corrupt(
                    format!("connection from {peer}"),
                    filled as u64,
                    "the connection closed in the middle of a frame",
                ));
            }
            Ok(n) => filled += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Acquire) {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read from quorum peer", peer, e)),
        }
    }
    Ok(true)
}

/// Why a Raft message from node `from` is not stepped, if it is not: a peer sends only
/// what raft-rs sends between nodes as tidelog drives it.
pub(crate) fn refusal(msg: &Message, from: i32) -> Option<String> {
    use MessageType::*;
    let t = msg.get_msg_type();
    match t {
        MsgAppend
        | MsgAppendResponse
        | MsgRequestVote
        | MsgRequestVoteResponse
        | MsgRequestPreVote
        | MsgRequestPreVoteResponse
        | MsgSnapshot
        | MsgHeartbeat
        | MsgHeartbeatResponse
        | MsgTimeoutNow => exchange_refusal(msg),
        MsgPropose => proposal_refusal(msg, from),
        MsgHup | MsgBeat | MsgUnreachable | MsgSnapStatus | MsgCheckQuorum => Some(format!(
            "a {t:?}, which raft-rs makes for its own node and never sends to another"
        )),
        MsgTransferLeader => Some(format!(
            "a {t:?}: the controller hands over its leadership itself, no peer asks it to"
        )),
        MsgReadIndex => read_refusal(msg, from),
        MsgReadIndexResp => exchange_refusal(msg).or_else(|| read_refusal(msg, node_of(msg.to))),
    }
}

/// Why a read of the commit index (a follower's, forwarded without a term as a
/// proposal is) or the leader's answer to it is refused, if it is: it carries one read
/// context ([`super::inbox::read_context`]), of node `owner` (the reader: the sender of
/// a read, the receiver of an answer). raft-rs keys the leader's pending reads by
/// context: a peer's read in another node's name would answer (or hold up) that node's.
fn read_refusal(msg: &Message, owner: i32) -> Option<String> {
    let t = msg.get_msg_type();
    if t == MessageType::MsgReadIndex && msg.term != 0 {
        return Some(format!(
            "a {t:?} with term {}; raft-rs forwards reads of the commit index without one",
            msg.term
        ));
    }
    let [e] = msg.get_entries() else {
        return Some(format!(
            "a {t:?} with {} entries; a read carries its context in one",
            msg.entries.len()
        ));
    };
    if e.get_entry_type() != EntryType::EntryNormal || e.data.len() > MAX_READ_CONTEXT {
        return Some(format!(
            "a {t:?} whose entry is no read context ({:?} of {} bytes)",
            e.get_entry_type(),
            e.data.len()
        ));
    }
    match read_context_node(&e.data) {
        Some(node) if node == owner => None,
        Some(node) => Some(format!(
            "a {t:?} of node {node}'s read; a node reads in its own name only"
        )),
        None => Some(format!("a {t:?} whose context is not a tidelog read's")),
    }
}

/// Why a message raft-rs exchanges between nodes is refused, if it is: one raft-rs
/// would step as its own node's (no term), or end its thread on.
fn exchange_refusal(msg: &Message) -> Option<String> {
    let t = msg.get_msg_type();
    if msg.term == 0 {
        // raft-rs steps a message without a term as one of its own node's, without the
        // checks of a peer's: a heartbeat of any commit index would reach its `fatal!`.
        return Some(format!(
            "a {t:?} without a term; raft-rs sets its term on every message it sends to another node but a forwarded proposal"
        ));
    }
    match t {
        MessageType::MsgSnapshot => snapshot_refusal(msg),
        MessageType::MsgAppend => append_refusal(msg),
        _ => None,
    }
}

/// The metadata image that a snapshot from node `from` carries, or why the snapshot is
/// refused: its data must be a metadata image, of the snapshot's index, and of
/// `cluster` (this node's cluster id, else the one the peer presented) when both name
/// one. Decoded here, on the connection's reader thread, once: the Raft loop installs
/// it if raft-rs restores the snapshot. Taken unchecked, data that is no image stopped
/// the node when raft-rs restored it, and an image of another index or cluster would
/// have been installed as this node's metadata.
pub(crate) fn snapshot_image(
    msg: &Message,
    cluster: Option<&str>,
    from: i32,
) -> std::result::Result<MetadataImage, String> {
    let snapshot = msg.get_snapshot();
    let index = snapshot.get_metadata().index;
    let location = format!("snapshot at index {index} from node {from}");
    let image = MetadataImage::decode(&snapshot.data, &location)
        .map_err(|e| format!("a snapshot whose data is no metadata image ({e})"))?;
    if image.index != index {
        return Err(format!(
            "a snapshot of index {index} whose metadata image is of index {}",
            image.index
        ));
    }
    match (cluster, &image.cluster_id) {
        (Some(ours), Some(theirs)) if ours != theirs => Err(format!(
            "a snapshot whose metadata image is of cluster {theirs}, not of this node's cluster {ours}"
        )),
        _ => Ok(image),
    }
}

/// Why a snapshot is refused, if it is: raft-rs sends one of an index and a term (of at
/// most the message's), whose configuration is one it can restore (a voter at least,
/// each member once, no joint configuration: tidelog changes one member at a time) and
/// holds the receiver. raft-rs ends its thread on restoring a configuration it cannot
/// build, and ignores one without the receiver.
fn snapshot_refusal(msg: &Message) -> Option<String> {
    let meta = msg.get_snapshot().get_metadata();
    if meta.index == 0 {
        return Some("a snapshot of index 0; raft-rs sends none empty".into());
    }
    if meta.term == 0 || meta.term > msg.term {
        return Some(format!(
            "a snapshot of term {} in a message of term {}; a snapshot is of a term from 1 to the sender's",
            meta.term, msg.term
        ));
    }
    let cs = meta.get_conf_state();
    if !cs.voters_outgoing.is_empty() || !cs.learners_next.is_empty() || cs.auto_leave {
        return Some(format!(
            "a snapshot of a joint configuration (outgoing voters {:?}, next learners {:?}), which tidelog never makes: it changes one member at a time",
            nodes(&cs.voters_outgoing),
            nodes(&cs.learners_next)
        ));
    }
    if cs.voters.is_empty() {
        return Some(format!(
            "a snapshot whose configuration has no voter (learners {:?})",
            nodes(&cs.learners)
        ));
    }
    let mut seen = BTreeSet::new();
    for id in cs.voters.iter().chain(&cs.learners) {
        if *id == 0 {
            return Some("a snapshot whose configuration names raft-rs's \"none\" id".into());
        }
        if !seen.insert(*id) {
            return Some(format!(
                "a snapshot whose configuration names node {} twice (voters {:?}, learners {:?})",
                node_of(*id),
                nodes(&cs.voters),
                nodes(&cs.learners)
            ));
        }
    }
    if !seen.contains(&msg.to) {
        return Some(format!(
            "a snapshot whose configuration (voters {:?}, learners {:?}) does not hold this node",
            nodes(&cs.voters),
            nodes(&cs.learners)
        ));
    }
    None
}

/// Why an append is refused, if it is: raft-rs sends the entries that follow the
/// message's index one by one (it takes their place in the log from the first one's
/// index), and a log's terms never go down nor pass its leader's.
fn append_refusal(msg: &Message) -> Option<String> {
    let mut term = msg.log_term;
    if term == 0 && msg.index != 0 {
        // raft-rs reads the term of an index past its log as 0: such an append "matches"
        // there, and the commit index it carries ends raft-rs's thread.
        return Some(format!(
            "an append after index {} of term 0; only index 0 has no term",
            msg.index
        ));
    }
    if term > msg.term {
        return Some(format!(
            "an append after an entry of term {term} in a message of term {}",
            msg.term
        ));
    }
    for (i, e) in msg.entries.iter().enumerate() {
        let expected = msg.index.checked_add(i as u64 + 1);
        if Some(e.index) != expected {
            return Some(format!(
                "an append after index {} whose entry {i} has index {}: its entries follow that index one by one",
                msg.index, e.index
            ));
        }
        if e.term == 0 || e.term < term || e.term > msg.term {
            return Some(format!(
                "an append whose entry at index {} has term {} after term {term}, in a message of term {}: a log's terms go from 1 up to its leader's",
                e.index, e.term, msg.term
            ));
        }
        term = e.term;
    }
    None
}

/// The node ids of raft-rs ids.
fn nodes(ids: &[u64]) -> Vec<i32> {
    ids.iter().map(|id| node_of(*id)).collect()
}

/// Why a forwarded proposal from node `from` is refused, if it is: raft-rs forwards a
/// follower's proposal to the leader without a term, and tidelog proposes only records
/// in envelopes naming their proposer (configuration changes only on the controller
/// itself, which forwards none), so a peer forwards its own records only.
fn proposal_refusal(msg: &Message, from: i32) -> Option<String> {
    if msg.term != 0 {
        return Some(format!(
            "a proposal with term {}; raft-rs forwards proposals without one",
            msg.term
        ));
    }
    if msg.entries.is_empty() {
        return Some("a proposal without entries".into());
    }
    for (i, e) in msg.entries.iter().enumerate() {
        if e.get_entry_type() != EntryType::EntryNormal {
            return Some(format!(
                "a proposal of a configuration change ({:?}), which only the controller proposes, on itself",
                e.get_entry_type()
            ));
        }
        match Envelope::decode(&e.data, &format!("entry {i} of a forwarded proposal")) {
            Ok(env) if env.proposer == from => {}
            Ok(env) => {
                return Some(format!(
                    "a proposal of a {} record in node {}'s name; a node forwards only its own",
                    env.record.name(),
                    env.proposer
                ));
            }
            Err(e) => return Some(format!("a proposal that does not decode: {e}")),
        }
    }
    None
}

/// The cluster ids a node's hellos are checked against and carry.
#[derive(Clone)]
struct HelloIds {
    /// This node's cluster id, once its metadata names one.
    ours: ClusterIdCell,
    /// While it names none: the id the voters that connected here presented, which
    /// this node's own hellos carry so that those voters accept it (a node that joins
    /// with an empty directory learns the id from the metadata only through them).
    claimed: ClusterIdCell,
    /// This node's directory id and the ones the quorum recorded.
    directories: DirectoryIds,
    /// A broker-only node's own quorum address, announced in its hellos.
    announce: Option<String>,
    /// This node's directory joins ([`Hello::joining`]), as its hellos say.
    joining: Arc<AtomicBool>,
    /// The peers whose latest hello said their directory joins, with the directory id
    /// it named ("" for none).
    joiners: JoinerCell,
    /// The peers whose latest hello in this run named no cluster id: they know none
    /// either (a voter that knows none founds a cluster only with all of them).
    without_cluster_id: Arc<RwLock<BTreeSet<i32>>>,
}

/// Peers that joins, by node id, with their directory ids.
type JoinerCell = Arc<RwLock<BTreeMap<i32, String>>>;

/// A node's directory id and the voters' directory ids its metadata recorded.
#[derive(Clone)]
struct DirectoryIds {
    /// This node's (`meta.properties`' `directory.id`).
    mine: String,
    /// The image's `directories`, kept current by the Raft loop.
    known: DirectoryCell,
}

/// What a node's hellos carry and are checked against, as the node shares it.
pub(crate) struct QuorumIds {
    /// The cluster id, once the metadata names one.
    pub cluster_id: ClusterIdCell,
    /// This node's directory id (`meta.properties`' `directory.id`).
    pub directory_id: String,
    /// The voters' directory ids the applied metadata recorded.
    pub directories: DirectoryCell,
}

/// The voters' directory ids by node id, shared with the node.
pub(crate) type DirectoryCell = Arc<RwLock<BTreeMap<i32, String>>>;

impl HelloIds {
    /// Once this node knows its cluster id, a hello must carry the same one: without
    /// it, or with another, the connection is refused. Before, any is accepted and
    /// remembered as the one to present. A broker-only node that joins on an empty
    /// directory knows none yet: it learns it from the metadata log it is sent.
    fn check(&self, hello: &Hello, peer: &str) -> Result<()> {
        let ours = self.ours.read().clone();
        match (&hello.cluster_id, ours) {
            (None, Some(_))
                if hello.from_addr.is_some()
                    && !self.directories.known.read().contains_key(&hello.from) =>
            {
                Ok(())
            }
            (Some(theirs), Some(ours)) if *theirs != ours => Err(Error::InvalidConfig {
                key: "cluster.id".into(),
                reason: format!(
                    "node {} at {peer} belongs to cluster {theirs}, this node to cluster {ours}",
                    hello.from
                ),
            }),
            (None, Some(ours)) => Err(Error::InvalidConfig {
                key: "cluster.id".into(),
                reason: format!(
                    "{peer} says it is node {} but names no cluster id; this node belongs to cluster {ours} and takes Raft messages only from its members",
                    hello.from
                ),
            }),
            (Some(theirs), None) => {
                *self.claimed.write() = Some(theirs.clone());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The directory id `hello`'s sender knows this node by, when it is not this
    /// node's own: this node's data directory was lost (or replaced).
    fn lost_directory(&self, hello: &Hello) -> Option<String> {
        hello
            .to_directory
            .clone()
            .filter(|known| *known != self.directories.mine)
    }

    /// A hello whose sender's directory id is not the one the quorum recorded for it
    /// (the sender came back on an empty data directory) is refused.
    fn check_directory(&self, hello: &Hello, peer: &str) -> Result<()> {
        let known = self.directories.known.read().get(&hello.from).cloned();
        match (known, &hello.from_directory) {
            (Some(known), Some(theirs)) if known != *theirs => Err(Error::InvalidConfig {
                key: "directory.id".into(),
                reason: format!(
                    "node {} at {peer} presents directory id {theirs}, but the quorum knows node {} by directory id {known}: its data directory was lost, and it takes no part in the quorum until the directory is restored",
                    hello.from, hello.from
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The hello this node sends to `to`.
    fn hello_to(&self, me: i32, to: i32) -> Vec<u8> {
        let cluster_id = self.to_send();
        let known = self.directories.known.read().get(&to).cloned();
        hello_body(
            me,
            to,
            cluster_id.as_deref(),
            Some(&self.directories.mine),
            known.as_deref(),
            self.announce.as_deref(),
            self.joining.load(Ordering::Acquire),
        )
    }

    /// Notes whether the sender of `hello`, accepted, joins.
    fn note_joining(&self, hello: &Hello) {
        let mut joiners = self.joiners.write();
        match hello.joining {
            true => {
                let dir = hello.from_directory.clone().unwrap_or_default();
                joiners.insert(hello.from, dir);
            }
            false => {
                joiners.remove(&hello.from);
            }
        }
    }

    /// Notes whether the sender of `hello`, accepted, knows no cluster id.
    fn note_cluster_id(&self, hello: &Hello) {
        let mut without = self.without_cluster_id.write();
        match hello.cluster_id {
            None => without.insert(hello.from),
            Some(_) => without.remove(&hello.from),
        };
    }

    /// The cluster id this node's hellos carry.
    fn to_send(&self) -> Option<String> {
        self.ours
            .read()
            .clone()
            .or_else(|| self.claimed.read().clone())
    }
}

/// The known cluster id, shared with the node (None until the first `InitCluster`).
pub(crate) type ClusterIdCell = Arc<RwLock<Option<String>>>;

struct Peer {
    queue: Sender<Message>,
}

/// The quorum addresses of broker-only nodes, by node id, as their hellos announced
/// them (not persisted: a broker announces itself again when it hears from no voter).
pub(crate) type BrokerAddrs = Arc<RwLock<BTreeMap<i32, String>>>;

/// What a sender thread needs besides its peer.
#[derive(Clone)]
struct SenderCtx {
    inbox: Sender<Inbound>,
    ids: HelloIds,
    tls: Option<Arc<QuorumTls>>,
    stop: Arc<AtomicBool>,
    brokers: BrokerAddrs,
}

/// The running transport of one node.
pub(crate) struct Transport {
    me: i32,
    /// A sender per voter, and per broker-only node once it announced itself.
    peers: Mutex<HashMap<u64, Peer>>,
    ctx: SenderCtx,
    voters: Vec<i32>,
    inbox: Sender<Inbound>,
    stop: Arc<AtomicBool>,
    local: SocketAddr,
    threads: Mutex<Vec<JoinHandle<()>>>,
    readers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("me", &self.me)
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Starts the accept thread on `listener` and a sender thread per peer; with `tls`,
    /// every connection is mutual TLS. `announce` is a broker-only node's own quorum
    /// address, which its hellos carry.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        me: i32,
        voters: &[Voter],
        listener: TcpListener,
        inbox: Sender<Inbound>,
        liveness: Arc<Liveness>,
        ids: QuorumIds,
        tls: Option<Arc<QuorumTls>>,
        announce: Option<String>,
    ) -> Result<Transport> {
        let local = listener
            .local_addr()
            .ctx("address of quorum listener", "quorum")?;
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        let ids = HelloIds {
            ours: ids.cluster_id,
            claimed: Arc::new(RwLock::new(None)),
            directories: DirectoryIds {
                mine: ids.directory_id,
                known: ids.directories,
            },
            announce,
            joining: Arc::new(AtomicBool::new(false)),
            joiners: JoinerCell::default(),
            without_cluster_id: Default::default(),
        };
        let brokers = BrokerAddrs::default();
        {
            let accepting = Accepting {
                me,
                voters: voters.to_vec(),
                brokers: brokers.clone(),
                inbox: inbox.clone(),
                liveness,
                ids: ids.clone(),
                stop: stop.clone(),
                tls: tls.clone(),
                log: PeerLog::default(),
            };
            let readers = readers.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("quorum-accept-{me}"))
                    .spawn(move || accept_loop(Arc::new(accepting), listener, readers))
                    .ctx("spawn the quorum accept thread for", local.to_string())?,
            );
        }
        let transport = Transport {
            me,
            peers: Mutex::new(HashMap::new()),
            ctx: SenderCtx {
                inbox: inbox.clone(),
                ids,
                tls,
                stop: stop.clone(),
                brokers,
            },
            voters: voters.iter().map(|v| v.id).collect(),
            inbox,
            stop,
            local,
            threads: Mutex::new(threads),
            readers,
        };
        for v in voters.iter().filter(|v| v.id != me) {
            transport.spawn_sender(v.clone())?;
        }
        Ok(transport)
    }

    /// Starts the sender thread of `peer`.
    fn spawn_sender(&self, peer: Voter) -> Result<()> {
        let me = self.me;
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let ctx = self.ctx.clone();
        let (id, addr) = (peer.id, peer.addr.clone());
        let handle = std::thread::Builder::new()
            .name(format!("quorum-send-{me}-to-{id}"))
            .spawn(move || sender_loop(me, peer, rx, ctx))
            .ctx("spawn a quorum sender thread for", addr)?;
        self.threads.lock().push(handle);
        self.peers.lock().insert(raft_id(id), Peer { queue: tx });
        Ok(())
    }

    /// A hello to every peer (sent again on a new connection): the voters learn this
    /// node's quorum address, and the controller adds it to the metadata log's learners
    /// if it is no member.
    pub(crate) fn announce(&self) {
        if self.ctx.ids.announce.is_none() {
            return;
        }
        for peer in self.peers.lock().values() {
            // A message to raft id 0 only makes the sender reconnect (and say hello).
            let _ = peer.queue.try_send(Message::default());
        }
    }

    /// A hello to every voter of `--quorum` (a new connection to each): a voter that
    /// knows no cluster id tells the others so until it has heard from them all.
    pub(crate) fn greet_voters(&self) {
        let peers = self.peers.lock();
        for v in &self.voters {
            if let Some(peer) = peers.get(&raft_id(*v)) {
                // A message to raft id 0 only makes the sender reconnect (and say hello).
                let _ = peer.queue.try_send(Message::default());
            }
        }
    }

    /// Whether `node`'s latest hello in this run named no cluster id.
    pub(crate) fn heard_without_cluster_id(&self, node: i32) -> bool {
        self.ctx.ids.without_cluster_id.read().contains(&node)
    }

    /// Notes the quorum address of a node that is not among `--quorum`'s voters (from
    /// a configuration change that added it).
    pub(crate) fn note_address(&self, node: i32, addr: &str) {
        if self.voters.contains(&node) || node == self.me {
            return;
        }
        let known = self.ctx.brokers.read().get(&node).cloned();
        if known.as_deref() != Some(addr) {
            self.ctx.brokers.write().insert(node, addr.to_string());
        }
    }

    /// Whether a voter that connected here presented a cluster id (the cluster exists,
    /// though this node's metadata may not name it yet).
    pub(crate) fn cluster_presented(&self) -> bool {
        self.ctx.ids.claimed.read().is_some()
    }

    /// Says in this node's hellos whether its directory joins ([`Hello::joining`]); a
    /// connection made with the other answer is made again.
    pub(crate) fn set_joining(&self, joining: bool) {
        self.ctx.ids.joining.store(joining, Ordering::Release);
    }

    /// The directory id `node`'s latest hello named if it said its directory joins.
    pub(crate) fn joining_directory(&self, node: i32) -> Option<String> {
        self.ctx.ids.joiners.read().get(&node).cloned()
    }

    /// The quorum address of `node` as this node knows it: its `--quorum` entry, or the
    /// one it announced.
    pub(crate) fn address_of(&self, node: i32) -> Option<String> {
        self.ctx.brokers.read().get(&node).cloned()
    }

    /// Queues `msg` for its peer; a full queue drops it and reports the peer unreachable.
    pub(crate) fn send(&self, msg: Message) {
        let to = msg.to;
        let queue = {
            let mut peers = self.peers.lock();
            if !peers.contains_key(&to) {
                let node = node_of(to);
                let known = self.ctx.brokers.read().get(&node).cloned();
                drop(peers);
                match known {
                    Some(addr) => {
                        if let Err(e) = self.spawn_sender(Voter { id: node, addr }) {
                            tracing::error!(node = self.me, peer = node, error = %e, "cannot start a quorum sender");
                            return;
                        }
                    }
                    None => {
                        tracing::debug!(
                            node = self.me,
                            peer = node,
                            "raft message for a node whose quorum address is not known yet dropped"
                        );
                        let _ = self.inbox.try_send(Inbound::Unreachable(to));
                        return;
                    }
                }
                peers = self.peers.lock();
            }
            peers.get(&to).expect("inserted above").queue.clone()
        };
        let snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
        match queue.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let _ = self.inbox.try_send(Inbound::Unreachable(to));
                if snapshot {
                    let _ = self
                        .inbox
                        .try_send(Inbound::SnapshotStatus(to, SnapshotStatus::Failure));
                }
            }
        }
    }

    /// Stops every thread and closes every connection.
    pub(crate) fn shutdown(&mut self) {
        if self.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        self.peers.lock().clear();
        // Wake the accept thread.
        let _ = TcpStream::connect_timeout(&self.local, CONNECT_TIMEOUT);
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        for t in self.readers.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What the accept thread and the readers it spawns share.
struct Accepting {
    me: i32,
    voters: Vec<Voter>,
    /// Broker-only nodes' quorum addresses, noted from their hellos.
    brokers: BrokerAddrs,
    inbox: Sender<Inbound>,
    liveness: Arc<Liveness>,
    ids: HelloIds,
    stop: Arc<AtomicBool>,
    tls: Option<Arc<QuorumTls>>,
    /// Refused connections, logged at most once per peer address per 10 s.
    log: PeerLog,
}

fn accept_loop(a: Arc<Accepting>, listener: TcpListener, readers: Arc<Mutex<Vec<JoinHandle<()>>>>) {
    let me = a.me;
    for stream in listener.incoming() {
        if a.stop.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(node = me, error = %e, "quorum listener cannot accept a connection");
                std::thread::sleep(POLL);
                continue;
            }
        };
        let peer = match stream.peer_addr() {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(node = me, error = %e, "a quorum connection closed as it was accepted");
                continue;
            }
        };
        let limit = 2 * (a.voters.len() + a.brokers.read().len()) + SPARE_CONNECTIONS;
        let open = {
            let mut r = readers.lock();
            r.retain(|h| !h.is_finished());
            r.len()
        };
        if open >= limit {
            peer_warn!(
                a.log,
                peer,
                node = me,
                open,
                "closing a quorum connection: {limit} are open already (two per voter and {SPARE_CONNECTIONS} spare)"
            );
            continue;
        }
        let a = a.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("quorum-read-{me}"))
            .spawn(move || {
                if let Err(e) = read_loop(&a, stream, peer) {
                    peer_warn!(a.log, peer, node = a.me, error = %e, "closing a quorum connection");
                }
            });
        match spawned {
            Ok(handle) => {
                let mut r = readers.lock();
                r.retain(|h| !h.is_finished());
                r.push(handle);
            }
            Err(e) => tracing::error!(node = me, error = %e, "cannot spawn a quorum reader thread"),
        }
    }
}

fn read_loop(a: &Accepting, stream: TcpStream, peer_addr: SocketAddr) -> Result<()> {
    let (me, voters, stop) = (a.me, &a.voters, &*a.stop);
    let peer = &peer_addr.to_string();
    stream
        .set_read_timeout(Some(POLL))
        .ctx("set read timeout on", peer)?;
    let (mut stream, certificate): (Box<dyn Read + Send>, _) = match &a.tls {
        None => (Box::new(stream), None),
        Some(tls) => {
            let (stream, cert, subject) = tls
                .accept(stream, POLL)
                .map_err(|e| Error::io("TLS handshake with quorum peer", peer, e))?;
            (stream, Some((cert, subject)))
        }
    };
    let mut first = Until {
        inner: &mut *stream,
        deadline: Instant::now() + HELLO_TIMEOUT,
    };
    let Some(body) = read_frame(&mut first, stop, peer)? else {
        return Ok(());
    };
    let hello = decode_hello(&body, peer)?;
    if hello.to != me {
        return Err(Error::InvalidConfig {
            key: "controller.quorum.voters".into(),
            reason: format!(
                "{peer} (node {}) connected to node {} at this address, but this is node {me}: the --quorum lists differ",
                hello.from, hello.to
            ),
        });
    }
    let voter = match (voters.iter().find(|v| v.id == hello.from), &hello.from_addr) {
        (Some(v), _) if v.id != me => v.clone(),
        // A broker-only node (never one of the voters) at the address it announces.
        (None, Some(addr)) if hello.from >= 0 => Voter {
            id: hello.from,
            addr: addr.clone(),
        },
        _ => {
            return Err(Error::InvalidConfig {
                key: "controller.quorum.voters".into(),
                reason: format!(
                    "{peer} says it is node {}, which is not another voter of {:?}{}",
                    hello.from,
                    voters.iter().map(|v| v.id).collect::<Vec<_>>(),
                    if hello.from_addr.is_none() {
                        " and announces no quorum address"
                    } else {
                        ""
                    }
                ),
            });
        }
    };
    if let Some((cert, subject)) = &certificate {
        quorum_tls::check_peer(cert, subject, &voter, peer)?;
    }
    a.ids.check(&hello, peer)?;
    if let Some(known) = a.ids.lost_directory(&hello) {
        let _ = a.inbox.send(Inbound::DirectoryLost {
            known: known.clone(),
        });
        return Err(Error::InvalidConfig {
            key: "directory.id".into(),
            reason: format!(
                "node {} at {peer} knows this node {me} by directory id {known}, not by this data directory's: it was lost",
                hello.from
            ),
        });
    }
    a.ids.check_directory(&hello, peer)?;
    a.ids.note_joining(&hello);
    a.ids.note_cluster_id(&hello);
    if let Some(addr) = &hello.from_addr {
        let known = a.brokers.read().get(&hello.from).cloned();
        let listed = voters.iter().any(|v| v.id == hello.from);
        if !listed && known.as_deref() != Some(addr.as_str()) {
            tracing::info!(node = me, broker = hello.from, addr = %addr, "a broker-only node announced its quorum address");
            a.brokers.write().insert(hello.from, addr.clone());
        }
        let _ = a.inbox.send(Inbound::Join(hello.from));
    }
    let from_raft = raft_id(hello.from);
    let to_raft = raft_id(me);
    while let Some(body) = read_frame(&mut stream, stop, peer)? {
        let msg = Message::parse_from_bytes(&body).map_err(|e| {
            Error::corrupt(
                format!("connection from node {} at {peer}", hello.from),
                0,
                format!("not a raft message: {e}"),
            )
        })?;
        if msg.from != from_raft || msg.to != to_raft {
            return Err(Error::corrupt(
                format!("connection from node {} at {peer}", hello.from),
                0,
                format!(
                    "a raft message from raft id {} to {} on the connection from raft id {from_raft} to {to_raft}",
                    msg.from, msg.to
                ),
            ));
        }
        let checked = match refusal(&msg, hello.from) {
            Some(why) => Err(why),
            None if msg.get_msg_type() == MessageType::MsgSnapshot => {
                let cluster = a.ids.ours.read().clone().or(hello.cluster_id.clone());
                snapshot_image(&msg, cluster.as_deref(), hello.from).map(|i| Some(Box::new(i)))
            }
            None => Ok(None),
        };
        let image = match checked {
            Ok(image) => image,
            Err(why) => {
                if a.log.admit(peer_addr.ip(), Instant::now()).is_some() {
                    tracing::error!(
                    node = me,
                    from = hello.from,
                    peer = %peer_addr,
                    "node {} at {peer} sent {why}; refused, and its connection closed",
                    hello.from
                    );
                }
                return Ok(());
            }
        };
        a.liveness.heard(hello.from);
        let inbound = match image {
            Some(image) => Inbound::Snapshot(msg, image),
            None => Inbound::Raft(msg),
        };
        if a.inbox.send(inbound).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// A connection to a peer, plaintext or TLS.
type Conn = BufWriter<Box<dyn Write + Send>>;

fn connect(me: i32, peer: &Voter, ids: &HelloIds, tls: Option<&QuorumTls>) -> Result<Conn> {
    tracing::debug!(node = me, peer = peer.id, addr = %peer.addr, "connecting to a quorum peer");
    let addrs: Vec<SocketAddr> = peer
        .addr
        .to_socket_addrs()
        .ctx("resolve quorum address", peer.addr.clone())?
        .collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                s.set_nodelay(true)
                    .ctx("set TCP_NODELAY on", peer.addr.clone())?;
                s.set_write_timeout(Some(WRITE_TIMEOUT))
                    .ctx("set write timeout on", peer.addr.clone())?;
                let s: Box<dyn Write + Send> = match tls {
                    None => Box::new(s),
                    Some(tls) => tls.connect(s, peer)?,
                };
                let mut w = BufWriter::with_capacity(64 << 10, s);
                w.write_all(&frame(&ids.hello_to(me, peer.id)))
                    .ctx("send hello to", peer.addr.clone())?;
                return Ok(w);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(Error::io(
        "connect to quorum peer",
        peer.addr.clone(),
        last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address")),
    ))
}

fn sender_loop(me: i32, mut peer: Voter, rx: Receiver<Message>, ctx: SenderCtx) {
    let SenderCtx {
        inbox,
        ids,
        tls,
        stop,
        brokers,
    } = ctx;
    let peer_raft = raft_id(peer.id);
    let mut conn: Option<Conn> = None;
    let mut backoff = BACKOFF_MIN;
    let mut retry_at = Instant::now();
    let mut reported_down = false;
    let mut presented_joining = ids.joining.load(Ordering::Acquire);
    let fail = |batch: &[Message]| {
        let _ = inbox.try_send(Inbound::Unreachable(peer_raft));
        if batch
            .iter()
            .any(|m| m.get_msg_type() == MessageType::MsgSnapshot)
        {
            let _ = inbox.try_send(Inbound::SnapshotStatus(peer_raft, SnapshotStatus::Failure));
        }
    };
    loop {
        let first = match rx.recv_timeout(POLL) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        while batch.len() < 256 {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        if stop.load(Ordering::Acquire) {
            return;
        }
        // Messages to raft id 0 ask for a new connection (a broker's hello again).
        let before = batch.len();
        batch.retain(|m| m.to != 0);
        if batch.len() < before {
            conn = None;
            retry_at = Instant::now().min(retry_at);
        }
        // A connection's hello said whether this node joins: made again once that
        // changed.
        let joining = ids.joining.load(Ordering::Acquire);
        if presented_joining != joining {
            conn = None;
            presented_joining = joining;
        }
        // A broker-only node that restarted may have announced another address.
        if let Some(addr) = brokers.read().get(&peer.id)
            && *addr != peer.addr
        {
            peer.addr = addr.clone();
            conn = None;
        }
        if conn.is_none() {
            if Instant::now() < retry_at {
                fail(&batch);
                continue;
            }
            match connect(me, &peer, &ids, tls.as_deref()) {
                Ok(c) => {
                    if reported_down {
                        tracing::info!(node = me, peer = peer.id, addr = %peer.addr, "quorum peer reachable again");
                    }
                    reported_down = false;
                    backoff = BACKOFF_MIN;
                    conn = Some(c);
                }
                Err(e) => {
                    if !reported_down {
                        tracing::warn!(node = me, peer = peer.id, error = %e, "quorum peer unreachable; retrying with backoff");
                        reported_down = true;
                    }
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    fail(&batch);
                    continue;
                }
            }
        }
        let w = conn.as_mut().expect("connected above");
        let mut result = Ok(());
        for m in &batch {
            let body = match m.write_to_bytes() {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(node = me, peer = peer.id, error = %e, "cannot encode a raft message; dropped");
                    continue;
                }
            };
            if body.len() > MAX_FRAME {
                tracing::error!(
                    node = me,
                    peer = peer.id,
                    bytes = body.len(),
                    "raft message over the frame limit; dropped"
                );
                continue;
            }
            result = w.write_all(&frame(&body));
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() {
            result = w.flush();
        }
        match result {
            Ok(()) => {
                if batch
                    .iter()
                    .any(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                {
                    let _ =
                        inbox.try_send(Inbound::SnapshotStatus(peer_raft, SnapshotStatus::Finish));
                }
            }
            Err(e) => {
                tracing::warn!(node = me, peer = peer.id, error = %e, "quorum connection lost; reconnecting");
                reported_down = true;
                conn = None;
                retry_at = Instant::now();
                fail(&batch);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Option<Vec<u8>>> {
        let stop = AtomicBool::new(false);
        read_frame(&mut &bytes[..], &stop, "test peer")
    }

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let f = frame(b"hello");
        assert_eq!(read(&f).unwrap(), Some(b"hello".to_vec()));
        assert_eq!(read(&[]).unwrap(), None);
        let mut bad = f.clone();
        bad[9] ^= 1;
        assert!(read(&bad).unwrap_err().to_string().contains("CRC"));
        assert!(
            read(&f[..f.len() - 1])
                .unwrap_err()
                .to_string()
                .contains("middle of a frame")
        );
        let mut huge = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        huge.extend_from_slice(&[0; 4]);
        assert!(read(&huge).unwrap_err().to_string().contains("limit"));
    }

    #[test]
    fn a_peer_silent_past_the_hello_deadline_is_an_error() {
        struct Silent;
        impl Read for Silent {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::WouldBlock.into())
            }
        }
        let stop = AtomicBool::new(false);
        let mut late = Until {
            inner: &mut Silent,
            deadline: Instant::now(),
        };
        let err = read_frame(&mut late, &stop, "test peer").unwrap_err();
        assert!(err.to_string().contains("no hello within"), "{err}");
        // Before the deadline a timeout only looks at the stop flag.
        stop.store(true, Ordering::Release);
        let mut early = Until {
            inner: &mut Silent,
            deadline: Instant::now() + Duration::from_secs(60),
        };
        assert_eq!(read_frame(&mut early, &stop, "test peer").unwrap(), None);
    }

    #[test]
    fn hellos_round_trip_and_strangers_are_refused() {
        let h = decode_hello(&hello(1, 2, Some("abc")), "p").unwrap();
        assert_eq!(
            h,
            Hello {
                from: 1,
                to: 2,
                cluster_id: Some("abc".into()),
                from_directory: None,
                to_directory: None,
                from_addr: None,
                joining: false,
            }
        );
        let h = decode_hello(
            &hello_with_directories(1, 2, None, Some("d1"), Some("d2")),
            "p",
        )
        .unwrap();
        assert_eq!(
            (h.from_directory.as_deref(), h.to_directory.as_deref()),
            (Some("d1"), Some("d2"))
        );
        // A version 1 hello (before directory ids) is still read.
        let mut v1 = Writer::new();
        v1.raw(HELLO_MAGIC);
        v1.u16(1);
        v1.i32(1);
        v1.i32(2);
        v1.str("abc");
        let h = decode_hello(&v1.into_bytes(), "p").unwrap();
        assert_eq!(
            (h.cluster_id.as_deref(), h.from_directory),
            (Some("abc"), None)
        );
        assert_eq!(
            decode_hello(&hello(1, 2, None), "p").unwrap().cluster_id,
            None
        );
        assert!(
            decode_hello(b"GET / HTTP/1.1\r\n", "p")
                .unwrap_err()
                .is_corruption()
        );
        let mut v2 = hello(1, 2, None);
        v2[5] = 9;
        assert!(decode_hello(&v2, "p").is_err());
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;
    use crate::cluster::records::MetadataRecord;
    use raft::prelude::Entry;

    fn of(t: MessageType) -> Message {
        let mut m = Message::default();
        m.set_msg_type(t);
        m
    }

    /// A message of `t` from node 2 to node 1 in term 3.
    fn termed(t: MessageType) -> Message {
        let mut m = of(t);
        m.term = 3;
        m.from = raft_id(2);
        m.to = raft_id(1);
        m
    }

    /// A snapshot to node 1 at index 10 of term 2, of voters 1 to 3.
    fn snapshot() -> Message {
        let mut m = termed(MessageType::MsgSnapshot);
        let meta = m.mut_snapshot().mut_metadata();
        meta.index = 10;
        meta.term = 2;
        meta.mut_conf_state().voters = vec![raft_id(1), raft_id(2), raft_id(3)];
        m
    }

    /// An append after index 4 of term 1, of entries of `terms` from index 5 on.
    fn append(terms: &[u64]) -> Message {
        let mut m = termed(MessageType::MsgAppend);
        m.index = 4;
        m.log_term = 1;
        m.entries = terms
            .iter()
            .enumerate()
            .map(|(i, t)| Entry {
                index: 5 + i as u64,
                term: *t,
                ..Default::default()
            })
            .collect::<Vec<_>>()
            .into();
        m
    }

    /// A forwarded proposal of one normal entry: an envelope proposed by `proposer`.
    fn proposal(proposer: i32) -> Message {
        let mut m = of(MessageType::MsgPropose);
        let data = Envelope {
            proposer,
            request_id: 1,
            stamp: None,
            record: MetadataRecord::UnregisterBroker { broker_id: 9 },
        }
        .encode();
        let e = Entry {
            data: data.into(),
            ..Default::default()
        };
        m.entries = vec![e].into();
        m
    }

    #[test]
    fn only_messages_raft_rs_sends_between_nodes_are_taken() {
        use MessageType::*;
        for t in [
            MsgAppend,
            MsgAppendResponse,
            MsgRequestVote,
            MsgRequestVoteResponse,
            MsgRequestPreVote,
            MsgRequestPreVoteResponse,
            MsgHeartbeat,
            MsgHeartbeatResponse,
            MsgTimeoutNow,
        ] {
            assert_eq!(refusal(&termed(t), 2), None, "{t:?}");
            // Without a term raft-rs would step it as its own node's.
            let why = refusal(&of(t), 2).unwrap_or_else(|| panic!("{t:?} without a term taken"));
            assert!(why.contains("without a term"), "{why}");
        }
        assert_eq!(refusal(&snapshot(), 2), None);
        for t in [
            MsgHup,
            MsgBeat,
            MsgUnreachable,
            MsgSnapStatus,
            MsgCheckQuorum,
            MsgTransferLeader,
            MsgReadIndex,
            MsgReadIndexResp,
        ] {
            let why = refusal(&of(t), 2).unwrap_or_else(|| panic!("{t:?} taken"));
            assert!(why.contains(&format!("{t:?}")), "{why}");
        }
    }

    /// A read of the commit index of `t` (a forwarded read, or its answer) carrying
    /// `ctx`.
    fn read(t: MessageType, ctx: Vec<u8>) -> Message {
        let mut m = match t {
            MessageType::MsgReadIndex => of(t),
            _ => termed(t),
        };
        m.from = raft_id(2);
        m.to = raft_id(1);
        m.entries = vec![Entry {
            data: ctx.into(),
            ..Default::default()
        }]
        .into();
        m
    }

    /// A node reads the controller's commit index in its own name (the read barrier):
    /// its forwarded read, and the answer to it, each carry one context of the reader's.
    #[test]
    fn a_read_of_the_commit_index_is_taken_in_its_readers_name_only() {
        use crate::cluster::inbox::read_context;
        use MessageType::*;
        let ours = |node| read_context(node, 7, 1);
        // Node 2's read, forwarded to node 1; node 2's answer to node 1's read.
        assert_eq!(refusal(&read(MsgReadIndex, ours(2)), 2), None);
        assert_eq!(refusal(&read(MsgReadIndexResp, ours(1)), 2), None);
        let refused = |m: &Message, what: &str| {
            let why = refusal(m, 2).unwrap_or_else(|| panic!("{what}: taken"));
            assert!(why.contains(what), "{why}");
        };
        refused(&read(MsgReadIndex, ours(3)), "node 3's read");
        refused(&read(MsgReadIndexResp, ours(3)), "node 3's read");
        refused(&read(MsgReadIndex, vec![1; 20 + 1]), "not a tidelog read's");
        refused(&read(MsgReadIndex, vec![0; 65]), "no read context");
        let mut termed_read = read(MsgReadIndex, ours(2));
        termed_read.term = 3;
        refused(&termed_read, "with term 3");
        let mut answer_without_term = read(MsgReadIndexResp, ours(1));
        answer_without_term.term = 0;
        refused(&answer_without_term, "without a term");
        let mut two = read(MsgReadIndex, ours(2));
        two.entries.push(Entry::default());
        refused(&two, "with 2 entries");
        let mut conf = read(MsgReadIndex, ours(2));
        conf.entries[0].set_entry_type(EntryType::EntryConfChange);
        refused(&conf, "no read context");
    }

    #[test]
    fn a_snapshot_raft_rs_cannot_restore_is_refused() {
        let refused = |change: &dyn Fn(&mut Message), what: &str| {
            let mut m = snapshot();
            change(&mut m);
            let why = refusal(&m, 2).unwrap_or_else(|| panic!("{what}: taken"));
            assert!(why.contains(what), "{why}");
        };
        let conf = |m: &mut Message| m.mut_snapshot().mut_metadata().mut_conf_state().clone();
        let set_conf = |m: &mut Message, cs: raft::prelude::ConfState| {
            m.mut_snapshot().mut_metadata().set_conf_state(cs)
        };
        // The receiver as the only learner, no voter: raft-rs ends its thread on it.
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.voters = vec![];
                cs.learners = vec![raft_id(1)];
                set_conf(m, cs);
            },
            "has no voter (learners [1])",
        );
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.voters = vec![raft_id(2), raft_id(3)];
                set_conf(m, cs);
            },
            "does not hold this node",
        );
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.learners = vec![raft_id(3)];
                set_conf(m, cs);
            },
            "names node 3 twice",
        );
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.voters.push(0);
                set_conf(m, cs);
            },
            "\"none\" id",
        );
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.voters_outgoing = vec![raft_id(4)];
                set_conf(m, cs);
            },
            "joint configuration (outgoing voters [4]",
        );
        refused(
            &|m| {
                let mut cs = conf(m);
                cs.auto_leave = true;
                set_conf(m, cs);
            },
            "joint configuration",
        );
        refused(&|m| m.mut_snapshot().mut_metadata().index = 0, "index 0");
        refused(
            &|m| m.mut_snapshot().mut_metadata().term = 4,
            "term 4 in a message of term 3",
        );
        refused(
            &|m| m.mut_snapshot().mut_metadata().term = 0,
            "term 0 in a message of term 3",
        );
        // The receiver as a learner of a configuration with voters is taken.
        let mut learner = snapshot();
        let mut cs = conf(&mut learner);
        cs.voters = vec![raft_id(2), raft_id(3)];
        cs.learners = vec![raft_id(1)];
        set_conf(&mut learner, cs);
        assert_eq!(refusal(&learner, 2), None);
    }

    #[test]
    fn an_append_whose_entries_do_not_follow_its_index_is_refused() {
        assert_eq!(refusal(&append(&[]), 2), None);
        assert_eq!(refusal(&append(&[1, 2, 2, 3]), 2), None);
        let mut gap = append(&[1, 2, 3]);
        gap.entries[1].index = 9;
        let why = refusal(&gap, 2).unwrap();
        assert!(why.contains("entry 1 has index 9"), "{why}");
        let mut late = append(&[1]);
        late.entries[0].index = 4;
        assert!(refusal(&late, 2).unwrap().contains("entry 0 has index 4"));
        let mut wrapping = append(&[1]);
        wrapping.index = u64::MAX;
        assert!(refusal(&wrapping, 2).is_some());
        for (terms, what) in [
            (&[2, 1][..], "index 6 has term 1 after term 2"),
            (&[0][..], "index 5 has term 0"),
            (&[4][..], "term 4 after term 1, in a message of term 3"),
        ] {
            let why = refusal(&append(terms), 2).unwrap();
            assert!(why.contains(what), "{terms:?}: {why}");
        }
        let mut past = append(&[]);
        past.log_term = 0;
        assert!(refusal(&past, 2).unwrap().contains("index 4 of term 0"));
        let mut first = append(&[1]);
        (first.index, first.log_term) = (0, 0);
        first.entries[0].index = 1;
        assert_eq!(refusal(&first, 2), None);
        let mut before = append(&[]);
        before.log_term = 5;
        assert!(refusal(&before, 2).unwrap().contains("entry of term 5"));
    }

    #[test]
    fn a_forwarded_proposal_is_the_peers_own_record() {
        assert_eq!(refusal(&proposal(2), 2), None);
        let why = refusal(&proposal(3), 2).unwrap();
        assert!(why.contains("node 3's name"), "{why}");
        assert!(
            refusal(&of(MessageType::MsgPropose), 2)
                .unwrap()
                .contains("without entries")
        );
        let mut termed = proposal(2);
        termed.term = 4;
        assert!(refusal(&termed, 2).unwrap().contains("term 4"));
        let mut change = proposal(2);
        change.entries[0].set_entry_type(EntryType::EntryConfChangeV2);
        assert!(
            refusal(&change, 2)
                .unwrap()
                .contains("configuration change")
        );
        let mut garbage = proposal(2);
        garbage.entries[0].data = vec![9u8; 3].into();
        assert!(refusal(&garbage, 2).unwrap().contains("does not decode"));
    }
}

#[cfg(test)]
mod directory_tests {
    use super::*;

    /// Node 1's hello checks, which knows node 2 by directory "d2" and itself is "d1".
    fn node_1() -> HelloIds {
        HelloIds {
            ours: Arc::new(RwLock::new(Some("c".into()))),
            claimed: Arc::new(RwLock::new(None)),
            announce: None,
            joining: Arc::new(AtomicBool::new(false)),
            joiners: JoinerCell::default(),
            without_cluster_id: Default::default(),
            directories: DirectoryIds {
                mine: "d1".into(),
                known: Arc::new(RwLock::new(BTreeMap::from([
                    (1, "d1".to_string()),
                    (2, "d2".to_string()),
                ]))),
            },
        }
    }

    fn from_2(from_directory: Option<&str>, to_directory: Option<&str>) -> Hello {
        decode_hello(
            &hello_with_directories(2, 1, Some("c"), from_directory, to_directory),
            "p",
        )
        .unwrap()
    }

    #[test]
    fn a_peer_with_another_directory_id_is_refused() {
        let ids = node_1();
        ids.check_directory(&from_2(Some("d2"), Some("d1")), "p")
            .unwrap();
        // An older peer (no directory id) and a node the quorum knows none for pass.
        ids.check_directory(&from_2(None, None), "p").unwrap();
        ids.directories.known.write().remove(&2);
        ids.check_directory(&from_2(Some("new"), None), "p")
            .unwrap();
        ids.directories.known.write().insert(2, "d2".into());
        let e = ids
            .check_directory(&from_2(Some("new"), Some("d1")), "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node 2") && e.contains("d2") && e.contains("lost"),
            "{e}"
        );
    }

    #[test]
    fn a_peer_that_knows_this_node_by_another_directory_id_says_so() {
        let ids = node_1();
        assert_eq!(ids.lost_directory(&from_2(Some("d2"), Some("d1"))), None);
        assert_eq!(ids.lost_directory(&from_2(Some("d2"), None)), None);
        assert_eq!(
            ids.lost_directory(&from_2(Some("d2"), Some("old"))),
            Some("old".to_string())
        );
        // The hello node 1 sends names both directory ids.
        let sent = decode_hello(&ids.hello_to(1, 2), "p").unwrap();
        assert_eq!(
            (sent.from_directory.as_deref(), sent.to_directory.as_deref()),
            (Some("d1"), Some("d2"))
        );
    }

    /// A peer whose latest hello named no cluster id is noted as knowing none, until a
    /// later hello names one.
    #[test]
    fn a_peer_that_names_no_cluster_id_is_noted() {
        let receiver = node_1();
        let anonymous = decode_hello(&hello(2, 1, None), "p").unwrap();
        receiver.note_cluster_id(&anonymous);
        assert!(receiver.without_cluster_id.read().contains(&2));
        receiver.note_cluster_id(&from_2(None, None));
        assert!(!receiver.without_cluster_id.read().contains(&2));
    }

    /// A hello says whether its sender's directory joins; the receiver notes it per
    /// peer, with the directory id named, until a later hello says otherwise.
    #[test]
    fn a_joiners_hello_says_so_and_is_noted() {
        let ids = node_1();
        let sent = decode_hello(&ids.hello_to(1, 2), "p").unwrap();
        assert!(!sent.joining);
        ids.joining.store(true, Ordering::Release);
        let sent = decode_hello(&ids.hello_to(1, 2), "p").unwrap();
        assert!(sent.joining);
        let receiver = node_1();
        let mut from_2 = from_2(Some("new"), None);
        from_2.joining = true;
        receiver.note_joining(&from_2);
        assert_eq!(
            receiver.joiners.read().get(&2).map(String::as_str),
            Some("new")
        );
        from_2.joining = false;
        receiver.note_joining(&from_2);
        assert_eq!(receiver.joiners.read().get(&2), None);
        // A version 3 hello (before the flag) is read as not joining.
        let mut v3 = Writer::new();
        v3.raw(HELLO_MAGIC);
        v3.u16(3);
        v3.i32(2);
        v3.i32(1);
        for s in ["c", "d2", "", ""] {
            v3.str(s);
        }
        assert!(!decode_hello(&v3.into_bytes(), "p").unwrap().joining);
    }
}
