//! `tidelog log-dirs describe|move` against a `tidelog serve --log-dirs` child process:
//! a partition moves into the other log directory (`move --wait`), `describe` then lists
//! it there, its records are still read, and bad arguments are refused with the reason.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{Serve, err, ok, serve, tidelog, tidelog_raw};
use serde_json::Value;

/// The log directory `describe` lists `partition` in (not as a future log), of the only
/// broker.
fn dir_of(bootstrap: &str, partition: &str) -> (String, Vec<String>) {
    let out = ok(tidelog_raw(
        &["log-dirs", "describe", "--bootstrap", bootstrap],
        "",
    ));
    let json: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let dirs = json["brokers"][0]["logDirs"].as_array().unwrap();
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
    let (from, paths) = dir_of(&node.addr, "t-0");
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
    assert_eq!(dir_of(b, "t-0").0, to);
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
    assert_eq!(dir_of(b, "t-0").0, from);
    node.stop();
}
