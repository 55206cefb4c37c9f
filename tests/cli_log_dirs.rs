//! `tidelog log-dirs describe|move` against a `tidelog serve --log-dirs` child process:
//! a partition moves into the other log directory (`move --wait`), `describe` then lists
//! it there, its records are still read, and bad arguments are refused with the reason;
//! and on a cluster of three child processes, each replica of a partition in turn.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
mod server_support;

use cli_support::{
    Serve, err, loopback_quorum, ok, run_until, serve, serve_nodes_with, stop_all, tidelog,
    tidelog_raw,
};
use serde_json::Value;

/// The log directory `describe` lists `partition` in (not as a future log), of
/// `broker` (None: the only broker), and every log directory of that broker.
fn dir_of(bootstrap: &str, broker: Option<&str>, partition: &str) -> (String, Vec<String>) {
    let mut args = vec!["log-dirs", "describe", "--bootstrap", bootstrap];
    args.extend(broker.map(|b| ["--broker-list", b]).into_iter().flatten());
    let out = ok(tidelog_raw(&args, ""));
    let json: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let brokers = json["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1, "{out}");
    if let Some(b) = broker {
        assert_eq!(brokers[0]["broker"].to_string(), b, "{out}");
    }
    let dirs = brokers[0]["logDirs"].as_array().unwrap();
    let paths: Vec<String> = dirs
        .iter()
        .map(|d| d["logDir"].as_str().unwrap().to_string())
        .collect();
    let holder = dirs
        .iter()
        .find(|d| {
            d["partitions"].as_array().unwrap().iter().any(|p| {
                p["partition"].as_str() == Some(partition) && p["isFuture"] == Value::Bool(false)
            })
        })
        .unwrap_or_else(|| panic!("{partition} in {out}"));
    (holder["logDir"].as_str().unwrap().to_string(), paths)
}

/// A data directory with topic `t` (one partition) holding `records` (one a line),
/// served with `--log-dirs <root>/b` and `args`; the root, the node, and the directory
/// holding `t-0` and the other one.
fn serve_t(records: &str, args: &[&str]) -> (tempfile::TempDir, Serve, String, String) {
    let root = tempfile::tempdir().unwrap();
    let (data, extra) = (root.path().join("a"), root.path().join("b"));
    ok(tidelog(
        &data,
        &["topics", "create", "t", "--partitions", "1"],
        "",
    ));
    ok(tidelog(&data, &["produce", "t"], records));
    let mut all = vec!["--log-dirs", extra.to_str().unwrap()];
    all.extend(args);
    let node = serve(&data, &all);
    let (from, paths) = dir_of(&node.addr, None, "t-0");
    assert_eq!(paths.len(), 2, "{paths:?}");
    let to = paths.iter().find(|p| **p != from).unwrap().clone();
    (root, node, from, to)
}

/// `tidelog log-dirs move --log-dir TO --partitions t-0 ARGS --bootstrap B`: its stdout.
fn move_t0(bootstrap: &str, to: &str, args: &[&str]) -> String {
    let mut all = vec!["log-dirs", "move", "--log-dir", to, "--partitions", "t-0"];
    all.extend(args);
    all.extend(["--bootstrap", bootstrap]);
    ok(tidelog_raw(&all, ""))
}

#[test]
fn a_partition_moves_between_log_directories() {
    let (root, node, _from, to) = serve_t("one\ntwo\n", &[]);
    let b = node.addr.as_str();

    let out = move_t0(b, &to, &["--wait"]);
    assert!(out.contains("t-0: moving to"), "{out}");
    assert!(out.contains("moved 1 partition(s)"), "{out}");
    assert_eq!(dir_of(b, None, "t-0").0, to);
    let read = ok(tidelog_raw(
        &["consume", "t", "--from-beginning", "-e", "--bootstrap", b],
        "",
    ));
    assert_eq!(read.lines().collect::<Vec<_>>(), ["one", "two"], "{read}");

    // Not a log directory; not a partition; a broker that is not there.
    let elsewhere = root.path().join("elsewhere").display().to_string();
    let refused = [
        (
            vec!["--log-dir", elsewhere.as_str(), "--partitions", "t-0"],
            "LOG_DIR_NOT_FOUND",
        ),
        (
            vec!["--log-dir", to.as_str(), "--partitions", "t"],
            "is not a partition",
        ),
        (
            vec![
                "--log-dir",
                to.as_str(),
                "--partitions",
                "t-0",
                "--broker",
                "77",
            ],
            "broker 77",
        ),
    ];
    for (args, needle) in refused {
        let mut all = vec!["log-dirs", "move"];
        all.extend(args);
        all.extend(["--bootstrap", b]);
        err(tidelog_raw(&all, ""), 1, needle);
    }
    node.stop();
}

#[test]
fn a_paced_move_is_listed_as_a_future_log_while_it_copies() {
    // One byte a second: the copy does not end while the test looks.
    let (_root, node, from, to) = serve_t(
        "one\n",
        &["--replica-alter-log-dirs-io-max-bytes-per-second", "1"],
    );
    let b = node.addr.as_str();
    let out = move_t0(b, &to, &[]);
    assert!(out.contains("t-0: moving to"), "{out}");
    let out = ok(tidelog_raw(&["log-dirs", "describe", "--bootstrap", b], ""));
    let json: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let target = json["brokers"][0]["logDirs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["logDir"].as_str() == Some(to.as_str()))
        .unwrap()
        .clone();
    let future = &target["partitions"][0];
    assert_eq!(future["partition"], "t-0", "{out}");
    assert_eq!(future["isFuture"], true, "{out}");
    assert_eq!(future["offsetLag"], 1, "{out}");
    // Still served from where it was.
    assert_eq!(dir_of(b, None, "t-0").0, from);
    node.stop();
}

/// On a cluster of three `tidelog serve --node-id N --quorum ... --log-dirs ...` child
/// processes: the replica of a partition of replication factor 3 moves into each node's
/// other log directory in turn (`move --broker N --wait`: the leader's and the
/// followers'), `describe --broker-list N` then lists it there, the partition keeps its
/// records and takes more with acks=all; without `--broker` the command names the
/// cluster's brokers.
#[test]
fn each_replica_of_a_partition_moves_between_its_nodes_log_directories() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let extra = format!("{}/extra-{{id}}", root.path().display());
    // A 30 s replica lag: a follower slowed by the machine's load stays in the ISR.
    let (nodes, bootstrap) = serve_nodes_with(
        root.path(),
        &quorum,
        &["1", "2", "3"],
        &["--log-dirs", &extra, "--replica-lag-time-max-ms", "30000"],
    );
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    run_until(
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
            "--bootstrap",
            &bootstrap,
        ],
        |r| r.code == 0,
    );
    server_support::produce_acks_all(&addrs, "t", 0, &["one", "two"]);

    for broker in ["1", "2", "3"] {
        let (from, paths) = dir_of(&bootstrap, Some(broker), "t-0");
        assert_eq!(paths.len(), 2, "{paths:?}");
        let to = paths.iter().find(|p| **p != from).unwrap().clone();
        let out = ok(tidelog_raw(
            &[
                "log-dirs",
                "move",
                "--log-dir",
                &to,
                "--partitions",
                "t-0",
                "--broker",
                broker,
                "--wait",
                "--timeout-ms",
                "60000",
                "--bootstrap",
                &bootstrap,
            ],
            "",
        ));
        assert!(
            out.contains(&format!("t-0: moving to {to} on broker {broker}")),
            "{out}"
        );
        assert!(out.contains("moved 1 partition(s)"), "{out}");
        assert_eq!(
            dir_of(&bootstrap, Some(broker), "t-0").0,
            to,
            "broker {broker}"
        );
    }
    // Every replica moved: the partition still has its records, and takes more with
    // acks=all (each replica, in its new directory, copies them).
    server_support::produce_acks_all(&addrs, "t", 0, &["three"]);
    let read = ok(tidelog_raw(
        &[
            "consume",
            "t",
            "--from-beginning",
            "-e",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    ));
    assert_eq!(
        read.lines().collect::<Vec<_>>(),
        ["one", "two", "three"],
        "{read}"
    );

    // Without --broker, on a cluster of three: refused, naming them.
    let (_, paths) = dir_of(&bootstrap, Some("1"), "t-0");
    err(
        tidelog_raw(
            &[
                "log-dirs",
                "move",
                "--log-dir",
                &paths[0],
                "--partitions",
                "t-0",
                "--bootstrap",
                &bootstrap,
            ],
            "",
        ),
        1,
        "give --broker ID",
    );
    assert!(stop_all(nodes).iter().all(|c| *c == Some(0)));
}
