//! Every error of the `tidelog` command line is one `error: ...` line naming the
//! problem with exit code 1 (2 for usage errors, as clap reports them), writes
//! nothing, and never panics.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog, tidelog_raw};

#[test]
fn errors_name_the_problem_and_exit_1_or_2() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let t = |args: &[&str]| tidelog(&data, args, "");

    // A read-only command on a missing data directory does not create it.
    err(t(&["topics", "list"]), 1, "does not exist");
    assert!(!data.exists());
    // Bad config key or value, bad name, bad partition count: nothing is created.
    err(
        t(&["topics", "create", "a", "--config", "retention.ms=soon"]),
        1,
        "retention.ms",
    );
    err(
        t(&["topics", "create", "a", "--config", "colour=blue"]),
        1,
        "colour",
    );
    err(
        t(&["topics", "create", "a", "--config", "novalue"]),
        1,
        "KEY=VALUE",
    );
    err(
        t(&["topics", "create", "bad/name"]),
        1,
        "invalid topic name",
    );
    err(
        t(&["topics", "create", "a", "--partitions", "0"]),
        1,
        "at least 1",
    );
    assert!(!data.exists(), "a refused create writes nothing");

    ok(t(&["topics", "create", "a"]));
    err(t(&["topics", "create", "a"]), 1, "already exists");
    ok(t(&["topics", "create", "a", "--if-not-exists"]));
    // Unknown topic, everywhere a topic is named.
    for args in [
        &["produce", "nope"][..],
        &["consume", "nope", "-e"],
        &["topics", "describe", "nope"],
        &["topics", "delete", "nope"],
        &["topics", "alter", "nope", "--partitions", "3"],
        &[
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "nope",
            "--to-earliest",
        ],
        &["perf", "consume", "--topic", "nope"],
    ] {
        err(t(args), 1, "unknown topic \"nope\"");
    }
    // Unknown partition, bad offset, bad time, malformed formats, bad header.
    err(
        t(&["consume", "a", "-p", "7", "-e"]),
        1,
        "unknown partition 7",
    );
    err(t(&["produce", "a", "-p", "7"]), 1, "unknown partition 7");
    err(
        t(&["consume", "a", "-o", "5", "-e"]),
        1,
        "offset 5 is out of range for a-0",
    );
    err(
        t(&["consume", "a", "-o", "soon", "-e"]),
        1,
        "is not an offset",
    );
    err(
        t(&["consume", "a", "--timestamp", "yesterday", "-e"]),
        1,
        "--timestamp",
    );
    for (fmt, what) in [
        ("%q", "unknown token %q"),
        ("%", "a lone"),
        ("\\x", "unknown escape"),
    ] {
        err(t(&["consume", "a", "-e", "-f", fmt]), 1, what);
    }
    err(
        tidelog(&data, &["produce", "a", "-H", "nokey"], "x\n"),
        1,
        "KEY=VALUE",
    );
    err(
        t(&["topics", "alter", "a", "--config", "retention.ms=-5x"]),
        1,
        "retention.ms",
    );
    err(
        t(&["topics", "delete", "__consumer_offsets"]),
        1,
        "cannot be deleted",
    );
    // Nothing was produced by the refused commands.
    assert_eq!(ok(t(&["consume", "a", "--from-beginning", "-e"])), "");

    // A data directory held by another process: what writes is refused, what only
    // reads opens it read-only (and says so).
    let broker = tidelog::Broker::open(&data).unwrap();
    err(
        t(&["produce", "a"]),
        1,
        "in use by another tidelog instance",
    );
    let listed = t(&["topics", "list"]);
    assert!(
        listed
            .stderr
            .contains("is opened read-only (another process holds it"),
        "{listed:?}"
    );
    assert_eq!(ok(listed), "__consumer_offsets\na\n");
    assert_eq!(ok(t(&["consume", "a", "-e"])), "");
    drop(broker);
    ok(t(&["topics", "list"]));
    // A data directory that is a file.
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    err(
        tidelog(&file, &["topics", "list"], ""),
        1,
        "is not a directory",
    );

    // Usage errors: clap's exit code 2.
    err(t(&["topics"]), 2, "Usage");
    err(t(&["consume"]), 2, "TOPIC");
    err(
        t(&["consume", "a", "--from-beginning", "-o", "1"]),
        2,
        "cannot be used with",
    );
    err(
        t(&["groups", "reset-offsets", "g", "--topic", "a"]),
        2,
        "--to-earliest",
    );
    err(
        t(&[
            "perf",
            "produce",
            "--topic",
            "x",
            "--records",
            "ten",
            "--record-size",
            "1",
        ]),
        2,
        "ten",
    );
    err(tidelog_raw(&["frobnicate"], ""), 2, "frobnicate");
    err(t(&["topics", "alter", "a"]), 2, "required");
}
