//! `tidelog perf cluster` on a small load: one `tidelog serve` child process, then three
//! with a quorum, each driven with Produce at acks=1 and acks=all (and acks=all with
//! `durable.acks` on the three). Checks the JSON line's fields for every configuration,
//! that the ratios are the ones of its rates, that the single node's log holds every
//! record sent to it exactly once, and that a bad option is refused before any node
//! starts; no timing is asserted.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

const RECORDS: i64 = 3000;
const LATENCY_RECORDS: i64 = 400;

#[test]
fn perf_cluster_reports_every_configuration_and_writes_each_record_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("run");
    let out = ok(tidelog_raw(
        &[
            "perf",
            "cluster",
            "--records",
            &RECORDS.to_string(),
            "--batch",
            "100",
            "--latency-records",
            &LATENCY_RECORDS.to_string(),
            "--data",
            data.to_str().unwrap(),
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert_eq!(field(line, "mode"), "cluster");
    assert_eq!(number(line, "records"), RECORDS as f64);
    assert_eq!(number(line, "latency_records"), LATENCY_RECORDS as f64);
    for config in [
        "rf1_acks1",
        "rf1_acksall",
        "rf3_acks1",
        "rf3_acksall",
        "rf3_acksall_durable",
    ] {
        let n = |k: &str| number(line, &format!("{config}_{k}"));
        assert!(n("records_per_s") > 0.0, "{config}: {line}");
        assert!(n("paced_rate") > 0.0, "{config}: {line}");
        assert!(n("ack_p50_us") > 0.0, "{config}: {line}");
        assert!(n("ack_p50_us") <= n("ack_p99_us"), "{config}: {line}");
        let (p50, p99, p999) = (n("paced_p50_us"), n("paced_p99_us"), n("paced_p999_us"));
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{config}: {line}");
    }
    let rate = |c: &str| number(line, &format!("{c}_records_per_s"));
    let close =
        |reported: f64, computed: f64| (reported - computed).abs() <= 0.001 + computed * 1e-3;
    assert!(
        close(
            number(line, "rf3_acksall_vs_rf1_acks1"),
            rate("rf3_acksall") / rate("rf1_acks1")
        ),
        "{line}"
    );
    assert!(
        close(
            number(line, "rf3_acksall_durable_vs_rf3_acksall"),
            rate("rf3_acksall_durable") / rate("rf3_acksall")
        ),
        "{line}"
    );

    // The single node's log (kept by --data): the readiness probe's record, then each
    // run's records, acks=1 and acks=all, throughput and paced, once each.
    assert!(
        data.join("single-1.log").is_file(),
        "the node's log is kept"
    );
    let broker = tidelog::Broker::open(data.join("single-1")).unwrap();
    let topic = broker.topic("perf-cluster-rf1").unwrap();
    let end: i64 = topic.partitions().iter().map(|p| p.log_end_offset()).sum();
    assert_eq!(end, 1 + 2 * (RECORDS + LATENCY_RECORDS));
}

#[test]
fn perf_cluster_refuses_a_zero_batch_before_starting_a_node() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("run");
    err(
        tidelog_raw(
            &[
                "perf",
                "cluster",
                "--batch",
                "0",
                "--data",
                data.to_str().unwrap(),
            ],
            "",
        ),
        1,
        "--batch",
    );
    assert!(!data.join("single-1").exists(), "no node was started");
}
