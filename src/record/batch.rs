//! Decoding of Kafka RecordBatch v2, zero-copy.
//!
//! Layout (all big-endian), byte offsets from the start of the batch:
//!
//! | bytes  | field                                   |
//! |--------|-----------------------------------------|
//! | 0..8   | baseOffset (i64)                        |
//! | 8..12  | batchLength (i32): bytes after this field |
//! | 12..16 | partitionLeaderEpoch (i32)              |
//! | 16     | magic (i8) = 2                          |
//! | 17..21 | crc (u32, CRC-32C of bytes 21..end)     |
//! | 21..23 | attributes (i16)                        |
//! | 23..27 | lastOffsetDelta (i32)                   |
//! | 27..35 | baseTimestamp (i64)                     |
//! | 35..43 | maxTimestamp (i64)                      |
//! | 43..51 | producerId (i64)                        |
//! | 51..53 | producerEpoch (i16)                     |
//! | 53..57 | baseSequence (i32)                      |
//! | 57..61 | records count (i32)                     |
//! | 61..   | records                                 |
//!
//! `baseOffset` and `partitionLeaderEpoch` lie outside the CRC, so the broker can stamp
//! them in place without recomputing it.

use super::Compression;
use super::varint::{Cursor, get_varint, get_varlong};
use crate::error::{Error, Result};

/// Size of the fixed RecordBatch v2 header.
pub const HEADER_LEN: usize = 61;
/// Bytes of `baseOffset` + `batchLength`: the part of the header outside `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// Position of the CRC field.
pub(crate) const CRC_POS: usize = 17;
/// First byte covered by the CRC.
pub(crate) const ATTRIBUTES_POS: usize = 21;
const MAGIC_POS: usize = 16;
const MAX_TIMESTAMP_POS: usize = 35;
const PRODUCER_ID_POS: usize = 43;

/// Attribute bit: the batch's timestamps are LogAppendTime.
pub const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
/// Attribute bit: the batch is part of a transaction.
pub const TRANSACTIONAL_BIT: i16 = 1 << 4;
/// Attribute bit: the batch is a control batch (transaction markers).
pub const CONTROL_BIT: i16 = 1 << 5;

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The header fields that place a batch in a log, read from its first [`HEADER_LEN`]
/// bytes alone (for walking a log's batches without the batches at hand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHead {
    pub(crate) base_offset: i64,
    /// Size of the whole batch in bytes.
    pub(crate) len: usize,
    pub(crate) last_offset: i64,
    pub(crate) max_timestamp: i64,
}

impl BatchHead {
    /// Reads the header at the start of `bytes`; `None` if fewer than [`HEADER_LEN`]
    /// bytes are given, the declared length is below a header's, the magic is not 2 or
    /// the last offset overflows (the checks of [`Batch::parse_header_at`] that need no
    /// more than the header).
    #[inline]
    pub(crate) fn parse(bytes: &[u8]) -> Option<BatchHead> {
        if bytes.len() < HEADER_LEN || bytes[MAGIC_POS] != 2 {
            return None;
        }
        let len = be_i32(bytes, 8);
        let delta = be_i32(bytes, 23);
        if len < (HEADER_LEN - LOG_OVERHEAD) as i32 || delta < 0 {
            return None;
        }
        let base_offset = be_i64(bytes, 0);
        Some(BatchHead {
            base_offset,
            len: len as usize + LOG_OVERHEAD,
            last_offset: base_offset.checked_add(delta as i64)?,
            max_timestamp: be_i64(bytes, MAX_TIMESTAMP_POS),
        })
    }
}

/// Total size of the batch that starts at `bytes`, read from its `batchLength` field,
/// or `None` when fewer than 12 bytes are given or the length is not positive.
#[inline]
pub fn batch_size(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < LOG_OVERHEAD {
        return None;
    }
    let len = be_i32(bytes, 8);
    if len <= 0 {
        return None;
    }
    Some(len as usize + LOG_OVERHEAD)
}

