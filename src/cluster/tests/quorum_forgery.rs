//! The quorum port against forged messages: a hello without the cluster id is refused
//! once the node knows it; a message raft-rs never sends between nodes, or a forwarded
//! proposal that is not the peer's own record, is refused; a message raft-rs would end
//! its thread on (a snapshot whose configuration has no voter) is refused too; and one
//! that says this node lost its log stops it with a clear error instead of leaving it
//! looking alive and no longer following the metadata.

use std::io::Write;
use std::net::TcpStream;

use protobuf::Message as _;
use raft::prelude::{ConfChangeType, Entry, EntryType, Message, MessageType};

use super::replication::{create, part};
use super::*;
use crate::cluster::inbox::raft_id;
use crate::cluster::membership;
use crate::cluster::records::{Envelope, Stamp};
use crate::cluster::transport::{frame, hello};
use crate::security::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};

const CALL: Duration = Duration::from_secs(10);

/// Connects to node index `i`'s quorum port as another voter with `cluster_id` and
/// sends a heartbeat of a far higher term whose commit index no log has.
fn forge(c: &TestCluster, i: usize, cluster_id: Option<&str>) -> TcpStream {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m.term = 1 << 30;
    m.commit = 1 << 40;
    forge_to(c, i, cluster_id, m)
}

/// Connects to node index `i`'s quorum port as another voter with `cluster_id` and
/// sends `m` from it.
fn forge_to(c: &TestCluster, i: usize, cluster_id: Option<&str>, mut m: Message) -> TcpStream {
    let (me, from) = (i as i32 + 1, (i as i32 + 1) % 3 + 1);
    let mut s = TcpStream::connect(c.addrs[i]).unwrap();
    s.write_all(&frame(&hello(from, me, cluster_id))).unwrap();
    m.from = raft_id(from);
    m.to = raft_id(me);
    s.write_all(&frame(&m.write_to_bytes().unwrap())).unwrap();
    s
}

pub(super) fn acl(name: &str) -> MetadataRecord {
    MetadataRecord::CreateAcls {
        bindings: vec![AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }],
    }
}

#[test]
fn a_hello_without_the_cluster_id_is_refused() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let _forged = forge(&c, 0, None);
    std::thread::sleep(Duration::from_millis(500));
    c.node(0).propose(acl("after"), CALL).unwrap();
    assert!(c.node(0).check_running().is_ok());
    c.shutdown();
}

/// A hello naming another cluster's id is refused before any Raft message on its
/// connection is read: the forged heartbeat after it (of a commit index no log has,
/// which would stop the node as one whose log was lost) never reaches the Raft loop.
#[test]
fn a_hello_of_another_cluster_is_refused() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let ours = c.node(0).image().cluster_id.clone().expect("a cluster id");
    let theirs = format!("{ours}-other");
    let forged = forge(&c, 0, Some(&theirs));
    assert!(closed_by_peer(&forged), "the connection was not closed");
    c.node(0).propose(acl("after"), CALL).unwrap();
    c.node(0).check_running().unwrap();
    assert_eq!(c.node(0).image().cluster_id, Some(ours));
    c.shutdown();
}

/// Messages raft-rs would end its thread on (a snapshot whose configuration has no
/// voter, a heartbeat without a term of a commit index no log has) or that break its log
/// (an append whose entries skip indexes) are refused at the quorum port: the connection
/// is closed, and the node goes on leading and following the metadata.
#[test]
fn messages_raft_rs_would_end_its_thread_on_are_refused_and_the_node_goes_on() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "t", 3, vec![]);
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    let f = (l + 1) % 3;
    wait_until("the controller leads a partition", || {
        (0..3).any(|p| part(&c, l, "t", p).leader_epoch().is_some())
    });
    let id = c.node(0).image().cluster_id.clone().expect("a cluster id");
    // A snapshot of a higher term whose configuration has the receiver as its only
    // learner and no voter: raft-rs ends its thread on restoring it.
    let mut snapshot = Message::default();
    snapshot.set_msg_type(MessageType::MsgSnapshot);
    snapshot.term = 1 << 30;
    let meta = snapshot.mut_snapshot().mut_metadata();
    meta.index = 1 << 40;
    meta.term = 1 << 30;
    meta.mut_conf_state().learners = vec![raft_id(l as i32 + 1)];
    // A heartbeat without a term, which raft-rs steps as its own node's: the commit
    // index its log lacks ends its thread.
    let mut heartbeat = Message::default();
    heartbeat.set_msg_type(MessageType::MsgHeartbeat);
    heartbeat.commit = 1 << 40;
    // An append of a higher term whose entries skip indexes: raft-rs slices its entries
    // by the first one's index.
    let mut gap = Message::default();
    gap.set_msg_type(MessageType::MsgAppend);
    gap.term = 1 << 30;
    gap.entries = [1u64, 9]
        .map(|index| Entry {
            index,
            term: 1 << 30,
            ..Default::default()
        })
        .to_vec()
        .into();
    // An append of a higher term after an index past the log, of term 0: raft-rs reads
    // the term of an index past its log as 0, takes it as matching, and ends its thread
    // on the commit index.
    let mut past = Message::default();
    past.set_msg_type(MessageType::MsgAppend);
    past.term = 1 << 30;
    past.index = 1 << 40;
    past.commit = 1 << 40;
    for (i, what, m) in [
        (f, "an append after an index past the log", past),
        (l, "a snapshot without a voter", snapshot),
        (f, "a heartbeat without a term", heartbeat.clone()),
        (l, "a heartbeat without a term", heartbeat),
        (f, "an append whose entries skip indexes", gap),
    ] {
        let s = forge_to(&c, i, Some(&id), m);
        assert!(
            closed_by_peer(&s),
            "{what} to node {} was not refused",
            i + 1
        );
    }
    for i in [l, f] {
        assert!(c.node(i).check_running().is_ok(), "node {} failed", i + 1);
    }
    // It still leads, and proposals are applied.
    c.node(f).propose(acl("after"), CALL).unwrap();
    assert_eq!(c.node(f).controller_id(), Some(l as i32 + 1));
    assert!((0..3).any(|p| part(&c, l, "t", p).leader_epoch().is_some()));
    c.shutdown();
}

