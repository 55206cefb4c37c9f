//! `tidelog perf consume --bootstrap` and `perf pubsub --producer --bootstrap`: the
//! network clients' rate and end-to-end latency against a `tidelog serve` child. No
//! timing is asserted: each run reads every record and prints one JSON object.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{json_number as number, ok, tidelog_raw};

/// `tidelog perf MODE --bootstrap NODE ARGS... --json`: its one line of JSON.
fn perf_json(mode: &str, node: &str, args: &[&str]) -> String {
    let mut all = vec!["perf", mode, "--bootstrap", node];
    all.extend_from_slice(args);
    all.push("--json");
    ok(tidelog_raw(&all, "")).trim().to_string()
}

#[test]
fn perf_consume_over_the_network_reads_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let node = cli_support::serve(&tmp.path().join("node"), &[]);
    let topic = ["--topic", "remote-read"];
    let sizes = [
        "--partitions",
        "3",
        "--records",
        "3000",
        "--record-size",
        "100",
    ];
    perf_json(
        "produce",
        &node.addr,
        &[&topic[..], &sizes, &["--producer"]].concat(),
    );
    let line = perf_json("consume", &node.addr, &topic);
    assert_eq!(number(&line, "records"), 3000.0, "{line}");
    assert_eq!(number(&line, "partitions"), 3.0, "{line}");
    assert!(
        number(&line, "bytes") >= 300_000.0,
        "every value read: {line}"
    );
    assert!(number(&line, "records_per_s") > 0.0, "{line}");
    assert!(line.contains("\"remote\":true"), "{line}");
}

/// `perf pubsub --producer --bootstrap`: the throughput and the paced latency run
/// through the network producer and group consumer; every record is read and the
/// latency percentiles are reported.
#[test]
fn perf_pubsub_over_the_network_reports_rate_and_latency() {
    let tmp = tempfile::tempdir().unwrap();
    let node = cli_support::serve(&tmp.path().join("node"), &[]);
    let runs = [
        "--producer",
        "--partitions",
        "2",
        "--records",
        "2000",
        "--record-size",
        "100",
        "--latency-records",
        "200",
        "--latency-rate",
        "2000",
    ];
    let line = perf_json("pubsub", &node.addr, &runs);
    assert_eq!(number(&line, "records"), 2000.0, "{line}");
    assert_eq!(number(&line, "latency_records"), 200.0, "{line}");
    assert_eq!(number(&line, "partitions"), 2.0, "{line}");
    assert!(line.contains("\"remote\":true"), "{line}");
    for k in ["records_per_s", "p50_us", "p99_us"] {
        assert!(number(&line, k) > 0.0, "{k}: {line}");
    }
    assert!(number(&line, "p50_us") <= number(&line, "p99_us"), "{line}");
}
