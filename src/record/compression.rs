//! The compression codecs of RecordBatch v2: Kafka's `compression.type`.
//!
//! A compressed batch keeps its 61-byte header as is and compresses the records section
//! that follows it, as one stream in the codec named by attributes bits 0-2. The framing
//! of each codec is the one Kafka's clients write and read:
//!
//! | id | codec  | stream                                                            |
//! |----|--------|-------------------------------------------------------------------|
//! | 1  | gzip   | RFC 1952 gzip members (deflate)                                   |
//! | 2  | snappy | snappy-java's framing (`\x82SNAPPY\0`, then length-prefixed raw snappy blocks), as the Java client writes; a raw snappy block (as librdkafka writes) is read too |
//! | 3  | lz4    | the LZ4 frame format (magic `0x184D2204`), independent or linked blocks |
//! | 4  | zstd   | zstd frames                                                       |
//!
//! Every codec is pure Rust (miniz_oxide, snap, lz4_flex, ruzstd): nothing here builds C.
//! The gzip container and the LZ4 frame are written here over the crates' raw codecs.
//!
//! Decompression never trusts the input: every size it reads is checked, a bad stream is
//! an [`Error::Corrupt`], never a panic, and the output is bounded by a limit the caller
//! gives ([`decompression_limit`] derives it from `max.message.bytes`), so a tiny batch
//! claiming gigabytes (a decompression bomb) is refused once it passes the limit instead
//! of exhausting memory.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How many times `max.message.bytes` the records of one compressed batch may take once
/// decompressed. Kafka bounds the compressed size of a batch by `max.message.bytes`;
/// real data compresses 2-10x, and a producer's batch may be filled up to `batch.size`
/// with compressed data, so 64x leaves room for any honest batch while refusing a bomb
/// (deflate reaches 1000x, zstd far more) after 64 MiB at the default limit.
pub const DECOMPRESSION_RATIO: usize = 64;

/// The most bytes the records of one batch may decompress to, for a log whose
/// `max.message.bytes` is `max_message_bytes`: [`DECOMPRESSION_RATIO`] times that, and at
/// least 1 MiB. 64 MiB with Kafka's default (1 MiB).
///
/// ```
/// assert_eq!(tidelog::record::decompression_limit(1 << 20), 64 << 20);
/// ```
pub fn decompression_limit(max_message_bytes: u32) -> usize {
    (max_message_bytes as usize)
        .saturating_mul(DECOMPRESSION_RATIO)
        .max(1 << 20)
}

/// A batch compression codec (Kafka's `compression.type` of a producer), the value of a
/// batch's attributes bits 0-2.
///
/// ```
/// use tidelog::record::Compression;
///
/// let codec: Compression = "zstd".parse()?;
/// let mut packed = Vec::new();
/// codec.compress(b"hello hello hello hello", &mut packed);
/// let mut unpacked = Vec::new();
/// codec.decompress(&packed, 1 << 20, &mut unpacked)?;
/// assert_eq!(unpacked, b"hello hello hello hello");
/// # Ok::<(), tidelog::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// No compression (`none`). The default.
    #[default]
    None,
    /// gzip (`gzip`), id 1.
    Gzip,
    /// snappy (`snappy`), id 2.
    Snappy,
    /// LZ4 frames (`lz4`), id 3.
    Lz4,
    /// zstd (`zstd`), id 4.
    Zstd,
}

impl Compression {
    /// Every codec, `None` first.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec with attribute id `id` (0-4); `None` for the ids Kafka does not define.
    pub fn from_id(id: u8) -> Option<Compression> {
        Compression::ALL.get(usize::from(id)).copied()
    }

