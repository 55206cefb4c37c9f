//! In-process group members speaking the consumer group protocol (KIP-848,
//! `GroupProtocol::Consumer`): the broker assigns; a joining member gets its half only
//! after the other has revoked it (never owned twice), the listener hears each move,
//! nothing is read twice across the handover, a leaving member's partitions go to the
//! other, and a member resuming the group starts after the committed offsets.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tidelog::consumer::{GroupProtocol, RebalanceContext, RebalanceListener};
use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

type Events = Arc<Mutex<Vec<(&'static str, usize)>>>;

struct Log(Events);

impl RebalanceListener for Log {
    fn on_partitions_revoked(&mut self, _: &RebalanceContext<'_>, partitions: &[(String, i32)]) {
        self.0.lock().push(("revoked", partitions.len()));
    }
    fn on_partitions_assigned(&mut self, partitions: &[(String, i32)]) {
        self.0.lock().push(("assigned", partitions.len()));
    }
}

fn member(broker: &Broker, log: &Events) -> tidelog::Result<GroupConsumer> {
    let config = GroupConfig::new("kip848", &["events"])
        .group_protocol(GroupProtocol::Consumer)
        .auto_offset_reset(OffsetReset::Earliest)
        .heartbeat_interval(Duration::from_millis(10));
    let mut m = GroupConsumer::join(broker, config)?;
    m.set_listener(Log(Arc::clone(log)));
    Ok(m)
}

fn read(m: &mut GroupConsumer, seen: &mut BTreeSet<u32>) -> tidelog::Result<()> {
    for r in m.poll(Duration::from_millis(20))?.iter() {
        let v = u32::from_be_bytes(r?.value.unwrap_or_default().try_into().unwrap_or_default());
        assert!(seen.insert(v), "record {v} read twice");
    }
    Ok(())
}

fn owned_twice(a: &GroupConsumer, b: &GroupConsumer) -> bool {
    let a: BTreeSet<_> = a.assignment().into_iter().collect();
    b.assignment().iter().any(|tp| a.contains(tp))
}

#[test]
fn members_split_hand_over_and_resume_through_the_broker_assignment() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("events", 4, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let send = |range: std::ops::Range<u32>| -> tidelog::Result<()> {
        let values: Vec<[u8; 4]> = range.map(u32::to_be_bytes).collect();
        let records: Vec<ProducerRecord<'_>> =
            values.iter().map(|v| ProducerRecord::keyed(v, v)).collect();
        producer.send_batch("events", &records).map(drop)
    };
    send(0..200)?;

    let (log_a, log_b) = (Events::default(), Events::default());
    let mut a = member(&broker, &log_a)?;
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 200 {
        assert!(Instant::now() < deadline, "a read only {}", seen.len());
        read(&mut a, &mut seen)?;
    }
    assert_eq!(a.assignment().len(), 4);
    a.commit_sync()?;

    let mut b = member(&broker, &log_b)?;
    send(200..400)?;
    while a.assignment().len() != 2 || b.assignment().len() != 2 {
        assert!(
            Instant::now() < deadline,
            "the group never split the partitions"
        );
        read(&mut a, &mut seen)?;
        assert!(!owned_twice(&a, &b), "a partition owned by both members");
        read(&mut b, &mut seen)?;
        assert!(!owned_twice(&a, &b), "a partition owned by both members");
    }
    while seen.len() < 400 {
        assert!(Instant::now() < deadline, "read only {} of 400", seen.len());
        read(&mut a, &mut seen)?;
        read(&mut b, &mut seen)?;
    }
    assert_eq!(log_a.lock().as_slice(), &[("assigned", 4), ("revoked", 2)]);
    assert_eq!(log_b.lock().as_slice(), &[("assigned", 2)]);

    // b leaves (committing its positions): a gets all four.
    b.close();
    send(400..440)?;
    while a.assignment().len() != 4 {
        assert!(Instant::now() < deadline, "a never got b's partitions");
        read(&mut a, &mut seen)?;
    }
    while seen.len() < 440 {
        assert!(Instant::now() < deadline, "read only {} of 440", seen.len());
        read(&mut a, &mut seen)?;
    }
    a.close();

    // A new member resumes after what was committed: nothing more to read.
    let mut c = member(&broker, &Events::default())?;
    let mut again = BTreeSet::new();
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        read(&mut c, &mut again)?;
    }
    assert_eq!(c.assignment().len(), 4);
    assert!(
        again.is_empty(),
        "re-read {} committed records",
        again.len()
    );
    Ok(())
}
