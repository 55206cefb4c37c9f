//! What opening a segment finds: a walk of a trusted segment's last batch headers or a
//! full validation, with its indexes reused or rebuilt; the cut files that keep what
//! recovery removes; and the two ways a sealed segment is rewritten (truncation's cut,
//! compaction's swap).

use super::config::LogConfig;
use super::files::Files;
use super::index::{OFFSET_ENTRY, offset_entry, read_offset_entry, valid_prefix};
use super::mmap::AppendMap;
use super::segment::{Segment, SegmentWriter, file_name, remove_files};
use super::time_index::{TIME_ENTRY, read_time_entry, time_entry};
use super::types::{CutFile, SegmentScan};
use crate::error::IoContext;
use crate::error::{Error, Result};
use crate::record::{Batch, HEADER_LEN};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads a file into a read-only map of its current length (for scanning on open).
fn map_whole(path: &Path) -> Result<(File, Arc<AppendMap>)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ctx("open", path)?;
    let len = file.metadata().ctx("stat", path)?.len() as usize;
    let map = AppendMap::map_ro(&file, len).ctx("map", path)?;
    Ok((file, map))
}

/// How far a segment can be trusted on open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The whole segment lies below the recovery point; the next segment starts at this
    /// offset. Trusted only if the walk of its last batch headers ends exactly at the end
    /// of the file, with a last offset that meets this one.
    Full(i64),
    /// Trusted if its data ends at or below this recovery point.
    UpTo(i64),
    /// Validate every batch.
    None,
}

/// Establishes the contents of a segment on open.
///
/// A trusted segment (wholly below the recovery point) reuses its indexes if they check
/// out (else they are rebuilt by a header walk), and only the batch headers after the
/// last index entry are walked to find the data end. Otherwise every batch's length,
/// magic, CRC and offsets are checked from the start, the log is cut at the first bad
/// batch, and both indexes are rebuilt. Either way the `.log` file is trimmed to the
/// data end when it is longer. Sets `trusted` in the result.
pub(crate) fn scan_segment(
    dir: &Path,
    base_offset: i64,
    trust: Trust,
    index_interval: usize,
    index_max_bytes: usize,
) -> Result<SegmentScan> {
    let log_path = dir.join(file_name(base_offset, "log"));
    let (file, log) = map_whole(&log_path)?;
    let file_len = log.readable();
    let data = log.get(0, file_len).unwrap_or(&[]);
    let loc = log_path.display().to_string();
    let index_path = dir.join(file_name(base_offset, "index"));
    let time_path = dir.join(file_name(base_offset, "timeindex"));

    let mut damaged = false;
    let mut scan = match trust {
        Trust::None => None,
        // A header walk that stops short of the end (a damaged length or magic, offsets
        // going back) or a last offset that does not meet the next segment's base is
        // damage inside trusted bytes: validate the segment like an unflushed one, so
        // that it is reported and cut, never trimmed silently.
        Trust::Full(next_base) => {
            let paths = (index_path.as_path(), time_path.as_path());
            match trusted_scan(data, base_offset, paths, index_interval, false)? {
                Some(s) if s.data_len == data.len() && s.next_offset == next_base => Some(s),
                Some(_) => {
                    damaged = true;
                    None
                }
                None => None,
            }
        }
        // Bytes other than the zero padding after the data are a torn write: validate
        // the segment so that the cut is reported, not trimmed silently.
        Trust::UpTo(rp) => trusted_scan(
            data,
            base_offset,
            (&index_path, &time_path),
            index_interval,
            true,
        )?
        .filter(|s| s.next_offset <= rp && data[s.data_len..].iter().all(|&b| b == 0)),
    };
    if let Some(s) = scan.as_mut() {
        s.trusted = true;
        s.indexes_on_disk = true;
    } else {
        let sealed = matches!(trust, Trust::Full(_));
        let mut validate = !sealed || damaged;
        let mut scanned = full_scan(
            data,
            base_offset,
            &loc,
            (validate, !sealed),
            index_interval,
            index_max_bytes,
        );
        // Rebuilding the indexes of a trusted segment walks its headers; one that finds
        // them wrong validates it after all.
        if let (false, Trust::Full(next_base)) = (validate, trust)
            && (scanned.0.truncated.is_some()
                || scanned.0.data_len != data.len()
                || scanned.0.next_offset != next_base)
        {
            validate = true;
            scanned = full_scan(
                data,
                base_offset,
                &loc,
                (true, false),
                index_interval,
                index_max_bytes,
            );
        }
        let (mut s, idx, tidx) = scanned;
        // A rebuilt time index may lack the final entry written when the segment was
        // sealed: only a real difference counts as a repair.
        s.index_rebuilt = differs(&index_path, &idx, false);
        s.time_index_rebuilt = differs(&time_path, &tidx, true);
        // A trusted segment is rebuilt only because its indexes did not check out.
        s.index_rebuilt |= !validate && !s.time_index_rebuilt;
        write_index_file(&index_path, &idx, sealed)?;
        write_index_file(&time_path, &tidx, sealed)?;
        scan = Some(s);
    }
    let mut scan = scan.expect("set above");
    if file_len > scan.data_len {
        if scan.truncated.is_some() {
            // The cut bytes are kept beside the segment, never destroyed.
            scan.cut = Some(save_cut(&log_path, &data[scan.data_len..])?);
        }
        file.set_len(scan.data_len as u64)
            .ctx("truncate segment", &log_path)?;
    }
    Ok(scan)
}

