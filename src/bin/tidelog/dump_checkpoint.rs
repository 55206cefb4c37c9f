//! `tidelog dump` of tidelog's small crash-safe files (the "TLCP" framing of
//! `src/storage/checkpoint.rs`, described in docs/format.md): `partition.checkpoint`, the
//! topic registry `topics`, `producer-id-block`, and any other file in that framing.
//!
//! The framing is checked field by field (magic, version, payload length, CRC-32) and
//! the payload is decoded with the layout of the file's kind even when the CRC does not
//! match, so the values a damaged file holds can still be read. Each problem is reported
//! in place and counted like the problems of a segment dump.
//!
//! A new file in this framing is one more entry in [`KINDS`]: its name and the layout of
//! its payload as a list of [`Field`]s.

use crate::dump::{Problems, escape};
use crate::out::Out;
use crate::{CliResult, fail};
use std::path::Path;

/// The framing's magic bytes.
const MAGIC: &[u8; 4] = b"TLCP";
/// The framing version tidelog writes.
const VERSION: u16 = 1;
/// Magic, version and payload length.
const HEAD: usize = 10;
/// A file of this framing larger than this is not read (they are a few KiB).
const MAX_LEN: u64 = 64 << 20;

/// One field of a payload, named as the dump prints it. Integers are big-endian.
pub(crate) enum Field {
    /// An i64.
    I64(&'static str),
    /// An i32.
    I32(&'static str),
    /// One byte, 0 = false.
    Bool(&'static str),
    /// A u32 length and that many bytes of UTF-8.
    Str(&'static str),
    /// A u32 count, then that many groups of the inner fields, each on its own line.
    Repeat(&'static str, &'static [Field]),
}

/// A kind of file in the checkpoint framing.
pub(crate) struct Kind {
    /// Its file name.
    pub name: &'static str,
    /// What it is, for the heading.
    pub what: &'static str,
    /// The layout of its payload.
    pub layout: &'static [Field],
}

/// Every kind of checkpoint file `dump` knows the payload of.
pub(crate) const KINDS: &[Kind] = &[
    Kind {
        name: "partition.checkpoint",
        what: "partition checkpoint",
        layout: &[Field::I64("recoveryPoint"), Field::I64("logStartOffset")],
    },
    Kind {
        name: "topics",
        what: "topic registry",
        layout: &[Field::Repeat(
            "topics",
            &[
                Field::Str("name"),
                Field::I32("partitions"),
                Field::Bool("internal"),
                Field::Repeat("configs", &[Field::Str("key"), Field::Str("value")]),
            ],
        )],
    },
    Kind {
        name: "producer-id-block",
        what: "producer id block",
        // Ids below it may have been handed out; a restart hands out ids from here.
        layout: &[Field::I64("nextUnreservedProducerId")],
    },
];

/// True if `path` is a checkpoint file: a known name, or a file that starts with the
/// framing's magic.
pub(crate) fn is_checkpoint(path: &Path) -> bool {
    let known = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| KINDS.iter().any(|k| k.name == n));
    known || starts_with_magic(path)
}

fn starts_with_magic(path: &Path) -> bool {
    let mut head = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == MAGIC)
}

/// Dumps the checkpoint file at `path`.
pub(crate) fn dump(path: &Path, out: &mut Out, report: &mut Problems) -> CliResult {
    let len = std::fs::metadata(path)
        .map_err(|e| fail!("cannot read {}: {e}", path.display()))?
        .len();
    if len > MAX_LEN {
        return Err(fail!(
            "cannot dump {}: {len} bytes is too large for a checkpoint file",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| fail!("cannot read {}: {e}", path.display()))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let kind = KINDS.iter().find(|k| k.name == name);
    out.line(format_args!("Dumping {}", path.display()))?;
    out.line(format_args!(
        "Kind: {}",
        kind.map_or("unknown checkpoint (payload shown as bytes)", |k| k.what)
    ))?;
    if bytes.len() < HEAD + 4 || &bytes[..4] != MAGIC {
        return report.add(
            out,
            path,
            0,
            &format!(
                "not a tidelog checkpoint: it must start with \"TLCP\" and hold at least {} bytes ({} bytes)",
                HEAD + 4,
                bytes.len()
            ),
        );
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    let declared = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    // The payload is what lies between the head and the 4 CRC bytes at the end.
    let payload = &bytes[HEAD..bytes.len() - 4];
    let stored = u32::from_be_bytes(bytes[bytes.len() - 4..].try_into().unwrap_or([0; 4]));
    // CRC-32 (IEEE), as `src/storage/checkpoint.rs` computes it.
    let computed = crc_fast::checksum(
        crc_fast::CrcAlgorithm::Crc32IsoHdlc,
        &bytes[..bytes.len() - 4],
    ) as u32;
    let valid = if stored == computed {
        "true".to_string()
    } else {
        format!("false (computed {computed:#010x})")
    };
    out.line(format_args!(
        "magic: TLCP version: {version} payloadLength: {declared} size: {} crc: {stored:#010x} isValid: {valid}",
        bytes.len()
    ))?;
    if version != VERSION {
        report.add(
            out,
            path,
            4,
            &format!("unsupported checkpoint version {version} (tidelog writes {VERSION})"),
        )?;
    }
    if declared != payload.len() {
        report.add(
            out,
            path,
            6,
            &format!(
                "payload length {declared} does not match the file size ({} payload bytes): torn write?",
                payload.len()
            ),
        )?;
    }
    if stored != computed {
        report.add(
            out,
            path,
            (bytes.len() - 4) as u64,
            &format!("CRC-32 mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        )?;
    }
    match kind {
        Some(kind) => {
            let mut payload_reader = Payload {
                bytes: payload,
                pos: 0,
            };
            let result = print_fields(kind.layout, &mut payload_reader, 0, out);
            let end = payload_reader.pos;
            match result? {
                Err((at, reason)) => report.add(out, path, (HEAD + at) as u64, &reason)?,
                Ok(()) if end != payload.len() => report.add(
                    out,
                    path,
                    (HEAD + end) as u64,
                    &format!(
                        "{} unexpected bytes after the last field of the payload",
                        payload.len() - end
                    ),
                )?,
                Ok(()) => {}
            }
        }
        None => out.line(format_args!("payload: {}", escape(payload)))?,
    }
    Ok(())
}

/// A payload being decoded; `pos` is the next byte.
struct Payload<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// Where in the payload decoding failed, and why.
type Bad = (usize, String);

impl<'a> Payload<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Bad> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                (
                    self.pos,
                    format!(
                        "the payload ends in the middle of {what} ({n} bytes needed, {} left)",
                        self.bytes.len() - self.pos
                    ),
                )
            })?;
        let b = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Bad> {
        let b = self.take(N, what)?;
        Ok(b.try_into().unwrap_or([0; N]))
    }
}

/// Decodes and prints `fields` at nesting `depth`: scalars on one line, each element of
/// a repeated group on a line of its own, indented. The outer result is a write
/// failure; the inner one where and why the payload could not be decoded.
fn print_fields(
    fields: &[Field],
    p: &mut Payload<'_>,
    depth: usize,
    out: &mut Out,
) -> CliResult<Result<(), Bad>> {
    let indent = "  ".repeat(depth);
    let mut line = Vec::new();
    let flush = |line: &mut Vec<String>, out: &mut Out| -> CliResult {
        if !line.is_empty() {
            out.line(format_args!("{indent}{}", line.join(" ")))?;
            line.clear();
        }
        Ok(())
    };
    for field in fields {
        let decoded = match field {
            Field::I64(name) => p
                .array::<8>(name)
                .map(|b| format!("{name}: {}", i64::from_be_bytes(b))),
            Field::I32(name) => p
                .array::<4>(name)
                .map(|b| format!("{name}: {}", i32::from_be_bytes(b))),
            Field::Bool(name) => p.array::<1>(name).map(|b| format!("{name}: {}", b[0] != 0)),
            Field::Str(name) => p.array::<4>(name).and_then(|n| {
                let s = p.take(u32::from_be_bytes(n) as usize, name)?;
                Ok(format!("{name}: {}", escape(s)))
            }),
            Field::Repeat(name, inner) => {
                let count = match p.array::<4>(name) {
                    Ok(b) => u32::from_be_bytes(b),
                    Err(bad) => {
                        flush(&mut line, out)?;
                        return Ok(Err(bad));
                    }
                };
                line.push(format!("{name}: {count}"));
                flush(&mut line, out)?;
                for _ in 0..count {
                    if let Err(bad) = print_fields(inner, p, depth + 1, out)? {
                        return Ok(Err(bad));
                    }
                }
                continue;
            }
        };
        match decoded {
            Ok(text) => line.push(text),
            Err(bad) => {
                flush(&mut line, out)?;
                return Ok(Err(bad));
            }
        }
    }
    flush(&mut line, out)?;
    Ok(Ok(()))
}
