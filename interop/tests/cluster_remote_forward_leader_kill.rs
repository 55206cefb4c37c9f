//! The store-and-forward `Forwarder` through a remote leader's death: an embedded log
//! (a `Broker` in this process) with a topic of two partitions is forwarded to three
//! `tidelog serve` child processes (replication factor 3, `min.insync.replicas=2`);
//! while records are still being written locally and forwarded, the remote leader of
//! partition 0 is killed with SIGKILL. The forwarder catches up, and the remote topic
//! holds every local record exactly once, in local order per partition.

use tidelog::forward::Forwarder;
use tidelog_interop::cluster::eventually;

mod remote_cluster_support;
use remote_cluster_support::{
    WAIT, check_every_number_once_in_order, config, local_log, three_nodes_with_topic,
    write_numbers,
};

const TOPIC: &str = "forwarded";
const PARTITIONS: i32 = 2;
const RECORDS: u32 = 4000;

#[test]
fn the_forwarder_delivers_every_record_once_through_a_killed_remote_leader() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, bootstrap, cluster, leader) =
        three_nodes_with_topic(root.path(), TOPIC, PARTITIONS);

    let (_dir, local) = local_log(TOPIC, PARTITIONS);
    write_numbers(&local, TOPIC, PARTITIONS, (0, RECORDS / 2));
    let forwarder = Forwarder::builder(&local, config(&bootstrap))
        .name("edge")
        .topic(TOPIC)
        .start()
        .unwrap();
    // Some records are across; then the leader of partition 0 dies with SIGKILL while
    // the rest is written and forwarded.
    eventually("records forwarded", WAIT, || {
        (forwarder.status().records_forwarded >= u64::from(RECORDS / 8)).then_some(())
    });
    nodes.kill((leader - 1) as usize);
    write_numbers(&local, TOPIC, PARTITIONS, (RECORDS / 2, RECORDS));
    let caught_up = forwarder.wait_caught_up(WAIT * 3);
    let status = forwarder.status();
    assert!(
        caught_up,
        "the forwarder caught up: {status:?}\n{}",
        nodes.logs()
    );
    forwarder.stop().unwrap();
    assert_eq!(status.records_lost, 0);

    // The remote topic: every record once, in local order per partition.
    check_every_number_once_in_order(&cluster, TOPIC, PARTITIONS, RECORDS);
}
