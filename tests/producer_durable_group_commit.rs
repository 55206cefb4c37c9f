//! Durable sends share fsyncs: eight threads sending single records with
//! `Durability::Fsync` (each waiting for its acknowledgement) get fewer fsyncs than
//! records (the broker's fsync counter), every acknowledged record is in the log at the
//! offset it was acknowledged with, the recovery point covers all of them, and they are
//! all there after a reopen. Segments are small, so rolls happen among the sends.
#![cfg(feature = "testing")]

use std::sync::{Arc, Barrier};

use tidelog::{Broker, Durability, Producer, ProducerRecord, TopicConfig};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 40;

#[test]
fn concurrent_durable_senders_share_fsyncs() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("durable", 1, TopicConfig::new().segment_bytes(4096))?;
    let producer = Producer::builder(&broker)
        .linger(std::time::Duration::ZERO)
        .durability(Durability::Fsync)
        .build()?;
    let before = broker.metrics().storage.fsync.count;
    let start = Arc::new(Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (producer, start) = (producer.clone(), Arc::clone(&start));
            std::thread::spawn(move || -> tidelog::Result<Vec<(i64, [u8; 16])>> {
                start.wait();
                let mut acked = Vec::new();
                for seq in 0..PER_THREAD {
                    let mut value = [0u8; 16];
                    value[..8].copy_from_slice(&t.to_be_bytes());
                    value[8..].copy_from_slice(&seq.to_be_bytes());
                    let meta = producer.send("durable", ProducerRecord::new(&value))?;
                    acked.push((meta.offset, value));
                }
                Ok(acked)
            })
        })
        .collect();
    let mut acked = Vec::new();
    for t in threads {
        acked.extend(t.join().expect("sender thread panicked")?);
    }
    let records = THREADS * PER_THREAD;
    let fsyncs = broker.metrics().storage.fsync.count - before;
    assert!(fsyncs > 0, "durable sends fsync");
    assert!(
        fsyncs * 2 <= records,
        "{fsyncs} fsyncs for {records} durable records from {THREADS} threads: not grouped"
    );

    let partition = broker.topic("durable")?.partition(0)?;
    assert_eq!(partition.log_end_offset(), records as i64);
    assert!(
        partition.segment_count() > 1,
        "rolls happened among the sends"
    );
    assert!(
        partition.log().recovery_point() >= records as i64,
        "the recovery point covers every acknowledged record"
    );
    producer.close()?;
    broker.close()?;

    let broker = Broker::open(dir.path())?;
    let partition = broker.topic("durable")?.partition(0)?;
    assert_eq!(partition.log_end_offset(), records as i64);
    let mut found = std::collections::HashMap::new();
    let mut offset = 0;
    while offset < records as i64 {
        let slice = partition.read(offset, 1 << 20)?;
        for batch in slice.batches() {
            for (i, r) in batch.records().enumerate() {
                let r = r?;
                let value: [u8; 16] = r.value.expect("a value").try_into().expect("16 bytes");
                found.insert(batch.base_offset() + i as i64, value);
            }
            offset = batch.last_offset() + 1;
        }
    }
    assert_eq!(found.len() as u64, records);
    for (offset, value) in acked {
        assert_eq!(found.get(&offset), Some(&value), "offset {offset}");
    }
    broker.close()?;
    Ok(())
}
