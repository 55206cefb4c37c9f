//! A consumer group's committed offsets survive the death of its coordinator: three
//! `tidelog serve` child processes, a group commits through librdkafka, the node that
//! leads the group's partition of `__consumer_offsets` (the coordinator) is killed with
//! SIGKILL, and a new member
//! of the group, talking to the survivors, finds the new coordinator and resumes from
//! the committed offset.

use std::time::Duration;

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tidelog_interop::cluster::{Processes, eventually};

const TOPIC: &str = "work";
const GROUP: &str = "survivors";
const WAIT: Duration = Duration::from_secs(45);

fn consumer(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap()
}

fn partition0(offset: Offset) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, offset).unwrap();
    tpl
}

#[test]
fn committed_offsets_survive_the_coordinators_death() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &["--broker-session-timeout-ms", "2000"],
    );
    let bootstrap = nodes.layout.bootstrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    // The offsets topic exists once all three nodes are up.
    let coordinator = eventually("__consumer_offsets with a leader", WAIT, || {
        let m = admin
            .inner()
            .fetch_metadata(Some(tidelog::OFFSETS_TOPIC), Duration::from_secs(2))
            .ok()?;
        let partitions = m.topics().first()?.partitions();
        let index = tidelog::coordinator::partition_for(GROUP, partitions.len() as i32);
        let p = partitions.iter().find(|p| p.id() == index)?;
        (p.leader() >= 1 && p.isr().len() == 3).then_some(p.leader())
    });
    let created = block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(3))],
        &AdminOptions::new().operation_timeout(Some(WAIT)),
    ))
    .unwrap();
    for r in created {
        r.unwrap();
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .create()
        .unwrap();
    for i in 0..50 {
        let v = format!("job-{i}");
        producer
            .send(BaseRecord::<(), String>::to(TOPIC).payload(&v).partition(0))
            .unwrap();
    }
    producer.flush(WAIT).unwrap();

    // The group commits offset 20.
    let first = consumer(&bootstrap);
    eventually("a commit", WAIT, || {
        first
            .commit(&partition0(Offset::Offset(20)), CommitMode::Sync)
            .ok()
    });
    let committed = first
        .committed_offsets(partition0(Offset::Invalid), Duration::from_secs(10))
        .unwrap();
    assert_eq!(committed.elements()[0].offset(), Offset::Offset(20));
    drop(first);

    // The coordinator dies.
    nodes.kill((coordinator - 1) as usize);
    let live = (0..3)
        .filter(|i| *i != (coordinator - 1) as usize)
        .map(|i| nodes.layout.addr(i))
        .collect::<Vec<_>>()
        .join(",");
    let second = consumer(&live);
    let offset = eventually(
        "the committed offset from the new coordinator",
        WAIT,
        || {
            let c = second
                .committed_offsets(partition0(Offset::Invalid), Duration::from_secs(3))
                .ok()?;
            match c.elements()[0].offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            }
        },
    );
    assert_eq!(offset, 20, "no committed offset lost");
    // A member of the group resumes there.
    second.subscribe(&[TOPIC]).unwrap();
    let m = eventually("a record for the resumed member", WAIT, || {
        second
            .poll(Duration::from_millis(500))
            .and_then(|r| r.ok())
            .map(|m| (m.offset(), m.payload().map(|p| p.to_vec())))
    });
    assert_eq!(m, (20, Some(b"job-20".to_vec())));
    drop(second);
    drop(producer);
    drop(admin);
}
