//! `tidelog perf consume --bootstrap`: the network `Consumer`'s rate against a
//! `tidelog serve` child, after `perf produce --producer --bootstrap` filled the topic.
//! No timing is asserted: the run reads every record and prints one JSON object.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{json_number as number, ok, tidelog_raw};

#[test]
fn perf_consume_over_the_network_reads_every_record() {
    let tmp = tempfile::tempdir().unwrap();
    let node = cli_support::serve(&tmp.path().join("node"), &[]);
    ok(tidelog_raw(
        &[
            "perf",
            "produce",
            "--bootstrap",
            &node.addr,
            "--producer",
            "--topic",
            "remote-read",
            "--partitions",
            "3",
            "--records",
            "3000",
            "--record-size",
            "100",
            "--json",
        ],
        "",
    ));
    let out = ok(tidelog_raw(
        &[
            "perf",
            "consume",
            "--bootstrap",
            &node.addr,
            "--topic",
            "remote-read",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(number(line, "records"), 3000.0, "{line}");
    assert_eq!(number(line, "partitions"), 3.0, "{line}");
    assert!(
        number(line, "bytes") >= 300_000.0,
        "every value read: {line}"
    );
    assert!(number(line, "records_per_s") > 0.0, "{line}");
    assert!(line.contains("\"remote\":true"), "{line}");
}
