//! `tidelog topics` and `tidelog groups` with `--bootstrap` act on a running `tidelog
//! serve` over the Kafka protocol: create (with settings), list, describe (leader,
//! replicas, ISR and offsets), alter (settings and partitions), delete; list and
//! describe groups with their lag, reset a group's offsets. Errors are one `error:`
//! line naming the topic or group and Kafka's error name. What was done over the wire
//! is in the data directory once the server stopped.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{err, ok, serve, tidelog, tidelog_raw};

#[test]
fn topics_and_groups_through_a_running_node() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // Records and a group's commit, written before the node serves the directory:
    // 4 records in events-1, group audit at offset 2 there.
    ok(tidelog(
        &data,
        &["topics", "create", "events", "--partitions", "2"],
        "",
    ));
    ok(tidelog(
        &data,
        &["produce", "events", "-p", "1"],
        "a\nb\nc\nd\n",
    ));
    let read = ok(tidelog(
        &data,
        &[
            "consume",
            "events",
            "--group",
            "audit",
            "--from-beginning",
            "-c",
            "2",
        ],
        "",
    ));
    assert_eq!(read, "a\nb\n");

    let node = serve(&data, &[]);
    let b = node.addr.clone();
    let t = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", b.as_str()]);
        tidelog_raw(&all, "")
    };

    // Create, with Kafka's errors by name.
    let out = ok(t(&[
        "topics",
        "create",
        "orders",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
    ]));
    assert_eq!(out, "Created topic orders.\n");
    err(
        t(&["topics", "create", "orders"]),
        1,
        "topic \"orders\": TOPIC_ALREADY_EXISTS",
    );
    assert_eq!(
        ok(t(&["topics", "create", "orders", "--if-not-exists"])),
        "Topic orders already exists.\n"
    );
    err(
        t(&["topics", "create", "wide", "--replication-factor", "3"]),
        1,
        "topic \"wide\": INVALID_REPLICATION_FACTOR",
    );
    err(
        t(&["topics", "create", "bad", "--config", "retention.ms=soon"]),
        1,
        "topic \"bad\": INVALID_CONFIG",
    );

    let list = ok(t(&["topics", "list"]));
    assert_eq!(list, "__consumer_offsets\nevents\norders\n");
    let list = ok(t(&["topics", "list", "--exclude-internal"]));
    assert_eq!(list, "events\norders\n");

    // Describe: kafka-topics' columns, and the offsets from ListOffsets.
    let described = ok(t(&["topics", "describe", "events"]));
    let lines: Vec<&str> = described.lines().collect();
    assert_eq!(
        lines,
        [
            "Topic: events\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: ",
            "\tTopic: events\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tLogStartOffset: 0\tHighWatermark: 0",
            "\tTopic: events\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\tLogStartOffset: 0\tHighWatermark: 4",
        ]
    );
    let all = ok(t(&["topics", "describe", "--exclude-internal"]));
    assert!(all.starts_with("Topic: events\t"), "{all}");
    assert!(
        all.contains("Topic: orders\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=3600000\n"),
        "{all}"
    );
    err(
        t(&["topics", "describe", "nope"]),
        1,
        "topic \"nope\": UNKNOWN_TOPIC_OR_PARTITION",
    );

    // Alter: settings and partitions, checked before anything changes.
    let out = ok(t(&[
        "topics",
        "alter",
        "orders",
        "--partitions",
        "4",
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
    ]));
    assert_eq!(
        out,
        "Updated the settings of topic orders.\nTopic orders now has 4 partitions.\n"
    );
    err(
        t(&[
            "topics",
            "alter",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=1",
        ]),
        1,
        "topic \"orders\": INVALID_PARTITIONS (it has 4 partitions; it can only grow, not to 3)",
    );
    err(
        t(&[
            "topics",
            "alter",
            "orders",
            "--delete-config",
            "retention.ms",
        ]),
        1,
        "has no setting \"retention.ms\"",
    );
    err(
        t(&[
            "topics",
            "alter",
            "orders",
            "--config",
            "max.message.bytes=-5",
        ]),
        1,
        "topic \"orders\": INVALID_CONFIG",
    );
    let described = ok(t(&["topics", "describe", "orders"]));
    assert!(
        described.starts_with(
            "Topic: orders\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: cleanup.policy=compact\n"
        ),
        "{described}"
    );

    // Groups: the commit made before serving, and its lag against the high watermark.
    assert_eq!(ok(t(&["groups", "list"])), "audit\n");
    let described = ok(t(&["groups", "describe", "audit"]));
    assert!(
        described.starts_with("Consumer group 'audit': state Empty, 0 members\n"),
        "{described}"
    );
    assert!(
        described.contains(
            "\nGROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\n"
        ),
        "{described}"
    );
    assert!(
        described.contains("\naudit\tevents\t1\t2\t4\t2\t-\n"),
        "{described}"
    );
    err(
        t(&["groups", "describe", "nobody"]),
        1,
        "consumer group \"nobody\": GROUP_ID_NOT_FOUND",
    );

    // Reset: a dry run commits nothing; then to the earliest offset, so the lag is 4.
    let dry = ok(t(&[
        "groups",
        "reset-offsets",
        "audit",
        "--topic",
        "events",
        "-p",
        "1",
        "--to-offset",
        "99",
        "--dry-run",
    ]));
    assert_eq!(
        dry,
        "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET\naudit\tevents\t1\t4\n(dry run: nothing was committed)\n"
    );
    let reset = ok(t(&[
        "groups",
        "reset-offsets",
        "audit",
        "--topic",
        "events",
        "--to-earliest",
    ]));
    assert_eq!(
        reset,
        "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET\naudit\tevents\t0\t0\naudit\tevents\t1\t0\n"
    );
    let described = ok(t(&["groups", "describe", "audit"]));
    assert!(
        described.contains("\naudit\tevents\t1\t0\t4\t4\t-\n"),
        "{described}"
    );
    err(
        t(&[
            "groups",
            "reset-offsets",
            "audit",
            "--topic",
            "events",
            "-p",
            "7",
            "--to-latest",
        ]),
        1,
        "unknown partition 7 of topic \"events\"",
    );

    // Delete.
    assert_eq!(
        ok(t(&["topics", "delete", "orders"])),
        "Deleted topic orders.\n"
    );
    err(
        t(&["topics", "delete", "orders"]),
        1,
        "topic \"orders\": UNKNOWN_TOPIC_OR_PARTITION",
    );

    // --data names another place than --bootstrap: refused.
    let other = tmp.path().join("other");
    err(
        tidelog(&other, &["topics", "list", "--bootstrap", b.as_str()], ""),
        1,
        "--data",
    );
    assert!(!other.exists());

    assert_eq!(node.stop(), Some(0), "a clean stop");
    // What the commands did is in the data directory.
    assert_eq!(
        ok(tidelog(
            &data,
            &["topics", "list", "--exclude-internal"],
            ""
        )),
        "events\n"
    );
    let local = ok(tidelog(&data, &["groups", "describe", "audit"], ""));
    assert!(
        local.contains("\naudit\tevents\t1\t0\t4\t4\t-\n"),
        "{local}"
    );
}

#[test]
fn an_unreachable_or_malformed_bootstrap_is_one_error_line() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("127.0.0.1:{port}");
    err(
        tidelog_raw(&["topics", "list", "--bootstrap", &dead], ""),
        1,
        &format!("connect to {dead}"),
    );
    let two = format!("{dead},{dead}");
    err(
        tidelog_raw(&["groups", "list", "--bootstrap", &two], ""),
        1,
        "connect to",
    );
    err(
        tidelog_raw(&["topics", "describe", "x", "--bootstrap", "nohost"], ""),
        1,
        "bootstrap.servers: \"nohost\" is not HOST:PORT",
    );
    // Kafka's spelling is accepted too.
    err(
        tidelog_raw(&["topics", "list", "--bootstrap-server", &dead], ""),
        1,
        "connect to",
    );
}
