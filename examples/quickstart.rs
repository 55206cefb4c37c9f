//! Quickstart: producer threads publish keyed records to a 6-partition topic while a
//! 3-member consumer group on its own threads consumes them; then the program checks
//! that the group consumed every record exactly once, in order within each partition.
//!
//! Run with `cargo run --release --example quickstart`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

const PRODUCERS: u64 = 4;
const RECORDS_PER_PRODUCER: u64 = 250_000;
const MEMBERS: usize = 3;
const PARTITIONS: i32 = 6;

/// What one member saw: per partition, (offset, producer, sequence) in receive order.
type Seen = BTreeMap<i32, Vec<(i64, u64, u64)>>;

fn main() -> tidelog::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/quickstart-data");
    let _ = std::fs::remove_dir_all(&dir);
    let broker = Broker::open(&dir)?;
    broker.create_topic_if_missing("events", PARTITIONS, TopicConfig::new())?;
    let total = PRODUCERS * RECORDS_PER_PRODUCER;
    println!(
        "data directory {}: topic \"events\" with {PARTITIONS} partitions",
        dir.display()
    );

    // The consumer group: 3 members, each on its own thread.
    let consumed = Arc::new(AtomicU64::new(0));
    let members: Vec<_> = (0..MEMBERS)
        .map(|i| {
            let broker = broker.clone();
            let consumed = Arc::clone(&consumed);
            std::thread::spawn(move || -> tidelog::Result<Seen> {
                let config = GroupConfig::new("quickstart", &["events"])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .client_id(format!("member-{i}"));
                let mut member = GroupConsumer::join(&broker, config)?;
                let mut seen = Seen::new();
                while consumed.load(Ordering::Acquire) < total {
                    let records = member.poll(Duration::from_millis(100))?;
                    let mut n = 0;
                    for record in records.iter() {
                        let record = record?;
                        let value = record.value.unwrap_or_default();
                        let producer =
                            u64::from_be_bytes(value[0..8].try_into().unwrap_or_default());
                        let seq = u64::from_be_bytes(value[8..16].try_into().unwrap_or_default());
                        seen.entry(record.partition).or_default().push((
                            record.offset,
                            producer,
                            seq,
                        ));
                        n += 1;
                    }
                    consumed.fetch_add(n, Ordering::AcqRel);
                }
                member.commit_sync()?;
                Ok(seen)
            })
        })
        .collect();

    // Producer threads sharing one producer: records coalesce into batches.
    let producer = Producer::new(&broker)?;
    let start = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let producer = producer.clone();
            std::thread::spawn(move || -> tidelog::Result<()> {
                let mut value = [0u8; 100];
                value[0..8].copy_from_slice(&id.to_be_bytes());
                for seq in 0..RECORDS_PER_PRODUCER {
                    value[8..16].copy_from_slice(&seq.to_be_bytes());
                    let key = (seq % 1000).to_be_bytes();
                    // Fire and forget: the receipt is dropped; flush() below waits.
                    drop(producer.send_async("events", ProducerRecord::keyed(&key, &value))?);
                }
                Ok(())
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer thread panicked")?;
    }
    producer.flush()?;
    let produce_time = start.elapsed();
    println!(
        "produced {total} records of 100 bytes in {:.2?} ({:.2} M records/s)",
        produce_time,
        total as f64 / produce_time.as_secs_f64() / 1e6
    );

    let mut all: BTreeMap<i32, Vec<(i64, u64, u64)>> = BTreeMap::new();
    for (i, m) in members.into_iter().enumerate() {
        let seen = m.join().expect("member thread panicked")?;
        let count: usize = seen.values().map(Vec::len).sum();
        println!(
            "member {i} consumed {count} records from partitions {:?}",
            seen.keys().collect::<Vec<_>>()
        );
        for (p, records) in seen {
            // Within one member, a partition is read in offset order.
            assert!(
                records.windows(2).all(|w| w[0].0 < w[1].0),
                "member {i} read partition {p} out of order"
            );
            all.entry(p).or_default().extend(records);
        }
    }
    let elapsed = start.elapsed();

    // Exactly once: every offset of every partition consumed once, no more.
    let mut checked = 0u64;
    for p in 0..PARTITIONS {
        let end = broker.topic("events")?.partition(p)?.log_end_offset();
        let mut records = all.remove(&p).unwrap_or_default();
        records.sort_unstable();
        assert_eq!(
            records.len() as i64,
            end,
            "partition {p}: consumed {} of {end} records",
            records.len()
        );
        for (i, (offset, _, _)) in records.iter().enumerate() {
            assert_eq!(
                *offset, i as i64,
                "partition {p}: offset {offset} missing or duplicated"
            );
        }
        // Per producer, sequence numbers rise with offsets: partition order is kept.
        let mut last: BTreeMap<u64, u64> = BTreeMap::new();
        for (offset, producer, seq) in &records {
            if let Some(prev) = last.insert(*producer, *seq) {
                assert!(
                    prev < *seq,
                    "partition {p} offset {offset}: producer {producer} out of order"
                );
            }
        }
        checked += end as u64;
    }
    assert_eq!(checked, total, "records produced and consumed differ");
    println!(
        "verified: {checked} records consumed exactly once by the group, in order per partition; end to end {:.2?} ({:.2} M records/s)",
        elapsed,
        total as f64 / elapsed.as_secs_f64() / 1e6
    );
    broker.close()?;
    Ok(())
}
