//! `tidelog consume --group G --bootstrap` on a three-node cluster of `tidelog serve`
//! child processes: the member finds the group's coordinator, fetches each partition
//! from its leader (the leaders are spread over the nodes), prints every record once,
//! commits on exit, and a later run prints only what was produced since.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::BaseProducer;
use tidelog_interop::cluster::{Processes, eventually, produce_values};

const WAIT: Duration = Duration::from_secs(45);
const TOPIC: &str = "spread";
const GROUP: &str = "readers";
const PARTITIONS: i32 = 6;

/// Runs `tidelog ARGS...`: exit code, stdout, stderr.
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(tidelog_interop::tidelog_bin())
        .args(args)
        .output()
        .expect("run tidelog");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// True when a partition row of `topics describe` has three in-sync replicas.
fn isr_full(row: &str) -> bool {
    row.split('\t')
        .find_map(|f| f.strip_prefix("Isr: "))
        .is_some_and(|isr| isr.split(',').count() == 3)
}

/// One `consume --group --bootstrap -e` run: the (partition, offset) of each line.
fn consume(bootstrap: &str, from_beginning: bool) -> Vec<(i32, i64)> {
    let mut args = vec!["consume", TOPIC, "--group", GROUP, "--bootstrap", bootstrap];
    args.extend(["-e", "-f", "%p %o %s\\n"]);
    if from_beginning {
        args.push("--from-beginning");
    }
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (p, o): (i32, i64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
            assert_eq!(f[2], format!("v{p}-{o}"), "the record's value");
            (p, o)
        })
        .collect()
}

#[test]
fn a_console_member_reads_a_cluster_from_each_leader() {
    let root = tempfile::tempdir().unwrap();
    let nodes = Processes::start(tidelog_interop::tidelog_bin(), root.path(), 3, &[]);
    let bootstrap = nodes.layout.bootstrap();
    let b = bootstrap.as_str();
    let partitions = PARTITIONS.to_string();
    // The cluster is up once __consumer_offsets has three in-sync replicas.
    eventually("__consumer_offsets on 3 nodes", WAIT, || {
        let (code, out, _) = cli(&[
            "topics",
            "describe",
            tidelog::OFFSETS_TOPIC,
            "--bootstrap",
            b,
        ]);
        (code == 0 && out.lines().nth(1).is_some_and(isr_full)).then_some(())
    });
    eventually("the topic created", WAIT, || {
        let (code, _, err) = cli(&[
            "topics",
            "create",
            TOPIC,
            "--partitions",
            &partitions,
            "--replication-factor",
            "3",
            "--if-not-exists",
            "--bootstrap",
            b,
        ]);
        if code != 0 {
            eprintln!("topics create: {err}");
        }
        (code == 0).then_some(())
    });
    // Leaders on every node, every replica in sync.
    eventually("leaders spread, ISR full", WAIT, || {
        let (code, out, _) = cli(&["topics", "describe", TOPIC, "--bootstrap", b]);
        let rows: Vec<&str> = out.lines().skip(1).collect();
        let leaders: BTreeSet<&str> = rows
            .iter()
            .filter_map(|r| r.split('\t').find_map(|f| f.strip_prefix("Leader: ")))
            .collect();
        let full = rows
            .iter()
            .all(|r| r.contains("Isr: ") && r.matches(',').count() >= 4);
        (code == 0 && rows.len() == PARTITIONS as usize && leaders.len() == 3 && full).then_some(())
    });

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", b)
        .set("acks", "all")
        .create()
        .unwrap();
    let produce = |from: i64, n: i64| produce_values(&producer, TOPIC, PARTITIONS, (from, n), WAIT);

    produce(0, 20);
    let first = consume(b, true);
    produce(20, 5);
    let second = consume(b, false);
    let mut seen = BTreeSet::new();
    for (p, o) in first.iter().chain(&second) {
        assert!(seen.insert((*p, *o)), "{p}@{o} printed twice");
    }
    let all: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (0..25).map(move |o| (p, o)))
        .collect();
    assert_eq!(seen, all, "every record once, {}", nodes.logs());
    assert!(
        second.iter().all(|(_, o)| *o >= 20),
        "the second run continued"
    );
}
