//! `tidelog share-groups describe|reset-offsets|delete-offsets --bootstrap`, as
//! kafka-share-groups: the start offsets of a share group (KIP-932) read and set over
//! the Kafka protocol (DescribeShareGroupOffsets, AlterShareGroupOffsets,
//! DeleteShareGroupOffsets), refused while the group has a member.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cli_support::{err, ok, tidelog_raw};
use tidelog::{
    Broker, OffsetReset, Producer, ProducerRecord, Server, ShareConsumer, ShareConsumerConfig,
    TopicConfig,
};

/// Polls `consumer` until it has read `n` records (at most 30 s); their offsets.
fn read(consumer: &mut ShareConsumer, n: usize) -> tidelog::Result<Vec<i64>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut offsets = Vec::new();
    while offsets.len() < n {
        assert!(Instant::now() < deadline, "read only {offsets:?}");
        offsets.extend(
            consumer
                .poll(Duration::from_millis(50))?
                .iter()
                .map(|r| r.offset),
        );
    }
    consumer.commit_sync()?;
    offsets.sort_unstable();
    Ok(offsets)
}

#[test]
fn share_group_offsets_are_described_reset_and_deleted() -> tidelog::Result<()> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(tmp.path())?;
    broker.create_topic("jobs", 1, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let records: Vec<ProducerRecord> = (0..5).map(|_| ProducerRecord::new(b"job")).collect();
    producer.send_batch("jobs", &records)?;
    producer.flush()?;
    let config =
        ShareConsumerConfig::new("workers", &["jobs"]).auto_offset_reset(OffsetReset::Earliest);
    let mut worker = ShareConsumer::new(&broker, config.clone())?;
    assert_eq!(read(&mut worker, 5)?, vec![0, 1, 2, 3, 4]);

    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()?;
    let addr = server.local_addr().to_string();
    let cli = |args: &[&str]| {
        let mut all = vec!["share-groups"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--bootstrap", &addr]);
        tidelog_raw(&all, "")
    };
    let described = ok(cli(&["describe", "workers"]));
    assert_eq!(
        described,
        "GROUP\tTOPIC\tPARTITION\tSTART-OFFSET\tLEADER-EPOCH\tLAG\nworkers\tjobs\t0\t5\t0\t0\n"
    );
    // A member is active: nothing moves.
    let reset = [
        "reset-offsets",
        "workers",
        "--topic",
        "jobs",
        "--to-earliest",
    ];
    err(cli(&reset), 1, "NON_EMPTY_GROUP");
    err(
        cli(&["delete-offsets", "workers", "--topic", "jobs"]),
        1,
        "NON_EMPTY_GROUP",
    );
    worker.close()?;

    let to_3 = [
        "reset-offsets",
        "workers",
        "--topic",
        "jobs",
        "--to-offset",
        "3",
    ];
    let dry = ok(cli(&[&to_3[..], &["--dry-run"]].concat()));
    assert!(dry.contains("workers\tjobs\t0\t3\n(dry run"), "{dry}");
    assert!(ok(cli(&["describe", "workers"])).contains("workers\tjobs\t0\t5\t"));
    let moved = ok(cli(&to_3));
    assert!(moved.ends_with("workers\tjobs\t0\t3\n"), "{moved}");
    assert!(ok(cli(&["describe", "workers"])).contains("workers\tjobs\t0\t3\t0\t2\n"));
    // The group reads 3 and 4 again.
    let mut worker = ShareConsumer::new(&broker, config.clone())?;
    assert_eq!(read(&mut worker, 2)?, vec![3, 4]);
    worker.close()?;

    let deleted = ok(cli(&["delete-offsets", "workers", "--topic", "jobs"]));
    assert_eq!(deleted, "GROUP\tTOPIC\tSTATUS\nworkers\tjobs\tdeleted\n");
    err(cli(&["describe", "workers"]), 1, "GROUP_ID_NOT_FOUND");
    // Deleted, it reads from where a group never read starts: the earliest offset.
    let mut worker = ShareConsumer::new(&broker, config)?;
    assert_eq!(read(&mut worker, 5)?, vec![0, 1, 2, 3, 4]);
    worker.close()?;
    server.shutdown()?;
    broker.close()
}
