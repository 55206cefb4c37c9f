//! Damaged bytes in trusted segments: reads and lookups report them, opening checks the
//! end of every trusted segment, and what recovery cuts is kept in cut files.

use super::{batch, small};
use crate::error::Error;
use crate::record::batches;
use crate::storage::*;
use std::fs;
use std::path::{Path, PathBuf};

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir.join("t-0"), "t-0", small()).unwrap()
}

/// 100 batches of 5 records (timestamps 1000 + offset) in segments of 4 KiB, closed
/// cleanly: every segment is trusted on the next open. Returns the segment bases.
fn write_and_close(dir: &Path) -> Vec<i64> {
    let log = open(dir);
    for i in 0..100 {
        log.append(&batch(i * 5, 5, 1000)).unwrap();
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    bases
}

fn seg_path(dir: &Path, base: i64) -> PathBuf {
    dir.join("t-0").join(format!("{base:020}.log"))
}

/// (position, base offset, last offset) of every batch of a segment file.
fn layout(path: &Path) -> Vec<(usize, i64, i64)> {
    let bytes = fs::read(path).unwrap();
    let mut it = batches(&bytes);
    let mut out = Vec::new();
    loop {
        let at = it.position();
        match it.next() {
            Some(b) => {
                let b = b.unwrap();
                out.push((at, b.base_offset(), b.last_offset()));
            }
            None => return out,
        }
    }
}

/// Positions of the offset index entries of a segment.
fn index_positions(dir: &Path, base: i64) -> Vec<usize> {
    let idx = fs::read(dir.join("t-0").join(format!("{base:020}.index"))).unwrap();
    idx.chunks(8)
        .map(|e| u32::from_be_bytes([e[4], e[5], e[6], e[7]]) as usize)
        .filter(|&p| p > 0)
        .collect()
}

fn patch(path: &Path, at: usize, bytes: &[u8]) {
    let mut all = fs::read(path).unwrap();
    all[at..at + bytes.len()].copy_from_slice(bytes);
    fs::write(path, all).unwrap();
}

/// Reads every record from offset 0 to the high watermark, as a consumer would; the
/// first error ends it.
fn read_all(log: &PartitionLog) -> (Vec<i64>, Option<Error>) {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at < log.high_watermark() {
        match log.read(at, 1000) {
            Ok(s) if s.is_empty() => break,
            Ok(s) => {
                for b in s.batches() {
                    for r in b.records() {
                        offsets.push(r.unwrap().offset);
                    }
                }
                at = s.next_offset();
            }
            Err(e) => return (offsets, Some(e)),
        }
    }
    (offsets, None)
}

fn corrupt_parts(e: &Error) -> (&str, u64, &str) {
    match e {
        Error::Corrupt {
            location,
            position,
            reason,
        } => (location, *position, reason),
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

/// A batch header damaged before the segment's last index entry (which opening does
/// not read) in a sealed segment and in the last one.
#[test]
fn a_damaged_header_in_a_trusted_segment_is_an_error_never_a_skip() {
    for (case, which) in [("length", 0usize), ("magic", 0), ("length", usize::MAX)] {
        let dir = tempfile::tempdir().unwrap();
        let bases = write_and_close(dir.path());
        let base = if which == usize::MAX {
            *bases.last().unwrap()
        } else {
            bases[which]
        };
        let path = seg_path(dir.path(), base);
        let batches = layout(&path);
        let first_entry = index_positions(dir.path(), base)[0];
        // The batch just before the first index entry: no lookup starts on it.
        let (pos, victim_base, _) = *batches
            .iter()
            .rev()
            .find(|(p, _, _)| *p < first_entry && *p > 0)
            .expect("a batch before the first index entry");
        match case {
            "length" => patch(&path, pos + 8, &i32::MAX.to_be_bytes()),
            _ => patch(&path, pos + 16, &[7]),
        }
        let log = open(dir.path());
        assert!(
            log.recovery_report().truncated.is_empty(),
            "the damage is before the last index entry: opening does not see it"
        );
        let (offsets, err) = read_all(&log);
        let err = err.expect("reading through the damage fails");
        let (location, position, reason) = corrupt_parts(&err);
        assert_eq!(location, path.display().to_string(), "{case}: {err}");
        assert_eq!(position, pos as u64, "{case}: {err}");
        assert!(
            reason.contains(&format!("reading offset {victim_base}")),
            "{case}: {err}"
        );
        assert_eq!(
            offsets,
            (0..victim_base).collect::<Vec<_>>(),
            "{case}: every record before the damage, none after"
        );
        // A lookup whose walk from the index crosses the damage fails the same way.
        assert!(matches!(
            log.read(victim_base + 1, 100),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            log.offset_for_timestamp(1000 + victim_base + 1),
            Err(Error::Corrupt { .. })
        ));
        // Nothing waits for offsets it cannot read: the high watermark is past them
        // and the read says why.
        assert!(log.wait_for(victim_base, std::time::Duration::ZERO));
    }
}

#[test]
fn offsets_that_go_back_inside_a_trusted_segment_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_and_close(dir.path());
    let path = seg_path(dir.path(), bases[0]);
    let first_entry = index_positions(dir.path(), bases[0])[0];
    let (pos, _, _) = *layout(&path)
        .iter()
        .rev()
        .find(|(p, _, _)| *p < first_entry && *p > 0)
        .unwrap();
    // baseOffset lies outside the CRC: only the order of offsets gives it away.
    patch(&path, pos, &0i64.to_be_bytes());
    let log = open(dir.path());
    let (_, err) = read_all(&log);
    let err = err.expect("the damage is reported");
    let (_, position, reason) = corrupt_parts(&err);
    assert_eq!(position, pos as u64);
    assert!(reason.contains("do not follow"), "{err}");
}

/// Opening reads the headers from each trusted segment's last index entry to its end:
/// damage there validates the segment, which is cut and reported, and the cut bytes and
/// the later segments are kept in cut files.
#[test]
fn a_trusted_segment_whose_end_does_not_check_out_is_validated_and_cut() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_and_close(dir.path());
    assert!(bases.len() >= 4, "{bases:?}");
    let path = seg_path(dir.path(), bases[1]);
    let original = fs::read(&path).unwrap();
    let (pos, victim_base, _) = *layout(&path).last().unwrap();
    patch(&path, pos + 8, &1_000_000i32.to_be_bytes());
    let damaged = fs::read(&path).unwrap();
    let later: Vec<Vec<u8>> = bases[2..]
        .iter()
        .map(|&b| fs::read(seg_path(dir.path(), b)).unwrap())
        .collect();

    let log = open(dir.path());
    let r = log.recovery_report().clone();
    assert!(r.segments_validated >= 1, "{r:?}");
    assert_eq!(r.truncated.len(), 1, "{r:?}");
    assert_eq!(r.truncated[0].0, path);
    assert_eq!(r.truncated[0].1, pos as u64);
    assert_eq!(log.log_end_offset(), victim_base);
    assert_eq!(fs::metadata(&path).unwrap().len(), pos as u64);
    assert_eq!(r.segments_removed.len(), bases.len() - 2);

    // One cut for the tail of the damaged segment, one per later segment.
    assert_eq!(r.cuts.len(), 1 + bases.len() - 2, "{r:?}");
    let tail = &r.cuts[0];
    assert_eq!(
        (tail.file.as_path(), tail.position, tail.offset),
        (path.as_path(), pos as u64, victim_base)
    );
    assert_eq!(tail.bytes, (damaged.len() - pos) as u64);
    assert_eq!(tail.records, 5, "the damaged batch's header still counts 5");
    assert_eq!(fs::read(&tail.sidecar).unwrap(), &damaged[pos..]);
    assert_ne!(&original[pos..], &damaged[pos..]);
    let name = tail.sidecar.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with(&format!("{:020}.log.cut-", bases[1])),
        "{name}"
    );
    for (cut, (base, bytes)) in r.cuts[1..].iter().zip(bases[2..].iter().zip(&later)) {
        assert_eq!(cut.offset, *base);
        assert_eq!(cut.position, 0);
        assert_eq!(
            &fs::read(&cut.sidecar).unwrap(),
            bytes,
            "kept byte for byte"
        );
        assert!(!seg_path(dir.path(), *base).exists());
    }
    let line = tail.to_string();
    assert!(
        line.contains(&format!("offset {victim_base}")) && line.contains("5 records"),
        "{line}"
    );
    assert_eq!(log.cut_files().len(), r.cuts.len());
    drop(log);

    // A second open finds nothing to repair and keeps the cut files.
    let log = open(dir.path());
    assert!(
        log.recovery_report().is_clean(),
        "{:?}",
        log.recovery_report()
    );
    assert_eq!(log.cut_files().len(), r.cuts.len());
    let (offsets, err) = read_all(&log);
    assert!(err.is_none());
    assert_eq!(offsets, (0..victim_base).collect::<Vec<_>>());
}

