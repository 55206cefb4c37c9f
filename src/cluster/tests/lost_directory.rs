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

/// Whether `image` holds the ACL that [`acl`]`(name)` made.
fn has_acl(image: &MetadataImage, name: &str) -> bool {
    image.acls.iter().any(|b| b.resource_name == name)
}

/// A voter wiped before any peer applied the record of its directory id: the quorum has
/// no id to refuse it by. Restarted empty, it must not vote for a candidate that lacks
/// an entry it acknowledged (node 3 never records its directory id here).
#[test]
fn a_voter_wiped_before_its_directory_id_was_recorded_does_not_vote() {
    wiped_voter_elects_no_one_lacking_what_it_acknowledged(|_, _| {});
}

/// The same voter's new directory formatted to join (`tidelog format
/// --no-initial-controllers`) before it is restarted: a formatted directory is no fresh
/// one, yet it must not vote either until the quorum recorded its directory id (node 3
/// never records it here).
#[test]
fn a_voter_formatted_to_join_does_not_help_elect_a_controller_lacking_what_it_acknowledged() {
    wiped_voter_elects_no_one_lacking_what_it_acknowledged(|dir, cluster_id| {
        let f = format::format_node(
            dir,
            cluster_id,
            3,
            &format::NodeFormat::NoInitialControllers,
            false,
        )
        .unwrap();
        assert!(!f.already_formatted);
    });
}

/// Node 3 commits an entry with a "keeper" while the node "behind" is down, is wiped,
/// `reformat` is run on its empty directory, and it comes back with "behind" only:
/// no controller is elected (node 3 refuses its vote) until the keeper is back.
fn wiped_voter_elects_no_one_lacking_what_it_acknowledged(reformat: impl Fn(&Path, &str)) {
    let mut c = TestCluster::with_unrecorded_directory(3, 2);
    c.wait_settled();
    assert_eq!(c.node(0).image().directories.get(&3), None);
    // An entry committed by node 3 and a "keeper" while the node "behind" is down. The
    // controller stays up: node 3 does not vote while its directory is unrecorded.
    let controller = c.node(0).controller_id().unwrap();
    let behind = if controller == 2 { 0 } else { 1 };
    let keeper = 1 - behind;
    c.halt(behind);
    c.node(keeper)
        .propose(acl("acked-by-node-3"), CALL)
        .unwrap();
    c.halt(keeper);
    let cluster_id = c.node(2).image().cluster_id.clone().unwrap();
    c.halt(2);
    wipe(c.dir(2));
    reformat(c.dir(2), &cluster_id);
    c.restart(behind);
    c.restart(2);
    // "behind" lacks the entry; node 3's log is empty and would grant it its vote.
    wait_until(
        "node 3 refusing a vote, or a controller without the entry",
        || c.node(2).refused_a_vote() || c.node(behind).controller_id().is_some(),
    );
    assert_eq!(
        c.node(behind).controller_id(),
        None,
        "elected with the vote of a voter that lost the entry it acknowledged"
    );
    c.restart(keeper);
    wait_until("the acknowledged entry on every node", || {
        (0..3).all(|i| has_acl(&c.node(i).image(), "acked-by-node-3"))
    });
    for i in 0..3 {
        c.node(i).check_running().unwrap();
    }
    c.shutdown();
}

/// The same voter while the controller that counted its acknowledgements still leads:
/// the controller's heartbeat names a commit index the wiped log lacks, and the node
/// stops with an error that says its data directory was lost and how to bring it back.
#[test]
fn a_voter_wiped_before_its_directory_id_was_recorded_stops_on_the_controllers_word() {
    let mut c = TestCluster::with_unrecorded_directory(3, 2);
    c.wait_settled();
    if c.node(0).controller_id() == Some(3) {
        // Another controller, which remembers what node 3 acknowledged.
        c.halt(2);
        c.restart(2);
        wait_until("a controller other than node 3", || {
            let l = c.node(0).controller_id();
            l.is_some_and(|l| l != 3) && c.node(2).controller_id() == l
        });
    }
    c.node(0).propose(acl("before"), CALL).unwrap();
    let controller = c.node(0).controller_id().unwrap();
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
    assert!(
        e.contains(&format!("controller (node {controller})")),
        "{e}"
    );
    assert!(
        e.contains("remove-voter") && e.contains("add-voter"),
        "says how to recover: {e}"
    );
    for i in [0, 1] {
        c.node(i).propose(acl(&format!("after-{i}")), CALL).unwrap();
    }
    c.shutdown();
}