/// Prefix of the name of a file holding bytes that recovery cut from a segment:
/// `<segment>.log.cut-<unix ms>`.
pub(crate) const CUT_MARK: &str = ".log.cut-";

/// The name of a new cut file for `log_path`, `<log name>.cut-<unix ms>` (a later
/// millisecond if that name is taken).
fn cut_path(log_path: &Path) -> PathBuf {
    let name = log_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut ms = super::clock::now_ms();
    loop {
        let p = log_path.with_file_name(format!("{name}.cut-{ms}"));
        if !p.exists() {
            return p;
        }
        ms += 1;
    }
}

/// The unix ms in the name of a cut file (`<base>.log.cut-<ms>`), if it is one.
pub(crate) fn parse_cut_name(name: &str) -> Option<i64> {
    let (stem, ms) = name.split_once(CUT_MARK)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (stem.len() == 20 && digits(stem) && digits(ms))
        .then(|| ms.parse().ok())
        .flatten()
}

/// Records in the batches laid back to back in `bytes`, as far as their length fields
/// can be followed: a batch whose other header fields are damaged counts with the
/// records its header declares, and so does a torn last batch; a length that does not
/// fit ends the count.
pub(crate) fn count_records(bytes: &[u8]) -> u64 {
    let field =
        |at: usize| i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut pos = 0;
    let mut records = 0u64;
    while pos + HEADER_LEN <= bytes.len() {
        let len = field(pos + 8);
        if len < (HEADER_LEN - 12) as i32 {
            break;
        }
        records += field(pos + 57).max(0) as u64;
        pos += len as usize + 12;
    }
    records
}

/// Writes `bytes` (cut from the end of `log_path` by recovery) to a new cut file beside
/// it, fsynced. A run of zeros at the end (the preallocated tail) is left as a hole: the
/// file reads back byte for byte and takes no disk space for it.
fn save_cut(log_path: &Path, bytes: &[u8]) -> Result<CutFile> {
    use std::io::Write;
    let path = cut_path(log_path);
    let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ctx("create", &path)?;
    f.write_all(&bytes[..used]).ctx("write", &path)?;
    f.set_len(bytes.len() as u64).ctx("resize", &path)?;
    f.sync_all().ctx("fsync", &path)?;
    Ok(CutFile {
        path,
        bytes: bytes.len() as u64,
        records: count_records(bytes),
    })
}

