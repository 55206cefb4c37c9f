//! The CLI's read-only commands on a cluster node's data directory: a cluster of `tidelog
//! serve --node-id N --quorum ...` child processes (one node, then three with every
//! partition on each) gets a topic, records (Produce over the wire, acks=all) and a
//! group's committed offsets (`consume --group --bootstrap`), then stops, cleanly
//! (SIGTERM) or killed (SIGKILL). `consume --from-beginning -e`, `topics describe` and
//! `groups describe` on each node's data directory then show the records, the topic and
//! the group, from that node's own metadata, saying so in one line on stderr.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
mod server_support;

use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::{loopback_quorum, ok, serve, stop_all, tidelog, tidelog_raw};

/// The nodes of an `n`-voter cluster on `root/node-N`, with `orders` (2 partitions of
/// `n` replicas, 3 records) and group `audit` having consumed it all.
fn cluster_with_data(root: &Path, n: usize) -> Vec<cli_support::Serve> {
    let quorum = loopback_quorum(n);
    let rf = n.to_string();
    let nodes: Vec<cli_support::Serve> = (0..n)
        .map(|i| {
            let id = (i + 1).to_string();
            serve(
                &root.join(format!("node-{id}")),
                &[
                    "--node-id",
                    &id,
                    "--quorum",
                    &quorum,
                    "--default-replication-factor",
                    &rf,
                ],
            )
        })
        .collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    let bootstrap = addrs.join(",");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = tidelog_raw(
            &[
                "topics",
                "create",
                "orders",
                "--partitions",
                "2",
                "--bootstrap",
                &bootstrap,
            ],
            "",
        );
        if run.code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{run:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    server_support::produce_acks_all(&addrs, "orders", 0, &["first", "second"]);
    server_support::produce_acks_all(&addrs, "orders", 1, &["third"]);
    let consumed = ok(tidelog_raw(
        &[
            "consume",
            "orders",
            "--group",
            "audit",
            "--from-beginning",
            "-e",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    ));
    assert_eq!(consumed.lines().count(), 3, "{consumed}");
    nodes
}

/// The three read-only commands on the stopped node `id`'s `data`.
fn check_read_only_commands(data: &Path, id: i32) {
    let run = tidelog(data, &["consume", "orders", "--from-beginning", "-e"], "");
    assert_eq!(run.code, 0, "{run:?}");
    let mut values: Vec<&str> = run.stdout.lines().collect();
    values.sort_unstable();
    assert_eq!(values, vec!["first", "second", "third"], "{run:?}");
    assert_eq!(
        run.stderr
            .lines()
            .filter(|l| {
                l.contains(&format!(
                    "is cluster node {id}'s data directory: this is its last known metadata"
                ))
            })
            .count(),
        1,
        "{run:?}"
    );

    let run = tidelog(data, &["topics", "describe", "orders"], "");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("orders"), "{run:?}");
    assert!(run.stdout.contains("PartitionCount: 2"), "{run:?}");

    let run = tidelog(data, &["groups", "describe", "audit"], "");
    assert_eq!(run.code, 0, "{run:?}");
    // Per partition: committed offset = log end offset, no lag.
    assert!(run.stdout.contains("audit\torders\t0\t2\t2\t0"), "{run:?}");
    assert!(run.stdout.contains("audit\torders\t1\t1\t1\t0"), "{run:?}");

    // Nothing was written: the node starts again on its directory.
    assert!(
        data.join("__cluster_metadata-0")
            .join("raft-state")
            .exists()
    );
}

#[test]
fn a_cleanly_stopped_nodes_data_reads_from_its_own_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes = cluster_with_data(tmp.path(), 1);
    assert_eq!(nodes.remove(0).stop(), Some(0));
    check_read_only_commands(&tmp.path().join("node-1"), 1);
}

#[test]
fn a_killed_nodes_data_reads_from_its_own_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let nodes = cluster_with_data(tmp.path(), 1);
    drop(nodes); // SIGKILL
    check_read_only_commands(&tmp.path().join("node-1"), 1);
}

/// The ISR of each partition of `orders` as `topics describe --bootstrap` lists it.
fn isr_sizes(bootstrap: &str) -> Vec<usize> {
    let run = tidelog_raw(
        &["topics", "describe", "orders", "--bootstrap", bootstrap],
        "",
    );
    run.stdout
        .lines()
        .filter_map(|l| l.split("Isr: ").nth(1))
        .map(|rest| rest.split('\t').next().unwrap_or("").split(',').count())
        .collect()
}

#[test]
fn every_node_of_three_reads_its_replicas_once_stopped_or_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes = cluster_with_data(tmp.path(), 3);
    // Stopped once every replica caught up (all 3 in each partition's ISR).
    let bootstrap = nodes
        .iter()
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let deadline = Instant::now() + Duration::from_secs(30);
    while isr_sizes(&bootstrap) != vec![3, 3] {
        assert!(Instant::now() < deadline, "{:?}", isr_sizes(&bootstrap));
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(nodes.pop()); // node 3: SIGKILL
    assert_eq!(stop_all(nodes), [Some(0), Some(0)]);
    for id in 1..=3 {
        check_read_only_commands(&tmp.path().join(format!("node-{id}")), id);
    }
}