#[test]
fn a_trusted_segment_missing_its_last_batch_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_and_close(dir.path());
    let path = seg_path(dir.path(), bases[0]);
    let (pos, _, _) = *layout(&path).last().unwrap();
    // Whole batches, but its last offset no longer meets the next segment's base.
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(pos as u64).unwrap();
    let log = open(dir.path());
    let r = log.recovery_report();
    assert!(r.segments_validated >= 1, "{r:?}");
    assert_eq!(r.segments_validated, 1, "{r:?}");
    assert_eq!(r.segments_trusted, bases.len() - 1, "{r:?}");
    assert!(r.truncated.is_empty(), "no damage in its bytes: {r:?}");
}

#[test]
fn retention_deletes_cut_files_after_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let bases = write_and_close(dir.path());
    let path = seg_path(dir.path(), *bases.last().unwrap());
    let (pos, _, _) = *layout(&path).last().unwrap();
    patch(&path, pos + 16, &[9]);
    let log = PartitionLog::open(
        dir.path().join("t-0"),
        "t-0",
        LogConfig {
            retention_ms: Some(60_000),
            ..small()
        },
    )
    .unwrap();
    let files = log.cut_files();
    assert_eq!(files.len(), 1, "{:?}", log.recovery_report());
    let now = clock::now_ms();
    log.apply_retention(now).unwrap();
    assert!(files[0].exists(), "younger than retention.ms: kept");
    log.apply_retention(now + 61_000).unwrap();
    assert!(!files[0].exists(), "older than retention.ms: deleted");
    assert!(log.cut_files().is_empty());
}