/// Moves a whole segment's `.log` that recovery removes (it follows a cut) to a cut file
/// beside it, and deletes its indexes. None if it has no `.log`.
pub(crate) fn move_aside(dir: &Path, base_offset: i64) -> Result<Option<CutFile>> {
    let log_path = dir.join(file_name(base_offset, "log"));
    let (bytes, records) = match map_whole(&log_path) {
        Ok((_, map)) => {
            let data = map.get(0, map.readable()).unwrap_or(&[]);
            (data.len() as u64, count_records(data))
        }
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let path = cut_path(&log_path);
    std::fs::rename(&log_path, &path).ctx("move aside", &log_path)?;
    for ext in ["index", "timeindex"] {
        let p = dir.join(file_name(base_offset, ext));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove the index of a removed segment", p, e)),
        }
    }
    Ok(Some(CutFile {
        path,
        bytes,
        records,
    }))
}

/// True if the index file at `path` is missing or does not start with `rebuilt` followed
/// only by zeros (an untrimmed preallocated tail is not damage).
fn differs(path: &Path, rebuilt: &[u8], prefix_ok: bool) -> bool {
    match std::fs::read(path) {
        Ok(old) => {
            old.len() < rebuilt.len()
                || old[..rebuilt.len()] != *rebuilt
                || (!prefix_ok && old[rebuilt.len()..].iter().any(|&b| b != 0))
        }
        // An index without entries has no file (or an empty one).
        Err(_) => !rebuilt.is_empty(),
    }
}

/// Writes an index file through a temporary file and a rename, so that a reader still
/// mapping the old file keeps valid pages (a shrink in place could fault its map).
///
/// An index without entries is an empty file with `keep_empty` (a sealed segment's, as
/// in Kafka), else no file (an active segment's is created with its first entry).
fn write_index_file(path: &Path, bytes: &[u8], keep_empty: bool) -> Result<()> {
    if bytes.is_empty() && !keep_empty {
        return match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove empty index", path, e)),
        };
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).ctx("write index", &tmp)?;
    std::fs::rename(&tmp, path).ctx("rename index into place", path)
}

/// Makes the first `cut` bytes of `seg` (whole batches) the whole segment, reopened as
/// the active one, without changing a byte that a reader of `seg` may hold (truncation).
///
/// When bytes are cut, the kept prefix is copied to `<base>.log.swap`, fsynced, and
/// renamed over the `.log`: readers of the old file keep its pages through their maps
/// and descriptors, and appends go to the new file. When nothing is cut (the cut falls at
/// the end of a sealed segment) the file is reopened for appending past its data, which
/// no reader holds. Both indexes are rewritten for the prefix (temporary file and
/// rename). `step` is told of each durable step (crash tests stop or copy there).
pub(crate) fn cut_to(
    dir: &Path,
    seg: &Segment,
    cut: usize,
    config: &LogConfig,
    files: &Arc<Files>,
    step: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<SegmentWriter> {
    let base = seg.base_offset;
    let location = seg.log_path.display().to_string();
    let view = seg.view()?;
    let data = view.bytes(0, cut).ok_or_else(|| {
        Error::corrupt(
            &location,
            cut as u64,
            "truncation point is past the segment's data",
        )
    })?;
    let (scan, idx, tidx) = full_scan(
        data,
        base,
        &location,
        (false, true),
        config.index_interval_bytes as usize,
        config.index_max_bytes as usize,
    );
    drop(view);
    if scan.data_len != cut {
        return Err(Error::corrupt(
            &location,
            scan.data_len as u64,
            "truncation point is not a batch boundary",
        ));
    }
    // Its files are rewritten from here: the segment never opens them by path again
    // (its readers keep their maps).
    seg.detach();
    let swap = dir.join(format!("{}.swap", file_name(base, "log")));
    let copied = cut < seg.size();
    if copied {
        let mut src = File::open(&seg.log_path).ctx("open segment", &seg.log_path)?;
        let mut dst = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&swap)
            .ctx("create", &swap)?;
        let n = std::io::copy(&mut std::io::Read::take(&mut src, cut as u64), &mut dst)
            .ctx("copy the kept prefix to", &swap)?;
        if n != cut as u64 {
            return Err(Error::corrupt(
                &location,
                n,
                "segment file ends before its data",
            ));
        }
        dst.sync_all().ctx("fsync", &swap)?;
        step("prefix copied")?;
    }
    write_index_file(&dir.join(file_name(base, "index")), &idx, false)?;
    write_index_file(&dir.join(file_name(base, "timeindex")), &tidx, false)?;
    step("indexes rewritten")?;
    if copied {
        std::fs::rename(&swap, &seg.log_path).ctx("swap in the kept prefix", &seg.log_path)?;
        step("prefix swapped in")?;
    }
    Ok(Segment::open_active(dir, base, &scan, config, files))
}

