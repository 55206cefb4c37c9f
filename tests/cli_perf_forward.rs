//! `tidelog perf forward` on a small backlog: a `tidelog serve` child process, a local
//! topic of a few thousand records forwarded to it, in transactions and then without.
//! Checks the JSON line's fields (the run itself fails unless every record was
//! forwarded) and that `--data` names a directory it makes and keeps, with the node's
//! log and the local data; no timing is asserted.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

#[test]
fn perf_forward_forwards_a_local_backlog_with_and_without_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    for (run, transactions) in [("txn", true), ("plain", false)] {
        // Not there yet: the run makes it (and keeps it).
        let data = tmp.path().join("runs").join(run);
        let data_arg = data.to_str().unwrap();
        let mut args = vec![
            "perf",
            "forward",
            "--records",
            "3000",
            "--partitions",
            "3",
            "--data",
            data_arg,
            "--json",
        ];
        if !transactions {
            args.push("--no-transactions");
        }
        let out = ok(tidelog_raw(&args, ""));
        let line = out.trim();
        assert_eq!(line.lines().count(), 1, "{out}");
        assert_eq!(field(line, "mode"), "forward");
        assert_eq!(number(line, "records"), 3000.0);
        assert_eq!(number(line, "record_bytes"), 100.0);
        assert_eq!(number(line, "partitions"), 3.0);
        assert_eq!(field(line, "transactional"), transactions.to_string());
        assert!(number(line, "records_per_s") > 0.0, "{line}");
        assert!(number(line, "sessions") >= 1.0, "{line}");
        number(line, "session_errors");
        assert!(
            data.join("forward-1.log").is_file(),
            "the node's log is kept"
        );
        assert!(
            data.join("local").join("perf-forward-2").is_dir(),
            "the local topic's last partition is kept"
        );
    }
}

#[test]
fn perf_forward_refuses_no_records_and_no_partitions() {
    err(
        tidelog_raw(&["perf", "forward", "--records", "0"], ""),
        2,
        "--records",
    );
    err(
        tidelog_raw(&["perf", "forward", "--partitions", "0"], ""),
        2,
        "--partitions",
    );
}