/// Overwrites the `baseOffset` field of the batch at the start of `buf`.
#[inline]
pub fn set_base_offset(buf: &mut [u8], offset: i64) {
    buf[0..8].copy_from_slice(&offset.to_be_bytes());
}

/// Overwrites the `partitionLeaderEpoch` field of the batch at the start of `buf`.
#[inline]
pub fn set_partition_leader_epoch(buf: &mut [u8], epoch: i32) {
    buf[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// Sets the idempotent producer id, epoch and base sequence of the batch at the start of
/// `buf` and recomputes the CRC (they are covered by it): what a network producer does
/// when it sends a batch, so that a batch is numbered in the order batches leave.
pub fn set_producer(buf: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    let at = PRODUCER_ID_POS;
    buf[at..at + 8].copy_from_slice(&producer_id.to_be_bytes());
    buf[at + 8..at + 10].copy_from_slice(&epoch.to_be_bytes());
    buf[at + 10..at + 14].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = super::crc32c(&buf[ATTRIBUTES_POS..]);
    buf[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Marks the batch as LogAppendTime with `timestamp` as its max timestamp and recomputes
/// the CRC (both fields are covered by it), as Kafka does for `LogAppendTime` topics.
pub fn set_log_append_time(buf: &mut [u8], timestamp: i64) {
    let attrs = be_i16(buf, ATTRIBUTES_POS) | TIMESTAMP_TYPE_BIT;
    buf[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attrs.to_be_bytes());
    buf[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = super::crc32c(&buf[ATTRIBUTES_POS..]);
    buf[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
thread_local! {
    /// The CRC-32C checks of batches this thread made: tests count the checks of a path.
    pub(crate) static CRC_CHECKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// One RecordBatch v2, borrowed from the bytes it was parsed from.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    bytes: &'a [u8],
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("records", &self.record_count())
            .field("bytes", &self.len())
            .finish()
    }
}

impl<'a> Batch<'a> {
    /// Parses and validates exactly one batch (length, magic, CRC) from `bytes`, which
    /// must hold the whole batch and nothing else. Errors name the location "input".
    pub fn parse(bytes: &'a [u8]) -> Result<Batch<'a>> {
        let b = Self::parse_at(bytes, "input", 0)?;
        if b.len() != bytes.len() {
            return Err(Error::corrupt(
                "input",
                b.len() as u64,
                format!(
                    "{} bytes follow the batch's declared end",
                    bytes.len() - b.len()
                ),
            ));
        }
        Ok(b)
    }

    /// Parses and validates the batch at the start of `bytes` (which may hold more after
    /// it). `location` and `position` name where the bytes came from, for errors.
    pub fn parse_at(bytes: &'a [u8], location: &str, position: u64) -> Result<Batch<'a>> {
        let b = Self::parse_header_at(bytes, location, position)?;
        #[cfg(test)]
        CRC_CHECKS.with(|n| n.set(n.get() + 1));
        let stored = be_i32(b.bytes, CRC_POS) as u32;
        let computed = super::crc32c(&b.bytes[ATTRIBUTES_POS..]);
        if stored != computed {
            return Err(Error::corrupt(
                location,
                position,
                format!("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            ));
        }
        Ok(b)
    }

    /// Like [`Batch::parse_at`] but without the CRC check: for walking the headers of
    /// batches already validated (index lookups, trusted segments).
    pub fn parse_header_at(bytes: &'a [u8], location: &str, position: u64) -> Result<Batch<'a>> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::corrupt(
                location,
                position,
                format!(
                    "truncated batch header: {} bytes, need {HEADER_LEN}",
                    bytes.len()
                ),
            ));
        }
        let len = be_i32(bytes, 8);
        if len < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(Error::corrupt(
                location,
                position,
                format!("batch length {len} is smaller than a batch header"),
            ));
        }
        let size = len as usize + LOG_OVERHEAD;
        if size > bytes.len() {
            return Err(Error::corrupt(
                location,
                position,
                format!(
                    "torn batch: declares {size} bytes but only {} remain",
                    bytes.len()
                ),
            ));
        }
        let magic = bytes[MAGIC_POS] as i8;
        if magic != 2 {
            return Err(Error::corrupt(
                location,
                position,
                format!("unsupported magic byte {magic} (only RecordBatch v2 is supported)"),
            ));
        }
        let b = Batch {
            bytes: &bytes[..size],
        };
        if b.base_offset()
            .checked_add(b.last_offset_delta() as i64)
            .is_none()
        {
            return Err(Error::corrupt(
                location,
                position,
                format!(
                    "baseOffset {} + lastOffsetDelta {} overflows an i64",
                    b.base_offset(),
                    b.last_offset_delta()
                ),
            ));
        }
        if b.record_count() < 0 || b.last_offset_delta() < 0 {
            return Err(Error::corrupt(
                location,
                position,
                format!(
                    "negative record count {} or last offset delta {}",
                    b.record_count(),
                    b.last_offset_delta()
                ),
            ));
        }
        Ok(b)
    }

    /// The one batch a [`BatchBuilder`](super::BatchBuilder) has just sealed in `bytes`:
    /// tidelog wrote its header and CRC itself, so only the length it wrote is compared
    /// with the bytes (a batch past 2 GiB does not fit its 32-bit length); anything else
    /// is parsed as [`Batch::parse_header_at`] does, for its error.
    #[inline]
    pub(crate) fn sealed(bytes: &'a [u8], location: &str) -> Result<Batch<'a>> {
        if bytes.len() >= HEADER_LEN
            && be_i32(bytes, 8) as i64 == (bytes.len() - LOG_OVERHEAD) as i64
        {
            debug_assert!(Self::parse_header_at(bytes, location, 0).is_ok());
            return Ok(Batch { bytes });
        }
        Self::sealed_wrongly(bytes, location)
    }

    /// [`Batch::sealed`] of bytes whose header does not declare their length: the error.
    #[cold]
    #[inline(never)]
    fn sealed_wrongly(bytes: &'a [u8], location: &str) -> Result<Batch<'a>> {
        let b = Self::parse_header_at(bytes, location, 0)?;
        if b.len() != bytes.len() {
            return Err(Error::corrupt(
                location,
                0,
                format!(
                    "a batch of {} bytes declares {} (a batch holds at most 2 GiB)",
                    bytes.len(),
                    b.len()
                ),
            ));
        }
        Ok(b)
    }

    /// The header fields that place the batch in a log.
    #[inline]
    pub(crate) fn head(&self) -> BatchHead {
        BatchHead {
            base_offset: self.base_offset(),
            len: self.len(),
            last_offset: self.last_offset(),
            max_timestamp: self.max_timestamp(),
        }
    }

    /// The batch's bytes, header included.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Size of the batch in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    /// Always false: a batch has at least its header.
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Offset of the first record.
    #[inline]
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, 0)
    }
    /// `lastOffsetDelta`: last record's offset minus the base offset.
    #[inline]
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, 23)
    }
    /// Offset of the last record.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + self.last_offset_delta() as i64
    }
    /// The leader epoch stamped by the broker.
    #[inline]
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, 12)
    }
    /// The CRC-32C stored in the batch.
    #[inline]
    pub fn crc(&self) -> u32 {
        be_i32(self.bytes, CRC_POS) as u32
    }
    /// The attributes field.
    #[inline]
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_POS)
    }
    /// Compression codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    #[inline]
    pub fn compression(&self) -> u8 {
        (self.attributes() & 0x7) as u8
    }
    /// True when the batch's timestamps are LogAppendTime.
    #[inline]
    pub fn timestamp_type_log_append(&self) -> bool {
        self.attributes() & TIMESTAMP_TYPE_BIT != 0
    }
    /// True for transactional batches.
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    /// True for control batches.
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    /// Timestamp of the first record (record timestamps are deltas from it).
    #[inline]
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, 27)
    }
    /// Largest record timestamp (or the log append time).
    #[inline]
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_POS)
    }
    /// Idempotent producer id, -1 if none.
    #[inline]
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, 43)
    }
    /// Idempotent producer epoch.
    #[inline]
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, 51)
    }
    /// Sequence number of the first record, -1 if none.
    #[inline]
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, 53)
    }
    /// Number of records in the batch.
    #[inline]
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, 57)
    }

    /// The codec of the batch; [`Error::Corrupt`] for the attribute values 5-7, which
    /// Kafka does not define.
    pub fn codec(&self) -> Result<Compression> {
        Compression::from_id(self.compression()).ok_or_else(|| {
            Error::corrupt(
                format!("batch at offset {}", self.base_offset()),
                ATTRIBUTES_POS as u64,
                format!("unknown compression codec id {}", self.compression()),
            )
        })
    }

    /// The records section as stored: everything after the 61-byte header (a
    /// compressed stream for compressed batches).
    #[inline]
    pub fn records_bytes(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..]
    }

    /// The records, decoded lazily and zero-copy. The records of a compressed batch are
    /// not in its bytes: they yield one error; use [`Batch::decode_records`].
    pub fn records(&self) -> Records<'a> {
        Records {
            rest: self.records_bytes(),
            remaining: self.record_count(),
            base_offset: self.base_offset(),
            base_timestamp: self.base_timestamp(),
            log_append_time: self
                .timestamp_type_log_append()
                .then(|| self.max_timestamp()),
            compression: self.compression(),
            position: HEADER_LEN,
        }
    }

    /// Decompresses the records section of a compressed batch onto the end of `out`,
    /// producing at most `max_bytes` (see [`decompression_limit`]). Errors are
    /// [`Error::Corrupt`] located at `location` (a partition, a file) and this batch's
    /// offset, at the byte of the batch where the stream went wrong. An uncompressed
    /// batch's records section is copied as is.
    ///
    /// [`decompression_limit`]: super::decompression_limit
    pub fn decompress_into(
        &self,
        location: &str,
        max_bytes: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let codec = self.codec()?;
        codec
            .decompress(self.records_bytes(), max_bytes, out)
            .map_err(|e| match e {
                Error::Corrupt {
                    position, reason, ..
                } => Error::corrupt(
                    format!("{location} (batch at offset {})", self.base_offset()),
                    HEADER_LEN as u64 + position,
                    reason,
                ),
                other => other,
            })
    }

    /// The records of `records`, the decompressed records section of this batch (from
    /// [`Batch::decompress_into`]), decoded lazily with this batch's offsets and
    /// timestamps. Positions in errors are byte positions in `records`.
    pub fn records_in<'b>(&self, records: &'b [u8]) -> Records<'b> {
        Records {
            rest: records,
            remaining: self.record_count(),
            base_offset: self.base_offset(),
            base_timestamp: self.base_timestamp(),
            log_append_time: self
                .timestamp_type_log_append()
                .then(|| self.max_timestamp()),
            compression: 0,
            position: 0,
        }
    }

    /// The records of the batch whatever its codec: zero-copy for an uncompressed batch,
    /// decompressed into `scratch` (cleared first; at most `max_bytes`) for a compressed
    /// one. `location` names the partition or file for errors.
    ///
    /// ```
    /// use tidelog::record::Compression;
    /// use tidelog::{Batch, BatchBuilder};
    ///
    /// let mut b = BatchBuilder::new().compression(Compression::Gzip);
    /// b.push(1, Some(b"k"), Some(b"compressed"), &[]);
    /// let bytes = b.finish();
    /// let batch = Batch::parse(&bytes)?;
    /// assert_eq!(batch.compression(), 1);
    /// let mut scratch = Vec::new();
    /// let record = batch.decode_records("events-0", 1 << 20, &mut scratch)?.next().unwrap()?;
    /// assert_eq!(record.value, Some(&b"compressed"[..]));
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn decode_records<'b>(
        &self,
        location: &str,
        max_bytes: usize,
        scratch: &'b mut Vec<u8>,
    ) -> Result<Records<'b>>
    where
        'a: 'b,
    {
        if self.compression() == 0 {
            return Ok(self.records());
        }
        scratch.clear();
        self.decompress_into(location, max_bytes, scratch)?;
        Ok(self.records_in(scratch))
    }
}

