//! `tidelog quorum` and `tidelog cluster describe` against a cluster of `tidelog serve`
//! child processes: three voters and a fourth node started with the same `--quorum`
//! (which does not list it) as a broker only. `quorum describe` lists it as an observer,
//! `cluster describe` as a broker holding a replica of a topic created after it joined,
//! `quorum add-voter` makes it a voter, and a refused change is one `error:` line.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{Run, err, loopback_quorum, ok, run_until, serve_nodes, stop_all, tidelog_raw};

/// Runs `args` until its stdout contains `needle` (at most 60 s); that stdout.
fn until(args: &[&str], needle: &str) -> String {
    run_until(args, |r: &Run| r.code == 0 && r.stdout.contains(needle)).stdout
}

#[test]
fn quorum_and_cluster_describe_a_broker_only_node_and_add_it_as_a_voter() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let (nodes, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3", "4"]);
    let describe = ["quorum", "describe", "--bootstrap", &bootstrap];
    let out = until(&describe, "CurrentObservers:  [4]");
    assert!(out.contains("CurrentVoters:     [1,2,3]"), "{out}");
    assert!(out.contains("Observer"), "{out}");

    // A topic with a replica on every node, node 4 included.
    until(
        &[
            "topics",
            "create",
            "on-four",
            "--partitions",
            "1",
            "--replication-factor",
            "4",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    );
    let out = until(
        &["cluster", "describe", "--bootstrap", &bootstrap],
        "on-four-0",
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("Node: 4 "))
        .unwrap_or_else(|| panic!("no node 4: {out}"));
    assert!(
        line.contains("Role: broker") && line.contains("Liveness: alive"),
        "{out}"
    );
    assert!(out.contains("Role: voter"), "{out}");

    let run = tidelog_raw(
        &[
            "quorum",
            "add-voter",
            "--node-id",
            "9",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    );
    err(run, 1, "node 9");
    let out = ok(tidelog_raw(
        &[
            "quorum",
            "add-voter",
            "--node-id",
            "4",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    ));
    assert!(out.contains("node 4 is a voter"), "{out}");
    until(&describe, "CurrentVoters:     [1,2,3,4]");
    stop_all(nodes);
}
