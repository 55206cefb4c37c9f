//! Exactly once across crashes: a child process copies 10,000 records from an input
//! topic to an output topic in a consume-transform-produce loop (a read_committed
//! group member, a transactional producer, `send_offsets_to_transaction` with the
//! member's group metadata, one transaction per poll). It is killed with SIGKILL twice
//! while it copies, and started again over the same data directory; the third run
//! copies to the end. A read_committed reader of the output then finds every input
//! record exactly once.
#![cfg(feature = "testing")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tidelog::transaction::TransactionConfig;
use tidelog::{
    Broker, Consumer, ConsumerConfig, GroupConfig, GroupConsumer, IsolationLevel, OffsetReset,
    Producer, ProducerRecord, TopicConfig,
};

const CHILD_DIR: &str = "TIDELOG_TXN_CRASH_DIR";
const INPUT: &str = "input";
const OUTPUT: &str = "output";
const RECORDS: usize = 10_000;
const PARTITIONS: i32 = 2;
/// Commits the parent waits for before it kills a child.
const COMMITS_BEFORE_KILL: usize = 30;

fn open(dir: &str) -> tidelog::Result<Broker> {
    Broker::builder(dir)
        .transaction(TransactionConfig {
            state_log_partitions: 3,
            ..TransactionConfig::default()
        })
        .open()
}

/// The child: copies until the group's offsets reach the end of the input, printing
/// `committed <n>` after each transaction and `done` at the end (bounded: 60 s).
#[test]
#[ignore = "the child half of copies_exactly_once_across_sigkills, run in a child process"]
fn child_copies_until_killed() -> tidelog::Result<()> {
    let dir = std::env::var(CHILD_DIR).expect("run by copies_exactly_once_across_sigkills");
    let broker = open(&dir)?;
    let producer = Producer::builder(&broker)
        .transactional_id("copier")
        .build()?;
    producer.init_transactions()?;
    let mut config = GroupConfig::new("copiers", &[INPUT])
        .isolation_level(IsolationLevel::ReadCommitted)
        .enable_auto_commit(false)
        .auto_offset_reset(OffsetReset::Earliest)
        .group_instance_id("copier-1");
    // Small polls: many transactions, so that the kills land among them.
    config.max_partition_fetch_bytes = 2048;
    let mut member = GroupConsumer::join(&broker, config)?;
    let ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| Ok(broker.topic(INPUT)?.partition(p)?.log_end_offset()))
        .collect::<tidelog::Result<_>>()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let done = (0..PARTITIONS).try_fold(true, |all, p| -> tidelog::Result<bool> {
            Ok(all && member.committed(INPUT, p)? == Some(ends[p as usize]))
        })?;
        if done {
            println!("done");
            return Ok(());
        }
        let polled = member.poll(Duration::from_millis(50))?;
        if polled.is_empty() {
            continue;
        }
        producer.begin_transaction()?;
        let mut next: HashMap<i32, i64> = HashMap::new();
        let mut n = 0;
        for r in polled.iter() {
            let r = r?;
            let value = r
                .value
                .expect("input records have values")
                .to_ascii_uppercase();
            producer.send_nowait(OUTPUT, ProducerRecord::new(&value))?;
            next.insert(r.partition, r.offset + 1);
            n += 1;
        }
        let offsets: Vec<(String, i32, i64)> = next
            .into_iter()
            .map(|(p, o)| (INPUT.to_string(), p, o))
            .collect();
        producer.send_offsets_to_transaction(&offsets, &member.group_metadata())?;
        producer.commit_transaction()?;
        println!("committed {n}");
    }
    panic!("the copy did not finish within 60 s");
}

/// Runs one child; with `kill_after`, kills it after that many commits, else waits
/// for its `done`. Returns whether it reported `done`.
fn run_child(dir: &std::path::Path, kill_after: Option<usize>) -> bool {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_copies_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
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
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut commits = 0;
    let mut done = false;
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        // The first line follows the test harness's "test ... " on the same line.
        let line = line.rsplit("... ").next().unwrap_or(&line);
        if line.starts_with("committed ") {
            commits += 1;
            if kill_after.is_some_and(|k| commits >= k) {
                break;
            }
        } else if line == "done" {
            done = true;
            break;
        } else {
            eprintln!("child: {line}");
        }
    }
    if kill_after.is_some() {
        child.kill().expect("SIGKILL the child");
        let _ = child.wait();
    } else {
        let status = child.wait().expect("child exit");
        assert!(status.success(), "the last child failed: {status}");
    }
    drop(rx);
    reader.join().expect("reader thread");
    if let Some(k) = kill_after {
        assert!(
            commits >= k,
            "the child committed only {commits} times before the kill"
        );
    }
    done
}

#[test]
fn copies_exactly_once_across_sigkills() -> tidelog::Result<()> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().to_str().expect("utf-8 path");
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("rec-{i:05}")).collect();
    {
        let broker = open(dir)?;
        broker.create_topic(INPUT, PARTITIONS, TopicConfig::new())?;
        broker.create_topic(OUTPUT, PARTITIONS, TopicConfig::new())?;
        // One batch per record, so that a poll of 2 KiB holds a few dozen.
        let producer = Producer::builder(&broker).linger(Duration::ZERO).build()?;
        for v in &expected {
            producer.send(INPUT, ProducerRecord::keyed(v.as_bytes(), v.as_bytes()))?;
        }
        producer.close()?;
        broker.close()?;
    }
    assert!(!run_child(tmp.path(), Some(COMMITS_BEFORE_KILL)));
    assert!(!run_child(tmp.path(), Some(COMMITS_BEFORE_KILL)));
    assert!(
        run_child(tmp.path(), None),
        "the last child copied to the end"
    );

    let broker = open(dir)?;
    let mut reader = Consumer::new(
        &broker,
        ConsumerConfig::default().isolation_level(IsolationLevel::ReadCommitted),
    );
    let all: Vec<(&str, i32)> = (0..PARTITIONS).map(|p| (OUTPUT, p)).collect();
    reader.assign(&all)?;
    reader.seek_to_beginning()?;
    let mut got: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < RECORDS && Instant::now() < deadline {
        for r in reader.poll(Duration::from_millis(50))?.iter() {
            let v = r?.value.expect("a value").to_vec();
            got.push(String::from_utf8(v).expect("utf-8").to_lowercase());
        }
    }
    // Anything past the expected count would be a duplicate.
    for _ in 0..5 {
        for r in reader.poll(Duration::from_millis(20))?.iter() {
            let v = r?.value.expect("a value").to_vec();
            got.push(String::from_utf8(v).expect("utf-8").to_lowercase());
        }
    }
    got.sort();
    assert_eq!(got.len(), RECORDS, "every input record once, no more");
    assert_eq!(got, expected);
    // The killed children left records of aborted transactions behind.
    let uncommitted: i64 = (0..PARTITIONS)
        .map(|p| Ok(broker.topic(OUTPUT)?.partition(p)?.log_end_offset()))
        .sum::<tidelog::Result<i64>>()?;
    assert!(
        uncommitted > RECORDS as i64,
        "markers and aborted records are in the log"
    );
    Ok(())
}