/// One record of a batch, borrowing its key, value and headers from the batch bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's offset in its partition.
    pub offset: i64,
    /// Milliseconds since the epoch (CreateTime, or LogAppendTime for such topics).
    pub timestamp: i64,
    /// The key, `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// The value, `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// The record's headers.
    pub headers: Headers<'a>,
}

/// Iterator over the records of a batch.
pub struct Records<'a> {
    rest: &'a [u8],
    remaining: i32,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    compression: u8,
    position: usize,
}

fn bad(position: usize, what: &str) -> Error {
    Error::InvalidBatch(format!(
        "malformed record at byte {position} of batch: {what}"
    ))
}

/// Reads a varint-length-prefixed byte string; -1 is null.
fn get_bytes<'a>(
    buf: &'a [u8],
    at: &mut usize,
    pos: usize,
    what: &str,
) -> Result<Option<&'a [u8]>> {
    let (len, n) = get_varint(&buf[*at..]).ok_or_else(|| bad(pos, what))?;
    *at += n;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    let end = at
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or_else(|| bad(pos, what))?;
    let s = &buf[*at..end];
    *at = end;
    Ok(Some(s))
}

/// One record's fields, decoded from the front of `rest` without building errors:
/// `(bytes used, timestamp delta, offset delta, key, value, header count, headers)`.
type RawRecord<'a> = (
    usize,
    i64,
    i32,
    Option<&'a [u8]>,
    Option<&'a [u8]>,
    usize,
    &'a [u8],
);

