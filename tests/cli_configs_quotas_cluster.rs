//! `tidelog configs --bootstrap` (as kafka-configs --entity-type clients) on a cluster of
//! three `tidelog serve --node-id N --quorum ...` child processes: a client quota set
//! through one node is listed through another and throttles that client's produce on a
//! node it was not set through (`throttle_time_ms` in the answers), while another client
//! id on the same node is not throttled; deleted through a third node, it is gone from
//! every node's listing.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
mod server_support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cli_support::{loopback_quorum, ok, serve_nodes, stop_all, tidelog_raw, until};
use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::protocol::Decodable;
use server_support::{produce_as, response};
use tidelog::BatchBuilder;
use tidelog::admin::AdminClient;

const WAIT: Duration = Duration::from_secs(60);

/// Sends up to `requests` batches of 16 KiB, one at a time, as `client` to `leader`,
/// until one is answered with a `throttle_time_ms` (every answer without error): that
/// throttle time, or 0.
fn first_throttle(leader: &str, partition: i32, client: &str, requests: i32) -> i32 {
    let mut b = BatchBuilder::with_capacity(20_000);
    let value = vec![7u8; 1024];
    for _ in 0..16 {
        b.push(0, None, Some(&value), &[]);
    }
    let batch = Bytes::from(b.finish());
    let mut s = TcpStream::connect(leader).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for corr in 0..requests {
        s.write_all(&produce_as(client, "metered", partition, &batch, corr))
            .expect("the connection stays open");
        let (got, body) = response(&mut s).expect("an answer, not a disconnection");
        assert_eq!(got, corr);
        let r = ProduceResponse::decode(&mut Bytes::from(body), 8).unwrap();
        let p = &r.responses[0].partition_responses[0];
        // UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER: the leader has not
        // applied the topic yet; asked again (the requests are bounded).
        if matches!(p.error_code, 3 | 6) {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(
            p.error_code, 0,
            "{client}: a throttled client is not refused"
        );
        if r.throttle_time_ms > 0 {
            return r.throttle_time_ms;
        }
    }
    0
}

#[test]
fn a_client_quota_set_through_one_node_throttles_that_client_on_another() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let (nodes, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3"]);
    let node: Vec<&str> = bootstrap.split(',').collect();
    until(
        &[
            "topics",
            "create",
            "metered",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
        ],
        &bootstrap,
        "the topic created",
        |r| r.code == 0,
    );
    // Through node 1 only.
    ok(tidelog_raw(
        &[
            "configs",
            "--alter",
            "--add-config",
            "producer_byte_rate=4096",
            "--entity-type",
            "clients",
            "--entity-name",
            "ingest",
            "--bootstrap",
            node[0],
        ],
        "",
    ));
    // Listed through node 3.
    until(
        &["configs", "--describe", "--entity-type", "clients"],
        node[2],
        "the quota listed through node 3",
        |r| {
            r.code == 0
                && r.stdout
                    .contains("Quota configs for client-id 'ingest' are producer_byte_rate=4096")
        },
    );
    // A partition led by a node the quota was not set through.
    let admin = AdminClient::connect(&bootstrap).unwrap();
    let deadline = Instant::now() + WAIT;
    let (partition, leader) = loop {
        let meta = admin.metadata().unwrap();
        let found = meta
            .topics
            .iter()
            .find(|t| t.name == "metered")
            .and_then(|t| {
                t.partitions
                    .iter()
                    .find(|p| p.leader.is_some_and(|l| l != 1))
                    .map(|p| (p.partition, p.leader.unwrap()))
            })
            .and_then(|(p, l)| {
                let b = meta.brokers.iter().find(|b| b.id == l)?;
                Some((p, format!("{}:{}", b.host, b.port)))
            });
        if let Some(found) = found {
            break found;
        }
        assert!(Instant::now() < deadline, "no partition led by node 2 or 3");
        std::thread::sleep(Duration::from_millis(200));
    };
    // The leader itself knows it leads (the node asked above may have applied the
    // topic before it did).
    let leads = |meta: &tidelog::admin::ClusterMetadata| {
        meta.topics.iter().any(|t| {
            t.name == "metered"
                && t.partitions
                    .iter()
                    .any(|p| p.partition == partition && p.leader.is_some())
        })
    };
    let deadline = Instant::now() + WAIT;
    while !AdminClient::connect(&leader)
        .and_then(|a| a.metadata())
        .is_ok_and(|m| leads(&m))
    {
        assert!(Instant::now() < deadline, "{leader} never led {partition}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // 16 KiB requests at 4 KB/s: throttled on that node (the quota reached it as
    // metadata) within a few requests.
    let deadline = Instant::now() + WAIT;
    loop {
        if first_throttle(&leader, partition, "ingest", 20) > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "client ingest never throttled on {leader}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        first_throttle(&leader, partition, "other", 20),
        0,
        "a client without a quota is not throttled"
    );
    // Deleted through node 2; gone from node 1's listing.
    ok(tidelog_raw(
        &[
            "configs",
            "--alter",
            "--delete-config",
            "producer_byte_rate",
            "--entity-type",
            "clients",
            "--entity-name",
            "ingest",
            "--bootstrap",
            node[1],
        ],
        "",
    ));
    until(
        &["configs", "--describe", "--entity-type", "clients"],
        node[0],
        "the quota gone from node 1's listing",
        |r| r.code == 0 && !r.stdout.contains("'ingest'"),
    );
    drop(admin);
    stop_all(nodes);
}
