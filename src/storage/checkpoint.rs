//! Small crash-safe files: written to a temporary file, fsynced, renamed over the old
//! one, and the directory fsynced; read back with a CRC32 check so that a torn or
//! damaged checkpoint is detected, never trusted.
//!
//! Layout: magic `TLCP` (4 bytes), version (u16), payload length (u32), payload,
//! CRC-32 (IEEE, zlib's) of everything before it (u32). Big-endian.

use crate::error::IoContext;
use crate::{Error, Result};
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

/// Writes `payload` to `path` crash-safely.
pub(crate) fn write(path: &Path, payload: &[u8]) -> Result<()> {
    let mut buf = Vec::with_capacity(payload.len() + 14);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(payload);
    let crc = crc32(&buf);
    buf.extend_from_slice(&crc.to_be_bytes());
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .ctx("create", &tmp)?;
    f.write_all(&buf).ctx("write", &tmp)?;
    f.sync_all().ctx("fsync", &tmp)?;
    drop(f);
    fs::rename(&tmp, path).ctx("rename checkpoint into place", path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
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
}
