//! Eight producer threads send 100k records each: nothing lost, nothing duplicated,
//! and each thread's records keep their order within a partition.

use std::collections::HashMap;

use tidelog::{
    Broker, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 100_000;
const PARTITIONS: i32 = 4;

#[test]
fn eight_threads_no_loss_no_duplicate_order_kept() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("load", PARTITIONS, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let producer = producer.clone();
            std::thread::spawn(move || -> tidelog::Result<()> {
                let mut value = [0u8; 16];
                value[..8].copy_from_slice(&t.to_be_bytes());
                for seq in 0..PER_THREAD {
                    value[8..].copy_from_slice(&seq.to_be_bytes());
                    // Keys spread each thread over every partition.
                    let key = seq.to_be_bytes();
                    drop(producer.send_async("load", ProducerRecord::keyed(&key, &value))?);
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("producer thread panicked")?;
    }
    producer.flush()?;

    let mut consumer = Consumer::new(
        &broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| ("load", p)).collect();
    consumer.assign(&all)?;
    let mut seen = vec![vec![false; PER_THREAD as usize]; THREADS as usize];
    let mut last: HashMap<(i32, u64), u64> = HashMap::new();
    let mut total = 0u64;
    while total < THREADS * PER_THREAD {
        let records = consumer.poll(std::time::Duration::from_secs(5))?;
        assert!(!records.is_empty(), "records missing after {total}");
        for r in records.iter() {
            let r = r?;
            let v = r.value.unwrap_or_default();
            let t = u64::from_be_bytes(v[..8].try_into().unwrap_or_default());
            let seq = u64::from_be_bytes(v[8..16].try_into().unwrap_or_default());
            assert!(
                !seen[t as usize][seq as usize],
                "thread {t} record {seq} duplicated"
            );
            seen[t as usize][seq as usize] = true;
            if let Some(prev) = last.insert((r.partition, t), seq) {
                assert!(
                    prev < seq,
                    "thread {t}: {seq} after {prev} in partition {}",
                    r.partition
                );
            }
            total += 1;
        }
    }
    assert!(
        seen.iter().all(|s| s.iter().all(|&b| b)),
        "a record was lost"
    );
    let ends: i64 = (0..PARTITIONS)
        .map(|p| {
            broker
                .topic("load")
                .and_then(|t| t.partition(p))
                .map(|p| p.log_end_offset())
        })
        .sum::<tidelog::Result<i64>>()?;
    assert_eq!(ends as u64, THREADS * PER_THREAD);
    Ok(())
}
