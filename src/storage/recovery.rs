//! The steps of opening a partition log, in order: read the partition checkpoint, list
//! the directory (one pass, removing leftovers of interrupted writes and orphan
//! indexes), recover the segments (trust what lies below the recovery point, validate
//! the rest, cut at the first bad batch), and open them, the last one as the active
//! segment (created when there is none). `PartitionLog::open_with` runs them and
//! assembles the log.

use super::checkpoint;
use super::config::LogConfig;
use super::files::Files;
use super::prefault::Prefaulter;
use super::producer_state::parse_snapshot_name;
use super::scan::{Trust, move_aside, parse_cut_name, scan_segment};
use super::segment::{Segment, SegmentWriter, create_empty_index, file_name, parse_base_offset};
use super::types::{RecoveryCut, RecoveryReport, SegmentScan};
use crate::error::IoContext;
use crate::error::Result;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name of the per-partition checkpoint file (recovery point and log start offset).
pub const CHECKPOINT_FILE: &str = "partition.checkpoint";

/// What `partition.checkpoint` says.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PartitionCheckpoint {
    pub(crate) recovery_point: i64,
    pub(crate) log_start: i64,
    /// The payload the file stands for, when it is sound: as read, or zeros when it is
    /// missing (a missing checkpoint reads as zeros, so writing zeros would change
    /// nothing: a new partition writes none until its recovery point or log start
    /// moves).
    pub(crate) on_disk: Option<[u8; 16]>,
}

/// The payload of `partition.checkpoint`: recovery point, then log start offset.
pub(crate) fn encode_checkpoint(recovery_point: i64, log_start: i64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&recovery_point.to_be_bytes());
    b[8..].copy_from_slice(&log_start.to_be_bytes());
    b
}

/// Reads the partition checkpoint: zeros when it is missing; zeros and
/// `report.checkpoint_damaged` when it is torn, damaged or of the wrong size.
pub(crate) fn read_checkpoint(dir: &Path, report: &mut RecoveryReport) -> PartitionCheckpoint {
    match checkpoint::read(&dir.join(CHECKPOINT_FILE)) {
        Ok(Some(p)) if p.len() == 16 => {
            let word = |at: usize| i64::from_be_bytes(p[at..at + 8].try_into().expect("8 bytes"));
            PartitionCheckpoint {
                recovery_point: word(0),
                log_start: word(8),
                on_disk: p.as_slice().try_into().ok(),
            }
        }
        Ok(None) => PartitionCheckpoint {
            on_disk: Some(encode_checkpoint(0, 0)),
            ..PartitionCheckpoint::default()
        },
        Ok(Some(_)) | Err(_) => {
            report.checkpoint_damaged = true;
            PartitionCheckpoint::default()
        }
    }
}

/// Suffixes of files an interrupted write leaves behind while the original is intact:
/// a compaction's copy, a truncation's copy of the kept prefix, a checkpoint or index
/// not yet renamed into place.
const LEFTOVER_SUFFIXES: [&str; 3] = [".cleaned", ".swap", ".tmp"];

/// What a log directory holds.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Segment base offsets, oldest first.
    pub(crate) bases: Vec<i64>,
    /// Producer-state snapshot offsets, oldest first.
    pub(crate) snapshots: Vec<i64>,
    /// Files holding bytes an earlier recovery cut (`<base>.log.cut-<ms>`), with their
    /// unix ms.
    pub(crate) cut_files: Vec<(PathBuf, i64)>,
}

/// Lists the segments and producer-state snapshots of `dir` in one pass over the
/// directory; removes leftovers of interrupted writes and index files without a `.log`.
pub(crate) fn list_segments(dir: &Path) -> Result<Listing> {
    list(dir, true)
}

/// [`list_segments`] for a read-only opener: removes nothing.
pub(crate) fn list_segments_read_only(dir: &Path) -> Result<Listing> {
    list(dir, false)
}

fn list(dir: &Path, remove: bool) -> Result<Listing> {
    let mut bases = Vec::new();
    let mut snapshots = Vec::new();
    let mut cut_files = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir).ctx("list log directory", dir)? {
        let entry = entry.ctx("list log directory", dir)?;
        let fname = entry.file_name();
        let fname = fname.to_string_lossy();
        if let Some(b) = parse_base_offset(&fname, "log") {
            bases.push(b);
        } else if let Some(b) =
            parse_base_offset(&fname, "index").or_else(|| parse_base_offset(&fname, "timeindex"))
        {
            indexes.push((b, entry.path()));
        } else if let Some(o) = parse_snapshot_name(&fname) {
            snapshots.push(o);
        } else if let Some(ms) = parse_cut_name(&fname) {
            cut_files.push((entry.path(), ms));
        } else if remove && LEFTOVER_SUFFIXES.iter().any(|s| fname.ends_with(s)) {
            let p = entry.path();
            fs::remove_file(&p).ctx("remove leftover", &p)?;
        }
    }
    bases.sort_unstable();
    snapshots.sort_unstable();
    for (b, p) in indexes {
        if remove && bases.binary_search(&b).is_err() {
            fs::remove_file(&p).ctx("remove orphan index", &p)?;
        }
    }
    Ok(Listing {
        bases,
        snapshots,
        cut_files,
    })
}