    /// The attribute id of the codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Kafka's name of the codec: `none`, `gzip`, `snappy`, `lz4` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Compresses `input` and appends the stream to `out` (for [`Compression::None`],
    /// `input` itself). gzip uses deflate level 6 (Kafka's default), snappy 32 KiB
    /// blocks in snappy-java's framing, lz4 a frame of independent 64 KiB blocks (as
    /// Kafka's Java client writes), zstd ruzstd's fastest level (about zstd level 1).
    pub fn compress(self, input: &[u8], out: &mut Vec<u8>) {
        match self {
            Compression::None => out.extend_from_slice(input),
            Compression::Gzip => gzip_compress(input, out),
            Compression::Snappy => snappy_compress(input, out),
            Compression::Lz4 => lz4_compress(input, out),
            Compression::Zstd => out.extend_from_slice(&ruzstd::encoding::compress_to_vec(
                input,
                ruzstd::encoding::CompressionLevel::Fastest,
            )),
        }
    }

    /// Decompresses the whole of `input` and appends the result to `out`, refusing to
    /// produce more than `limit` bytes. A bad or truncated stream, trailing bytes, or
    /// output past `limit` is [`Error::Corrupt`] located in "input" at the byte of
    /// `input` where the problem was found (0 when the codec does not say).
    pub fn decompress(self, input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        let result = match self {
            Compression::None if input.len() > limit => Err(Fail::too_large(limit)),
            Compression::None => {
                out.extend_from_slice(input);
                Ok(())
            }
            Compression::Gzip => gzip_decompress(input, limit, out),
            Compression::Snappy => snappy_decompress(input, limit, out),
            Compression::Lz4 => lz4_decompress(input, limit, out),
            Compression::Zstd => zstd_decompress(input, limit, out),
        };
        result.map_err(|f| {
            out.truncate(start);
            Error::corrupt(
                "input",
                f.at as u64,
                format!("{}: {}", self.name(), f.reason),
            )
        })
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;

    /// Parses Kafka's names (`none`, `gzip`, `snappy`, `lz4`, `zstd`), ignoring case.
    fn from_str(s: &str) -> Result<Compression> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::InvalidConfig {
                key: "compression.type".into(),
                reason: format!("{s:?} is not one of none, gzip, snappy, lz4, zstd"),
            })
    }
}

/// Why a stream could not be decompressed, and where in it.
#[derive(Debug)]
struct Fail {
    at: usize,
    reason: String,
}

impl Fail {
    fn at(at: usize, reason: impl Into<String>) -> Fail {
        Fail {
            at,
            reason: reason.into(),
        }
    }

    fn too_large(limit: usize) -> Fail {
        Fail::at(
            0,
            format!(
                "decompresses to more than the limit of {limit} bytes ({DECOMPRESSION_RATIO} x max.message.bytes)"
            ),
        )
    }
}

type Decoded = std::result::Result<(), Fail>;

/// CRC-32 (IEEE, as gzip's trailer carries it).
fn crc32(bytes: &[u8]) -> u32 {
    // CRC-32/ISO-HDLC is the IEEE CRC-32 of gzip and zlib; the result fits in 32 bits.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, bytes) as u32
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

// ---- gzip (RFC 1952) over miniz_oxide's raw deflate ----

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

fn gzip_compress(input: &[u8], out: &mut Vec<u8>) {
    // ID1 ID2, CM = deflate, no flags, no mtime, XFL 0, OS = unknown.
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(input, 6));
    out.extend_from_slice(&crc32(input).to_le_bytes());
    out.extend_from_slice(&(input.len() as u32).to_le_bytes());
}

