//! Topic creation is checked against the broker's partition limit before anything is
//! made: a creation over it (in process, and `tidelog topics create` with the default
//! limit the process can hold) is refused with INVALID_PARTITIONS' error and leaves the
//! data directory byte for byte as it was; so is a growth over it.

mod cli_support;
mod dir_snapshot;

use std::time::Duration;
use tidelog::{Broker, Error, TopicConfig};

fn broker(dir: &std::path::Path, max: usize) -> Broker {
    Broker::builder(dir)
        .max_partitions(max)
        .offsets_topic_num_partitions(1)
        // No background pass writes a checkpoint while the directory is compared.
        .flush_check_interval(Duration::from_secs(3600))
        .retention_check_interval(Duration::from_secs(3600))
        .open()
        .expect("open")
}

#[test]
fn creations_over_the_partition_limit_change_nothing_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = broker(&data, 10);
    // __consumer_offsets holds one of the ten.
    assert_eq!(b.partition_count(), 1);
    b.create_topic("a", 5, TopicConfig::new())
        .expect("within the limit");
    let before = dir_snapshot::snapshot(&data);
    match b.create_topic("b", 5, TopicConfig::new()) {
        Err(Error::InvalidPartitions { topic, reason }) => {
            assert_eq!(topic, "b");
            assert!(
                reason.contains("would make 11") && reason.contains("limit of 10"),
                "{reason}"
            );
        }
        other => panic!("expected InvalidPartitions, got {other:?}"),
    }
    assert!(matches!(
        b.add_partitions("a", 10),
        Err(Error::InvalidPartitions { .. })
    ));
    assert_eq!(
        dir_snapshot::snapshot(&data),
        before,
        "nothing made or changed"
    );
    assert_eq!(b.topics().unwrap(), ["__consumer_offsets", "a"]);
    assert_eq!(b.topic("a").unwrap().partition_count(), 5);
    b.create_topic("c", 4, TopicConfig::new())
        .expect("exactly at the limit");
    b.close().unwrap();
    drop(b);

    // The CLI with the default limit (what the process can hold): a hundred thousand
    // partitions are refused up front.
    let before = dir_snapshot::snapshot(&data);
    let run = cli_support::tidelog(
        &data,
        &["topics", "create", "huge", "--partitions", "100000"],
        "",
    );
    let line = cli_support::err(run, 1, "invalid partition count for topic \"huge\"");
    assert!(line.contains("100000 more partitions"), "{line}");
    assert_eq!(dir_snapshot::snapshot(&data), before);
}
