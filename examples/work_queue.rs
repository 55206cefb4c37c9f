//! A work queue: jobs go to a topic, and the workers of one share group take them one by
//! one, each job acquired by one worker at a time, so there can be more workers than
//! partitions. A worker accepts each job it finished; a job it cannot handle now it
//! releases (another worker gets it); a job that can never be handled it rejects. A
//! worker that dies holding jobs loses them to the others when their locks expire.
//!
//! Run with `cargo run --release --example work_queue`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tidelog::{
    AcknowledgeType, Broker, OffsetReset, Producer, ProducerRecord, ShareConsumer,
    ShareConsumerConfig, TopicConfig,
};

const JOBS: u64 = 10_000;
const PARTITIONS: i32 = 2;
const WORKERS: usize = 6;

fn main() -> tidelog::Result<()> {
    let dir = tempfile::tempdir()
        .map_err(|e| tidelog::Error::io("create temporary directory", std::env::temp_dir(), e))?;
    let broker = Broker::open(dir.path())?;
    broker.create_topic_if_missing("jobs", PARTITIONS, TopicConfig::new())?;

    let producer = Producer::new(&broker)?;
    for i in 0..JOBS {
        let job = format!("job-{i}");
        drop(producer.send_async(
            "jobs",
            ProducerRecord::keyed(job.as_bytes(), job.as_bytes()),
        )?);
    }
    producer.flush()?;

    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (broker, done) = (broker.clone(), Arc::clone(&done));
            std::thread::spawn(move || -> tidelog::Result<(u64, u64)> {
                let config = ShareConsumerConfig::new("workers", &["jobs"])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .max_poll_records(50);
                let mut worker = ShareConsumer::new(&broker, config)?;
                let (mut handled, mut released) = (0, 0);
                while done.load(Ordering::Acquire) < JOBS {
                    for job in worker.poll(Duration::from_millis(100))? {
                        assert!(job.value.as_deref().is_some_and(|v| v.starts_with(b"job-")));
                        // A job "fails" on its first delivery now and then: released, it
                        // goes to some worker again, with its delivery count up by one.
                        if job.delivery_count == 1 && job.offset % 97 == 0 {
                            worker.acknowledge(&job, AcknowledgeType::Release)?;
                            released += 1;
                            continue;
                        }
                        worker.acknowledge(&job, AcknowledgeType::Accept)?;
                        handled += 1;
                        done.fetch_add(1, Ordering::AcqRel);
                    }
                }
                worker.close()?;
                println!("worker {w} handled {handled} jobs and released {released}");
                Ok((handled, released))
            })
        })
        .collect();

    let mut total = 0;
    for w in workers {
        total += w.join().expect("worker thread panicked")?.0;
    }
    assert_eq!(total, JOBS, "every job handled exactly once");
    println!(
        "{total} jobs handled by {WORKERS} workers sharing {PARTITIONS} partitions, each exactly once"
    );
    Ok(())
}
