//! `tidelog quorum` and `tidelog cluster describe` against a cluster of `tidelog serve`
//! child processes: three voters and a fourth node started with the same `--quorum`
//! (which does not list it) as a broker only. `quorum describe` lists it as an observer,
//! `cluster describe` as a broker holding a replica of a topic created after it joined,
//! `quorum add-voter` makes it a voter, and a refused change is one `error:` line.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use cli_support::{err, ok, serve, tidelog_raw};

/// Runs `args` until its stdout contains `needle` (at most 60 s); that stdout.
fn until(args: &[&str], needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = tidelog_raw(args, "");
        if run.code == 0 && run.stdout.contains(needle) {
            return run.stdout;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?} never showed {needle:?}: {run:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn quorum_and_cluster_describe_a_broker_only_node_and_add_it_as_a_voter() {
    let root = tempfile::tempdir().unwrap();
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let quorum = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}@127.0.0.1:{}", i + 1, l.local_addr().unwrap().port()))
        .collect::<Vec<_>>()
        .join(",");
    drop(listeners);
    let node = |id: &str| {
        serve(
            &root.path().join(format!("node-{id}")),
            &["--node-id", id, "--quorum", &quorum],
        )
    };
    let nodes = [node("1"), node("2"), node("3"), node("4")];
    let bootstrap = nodes
        .iter()
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
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
    for n in nodes {
        n.stop();
    }
}
