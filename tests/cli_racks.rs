//! Racks through the command line, against three `tidelog serve --node-id N --quorum ...
//! --rack R` child processes (nodes 1 and 2 in rack `a`, node 3 in rack `b`):
//! `cluster describe` shows each node's rack, a new topic's partitions each get a
//! replica in both racks (Kafka's rack-aware placement: node 3 holds every partition),
//! and `reassign --generate` plans the same way unless `--disable-rack-aware`.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{Run, loopback_quorum, serve, tidelog_raw};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// Runs `tidelog ARGS... --bootstrap B` until it succeeds (at most [`WAIT`]).
fn until_ok(args: &[&str], bootstrap: &str) -> Run {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", bootstrap]);
        let run = tidelog_raw(&all, "");
        if run.code == 0 {
            return run;
        }
        assert!(Instant::now() < deadline, "{args:?}: {run:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The replicas of each partition of the plan printed after `heading`.
fn plan_after(stdout: &str, heading: &str) -> Vec<Vec<i64>> {
    let rest = stdout
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("{heading} in {stdout}"));
    let line = rest.lines().find(|l| l.starts_with('{')).unwrap();
    let plan: Value = serde_json::from_str(line).unwrap();
    plan["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_i64().unwrap())
                .collect()
        })
        .collect()
}

/// Every partition has one replica in each rack: node 3 (rack b) and one of 1 and 2.
fn spans_both_racks(plan: &[Vec<i64>]) -> bool {
    plan.iter()
        .all(|r| r.len() == 2 && r.contains(&3) && (r.contains(&1) || r.contains(&2)))
}

#[test]
fn racks_are_shown_and_replicas_spread_over_them() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let nodes: Vec<_> = [(1, "a"), (2, "a"), (3, "b")]
        .iter()
        .map(|(id, rack)| {
            serve(
                &root.path().join(format!("node-{id}")),
                &[
                    "--node-id",
                    &id.to_string(),
                    "--quorum",
                    &quorum,
                    "--rack",
                    rack,
                ],
            )
        })
        .collect();
    let bootstrap = nodes
        .iter()
        .map(|n| n.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let deadline = Instant::now() + WAIT;
    loop {
        let run = until_ok(&["cluster", "describe"], &bootstrap);
        let racks = ["Node: 1 ", "Node: 2 ", "Node: 3 "]
            .iter()
            .zip(["Rack: a ", "Rack: a ", "Rack: b "])
            .all(|(node, rack)| {
                run.stdout
                    .lines()
                    .any(|l| l.contains(node) && l.contains(rack))
            });
        if racks {
            break;
        }
        assert!(Instant::now() < deadline, "racks in {run:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    until_ok(
        &[
            "topics",
            "create",
            "spread",
            "--partitions",
            "6",
            "--replication-factor",
            "2",
        ],
        &bootstrap,
    );
    let generate = [
        "reassign",
        "--generate",
        "--topics",
        "spread",
        "--brokers",
        "1,2,3",
    ];
    let run = until_ok(&generate, &bootstrap);
    let placed = plan_after(&run.stdout, "Current partition replica assignment");
    assert_eq!(placed.len(), 6);
    assert!(spans_both_racks(&placed), "placed: {placed:?}");
    let proposed = plan_after(&run.stdout, "Proposed partition reassignment configuration");
    assert!(spans_both_racks(&proposed), "proposed: {proposed:?}");
    // Without racks, 6 partitions of 2 replicas over 3 nodes put 2 of them on 1 and 2.
    let mut unaware = generate.to_vec();
    unaware.push("--disable-rack-aware");
    let run = until_ok(&unaware, &bootstrap);
    let proposed = plan_after(&run.stdout, "Proposed partition reassignment configuration");
    assert!(!spans_both_racks(&proposed), "rack-unaware: {proposed:?}");
}