/// Length of the gzip member header at the start of `b`.
fn gzip_header_len(b: &[u8], at: usize) -> std::result::Result<usize, Fail> {
    let truncated = || Fail::at(at, "truncated gzip header");
    if b.len() < 10 {
        return Err(truncated());
    }
    if b[..2] != GZIP_MAGIC {
        return Err(Fail::at(at, "not a gzip stream (bad magic bytes)"));
    }
    if b[2] != 8 {
        return Err(Fail::at(at + 2, format!("unknown gzip method {}", b[2])));
    }
    let flags = b[3];
    if flags & 0xe0 != 0 {
        return Err(Fail::at(at + 3, "reserved gzip flag bits are set"));
    }
    let mut pos = 10;
    if flags & 0x04 != 0 {
        // FEXTRA: a little-endian length and that many bytes.
        let n = b.get(pos..pos + 2).ok_or_else(truncated)?;
        pos += 2 + usize::from(u16::from_le_bytes([n[0], n[1]]));
    }
    for flag in [0x08, 0x10] {
        // FNAME, FCOMMENT: zero-terminated.
        if flags & flag != 0 {
            let rest = b.get(pos..).ok_or_else(truncated)?;
            pos += rest.iter().position(|&c| c == 0).ok_or_else(truncated)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        pos += 2; // FHCRC
    }
    if pos > b.len() {
        return Err(truncated());
    }
    Ok(pos)
}

/// Inflates the raw deflate stream at the start of `input` onto `out`, producing at most
/// `room` bytes; returns how many input bytes the stream took.
fn inflate_raw(input: &[u8], at: usize, room: usize, out: &mut Vec<u8>) -> Result<usize, Fail> {
    use miniz_oxide::inflate::stream::{InflateState, inflate};
    use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
    const STEP: usize = 64 << 10;
    let mut state = InflateState::new_boxed(DataFormat::Raw);
    let mut consumed = 0;
    let mut produced = 0;
    loop {
        let base = out.len();
        // One byte past the limit tells a bomb apart from a stream that ends on it.
        let want = (room + 1 - produced).min(STEP);
        out.resize(base + want, 0);
        let r = inflate(
            &mut state,
            &input[consumed..],
            &mut out[base..],
            MZFlush::None,
        );
        out.truncate(base + r.bytes_written);
        consumed += r.bytes_consumed;
        produced += r.bytes_written;
        if produced > room {
            return Err(Fail::too_large(room));
        }
        match r.status {
            Ok(MZStatus::StreamEnd) => return Ok(consumed),
            Ok(_) | Err(MZError::Buf) if r.bytes_consumed > 0 || r.bytes_written > 0 => {}
            Ok(_) | Err(MZError::Buf) => {
                return Err(Fail::at(at + consumed, "truncated deflate stream"));
            }
            Err(e) => {
                return Err(Fail::at(
                    at + consumed,
                    format!("invalid deflate data ({e:?})"),
                ));
            }
        }
    }
}

fn gzip_decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Decoded {
    let start = out.len();
    let mut pos = 0;
    // A gzip stream is one or more members back to back.
    loop {
        pos += gzip_header_len(&input[pos..], pos)?;
        let member = out.len();
        let room = limit - (member - start);
        pos += inflate_raw(&input[pos..], pos, room, out)?;
        let (Some(crc), Some(size)) = (le_u32(input, pos), le_u32(input, pos + 4)) else {
            return Err(Fail::at(pos, "truncated gzip trailer"));
        };
        let data = &out[member..];
        if crc32(data) != crc {
            return Err(Fail::at(pos, "gzip CRC-32 mismatch"));
        }
        if data.len() as u32 != size {
            return Err(Fail::at(
                pos + 4,
                format!(
                    "gzip size {size} does not match the {} bytes inflated",
                    data.len()
                ),
            ));
        }
        pos += 8;
        if pos == input.len() {
            return Ok(());
        }
    }
}

// ---- snappy: snappy-java framing (Kafka's Java client) or one raw block ----

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const SNAPPY_BLOCK: usize = 32 << 10;

fn snappy_compress(input: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1u32.to_be_bytes()); // version
    out.extend_from_slice(&1u32.to_be_bytes()); // lowest compatible version
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(SNAPPY_BLOCK) {
        let at = out.len();
        out.resize(at + 4 + snap::raw::max_compress_len(chunk.len()), 0);
        let n = encoder
            .compress(chunk, &mut out[at + 4..])
            .expect("the buffer has max_compress_len bytes for a block under 4 GiB");
        out[at..at + 4].copy_from_slice(&(n as u32).to_be_bytes());
        out.truncate(at + 4 + n);
    }
}

