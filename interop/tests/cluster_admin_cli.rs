//! `tidelog topics|groups --bootstrap` on a three-node cluster of `tidelog serve` child
//! processes: a topic created with `--replication-factor 3` and a setting is described
//! like `kafka-topics --describe` (Leader, Replicas, Isr per partition, leaders spread
//! over the nodes, high watermarks from each leader), grown and deleted; a librdkafka
//! consumer group's members, assignments and lag show in `groups describe` (asked of
//! the group's coordinator), `groups list` asks every node, and `groups reset-offsets`
//! is refused while the group has a member and moves its offsets once it left.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tidelog_interop::cluster::{Processes, cli, cli_ok, eventually};

const WAIT: Duration = Duration::from_secs(45);
const TOPIC: &str = "payments";
const GROUP: &str = "billing";

/// One partition line of `topics describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    partition: i32,
    leader: String,
    replicas: Vec<i32>,
    isr: BTreeSet<i32>,
    high_watermark: String,
}

/// The topic line and the partition rows of `topics describe` for one topic.
fn describe(text: &str) -> (String, Vec<Row>) {
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default().to_string();
    let ids = |s: &str| -> Vec<i32> {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().unwrap())
            .collect()
    };
    let rows = lines
        .map(|l| {
            let fields: BTreeMap<&str, &str> = l
                .trim_start_matches('\t')
                .split('\t')
                .filter_map(|f| f.split_once(": "))
                .collect();
            Row {
                partition: fields["Partition"].parse().unwrap(),
                leader: fields["Leader"].to_string(),
                replicas: ids(fields["Replicas"]),
                isr: ids(fields["Isr"]).into_iter().collect(),
                high_watermark: fields["HighWatermark"].to_string(),
            }
        })
        .collect();
    (head, rows)
}