#[inline(always)]
fn decode_fast(rest: &[u8]) -> Option<RawRecord<'_>> {
    let mut c = Cursor::new(rest);
    let len = usize::try_from(c.varint()?).ok()?;
    let start = c.position();
    let end = start + len; // len <= i32::MAX, start <= 5
    let body = rest.get(start..end)?;
    let mut c = Cursor::new(body);
    c.skip(1)?; // attributes byte (unused)
    let ts_delta = c.varlong()?;
    let off_delta = c.varint()?;
    let key = c.bytes()?;
    let value = c.bytes()?;
    let count = usize::try_from(c.varint()?).ok()?;
    let headers_start = c.position();
    for _ in 0..count {
        std::str::from_utf8(c.bytes()??).ok()?;
        c.bytes()?;
    }
    c.at_end().then_some((
        end,
        ts_delta,
        off_delta,
        key,
        value,
        count,
        &body[headers_start..],
    ))
}

impl<'a> Records<'a> {
    /// The error for the records of a compressed batch read without decompressing them.
    #[cold]
    fn compressed(&self) -> Error {
        let codec = Compression::from_id(self.compression).map_or("unknown", Compression::name);
        Error::InvalidBatch(format!(
            "the records of the batch at offset {} are compressed ({codec}): decompress them with Batch::decode_records",
            self.base_offset
        ))
    }

