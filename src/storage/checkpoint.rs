//! Small crash-safe files: written to a temporary file, fsynced, renamed over the old
//! one, and the directory fsynced; read back with a CRC32 check so that a torn or
//! damaged checkpoint is detected, never trusted.
//!
//! Layout: magic `TLCP` (4 bytes), version (u16), payload length (u32), payload,
//! CRC-32 (IEEE, zlib's) of everything before it (u32). Big-endian.

use crate::error::IoContext;
use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 4] = b"TLCP";
const VERSION: u16 = 1;

/// CRC-32 (IEEE 802.3, zlib's `crc32`) of `bytes`, through the crate that computes the
/// batches' CRC-32C (`crc_fast`), so that one CRC crate serves both.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    // CRC-32/ISO-HDLC is the IEEE CRC-32; the result fits in 32 bits.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, bytes) as u32
}

/// Fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsync directory", dir)
}

/// Writes `payload` to `path` crash-safely, in the TLCP framing.
pub(crate) fn write(path: &Path, payload: &[u8]) -> Result<()> {
    let mut buf = Vec::with_capacity(payload.len() + 14);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(payload);
    let crc = crc32(&buf);
    buf.extend_from_slice(&crc.to_be_bytes());
    write_atomically(path, &buf)
}

/// Replaces the file at `path` with `bytes` so that a crash at any point leaves the old
/// file or the new one, never a mix: `<path>.tmp` (the extension replaced), fsync,
/// rename over `path`, fsync of the directory. For the text files Kafka defines
/// (`leader-epoch-checkpoint`, `replication-offset-checkpoint`) as for TLCP files.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .ctx("create", &tmp)?;
    f.write_all(bytes).ctx("write", &tmp)?;
    f.sync_all().ctx("fsync", &tmp)?;
    drop(f);
    fs::rename(&tmp, path).ctx("rename checkpoint into place", path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Removes `path` if it exists and fsyncs its directory.
pub(crate) fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("remove", path, e)),
    }
    match path.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

/// Reads a checkpoint: `Ok(None)` if the file does not exist, `Error::Corrupt` if its
/// magic, length or CRC is wrong.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<u8>>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let bad = |pos: usize, why: &str| Error::corrupt(path.display(), pos as u64, why);
    if bytes.len() < 14 || &bytes[..4] != MAGIC {
        return Err(bad(0, "not a tidelog checkpoint (bad magic or too short)"));
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        return Err(bad(4, &format!("unsupported checkpoint version {version}")));
    }
    let len = u32::from_be_bytes(bytes[6..10].try_into().expect("4 bytes")) as usize;
    if bytes.len() != 14 + len {
        return Err(bad(6, "length does not match the file size (torn write?)"));
    }
    let stored = u32::from_be_bytes(bytes[10 + len..].try_into().expect("4 bytes"));
    if crc32(&bytes[..10 + len]) != stored {
        return Err(bad(10 + len, "CRC32 mismatch"));
    }
    Ok(Some(bytes[10..10 + len].to_vec()))
}

/// Writes one of Kafka's text checkpoint files crash-safely: a version line (`0`), a
/// line with the number of entries, then one line per entry (fields separated by one
/// space), each line ending in `\n`.
pub(crate) fn write_text(path: &Path, entries: &[String]) -> Result<()> {
    let mut text = format!("0\n{}\n", entries.len());
    for e in entries {
        text.push_str(e);
        text.push('\n');
    }
    write_atomically(path, text.as_bytes())
}

/// One entry line of a text checkpoint: the byte position of the line, and its fields.
pub(crate) type TextEntry = (u64, Vec<String>);

/// Reads one of Kafka's text checkpoint files (see [`write_text`]): `Ok(None)` if it does
/// not exist, else each entry's fields with the byte position of its line.
/// [`Error::Corrupt`] (naming the file and the byte position of the bad line) if the
/// version is not 0, the count is not a number, or the entries are not exactly `count`
/// lines of `fields` fields each.
pub(crate) fn read_text(path: &Path, fields: usize) -> Result<Option<Vec<TextEntry>>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let bad = |pos: usize, why: String| Error::corrupt(path.display(), pos as u64, why);
    let text =
        std::str::from_utf8(&bytes).map_err(|e| bad(e.valid_up_to(), "not UTF-8 text".into()))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(bad(
            text.len(),
            "the last line is not complete (torn write?)".into(),
        ));
    }
    let mut lines = Vec::new();
    let mut pos = 0;
    for line in text.split_terminator('\n') {
        lines.push((pos, line));
        pos += line.len() + 1;
    }
    let (version_at, version) = lines.first().copied().unwrap_or((0, ""));
    if version != "0" {
        return Err(bad(
            version_at,
            format!("unsupported version {version:?} (expected 0)"),
        ));
    }
    let (count_at, count) = lines.get(1).copied().unwrap_or((text.len(), ""));
    let count: usize = count
        .parse()
        .map_err(|_| bad(count_at, format!("entry count {count:?} is not a number")))?;
    if lines.len() != count + 2 {
        return Err(bad(
            count_at,
            format!(
                "{count} entries announced, {} lines follow",
                lines.len().saturating_sub(2)
            ),
        ));
    }
    lines[2..]
        .iter()
        .map(|&(at, line)| {
            let f: Vec<String> = line.split(' ').map(str::to_string).collect();
            if f.len() != fields || f.iter().any(String::is_empty) {
                return Err(bad(
                    at,
                    format!("entry {line:?} is not {fields} fields separated by one space"),
                ));
            }
            Ok((at as u64, f))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_the_ieee_crc32() {
        // The check value of CRC-32/ISO-HDLC, as zlib and crc32fast compute it.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cp");
        assert_eq!(read(&p).unwrap(), None);
        write(&p, b"hello").unwrap();
        assert_eq!(read(&p).unwrap(), Some(b"hello".to_vec()));
        write(&p, b"again!").unwrap();
        assert_eq!(read(&p).unwrap(), Some(b"again!".to_vec()));
        let mut b = fs::read(&p).unwrap();
        b[11] ^= 1;
        fs::write(&p, &b).unwrap();
        assert!(read(&p).unwrap_err().is_corruption());
        fs::write(&p, &b[..b.len() - 2]).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("torn"));
    }

    #[test]
    fn text_checkpoints_round_trip_and_damage_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("leader-epoch-checkpoint");
        assert_eq!(read_text(&p, 2).unwrap(), None);
        write_text(&p, &["0 0".into(), "3 1500".into()]).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\n0 0\n3 1500\n");
        let got = read_text(&p, 2).unwrap().unwrap();
        assert_eq!(got[1], (8, vec!["3".to_string(), "1500".to_string()]));
        write_text(&p, &[]).unwrap();
        assert_eq!(read_text(&p, 2).unwrap(), Some(vec![]));
        for (bytes, why) in [
            (&b"1\n0\n"[..], "version"),
            (b"0\nx\n", "count"),
            (b"0\n2\n0 0\n", "announced"),
            (b"0\n1\n0 0 0\n", "fields"),
            (b"0\n1\n0  0\n", "fields"),
            (b"0\n1\n0 0", "torn"),
            (b"", "version"),
        ] {
            fs::write(&p, bytes).unwrap();
            let e = read_text(&p, 2).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains(why), "{e}");
            assert!(e.to_string().contains("leader-epoch-checkpoint"), "{e}");
        }
    }
}
