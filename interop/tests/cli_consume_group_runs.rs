//! Issue 15 over `--bootstrap`: `tidelog consume --group G --bootstrap ADDR` runs one
//! after another against a running server continue exactly where the group stands.
//! Records produced over 6 partitions, a first run with `--from-beginning -c 2500`,
//! more records, a second run with `-e`, then a third: every record is printed exactly
//! once across the runs (the first run commits every partition it owns, those it read
//! nothing from too, and nothing it did not print).

use std::collections::BTreeSet;
use std::process::Command;

use tidelog::{Broker, Producer, ProducerRecord};
use tidelog_interop::groups::serve_topic;

const TOPIC: &str = "orders";
const GROUP: &str = "audit";
const PARTITIONS: i32 = 6;

/// Runs `tidelog consume TOPIC --group GROUP --bootstrap ADDR ARGS...` to its exit and
/// returns the (partition, offset) of each line it printed.
fn consume(bootstrap: &str, args: &[&str]) -> Vec<(i32, i64)> {
    let out = Command::new(tidelog_interop::tidelog_bin())
        .args(["consume", TOPIC, "--group", GROUP, "--bootstrap", bootstrap])
        .args(["-f", "%p %o %s\\n"])
        .args(args)
        .output()
        .expect("run tidelog consume");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "consume {args:?}: {stderr}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (p, o): (i32, i64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            assert_eq!(f[2], format!("r{p}-{o}"), "the record's value");
            (p, o)
        })
        .collect()
}

/// Produces `n` records round-robin over the partitions, valued `r<partition>-<offset>`.
fn produce(broker: &Broker, n: i64) {
    let producer = Producer::new(broker).unwrap();
    let topic = broker.topic(TOPIC).unwrap();
    for i in 0..n {
        let p = (i % PARTITIONS as i64) as i32;
        let offset = topic.partition(p).unwrap().high_watermark();
        let value = format!("r{p}-{offset}");
        producer
            .send(TOPIC, ProducerRecord::new(value.as_bytes()).partition(p))
            .unwrap();
    }
    producer.flush().unwrap();
}

#[test]
fn runs_over_bootstrap_print_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(dir.path(), TOPIC, PARTITIONS);
    let bootstrap = server.local_addr().to_string();

    produce(&broker, 3000);
    let first = consume(&bootstrap, &["--from-beginning", "-c", "2500"]);
    assert_eq!(first.len(), 2500);
    produce(&broker, 600);
    let second = consume(&bootstrap, &["-e"]);
    let third = consume(&bootstrap, &["-e", "--from-beginning"]);
    assert!(third.is_empty(), "nothing left: {third:?}");

    let mut seen = BTreeSet::new();
    for (p, o) in first.iter().chain(&second) {
        assert!(seen.insert((*p, *o)), "{p}@{o} printed twice");
    }
    let all: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (0..600).map(move |o| (p, o)))
        .collect();
    assert_eq!(seen, all, "every record exactly once across the runs");

    // --bootstrap does not go with --data.
    let run = |args: &[&str]| {
        let out = Command::new(tidelog_interop::tidelog_bin())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Without --group it reads the partitions without a group (and commits nothing).
    let (code, stderr) = run(&[
        "consume",
        TOPIC,
        "-e",
        "--from-beginning",
        "--bootstrap",
        &bootstrap,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let again = consume(&bootstrap, &["-e", "--from-beginning"]);
    assert!(
        again.is_empty(),
        "a read without a group committed nothing: {again:?}"
    );
    let data = dir.path().display().to_string();
    let (code, stderr) = run(&[
        "consume",
        TOPIC,
        "-e",
        "--group",
        GROUP,
        "--bootstrap",
        &bootstrap,
        "--data",
        &data,
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--data") && stderr.contains("--bootstrap"),
        "{stderr}"
    );
    server.shutdown().unwrap();
}