/// Decompresses one raw snappy block onto `out`, within `room` bytes.
fn snappy_block(block: &[u8], at: usize, room: usize, out: &mut Vec<u8>) -> Decoded {
    let n = snap::raw::decompress_len(block)
        .map_err(|e| Fail::at(at, format!("bad snappy block: {e}")))?;
    if n > room {
        return Err(Fail::too_large(room));
    }
    let base = out.len();
    out.resize(base + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[base..])
        .map_err(|e| Fail::at(at, format!("bad snappy block: {e}")))?;
    out.truncate(base + written);
    Ok(())
}

fn snappy_decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Decoded {
    if !input.starts_with(&XERIAL_MAGIC) {
        return snappy_block(input, 0, limit, out);
    }
    if input.len() < XERIAL_HEADER_LEN {
        return Err(Fail::at(0, "truncated snappy-java header"));
    }
    let start = out.len();
    let mut pos = XERIAL_HEADER_LEN;
    while pos < input.len() {
        let len = be_u32(input, pos).ok_or_else(|| Fail::at(pos, "truncated block length"))?;
        let block = input
            .get(pos + 4..)
            .and_then(|b| b.get(..len as usize))
            .ok_or_else(|| Fail::at(pos, format!("block of {len} bytes runs past the end")))?;
        snappy_block(block, pos + 4, limit - (out.len() - start), out)?;
        pos += 4 + block.len();
    }
    Ok(())
}

// ---- LZ4 frame format over lz4_flex's block codec ----

const LZ4_MAGIC: u32 = 0x184D_2204;
const LZ4_BLOCK: usize = 64 << 10;
/// Blocks of a linked frame may refer to this much earlier output.
const LZ4_WINDOW: usize = 64 << 10;

