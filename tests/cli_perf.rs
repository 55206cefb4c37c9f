//! `tidelog perf` with the options `../shared/peers/compare.sh` passes: each mode runs
//! on small numbers and prints one JSON object with the fields the script reads. No
//! timing is asserted.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

#[test]
fn perf_produce_consume_pubsub_print_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();

    let out = ok(tidelog_raw(
        &[
            "perf",
            "produce",
            "--data",
            d,
            "--topic",
            "bench",
            "--records",
            "5000",
            "--record-size",
            "100",
            "--batch",
            "100",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert!(line.starts_with('{') && line.ends_with('}'));
    assert_eq!(field(line, "mode"), "produce");
    assert_eq!(number(line, "records"), 5000.0);
    assert_eq!(number(line, "record_bytes"), 100.0);
    for k in ["seconds", "records_per_s", "mb_per_s"] {
        assert!(number(line, k) > 0.0, "{k}: {line}");
    }

    let out = ok(tidelog_raw(
        &["perf", "consume", "--data", d, "--topic", "bench", "--json"],
        "",
    ));
    assert_eq!(field(out.trim(), "mode"), "consume");
    assert_eq!(number(out.trim(), "records"), 5000.0);
    assert_eq!(number(out.trim(), "bytes"), 500_000.0);

    // One record per call, several partitions, acks all; the human summary.
    let out = ok(tidelog_raw(
        &[
            "perf",
            "produce",
            "--data",
            d,
            "--topic",
            "single",
            "--records",
            "300",
            "--record-size",
            "10",
            "--batch",
            "1",
            "--partitions",
            "3",
            "--acks",
            "all",
        ],
        "",
    ));
    assert!(
        out.starts_with("produce: 300 records of 10 bytes in "),
        "{out}"
    );
    let out = ok(tidelog_raw(
        &["topics", "describe", "single", "--data", d],
        "",
    ));
    assert!(out.contains("PartitionCount: 3"), "{out}");
    assert!(
        out.contains("LogEndOffset: 100\t"),
        "batches round-robin: {out}"
    );

    let out = ok(tidelog_raw(
        &[
            "perf",
            "pubsub",
            "--data",
            d,
            "--records",
            "20000",
            "--record-size",
            "100",
            "--latency-records",
            "2000",
            "--latency-rate",
            "50000",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(field(line, "mode"), "pubsub");
    assert_eq!(number(line, "records"), 20000.0);
    assert_eq!(number(line, "latency_records"), 2000.0);
    let (p50, p99, p999) = (
        number(line, "p50_us"),
        number(line, "p99_us"),
        number(line, "p999_us"),
    );
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{line}");

    // A batch over max.message.bytes is refused before anything is timed.
    err(
        tidelog_raw(
            &[
                "perf",
                "produce",
                "--data",
                d,
                "--topic",
                "big",
                "--records",
                "10",
                "--record-size",
                "600000",
                "--batch",
                "2",
            ],
            "",
        ),
        1,
        "max.message.bytes",
    );
}
