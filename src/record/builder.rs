//! Encoding records into one RecordBatch v2.

use super::Compression;
use super::batch::{ATTRIBUTES_POS, CRC_POS, HEADER_LEN, LOG_OVERHEAD};
use super::varint::{varint_len, varlong_len};

/// Builds one RecordBatch v2 from records, writing straight into one buffer.
///
/// The batch's `baseOffset` is 0 (the log stamps the real one on append) and its CRC-32C
/// is computed by [`BatchBuilder::finish`]. The builder is reusable after `finish`.
///
/// ```
/// use tidelog::{Batch, BatchBuilder};
///
/// let mut b = BatchBuilder::new();
/// b.push(1_700_000_000_000, Some(b"k"), Some(b"hello"), &[("trace", b"42")]);
/// b.push(1_700_000_000_005, None, Some(b"world"), &[]);
/// let bytes = b.finish();
/// let batch = Batch::parse(&bytes)?;
/// assert_eq!(batch.record_count(), 2);
/// let second = batch.records().nth(1).unwrap()?;
/// assert_eq!(second.value, Some(&b"world"[..]));
/// assert_eq!(second.timestamp, 1_700_000_000_005);
/// # Ok::<(), tidelog::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: i16,
    /// Offset delta of the last record pushed.
    last_offset_delta: i32,
    /// Codec the records section is compressed with when the batch is finished.
    compression: Compression,
    /// The compressed records section while the batch is finished (kept for reuse).
    packed: Vec<u8>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchBuilder {
    /// An empty builder (no producer id, CreateTime timestamps, no compression).
    pub fn new() -> Self {
        Self::with_capacity(1024)
    }

    /// An empty builder whose buffer starts with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(HEADER_LEN));
        buf.resize(HEADER_LEN, 0);
        BatchBuilder {
            buf,
            count: 0,
            base_timestamp: 0,
            max_timestamp: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            attributes: 0,
            last_offset_delta: -1,
            compression: Compression::None,
            packed: Vec::new(),
        }
    }

    /// Sets the idempotent producer id, epoch and base sequence of the batch.
    #[must_use]
    pub fn producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the batch attributes (timestamp type, transactional and control bits). The
    /// compression bits are ignored: [`BatchBuilder::compression`] sets the codec.
    #[must_use]
    pub fn attributes(mut self, attributes: i16) -> Self {
        self.attributes = attributes & !0x7;
        self
    }

    /// Compresses the records section with `codec` when the batch is finished (Kafka's
    /// `compression.type`). Default = [`Compression::None`].
    #[must_use]
    pub fn compression(mut self, codec: Compression) -> Self {
        self.compression = codec;
        self
    }

    /// The codec batches are finished with.
    pub fn codec(&self) -> Compression {
        self.compression
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size of the batch so far, header included, before any compression.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Encoded size a record would add to a batch (for batch-size limits).
    pub fn record_size(
        timestamp_delta: i64,
        offset_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, &[u8])],
    ) -> usize {
        let body = Self::body_len(timestamp_delta, offset_delta, key, value, headers);
        varint_len(body as i32) + body
    }

    fn body_len(
        ts_delta: i64,
        off_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, &[u8])],
    ) -> usize {
        let bytes_len = |b: Option<&[u8]>| match b {
            None => 1,
            Some(b) => varint_len(b.len() as i32) + b.len(),
        };
        let mut n = 1 + varlong_len(ts_delta) + varint_len(off_delta);
        n += bytes_len(key) + bytes_len(value) + varint_len(headers.len() as i32);
        for (k, v) in headers {
            n += bytes_len(Some(k.as_bytes())) + bytes_len(Some(v));
        }
        n
    }

    /// Appends one record. `timestamp_ms` is milliseconds since the Unix epoch.
    pub fn push(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, &[u8])],
    ) {
        let delta = self.last_offset_delta + 1;
        self.push_record(
            delta,
            timestamp_ms,
            key,
            value,
            headers.iter().map(|(k, v)| (*k, Some(*v))),
        );
    }

    /// Appends one record at an explicit offset delta (which must be greater than the
    /// previous one), with headers whose values may be null. Compaction uses this to
    /// rewrite batches with gaps while keeping every record's offset.
    pub fn push_record<'h>(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: impl Iterator<Item = (&'h str, Option<&'h [u8]>)> + Clone,
    ) {
        if self.count == 0 {
            self.base_timestamp = timestamp_ms;
        }
        let ts_delta = timestamp_ms.wrapping_sub(self.base_timestamp);
        let bytes_len = |b: Option<&[u8]>| match b {
            None => 1,
            Some(b) => varint_len(b.len() as i32) + b.len(),
        };
        let mut header_count = 0usize;
        let mut header_bytes = 0usize;
        for (k, v) in headers.clone() {
            header_count += 1;
            header_bytes += bytes_len(Some(k.as_bytes())) + bytes_len(v);
        }
        let body = 1
            + varlong_len(ts_delta)
            + varint_len(offset_delta)
            + bytes_len(key)
            + bytes_len(value)
            + varint_len(header_count as i32)
            + header_bytes;
        // The record is written into its final place in one pass: the buffer grows once
        // by the record's exact size, and each field goes to its position in that span.
        let len_bytes = varint_len(body as i32);
        let buf = &mut self.buf;
        let start = buf.len();
        buf.resize(start + len_bytes + body, 0);
        let mut w = SliceWriter {
            out: &mut buf[start..],
            at: 0,
        };
        w.varlong(body as i64);
        w.at += 1; // record attributes: unused, already 0
        w.varlong(ts_delta);
        w.varlong(offset_delta as i64);
        w.bytes(key);
        w.bytes(value);
        w.varlong(header_count as i64);
        for (k, v) in headers {
            w.bytes(Some(k.as_bytes()));
            w.bytes(v);
        }
        debug_assert_eq!(w.at, len_bytes + body);
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
    }

    /// Writes the header and CRC-32C and returns the finished batch; the builder is
    /// empty again afterwards (same producer settings, sequence advanced by the count).
    pub fn finish(&mut self) -> Vec<u8> {
        let cap = self.buf.capacity();
        let mut out = std::mem::replace(&mut self.buf, Vec::with_capacity(cap));
        self.seal(&mut out);
        self.reset();
        out
    }

    /// Like [`BatchBuilder::finish`] but appends the batch to `out`, keeping this
    /// builder's buffer for reuse (no allocation in steady state).
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        self.finish_with(|batch| out.extend_from_slice(batch));
    }

    /// Writes the header and CRC-32C in place and hands the finished batch to `f`
    /// without copying it (e.g. straight to [`crate::storage::PartitionLog::append`]); the
    /// builder is empty again afterwards and keeps its buffer.
    ///
    /// ```
    /// use tidelog::BatchBuilder;
    ///
    /// let mut b = BatchBuilder::new();
    /// b.push(1, None, Some(b"v"), &[]);
    /// let len = b.finish_with(|batch| batch.len());
    /// assert_eq!(len, 61 + 8); // header + one 8-byte record
    /// assert!(b.is_empty());
    /// ```
    pub fn finish_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut buf = std::mem::take(&mut self.buf);
        self.seal(&mut buf);
        let r = f(&buf);
        self.buf = buf;
        self.reset();
        r
    }

    fn reset(&mut self) {
        if self.base_sequence >= 0 {
            self.base_sequence = self.base_sequence.wrapping_add(self.count) & i32::MAX;
        }
        self.last_offset_delta = -1;
        self.buf.clear();
        self.buf.resize(HEADER_LEN, 0);
        self.count = 0;
        self.max_timestamp = -1;
    }

    /// Compresses the records section of `buf` if a codec is set, then writes the header.
    fn seal(&mut self, buf: &mut Vec<u8>) {
        let mut attributes = self.attributes;
        if self.compression != Compression::None && self.count > 0 {
            self.packed.clear();
            self.compression
                .compress(&buf[HEADER_LEN..], &mut self.packed);
            buf.truncate(HEADER_LEN);
            buf.extend_from_slice(&self.packed);
            attributes |= i16::from(self.compression.id());
        }
        self.write_header(buf, attributes);
    }

    fn write_header(&self, out: &mut [u8], attributes: i16) {
        let len = (out.len() - LOG_OVERHEAD) as i32;
        out[0..8].copy_from_slice(&0i64.to_be_bytes());
        out[8..12].copy_from_slice(&len.to_be_bytes());
        out[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        out[16] = 2; // magic
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        out[23..27].copy_from_slice(&self.last_offset_delta.max(0).to_be_bytes());
        out[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        out[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        out[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        out[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        out[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        out[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = super::crc32c(&out[ATTRIBUTES_POS..]);
        out[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Writes varint-framed fields into a slice sized for them exactly.
struct SliceWriter<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl SliceWriter<'_> {
    #[inline(always)]
    fn varlong(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.out[self.at] = (z as u8) | 0x80;
            self.at += 1;
            z >>= 7;
        }
        self.out[self.at] = z as u8;
        self.at += 1;
    }

    #[inline(always)]
    fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.varlong(-1),
            Some(b) => {
                self.varlong(b.len() as i64);
                self.out[self.at..self.at + b.len()].copy_from_slice(b);
                self.at += b.len();
            }
        }
    }
}

impl super::Batch<'_> {
    /// This batch rewritten with `codec`: the same records (offset deltas, timestamps,
    /// keys, values, headers), producer id, epoch, base sequence and attributes, the
    /// records section compressed with `codec` (or not at all for
    /// [`Compression::None`]). The base offset is kept; the leader epoch is reset to -1.
    /// What a broker does for a topic whose `compression.type` differs from the
    /// producer's codec. Decompression is bounded by `max_bytes`; errors name
    /// `location` and the batch.
    ///
    /// ```
    /// use tidelog::{Batch, BatchBuilder, Compression};
    ///
    /// let mut b = BatchBuilder::new().compression(Compression::Snappy);
    /// b.push(1, None, Some(b"v"), &[]);
    /// let snappy = b.finish();
    /// let zstd = Batch::parse(&snappy)?.recompress(Compression::Zstd, "t-0", 1 << 20)?;
    /// assert_eq!(Batch::parse(&zstd)?.codec()?, Compression::Zstd);
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn recompress(
        &self,
        codec: Compression,
        location: &str,
        max_bytes: usize,
    ) -> crate::error::Result<Vec<u8>> {
        let mut scratch = Vec::new();
        let records = self.decode_records(location, max_bytes, &mut scratch)?;
        let mut builder = BatchBuilder::with_capacity(self.len())
            .producer(
                self.producer_id(),
                self.producer_epoch(),
                self.base_sequence(),
            )
            .attributes(self.attributes())
            .compression(codec);
        let base = self.base_offset();
        for r in records {
            let r = r?;
            builder.push_record(
                r.offset.wrapping_sub(base) as i32,
                r.timestamp,
                r.key,
                r.value,
                r.headers.iter(),
            );
        }
        let mut out = builder.finish();
        super::set_base_offset(&mut out, base);
        Ok(out)
    }
}

/// `batches` with every batch whose codec is not `codec` rewritten in it
/// ([`Batch::recompress`](super::Batch::recompress)); `None` when every batch already
/// has it, so they are stored as sent. The batches were CRC-checked when they were
/// validated (a new CRC must not hide damage); errors name `location`. Decompression is
/// bounded by `max_bytes`.
pub(crate) fn recompress_batches(
    batches: &super::ValidBatches<'_>,
    codec: Compression,
    location: &str,
    max_bytes: usize,
) -> crate::error::Result<Option<Vec<u8>>> {
    let all = batches.as_bytes();
    let mut rewritten: Option<Vec<u8>> = None;
    let mut pos = 0usize;
    // The batches' CRCs were checked when they were validated: not again here.
    for batch in batches.iter() {
        if batch.codec()? == codec {
            if let Some(out) = &mut rewritten {
                out.extend_from_slice(batch.as_bytes());
            }
        } else {
            let again = batch.recompress(codec, location, max_bytes)?;
            rewritten
                .get_or_insert_with(|| all[..pos].to_vec())
                .extend_from_slice(&again);
        }
        pos += batch.len();
    }
    Ok(rewritten)
}
