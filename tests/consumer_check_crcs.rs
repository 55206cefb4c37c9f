//! A batch whose bytes changed on disk after it was appended is an `Error::Corrupt`
//! naming the partition and the batch's offset for consumers and group members
//! (`check.crcs`, on by default as in Kafka); with the check off, the bytes are decoded
//! as they are.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tidelog::{
    Broker, Consumer, ConsumerConfig, ConsumerRecords, Error, GroupConfig, GroupConsumer,
    OffsetReset, Producer, ProducerRecord, TopicConfig,
};

/// The segment files (`*.log`) under `dir`.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "log") {
                found.push(path);
            }
        }
    }
    found
}

/// Replaces the first `from` in the segment files under `dir` with `to` (same length).
fn rewrite(dir: &Path, from: &[u8], to: &[u8]) {
    for path in log_files(dir) {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open segment");
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).expect("read segment");
        if let Some(at) = bytes.windows(from.len()).position(|w| w == from) {
            f.seek(SeekFrom::Start(at as u64)).expect("seek");
            f.write_all(to).expect("write");
            return;
        }
    }
    panic!("{:?} is in no segment under {}", from, dir.display());
}

/// Polls until something comes back (at most 50 polls).
fn poll_some(mut poll: impl FnMut() -> tidelog::Result<ConsumerRecords>) -> ConsumerRecords {
    for _ in 0..50 {
        let records = poll().expect("poll");
        if !records.is_empty() {
            return records;
        }
    }
    panic!("nothing to read");
}

fn assert_corrupt_at_offset_zero(records: &ConsumerRecords) {
    let first_error = records.iter().find_map(|r| r.err());
    match first_error {
        Some(Error::Corrupt {
            location, reason, ..
        }) => {
            assert_eq!(location, "t-0 (batch at offset 0)");
            assert!(reason.contains("CRC-32C mismatch"), "{reason}");
        }
        other => panic!("expected a CRC error, got {other:?}"),
    }
}

#[test]
fn a_changed_batch_is_corrupt_unless_the_check_is_off() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("t", 1, TopicConfig::new())?;
    let producer = Producer::new(&broker)?;
    let records: Vec<ProducerRecord<'_>> = [b"hello-0", b"hello-1", b"hello-2"]
        .iter()
        .map(|v| ProducerRecord::new(*v))
        .collect();
    producer.send_batch("t", &records)?;
    rewrite(dir.path(), b"hello-2", b"jello-2");

    let earliest = ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest);
    let mut checked = Consumer::new(&broker, earliest.clone());
    checked.assign(&[("t", 0)])?;
    assert_corrupt_at_offset_zero(&poll_some(|| checked.poll(Duration::from_millis(100))));

    let mut member = GroupConsumer::join(
        &broker,
        GroupConfig::new("g", &["t"]).auto_offset_reset(OffsetReset::Earliest),
    )?;
    assert_corrupt_at_offset_zero(&poll_some(|| member.poll(Duration::from_millis(100))));

    let mut unchecked = Consumer::new(&broker, earliest.check_crcs(false));
    unchecked.assign(&[("t", 0)])?;
    let got: Vec<Vec<u8>> = poll_some(|| unchecked.poll(Duration::from_millis(100)))
        .iter()
        .map(|r| r.map(|r| r.value.unwrap_or_default().to_vec()))
        .collect::<tidelog::Result<_>>()?;
    assert_eq!(
        got,
        vec![
            b"hello-0".to_vec(),
            b"hello-1".to_vec(),
            b"jello-2".to_vec()
        ]
    );
    Ok(())
}