#[test]
fn topics_and_groups_of_a_three_node_cluster_from_the_command_line() {
    let root = tempfile::tempdir().unwrap();
    let nodes = Processes::start(tidelog_interop::tidelog_bin(), root.path(), 3, &[]);
    // The first address is dead: the client goes on to the next.
    let dead = tidelog_interop::cluster::free_ports(1)[0];
    let bootstrap = format!("127.0.0.1:{dead},{}", nodes.layout.bootstrap());
    let b = bootstrap.as_str();

    // The cluster is up once __consumer_offsets has three in-sync replicas.
    eventually("__consumer_offsets on 3 nodes", WAIT, || {
        let text = cli_ok(b, &["topics", "describe", tidelog::OFFSETS_TOPIC])?;
        let (_, rows) = describe(&text);
        (!rows.is_empty() && rows.iter().all(|r| r.isr.len() == 3)).then_some(())
    });

    let (code, out, err) = cli(
        b,
        &[
            "topics",
            "create",
            TOPIC,
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        ],
    );
    assert_eq!(
        (code, out.as_str()),
        (0, "Created topic payments.\n"),
        "{err}\n{}",
        nodes.logs()
    );
    let (code, _, err) = cli(
        b,
        &["topics", "create", "wide", "--replication-factor", "4"],
    );
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: topic \"wide\": INVALID_REPLICATION_FACTOR"),
        "{err}"
    );

    // kafka-topics --describe: three replicas per partition, all in sync, each node
    // leading one partition; every node answers the same.
    for i in 0..3 {
        // A node answers once it applied the topic's record, and the ISR is full once
        // every follower fetched.
        let text = eventually("the node describes the topic, ISR full", WAIT, || {
            let text = cli_ok(&nodes.layout.addr(i), &["topics", "describe", TOPIC])?;
            let (_, rows) = describe(&text);
            (rows.len() == 3 && rows.iter().all(|r| r.isr.len() == 3)).then_some(text)
        });
        let (head, rows) = describe(&text);
        assert_eq!(
            head,
            "Topic: payments\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2"
        );
        let mut leaders = BTreeSet::new();
        for (p, row) in rows.iter().enumerate() {
            assert_eq!(row.partition, p as i32);
            let mut replicas = row.replicas.clone();
            replicas.sort();
            assert_eq!(replicas, [1, 2, 3], "{text}");
            assert_eq!(row.isr, BTreeSet::from([1, 2, 3]), "{text}");
            assert_eq!(
                row.leader,
                row.replicas[0].to_string(),
                "the first replica leads: {text}"
            );
            leaders.insert(row.leader.clone());
            assert_eq!(row.high_watermark, "0");
        }
        assert_eq!(leaders.len(), 3, "leaders spread over the nodes: {text}");
    }

    // 10 records per partition with acks=all: every leader's high watermark is 10.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", nodes.layout.bootstrap())
        .set("acks", "all")
        .create()
        .unwrap();
    let send = |n: i32, partition: i32| {
        for i in 0..n {
            let v = format!("payment-{partition}-{i}");
            producer
                .send(
                    BaseRecord::<(), String>::to(TOPIC)
                        .payload(&v)
                        .partition(partition),
                )
                .unwrap();
        }
        producer.flush(WAIT).unwrap();
    };
    for p in 0..3 {
        send(10, p);
    }
    let text = cli_ok(b, &["topics", "describe", TOPIC]).unwrap();
    let (_, rows) = describe(&text);
    assert!(rows.iter().all(|r| r.high_watermark == "10"), "{text}");

    // A group member reads everything and commits; then 5 more records in partition 0.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", nodes.layout.bootstrap())
        .set("group.id", GROUP)
        .set("client.id", "billing-1")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let mut read = 0;
    eventually("30 records for the member", WAIT, || {
        for _ in 0..100 {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(_)) => read += 1,
                _ => break,
            }
        }
        (read == 30).then_some(())
    });
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
    send(5, 0);

    assert_eq!(cli_ok(b, &["groups", "list"]).unwrap(), "billing\n");
    let text = cli_ok(b, &["groups", "describe", GROUP]).unwrap();
    assert!(
        text.starts_with("Consumer group 'billing': state Stable, 1 member, assignor "),
        "{text}"
    );
    assert!(
        text.contains("\tbilling-1\t"),
        "the member's client id: {text}"
    );
    assert!(
        text.contains("\tpayments(0,1,2)\n"),
        "its assignment: {text}"
    );
    let lag: Vec<(String, String, String, String)> = text
        .lines()
        .filter(|l| l.starts_with("billing\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[2].into(), f[3].into(), f[4].into(), f[5].into())
        })
        .collect();
    let expected =
        |p: &str, cur: &str, end: &str, lag: &str| (p.into(), cur.into(), end.into(), lag.into());
    assert_eq!(
        lag,
        [
            expected("0", "10", "15", "5"),
            expected("1", "10", "10", "0"),
            expected("2", "10", "10", "0"),
        ],
        "{text}"
    );
    assert!(
        text.lines()
            .filter(|l| l.starts_with("billing\t"))
            .all(|l| !l.ends_with("\t-")),
        "each partition names its owner: {text}"
    );

    // Offsets of a group with a member do not move.
    let (code, _, err) = cli(
        b,
        &[
            "groups",
            "reset-offsets",
            GROUP,
            "--topic",
            TOPIC,
            "--to-earliest",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: consumer group \"billing\": NON_EMPTY_GROUP"),
        "{err}"
    );
    drop(consumer);
    eventually("the group emptied", WAIT, || {
        let text = cli_ok(b, &["groups", "describe", GROUP])?;
        text.starts_with("Consumer group 'billing': state Empty")
            .then_some(())
    });
    let out = cli_ok(
        b,
        &[
            "groups",
            "reset-offsets",
            GROUP,
            "--topic",
            TOPIC,
            "--to-earliest",
        ],
    )
    .unwrap();
    assert_eq!(
        out,
        "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET\nbilling\tpayments\t0\t0\nbilling\tpayments\t1\t0\nbilling\tpayments\t2\t0\n"
    );
    let text = cli_ok(b, &["groups", "describe", GROUP]).unwrap();
    assert!(
        text.contains("\nbilling\tpayments\t0\t0\t15\t15\t-\n"),
        "{text}"
    );

    // Grow, then delete.
    assert_eq!(
        cli_ok(b, &["topics", "alter", TOPIC, "--partitions", "6"]).unwrap(),
        "Topic payments now has 6 partitions.\n"
    );
    let text = eventually("six partitions described", WAIT, || {
        let text = cli_ok(b, &["topics", "describe", TOPIC])?;
        let (_, rows) = describe(&text);
        (rows.len() == 6).then_some(text)
    });
    let (_, rows) = describe(&text);
    assert_eq!(rows.len(), 6, "{text}");
    assert!(rows.iter().all(|r| r.replicas.len() == 3), "{text}");
    assert_eq!(
        cli_ok(b, &["topics", "delete", TOPIC]).unwrap(),
        "Deleted topic payments.\n"
    );
    eventually("the topic gone from every node", WAIT, || {
        (0..3)
            .all(|i| {
                cli_ok(
                    &nodes.layout.addr(i),
                    &["topics", "list", "--exclude-internal"],
                )
                .is_some_and(|l| l.is_empty())
            })
            .then_some(())
    });
    drop(producer);
}
