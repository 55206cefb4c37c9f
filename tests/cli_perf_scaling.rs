//! `tidelog perf open|recover|lookup` on tiny sizes: each prints one JSON object whose
//! fields add up (partitions opened, acknowledged records recovered after SIGKILL, a
//! lookup over the recovered log). No timing is asserted.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

/// Runs `tidelog perf ARGS... --data DATA --json` and returns its one JSON line.
fn perf_json(data: &str, args: &[&str]) -> String {
    let mut all = vec!["perf"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--data", data, "--json"]);
    let out = ok(tidelog_raw(&all, ""));
    let line = out.trim().to_string();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    line
}

#[test]
fn perf_open_reopens_every_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();

    let line = perf_json(d, &["open", "--partitions", "20"]);
    assert_eq!(field(&line, "mode"), "open");
    assert_eq!(number(&line, "partitions"), 20.0);
    assert_eq!(field(&line, "created"), "true");
    // One batch in each partition, closed cleanly: every segment is trusted.
    assert_eq!(number(&line, "segments_trusted"), 20.0);
    assert_eq!(number(&line, "segments_validated"), 0.0);
    assert_eq!(number(&line, "partitions_repaired"), 0.0);
    assert!(number(&line, "disk_bytes_written") > 0.0, "{line}");
    for k in [
        "seconds",
        "rss_after_kb",
        "vm_size_after_kb",
        "disk_bytes_closed",
    ] {
        assert!(number(&line, k) > 0.0, "{k}: {line}");
    }
    // The data is 20 batches of 10 records of 100 bytes, plus indexes and checkpoints.
    assert!(number(&line, "apparent_bytes_closed") >= 20_000.0, "{line}");

    // A second run reuses the topic.
    let line = perf_json(d, &["open", "--partitions", "20"]);
    assert_eq!(field(&line, "created"), "false");
    assert_eq!(field(&line, "disk_bytes_written"), "null");
    assert_eq!(number(&line, "segments_trusted"), 20.0);

    let out = ok(tidelog_raw(
        &["topics", "describe", "perf-open", "--data", d],
        "",
    ));
    assert!(out.contains("PartitionCount: 20"), "{out}");
    assert!(out.contains("LogEndOffset: 10\t"), "{out}");
}

#[test]
fn perf_recover_after_kill_then_lookup() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();

    let line = perf_json(d, &["recover", "--bytes", "2M"]);
    assert_eq!(field(&line, "mode"), "recover");
    let written = number(&line, "bytes_written");
    assert!(written >= 2.0 * 1024.0 * 1024.0, "{line}");
    assert_eq!(number(&line, "log_bytes"), written, "{line}");
    // Every acknowledged record survived the kill.
    assert_eq!(
        number(&line, "records"),
        number(&line, "acknowledged_end_offset")
    );
    // Killed without a checkpoint: the segment was validated; after a clean close it
    // is trusted.
    assert_eq!(number(&line, "segments"), 1.0);
    assert_eq!(number(&line, "segments_validated"), 1.0);
    assert_eq!(number(&line, "bytes_validated"), written);
    assert_eq!(number(&line, "clean_segments_trusted"), 1.0);
    assert_eq!(number(&line, "clean_bytes_validated"), 0.0);
    assert!(number(&line, "seconds") > 0.0 && number(&line, "clean_seconds") > 0.0);

    let look = perf_json(
        d,
        &["lookup", "--topic", "perf-recover", "--samples", "2000"],
    );
    assert_eq!(field(&look, "mode"), "lookup");
    assert_eq!(number(&look, "samples"), 2000.0);
    assert_eq!(number(&look, "records"), number(&line, "records"));
    assert_eq!(number(&look, "log_bytes"), written);
    let (p50, p99, p999) = (
        number(&look, "p50_us"),
        number(&look, "p99_us"),
        number(&look, "p999_us"),
    );
    assert!(p50 <= p99 && p99 <= p999, "{look}");
}

#[test]
fn perf_scaling_modes_refuse_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();
    err(
        tidelog_raw(&["perf", "recover", "--data", d, "--bytes", "2X"], ""),
        1,
        "unknown unit",
    );
    err(
        tidelog_raw(&["perf", "recover", "--data", d, "--bytes", "0"], ""),
        1,
        "is not a size",
    );
    err(
        tidelog_raw(&["perf", "open", "--data", d, "--partitions", "0"], ""),
        1,
        "--partitions must be at least 1",
    );
    err(
        tidelog_raw(&["perf", "lookup", "--data", d, "--topic", "none"], ""),
        1,
        "does not exist",
    );
}