/// A trusted active segment (below the checkpoint's recovery point) whose first batch's
/// baseOffset (outside the CRC) was damaged to lie below the segment's base: opening
/// validates the segment and cuts the batch into a cut file, never ends the log below
/// its start (found by the `log_recovery` fuzz target).
#[test]
fn a_first_batch_below_its_segment_base_is_cut_not_trusted() {
    for damaged_base in [-(1i64 << 48), -1] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path());
        log.append(&batch(0, 5, 1000)).unwrap();
        log.close().unwrap();
        drop(log);
        let path = seg_path(dir.path(), 0);
        patch(&path, 0, &damaged_base.to_be_bytes());

        let log = open(dir.path());
        let r = log.recovery_report().clone();
        assert_eq!(r.truncated.len(), 1, "{damaged_base}: {r:?}");
        assert_eq!(
            (r.truncated[0].0.as_path(), r.truncated[0].1),
            (path.as_path(), 0)
        );
        assert!(r.truncated[0].2.contains("do not follow"), "{r:?}");
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        assert_eq!(r.cuts.len(), 1, "{r:?}");
        assert_eq!(r.cuts[0].position, 0);
        log.append(&batch(0, 1, 2000)).unwrap();
        assert_eq!(log.log_end_offset(), 1);
    }
}
