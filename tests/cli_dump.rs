//! `tidelog dump` on a segment written by PartitionLog, and on damaged copies of it.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog_raw};
use std::path::{Path, PathBuf};
use tidelog::storage::PartitionLog;
use tidelog::{BatchBuilder, LogConfig};

const BASE_TS: i64 = 1_700_000_000_000;

/// Writes 20 batches of 3 records (offsets 0..60) with an index entry every ~100 bytes,
/// closes the log and returns the partition directory.
fn write_segment(root: &Path) -> PathBuf {
    let dir = root.join("events-0");
    let mut cfg = LogConfig::default();
    cfg.set("index.interval.bytes", "100").unwrap();
    let log = PartitionLog::open(&dir, "events-0", cfg).unwrap();
    let mut b = BatchBuilder::new();
    for i in 0..20i64 {
        for j in 0..3i64 {
            let n = i * 3 + j;
            let key = format!("key-{n}");
            let value = format!("value-{n}");
            b.push(
                BASE_TS + n,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &[("h", b"x\ty")],
            );
        }
        log.append(&b.finish()).unwrap();
    }
    log.close().unwrap();
    dir
}

fn seg(dir: &Path, ext: &str) -> PathBuf {
    dir.join(format!("{:020}.{ext}", 0))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn dump_of_a_healthy_segment_and_of_damaged_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_segment(tmp.path());
    let log = seg(&dir, "log");

    // The .log: every batch, valid, with positions that add up.
    let out = ok(tidelog_raw(&["dump", s(&log)], ""));
    let batches: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batches.len(), 20, "{out}");
    assert!(batches[0].starts_with("baseOffset: 0 lastOffset: 2 count: 3 position: 0 "));
    assert!(batches[19].starts_with("baseOffset: 57 lastOffset: 59 count: 3 "));
    assert!(
        batches.iter().all(|l| l.ends_with("isValid: true")),
        "{out}"
    );
    assert!(batches[0].contains(&format!("CreateTime: {}", BASE_TS + 2)));
    assert!(out.contains("Summary: 20 batches, 60 records"), "{out}");
    assert!(!out.contains("PROBLEM"));
    let size1: u64 = field(batches[0], "size:");
    let pos2: u64 = field(batches[1], "position:");
    assert_eq!(size1, pos2);

    // --records: every record with key, value and headers (escaped).
    let out = ok(tidelog_raw(&["dump", "--records", s(&log)], ""));
    let recs: Vec<&str> = out.lines().filter(|l| l.starts_with("| offset:")).collect();
    assert_eq!(recs.len(), 60);
    assert_eq!(
        recs[4],
        format!(
            "| offset: 4 CreateTime: {} keySize: 5 valueSize: 7 headers: [h=x\\ty] key: key-4 payload: value-4",
            BASE_TS + 4
        )
    );

    // The offset index: entries that point at batches, checked against the .log.
    let out = ok(tidelog_raw(&["dump", s(&seg(&dir, "index"))], ""));
    let entries: Vec<&str> = out.lines().filter(|l| l.starts_with("offset:")).collect();
    assert!(entries.len() >= 5, "{out}");
    assert!(!out.contains("PROBLEM"), "{out}");
    let first_off: i64 = field(entries[0], "offset:");
    let first_pos: u64 = field(entries[0], "position:");
    let dump_log = ok(tidelog_raw(&["dump", s(&log)], ""));
    assert!(
        dump_log.contains(&format!("baseOffset: {first_off} ")),
        "{dump_log}"
    );
    assert!(dump_log.contains(&format!("position: {first_pos} ")));

    // The time index.
    let out = ok(tidelog_raw(&["dump", s(&seg(&dir, "timeindex"))], ""));
    let entries: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("timestamp:"))
        .collect();
    assert!(!entries.is_empty(), "{out}");
    assert!(!out.contains("PROBLEM"), "{out}");

    // A whole directory: every file in order.
    let out = ok(tidelog_raw(&["dump", "--records", s(&dir)], ""));
    assert_eq!(out.matches("Dumping ").count(), 3, "{out}");

    // Damage 1: a flipped byte inside the 5th batch's records -> that batch's CRC is
    // reported invalid, the dump continues with the rest, exit code 1.
    let bytes = std::fs::read(&log).unwrap();
    let pos5: usize = field(batches[4], "position:");
    let size5: usize = field(batches[4], "size:");
    let mut bad = bytes.clone();
    bad[pos5 + 70] ^= 0xff;
    let bad_crc = tmp.path().join("bad-crc.log");
    std::fs::write(&bad_crc, &bad).unwrap();
    let run = tidelog_raw(&["dump", s(&bad_crc)], "");
    let stdout = run.stdout.clone();
    let line = err(run, 1, &format!("at byte {pos5}: CRC-32C mismatch"));
    assert!(line.contains("bad-crc.log"), "{line}");
    let batch_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batch_lines.len(), 20, "{stdout}");
    assert!(
        batch_lines[4].contains("isValid: false (computed "),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("PROBLEM at byte {pos5}: CRC-32C mismatch")));

    // Damage 2: the 5th batch's length field destroyed -> reported, then the dump skips
    // to the 6th batch and goes on.
    let mut bad = bytes.clone();
    bad[pos5 + 8..pos5 + 12].copy_from_slice(&7i32.to_be_bytes());
    let bad_len = tmp.path().join("bad-length.log");
    std::fs::write(&bad_len, &bad).unwrap();
    let run = tidelog_raw(&["dump", s(&bad_len)], "");
    let stdout = run.stdout.clone();
    err(run, 1, "batch length 7 is smaller than a batch header");
    let pos6 = pos5 + size5;
    assert!(
        stdout.contains(&format!(
            "skipped {size5} bytes from byte {pos5} to the next valid batch at byte {pos6}"
        )),
        "{stdout}"
    );
    assert_eq!(stdout.matches("baseOffset:").count(), 19, "{stdout}");

    // Damage 3: a torn tail (the file cut inside its last batch).
    let torn = tmp.path().join("torn.log");
    std::fs::write(&torn, &bytes[..bytes.len() - 10]).unwrap();
    let run = tidelog_raw(&["dump", s(&torn)], "");
    let stdout = run.stdout.clone();
    err(run, 1, "torn batch");
    assert!(stdout.contains("no valid batch after byte"), "{stdout}");
    assert_eq!(stdout.matches("baseOffset:").count(), 19);

    // Damage 4: a preallocated zero tail is not damage.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0u8; 4096]);
    let padded_path = tmp.path().join("padded.log");
    std::fs::write(&padded_path, &padded).unwrap();
    let out = ok(tidelog_raw(&["dump", s(&padded_path)], ""));
    assert!(out.contains("4096 zero bytes from byte"), "{out}");

    // Damage 5: an index entry out of order and pointing nowhere.
    let index_path = tmp.path().join(format!("{:020}.index", 0));
    std::fs::copy(&log, tmp.path().join(format!("{:020}.log", 0))).unwrap();
    let mut idx = std::fs::read(seg(&dir, "index")).unwrap();
    idx.extend_from_slice(&1u32.to_be_bytes());
    idx.extend_from_slice(&3u32.to_be_bytes());
    idx.extend_from_slice(&[1, 2, 3]);
    std::fs::write(&index_path, &idx).unwrap();
    let run = tidelog_raw(&["dump", s(&index_path)], "");
    let stdout = run.stdout.clone();
    err(run, 1, "not a multiple of the 8-byte entry size");
    assert!(
        stdout.contains("does not follow the previous one"),
        "{stdout}"
    );
    assert!(
        stdout.contains("where no batch starting at offset 1 is"),
        "{stdout}"
    );

    // Not a segment file, and a missing file: one error line, exit code 1.
    let other = tmp.path().join("notes.txt");
    std::fs::write(&other, "hello").unwrap();
    err(
        tidelog_raw(&["dump", s(&other)], ""),
        1,
        "expected a .log, .index or .timeindex file",
    );
    err(
        tidelog_raw(&["dump", s(&tmp.path().join("missing.log"))], ""),
        1,
        "missing.log",
    );
    // Usage error: clap's exit code 2.
    err(tidelog_raw(&["dump"], ""), 2, "PATH");
}

/// The value after `name` in a dump line.
fn field<T: std::str::FromStr>(line: &str, name: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    let rest = &line[line
        .find(name)
        .unwrap_or_else(|| panic!("{name} in {line}"))
        + name.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}