/// Writes a compacted copy of a sealed segment and swaps it in: the new bytes go to
/// `<base>.log.cleaned`, are fsynced, and are renamed over the `.log`; its indexes are
/// rebuilt. Readers of the old segment keep the old file's pages. Returns the new
/// segment, or `None` if it is empty and was deleted (unless `keep_empty`: the first
/// segment stays, so that the log start offset keeps its segment).
pub(crate) fn replace_with(
    dir: &Path,
    old: &Segment,
    bytes: &[u8],
    keep_empty: bool,
    (config, files): (&LogConfig, &Arc<Files>),
) -> Result<Option<Arc<Segment>>> {
    use std::io::Write;
    let base_offset = old.base_offset;
    let log_path = dir.join(file_name(base_offset, "log"));
    if bytes.is_empty() && !keep_empty {
        old.detach();
        remove_files(dir, base_offset, "delete compacted segment")?;
        return Ok(None);
    }
    let cleaned = dir.join(format!("{}.cleaned", file_name(base_offset, "log")));
    let mut f = File::create(&cleaned).ctx("create", &cleaned)?;
    f.write_all(bytes).ctx("write", &cleaned)?;
    f.sync_all().ctx("fsync", &cleaned)?;
    drop(f);
    let (scan, idx, tidx) = full_scan(
        bytes,
        base_offset,
        &cleaned.display().to_string(),
        (true, true),
        config.index_interval_bytes as usize,
        config.index_max_bytes as usize,
    );
    if let Some((pos, why)) = scan.truncated {
        let _ = std::fs::remove_file(&cleaned);
        return Err(Error::corrupt(cleaned.display(), pos, why));
    }
    // From here the old segment's files are replaced: it never opens them by path
    // again (its readers keep their maps).
    old.detach();
    write_index_file(&dir.join(file_name(base_offset, "index")), &idx, true)?;
    write_index_file(&dir.join(file_name(base_offset, "timeindex")), &tidx, true)?;
    std::fs::rename(&cleaned, &log_path).ctx("swap in compacted segment", &log_path)?;
    Ok(Some(Segment::open_sealed(dir, base_offset, &scan, files)))
}

/// Reuses the indexes of a trusted segment; `None` if they do not check out.
///
/// Index files are created with a segment's first index entry, so a missing one is an
/// index without entries, unless the segment holds a batch at or past `index_interval`
/// (which would have had one).
fn trusted_scan(
    data: &[u8],
    base: i64,
    (index_path, time_path): (&Path, &Path),
    index_interval: usize,
    from_time_entry: bool,
) -> Result<Option<SegmentScan>> {
    let Some(TrustedIndexes {
        idx,
        tidx,
        index_missing,
    }) = read_trusted_indexes(index_path, time_path)?
    else {
        return Ok(None);
    };
    let n = valid_prefix(&idx, OFFSET_ENTRY, |e| {
        let (o, p) = read_offset_entry(e);
        (o as i64, p as i64)
    });
    let tn = valid_prefix(&tidx, TIME_ENTRY, |e| {
        let (t, o) = read_time_entry(e);
        (t, o as i64)
    });
    let entry = |i: usize| read_offset_entry(&idx[i * OFFSET_ENTRY..(i + 1) * OFFSET_ENTRY]);
    // The walk must pass the last index entry, which must point at a batch whose base
    // offset matches.
    let last = n.checked_sub(1).map(entry);
    // It starts there, or, with `from_time_entry`, at the index entry at or below the
    // batch of the last time entry (the start when there is none), so that every batch
    // after the last time entry is walked and the largest timestamp is exact even when
    // the time index lost entries that the offset index kept.
    let start = if from_time_entry {
        let time_rel = (tn > 0).then(|| read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..]).1);
        time_rel.and_then(|r| entry_at_or_below(n, entry, r))
    } else {
        last
    };
    let mut scan = SegmentScan {
        next_offset: base,
        max_timestamp: -1,
        last_time_entry: -1,
        index_entries: n,
        time_entries: tn,
        ..Default::default()
    };
    if tn > 0 {
        let (t, rel) = read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..tn * TIME_ENTRY]);
        scan.max_timestamp = t;
        scan.last_time_entry = t;
        scan.max_ts_batch = rel;
    }
    let Some((pos, last_start)) = walk_trusted(data, base, (start, last), &mut scan) else {
        return Ok(None);
    };
    scan.bytes_since_index = pos - last.map_or(0, |(_, p)| p as usize);
    if tn > 0 && read_time_entry(&tidx[(tn - 1) * TIME_ENTRY..]).1 as i64 > scan.next_offset - base
    {
        return Ok(None);
    }
    if index_missing && last_start >= index_interval.max(1) {
        // A batch this far in would have had an index entry: the file was lost.
        return Ok(None);
    }
    scan.data_len = pos;
    Ok(Some(scan))
}