/// A forged acknowledgement, in the controller's term, of an index past its log is
/// refused: raft-rs would take it as the follower's progress and send that follower
/// appends after an index past its log, which it cannot take (before, it ended its
/// thread on their commit index), so the follower would no longer follow the metadata.
#[test]
fn an_acknowledgement_past_the_leaders_log_is_refused() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let id = c.node(0).image().cluster_id.clone().expect("a cluster id");
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    // forge_to speaks as the node of index (l + 1) % 3.
    let f = (l + 1) % 3;
    let mut ack = Message::default();
    ack.set_msg_type(MessageType::MsgAppendResponse);
    ack.term = c.node(l).quorum_status().term;
    ack.index = 1 << 40;
    let _forged = forge_to(&c, l, Some(&id), ack);
    std::thread::sleep(Duration::from_millis(500));
    let status = c.node(l).quorum_status();
    assert!(
        status.voters.iter().all(|v| v.log_end < 1 << 40),
        "the controller took the forged progress: {status:?}"
    );
    // The follower still follows the metadata.
    c.node(l).propose(acl("after"), CALL).unwrap();
    wait_until("the follower applied the proposal", || {
        c.node(f)
            .image()
            .acls
            .iter()
            .any(|b| b.resource_name == "after")
    });
    for i in 0..3 {
        assert!(c.node(i).check_running().is_ok(), "node {} failed", i + 1);
    }
    c.shutdown();
}

/// Whether node `s`'s peer closed the connection within [`CALL`] (it refused what was
/// sent on it).
fn closed_by_peer(s: &TcpStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(CALL)).unwrap();
    match (&*s).read(&mut [0u8; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// A proposal as raft-rs forwards it, of one entry of `entry_type` holding `data`.
fn proposal(entry_type: EntryType, data: Vec<u8>) -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgPropose);
    let mut e = Entry::default();
    e.set_entry_type(entry_type);
    e.data = data.into();
    m.entries = vec![e].into();
    m
}

/// A peer forwards proposals (raft-rs sends a follower's to the leader), but only its
/// own records: one in another node's name, a configuration change (only the controller
/// proposes them, on itself) and a message raft-rs steps only on the node that makes it
/// are refused, the connection closed, and nothing is appended.
#[test]
fn a_peer_forwards_only_its_own_records_and_no_local_message() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let id = c.node(0).image().cluster_id.clone().expect("a cluster id");
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    // forge_to speaks as node (l + 1) % 3 + 1; the record claims the third node.
    let from = (l as i32 + 1) % 3 + 1;
    let other = (1..=3).find(|n| *n != from && *n != l as i32 + 1).unwrap();
    let forged = |proposer: i32, name: &str| Envelope {
        proposer,
        request_id: 1 << 50,
        stamp: Some(Stamp {
            incarnation: 7,
            issued_ms: 0,
            expires_ms: u64::MAX / 2,
        }),
        record: acl(name),
    };
    let voters_before = c.node(l).membership().voters;
    let mut forgeries = vec![
        (
            "a record in another node's name",
            proposal(EntryType::EntryNormal, forged(other, "forged").encode()),
        ),
        (
            "a configuration change",
            proposal(
                EntryType::EntryConfChangeV2,
                membership::change(ConfChangeType::RemoveNode, other, "")
                    .write_to_bytes()
                    .unwrap(),
            ),
        ),
    ];
    // Its own record, with a term: raft-rs forwards proposals without one (a follower
    // would end its thread forwarding one with a term).
    let mut with_term = proposal(EntryType::EntryNormal, forged(from, "termed").encode());
    with_term.term = 1;
    forgeries.push(("a proposal with a term", with_term));
    for t in [
        MessageType::MsgHup,
        MessageType::MsgBeat,
        MessageType::MsgCheckQuorum,
        MessageType::MsgUnreachable,
        MessageType::MsgSnapStatus,
        MessageType::MsgTransferLeader,
        MessageType::MsgReadIndex,
    ] {
        let mut m = Message::default();
        m.set_msg_type(t);
        forgeries.push(("a local message", m));
    }
    for (what, m) in forgeries {
        let kind = m.get_msg_type();
        let s = forge_to(&c, l, Some(&id), m);
        assert!(closed_by_peer(&s), "{what} ({kind:?}) was not refused");
    }
    // Whatever was stepped is applied before a proposal made after it.
    c.node(l).propose(acl("after"), CALL).unwrap();
    let image = c.node(l).image();
    assert!(
        !image
            .acls
            .iter()
            .any(|b| b.resource_name == "forged" || b.resource_name == "termed"),
        "a forged record was applied"
    );
    assert_eq!(c.node(l).membership().voters, voters_before);
    assert!(c.node(l).check_running().is_ok());
    c.shutdown();
}

