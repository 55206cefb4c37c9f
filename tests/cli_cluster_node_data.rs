//! The CLI's read-only commands on a cluster node's data directory: a node (`tidelog
//! serve --node-id 1 --quorum ...`, a child process) gets a topic, records (Produce over
//! the wire, acks=all) and a group's committed offsets (`consume --group --bootstrap`),
//! then stops, cleanly (SIGTERM) or killed (SIGKILL). `consume --from-beginning -e`,
//! `topics describe` and `groups describe` on its data directory then show the records,
//! the topic and the group, from the node's own metadata, saying so on stderr.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
mod server_support;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cli_support::{ok, serve, tidelog, tidelog_raw};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, TopicName, produce_request,
};
use kafka_protocol::protocol::StrBytes;

/// Produces `values` to `partition` of `topic` on the node at `addr` with acks=all,
/// retrying (at most 30 s) while the partition has no leader yet.
fn produce(addr: &str, topic: &str, partition: i32, values: &[&str]) {
    let mut b = tidelog::BatchBuilder::new();
    for v in values {
        b.push(0, None, Some(v.as_bytes()), &[]);
    }
    let batch = Bytes::from(b.finish());
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch)),
                ]),
        ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = TcpStream::connect(addr).unwrap();
        let resp: ProduceResponse = server_support::call(&mut s, ApiKey::Produce, 8, &req);
        let code = resp.responses[0].partition_responses[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "produce to {topic}-{partition}: error {code}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A node of a one-voter cluster on `data`, with `orders` (2 partitions, 3 records)
/// and group `audit` having consumed it all.
fn node_with_data(data: &Path) -> cli_support::Serve {
    let quorum_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let quorum = format!("1@127.0.0.1:{quorum_port}");
    let node = serve(data, &["--node-id", "1", "--quorum", &quorum]);
    let bootstrap = node.addr.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = tidelog_raw(
            &[
                "topics",
                "create",
                "orders",
                "--partitions",
                "2",
                "--bootstrap",
                &bootstrap,
            ],
            "",
        );
        if run.code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{run:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(&bootstrap, "orders", 0, &["first", "second"]);
    produce(&bootstrap, "orders", 1, &["third"]);
    let consumed = ok(tidelog_raw(
        &[
            "consume",
            "orders",
            "--group",
            "audit",
            "--from-beginning",
            "-e",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    ));
    assert_eq!(consumed.lines().count(), 3, "{consumed}");
    node
}

/// The three read-only commands on the stopped node's `data`.
fn check_read_only_commands(data: &Path) {
    let run = tidelog(data, &["consume", "orders", "--from-beginning", "-e"], "");
    assert_eq!(run.code, 0, "{run:?}");
    let mut values: Vec<&str> = run.stdout.lines().collect();
    values.sort_unstable();
    assert_eq!(values, vec!["first", "second", "third"], "{run:?}");
    assert_eq!(
        run.stderr
            .lines()
            .filter(|l| l
                .contains("is cluster node 1's data directory: this is its last known metadata"))
            .count(),
        1,
        "{run:?}"
    );

    let run = tidelog(data, &["topics", "describe", "orders"], "");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("orders"), "{run:?}");
    assert!(run.stdout.contains("PartitionCount: 2"), "{run:?}");

    let run = tidelog(data, &["groups", "describe", "audit"], "");
    assert_eq!(run.code, 0, "{run:?}");
    // Per partition: committed offset = log end offset, no lag.
    assert!(run.stdout.contains("audit\torders\t0\t2\t2\t0"), "{run:?}");
    assert!(run.stdout.contains("audit\torders\t1\t1\t1\t0"), "{run:?}");

    // Nothing was written: the node starts again on its directory.
    assert!(
        data.join("__cluster_metadata-0")
            .join("raft-state")
            .exists()
    );
}

#[test]
fn a_cleanly_stopped_nodes_data_reads_from_its_own_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("node-1");
    let node = node_with_data(&data);
    assert_eq!(node.stop(), Some(0));
    check_read_only_commands(&data);
}

#[test]
fn a_killed_nodes_data_reads_from_its_own_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("node-1");
    let node = node_with_data(&data);
    drop(node); // SIGKILL
    check_read_only_commands(&data);
}
