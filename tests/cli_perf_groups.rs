//! `tidelog perf groups` on a tiny load: three `tidelog serve` child processes, a few
//! groups of one member committing for two seconds. Checks the JSON line's fields and
//! that every commit and heartbeat is accounted for; no timing is asserted.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, json_field as field, json_number as number, ok, tidelog_raw};

#[test]
fn perf_groups_reports_every_commit_with_latency_and_memory() {
    let groups = 12.0;
    let seconds = 2.0;
    let out = ok(tidelog_raw(
        &[
            "perf",
            "groups",
            "--groups",
            "12",
            "--seconds",
            "2",
            "--connections",
            "1",
            "--members",
            "--json",
        ],
        "",
    ));
    let line = out.trim();
    assert_eq!(line.lines().count(), 1, "{out}");
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    assert_eq!(field(line, "mode"), "groups");
    assert_eq!(number(line, "groups"), groups);
    assert_eq!(number(line, "nodes"), 3.0);
    assert_eq!(field(line, "members"), "true");
    assert_eq!(number(line, "seconds"), seconds);
    // Every group committed once a second, each commit answered without error.
    assert_eq!(number(line, "commits"), groups * seconds, "{line}");
    assert_eq!(number(line, "commit_errors"), 0.0, "{line}");
    assert_eq!(field(line, "first_error"), "null", "{line}");
    // A heartbeat every 3 s from the start: one each in two seconds.
    assert_eq!(number(line, "heartbeats"), groups, "{line}");
    assert_eq!(number(line, "heartbeat_errors"), 0.0, "{line}");
    let (p50, p99, p999) = (
        number(line, "commit_p50_us"),
        number(line, "commit_p99_us"),
        number(line, "commit_p999_us"),
    );
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{line}");
    assert!(number(line, "commits_per_s") > 0.0, "{line}");
    assert!(number(line, "setup_seconds") > 0.0, "{line}");
    for k in [
        "rss_anon_before_bytes",
        "rss_anon_idle_bytes",
        "rss_anon_end_bytes",
    ] {
        assert!(number(line, k) > 0.0, "{k}: {line}");
    }
    // Resident memory moves with the allocator: only its presence is checked.
    number(line, "rss_per_group_bytes");
}

#[test]
fn perf_groups_refuses_no_groups() {
    err(
        tidelog_raw(&["perf", "groups", "--groups", "0"], ""),
        2,
        "--groups",
    );
}
