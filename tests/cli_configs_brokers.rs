//! `tidelog configs --entity-type brokers` (as kafka-configs) against a one-voter
//! `tidelog serve --node-id 1 --quorum ...` cluster: the replication throttle rates set
//! per broker and cluster-wide, described, removed, bad input refused by name; and the
//! node's metrics output carries the replication throttle series.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::io::{Read, Write};

use cli_support::{err, free_port, loopback_quorum, ok, run_until, serve, stop_all, tidelog_raw};

#[test]
fn configs_sets_describes_and_removes_broker_throttle_rates() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(1);
    let metrics = format!("127.0.0.1:{}", free_port());
    let node = serve(
        &root.path().join("node-1"),
        &[
            "--node-id",
            "1",
            "--quorum",
            &quorum,
            "--metrics-listen",
            &metrics,
        ],
    );
    let b = node.addr.clone();
    let t = |args: &[&str]| {
        let mut all = vec!["configs"];
        all.extend_from_slice(args);
        all.extend(["--bootstrap", b.as_str()]);
        tidelog_raw(&all, "")
    };
    // Broker 1 is described once it is registered and unfenced, with no dynamic config.
    let described = run_until(
        &[
            "configs",
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--bootstrap",
            &b,
        ],
        |r| r.code == 0,
    );
    assert_eq!(described.stdout, "Dynamic configs for broker 1 are:\n");
    let set = t(&[
        "--alter",
        "--add-config",
        "leader.replication.throttled.rate=1000000",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    ]);
    assert!(
        set.stdout
            .contains("Completed updating config for broker 1."),
        "{set:?}"
    );
    let out = ok(t(&[
        "--alter",
        "--add-config",
        "follower.replication.throttled.rate=2000",
        "--broker-defaults",
    ]));
    assert!(
        out.contains("Completed updating default config for brokers in the cluster."),
        "{out}"
    );
    let one = ok(t(&[
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    ]));
    assert!(one.contains("Dynamic configs for broker 1 are:\n"), "{one}");
    assert!(
        one.contains("  leader.replication.throttled.rate=1000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000000}\n"),
        "{one}"
    );
    assert!(!one.contains("follower"), "{one}");
    assert_eq!(ok(t(&["--describe", "--broker", "1"])), one);
    let default = ok(t(&[
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-default",
    ]));
    assert_eq!(
        default,
        "Default configs for brokers in the cluster are:\n  follower.replication.throttled.rate=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=2000}\n"
    );
    // Without a name: every broker, then the default.
    let all = ok(t(&["--describe", "--entity-type", "brokers"]));
    let broker = all.find("Dynamic configs for broker 1 are:").unwrap();
    let dflt = all.find("Default configs for brokers").unwrap();
    assert!(broker < dflt, "{all}");
    ok(t(&[
        "--alter",
        "--delete-config",
        "leader.replication.throttled.rate",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    ]));
    let one = ok(t(&[
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    ]));
    assert_eq!(one, "Dynamic configs for broker 1 are:\n");
    // Bad input: a negative rate and a config that is not a dynamic broker config
    // (refused by the cluster, naming it), a broker that is not a node id, no cluster.
    err(
        t(&[
            "--alter",
            "--add-config",
            "leader.replication.throttled.rate=-5",
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
        ]),
        1,
        "leader.replication.throttled.rate",
    );
    err(
        t(&[
            "--alter",
            "--add-config",
            "log.retention.ms=1",
            "--entity-type",
            "brokers",
            "--entity-default",
        ]),
        1,
        "log.retention.ms",
    );
    err(
        t(&[
            "--alter",
            "--add-config",
            "leader.replication.throttled.rate=1",
            "--entity-type",
            "brokers",
            "--entity-name",
            "one",
        ]),
        1,
        "node id",
    );
    err(
        t(&["--describe", "--broker", "1", "--entity-name", "1"]),
        1,
        "give the broker once",
    );
    err(
        tidelog_raw(
            &[
                "--data",
                &root.path().join("other").display().to_string(),
                "configs",
                "--describe",
                "--entity-type",
                "brokers",
            ],
            "",
        ),
        1,
        "--bootstrap",
    );
    // `tidelog serve`'s metrics: the cluster node's replication throttle of both sides.
    let mut text = String::new();
    let mut s = std::net::TcpStream::connect(&metrics).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.read_to_string(&mut text).unwrap();
    for line in [
        "tidelog_replication_throttled_bytes_total{quota=\"LeaderReplication\"} 0",
        "tidelog_replication_throttled_byte_rate{quota=\"FollowerReplication\"} 0",
        "tidelog_replication_throttle_time_seconds_total{quota=\"LeaderReplication\"} 0.0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    stop_all(vec![node]);
}

/// A single `tidelog serve` (no cluster) keeps its dynamic broker configs too, across a
/// restart.
#[test]
fn a_single_node_sets_and_keeps_its_broker_configs() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("single");
    let node = serve(&data, &[]);
    let b = node.addr.clone();
    let t = |b: &str, args: &[&str]| {
        let mut all = vec!["configs"];
        all.extend_from_slice(args);
        all.extend(["--bootstrap", b]);
        tidelog_raw(&all, "")
    };
    let rate = "replica.alter.log.dirs.io.max.bytes.per.second";
    let set = ok(t(
        &b,
        &[
            "--alter",
            "--add-config",
            &format!("{rate}=1000"),
            "--broker",
            "0",
        ],
    ));
    assert!(
        set.contains("Completed updating config for broker 0."),
        "{set}"
    );
    err(
        t(
            &b,
            &[
                "--alter",
                "--add-config",
                "log.retention.ms=1",
                "--broker",
                "0",
            ],
        ),
        1,
        "log.retention.ms",
    );
    assert_eq!(node.stop(), Some(0));
    let node = serve(&data, &[]);
    assert_eq!(
        ok(t(&node.addr, &["--describe", "--broker", "0"])),
        format!(
            "Dynamic configs for broker 0 are:\n  {rate}=1000 sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:{rate}=1000}}\n"
        )
    );
    assert_eq!(node.stop(), Some(0));
}
