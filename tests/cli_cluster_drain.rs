//! `tidelog cluster drain` and `tidelog cluster unregister` against a cluster of
//! `tidelog serve` child processes (three voters and a broker-only node 4): unregister
//! is refused while node 4 holds replicas, drain moves them all to the voters and
//! waits, and once node 4 is stopped unregister removes it: `cluster describe` no
//! longer lists it.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use cli_support::{Run, err, ok, serve, tidelog_raw};

/// Runs `args` until `done` holds for its run (at most 60 s); that run.
fn until(args: &[&str], done: impl Fn(&Run) -> bool) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = tidelog_raw(args, "");
        if done(&run) {
            return run;
        }
        assert!(Instant::now() < deadline, "{args:?} never done: {run:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_node_is_drained_then_unregistered() {
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
    let mut nodes = vec![node("1"), node("2"), node("3"), node("4")];
    let bootstrap = nodes
        .iter()
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let describe = ["cluster", "describe", "--bootstrap", &bootstrap];
    until(&describe, |r| {
        r.code == 0
            && r.stdout
                .lines()
                .filter(|l| l.contains("Liveness: alive"))
                .count()
                == 4
    });
    // Four partitions of three replicas over four nodes: node 4 holds some.
    until(
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
    until(&describe, |r| r.stdout.contains("retire-"));

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
    let run = until(&unregister, |r| {
        r.code == 0 || !r.stderr.contains("running")
    });
    assert!(ok(run).contains("Node 4 is unregistered"));
    let out = until(&describe, |r| {
        r.code == 0 && !r.stdout.lines().any(|l| l.starts_with("Node: 4 "))
    })
    .stdout;
    assert!(out.contains("Node: 3 "), "{out}");
    err(tidelog_raw(&unregister, ""), 1, "BROKER_ID_NOT_REGISTERED");
    for n in nodes {
        n.stop();
    }
}