/// Establishes the contents of each segment (see `scan_segment`), stopping at the first
/// cut: the segments after it (and a segment that overlaps its predecessor) are
/// deleted. Returns the surviving segments' base offsets and scans, oldest first.
pub(crate) fn recover_segments(
    dir: &Path,
    bases: &[i64],
    recovery_point: i64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Vec<(i64, SegmentScan)>> {
    let interval = config.index_interval_bytes as usize;
    let index_max = config.index_max_bytes as usize;
    let mut scans: Vec<(i64, SegmentScan)> = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let next_base = bases.get(i + 1).copied();
        let trust = if report.checkpoint_damaged {
            Trust::None
        } else if let Some(n) = next_base.filter(|&n| n <= recovery_point) {
            Trust::Full(n)
        } else {
            Trust::UpTo(recovery_point)
        };
        let scan = scan_segment(dir, base, trust, interval, index_max)?;
        if next_base.is_some() && scan.truncated.is_none() {
            // A sealed segment has its three files (an index rebuilt without entries is
            // an empty file, as `seal` leaves it).
            for ext in ["index", "timeindex"] {
                create_empty_index(&dir.join(file_name(base, ext)))?;
            }
        }
        let log_path = dir.join(file_name(base, "log"));
        if scan.trusted {
            report.segments_trusted += 1;
        } else {
            report.segments_validated += 1;
            report.bytes_validated += scan.bytes_validated;
        }
        if scan.index_rebuilt {
            report
                .indexes_rebuilt
                .push(dir.join(file_name(base, "index")));
        }
        if scan.time_index_rebuilt {
            report
                .indexes_rebuilt
                .push(dir.join(file_name(base, "timeindex")));
        }
        let prev_end = scans.last().map(|(_, s)| s.next_offset);
        let cut = scan.truncated.clone();
        let overlaps = prev_end.is_some_and(|e| base < e);
        let reason = if overlaps {
            // A segment that starts inside the previous one cannot be trusted.
            let why = "segment overlaps the previous one".to_string();
            report.truncated.push((log_path.clone(), 0, why.clone()));
            why
        } else {
            let why = match &cut {
                Some((pos, why)) => {
                    report.truncated.push((log_path.clone(), *pos, why.clone()));
                    if let Some(c) = &scan.cut {
                        report.cuts.push(RecoveryCut {
                            file: log_path.clone(),
                            position: *pos,
                            offset: scan.next_offset,
                            bytes: c.bytes,
                            records: c.records,
                            sidecar: c.path.clone(),
                            reason: why.clone(),
                        });
                    }
                    why.clone()
                }
                None => String::new(),
            };
            scans.push((base, scan));
            why
        };
        if cut.is_some() || overlaps {
            // Everything after a cut is unreliable: the following segments are moved
            // aside (their bytes kept in cut files, for an operator to salvage).
            let from = if overlaps { i } else { i + 1 };
            for &b in &bases[from..] {
                if let Some(c) = move_aside(dir, b)? {
                    let p = dir.join(file_name(b, "log"));
                    report.segments_removed.push(p.clone());
                    report.cuts.push(RecoveryCut {
                        file: p,
                        position: 0,
                        offset: b,
                        bytes: c.bytes,
                        records: c.records,
                        sidecar: c.path,
                        reason: format!("the segment follows a cut: {reason}"),
                    });
                }
            }
            checkpoint::sync_dir(dir)?;
            break;
        }
    }
    Ok(scans)
}

/// Opens the recovered segments, all but the last read-only (empty sealed segments in
/// the middle are fine); the last one, or a new empty segment at `log_start` when there
/// is none, becomes the active segment. Returns the segment list (the active one last)
/// and the active segment's writer.
pub(crate) fn open_segments(
    dir: &Path,
    mut scans: Vec<(i64, SegmentScan)>,
    log_start: i64,
    config: &LogConfig,
    (prefault, files): (Option<Prefaulter>, &Arc<Files>),
) -> Result<(Vec<Arc<Segment>>, SegmentWriter)> {
    let mut segments = Vec::with_capacity(scans.len() + 1);
    let last = scans.pop();
    for (base, scan) in &scans {
        segments.push(Segment::open_sealed(dir, *base, scan, files));
    }
    let mut active = match last {
        Some((base, scan)) => Segment::open_active(dir, base, &scan, config, files),
        None => {
            let w = Segment::create(dir, log_start, config, files)?;
            checkpoint::sync_dir(dir)?;
            w
        }
    };
    active.set_prefaulter(prefault);
    segments.push(active.shared().clone());
    Ok((segments, active))
}
