//! `__consumer_offsets` has `offsets.topic.num.partitions` partitions (50 by default,
//! fixed at creation) and each group's records go to the partition Kafka's hash gives
//! it: groups land on different partitions, a restart keeps every group's offsets, and
//! a data directory made with one partition goes on with one.

use std::collections::BTreeSet;

use tidelog::coordinator::{CommitOffset, OffsetCommitRequest, partition_for};
use tidelog::{Broker, OFFSETS_TOPIC, TopicConfig};

/// A standalone (simple) commit of `offset` for `group` on `t-0`.
fn commit(broker: &Broker, group: &str, offset: i64) {
    let results = broker
        .group_coordinator()
        .offset_commit(OffsetCommitRequest {
            group_id: group.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        })
        .expect("commit");
    assert!(results[0].result.is_ok(), "{results:?}");
}

fn committed(broker: &Broker, group: &str) -> i64 {
    broker
        .group_coordinator()
        .offset_fetch(group, Some(&[("t".into(), 0)]))
        .expect("fetch")[0]
        .offset
}

fn groups() -> Vec<String> {
    (0..20).map(|i| format!("group-{i}")).collect()
}

#[test]
fn groups_are_spread_over_fifty_partitions_and_a_restart_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = Broker::open(dir.path()).expect("open");
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        let offsets = broker.topic(OFFSETS_TOPIC).unwrap();
        assert_eq!(offsets.partition_count(), 50, "Kafka's default");
        assert_eq!(broker.group_coordinator().partition_count(), 50);
        for (i, g) in groups().iter().enumerate() {
            commit(&broker, g, 100 + i as i64);
        }
        // Each group's commit is in the partition Kafka's hash gives it, and only there.
        let mut used = BTreeSet::new();
        for g in groups() {
            let p = partition_for(&g, 50);
            assert_eq!(broker.group_coordinator().partition_of(&g), p);
            used.insert(p);
        }
        for p in 0..50 {
            let end = offsets.partition(p).unwrap().log_end_offset();
            assert_eq!(
                end > 0,
                used.contains(&p),
                "__consumer_offsets-{p} ends at {end}"
            );
        }
        assert!(used.len() > 5, "groups on different partitions: {used:?}");
        broker.close().unwrap();
    }
    let broker = Broker::open(dir.path()).expect("reopen");
    for (i, g) in groups().iter().enumerate() {
        assert_eq!(committed(&broker, g), 100 + i as i64, "{g}");
    }
}

#[test]
fn a_data_directory_with_one_offsets_partition_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    {
        // What a data directory made before the topic had 50 partitions looks like.
        let broker = Broker::builder(dir.path())
            .offsets_topic_num_partitions(1)
            .open()
            .expect("open");
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        for (i, g) in groups().iter().enumerate() {
            commit(&broker, g, i as i64);
        }
        broker.close().unwrap();
    }
    // The setting says 50; the topic says 1, and the topic wins.
    let broker = Broker::open(dir.path()).expect("reopen");
    assert_eq!(broker.topic(OFFSETS_TOPIC).unwrap().partition_count(), 1);
    assert_eq!(broker.group_coordinator().partition_count(), 1);
    for (i, g) in groups().iter().enumerate() {
        assert_eq!(committed(&broker, g), i as i64, "{g}");
        assert_eq!(broker.group_coordinator().partition_of(g), 0);
        commit(&broker, g, 1000 + i as i64);
    }
    broker.close().unwrap();
    drop(broker);
    let broker = Broker::open(dir.path()).expect("reopen again");
    for (i, g) in groups().iter().enumerate() {
        assert_eq!(committed(&broker, g), 1000 + i as i64, "{g}");
    }
}
