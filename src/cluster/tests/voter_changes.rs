//! Changing the voters online (KIP-853): a voter is removed while metadata keeps being
//! committed and goes on as a broker only, a broker-only node is added as a voter and
//! then counts towards the majority, wrong requests are refused with Kafka's errors,
//! and a restarted node keeps the changed voters over its `--quorum`.

use super::*;

/// Index of the node that is the controller.
fn controller(c: &TestCluster) -> usize {
    let id = c.node(c.running()[0]).controller_id().unwrap();
    (id - 1) as usize
}

fn membership_everywhere(c: &TestCluster, voters: &[i32], learners: &[i32]) {
    let want = membership::Membership {
        voters: voters.to_vec(),
        learners: learners.to_vec(),
    };
    wait_until(&format!("membership {want:?} on every node"), || {
        c.running().iter().all(|&i| c.node(i).membership() == want)
    });
}

#[test]
fn voters_are_removed_and_added_online() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let b = c.add_broker();
    c.wait_settled();
    membership_everywhere(&c, &[1, 2, 3], &[4]);

    // Refusals, with Kafka's error codes.
    let ctl = controller(&c);
    let other = (0..3).find(|i| *i != ctl).unwrap();
    let e = c.node(other).add_voter(4, None, WAIT).unwrap_err();
    assert_eq!(e.code(), 41, "{e}");
    let e = c.node(ctl).add_voter(1, None, WAIT).unwrap_err();
    assert_eq!(e.code(), 126, "{e}");
    let e = c.node(ctl).remove_voter(9, None, WAIT).unwrap_err();
    assert_eq!(e.code(), 127, "{e}");
    let e = c.node(ctl).add_voter(7, None, WAIT).unwrap_err();
    assert!(e.to_string().contains("does not follow"), "{e}");
    let e = c
        .node(ctl)
        .add_voter(4, Some("not-its-directory".into()), WAIT)
        .unwrap_err();
    assert_eq!(e.code(), 125, "{e}");

    // Remove a voter that is not the controller while another node keeps committing.
    let gone = (0..3).find(|i| *i != ctl).unwrap();
    let writer = (0..3).find(|i| *i != ctl && *i != gone).unwrap();
    std::thread::scope(|s| {
        let creating = s.spawn(|| {
            for n in 0..10 {
                let t = NewTopic {
                    name: format!("during-{n}"),
                    partitions: 1,
                    replication_factor: 1,
                    ..Default::default()
                };
                c.node(writer).create_topic(&t, false, WAIT).unwrap();
            }
        });
        c.node(ctl)
            .remove_voter(gone as i32 + 1, None, WAIT)
            .unwrap();
        creating.join().unwrap();
    });
    let mut voters: Vec<i32> = (1..=3).filter(|v| *v != gone as i32 + 1).collect();
    // The removed node keeps running: it follows the log as a broker only.
    membership_everywhere(&c, &voters, &[gone as i32 + 1, 4]);

    // The broker-only node becomes a voter, by its registered directory id.
    let dir_4 = meta_properties::read(c.dir(b))
        .unwrap()
        .unwrap()
        .directory_id
        .unwrap();
    c.node(ctl).add_voter(4, Some(dir_4), WAIT).unwrap();
    voters.push(4);
    membership_everywhere(&c, &voters, &[gone as i32 + 1]);

    // Node 4 now counts: with the removed node and the third voter down, the
    // controller and node 4 are two of the three voters and still commit.
    let third = (0..3).find(|i| *i != ctl && *i != gone).unwrap();
    c.halt(gone);
    c.halt(third);
    let t = NewTopic {
        name: "with-4".into(),
        partitions: 1,
        replication_factor: 1,
        ..Default::default()
    };
    c.node(ctl).create_topic(&t, false, WAIT).unwrap();

    // A voter restarted on its directory keeps the changed voters, not its --quorum.
    c.restart(third);
    wait_until("the restarted voter has the topic", || {
        c.node(third).image().topic("with-4").is_some()
    });
    assert_eq!(c.node(third).membership().voters, voters);
    c.shutdown();
}

/// Empties a data directory, as a replaced disk.
fn wipe(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
}

#[test]
fn a_voter_on_a_replaced_disk_comes_back_through_remove_and_add() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let ctl = controller(&c);
    let lost = (0..3).find(|i| *i != ctl).unwrap();
    let id = lost as i32 + 1;
    let old_dir = c.node(ctl).directory_of(id).unwrap();
    c.halt(lost);
    wipe(c.dir(lost));
    // Started on the empty directory while still a voter, it is refused and stops.
    c.restart(lost);
    wait_until("the wiped voter stopped", || {
        c.node(lost).check_running().is_err()
    });
    c.halt(lost);
    c.node(ctl)
        .remove_voter(id, Some(old_dir.clone()), WAIT)
        .unwrap();
    let others: Vec<i32> = (1..=3).filter(|v| *v != id).collect();
    membership_everywhere(&c, &others, &[]);

    // Started on the empty directory, it joins as a learner and registers anew.
    c.restart(lost);
    wait_until("the new directory registered", || {
        c.node(ctl).directory_of(id).is_some_and(|d| d != old_dir)
    });
    membership_everywhere(&c, &others, &[id]);
    let new_dir = meta_properties::read(c.dir(lost))
        .unwrap()
        .unwrap()
        .directory_id
        .unwrap();
    assert_eq!(c.node(ctl).directory_of(id), Some(new_dir.clone()));
    // The old directory id is no key any more; the new one is.
    let e = c.node(ctl).add_voter(id, Some(old_dir), WAIT).unwrap_err();
    assert_eq!(e.code(), 125, "{e}");
    c.node(ctl).add_voter(id, Some(new_dir), WAIT).unwrap();
    membership_everywhere(&c, &[1, 2, 3], &[]);
    c.wait_settled();
    c.shutdown();
}
