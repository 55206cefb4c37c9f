//! A work queue: jobs go to a topic, and the workers of one consumer group split its
//! partitions, so each job is handled by one worker. Workers commit after each batch, so
//! a restarted worker resumes after the last job it finished.
//!
//! Run with `cargo run --release --example work_queue`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tidelog::coordinator::GroupState;
use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

const JOBS: u64 = 10_000;
const WORKERS: usize = 4;

fn main() -> tidelog::Result<()> {
    let dir = tempfile::tempdir()
        .map_err(|e| tidelog::Error::io("create temporary directory", std::env::temp_dir(), e))?;
    let broker = Broker::open(dir.path())?;
    broker.create_topic_if_missing("jobs", 8, TopicConfig::new())?;

    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (broker, done) = (broker.clone(), Arc::clone(&done));
            std::thread::spawn(move || -> tidelog::Result<u64> {
                let config = GroupConfig::new("workers", &["jobs"])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .enable_auto_commit(false);
                let mut worker = GroupConsumer::join(&broker, config)?;
                let mut handled = 0;
                let mut partitions = std::collections::BTreeSet::new();
                while done.load(Ordering::Acquire) < JOBS {
                    let jobs = worker.poll(Duration::from_millis(100))?;
                    for job in jobs.iter() {
                        let job = job?;
                        // "Handle" the job: here, just check its payload.
                        assert!(job.value.is_some_and(|v| v.starts_with(b"job-")));
                        handled += 1;
                        partitions.insert(job.partition);
                    }
                    if !jobs.is_empty() {
                        // The jobs of this batch are done: never redo them.
                        worker.commit_async()?;
                        done.fetch_add(jobs.count() as u64, Ordering::AcqRel);
                    }
                }
                println!("worker {w} handled {handled} jobs from partitions {partitions:?}");
                Ok(handled)
            })
        })
        .collect();

    // Let every worker join before the jobs arrive, so that the group splits them
    // (a worker joining later would take over some partitions in a rebalance).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let group = broker
            .group_coordinator()
            .describe_group("workers")
            .map_err(|source| tidelog::Error::Group {
                group: "workers".into(),
                source,
            })?;
        if group.state == GroupState::Stable && group.members.len() == WORKERS {
            break;
        }
        if Instant::now() > deadline {
            return Err(tidelog::Error::Timeout(format!(
                "the {WORKERS} workers did not form a stable group: {:?} with {} members",
                group.state,
                group.members.len()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let producer = Producer::new(&broker)?;
    for i in 0..JOBS {
        let job = format!("job-{i}");
        drop(producer.send_async(
            "jobs",
            ProducerRecord::keyed(job.as_bytes(), job.as_bytes()),
        )?);
    }
    producer.flush()?;

    let mut total = 0;
    for w in workers {
        total += w.join().expect("worker thread panicked")?;
    }
    assert_eq!(total, JOBS, "every job handled exactly once");
    println!("{total} jobs handled by {WORKERS} workers, each exactly once");
    Ok(())
}
