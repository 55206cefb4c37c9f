//! Acknowledged durable records survive a crash with concurrent durable senders: a
//! child process runs eight threads sending single records with `Durability::Fsync`
//! (group commit: they share fsyncs, and segments are small, so rolls happen among the
//! sends) and prints each acknowledged record's offset; it is killed with SIGKILL while
//! they send. The parent reopens the data directory and finds every acknowledged record
//! at its offset, byte for byte, with a recovery point within the log. Three rounds over
//! the same directory, each child appending after what the previous ones left.
#![cfg(feature = "testing")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tidelog::{Broker, Durability, Producer, ProducerRecord, TopicConfig};

const CHILD_DIR: &str = "TIDELOG_DURABLE_CRASH_DIR";
const CHILD_ROUND: &str = "TIDELOG_DURABLE_CRASH_ROUND";
const TOPIC: &str = "durable";
const THREADS: u64 = 8;
const ROUNDS: u64 = 3;
/// Acknowledgements the parent waits for before it kills a child.
const ACKS_BEFORE_KILL: usize = 120;

/// The value of record `seq` of thread `thread` in round `round`.
fn value(round: u64, thread: u64, seq: u64) -> String {
    format!("round-{round}-thread-{thread}-seq-{seq:06}")
}

/// The child's work: eight threads send durably and report every acknowledgement as
/// `acked <offset> <value>`, until killed (or, bounded, until each has sent 20,000).
#[test]
#[ignore = "the child half of durable_acks_survive_sigkill, which runs it in a child process"]
fn child_sends_durably_until_killed() -> tidelog::Result<()> {
    let dir = std::env::var(CHILD_DIR).expect("run by durable_acks_survive_sigkill");
    let round: u64 = std::env::var(CHILD_ROUND)
        .expect("round")
        .parse()
        .expect("a round number");
    let broker = Broker::open(&dir)?;
    if broker.topic(TOPIC).is_err() {
        broker.create_topic(TOPIC, 1, TopicConfig::new().segment_bytes(4096))?;
    }
    let producer = Producer::builder(&broker)
        .linger(Duration::ZERO)
        .durability(Durability::Fsync)
        .build()?;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let producer = producer.clone();
            std::thread::spawn(move || -> tidelog::Result<()> {
                for seq in 0..20_000 {
                    let v = value(round, t, seq);
                    let meta = producer.send(TOPIC, ProducerRecord::new(v.as_bytes()))?;
                    println!("acked {} {v}", meta.offset);
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("sender panicked")?;
    }
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Runs one child for `round`, kills it after `ACKS_BEFORE_KILL` acknowledgements, and
/// returns the acknowledged (offset, value) pairs it printed.
fn crash_round(dir: &std::path::Path, round: u64) -> Vec<(i64, String)> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_sends_durably_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acked = Vec::new();
    while acked.len() < ACKS_BEFORE_KILL {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        if let Some(rest) = line.strip_prefix("acked ") {
            let (offset, v) = rest.split_once(' ').expect("acked <offset> <value>");
            acked.push((offset.parse().expect("an offset"), v.to_string()));
        }
    }
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();
    // Lines printed before the kill are acknowledgements too.
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        if let Some(rest) = line.strip_prefix("acked ") {
            let (offset, v) = rest.split_once(' ').expect("acked <offset> <value>");
            acked.push((offset.parse().expect("an offset"), v.to_string()));
        }
    }
    reader.join().expect("reader thread");
    assert!(
        acked.len() >= ACKS_BEFORE_KILL,
        "round {round}: the child acknowledged only {} records",
        acked.len()
    );
    acked
}

/// Every record of the partition, by offset.
fn read_all(broker: &Broker) -> tidelog::Result<HashMap<i64, String>> {
    let partition = broker.topic(TOPIC)?.partition(0)?;
    let end = partition.log_end_offset();
    let mut found = HashMap::new();
    let mut offset = partition.log_start_offset();
    while offset < end {
        let slice = partition.read(offset, 1 << 20)?;
        for batch in slice.batches() {
            for (i, r) in batch.records().enumerate() {
                let v = r?.value.expect("a value").to_vec();
                let v = String::from_utf8(v).expect("a value the child wrote");
                found.insert(batch.base_offset() + i as i64, v);
            }
            offset = batch.last_offset() + 1;
        }
    }
    Ok(found)
}

#[test]
fn durable_acks_survive_sigkill() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut acked: Vec<(i64, String)> = Vec::new();
    for round in 0..ROUNDS {
        acked.extend(crash_round(dir.path(), round));
        let broker = Broker::open(dir.path())?;
        let partition = broker.topic(TOPIC)?.partition(0)?;
        let log = partition.log();
        assert!(
            log.recovery_point() <= log.log_end_offset(),
            "round {round}: recovery point {} past the log end {}",
            log.recovery_point(),
            log.log_end_offset()
        );
        let found = read_all(&broker)?;
        for (offset, v) in &acked {
            assert_eq!(
                found.get(offset),
                Some(v),
                "round {round}: acknowledged offset {offset} lost or changed"
            );
        }
        broker.close()?;
    }
    Ok(())
}
