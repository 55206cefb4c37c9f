//! `tidelog dump PATH [--records]`, as kafka-dump-log.
//!
//! For a `.log`: every batch (position, base and last offset, count, timestamps, size,
//! CRC valid or not), and with `--records` every record. For `.index` and `.timeindex`:
//! every entry, checked for order and, for the offset index, against the `.log` beside
//! it. A `.log.cut-<ms>` file (bytes that recovery cut from a segment, see
//! docs/format.md) dumps as a `.log`, so that valid batches after a damaged one can be
//! found and salvaged. A directory dumps every segment file in it, and its cut files.
//! tidelog's checkpoint files (`partition.checkpoint`, `topics`, `producer-id-block`)
//! show their fields and whether their CRC is valid (see `dump_checkpoint`).
//!
//! The dump reads the file with plain reads (no map, no lock), so it also works on a
//! segment the broker is writing. On damage it says what is wrong and at which byte on
//! stdout, in place, then keeps going: after a bad batch header it searches forward for
//! the next position that holds a whole batch with a valid CRC. Problems make the exit
//! code 1, with a summary line on stderr.

use crate::cli::DumpArgs;
use crate::out::Out;
use crate::progress::{Progress, Unit};
use crate::{CliResult, fail};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use tidelog::record::{Compression, decompression_limit};
use tidelog::record::{HEADER_LEN, LOG_OVERHEAD};
use tidelog::{Batch, LogConfig};

/// Offset index entry size: relative offset (u32), position (u32).
const OFFSET_ENTRY: usize = 8;
/// Time index entry size: timestamp (i64), relative offset (u32).
const TIME_ENTRY: usize = 12;
/// A batch length past this is treated as damage rather than read into memory.
const MAX_PLAUSIBLE_BATCH: u64 = 256 << 20;
/// Bytes read at a time while searching for the next valid batch.
const SCAN_CHUNK: usize = 1 << 20;

/// Runs `tidelog dump`.
pub(crate) fn run(args: &DumpArgs) -> CliResult {
    let meta = std::fs::metadata(&args.path)
        .map_err(|e| fail!("cannot read {}: {e}", args.path.display()))?;
    let files = if meta.is_dir() {
        segment_files(&args.path)?
    } else {
        vec![args.path.clone()]
    };
    let mut out = Out::new();
    let mut report = Problems::default();
    for (i, path) in files.iter().enumerate() {
        if i > 0 {
            out.line("")?;
        }
        dump_file(path, args.records, &mut out, &mut report)?;
    }
    out.flush()?;
    match report.first {
        None => Ok(()),
        Some((path, pos, reason)) => Err(fail!(
            "{} problem(s) found; the first in {} at byte {pos}: {reason}",
            report.count,
            path.display()
        )),
    }
}

/// Problems found so far, for the exit code and the summary line.
#[derive(Default)]
pub(crate) struct Problems {
    count: u64,
    first: Option<(PathBuf, u64, String)>,
}

impl Problems {
    /// Records a problem and prints it in place.
    pub(crate) fn add(&mut self, out: &mut Out, path: &Path, pos: u64, reason: &str) -> CliResult {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some((path.to_path_buf(), pos, reason.to_string()));
        }
        out.line(format_args!("PROBLEM at byte {pos}: {reason}"))
    }
}

/// The segment files of a partition directory, ordered by base offset then kind.
fn segment_files(dir: &Path) -> CliResult<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| fail!("cannot list {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| fail!("cannot list {}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = match path.extension().and_then(|e| e.to_str()) {
            Some("log") => 0,
            Some("index") => 1,
            Some("timeindex") => 2,
            _ if cut_of(&path).is_some() => 3,
            _ => continue,
        };
        let base = base_offset_of(&path)
            .or_else(|| cut_of(&path).map(|(base, _)| base))
            .unwrap_or(i64::MAX);
        files.push((base, kind, path));
    }
    if files.is_empty() {
        return Err(fail!(
            "{} holds no .log, .index or .timeindex file",
            dir.display()
        ));
    }
    files.sort();
    Ok(files.into_iter().map(|(_, _, p)| p).collect())
}

