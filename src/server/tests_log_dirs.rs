//! Several log directories on a server (JBOD): DescribeLogDirs lists each with its
//! partitions, and a failed one takes only its partitions offline (KAFKA_STORAGE_ERROR
//! for produce and fetch) while the other directory's partitions serve.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, batch, create, produce_req};
use super::*;
use crate::record::batches;

const STORAGE_ERROR: i16 = 56;

fn start_jbod(main: &Path, extra: &Path) -> (ServerHandle, crate::broker::Broker) {
    let broker = crate::broker::Broker::builder(main)
        .log_dirs([extra])
        .offsets_topic_num_partitions(1)
        .open()
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (server, broker)
}

fn produce(c: &mut Client, topic: &str, p: i32, values: &[&str]) -> i16 {
    let resp: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &produce_req(-1, vec![(topic, p, batch(values))]),
    );
    resp.responses[0].partition_responses[0].error_code
}

/// The error code and values of one partition fetched from offset 0.
fn fetch(c: &mut Client, topic: &str, p: i32) -> (i16, Vec<String>) {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
    let part = &resp.responses[0].partitions[0];
    let mut values = Vec::new();
    if let Some(bytes) = &part.records {
        let bytes: &Bytes = bytes;
        for b in batches(bytes) {
            for r in b.unwrap().records() {
                values.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
            }
        }
    }
    (part.error_code, values)
}

/// One directory as DescribeLogDirs v4 gives it: path, error code, (topic, partition)s.
type DirListing = (PathBuf, i16, Vec<(String, i32)>);

/// DescribeLogDirs v4, per directory.
fn describe(c: &mut Client) -> Vec<DirListing> {
    let resp: DescribeLogDirsResponse = c.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    resp.results
        .iter()
        .map(|d| {
            let parts = d
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index))
                })
                .collect();
            (PathBuf::from(d.log_dir.to_string()), d.error_code, parts)
        })
        .collect()
}

#[test]
fn a_failed_log_directory_takes_only_its_partitions_offline() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    create(&mut c, "t", 2);
    for p in 0..2 {
        assert_eq!(produce(&mut c, "t", p, &["one", "two"]), 0);
    }
    let dirs = describe(&mut c);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    let (a, b) = (a.canonicalize().unwrap(), b.canonicalize().unwrap());
    assert_eq!((&dirs[0].0, dirs[0].1), (&a, 0));
    assert_eq!((&dirs[1].0, dirs[1].1), (&b, 0));
    // One partition of t in each (the fewest-partitions rule); the offsets topic's
    // partition went first, to the data directory.
    let t_in = |d: &Vec<(String, i32)>| -> Vec<i32> {
        d.iter()
            .filter(|(t, _)| t == "t")
            .map(|(_, p)| *p)
            .collect()
    };
    let (in_a, in_b) = (t_in(&dirs[0].2), t_in(&dirs[1].2));
    assert_eq!(in_a.len() + in_b.len(), 2);
    assert_eq!(in_b.len(), 1, "{dirs:?}");
    let (good, bad) = (in_a[0], in_b[0]);

    broker
        .fail_log_dir(&root.path().join("b"), "test: disk pulled")
        .unwrap();
    assert_eq!(produce(&mut c, "t", bad, &["three"]), STORAGE_ERROR);
    assert_eq!(fetch(&mut c, "t", bad).0, STORAGE_ERROR);
    assert_eq!(produce(&mut c, "t", good, &["three"]), 0);
    assert_eq!(
        fetch(&mut c, "t", good),
        (0, vec!["one".into(), "two".into(), "three".into()])
    );
    let dirs = describe(&mut c);
    assert_eq!(dirs[0].1, 0);
    assert!(!t_in(&dirs[0].2).is_empty());
    assert_eq!((dirs[1].1, dirs[1].2.len()), (STORAGE_ERROR, 0), "{dirs:?}");
    server.shutdown().unwrap();
    drop(broker);
}

#[test]
fn a_log_directory_replaced_by_a_file_is_refused_at_open_when_it_held_partitions() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    {
        let (server, broker) = start_jbod(&a, &b);
        let mut c = Client::connect(server.local_addr());
        create(&mut c, "t", 2);
        server.shutdown().unwrap();
        broker.close().unwrap();
    }
    std::fs::remove_dir_all(&b).unwrap();
    std::fs::write(&b, b"not a directory").unwrap();
    let err = crate::broker::Broker::builder(&a)
        .log_dirs([&b])
        .offsets_topic_num_partitions(1)
        .open()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&b.display().to_string()) && err.contains("t-"),
        "{err}"
    );
}

fn alter_log_dir(c: &mut Client, dir: &Path, topic: &str, partition: i32) -> i16 {
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![
        alter_replica_log_dirs_request::AlterReplicaLogDir::default()
            .with_path(StrBytes::from_string(dir.display().to_string()))
            .with_topics(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.into())))
                    .with_partitions(vec![partition]),
            ]),
    ]);
    let resp: AlterReplicaLogDirsResponse = c.call(ApiKey::AlterReplicaLogDirs, 2, &req);
    resp.results[0].partitions[0].error_code
}

#[test]
fn alter_replica_log_dirs_moves_a_partition_with_its_records() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let expected: Vec<String> = (0..30).map(|i| format!("record-{i}")).collect();
    let moved_to = {
        let (server, broker) = start_jbod(&a, &b);
        let mut c = Client::connect(server.local_addr());
        create(&mut c, "t", 1);
        for chunk in expected.chunks(3) {
            let values: Vec<&str> = chunk.iter().map(String::as_str).collect();
            assert_eq!(produce(&mut c, "t", 0, &values), 0);
        }
        let dirs = describe(&mut c);
        let from = dirs
            .iter()
            .position(|d| d.2.contains(&("t".into(), 0)))
            .unwrap();
        let to = 1 - from;
        let target = dirs[to].0.clone();
        assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
        let dirs = describe(&mut c);
        assert!(dirs[to].2.contains(&("t".into(), 0)), "{dirs:?}");
        assert!(!dirs[from].2.contains(&("t".into(), 0)), "{dirs:?}");
        assert_eq!(fetch(&mut c, "t", 0), (0, expected.clone()));
        // It still takes records where it is now.
        assert_eq!(produce(&mut c, "t", 0, &["after"]), 0);
        // A path that is not a log directory, a partition that does not exist.
        assert_eq!(
            alter_log_dir(&mut c, &root.path().join("elsewhere"), "t", 0),
            57
        );
        assert_eq!(alter_log_dir(&mut c, &target, "t", 7), 3);
        server.shutdown().unwrap();
        broker.close().unwrap();
        target
    };
    assert!(moved_to.join("t-0").is_dir());
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    let mut all = expected;
    all.push("after".into());
    assert_eq!(fetch(&mut c, "t", 0), (0, all));
    server.shutdown().unwrap();
    drop(broker);
}
