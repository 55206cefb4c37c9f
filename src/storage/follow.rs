//! Reading a data directory that another process writes: a log opened read-only
//! (`LogManager::open_read_only`) never writes a byte, takes no lock and repairs
//! nothing; it reads what the writer published and follows it as it goes. This file
//! reads the writer's files (walks of batches with `pread`, scans of its segments);
//! `log/follow.rs` opens the log and moves it along.
//!
//! * **What is there.** On open each segment's last index entry is checked (its batch
//!   must start at the offset it names) and the batches after it are read with `pread`
//!   and checked whole (length, magic, CRC, offsets following), up to the first that is
//!   not: that is where the segment's data ends for this reader (the writer may be in the
//!   middle of an append, or a crash may have left a torn batch its next open cuts).
//!   Nothing is read through a map past a checked end: the writer trims a segment's file
//!   past its data when it seals it, and a page past the end of a file faults.
//! * **Following.** A read at the end, a `wait_for`, and every 10 ms the manager's
//!   follower thread for the logs someone waits on (`refresh`), read the batches that
//!   appeared after the last segment's checked end the same way, then make them readable
//!   through a read-only map of the file ([`Follower`]) and move the log end: the batch
//!   was complete, with a valid CRC, before any reader sees it. The writer stamps a
//!   batch's offset before it copies the rest, so a whole batch is read with its final
//!   offset; one whose offset does not follow is read again (a gap) or left for later.
//! * **Rolls.** When no batch follows and the file of the next segment exists (named by
//!   the last offset + 1), the last segment is read once more to its end (the writer
//!   appends nothing to it after the new one is made) and the new one is followed.
//! * **Retention.** Every second a followed log lists its directory: segments whose
//!   files are gone leave the list, the log start comes from `partition.checkpoint`
//!   (written before the writer deletes them), and a segment after a gap in offsets (a
//!   follower's) is picked up. A read of a segment deleted in between lists at once.

use super::files::Files;
use super::index::{OFFSET_ENTRY, read_offset_entry, valid_prefix};
use super::mmap::Follower;
use super::segment::{Segment, file_name};
use super::time_index::{TIME_ENTRY, read_time_entry};
use super::types::SegmentScan;
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::record::{Batch, BatchHead, HEADER_LEN};
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A length past this is not a batch being written (a follower waits for it forever
/// otherwise): 256 MiB, far above `max.message.bytes`.
const MAX_BATCH: usize = 256 << 20;

/// Bytes read at once while checking new batches.
const CHUNK: usize = 1 << 20;

/// How often a followed log lists its directory.
pub(super) const LIST_EVERY: Duration = Duration::from_secs(1);

/// How a read-only log follows its writer.
#[derive(Default)]
pub(crate) struct FollowState {
    /// The last segment and the handle that makes more of its map readable.
    pub(super) tail: Option<(Arc<Segment>, Follower)>,
    /// When the directory was last listed.
    pub(super) listed: Option<Instant>,
}

/// What a walk of batches found: where the checked batches end, the offset after them,
/// their largest timestamp and how many there were.
#[derive(Debug, Clone, Copy)]
pub(super) struct Walk {
    pub(super) end: usize,
    pub(super) next: i64,
    pub(super) max_ts: i64,
    pub(super) max_ts_rel: u32,
    pub(super) batches: usize,
}

/// Reads up to `buf.len()` bytes at `pos` (fewer at the end of the file).
fn pread(file: &File, buf: &mut [u8], pos: usize) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], (pos + n) as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Checks the batches of the segment file `file` (base offset `base`) from byte `pos`,
/// the first expected at offset `expect` (exactly, with `exact`: the batch an index
/// entry names), each whole, with offsets that follow and, from offset `crc_from` on (the
/// writer's recovery point: below it the batches were flushed, and are trusted as the
/// writer trusts them), a valid CRC, read with `pread`; stops at the first that is not
/// (yet).
pub(super) fn walk(
    file: &File,
    base: i64,
    (mut pos, mut expect, mut exact): (usize, i64, bool),
    (location, crc_from): (&str, i64),
) -> std::io::Result<Walk> {
    let mut w = Walk {
        end: pos,
        next: expect,
        max_ts: -1,
        max_ts_rel: 0,
        batches: 0,
    };
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_pos = pos;
    loop {
        if pos + HEADER_LEN > buf_pos + buf.len() {
            buf.resize(CHUNK, 0);
            let n = pread(file, &mut buf, pos)?;
            buf.truncate(n);
            buf_pos = pos;
            if n < HEADER_LEN {
                break;
            }
        }
        let Some(head) = BatchHead::parse(&buf[pos - buf_pos..]) else {
            break;
        };
        if head.len > MAX_BATCH {
            break;
        }
        if pos - buf_pos + head.len > buf.len() {
            buf.resize(head.len.max(CHUNK), 0);
            let n = pread(file, &mut buf, pos)?;
            buf.truncate(n);
            buf_pos = pos;
            if n < head.len {
                break;
            }
        }
        let at = pos - buf_pos;
        let bytes = &buf[at..at + head.len];
        let parsed = if head.base_offset >= crc_from {
            Batch::parse_at(bytes, location, pos as u64)
        } else {
            Batch::parse_header_at(bytes, location, pos as u64)
        };
        let Ok(b) = parsed else {
            break;
        };
        let first = b.base_offset();
        if first < expect || (exact && first != expect) || b.last_offset() - base > u32::MAX as i64
        {
            break;
        }
        if first > expect {
            // A gap in offsets, or a head read before the writer stamped it: the stamp
            // is written before the rest of the batch, so reading it again now that the
            // whole batch is there tells which.
            let mut again = [0u8; 12];
            if pread(file, &mut again, pos)? < 12
                || i64::from_be_bytes(again[..8].try_into().expect("8 bytes")) != first
                || i32::from_be_bytes(again[8..].try_into().expect("4 bytes")) as usize + 12
                    != head.len
            {
                break;
            }
        }
        exact = false;
        if b.max_timestamp() > w.max_ts {
            w.max_ts = b.max_timestamp();
            w.max_ts_rel = (first - base) as u32;
        }
        pos += head.len;
        expect = b.last_offset() + 1;
        w.end = pos;
        w.next = expect;
        w.batches += 1;
    }
    Ok(w)
}

