//! A topic creation (or growth) that fails part way leaves nothing behind: every
//! partition directory it made is removed, the topic is not registered (and not there
//! after a restart), a file in its way that it did not make is left alone, and the same
//! creation succeeds once the obstacle is gone.

mod dir_snapshot;

use tidelog::{Broker, TopicConfig};

#[test]
fn a_creation_that_fails_part_way_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = Broker::open(&data).unwrap();
    b.create_topic("grow", 2, TopicConfig::new()).unwrap();
    // Something else's files where partitions 3 of "t" and 4 of "grow" would go:
    // creating their directories fails there, after the earlier ones were made.
    std::fs::write(data.join("t-3"), b"not ours").unwrap();
    std::fs::write(data.join("grow-4"), b"not ours either").unwrap();
    let before = dir_snapshot::snapshot(&data);

    let err = b.create_topic("t", 6, TopicConfig::new()).unwrap_err();
    assert!(err.to_string().contains("t-3"), "{err}");
    let err = b.add_partitions("grow", 6).unwrap_err();
    assert!(err.to_string().contains("grow-4"), "{err}");
    assert_eq!(
        dir_snapshot::snapshot(&data),
        before,
        "t-0..t-2 and grow-2, grow-3 were removed; the obstacles are untouched"
    );
    assert_eq!(b.topics().unwrap(), ["__consumer_offsets", "grow"]);
    assert_eq!(b.topic("grow").unwrap().partition_count(), 2);
    b.close().unwrap();
    drop(b);

    let b = Broker::open(&data).unwrap();
    assert_eq!(b.topics().unwrap(), ["__consumer_offsets", "grow"]);
    assert!(b.orphaned_logs().is_empty(), "{:?}", b.orphaned_logs());
    std::fs::remove_file(data.join("t-3")).unwrap();
    std::fs::remove_file(data.join("grow-4")).unwrap();
    assert_eq!(
        b.create_topic("t", 6, TopicConfig::new())
            .and_then(|()| b.topic("t"))
            .unwrap()
            .partition_count(),
        6
    );
    b.add_partitions("grow", 6).unwrap();
    assert_eq!(b.topic("grow").unwrap().partition_count(), 6);
}
