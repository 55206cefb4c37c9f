//! `tidelog perf` with the options a benchmark harness passes: each mode runs
//! on small numbers and prints one JSON object with the fields the script reads. No
//! timing is asserted.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};
use tidelog::producer::partition_for_key;

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
    assert_percentiles(line);
    // What the machine's memory management did meanwhile (Linux's /proc/vmstat).
    #[cfg(target_os = "linux")]
    for key in [
        "machine_compact_stalls",
        "machine_direct_reclaims",
        "machine_reclaimed_pages",
    ] {
        assert!(number(line, key) >= 0.0, "{key}: {line}");
    }
    // The latency run's threads' involuntary switches, and its records late by more
    // than a millisecond: at most all of them.
    for key in [
        "latency_producer_involuntary_cs",
        "latency_consumer_involuntary_cs",
    ] {
        assert!(number(line, key) >= 0.0, "{key}: {line}");
    }
    let late = number(line, "latency_over_1ms");
    assert!((0.0..=2000.0).contains(&late), "{line}");
    assert_eq!(
        late == 0.0,
        number(line, "max_us") <= 1000.0,
        "records over 1 ms exactly when the slowest is: {line}"
    );

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

/// The latency percentiles of a pubsub line are positive and in order.
fn assert_percentiles(line: &str) {
    let (p50, p99, p999) = (
        number(line, "p50_us"),
        number(line, "p99_us"),
        number(line, "p999_us"),
    );
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{line}");
}

/// The keys `perf --keys K` gives records `0..n`, in order.
fn model_keys(n: usize, k: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("key-{:08}", i % k).into_bytes())
        .collect()
}

/// `perf produce --json` of 2000 records of 100 bytes over 16 keys into topic `keyed`
/// of 8 partitions, with `extra` arguments; its output.
fn keyed_perf_produce(d: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "perf",
        "produce",
        "--data",
        d,
        "--topic",
        "keyed",
        "--partitions",
        "8",
        "--keys",
        "16",
        "--records",
        "2000",
        "--record-size",
        "100",
        "--json",
    ];
    args.extend_from_slice(extra);
    ok(tidelog_raw(&args, ""))
}

#[test]
fn perf_produce_keys_go_to_the_default_partitioners_partition() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    let out = keyed_perf_produce(d, &["--batch", "10"]);
    let line = out.trim();
    assert_eq!(number(line, "records"), 2000.0);
    assert_eq!(number(line, "partitions"), 8.0);
    assert_eq!(number(line, "keys"), 16.0);

    // perf consume reads every partition of the keyed topic.
    let out = ok(tidelog_raw(
        &["perf", "consume", "--data", d, "--topic", "keyed", "--json"],
        "",
    ));
    assert_eq!(number(out.trim(), "records"), 2000.0);
    assert_eq!(number(out.trim(), "bytes"), 200_000.0);

    check_keyed_placement(&data, "keyed", 2000, 16, Some(10));
}

/// Checks the model of a keyed perf run of `n` records over `k` keys into topic
/// `name` of 8 partitions: record i has key i mod k and lies in
/// partition_for_key(key, 8), after every earlier record of that partition; batches hold
/// at most `max_batch` records when given.
fn check_keyed_placement(
    data: &std::path::Path,
    name: &str,
    n: usize,
    k: usize,
    max_batch: Option<i32>,
) {
    let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 8];
    for key in model_keys(n, k) {
        want[partition_for_key(&key, 8) as usize].push(key);
    }
    let broker = tidelog::Broker::open(data).unwrap();
    let topic = broker.topic(name).unwrap();
    assert_eq!(topic.partition_count(), 8);
    let mut non_empty = 0;
    for (i, p) in topic.partitions().iter().enumerate() {
        let mut got = Vec::new();
        let mut pos = p.log_start_offset();
        while pos < p.high_watermark() {
            let slice = p.read(pos, 1 << 20).unwrap();
            for batch in slice.batches() {
                if let Some(max) = max_batch {
                    assert!(
                        batch.record_count() <= max,
                        "at most --batch records a batch"
                    );
                }
                for r in batch.records() {
                    let r = r.unwrap();
                    let key = r.key.expect("every record has a key");
                    assert_eq!(partition_for_key(key, 8), i as i32, "key {key:?}");
                    assert_eq!(r.value.map(<[u8]>::len), Some(100));
                    got.push(key.to_vec());
                }
            }
            pos = slice.next_offset();
        }
        assert_eq!(got, want[i], "keys of partition {i}, in order");
        non_empty += usize::from(!got.is_empty());
    }
    assert!(non_empty >= 2, "{non_empty} partitions hold records");
    drop(topic);
    broker.close().unwrap();
}

