//! `tidelog cluster drain` and `tidelog cluster unregister` against a cluster of
//! `tidelog serve` child processes (three voters and a broker-only node 4): unregister
//! is refused while node 4 holds replicas, drain moves them all to the voters and
//! waits, and once node 4 is stopped unregister removes it: `cluster describe` no
//! longer lists it.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, loopback_quorum, ok, run_until, serve_nodes, stop_all, tidelog_raw};

#[test]
fn a_node_is_drained_then_unregistered() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let (mut nodes, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3", "4"]);
    let describe = ["cluster", "describe", "--bootstrap", &bootstrap];
    run_until(&describe, |r| {
        r.code == 0
            && r.stdout
                .lines()
                .filter(|l| l.contains("Liveness: alive"))
                .count()
                == 4
    });
    // Four partitions of three replicas over four nodes: node 4 holds some.
    run_until(
        &[
            "topics",
            "create",
            "retire",
            "--partitions",
            "4",
            "--replication-factor",
            "3",
            "--bootstrap",
            &bootstrap,
        ],
        |r| r.code == 0,
    );
    run_until(&describe, |r| r.stdout.contains("retire-"));

    let unregister = [
        "cluster",
        "unregister",
        "--node",
        "4",
        "--bootstrap",
        &bootstrap,
    ];
    err(tidelog_raw(&unregister, ""), 1, "drain");
    let out = ok(tidelog_raw(
        &["cluster", "drain", "--node", "4", "--bootstrap", &bootstrap],
        "",
    ));
    assert!(out.contains("Moving "), "{out}");
    assert!(out.contains("Node 4 is drained"), "{out}");
    let out = ok(tidelog_raw(&describe, ""));
    let line = out
        .lines()
        .find(|l| l.starts_with("Node: 4 "))
        .unwrap_or_else(|| panic!("no node 4: {out}"));
    assert!(line.contains("Replicas: 0"), "{out}");
    // Nothing left to move.
    let out = ok(tidelog_raw(
        &["cluster", "drain", "--node", "4", "--bootstrap", &bootstrap],
        "",
    ));
    assert!(out.contains("holds no replica"), "{out}");

    // Running: refused. Stopped: unregistered, and gone from the cluster.
    err(tidelog_raw(&unregister, ""), 1, "running");
    nodes.pop().unwrap().stop();
    let run = run_until(&unregister, |r| {
        r.code == 0 || !r.stderr.contains("running")
    });
    assert!(ok(run).contains("Node 4 is unregistered"));
    let out = run_until(&describe, |r| {
        r.code == 0 && !r.stdout.lines().any(|l| l.starts_with("Node: 4 "))
    })
    .stdout;
    assert!(out.contains("Node: 3 "), "{out}");
    err(tidelog_raw(&unregister, ""), 1, "BROKER_ID_NOT_REGISTERED");
    stop_all(nodes);
}