/// A trusted segment's index files as read (see [`read_trusted_indexes`]).
struct TrustedIndexes {
    /// The offset index (empty when missing).
    idx: Vec<u8>,
    /// The time index (empty when missing).
    tidx: Vec<u8>,
    /// The offset index file was missing.
    index_missing: bool,
}

/// An offset index entry: (relative offset, byte position).
type Entry = (u32, u32);

/// Reads a trusted segment's offset and time index files: their bytes (empty when
/// missing) and whether the offset index was missing; `None` if they cannot be sound
/// (time entries beyond the final one without an offset index, or a partial entry).
fn read_trusted_indexes(index_path: &Path, time_path: &Path) -> Result<Option<TrustedIndexes>> {
    let read = |p: &Path| match std::fs::read(p) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read index", p, e)),
    };
    let idx = read(index_path)?;
    let tidx = read(time_path)?;
    // An empty file is an index without entries, as a missing one (a sealed segment's
    // index that never got an entry is an empty file).
    let index_missing = idx.as_ref().is_none_or(Vec::is_empty);
    if index_missing && tidx.as_ref().is_some_and(|t| t.len() > TIME_ENTRY) {
        // Time entries beyond the final one come with offset entries.
        return Ok(None);
    }
    let (idx, tidx) = (idx.unwrap_or_default(), tidx.unwrap_or_default());
    if idx.len() % OFFSET_ENTRY != 0 || tidx.len() % TIME_ENTRY != 0 {
        return Ok(None);
    }
    Ok(Some(TrustedIndexes {
        idx,
        tidx,
        index_missing,
    }))
}

/// The last of the `n` offset index entries (`entry(i)`, increasing) whose relative
/// offset is at most `rel`, if any.
fn entry_at_or_below(n: usize, entry: impl Fn(usize) -> Entry, rel: u32) -> Option<Entry> {
    // Entries below `lo` have a relative offset <= rel (they are increasing).
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if entry(mid).0 <= rel {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1).map(entry)
}

