//! Publish-subscribe: three groups on one topic each receive every record once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

#[test]
fn three_groups_each_receive_every_record() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("news", 4, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    const N: u32 = 2_000;
    let values: Vec<[u8; 4]> = (0..N).map(u32::to_be_bytes).collect();
    let records: Vec<ProducerRecord<'_>> =
        values.iter().map(|v| ProducerRecord::keyed(v, v)).collect();
    producer.send_batch("news", &records)?;

    let handles: Vec<_> = ["billing", "search", "audit"]
        .into_iter()
        .map(|group| {
            let broker = broker.clone();
            std::thread::spawn(move || -> tidelog::Result<BTreeSet<u32>> {
                let config =
                    GroupConfig::new(group, &["news"]).auto_offset_reset(OffsetReset::Earliest);
                let mut member = GroupConsumer::join(&broker, config)?;
                let mut seen = BTreeSet::new();
                let deadline = Instant::now() + Duration::from_secs(30);
                while seen.len() < N as usize && Instant::now() < deadline {
                    for r in member.poll(Duration::from_millis(100))?.iter() {
                        let r = r?;
                        let v = u32::from_be_bytes(
                            r.value.unwrap_or_default().try_into().unwrap_or_default(),
                        );
                        assert!(seen.insert(v), "group {group} got record {v} twice");
                    }
                }
                Ok(seen)
            })
        })
        .collect();
    for h in handles {
        let seen = h.join().expect("member thread panicked")?;
        assert_eq!(seen.len(), N as usize);
        assert_eq!(seen.iter().next_back(), Some(&(N - 1)));
    }
    Ok(())
}
