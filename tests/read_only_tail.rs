//! A live data directory can be read by a second process: while this process appends
//! to a partition (rolling small segments, with retention deleting the oldest), a
//! `tidelog consume` in another process opens the directory read-only, tails the same
//! partition and prints every record, in order, with no corrupt read; `tidelog groups
//! describe` in a third shows the group's committed offset and lag; none of them takes
//! the lock or writes a byte.
// Reaches into the partition's log (`Partition::log`, a `testing` feature hook).
#![cfg(feature = "testing")]

mod cli_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tidelog::coordinator::{CommitOffset, OffsetCommitRequest};
use tidelog::{BatchBuilder, Broker, TopicConfig};

const RECORDS: usize = 3000;

#[test]
fn a_second_process_tails_a_partition_this_one_writes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = Broker::builder(&data)
        .retention_check_interval(Duration::from_millis(100))
        .open()
        .unwrap();
    let topic = broker
        .create_topic(
            "t",
            1,
            TopicConfig::new()
                .segment_bytes(4096)
                .set("retention.bytes", "40960")
                .set("retention.ms", "-1"),
        )
        .and_then(|()| broker.topic("t"))
        .unwrap();
    let p = topic.partition(0).unwrap();
    let append = |i: usize| {
        let mut b = BatchBuilder::new();
        b.push(
            1_700_000_000_000 + i as i64,
            None,
            Some(format!("record-{i:06}").as_bytes()),
            &[],
        );
        p.append_batch(&b.finish()).unwrap();
    };
    append(0);

    let mut reader = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .arg("--data")
        .arg(&data)
        .args([
            "consume",
            "t",
            "-p",
            "0",
            "--from-beginning",
            "-f",
            "%o %s\\n",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = KillOnDrop {
        pid: reader.id(),
        armed: true,
    };
    let (tx, rx) = mpsc::channel();
    let stdout = reader.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // The reader has opened the directory and printed the first record.
    let mut lines = vec![
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the reader prints the first record"),
    ];
    let bases_at_start = p.log().segment_base_offsets();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 1..RECORDS {
        append(i);
        lines.extend(rx.try_iter());
        // The writer stays at most 200 records ahead of the reader, and retention keeps
        // some 500: the reader tails the log, it never has to catch up past retention.
        while i + 1 - lines.len() > 200 && Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                lines.push(line);
            }
        }
    }
    while lines.len() < RECORDS && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
    }
    if lines.len() < RECORDS {
        let _ = reader.kill();
        guard.armed = false;
        let out = reader.wait_with_output().unwrap();
        let got: std::collections::HashSet<&String> = lines.iter().collect();
        let missing: Vec<usize> = (0..RECORDS)
            .filter(|i| !got.contains(&format!("{i} record-{i:06}")))
            .collect();
        panic!(
            "the reader printed {} records, missing {missing:?}: {}",
            lines.len(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bases = p.log().segment_base_offsets();
    assert!(
        bases_at_start == [0] && bases[0] > 0,
        "segments rolled and retention deleted the oldest: {bases:?}"
    );

    // A group's committed offset, read by another process while this one holds the
    // directory.
    broker
        .group_coordinator()
        .offset_commit(OffsetCommitRequest {
            group_id: "audit".into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset: 2500,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        })
        .unwrap();
    let describe = cli_support::tidelog(&data, &["groups", "describe", "audit"], "");
    assert_eq!(describe.code, 0, "{describe:?}");
    assert!(
        describe.stdout.contains("audit\tt\t0\t2500\t3000\t500\t-"),
        "{describe:?}"
    );
    assert!(
        describe
            .stderr
            .contains("is opened read-only (another process holds it"),
        "{describe:?}"
    );

    let _ = Command::new("kill")
        .args(["-TERM", &reader.id().to_string()])
        .status();
    guard.armed = false;
    let out = reader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("error"), "{stderr}");
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("{i} record-{i:06}")).collect();
    assert_eq!(lines.len(), RECORDS, "{stderr}");
    assert!(lines == expected, "every record, in order, once");
    broker.close().unwrap();
}

/// Kills the reader process if the test fails before it waits for it (a `-f` reader
/// runs until killed).
struct KillOnDrop {
    pid: u32,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = Command::new("kill")
                .args(["-KILL", &self.pid.to_string()])
                .status();
        }
    }
}
