//! `tidelog perf fetch` on a small topic: a `tidelog serve` child process, full
//! fetches, then incremental fetches in a session. Checks the JSON line's fields, that
//! an incremental fetch of idle partitions asks and answers fewer bytes than a full one,
//! and that `--data` names a directory it makes and keeps; no timing is asserted.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

#[test]
fn perf_fetch_measures_full_and_incremental_fetches_in_a_directory_it_makes() {
    let tmp = tempfile::tempdir().unwrap();
    // Not there yet: the run makes it (and keeps it, with the node's log).
    let data = tmp.path().join("runs").join("fetch");
    let data_arg = data.to_str().unwrap();
    let out = ok(tidelog_raw(
        &[
            "perf",
            "fetch",
            "--partitions",
            "20",
            "--seconds",
            "1",
            "--data",
            data_arg,
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert_eq!(field(line, "mode"), "fetch");
    assert_eq!(number(line, "partitions"), 20.0);
    assert_eq!(number(line, "fetch_version"), 12.0);
    for mode in ["sessionless", "session"] {
        let fetches = number(line, &format!("{mode}_fetches"));
        assert!(fetches >= 1.0, "{mode}: {line}");
        let cpu = number(line, &format!("{mode}_cpu_us_per_fetch"));
        assert!(cpu >= 0.0, "{mode}: {line}");
        let (p50, p99) = (
            number(line, &format!("{mode}_p50_us")),
            number(line, &format!("{mode}_p99_us")),
        );
        assert!(p50 > 0.0 && p50 <= p99, "{mode}: {line}");
    }
    // A full fetch names every partition and is answered with each; an incremental one
    // of idle partitions names none and is answered with none.
    let bytes = |k: &str| number(line, k);
    assert!(
        bytes("session_request_bytes") * 5.0 < bytes("sessionless_request_bytes"),
        "{line}"
    );
    assert!(
        bytes("session_response_bytes") * 5.0 < bytes("sessionless_response_bytes"),
        "{line}"
    );
    number(line, "session_vs_sessionless_cpu");
    assert!(data.join("fetch-1.log").is_file(), "the node's log is kept");
}

#[test]
fn perf_fetch_refuses_no_partitions() {
    err(
        tidelog_raw(&["perf", "fetch", "--partitions", "0"], ""),
        2,
        "--partitions",
    );
}
