//! `tidelog consume --group G` is a member of group G, as Kafka's console consumer: on
//! exit it commits the position of every partition assigned to it (one it read nothing
//! from at its reset position), and `--from-beginning` applies only to partitions
//! without a committed offset. So successive runs deliver every record exactly once,
//! including records produced between runs.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const PARTITIONS: usize = 6;

/// A fresh data directory with topic `events` of `partitions` partitions.
fn events(partitions: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    ok(tidelog(
        &data,
        &["topics", "create", "events", "--partitions", partitions],
        "",
    ));
    (tmp, data)
}

/// Produces records `from..to` keyed `k{i}`, valued `v{i}` (murmur2 spreads them over
/// the partitions).
fn produce(data: &Path, from: u32, to: u32) {
    let input: String = (from..to).map(|i| format!("k{i}:v{i}\n")).collect();
    ok(tidelog(data, &["produce", "events", "-K", ":"], &input));
}

/// Runs `consume events -g GROUP EXTRA...` printing `partition value` lines; returns the
/// values printed.
fn consume(data: &Path, group: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["consume", "events", "-g", group, "-f", "%p %s\\n"];
    args.extend_from_slice(extra);
    ok(tidelog(data, &args, ""))
        .lines()
        .map(|l| l.split_once(' ').expect("partition value").1.to_string())
        .collect()
}

/// Counts how often each value was delivered over several runs.
fn tally(runs: &[&[String]]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for v in runs.iter().flat_map(|r| r.iter()) {
        *seen.entry(v.clone()).or_insert(0) += 1;
    }
    seen
}

#[test]
fn successive_runs_deliver_every_record_exactly_once() {
    let (_tmp, data) = events("6");
    produce(&data, 0, 2_500);
    let spread = ok(tidelog(&data, &["topics", "describe", "events"], ""));
    assert_eq!(
        spread.matches("LogEndOffset: 0\t").count(),
        0,
        "every partition holds records: {spread}"
    );

    // Stops in the middle of what it was handed: only what it printed is committed,
    // and the partitions it never got to are committed at the beginning.
    let first = consume(&data, "g", &["--from-beginning", "-c", "1000"]);
    assert_eq!(first.len(), 1_000);
    let described = ok(tidelog(&data, &["groups", "describe", "g"], ""));
    assert_eq!(
        described
            .lines()
            .filter(|l| l.starts_with("g\tevents\t"))
            .count(),
        PARTITIONS,
        "a committed offset for every partition: {described}"
    );
    // --from-beginning no longer applies: every partition has a committed offset.
    let second = consume(&data, "g", &["--from-beginning", "-e"]);
    assert_eq!(second.len(), 1_500);
    produce(&data, 2_500, 3_000);
    let third = consume(&data, "g", &["-e"]);
    assert_eq!(third.len(), 500);
    assert!(consume(&data, "g", &["-e"]).is_empty(), "nothing is left");

    let seen = tally(&[&first, &second, &third]);
    assert_eq!(seen.len(), 3_000, "every record delivered");
    assert!(seen.values().all(|&n| n == 1), "none twice");
    let described = ok(tidelog(&data, &["groups", "describe", "g"], ""));
    let lags: Vec<&str> = described
        .lines()
        .filter(|l| l.starts_with("g\tevents\t"))
        .map(|l| l.split('\t').nth(5).unwrap())
        .collect();
    assert_eq!(lags, ["0"; PARTITIONS], "{described}");
}

#[test]
fn a_new_group_at_latest_commits_the_end_and_gets_what_comes_next() {
    let (_tmp, data) = events("3");
    produce(&data, 0, 100);
    // The default reset is latest: nothing printed, but the end is committed.
    assert!(consume(&data, "late", &["-e"]).is_empty());
    produce(&data, 100, 150);
    let next = consume(&data, "late", &["-e"]);
    let mut values: Vec<u32> = next.iter().map(|v| v[1..].parse().unwrap()).collect();
    values.sort_unstable();
    assert_eq!(values, (100..150).collect::<Vec<_>>());
}

#[test]
fn a_group_member_reads_what_the_group_assigns_not_chosen_partitions() {
    let (_tmp, data) = events("1");
    for conflicting in [
        &["-p", "0"][..],
        &["-o", "beginning"],
        &["--timestamp", "0"],
    ] {
        let mut args = vec!["consume", "events", "-g", "g", "-e"];
        args.extend_from_slice(conflicting);
        err(tidelog(&data, &args, ""), 2, "cannot be used with");
    }
}
