//! Cooperative-sticky rebalancing: when a member joins, the existing member keeps
//! consuming the partitions it keeps and gives up only the ones that move; nothing is
//! read twice or skipped across the handover.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tidelog::consumer::{CooperativeStickyAssignor, RebalanceContext, RebalanceListener};
use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

struct Log(Arc<Mutex<Vec<(String, usize)>>>);

impl RebalanceListener for Log {
    fn on_partitions_revoked(&mut self, _: &RebalanceContext<'_>, partitions: &[(String, i32)]) {
        self.0.lock().push(("revoked".into(), partitions.len()));
    }
    fn on_partitions_assigned(&mut self, partitions: &[(String, i32)]) {
        self.0.lock().push(("assigned".into(), partitions.len()));
    }
}

fn member(
    broker: &Broker,
    log: &Arc<Mutex<Vec<(String, usize)>>>,
) -> tidelog::Result<GroupConsumer> {
    let config = GroupConfig::new("coop", &["events"])
        .assignors(vec![Arc::new(CooperativeStickyAssignor)])
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

#[test]
fn a_joining_member_takes_half_without_a_stop_the_world() -> tidelog::Result<()> {
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

    let (log_a, log_b) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let mut a = member(&broker, &log_a)?;
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 200 {
        assert!(Instant::now() < deadline, "a read only {}", seen.len());
        read(&mut a, &mut seen)?;
    }
    let before: BTreeSet<(String, i32)> = a.assignment().into_iter().collect();
    assert_eq!(before.len(), 4);

    let mut b = member(&broker, &log_b)?;
    while a.assignment().len() != 2 || b.assignment().len() != 2 {
        assert!(
            Instant::now() < deadline,
            "the group never split the partitions"
        );
        read(&mut a, &mut seen)?;
        // a only ever loses partitions: what it has is a subset of what it had.
        let now: BTreeSet<(String, i32)> = a.assignment().into_iter().collect();
        assert!(now.is_subset(&before));
        read(&mut b, &mut seen)?;
    }
    // a gave up exactly the two partitions that moved, never all four.
    assert_eq!(
        log_a
            .lock()
            .iter()
            .filter(|(e, _)| e == "revoked")
            .map(|(_, n)| *n)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert!(log_b.lock().contains(&("assigned".to_string(), 2)));

    send(200..400)?;
    while seen.len() < 400 {
        assert!(Instant::now() < deadline, "read only {} of 400", seen.len());
        read(&mut a, &mut seen)?;
        read(&mut b, &mut seen)?;
    }
    assert_eq!(seen, (0..400).collect());
    Ok(())
}