/// A founder of a new cluster votes before its directory id is recorded: it took part in
/// the first election before the cluster had an id, so it is no wiped voter, and losing
/// the controller in that window still leaves a majority to elect another.
#[test]
fn a_founder_votes_before_its_directory_id_is_recorded() {
    let mut c = TestCluster::with_unrecorded_directory(3, 2);
    c.wait_settled();
    assert_eq!(c.node(0).image().directories.get(&3), None);
    let controller = c.node(0).controller_id().unwrap();
    // Node 3 (index 2) never records its directory id. Stop a controller other than
    // node 3: the node left besides it needs node 3's vote, or node 3 needs its (then
    // node 3 must not have refused one either way). A controller that is node 3 leaves
    // nothing to show: node 1 goes then.
    let (gone, other) = match controller {
        1 => (0, 1),
        2 => (1, 0),
        _ => (0, 1),
    };
    c.halt(gone);
    wait_until("a controller elected with node 3's vote", || {
        c.node(other)
            .controller_id()
            .is_some_and(|l| l != gone as i32 + 1)
            && c.node(2).controller_id() == c.node(other).controller_id()
    });
    assert!(!c.node(2).refused_a_vote(), "node 3 refused to vote");
    c.shutdown();
}

/// A broker-only node (a learner) restarted on an empty directory stops with the error
/// of a lost directory worded for its role: it never voted, and it recovers by being
/// retired and started anew, not by a change of the voters.
#[test]
fn a_broker_only_node_restarted_on_an_empty_directory_is_told_its_own_recovery() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let b = c.add_broker();
    c.wait_settled();
    c.node(0).propose(acl("before"), CALL).unwrap();
    wait_until("node 4 has the ACL", || {
        has_acl(&c.node(b).image(), "before")
    });
    c.halt(b);
    wipe(c.dir(b));
    c.restart(b);
    wait_until("the wiped node 4 failed", || {
        c.node(b).check_running().is_err()
    });
    let e = c.node(b).check_running().unwrap_err().to_string();
    assert!(
        e.contains("broker-only node 4") && e.contains("data directory") && e.contains("lost"),
        "{e}"
    );
    assert!(!e.contains("voter"), "a broker-only node is no voter: {e}");
    assert!(
        e.contains("cluster drain --node 4") && e.contains("cluster unregister --node 4"),
        "says how to recover: {e}"
    );
    for i in 0..3 {
        c.node(i).propose(acl(&format!("after-{i}")), CALL).unwrap();
    }
    c.shutdown();
}

/// A voter started on an empty directory once the others gave the cluster its id (a
/// late voter of a new cluster, or a voter whose disk was lost: it cannot tell) is no
/// founder, and it does not vote until the quorum recorded its directory id. Restarted
/// before that, its directory is no longer empty (it wrote `meta.properties` on joining),
/// yet it must still not vote (node 3 never records its directory id here).
#[test]
fn a_late_voter_restarted_before_its_directory_id_is_recorded_does_not_vote() {
    let mut c = TestCluster::with_late_unrecorded_node(3, 2);
    c.wait_settled();
    c.node(0).propose(acl("before-node-3"), CALL).unwrap();
    c.restart(2);
    wait_until("node 3 joined the cluster", || {
        c.dir(2).join(meta_properties::FILE).exists()
            && has_acl(&c.node(2).image(), "before-node-3")
    });
    let joining = c
        .dir(2)
        .join(CLUSTER_METADATA_DIR)
        .join(storage::JOINING_FILE);
    assert!(joining.exists(), "node 3 is not marked to join");
    c.halt(2);
    c.restart(2);
    let controller = c.node(0).controller_id().unwrap();
    let applied = c.node(0).image().index;
    wait_until("node 3 follows the controller", || {
        c.node(2).controller_id() == Some(controller) && c.node(2).image().index >= applied
    });
    assert_ne!(
        controller, 3,
        "node 3 was elected before its directory id was recorded"
    );
    // The voter left besides node 3 is elected only with node 3's vote.
    let gone = controller as usize - 1;
    let other = 1 - gone;
    c.halt(gone);
    wait_until(
        "node 3 refusing a vote, or a controller elected with it",
        || {
            c.node(2).refused_a_vote()
                || c.node(other)
                    .controller_id()
                    .is_some_and(|l| l != controller)
        },
    );
    assert!(
        c.node(other)
            .controller_id()
            .is_none_or(|l| l == controller),
        "node {} was elected with the vote of node 3, whose directory id is not recorded",
        other + 1
    );
    c.restart(gone);
    wait_until("a controller again", || {
        (0..3).all(|i| c.node(i).controller_id().is_some_and(|l| l != 3))
    });
    c.shutdown();
}

