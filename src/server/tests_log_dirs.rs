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
use crate::storage::tests::log_dirs::{partition_dirs, two_dirs};

const STORAGE_ERROR: i16 = 56;
const LEADER_NOT_AVAILABLE: i16 = 5;

fn start_jbod(main: &Path, extra: &Path) -> (ServerHandle, crate::broker::Broker) {
    start_jbod_offsets(main, extra, 1)
}

/// [`start_jbod`] with `offsets_partitions` partitions of `__consumer_offsets`.
fn start_jbod_offsets(
    main: &Path,
    extra: &Path,
    offsets_partitions: i32,
) -> (ServerHandle, crate::broker::Broker) {
    let broker = crate::broker::Broker::builder(main)
        .log_dirs([extra])
        .offsets_topic_num_partitions(offsets_partitions)
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

/// One partition as Metadata v12 gives it: index, error code, leader, replicas, ISR,
/// offline replicas.
type PartitionMeta = (i32, i16, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// Metadata v12 for `topic`, per partition in index order.
fn metadata(c: &mut Client, topic: &str) -> Vec<PartitionMeta> {
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into())))),
    ]));
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    let mut parts: Vec<PartitionMeta> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.leader_id.0,
                ids(&p.replica_nodes),
                ids(&p.isr_nodes),
                ids(&p.offline_replicas),
            )
        })
        .collect();
    parts.sort();
    parts
}

/// Kafka's answer for a partition whose only replica is in a failed log directory: no
/// leader (LEADER_NOT_AVAILABLE, leader -1), this node among its offline replicas.
fn offline_meta(p: i32) -> PartitionMeta {
    (p, LEADER_NOT_AVAILABLE, -1, vec![0], vec![0], vec![0])
}

/// A partition this node leads and serves.
fn online_meta(p: i32) -> PartitionMeta {
    (p, 0, 0, vec![0], vec![0], vec![])
}

#[test]
fn a_failed_log_directory_takes_only_its_partitions_offline() {
    let (root, a, b) = two_dirs();
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
    let mut expected = vec![online_meta(good), offline_meta(bad)];
    expected.sort();
    assert_eq!(metadata(&mut c, "t"), expected);
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
    let m = broker.metrics();
    assert_eq!(
        (m.storage.offline_log_dirs, m.storage.offline_partitions),
        (1, 1)
    );
    let text = crate::metrics::prometheus_text(&m);
    assert!(
        text.contains("tidelog_storage_offline_log_directories 1"),
        "{text}"
    );
    let b_dir = root.path().join("b").display().to_string();
    assert!(
        text.contains(&format!(
            "tidelog_storage_log_directory_offline{{dir=\"{b_dir}\"}} 1"
        )),
        "{text}"
    );
    server.shutdown().unwrap();
    drop(broker);
}

#[test]
fn a_log_directory_unusable_at_start_takes_only_its_partitions_offline() {
    let (root, a, b) = two_dirs();
    let (in_a, in_b) = {
        let (server, broker) = start_jbod(&a, &b);
        let mut c = Client::connect(server.local_addr());
        create(&mut c, "t", 2);
        for p in 0..2 {
            assert_eq!(produce(&mut c, "t", p, &["one"]), 0);
        }
        let dirs = describe(&mut c);
        let held = |d: &DirListing| d.2.iter().find(|(t, _)| t == "t").unwrap().1;
        server.shutdown().unwrap();
        broker.close().unwrap();
        (held(&dirs[0]), held(&dirs[1]))
    };
    // The disk of b is gone: a file where its mount point was.
    let away = root.path().join("b-away");
    std::fs::rename(&b, &away).unwrap();
    std::fs::write(&b, b"not a directory").unwrap();
    {
        let (server, broker) = start_jbod(&a, &b);
        let mut c = Client::connect(server.local_addr());
        assert_eq!(produce(&mut c, "t", in_b, &["two"]), STORAGE_ERROR);
        assert_eq!(fetch(&mut c, "t", in_b).0, STORAGE_ERROR);
        let mut expected = vec![online_meta(in_a), offline_meta(in_b)];
        expected.sort();
        assert_eq!(metadata(&mut c, "t"), expected);
        assert_eq!(produce(&mut c, "t", in_a, &["two"]), 0);
        assert_eq!(
            fetch(&mut c, "t", in_a),
            (0, vec!["one".into(), "two".into()])
        );
        let dirs = describe(&mut c);
        assert_eq!(dirs.len(), 2, "{dirs:?}");
        assert_eq!((dirs[0].1, dirs[1].1), (0, STORAGE_ERROR), "{dirs:?}");
        assert!(dirs[1].2.is_empty(), "{dirs:?}");
        // No empty log was made in its place.
        assert!(!a.join(format!("t-{in_b}")).exists());
        let m = broker.metrics();
        assert_eq!(
            (m.storage.offline_log_dirs, m.storage.offline_partitions),
            (1, 1)
        );
        server.shutdown().unwrap();
        broker.close().unwrap();
    }
    // The disk is back: its partition serves with its records.
    std::fs::remove_file(&b).unwrap();
    std::fs::rename(&away, &b).unwrap();
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(metadata(&mut c, "t"), vec![online_meta(0), online_meta(1)]);
    assert_eq!(fetch(&mut c, "t", in_b), (0, vec!["one".into()]));
    assert_eq!(
        fetch(&mut c, "t", in_a),
        (0, vec!["one".into(), "two".into()])
    );
    server.shutdown().unwrap();
    broker.close().unwrap();
}

