//! A read barrier on the metadata log ([`ClusterNode::read_barrier`]): on a follower
//! that has not published a record the controller committed, it returns only once the
//! follower's image has it; with no majority left it fails in its time, naming what
//! did not come.

use std::sync::mpsc;

use super::metadata_visibility::Gate;
use super::*;
use crate::coordinator::group_configs::SHARE_AUTO_OFFSET_RESET;

/// A group config record of group `group`.
fn group_config(group: &str) -> MetadataRecord {
    MetadataRecord::AlterGroupConfig {
        group: group.into(),
        changes: vec![(SHARE_AUTO_OFFSET_RESET.into(), Some("earliest".into()))],
    }
}

#[test]
fn a_read_barrier_on_a_follower_returns_once_its_image_has_what_was_committed_before() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    let f = (l + 1) % 3;
    let gate = Gate::on(|image| image.group_configs.contains_key("late"));
    c.node(f).add_listener(gate.clone());
    // Committed through the controller, which answers once it published it; the
    // follower is held before it publishes it.
    c.node(l).propose(group_config("late"), WAIT).unwrap();
    assert!(!c.node(f).image().group_configs.contains_key("late"));

    let (done, barrier) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let outcome = c.node(f).read_barrier(Duration::from_secs(10));
            let seen = c.node(f).image().group_configs.contains_key("late");
            let _ = done.send((outcome, seen));
        });
        assert!(
            barrier.recv_timeout(Duration::from_millis(600)).is_err(),
            "the barrier returned while the follower had not published the committed record"
        );
        gate.release();
        let (outcome, seen) = barrier.recv_timeout(WAIT).expect("the barrier returns");
        outcome.unwrap();
        assert!(seen, "the barrier returned before the record was published");
    });

    // On the controller, and again on the follower: nothing to wait for.
    let started = Instant::now();
    c.node(l).read_barrier(Duration::from_secs(5)).unwrap();
    c.node(f).read_barrier(Duration::from_secs(5)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    c.shutdown();
}

#[test]
fn a_read_barrier_without_a_majority_times_out_naming_what_did_not_come() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let l = c.node(0).controller_id().unwrap() as usize - 1;
    let last = (l + 1) % 3;
    for i in (0..3).filter(|i| *i != last) {
        c.halt(i);
    }
    let timeout = Duration::from_millis(800);
    let started = Instant::now();
    let e = c.node(last).read_barrier(timeout).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    let message = e.to_string();
    assert!(
        message.contains("metadata read barrier of node")
            && (message.contains("no controller was known")
                || message.contains("did not confirm its commit index")),
        "{message}"
    );
    assert!(
        took >= timeout && took < timeout + Duration::from_secs(2),
        "{took:?}"
    );
    c.shutdown();
}
