//! A committed offset survives a crash: a child process commits with `commit_sync` and
//! is killed with SIGKILL right after; the parent reopens the data directory and finds
//! the commit (and every acknowledged fsync'd record).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tidelog::{
    Broker, Durability, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord,
    TopicConfig,
};

const CHILD_DIR: &str = "TIDELOG_COMMIT_CRASH_DIR";

/// The child's work: produce durably, consume, commit offset 60, report, then hang
/// until killed.
#[test]
#[ignore = "the child half of commit_survives_sigkill, which runs it in a child process"]
fn child_commits_then_hangs() -> tidelog::Result<()> {
    let dir = std::env::var(CHILD_DIR).expect("run by commit_survives_sigkill");
    let broker = Broker::open(&dir)?;
    broker.create_topic("t", 1, TopicConfig::new())?;
    let producer = Producer::builder(&broker)
        .durability(Durability::Fsync)
        .build()?;
    let values: Vec<[u8; 4]> = (0u32..100).map(u32::to_be_bytes).collect();
    let records: Vec<ProducerRecord<'_>> = values.iter().map(|v| ProducerRecord::new(v)).collect();
    producer.send_batch("t", &records)?;
    let config = GroupConfig::new("crashy", &["t"])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false);
    let mut member = GroupConsumer::join(&broker, config)?;
    let mut n = 0;
    while n < 100 {
        n += member.poll(Duration::from_secs(5))?.count();
    }
    member.seek("t", 0, 60)?;
    member.commit_sync()?;
    println!("committed");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn commit_survives_sigkill() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_commits_then_hangs",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let mut output = Vec::new();
    let committed = BufReader::new(stdout)
        .lines()
        .map_while(std::result::Result::ok)
        .inspect(|line| output.push(line.clone()))
        .any(|line| line.contains("committed"));
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();
    assert!(committed, "the child never reported its commit: {output:?}");

    let broker = Broker::open(dir.path())?;
    assert_eq!(broker.topic("t")?.partition(0)?.log_end_offset(), 100);
    let member = GroupConsumer::join(&broker, GroupConfig::new("crashy", &["t"]))?;
    assert_eq!(member.committed("t", 0).unwrap(), Some(60));
    Ok(())
}