    /// Says what is wrong with the record at the front of `rest` (the slow path, taken
    /// only after the fast decoder refused it).
    #[cold]
    fn explain(&self) -> Error {
        let pos = self.position;
        let check = || -> Result<()> {
            let (len, n) = get_varint(self.rest).ok_or_else(|| bad(pos, "bad length"))?;
            if len < 0 || (len as usize) > self.rest.len() - n {
                return Err(bad(pos, "length runs past the batch end"));
            }
            let body = &self.rest[n..n + len as usize];
            if body.is_empty() {
                return Err(bad(pos, "empty record"));
            }
            let mut at = 1;
            let (_, k) = get_varlong(&body[at..]).ok_or_else(|| bad(pos, "bad timestamp delta"))?;
            at += k;
            let (_, k) = get_varint(&body[at..]).ok_or_else(|| bad(pos, "bad offset delta"))?;
            at += k;
            get_bytes(body, &mut at, pos, "bad key")?;
            get_bytes(body, &mut at, pos, "bad value")?;
            let (count, k) = get_varint(&body[at..]).ok_or_else(|| bad(pos, "bad header count"))?;
            at += k;
            if count < 0 {
                return Err(bad(pos, "negative header count"));
            }
            for _ in 0..count {
                get_bytes(body, &mut at, pos, "bad header key")?
                    .ok_or_else(|| bad(pos, "null header key"))
                    .and_then(|k| {
                        std::str::from_utf8(k).map_err(|_| bad(pos, "header key is not UTF-8"))
                    })?;
                get_bytes(body, &mut at, pos, "bad header value")?;
            }
            Err(bad(pos, "record length does not match its fields"))
        };
        check()
            .err()
            .unwrap_or_else(|| bad(pos, "malformed record"))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining <= 0 {
            return None;
        }
        if self.compression != 0 {
            self.remaining = 0;
            return Some(Err(self.compressed()));
        }
        let Some((used, ts_delta, off_delta, key, value, count, headers)) = decode_fast(self.rest)
        else {
            self.remaining = 0;
            return Some(Err(self.explain()));
        };
        self.remaining -= 1;
        self.rest = &self.rest[used..];
        self.position += used;
        Some(Ok(Record {
            // Malformed deltas must not overflow (the batch's own range cannot).
            offset: self.base_offset.wrapping_add(off_delta as i64),
            timestamp: self
                .log_append_time
                .unwrap_or(self.base_timestamp.wrapping_add(ts_delta)),
            key,
            value,
            headers: Headers {
                bytes: headers,
                count,
            },
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining.max(0) as usize;
        (0, Some(n))
    }
}

/// The headers of one record: `(key, value)` pairs, borrowed and validated lazily.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl std::fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> Headers<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }
    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The `(key, value)` pairs in order. They were validated when the record was
    /// decoded, so this never fails.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, Option<&'a [u8]>)> + Clone + 'a {
        let bytes = self.bytes;
        let mut at = 0;
        (0..self.count).map_while(move |_| {
            let k = get_bytes(bytes, &mut at, 0, "").ok()??;
            let v = get_bytes(bytes, &mut at, 0, "").ok()?;
            Some((std::str::from_utf8(k).ok()?, v))
        })
    }
}

/// Iterator over consecutive batches in a run of bytes (a segment or a fetch response),
/// validating each one's length, magic and CRC.
pub struct BatchIter<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Source of the bytes for error messages; `None` is "input" (no allocation on the
    /// append path).
    location: Option<String>,
    failed: bool,
}

/// Iterates the batches laid back to back in `bytes`.
pub fn batches(bytes: &[u8]) -> BatchIter<'_> {
    BatchIter {
        bytes,
        at: 0,
        location: None,
        failed: false,
    }
}

impl<'a> BatchIter<'a> {
    /// Names the source of the bytes (a file path) for error messages.
    pub fn with_location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
    /// Byte position of the next batch.
    pub fn position(&self) -> usize {
        self.at
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<Batch<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.bytes.len() {
            return None;
        }
        let location = self.location.as_deref().unwrap_or("input");
        match Batch::parse_at(&self.bytes[self.at..], location, self.at as u64) {
            Ok(b) => {
                self.at += b.len();
                Some(Ok(b))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