#[test]
fn perf_produce_through_the_producer_api_keeps_keyed_placement_and_order() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    let out = keyed_perf_produce(d, &["--producer"]);
    let line = out.trim();
    assert_eq!(field(line, "api"), "producer");
    assert_eq!(number(line, "records"), 2000.0);
    assert!(number(line, "records_per_s") > 0.0, "{line}");
    check_keyed_placement(&data, "keyed", 2000, 16, None);
    // --batch belongs to the partition API: with --producer it is refused.
    err(
        tidelog_raw(
            &[
                "perf",
                "produce",
                "--data",
                d,
                "--topic",
                "x",
                "--records",
                "1",
                "--record-size",
                "1",
                "--batch",
                "5",
                "--producer",
            ],
            "",
        ),
        2,
        "cannot be used with",
    );
}

#[test]
fn perf_pubsub_reads_every_partition_of_a_keyed_topic() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("data");
    let d = d.to_str().unwrap();
    let args = [
        "perf",
        "pubsub",
        "--data",
        d,
        "--partitions",
        "8",
        "--keys",
        "16",
        "--records",
        "5000",
        "--record-size",
        "100",
        "--latency-records",
        "200",
        "--json",
    ];
    let out = ok(tidelog_raw(&args, ""));
    let line = out.trim();
    assert_eq!(field(line, "mode"), "pubsub");
    assert_eq!(number(line, "records"), 5000.0);
    assert_eq!(number(line, "partitions"), 8.0);
    assert_eq!(number(line, "keys"), 16.0);
    assert_eq!(number(line, "latency_records"), 200.0);

    // A second run starts from the end of the first; its topic is perf-pubsub-8.
    let out = ok(tidelog_raw(&args, ""));
    assert_eq!(number(out.trim(), "records"), 5000.0);
    let out = ok(tidelog_raw(
        &["topics", "describe", "perf-pubsub-8", "--data", d],
        "",
    ));
    assert!(out.contains("PartitionCount: 8"), "{out}");

    // A topic grown since is refused, naming both counts.
    ok(tidelog_raw(
        &[
            "topics",
            "alter",
            "perf-pubsub-8",
            "--partitions",
            "9",
            "--data",
            d,
        ],
        "",
    ));
    let line = err(tidelog_raw(&args, ""), 1, "perf-pubsub-8");
    assert!(
        line.contains("has 9 partitions") && line.contains("8"),
        "{line}"
    );
}