#[test]
fn a_data_directory_unusable_at_start_is_refused() {
    let (_root, a, b) = two_dirs();
    std::fs::write(&a, b"not a directory").unwrap();
    let err = crate::broker::Broker::builder(&a)
        .log_dirs([&b])
        .open()
        .unwrap_err()
        .to_string();
    assert!(err.contains(&a.display().to_string()), "{err}");
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

/// Creates topic `t` (one partition), produces `count` records `record-N` in batches of
/// `per_batch`; the records, DescribeLogDirs then, and the index of the directory
/// holding `t-0`.
fn one_partition_with_records(
    c: &mut Client,
    count: usize,
    per_batch: usize,
) -> (Vec<String>, Vec<DirListing>, usize) {
    create(c, "t", 1);
    let records: Vec<String> = (0..count).map(|i| format!("record-{i}")).collect();
    for chunk in records.chunks(per_batch) {
        let values: Vec<&str> = chunk.iter().map(String::as_str).collect();
        assert_eq!(produce(c, "t", 0, &values), 0);
    }
    let dirs = describe(c);
    let from = dirs
        .iter()
        .position(|d| d.2.contains(&("t".into(), 0)))
        .unwrap();
    (records, dirs, from)
}

#[test]
fn alter_replica_log_dirs_moves_a_partition_with_its_records() {
    let (root, a, b) = two_dirs();
    let (moved_to, expected) = {
        let (server, broker) = start_jbod(&a, &b);
        let mut c = Client::connect(server.local_addr());
        let (expected, dirs, from) = one_partition_with_records(&mut c, 30, 3);
        let to = 1 - from;
        let target = dirs[to].0.clone();
        assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
        let dirs = wait_moved(&mut c, to, "t", 0);
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
        (target, expected)
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

/// DescribeLogDirs v4 once no partition is moving and `topic`-`partition` is in the
/// directory at index `to` (bounded: 400 tries 25 ms apart).
fn wait_moved(c: &mut Client, to: usize, topic: &str, partition: i32) -> Vec<DirListing> {
    for _ in 0..400 {
        let futures = future_logs(c);
        let dirs = describe(c);
        if futures.is_empty() && dirs[to].2.contains(&(topic.to_string(), partition)) {
            return dirs;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("{topic}-{partition} did not move: {:?}", describe(c));
}

/// The future logs DescribeLogDirs v4 lists: (directory, topic, partition, size, offset lag).
fn future_logs(c: &mut Client) -> Vec<(PathBuf, String, i32, i64, i64)> {
    let resp: DescribeLogDirsResponse = c.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    let mut out = Vec::new();
    for d in &resp.results {
        for t in &d.topics {
            for p in t.partitions.iter().filter(|p| p.is_future_key) {
                out.push((
                    PathBuf::from(d.log_dir.to_string()),
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_size,
                    p.offset_lag,
                ));
            }
        }
    }
    out
}

#[test]
fn alter_replica_log_dirs_answers_at_once_and_moves_in_the_background() {
    let (_root, a, b) = two_dirs();
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    let (mut expected, dirs, from) = one_partition_with_records(&mut c, 20, 4);
    let to = 1 - from;
    let target = dirs[to].0.clone();
    // One byte a second: the copy cannot end while the test looks at it.
    broker.set_log_dir_move_rate(Some(1));
    assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
    // The answer came before the copy ended: the partition still serves from its old
    // directory and a future log is listed in the target one, behind by the whole log.
    let futures = future_logs(&mut c);
    assert_eq!(futures.len(), 1, "{futures:?}");
    let (dir, topic, partition, _size, lag) = &futures[0];
    assert_eq!((dir, topic.as_str(), *partition), (&target, "t", 0));
    assert_eq!(*lag, 20, "{futures:?}");
    let dirs = describe(&mut c);
    assert!(dirs[from].2.contains(&("t".into(), 0)), "{dirs:?}");
    assert_eq!(broker.metrics().storage.future_logs, 1);
    // Asked again for the same directory: the move goes on.
    assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
    assert_eq!(future_logs(&mut c).len(), 1);
    // A record produced during the move is in the moved log.
    assert_eq!(produce(&mut c, "t", 0, &["during"]), 0);
    expected.push("during".into());
    assert_eq!(future_logs(&mut c)[0].4, 21);
    broker.set_log_dir_move_rate(None);
    let dirs = wait_moved(&mut c, to, "t", 0);
    assert!(!dirs[from].2.contains(&("t".into(), 0)), "{dirs:?}");
    assert_eq!(fetch(&mut c, "t", 0), (0, expected.clone()));
    assert_eq!(produce(&mut c, "t", 0, &["after"]), 0);
    expected.push("after".into());
    assert_eq!(fetch(&mut c, "t", 0), (0, expected));
    assert!(target.join("t-0").is_dir());
    assert_eq!(partition_dirs(&[&dirs[from].0, &target], "t-0"), ["t-0"]);
    server.shutdown().unwrap();
    broker.close().unwrap();
}

#[test]
fn a_move_in_progress_is_cancelled_by_moving_back_and_by_close() {
    let (_root, a, b) = two_dirs();
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    let (records, dirs, from) = one_partition_with_records(&mut c, 1, 1);
    let (source, target) = (dirs[from].0.clone(), dirs[1 - from].0.clone());
    broker.set_log_dir_move_rate(Some(1));
    assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
    assert_eq!(future_logs(&mut c).len(), 1);
    // Back to where it is: the move is cancelled.
    assert_eq!(alter_log_dir(&mut c, &source, "t", 0), 0);
    assert!(future_logs(&mut c).is_empty());
    // Started again, then the broker closes mid-copy: it stops, the partition stays.
    assert_eq!(alter_log_dir(&mut c, &target, "t", 0), 0);
    server.shutdown().unwrap();
    broker.close().unwrap();
    let (server, broker) = start_jbod(&a, &b);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(fetch(&mut c, "t", 0), (0, records));
    let dirs = describe(&mut c);
    assert!(dirs[from].2.contains(&("t".into(), 0)), "{dirs:?}");
    assert_eq!(partition_dirs(&[&source, &target], "t-0"), ["t-0"]);
    server.shutdown().unwrap();
    broker.close().unwrap();
}

/// OffsetCommit v7 of `offset` for partition 0 of `topic` by `group` (a commit outside
/// of any generation, as an admin client makes it).
fn commit(c: &mut Client, group: &str, topic: &str, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 7, &req);
    resp.topics[0].partitions[0].error_code
}

/// OffsetFetch v5 of partition 0 of `topic` for `group`: the error code and offset.
fn committed(c: &mut Client, group: &str, topic: &str) -> (i16, i64) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_indexes(vec![0]),
        ]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 5, &req);
    if resp.error_code != 0 {
        return (resp.error_code, -1);
    }
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// FindCoordinator v2 of `group`: the error code and the coordinator's node id.
fn find_coordinator(c: &mut Client, group: &str) -> (i16, i32) {
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 2, &req);
    (resp.error_code, resp.node_id.0)
}

#[test]
fn an_offsets_partition_in_a_directory_unusable_at_start_leaves_other_groups_working() {
    const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    const NOT_COORDINATOR: i16 = 16;
    let (root, a, b) = two_dirs();
    let offsets = "__consumer_offsets";
    // A group of each offsets partition.
    let group_of = |p: i32| {
        (0..1000)
            .map(|i| format!("group-{i}"))
            .find(|g| crate::coordinator::partition_for(g, 2) == p)
            .unwrap()
    };
    let in_b = {
        let (server, broker) = start_jbod_offsets(&a, &b, 2);
        let mut c = Client::connect(server.local_addr());
        create(&mut c, "t", 1);
        let dirs = describe(&mut c);
        let in_b = dirs[1].2.iter().find(|(t, _)| t == offsets).unwrap().1;
        for p in 0..2 {
            assert_eq!(commit(&mut c, &group_of(p), "t", 10 + i64::from(p)), 0);
        }
        server.shutdown().unwrap();
        broker.close().unwrap();
        in_b
    };
    let (good, bad) = (group_of(1 - in_b), group_of(in_b));
    let away = root.path().join("b-away");
    std::fs::rename(&b, &away).unwrap();
    std::fs::write(&b, b"not a directory").unwrap();
    let (server, broker) = start_jbod_offsets(&a, &b, 2);
    let mut c = Client::connect(server.local_addr());
    assert_eq!(find_coordinator(&mut c, &good), (0, 0));
    assert_eq!(committed(&mut c, &good, "t"), (0, 10 + i64::from(1 - in_b)));
    assert_eq!(commit(&mut c, &good, "t", 20), 0);
    assert_eq!(committed(&mut c, &good, "t"), (0, 20));
    // The other group's coordinator is not available (its partition has no leader).
    assert_eq!(find_coordinator(&mut c, &bad).0, COORDINATOR_NOT_AVAILABLE);
    // Sent anyway, its requests answer NOT_COORDINATOR, as Kafka's do.
    assert_eq!(commit(&mut c, &bad, "t", 30), NOT_COORDINATOR);
    assert_eq!(committed(&mut c, &bad, "t").0, NOT_COORDINATOR);
    server.shutdown().unwrap();
    broker.close().unwrap();
}