/// The only voter of a new cluster founds it without a peer's message (it elects itself
/// alone). A broker-only node that joins before the voter's directory id is recorded
/// must not make it a joiner, which would never campaign again: restarted, it elects
/// itself (node 1 never records its directory id here).
#[test]
fn the_only_voter_founds_the_cluster_and_elects_itself_after_a_restart() {
    let mut c = TestCluster::with_unrecorded_directory(1, 0);
    c.wait_settled();
    c.add_broker();
    c.wait_settled();
    let joining = c
        .dir(0)
        .join(CLUSTER_METADATA_DIR)
        .join(storage::JOINING_FILE);
    assert!(!joining.exists(), "the founder is marked to join");
    c.halt(0);
    c.restart(0);
    wait_until("node 1 the controller again", || {
        c.node(0).controller_id() == Some(1)
    });
    c.shutdown();
}

/// A voter whose disk was lost before its directory id was recorded, formatted to join
/// and started while the quorum still counts it as that voter: its hellos say it joins,
/// so the controller sends it the log but counts its acknowledgements toward no commit.
/// With the other voter down, nothing commits until that voter is back (node 3 never
/// records its directory id here).
#[test]
fn a_joiner_the_quorum_counts_as_a_voter_commits_nothing() {
    let c = TestCluster::with_unrecorded_directory(3, 2);
    wiped_voter_commits_nothing(
        c,
        |dir, cluster_id| {
            format::format_node(
                dir,
                cluster_id,
                3,
                &format::NodeFormat::NoInitialControllers,
                false,
            )
            .unwrap();
        },
        |_| {},
    )
    .shutdown();
}

/// The same voter restarted on its empty directory, unformatted, once the controller
/// compacted its metadata log: it catches up from a snapshot (the controller has no
/// entry from the first on), so no rejection or heartbeat tells it that it lost what it
/// acknowledged. Its first peer message marks it to join, its hellos say so before its
/// first answer leaves, and its acknowledgements commit nothing (node 3 never records
/// its directory id here).
#[test]
fn a_wiped_voter_caught_up_by_a_snapshot_commits_nothing() {
    let c = TestCluster::build(3, 8, LAG, false, Some(2));
    let c = wiped_voter_commits_nothing(
        c,
        |_, _| {},
        |c| {
            for n in 0..12 {
                c.node(n % 2)
                    .propose(acl(&format!("compacted-{n}")), CALL)
                    .unwrap();
            }
            wait_until("both running voters compacted their metadata logs", || {
                [0, 1].iter().all(|&i| {
                    storage::stored_snapshot_index(&c.dir(i).join(CLUSTER_METADATA_DIR)) > 0
                })
            });
        },
    );
    let meta = c.dir(2).join(CLUSTER_METADATA_DIR);
    assert!(
        meta.join(storage::JOINING_FILE).exists(),
        "node 3 is not marked to join"
    );
    assert!(
        storage::stored_snapshot_index(&meta) > 0,
        "node 3 installed no snapshot"
    );
    c.shutdown();
}

/// Once `c` settled, commits the ACL [`acl`]`(name)` and stops every node; the
/// cluster's id.
fn write_and_stop_all(c: &mut TestCluster, name: &str) -> String {
    c.wait_settled();
    c.node(0).propose(acl(name), CALL).unwrap();
    let cluster_id = c.node(0).image().cluster_id.clone().unwrap();
    for i in [2, 1, 0] {
        c.halt(i);
    }
    cluster_id
}