/// A forged heartbeat whose commit index no log has no longer reaches raft-rs (which
/// ends its thread on it): the node stops with the error of a lost metadata log, and a
/// stopped node leads nothing any more (never a zombie).
#[test]
fn a_heartbeat_past_the_log_stops_the_node_before_raft_rs_sees_it() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "t", 3, vec![]);
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    wait_until("the controller leads a partition", || {
        (0..3).any(|p| part(&c, l, "t", p).leader_epoch().is_some())
    });
    let id = c.node(0).image().cluster_id.clone().expect("a cluster id");
    let _forged = forge(&c, l, Some(&id));
    wait_until("the controller failed", || {
        c.node(l).check_running().is_err()
    });
    let e = c.node(l).check_running().unwrap_err().to_string();
    assert!(!e.contains("panicked"), "{e}");
    assert!(
        e.contains(&format!("node {}", l + 1)) && e.contains(&format!("index {}", 1u64 << 40)),
        "{e}"
    );
    // It leads nothing any more: writes go elsewhere.
    wait_until("the failed node leads nothing", || {
        (0..3).all(|p| part(&c, l, "t", p).leader_epoch().is_none())
    });
    c.shutdown();
}

#[test]
fn connections_past_the_bound_are_closed_at_once() {
    use std::io::Read;
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    // Silent connections (no hello): three voters allow two each and 8 spare.
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(c.addrs[0]).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Well within the hello timeout (10 s): only those past the bound are closed.
    let closed = silent
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            matches!((&**s).read(&mut [0u8; 1]), Ok(0))
        })
        .count();
    assert!(
        closed >= 6,
        "only {closed} of 20 silent connections were closed"
    );
    // The voters' own connections were there before: the node goes on.
    c.node(0).propose(acl("after"), CALL).unwrap();
    drop(silent);
    c.shutdown();
}

/// A broker-only node that joins once the metadata log was compacted learns it through
/// the controller's snapshot: the snapshots raft-rs sends between nodes pass the quorum
/// port's checks.
#[test]
fn a_broker_only_node_joining_after_compaction_takes_the_snapshot() {
    let mut c = TestCluster::new(3, 8);
    c.wait_settled();
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    for i in 0..20 {
        c.node(l)
            .propose(acl(&format!("before-{i}")), CALL)
            .unwrap();
    }
    let b = c.add_broker();
    c.wait_settled();
    wait_until("the broker-only node applied the log", || {
        c.node(b)
            .image()
            .acls
            .iter()
            .any(|a| a.resource_name == "before-19")
    });
    assert!(c.node(b).check_running().is_ok());
    c.shutdown();
}

/// A snapshot of a higher term at index `index`, of the three voters, holding `data`.
fn snapshot_holding(index: u64, data: Vec<u8>) -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgSnapshot);
    m.term = 1 << 30;
    let snapshot = m.mut_snapshot();
    snapshot.data = data.into();
    let meta = snapshot.mut_metadata();
    meta.index = index;
    meta.term = 1 << 30;
    meta.mut_conf_state().voters = vec![raft_id(1), raft_id(2), raft_id(3)];
    m
}

/// A snapshot whose data is no metadata image, or an image of another index or of
/// another cluster, is refused at the quorum port, its connection closed: raft-rs would
/// restore it (its index is past the log), and the node then stopped on data it could
/// not decode, or took another index's or cluster's metadata for its own.
#[test]
fn a_snapshot_whose_data_is_no_image_is_refused_and_the_node_goes_on() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    let f = (l + 1) % 3;
    let id = c.node(f).image().cluster_id.clone().expect("a cluster id");
    let far = 1 << 40;
    let image = (*c.node(f).image()).clone();
    let mut foreign = image.clone();
    foreign.index = far;
    foreign.cluster_id = Some(format!("{id}-other"));
    for (what, data) in [
        ("no image", b"no metadata image".to_vec()),
        ("another index", image.encode()),
        ("another cluster", foreign.encode()),
    ] {
        let forged = forge_to(&c, f, Some(&id), snapshot_holding(far, data));
        assert!(closed_by_peer(&forged), "a snapshot of {what} was taken");
    }
    c.node(f).propose(acl("after"), CALL).unwrap();
    c.node(f).check_running().unwrap();
    assert_eq!(c.node(f).image().cluster_id, Some(id));
    c.shutdown();
}
