//! `tidelog groups describe` of a consumer-protocol group (KIP-848), as
//! kafka-consumer-groups describes one: group epoch, assignment epoch and assignor,
//! each member's epoch with its current and target assignment, and the committed
//! offsets with their lag. Over the Kafka protocol (ConsumerGroupDescribe) and on the
//! data directory.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cli_support::{err, ok, tidelog, tidelog_raw};
use tidelog::consumer::GroupProtocol;
use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, Server, TopicConfig,
};

#[test]
fn a_consumer_protocol_group_is_described_with_epochs_and_assignments() -> tidelog::Result<()> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    let broker = Broker::open(&data)?;
    broker.create_topic("events", 2, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let records = [
        ProducerRecord::new(b"a").partition(0),
        ProducerRecord::new(b"b").partition(0),
        ProducerRecord::new(b"c").partition(0),
    ];
    producer.send_batch("events", &records)?;
    producer.flush()?;

    let config = GroupConfig::new("kip848", &["events"])
        .group_protocol(GroupProtocol::Consumer)
        .auto_offset_reset(OffsetReset::Earliest)
        .heartbeat_interval(Duration::from_millis(10));
    let mut member = GroupConsumer::join(&broker, config)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut read = 0;
    while read < 3 || member.assignment().len() < 2 {
        assert!(Instant::now() < deadline, "read {read} records");
        read += member.poll(Duration::from_millis(20))?.iter().count();
    }
    member.commit_sync()?;
    let id = member.member_id().to_string();

    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()?;
    let addr = server.local_addr().to_string();
    let remote = ok(tidelog_raw(
        &["groups", "describe", "kip848", "--bootstrap", &addr],
        "",
    ));
    let local = ok(tidelog(&data, &["groups", "describe", "kip848"], ""));
    for described in [&remote, &local] {
        assert!(
            described.starts_with(
                "Consumer group 'kip848': state Stable, 1 member, group epoch 1, assignment epoch 1, assignor uniform (consumer protocol)\n"
            ),
            "{described}"
        );
        assert!(
            described
                .contains("\nMEMBER-ID\tCLIENT-ID\tHOST\tEPOCH\tASSIGNMENT\tTARGET-ASSIGNMENT\n"),
            "{described}"
        );
        let line = described
            .lines()
            .find(|l| l.starts_with(&id))
            .unwrap_or_else(|| panic!("no line of member {id}: {described}"));
        assert!(line.ends_with("\t1\tevents(0,1)\tevents(0,1)"), "{line}");
        assert!(
            described.contains(&format!("\nkip848\tevents\t0\t3\t3\t0\t{id}\n")),
            "{described}"
        );
    }
    // Its offsets stay while it has members, as kafka-consumer-groups refuses.
    err(
        tidelog_raw(
            &[
                "groups",
                "reset-offsets",
                "kip848",
                "--topic",
                "events",
                "--to-earliest",
                "--bootstrap",
                &addr,
            ],
            "",
        ),
        1,
        "consumer group \"kip848\": NON_EMPTY_GROUP",
    );
    member.close();
    server.shutdown()?;
    broker.close()
}