/// Node 3 (its directory id unrecorded) commits an entry, all stop, node 3's directory
/// is wiped and `reformat` run on it; the two others restart (a controller that never
/// heard of node 3's acknowledgements), `meanwhile` runs, node 3 restarts and catches
/// up. With the voter other than the controller down, an entry does not commit with
/// node 3's acknowledgement; it does once that voter is back. Returns the cluster.
fn wiped_voter_commits_nothing(
    mut c: TestCluster,
    reformat: impl Fn(&Path, &str),
    meanwhile: impl Fn(&TestCluster),
) -> TestCluster {
    let cluster_id = write_and_stop_all(&mut c, "acked-by-node-3");
    wipe(c.dir(2));
    reformat(c.dir(2), &cluster_id);
    c.restart(0);
    c.restart(1);
    wait_until("a controller", || {
        let l = c.node(0).controller_id();
        l.is_some() && c.node(1).controller_id() == l
    });
    meanwhile(&c);
    c.restart(2);
    let controller = c.node(0).controller_id().unwrap() as usize - 1;
    let other = 1 - controller;
    let applied = c.node(controller).image().index;
    wait_until("node 3 caught up", || {
        c.node(2).image().index >= applied
            && c.node(2).controller_id() == Some(controller as i32 + 1)
    });
    c.halt(other);
    let e = c
        .node(controller)
        .propose(acl("with-the-joiner"), Duration::from_secs(3));
    assert!(
        e.is_err(),
        "committed with the acknowledgement of a joiner counted as voter 3"
    );
    c.restart(other);
    wait_until("the entry committed once the other voter is back", || {
        (0..3).all(|i| has_acl(&c.node(i).image(), "with-the-joiner"))
    });
    c
}

/// A voter whose directory was wiped, started while the only voter it reaches knows no
/// cluster id either (wiped too) and the voter that holds the cluster's metadata is
/// down: both see a new cluster's view, and must not found one (which would leave the
/// cluster's metadata behind, and refuse its keeper as another cluster's node). Founding
/// on auto-formatted directories waits for every voter; the keeper's hellos, once it is
/// back, tell the wiped voters that their directories were lost.
#[test]
fn wiped_voters_found_no_new_cluster_while_the_voter_holding_the_metadata_is_down() {
    let mut c = TestCluster::new(3, 1024);
    let cluster_id = write_and_stop_all(&mut c, "before");
    wipe(c.dir(1));
    wipe(c.dir(2));
    c.restart(1);
    c.restart(2);
    // Several election timeouts (1 to 2 s each): two voters that found a cluster have
    // elected a controller by then. Bounded in count and time.
    for _ in 0..200 {
        for i in [1, 2] {
            assert_eq!(
                c.node(i).controller_id(),
                None,
                "node {} elected a controller without the voter holding the metadata",
                i + 1
            );
            assert_eq!(
                c.node(i).image().cluster_id,
                None,
                "node {} founded a new cluster",
                i + 1
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // The keeper is back: its hellos name the directory ids it recorded, and each wiped
    // voter stops with the lost directory's error. Nothing of the cluster was lost or
    // replaced.
    c.restart(0);
    wait_until("both wiped voters stopped", || {
        [1, 2].iter().all(|&i| c.node(i).check_running().is_err())
    });
    for i in [1, 2] {
        let e = c.node(i).check_running().unwrap_err().to_string();
        assert!(
            e.contains("data directory") && e.contains("lost"),
            "node {}: {e}",
            i + 1
        );
        if let Some(p) = meta_properties::read(c.dir(i)).unwrap() {
            assert_eq!(
                p.cluster_id,
                cluster_id,
                "node {} joined another cluster",
                i + 1
            );
        }
    }
    let image = c.node(0).image();
    assert_eq!(image.cluster_id.as_deref(), Some(cluster_id.as_str()));
    assert!(has_acl(&image, "before"), "the keeper lost the metadata");
    c.node(0).check_running().unwrap();
    c.shutdown();
}
