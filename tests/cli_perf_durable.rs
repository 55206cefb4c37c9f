//! `tidelog perf produce --durable --threads T` with the options
//! `../shared/peers/compare.sh` passes: one JSON object with the rate, the
//! acknowledgement latency (`p50_us`, `p99_us`) and the fsyncs made, consistent with
//! each other; the records are in the topic afterwards. Refusals are typed. No timing is
//! asserted.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

/// `tidelog perf produce --durable` into `data` with `threads`, `records` and
/// `record_size`, plus `more`.
fn durable_run(
    data: &str,
    threads: &str,
    records: &str,
    record_size: &str,
    more: &[&str],
) -> cli_support::Run {
    let mut args = vec![
        "perf",
        "produce",
        "--data",
        data,
        "--topic",
        "durable",
        "--durable",
        "--threads",
        threads,
        "--records",
        records,
        "--record-size",
        record_size,
    ];
    args.extend_from_slice(more);
    tidelog_raw(&args, "")
}

#[test]
fn perf_produce_durable_threads_prints_consistent_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();
    let out = ok(durable_run(d, "4", "400", "100", &["--json"]));
    let line = out.trim();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert_eq!(field(line, "mode"), "produce");
    assert_eq!(field(line, "api"), "producer");
    assert_eq!(field(line, "durable"), "true");
    assert_eq!(number(line, "records"), 400.0);
    assert_eq!(number(line, "record_bytes"), 100.0);
    assert_eq!(number(line, "threads"), 4.0);
    assert_eq!(number(line, "batch"), 1.0);
    let seconds = number(line, "seconds");
    let rate = number(line, "records_per_s");
    assert!(seconds > 0.0 && rate > 0.0, "{line}");
    assert!(
        (rate * seconds - 400.0).abs() < 1.0,
        "records_per_s x seconds is the record count: {line}"
    );
    let fsyncs = number(line, "fsyncs");
    assert!(
        (1.0..=400.0).contains(&fsyncs),
        "at least one fsync, at most one per record: {line}"
    );
    let per_fsync = number(line, "records_per_fsync");
    assert!((per_fsync - 400.0 / fsyncs).abs() < 0.01, "{line}");
    let (p50, p99, p999, max) = (
        number(line, "p50_us"),
        number(line, "p99_us"),
        number(line, "p999_us"),
        number(line, "max_us"),
    );
    assert!(
        0.0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "latency quantiles in order: {line}"
    );

    // The records are there: a consume run reads all of them.
    let out = ok(tidelog_raw(
        &[
            "perf", "consume", "--data", d, "--topic", "durable", "--json",
        ],
        "",
    ));
    assert_eq!(number(out.trim(), "records"), 400.0);

    // The human summary names the latency and the fsyncs.
    let out = ok(durable_run(d, "1", "20", "10", &[]));
    assert!(out.contains("threads 1") && out.contains("p99_us"), "{out}");
}

#[test]
fn perf_produce_durable_refuses_what_it_cannot_do() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();
    let base = [
        "perf",
        "produce",
        "--data",
        d,
        "--topic",
        "t",
        "--records",
        "10",
        "--record-size",
        "10",
    ];
    let with = |more: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(more.iter().copied()).collect()
    };
    err(
        tidelog_raw(&with(&["--durable", "--threads", "0"]), ""),
        1,
        "--threads must be at least 1",
    );
    // --threads needs --durable; --durable sends single records (no --batch).
    err(tidelog_raw(&with(&["--threads", "4"]), ""), 2, "--durable");
    err(
        tidelog_raw(&with(&["--durable", "--batch", "10"]), ""),
        2,
        "--batch",
    );
}
