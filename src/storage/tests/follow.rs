//! A data directory opened read-only while another manager writes it: the reader sees
//! every record in order as it is appended, across rolls and retention, and never
//! writes a byte.

use super::batch;
use crate::error::Error;
use crate::storage::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn tiny() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Offsets and values read from `log` from `at` up to its high watermark.
fn read_from(log: &PartitionLog, mut at: i64, out: &mut Vec<(i64, String)>) -> i64 {
    loop {
        let s = log.read(at, 700).unwrap();
        if s.is_empty() {
            return at;
        }
        for b in s.batches() {
            for r in b.records() {
                let r = r.unwrap();
                if r.offset >= at {
                    out.push((
                        r.offset,
                        String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                    ));
                }
            }
        }
        at = s.next_offset();
    }
}

#[test]
fn a_read_only_log_follows_appends_rolls_and_retention_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = LogManager::open(dir.path()).unwrap();
    let w = writer.open_log("t-0", tiny()).unwrap();
    for i in 0..20u32 {
        w.append(&batch(i * 5, 5, 0)).unwrap();
    }
    // A second, read-only manager of the same directory (no lock taken).
    let reader = LogManager::open_read_only(dir.path()).unwrap();
    assert!(reader.is_read_only());
    let r = reader.open_log("t-0", tiny()).unwrap();
    assert_eq!(r.log_end_offset(), 100);
    let mut got = Vec::new();
    let mut at = read_from(&r, 0, &mut got);
    assert_eq!(at, 100);

    // The writer goes on, rolling segments; the reader catches up at the end.
    for i in 20..80u32 {
        w.append(&batch(i * 5, 5, 0)).unwrap();
        if i % 7 == 0 {
            at = read_from(&r, at, &mut got);
        }
    }
    at = read_from(&r, at, &mut got);
    assert_eq!(at, 400);
    assert!(w.segment_count() > 5);
    assert_eq!(r.segment_base_offsets(), w.segment_base_offsets());
    let expected: Vec<(i64, String)> = (0..400).map(|i| (i, format!("value-{i:06}"))).collect();
    assert_eq!(got, expected, "every record, in order");

    // A waiter is woken by the writer's append (the reader looks every 10 ms).
    let waiter = {
        let r = r.clone();
        std::thread::spawn(move || r.wait_for(400, Duration::from_secs(10)))
    };
    std::thread::sleep(Duration::from_millis(30));
    w.append(&batch(400, 5, 0)).unwrap();
    assert!(waiter.join().unwrap());

    // Retention on the writer's side deletes the oldest segments: the reader drops
    // them and reads from the new log start.
    let bases = w.segment_base_offsets();
    let start = w.delete_records_before(bases[3]).unwrap();
    assert_eq!(start, bases[3]);
    // The reader lists the directory once a second as it follows the log end.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.log_start_offset() != bases[3] && std::time::Instant::now() < deadline {
        r.read(r.high_watermark(), 1).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(matches!(
        r.read(0, 100),
        Err(Error::OffsetOutOfRange { start: s, .. }) if s == bases[3]
    ));
    assert_eq!(r.log_start_offset(), bases[3]);
    assert_eq!(r.segment_base_offsets()[0], bases[3]);
    let mut tail = Vec::new();
    read_from(&r, bases[3], &mut tail);
    assert_eq!(tail.len() as i64, 405 - bases[3]);

    // It writes nothing, and refuses to.
    let before = snapshot(dir.path());
    assert!(matches!(r.append(&batch(0, 1, 0)), Err(Error::ReadOnly(_))));
    assert!(matches!(r.truncate_to(5), Err(Error::ReadOnly(_))));
    assert!(matches!(r.apply_retention(0), Err(Error::ReadOnly(_))));
    assert!(matches!(reader.delete_log("t-0"), Err(Error::ReadOnly(_))));
    assert!(reader.open_log("t-9", tiny()).is_err(), "no log is created");
    r.sync().unwrap();
    reader.close().unwrap();
    drop((r, reader));
    assert_eq!(snapshot(dir.path()), before, "not a byte written");
    writer.close().unwrap();
}

#[test]
fn a_read_only_open_of_a_log_being_appended_stops_at_the_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let w = PartitionLog::open(dir.path().join("t-0"), "t-0", tiny()).unwrap();
    for i in 0..3u32 {
        w.append(&batch(i * 5, 5, 0)).unwrap();
    }
    w.close().unwrap();
    drop(w);
    // Half a batch at the end, as a writer in the middle of an append leaves it.
    let seg = dir.path().join("t-0").join("00000000000000000000.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    let whole = bytes.len();
    let b = batch(15, 5, 0);
    bytes.extend_from_slice(&b[..b.len() / 2]);
    std::fs::write(&seg, &bytes).unwrap();
    let reader = LogManager::open_read_only(dir.path()).unwrap();
    let r = reader.open_log("t-0", tiny()).unwrap();
    assert_eq!(r.log_end_offset(), 15);
    let mut got = Vec::new();
    assert_eq!(read_from(&r, 0, &mut got), 15);
    // The rest of the batch arrives (offset stamped as the writer would): it is read.
    let mut rest = batch(15, 5, 0);
    rest[..8].copy_from_slice(&15i64.to_be_bytes());
    bytes.truncate(whole);
    bytes.extend_from_slice(&rest);
    std::fs::write(&seg, &bytes).unwrap();
    assert_eq!(read_from(&r, 15, &mut got), 20);
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "untouched");
}