/// Walks the batch headers of a trusted segment (base offset `base`) from the index
/// entry `start` (the beginning when `None`), noting the log end and largest timestamp
/// in `scan`. Returns where the walk stopped and where its last batch starts; `None`
/// if the indexes do not check out: the first batch is not the one `start` names, or
/// the walk does not pass the `last` entry on the batch it names.
fn walk_trusted(
    data: &[u8],
    base: i64,
    (start, last): (Option<Entry>, Option<Entry>),
    scan: &mut SegmentScan,
) -> Option<(usize, usize)> {
    let mut pos = start.map_or(0, |(_, p)| p as usize);
    let mut passed_last = last.is_none();
    let mut first = true;
    let mut last_start = 0usize;
    while pos + HEADER_LEN <= data.len() {
        let Ok(b) = Batch::parse_header_at(&data[pos..], "", 0) else {
            break;
        };
        if first && start.is_some_and(|(rel, _)| b.base_offset() != base + rel as i64) {
            return None;
        }
        // Offsets going back (the first batch's too: below the segment's base) or past
        // what a relative index entry holds are damage: the walk stops there, and the
        // caller validates the segment so that the cut is reported.
        if b.base_offset() < scan.next_offset
            || b.last_offset() < b.base_offset()
            || b.last_offset() - base > u32::MAX as i64
        {
            break;
        }
        if let Some((rel, p)) = last.filter(|_| !passed_last) {
            match pos.cmp(&(p as usize)) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal if b.base_offset() == base + rel as i64 => {
                    passed_last = true;
                }
                // The last entry names another batch, or no batch starts there.
                _ => return None,
            }
        }
        first = false;
        last_start = pos;
        scan.next_offset = b.last_offset() + 1;
        if b.max_timestamp() > scan.max_timestamp {
            scan.max_timestamp = b.max_timestamp();
            scan.max_ts_batch = (b.base_offset() - base) as u32;
        }
        pos += b.len();
    }
    // Not passed: the last index entry points past the data.
    passed_last.then_some((pos, last_start))
}

/// Walks every batch from the start, rebuilding both indexes; with `validate`, checks
/// CRCs too. With `zero_tail`, zeros after the last batch are the unused preallocated
/// tail of a segment that was being written; without (a sealed segment trusted on
/// open, whose file ended at its data), they are damage. Returns the scan and the index
/// bytes.
fn full_scan(
    data: &[u8],
    base: i64,
    loc: &str,
    (validate, zero_tail): (bool, bool),
    index_interval: usize,
    index_max_bytes: usize,
) -> (SegmentScan, Vec<u8>, Vec<u8>) {
    let mut scan = SegmentScan {
        next_offset: base,
        max_timestamp: -1,
        last_time_entry: -1,
        ..Default::default()
    };
    let (mut idx, mut tidx) = (Vec::new(), Vec::new());
    let mut pos = 0usize;
    while pos < data.len() {
        let parsed = if validate {
            Batch::parse_at(&data[pos..], loc, pos as u64)
        } else {
            Batch::parse_header_at(&data[pos..], loc, pos as u64)
        };
        let b = match parsed {
            Ok(b) => b,
            Err(e) => {
                // Zeros after the data are the unused preallocated tail, not damage.
                if !zero_tail || !data[pos..].iter().all(|&x| x == 0) {
                    scan.truncated = Some((pos as u64, e.to_string()));
                }
                break;
            }
        };
        if b.base_offset() < scan.next_offset
            || b.last_offset() < b.base_offset()
            || b.last_offset() - base > u32::MAX as i64
        {
            scan.truncated = Some((
                pos as u64,
                format!(
                    "corrupt data in {loc} at byte {pos}: batch offsets {}..={} do not follow {}",
                    b.base_offset(),
                    b.last_offset(),
                    scan.next_offset - 1
                ),
            ));
            break;
        }
        let rel = (b.base_offset() - base) as u32;
        if pos > 0
            && scan.bytes_since_index >= index_interval
            && idx.len() + OFFSET_ENTRY <= index_max_bytes
            && tidx.len() + TIME_ENTRY <= index_max_bytes
        {
            idx.extend_from_slice(&offset_entry(rel, pos as u32));
            let ts = scan.max_timestamp.max(b.max_timestamp());
            if ts > scan.last_time_entry {
                tidx.extend_from_slice(&time_entry(ts, rel));
                scan.last_time_entry = ts;
            }
            scan.bytes_since_index = 0;
        }
        if b.max_timestamp() > scan.max_timestamp {
            scan.max_timestamp = b.max_timestamp();
            scan.max_ts_batch = rel;
        }
        scan.next_offset = b.last_offset() + 1;
        scan.bytes_since_index += b.len();
        pos += b.len();
        if validate {
            crate::metrics::recovery_validated(b.len() as u64);
        }
    }
    if validate {
        scan.bytes_validated = pos as u64;
    }
    scan.data_len = pos;
    scan.index_entries = idx.len() / OFFSET_ENTRY;
    scan.time_entries = tidx.len() / TIME_ENTRY;
    (scan, idx, tidx)
}
