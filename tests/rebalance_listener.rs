//! A rebalance listener commits in `on_partitions_revoked`, so the member that takes a
//! partition over starts exactly where the previous owner stopped: no record is read
//! twice, none is skipped.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tidelog::consumer::{RebalanceContext, RebalanceListener};
use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

/// Commits on revocation and records what it was told.
struct CommitOnRevoke {
    events: Arc<Mutex<Vec<String>>>,
}

impl RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked(&mut self, ctx: &RebalanceContext<'_>, partitions: &[(String, i32)]) {
        ctx.commit_sync().expect("commit while revoking");
        self.events
            .lock()
            .push(format!("revoked {}", partitions.len()));
    }

    fn on_partitions_assigned(&mut self, partitions: &[(String, i32)]) {
        self.events
            .lock()
            .push(format!("assigned {}", partitions.len()));
    }
}

fn member(broker: &Broker, events: &Arc<Mutex<Vec<String>>>) -> tidelog::Result<GroupConsumer> {
    let config = GroupConfig::new("careful", &["orders"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .heartbeat_interval(Duration::from_millis(10));
    let mut m = GroupConsumer::join(broker, config)?;
    m.set_listener(CommitOnRevoke {
        events: Arc::clone(events),
    });
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
fn committing_on_revoke_hands_over_without_duplicates() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("orders", 2, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let send = |range: std::ops::Range<u32>| -> tidelog::Result<()> {
        for i in range {
            producer.send(
                "orders",
                ProducerRecord::keyed(&i.to_be_bytes(), &i.to_be_bytes()),
            )?;
        }
        Ok(())
    };
    send(0..200)?;

    let events_a = Arc::new(Mutex::new(Vec::new()));
    let events_b = Arc::new(Mutex::new(Vec::new()));
    let mut a = member(&broker, &events_a)?;
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 200 {
        assert!(
            Instant::now() < deadline,
            "a read only {} records",
            seen.len()
        );
        read(&mut a, &mut seen)?;
    }
    assert_eq!(a.assignment().len(), 2);

    // b joins: a revokes (committing) and the two split the partitions.
    let mut b = member(&broker, &events_b)?;
    while a.assignment().len() != 1 || b.assignment().len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the group never split the partitions"
        );
        read(&mut a, &mut seen)?;
        read(&mut b, &mut seen)?;
    }
    assert!(
        events_a.lock().contains(&"revoked 2".to_string()),
        "{:?}",
        events_a.lock()
    );
    assert_eq!(
        events_b.lock().last().map(String::as_str),
        Some("assigned 1")
    );

    // New records are read once, by whichever member owns their partition.
    send(200..400)?;
    while seen.len() < 400 {
        assert!(Instant::now() < deadline, "read only {} of 400", seen.len());
        read(&mut a, &mut seen)?;
        read(&mut b, &mut seen)?;
    }
    assert_eq!(seen, (0..400).collect());
    Ok(())
}
