//! A voter whose data directory was lost: restarted on an empty directory, it must not
//! vote or serve as a voter (its empty Raft state could elect a leader that lacks
//! committed metadata); it stops with an error that says what happened and what to do,
//! and the two others go on.

use super::quorum_forgery::acl;
use super::*;

const CALL: Duration = Duration::from_secs(10);

/// Removes everything in `dir`, as a lost disk replaced by an empty one.
fn wipe(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
}

#[test]
fn a_voter_restarted_on_an_empty_directory_refuses_to_vote() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.node(0).propose(acl("before"), CALL).unwrap();
    let known = c.node(0).image().directories.get(&3).cloned();
    assert!(known.is_some(), "the quorum knows node 3's directory id");
    c.halt(2);
    wipe(c.dir(2));
    c.restart(2);
    wait_until("the wiped node 3 failed", || {
        c.node(2).check_running().is_err()
    });
    let e = c.node(2).check_running().unwrap_err().to_string();
    assert!(
        e.contains("node 3") && e.contains("data directory") && e.contains("lost"),
        "{e}"
    );
    assert!(e.contains("restore"), "says how to recover: {e}");
    // It never voted: its Raft state on disk has no vote and no term.
    let meta_dir = c.dir(2).join(CLUSTER_METADATA_DIR);
    let store =
        storage::RaftStorage::open(&meta_dir, raft_id(3), &[raft_id(1), raft_id(2), raft_id(3)])
            .unwrap();
    let hs = raft::Storage::initial_state(&store).unwrap().hard_state;
    assert_eq!((hs.term, hs.vote), (0, 0), "the wiped node stored a vote");
    // The quorum still knows node 3 by its old directory id, and the others go on.
    for i in [0, 1] {
        c.node(i).propose(acl(&format!("after-{i}")), CALL).unwrap();
        assert_eq!(c.node(i).image().directories.get(&3), known.as_ref());
    }
    c.shutdown();
}