#[test]
fn perf_consume_group_and_pubsub_producer_go_through_the_application_apis() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    keyed_perf_produce(d, &["--batch", "50"]);

    // The same records through a member of a new group, every one of every partition.
    let out = ok(tidelog_raw(
        &[
            "perf", "consume", "--data", d, "--topic", "keyed", "--group", "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(field(line, "api"), "group");
    assert_eq!(number(line, "records"), 2000.0);
    assert_eq!(number(line, "bytes"), 200_000.0);
    assert!(number(line, "join_seconds") > 0.0, "{line}");

    // Three Producer threads, one group member.
    let out = ok(tidelog_raw(
        &[
            "perf",
            "pubsub",
            "--data",
            d,
            "--producer",
            "--threads",
            "3",
            "--partitions",
            "4",
            "--keys",
            "16",
            "--records",
            "6000",
            "--record-size",
            "100",
            "--latency-records",
            "500",
            "--latency-rate",
            "50000",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(field(line, "mode"), "pubsub");
    assert_eq!(field(line, "api"), "producer");
    assert_eq!(number(line, "threads"), 3.0);
    assert_eq!(number(line, "records"), 6000.0);
    assert_eq!(number(line, "latency_records"), 500.0);
    assert_percentiles(line);
    let broker = tidelog::Broker::open(&data).unwrap();
    let ends = |name: &str| -> i64 {
        let t = broker.topic(name).unwrap();
        t.partitions().iter().map(|p| p.log_end_offset()).sum()
    };
    assert_eq!(ends("perf-pubsub-4"), 6000, "every record once");
    assert_eq!(
        ends("perf-latency"),
        501,
        "the latency records and one warm-up record"
    );
    broker.close().unwrap();

    // --threads is for --producer runs.
    err(
        tidelog_raw(
            &[
                "perf",
                "pubsub",
                "--data",
                d,
                "--records",
                "10",
                "--record-size",
                "10",
                "--threads",
                "2",
            ],
            "",
        ),
        2,
        "--producer",
    );
}

/// `perf produce --transactional`: in each of `--rounds` rounds the records go in
/// transactions of `--txn-records` (the last one shorter), all committed; each round,
/// the commit latencies and the rate of the non-transactional producer of the same
/// run are reported. No timing is asserted.
#[test]
fn perf_produce_transactional_commits_every_transaction() {
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
            "txn",
            "--records",
            "2500",
            "--record-size",
            "100",
            "--transactional",
            "--txn-records",
            "1000",
            "--rounds",
            "2",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(field(line, "mode"), "produce");
    assert_eq!(number(line, "transactions"), 6.0);
    assert_eq!(number(line, "txn_records"), 1000.0);
    assert_eq!(number(line, "rounds"), 2.0);
    for k in [
        "records_per_s",
        "commit_p50_us",
        "commit_p99_us",
        "producer_records_per_s",
        "ratio_to_producer",
    ] {
        assert!(number(line, k) > 0.0, "{k}: {line}");
    }
    assert!(number(line, "commit_p99_us") >= number(line, "commit_p50_us"));
    // One entry per round, the plain run first in the first round, then alternating.
    assert!(
        line.contains("\"round\":1,\"first\":\"plain\"")
            && line.contains("\"round\":2,\"first\":\"transactional\""),
        "{line}"
    );
    // Every record committed: a read_committed reader sees all of them.
    let read = ok(tidelog_raw(
        &[
            "consume",
            "--data",
            d,
            "txn",
            "--from-beginning",
            "-e",
            "--isolation-level",
            "read_committed",
            "-f",
            "%o\n",
        ],
        "",
    ));
    assert_eq!(read.lines().count(), 5000, "both rounds' records");
}

/// `perf produce --transactional --bootstrap`: the same two runs through the network
/// producer against a running node; every transaction is committed there (a
/// read_committed consumer over the network reads every record). No timing is asserted.
#[cfg(feature = "server")]
#[test]
fn perf_produce_transactional_over_the_network_commits_every_transaction() {
    let tmp = tempfile::tempdir().unwrap();
    let node = cli_support::serve(&tmp.path().join("node"), &[]);
    let out = ok(tidelog_raw(
        &[
            "perf",
            "produce",
            "--bootstrap",
            &node.addr,
            "--topic",
            "txn",
            "--partitions",
            "2",
            "--records",
            "1500",
            "--record-size",
            "100",
            "--transactional",
            "--txn-records",
            "500",
            "--rounds",
            "1",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(number(line, "transactions"), 3.0, "{line}");
    assert_eq!(number(line, "partitions"), 2.0, "{line}");
    for k in ["records_per_s", "commit_p50_us", "producer_records_per_s"] {
        assert!(number(line, k) > 0.0, "{k}: {line}");
    }
    // EndTxn answers once the commit is decided; the markers that end a transaction on
    // its partitions are written after (as in Kafka), so a read_committed reader may
    // find the last transaction still open and stop (`-e`) at its start. Read the whole
    // topic again until a read has every record (each once); no consumer group, whose
    // rebalances on a loaded machine would only slow the reads down.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut reads = Vec::new();
    loop {
        let read = ok(tidelog_raw(
            &[
                "consume",
                "txn",
                "--bootstrap",
                &node.addr,
                "--from-beginning",
                "-e",
                "--isolation-level",
                "read_committed",
                "-f",
                "%p %o\n",
            ],
            "",
        ));
        let mut seen = std::collections::BTreeSet::new();
        for line in read.lines() {
            assert!(
                seen.insert(line.to_string()),
                "{line} read twice in one read"
            );
        }
        reads.push(seen.len());
        if seen.len() >= 1500 || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        reads.last().copied(),
        Some(1500),
        "every committed record, once (records read by each read: {reads:?})"
    );
}