/// True if every byte of `file` from `pos` to its end is zero (a preallocated tail).
fn zeros_from(file: &File, mut pos: usize) -> std::io::Result<bool> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = pread(file, &mut buf, pos)?;
        if n == 0 {
            return Ok(true);
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n;
    }
}

/// What a segment of another process holds, for a read-only opener: its indexes as far
/// as they check out (the last offset entry must name the batch at its position), and
/// the batches after the last entry (checked whole from the recovery point `rp` on).
/// Where they stop short of the end of the file: a zero tail, or (in the `last`
/// segment, past the recovery point) a batch being written, ends the data; anything
/// else is damage, left in the data so that a read that reaches it reports it, as the
/// writer's reads would (`next_base`, the next segment's base, is then its end offset).
pub(super) fn scan_read_only(
    dir: &Path,
    base: i64,
    rp: i64,
    (last, next_base): (bool, Option<i64>),
) -> Result<SegmentScan> {
    let log_path = dir.join(file_name(base, "log"));
    let location = log_path.display().to_string();
    let file = File::open(&log_path).ctx("open segment", &log_path)?;
    let read = |ext: &str| {
        let p = dir.join(file_name(base, ext));
        match std::fs::read(&p) {
            Ok(b) => Ok(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io("read index", p, e)),
        }
    };
    let (idx, tidx) = (read("index")?, read("timeindex")?);
    let mut n = valid_prefix(&idx, OFFSET_ENTRY, |e| {
        let (o, p) = read_offset_entry(e);
        (o as i64, p as i64)
    });
    let tn = valid_prefix(&tidx, TIME_ENTRY, |e| {
        let (t, o) = read_time_entry(e);
        (t, o as i64)
    });
    let mut start = (0usize, base, false);
    if n > 0 {
        let (rel, p) = read_offset_entry(&idx[(n - 1) * OFFSET_ENTRY..n * OFFSET_ENTRY]);
        let mut head = [0u8; HEADER_LEN];
        let names_its_batch = pread(&file, &mut head, p as usize).ctx("read", &log_path)?
            == HEADER_LEN
            && BatchHead::parse(&head).is_some_and(|h| h.base_offset == base + rel as i64);
        if names_its_batch {
            start = (p as usize, base + rel as i64, true);
        } else {
            n = 0;
        }
    }
    let w = walk(&file, base, start, (&location, rp)).ctx("read", &log_path)?;
    let file_len = file.metadata().ctx("stat", &log_path)?.len() as usize;
    let (mut end, mut next) = (w.end, w.next);
    let in_progress = last && w.next >= rp;
    if end < file_len && !in_progress && !zeros_from(&file, end).ctx("read", &log_path)? {
        end = file_len;
        next = next_base.unwrap_or(rp).max(w.next);
    }
    let mut scan = SegmentScan {
        data_len: end,
        next_offset: next,
        max_timestamp: w.max_ts,
        max_ts_batch: w.max_ts_rel,
        index_entries: n,
        time_entries: 0,
        last_time_entry: -1,
        ..Default::default()
    };
    if n > 0 && tn > 0 {
        let (t, rel) = read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..tn * TIME_ENTRY]);
        if base + (rel as i64) < w.next && t > scan.max_timestamp {
            scan.max_timestamp = t;
            scan.max_ts_batch = rel;
        }
        scan.time_entries = tn;
    }
    Ok(scan)
}

/// The segments of a read-only log, one per base offset listed, each scanned by
/// [`scan_read_only`] (`rp`: the writer's recovery point). A segment deleted since the
/// listing is an error of kind `NotFound` (the caller lists again), unless it is the
/// first: retention took the oldest, and the log starts at the next.
pub(super) fn scan_listing(
    dir: &Path,
    bases: &[i64],
    rp: i64,
    files: &Arc<Files>,
) -> Result<Vec<Arc<Segment>>> {
    let mut segments: Vec<Arc<Segment>> = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        if segments.last().is_some_and(|s| base < s.next_offset()) {
            // Starts inside the previous one: what the writer's next open removes.
            break;
        }
        let next_base = bases.get(i + 1).copied();
        let scan = match scan_read_only(dir, base, rp, (next_base.is_none(), next_base)) {
            Ok(scan) => scan,
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && segments.is_empty() =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        segments.push(Segment::open_sealed(dir, base, &scan, files));
    }
    Ok(segments)
}

/// An empty segment at `base` (of a log without one, or the one a roll just made).
pub(super) fn empty_scan(base: i64) -> SegmentScan {
    SegmentScan {
        next_offset: base,
        max_timestamp: -1,
        last_time_entry: -1,
        ..Default::default()
    }
}