/// xxHash32 of `input` with `seed`: the LZ4 frame's header and content checksums.
pub(crate) fn xxh32(input: &[u8], seed: u32) -> u32 {
    const P1: u32 = 2_654_435_761;
    const P2: u32 = 2_246_822_519;
    const P3: u32 = 3_266_489_917;
    const P4: u32 = 668_265_263;
    const P5: u32 = 374_761_393;
    let lane = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let round = |acc: u32, v: u32| {
        acc.wrapping_add(v.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let mut rest = input;
    let mut h = if input.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 16 {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, lane(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(input.len() as u32);
    while rest.len() >= 4 {
        h = h
            .wrapping_add(lane(rest).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
        rest = &rest[4..];
    }
    for &b in rest {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}

fn lz4_compress(input: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
    // FLG: version 01, independent blocks, no checksums, no content size. BD: 64 KiB.
    let descriptor = [0x60, 0x40];
    out.extend_from_slice(&descriptor);
    out.push((xxh32(&descriptor, 0) >> 8) as u8);
    for chunk in input.chunks(LZ4_BLOCK) {
        let at = out.len();
        out.resize(
            at + 4 + lz4_flex::block::get_maximum_output_size(chunk.len()),
            0,
        );
        let n = lz4_flex::block::compress_into(chunk, &mut out[at + 4..])
            .expect("the buffer has get_maximum_output_size bytes");
        if n < chunk.len() {
            out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
            out.truncate(at + 4 + n);
        } else {
            // Incompressible: stored as is, flagged by the size's high bit.
            out.truncate(at);
            out.extend_from_slice(&(chunk.len() as u32 | 0x8000_0000).to_le_bytes());
            out.extend_from_slice(chunk);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes()); // EndMark
}

fn lz4_decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Decoded {
    let start = out.len();
    let mut pos = 0;
    while pos < input.len() {
        let magic = le_u32(input, pos).ok_or_else(|| Fail::at(pos, "truncated frame magic"))?;
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            // A skippable frame: a length and that many bytes of user data.
            let len =
                le_u32(input, pos + 4).ok_or_else(|| Fail::at(pos, "truncated skippable frame"))?;
            pos = (pos + 8)
                .checked_add(len as usize)
                .filter(|&end| end <= input.len())
                .ok_or_else(|| Fail::at(pos, "skippable frame runs past the end"))?;
            continue;
        }
        if magic != LZ4_MAGIC {
            return Err(Fail::at(pos, format!("bad LZ4 frame magic {magic:#010x}")));
        }
        pos = lz4_frame(input, pos + 4, limit - (out.len() - start), out)?;
    }
    if pos == 0 {
        return Err(Fail::at(0, "empty LZ4 stream"));
    }
    Ok(())
}

/// Decodes one LZ4 frame whose descriptor starts at `pos`; returns the position after it.
fn lz4_frame(input: &[u8], mut pos: usize, room: usize, out: &mut Vec<u8>) -> Result<usize, Fail> {
    let truncated = |at: usize| Fail::at(at, "truncated LZ4 frame");
    let desc_start = pos;
    let (flg, bd) = match input.get(pos..pos + 2) {
        Some(d) => (d[0], d[1]),
        None => return Err(truncated(pos)),
    };
    if flg >> 6 != 1 {
        return Err(Fail::at(
            pos,
            format!("LZ4 frame version {} is not 1", flg >> 6),
        ));
    }
    if flg & 0x02 != 0 || bd & 0x8f != 0 {
        return Err(Fail::at(pos, "reserved LZ4 frame descriptor bits are set"));
    }
    if flg & 0x01 != 0 {
        return Err(Fail::at(
            pos,
            "LZ4 frames with a dictionary id are not supported",
        ));
    }
    let linked = flg & 0x20 == 0;
    let block_checksum = flg & 0x10 != 0;
    let content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let block_max = match (bd >> 4) & 0x7 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        other => {
            return Err(Fail::at(
                pos + 1,
                format!("bad LZ4 block maximum size id {other}"),
            ));
        }
    };
    pos += 2;
    let declared_size = if content_size {
        let b = input.get(pos..pos + 8).ok_or_else(|| truncated(pos))?;
        pos += 8;
        Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    } else {
        None
    };
    let hc = *input.get(pos).ok_or_else(|| truncated(pos))?;
    if hc != (xxh32(&input[desc_start..pos], 0) >> 8) as u8 {
        return Err(Fail::at(pos, "LZ4 frame header checksum mismatch"));
    }
    pos += 1;
    let frame_start = out.len();
    loop {
        let word = le_u32(input, pos).ok_or_else(|| truncated(pos))?;
        pos += 4;
        if word == 0 {
            break;
        }
        let stored = word & 0x8000_0000 != 0;
        let size = (word & 0x7FFF_FFFF) as usize;
        if size > block_max {
            return Err(Fail::at(
                pos - 4,
                format!("LZ4 block of {size} bytes exceeds the frame's {block_max}"),
            ));
        }
        let block = input.get(pos..pos + size).ok_or_else(|| truncated(pos))?;
        pos += size;
        if block_checksum {
            let sum = le_u32(input, pos).ok_or_else(|| truncated(pos))?;
            if sum != xxh32(block, 0) {
                return Err(Fail::at(pos, "LZ4 block checksum mismatch"));
            }
            pos += 4;
        }
        let base = out.len();
        if stored {
            out.extend_from_slice(block);
        } else {
            out.resize(base + block_max, 0);
            let (before, after) = out.split_at_mut(base);
            let dict = if linked {
                &before[base.saturating_sub(LZ4_WINDOW).max(frame_start)..]
            } else {
                &[][..]
            };
            let n = lz4_flex::block::decompress_into_with_dict(block, after, dict)
                .map_err(|e| Fail::at(pos - size, format!("bad LZ4 block: {e}")))?;
            out.truncate(base + n);
        }
        if out.len() - frame_start > room {
            return Err(Fail::too_large(room));
        }
    }
    let content = &out[frame_start..];
    if content_checksum {
        let sum = le_u32(input, pos).ok_or_else(|| truncated(pos))?;
        if sum != xxh32(content, 0) {
            return Err(Fail::at(pos, "LZ4 content checksum mismatch"));
        }
        pos += 4;
    }
    if let Some(n) = declared_size
        && n != content.len() as u64
    {
        return Err(Fail::at(
            desc_start + 2,
            format!("LZ4 frame declares {n} bytes but holds {}", content.len()),
        ));
    }
    Ok(pos)
}

// ---- zstd (ruzstd) ----

fn zstd_decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Decoded {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    use std::io::Read;
    let start = out.len();
    let mut rest = input;
    let at = |rest: &[u8]| input.len() - rest.len();
    let mut decoder = FrameDecoder::new();
    // The window is memory the decoder holds; no honest batch needs more than the limit.
    decoder.set_max_window_size(limit.max(1 << 20) as u64);
    if input.is_empty() {
        return Err(Fail::at(0, "empty zstd stream"));
    }
    while !rest.is_empty() {
        let frame_at = at(rest);
        match decoder.init(&mut rest) {
            Ok(()) => {}
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                rest = rest
                    .get(length as usize..)
                    .ok_or_else(|| Fail::at(frame_at, "skippable frame runs past the end"))?;
                continue;
            }
            Err(e) => return Err(Fail::at(frame_at, format!("bad frame header: {e}"))),
        }
        loop {
            decoder
                .decode_blocks(&mut rest, BlockDecodingStrategy::UptoBytes(256 << 10))
                .map_err(|e| Fail::at(at(rest), e.to_string()))?;
            let n = decoder.can_collect();
            if out.len() - start + n > limit {
                return Err(Fail::too_large(limit));
            }
            let base = out.len();
            out.resize(base + n, 0);
            let got = decoder
                .read(&mut out[base..])
                .map_err(|e| Fail::at(at(rest), e.to_string()))?;
            out.truncate(base + got);
            if decoder.is_finished() && decoder.can_collect() == 0 {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        // Compressible but not trivial: 300 KiB spans several blocks of every codec.
        (0..300u32 << 10)
            .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
            .collect()
    }

    #[test]
    fn xxh32_matches_reference_vectors() {
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xE229_3B2F
        );
    }

    #[test]
    fn every_codec_round_trips_empty_small_and_multi_block_input() {
        for codec in Compression::ALL {
            for input in [Vec::new(), b"x".to_vec(), sample()] {
                let mut packed = Vec::new();
                codec.compress(&input, &mut packed);
                let mut out = vec![7u8]; // decompress appends
                codec.decompress(&packed, 1 << 20, &mut out).unwrap();
                assert_eq!(&out[1..], &input[..], "{codec} of {} bytes", input.len());
            }
        }
    }

    #[test]
    fn names_parse_and_ids_map_back() {
        for codec in Compression::ALL {
            assert_eq!(codec.name().parse::<Compression>().unwrap(), codec);
            assert_eq!(Compression::from_id(codec.id()), Some(codec));
        }
        assert_eq!("GZIP".parse::<Compression>().unwrap(), Compression::Gzip);
        assert!(matches!(
            "brotli".parse::<Compression>(),
            Err(Error::InvalidConfig { .. })
        ));
        assert_eq!(Compression::from_id(5), None);
    }

    #[test]
    fn output_past_the_limit_is_refused_for_every_codec() {
        let zeros = vec![0u8; 2 << 20];
        for codec in Compression::ALL {
            let mut packed = Vec::new();
            codec.compress(&zeros, &mut packed);
            let mut out = Vec::new();
            let e = codec.decompress(&packed, 1 << 20, &mut out).unwrap_err();
            assert!(e.is_corruption(), "{codec}: {e}");
            assert!(e.to_string().contains("limit"), "{codec}: {e}");
            assert!(out.is_empty(), "{codec}: nothing is left behind on error");
            codec.decompress(&packed, 2 << 20, &mut out).unwrap();
            assert_eq!(out.len(), 2 << 20);
        }
    }

    #[test]
    fn truncated_and_flipped_streams_are_corrupt_not_panics() {
        let input = sample();
        for codec in &Compression::ALL[1..] {
            let mut packed = Vec::new();
            codec.compress(&input, &mut packed);
            for cut in [0, 1, 5, packed.len() / 2, packed.len() - 1] {
                let r = codec.decompress(&packed[..cut], 1 << 20, &mut Vec::new());
                assert!(r.unwrap_err().is_corruption(), "{codec} cut at {cut}");
            }
            for at in (0..packed.len()).step_by(97) {
                let mut bad = packed.clone();
                bad[at] ^= 0x55;
                let mut out = Vec::new();
                // Either an error or some output: never a panic, never past the limit.
                if codec.decompress(&bad, 1 << 20, &mut out).is_ok() {
                    assert!(out.len() <= 1 << 20);
                }
            }
        }
    }

    #[test]
    fn snappy_reads_a_raw_block_as_librdkafka_writes_it() {
        let input = sample();
        let raw = snap::raw::Encoder::new().compress_vec(&input).unwrap();
        let mut out = Vec::new();
        Compression::Snappy
            .decompress(&raw, 1 << 20, &mut out)
            .unwrap();
        assert_eq!(out, input);
    }

    #[test]
    fn lz4_reads_linked_blocks_and_checksums() {
        // A frame of two linked blocks where the second refers back into the first, with
        // block and content checksums and a content size, as lz4's own tool may write.
        let first: Vec<u8> = (0..LZ4_BLOCK).map(|i| (i * 7 % 256) as u8).collect();
        let second = first[100..40_100].to_vec();
        let mut frame = LZ4_MAGIC.to_le_bytes().to_vec();
        let total = (first.len() + second.len()) as u64;
        let mut desc = vec![0x40 | 0x10 | 0x08 | 0x04, 0x40];
        desc.extend_from_slice(&total.to_le_bytes());
        frame.extend_from_slice(&desc);
        frame.push((xxh32(&desc, 0) >> 8) as u8);
        let b1 = lz4_flex::block::compress(&first);
        let b2 = lz4_flex::block::compress_with_dict(&second, &first);
        for b in [&b1, &b2] {
            frame.extend_from_slice(&(b.len() as u32).to_le_bytes());
            frame.extend_from_slice(b);
            frame.extend_from_slice(&xxh32(b, 0).to_le_bytes());
        }
        frame.extend_from_slice(&0u32.to_le_bytes());
        let whole = [first.clone(), second.clone()].concat();
        frame.extend_from_slice(&xxh32(&whole, 0).to_le_bytes());
        let mut out = Vec::new();
        Compression::Lz4
            .decompress(&frame, 1 << 20, &mut out)
            .unwrap();
        assert_eq!(out, whole);
        let mut bad = frame.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        let e = Compression::Lz4
            .decompress(&bad, 1 << 20, &mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("content checksum"), "{e}");
    }

    #[test]
    fn gzip_reads_headers_with_optional_fields_and_several_members() {
        let mut one = Vec::new();
        gzip_compress(b"hello ", &mut one);
        // Same member with FEXTRA, FNAME and FCOMMENT set.
        let mut two = vec![0x1f, 0x8b, 8, 0x04 | 0x08 | 0x10, 0, 0, 0, 0, 0, 3];
        two.extend_from_slice(&[2, 0, b'x', b'y']);
        two.extend_from_slice(b"name\0comment\0");
        two.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(b"world", 6));
        two.extend_from_slice(&crc32(b"world").to_le_bytes());
        two.extend_from_slice(&5u32.to_le_bytes());
        let mut out = Vec::new();
        Compression::Gzip
            .decompress(&[one, two].concat(), 1 << 20, &mut out)
            .unwrap();
        assert_eq!(out, b"hello world");
    }
}