/// The segment base offset and the unix ms in the name of a file of bytes that recovery
/// cut from a segment (`00000000000000000042.log.cut-1700000000000` → (42, 1700000000000)).
fn cut_of(path: &Path) -> Option<(i64, i64)> {
    let name = path.file_name()?.to_str()?;
    let (stem, ms) = name.split_once(".log.cut-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if stem.len() != 20 || !digits(stem) || !digits(ms) {
        return None;
    }
    Some((stem.parse().ok()?, ms.parse().ok()?))
}

/// The base offset in a segment file name (`00000000000000000042.log` → 42).
fn base_offset_of(path: &Path) -> Option<i64> {
    let stem = path.file_stem()?.to_str()?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

fn dump_file(path: &Path, records: bool, out: &mut Out, report: &mut Problems) -> CliResult {
    let kind = match path.extension().and_then(|e| e.to_str()) {
        Some(k @ ("log" | "index" | "timeindex")) => k,
        _ if cut_of(path).is_some() => "log",
        _ if crate::dump_checkpoint::is_checkpoint(path) => {
            return crate::dump_checkpoint::dump(path, out, report);
        }
        _ => {
            return Err(fail!(
                "cannot dump {}: expected a .log, .index or .timeindex file, the \
                 .log.cut-<ms> file of bytes recovery cut, or a tidelog checkpoint file \
                 (partition.checkpoint, topics, producer-id-block)",
                path.display()
            ));
        }
    };
    let file = SegmentFile::open(path)?;
    out.line(format_args!("Dumping {}", path.display()))?;
    match kind {
        "log" => dump_log(&file, records, out, report),
        "index" => dump_offset_index(&file, out, report),
        _ => dump_time_index(&file, out, report),
    }
}

/// A file read by position.
struct SegmentFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl SegmentFile {
    fn open(path: &Path) -> CliResult<SegmentFile> {
        let file = File::open(path).map_err(|e| fail!("cannot open {}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| fail!("cannot read {}: {e}", path.display()))?
            .len();
        Ok(SegmentFile {
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    /// Reads `buf.len()` bytes at `pos` (the caller keeps within the file length).
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> CliResult {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(pos))
            .and_then(|_| f.read_exact(buf))
            .map_err(|e| {
                fail!(
                    "cannot read {} bytes at byte {pos} of {}: {e}",
                    buf.len(),
                    self.path.display()
                )
            })
    }

    /// Reads `[pos, pos + len)` into `buf`, replacing its contents.
    fn read_into(&self, pos: u64, len: usize, buf: &mut Vec<u8>) -> CliResult {
        buf.clear();
        buf.resize(len, 0);
        self.read_at(pos, buf)
    }

    /// True if the (up to) 12 bytes at `pos` are zero: where a preallocated tail starts.
    fn starts_with_zeros(&self, pos: u64) -> CliResult<bool> {
        let mut head = [0u8; LOG_OVERHEAD];
        let n = (self.len - pos).min(LOG_OVERHEAD as u64) as usize;
        self.read_at(pos, &mut head[..n])?;
        Ok(head[..n].iter().all(|&b| b == 0))
    }

    /// True if every byte from `pos` to the end of the file is zero.
    fn zeros_from(&self, pos: u64) -> CliResult<bool> {
        let mut buf = vec![0u8; SCAN_CHUNK];
        let mut at = pos;
        while at < self.len {
            let n = (self.len - at).min(SCAN_CHUNK as u64) as usize;
            self.read_at(at, &mut buf[..n])?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at += n as u64;
        }
        Ok(true)
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

/// Running totals of a `.log` dump.
#[derive(Default)]
struct LogTotals {
    batches: u64,
    records: u64,
    bytes: u64,
}

fn dump_log(file: &SegmentFile, records: bool, out: &mut Out, report: &mut Problems) -> CliResult {
    match (base_offset_of(&file.path), cut_of(&file.path)) {
        (Some(base), _) => out.line(format_args!("Log starting offset: {base}"))?,
        (None, Some((base, ms))) => out.line(format_args!(
            "Bytes recovery cut from segment {base:020}.log at {ms} ms since the epoch \
             (positions below are in this file; its first batch may be the damaged one)"
        ))?,
        (None, None) => {
            out.line("Log starting offset: unknown (file name is not a base offset)")?;
        }
    }
    let mut totals = LogTotals::default();
    let mut buf = Vec::new();
    let mut pos = 0u64;
    let mut next_expected: Option<i64> = None;
    let progress = Progress::when(
        crate::progress::beside_stdout(),
        format!(
            "dump {}",
            file.path.file_name().map_or_else(
                || file.path.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
        Unit::Bytes,
        Some(file.len),
    );
    while pos < file.len {
        progress.set(pos);
        let remain = file.len - pos;
        if file.starts_with_zeros(pos)? && file.zeros_from(pos)? {
            out.line(format_args!(
                "{remain} zero bytes from byte {pos} to the end of the file (unused preallocated space)"
            ))?;
            break;
        }
        let size = match batch_size_at(file, pos)? {
            Ok(size) => size,
            Err(reason) => {
                report.add(out, &file.path, pos, &reason)?;
                pos = resync(file, pos, out)?;
                continue;
            }
        };
        file.read_into(pos, size as usize, &mut buf)?;
        let batch = match Batch::parse_header_at(&buf, &file.location(), pos) {
            Ok(b) => b,
            Err(e) => {
                report.add(out, &file.path, pos, &corrupt_reason(&e))?;
                pos = resync(file, pos, out)?;
                continue;
            }
        };
        let computed = tidelog::record::crc32c(&buf[21..]);
        let crc_ok = computed == batch.crc();
        print_batch(out, &batch, pos, crc_ok, computed)?;
        if !crc_ok {
            report.add(
                out,
                &file.path,
                pos,
                &format!(
                    "CRC-32C mismatch in the batch at offsets {}..={}: stored {:#010x}, computed {computed:#010x}",
                    batch.base_offset(),
                    batch.last_offset(),
                    batch.crc()
                ),
            )?;
        }
        if let Some(expected) = next_expected
            && batch.base_offset() < expected
        {
            report.add(
                out,
                &file.path,
                pos,
                &format!(
                    "offsets go backwards: batch starts at offset {} but the previous one ended at {}",
                    batch.base_offset(),
                    expected - 1
                ),
            )?;
        }
        next_expected = Some(batch.last_offset() + 1);
        if records {
            print_records(out, &batch, &file.path, pos, report)?;
        }
        totals.batches += 1;
        totals.records += batch.record_count().max(0) as u64;
        totals.bytes += size;
        pos += size;
    }
    out.line(format_args!(
        "Summary: {} batches, {} records, {} bytes of batches in a file of {} bytes",
        totals.batches, totals.records, totals.bytes, file.len
    ))
}

/// The reason of a corruption error without the location prefix (printed in place).
fn corrupt_reason(e: &tidelog::Error) -> String {
    match e {
        tidelog::Error::Corrupt { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// Size of the batch at `pos` from its length field, or why there cannot be one.
fn batch_size_at(file: &SegmentFile, pos: u64) -> CliResult<Result<u64, String>> {
    let remain = file.len - pos;
    if remain < HEADER_LEN as u64 {
        return Ok(Err(format!(
            "truncated batch: {remain} bytes left at the end of the file, a batch header needs {HEADER_LEN}"
        )));
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_at(pos, &mut head)?;
    let len = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    let min = (HEADER_LEN - LOG_OVERHEAD) as i32;
    if len < min {
        return Ok(Err(format!(
            "batch length {len} is smaller than a batch header ({min})"
        )));
    }
    let size = len as u64 + LOG_OVERHEAD as u64;
    if size > remain {
        return Ok(Err(format!(
            "torn batch: it declares {size} bytes but only {remain} remain in the file"
        )));
    }
    if size > MAX_PLAUSIBLE_BATCH {
        return Ok(Err(format!(
            "implausible batch length {len} (over {MAX_PLAUSIBLE_BATCH} bytes)"
        )));
    }
    if head[16] != 2 {
        return Ok(Err(format!(
            "unsupported magic byte {} (only RecordBatch v2 is supported)",
            head[16] as i8
        )));
    }
    Ok(Ok(size))
}

/// Searches forward from `bad + 1` for the next position holding a whole batch with a
/// valid CRC; reports the skip and returns that position, or the file length if none.
fn resync(file: &SegmentFile, bad: u64, out: &mut Out) -> CliResult<u64> {
    let mut window = vec![0u8; SCAN_CHUNK + HEADER_LEN];
    let mut candidate = Vec::new();
    let mut start = bad + 1;
    while start + (HEADER_LEN as u64) <= file.len {
        let n = (file.len - start).min(window.len() as u64) as usize;
        file.read_at(start, &mut window[..n])?;
        let last = n - HEADER_LEN;
        for i in 0..=last.min(SCAN_CHUNK - 1) {
            let h = &window[i..i + HEADER_LEN];
            if h[16] != 2 {
                continue;
            }
            let pos = start + i as u64;
            let Ok(Ok(size)) = batch_size_at(file, pos) else {
                continue;
            };
            file.read_into(pos, size as usize, &mut candidate)?;
            let stored = u32::from_be_bytes([h[17], h[18], h[19], h[20]]);
            if tidelog::record::crc32c(&candidate[21..]) == stored {
                out.line(format_args!(
                    "skipped {} bytes from byte {bad} to the next valid batch at byte {pos}",
                    pos - bad
                ))?;
                return Ok(pos);
            }
        }
        start += (last.min(SCAN_CHUNK - 1) + 1) as u64;
    }
    out.line(format_args!(
        "no valid batch after byte {bad}: the last {} bytes of the file are not dumped",
        file.len - bad
    ))?;
    Ok(file.len)
}

fn print_batch(out: &mut Out, b: &Batch<'_>, pos: u64, crc_ok: bool, computed: u32) -> CliResult {
    let codec = b.codec().map_or("unknown", Compression::name);
    let ts_type = if b.timestamp_type_log_append() {
        "LogAppendTime"
    } else {
        "CreateTime"
    };
    let last_seq = if b.base_sequence() < 0 {
        -1
    } else {
        b.base_sequence().wrapping_add(b.last_offset_delta())
    };
    let valid = if crc_ok {
        "true".to_string()
    } else {
        format!("false (computed {computed:#010x})")
    };
    out.line(format_args!(
        "baseOffset: {} lastOffset: {} count: {} position: {pos} size: {} {ts_type}: {} baseTimestamp: {} \
         producerId: {} producerEpoch: {} baseSequence: {} lastSequence: {last_seq} partitionLeaderEpoch: {} \
         isTransactional: {} isControl: {} magic: 2 compresscodec: {codec} crc: {:#010x} isValid: {valid}",
        b.base_offset(),
        b.last_offset(),
        b.record_count(),
        b.len(),
        b.max_timestamp(),
        b.base_timestamp(),
        b.producer_id(),
        b.producer_epoch(),
        b.base_sequence(),
        b.partition_leader_epoch(),
        b.is_transactional(),
        b.is_control(),
        b.crc(),
    ))
}

fn print_records(
    out: &mut Out,
    b: &Batch<'_>,
    path: &Path,
    pos: u64,
    report: &mut Problems,
) -> CliResult {
    let ts_type = if b.timestamp_type_log_append() {
        "LogAppendTime"
    } else {
        "CreateTime"
    };
    // A segment file carries no topic config: compressed batches are bounded by the
    // default max.message.bytes (64 MiB decompressed, see decompression_limit).
    let limit = decompression_limit(LogConfig::default().max_message_bytes);
    let mut scratch = Vec::new();
    let records = match b.decode_records(&path.display().to_string(), limit, &mut scratch) {
        Ok(records) => records,
        Err(e) => {
            let reason = format!(
                "records of the batch at offsets {}..={} cannot be decompressed: {e}",
                b.base_offset(),
                b.last_offset()
            );
            return report.add(out, path, pos, &reason);
        }
    };
    for r in records {
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                let reason = format!(
                    "records of the batch at offsets {}..={} cannot be decoded: {e}",
                    b.base_offset(),
                    b.last_offset()
                );
                return report.add(out, path, pos, &reason);
            }
        };
        let size = |x: Option<&[u8]>| x.map_or(-1, |x| x.len() as i64);
        let text = |x: Option<&[u8]>| x.map_or_else(|| "null".to_string(), escape);
        let headers: Vec<String> = r
            .headers
            .iter()
            .map(|(k, v)| format!("{}={}", escape(k.as_bytes()), text(v)))
            .collect();
        out.line(format_args!(
            "| offset: {} {ts_type}: {} keySize: {} valueSize: {} headers: [{}] key: {} payload: {}",
            r.offset,
            r.timestamp,
            size(r.key),
            size(r.value),
            headers.join(", "),
            text(r.key),
            text(r.value),
        ))?;
    }
    Ok(())
}

/// Bytes for display: valid UTF-8 text with control characters escaped, other bytes as
/// `\xNN`.
pub(crate) fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '\r' => s.push_str("\\r"),
                '\\' => s.push_str("\\\\"),
                c if c.is_control() => s.push_str(&format!("\\x{:02x}", c as u32)),
                c => s.push(c),
            }
        }
        for byte in chunk.invalid() {
            s.push_str(&format!("\\x{byte:02x}"));
        }
    }
    s
}

/// Reads a whole index file (they are small: 10 MiB at most by default).
fn read_all(file: &SegmentFile) -> CliResult<Vec<u8>> {
    let mut bytes = Vec::new();
    file.read_into(0, file.len as usize, &mut bytes)?;
    Ok(bytes)
}

/// Checks the tail of an index file after its last entry: zeros are unused preallocated
/// space, anything else is damage.
fn index_tail(
    file: &SegmentFile,
    bytes: &[u8],
    entry: usize,
    out: &mut Out,
    report: &mut Problems,
) -> CliResult<usize> {
    let whole = bytes.len() / entry * entry;
    if whole != bytes.len() {
        report.add(
            out,
            &file.path,
            whole as u64,
            &format!(
                "file length {} is not a multiple of the {entry}-byte entry size; {} trailing bytes ignored",
                bytes.len(),
                bytes.len() - whole
            ),
        )?;
    }
    Ok(whole)
}

/// Handles an all-zero entry at `at`: the end of the entries if only zeros follow.
/// Returns true when the dump of the index should stop.
fn zero_entry(
    file: &SegmentFile,
    bytes: &[u8],
    at: usize,
    out: &mut Out,
    report: &mut Problems,
) -> CliResult<bool> {
    if bytes[at..].iter().all(|&b| b == 0) {
        out.line(format_args!(
            "{} zero bytes from byte {at} to the end of the file (unused preallocated space)",
            bytes.len() - at
        ))?;
        return Ok(true);
    }
    report.add(
        out,
        &file.path,
        at as u64,
        "all-zero entry followed by more entries",
    )?;
    Ok(false)
}

fn dump_offset_index(file: &SegmentFile, out: &mut Out, report: &mut Problems) -> CliResult {
    let base = base_offset_of(&file.path);
    let bytes = read_all(file)?;
    let whole = index_tail(file, &bytes, OFFSET_ENTRY, out, report)?;
    let log = log_beside(file)?;
    if log.is_none() {
        out.line("(no .log beside this index: entries are not checked against it)")?;
    }
    let mut prev: Option<(u32, u32)> = None;
    let mut entries = 0u64;
    for at in (0..whole).step_by(OFFSET_ENTRY) {
        let e = &bytes[at..at + OFFSET_ENTRY];
        if e.iter().all(|&b| b == 0) {
            if zero_entry(file, &bytes[..whole], at, out, report)? {
                break;
            }
            continue;
        }
        let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let position = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        let offset = base.map_or(rel as i64, |b| b + rel as i64);
        out.line(format_args!("offset: {offset} position: {position}"))?;
        entries += 1;
        if let Some((p_rel, p_pos)) = prev
            && (rel <= p_rel || position <= p_pos)
        {
            report.add(
                out,
                &file.path,
                at as u64,
                &format!(
                    "entry (offset {offset}, position {position}) does not follow the previous one (relative offset {p_rel}, position {p_pos}) in increasing order"
                ),
            )?;
        }
        prev = Some((rel, position));
        if let (Some(log), Some(base)) = (&log, base)
            && let Some(reason) = check_against_log(log, base + rel as i64, position)?
        {
            report.add(out, &file.path, at as u64, &reason)?;
        }
    }
    out.line(format_args!("Summary: {entries} entries"))
}

/// The `.log` file of the same segment, if there is one.
fn log_beside(file: &SegmentFile) -> CliResult<Option<SegmentFile>> {
    let log = file.path.with_extension("log");
    if log.is_file() {
        SegmentFile::open(&log).map(Some)
    } else {
        Ok(None)
    }
}

/// Checks that an offset index entry points at a batch that starts with `offset`.
fn check_against_log(log: &SegmentFile, offset: i64, position: u32) -> CliResult<Option<String>> {
    let pos = position as u64;
    if pos + HEADER_LEN as u64 > log.len {
        return Ok(Some(format!(
            "entry for offset {offset} points at byte {pos}, past the end of {} ({} bytes)",
            log.path.display(),
            log.len
        )));
    }
    let mut head = [0u8; HEADER_LEN];
    log.read_at(pos, &mut head)?;
    let found = i64::from_be_bytes(head[..8].try_into().unwrap_or([0; 8]));
    if found != offset || head[16] != 2 {
        return Ok(Some(format!(
            "entry for offset {offset} points at byte {pos} of {}, where no batch starting at offset {offset} is (found base offset {found}, magic {})",
            log.path.display(),
            head[16] as i8
        )));
    }
    Ok(None)
}

fn dump_time_index(file: &SegmentFile, out: &mut Out, report: &mut Problems) -> CliResult {
    let base = base_offset_of(&file.path);
    let bytes = read_all(file)?;
    let whole = index_tail(file, &bytes, TIME_ENTRY, out, report)?;
    let mut prev: Option<(i64, u32)> = None;
    let mut entries = 0u64;
    for at in (0..whole).step_by(TIME_ENTRY) {
        let e = &bytes[at..at + TIME_ENTRY];
        if e.iter().all(|&b| b == 0) {
            if zero_entry(file, &bytes[..whole], at, out, report)? {
                break;
            }
            continue;
        }
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        let ts = i64::from_be_bytes(ts);
        let rel = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        let offset = base.map_or(rel as i64, |b| b + rel as i64);
        out.line(format_args!("timestamp: {ts} offset: {offset}"))?;
        entries += 1;
        if let Some((p_ts, p_rel)) = prev
            && (ts <= p_ts || rel < p_rel)
        {
            report.add(
                out,
                &file.path,
                at as u64,
                &format!(
                    "entry (timestamp {ts}, offset {offset}) does not follow the previous one (timestamp {p_ts}, relative offset {p_rel}) in increasing order"
                ),
            )?;
        }
        prev = Some((ts, rel));
    }
    out.line(format_args!("Summary: {entries} entries"))
}
