//! The hand-written binary encoding of everything the cluster writes to disk or sends to
//! a peer (records, the metadata image, Raft storage files, transport frames).
//!
//! Big-endian integers; a string is a `u32` byte length and UTF-8 bytes; a list is a
//! `u32` count and its items. Decoding never panics and never allocates more than the
//! input can hold: every length is checked against the bytes that remain, and a bad
//! input is an [`Error::Corrupt`] naming where it came from and the byte position.

use crate::error::{Error, Result};

/// Appends values to a byte buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty buffer.
    pub(crate) fn new() -> Writer {
        Writer::default()
    }

    /// The bytes written.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// A `u32` length and the bytes.
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
    }

    /// Bytes with no length in front (fixed-size fields).
    pub(crate) fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    /// A `u32` length and the UTF-8 bytes.
    pub(crate) fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    /// A `u32` count and the items.
    pub(crate) fn i32s(&mut self, v: &[i32]) {
        self.u32(v.len() as u32);
        for x in v {
            self.i32(*x);
        }
    }

    /// A `u32` count and `(key, value)` string pairs.
    pub(crate) fn pairs<'a>(&mut self, v: impl ExactSizeIterator<Item = (&'a str, &'a str)>) {
        self.u32(v.len() as u32);
        for (k, val) in v {
            self.str(k);
            self.str(val);
        }
    }
}

/// Reads values back, with typed errors that name the input and the position.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    location: &'a str,
}

impl<'a> Reader<'a> {
    /// Reads `bytes`; errors name `location` (a file, or "metadata record at index 12").
    pub(crate) fn new(bytes: &'a [u8], location: &'a str) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            location,
        }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// An [`Error::Corrupt`] at the current position.
    pub(crate) fn error(&self, reason: impl Into<String>) -> Error {
        Error::corrupt(self.location, self.pos as u64, reason)
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(self.error(format!("{} unexpected bytes at the end", self.remaining())));
        }
        Ok(())
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "needs {n} more bytes but only {} remain",
                self.remaining()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => {
                self.pos -= 1;
                Err(self.error(format!("{b} is not a boolean (0 or 1)")))
            }
        }
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// `N` bytes with no length in front.
    pub(crate) fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.array()
    }

    /// A `u32` length and that many bytes.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// A `u32` length and that many UTF-8 bytes.
    pub(crate) fn str(&mut self) -> Result<String> {
        let at = self.pos;
        let b = self.bytes()?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => {
                self.pos = at;
                Err(self.error("string is not UTF-8"))
            }
        }
    }

    /// A `u32` count of items of at least `min_size` bytes each, checked against the
    /// bytes that remain so that a bad count cannot make us allocate.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.remaining() {
            self.pos -= 4;
            return Err(self.error(format!(
                "a count of {n} items does not fit in the {} bytes that remain",
                self.remaining()
            )));
        }
        Ok(n)
    }

    pub(crate) fn i32s(&mut self) -> Result<Vec<i32>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.i32()).collect()
    }

    pub(crate) fn pairs(&mut self) -> Result<Vec<(String, String)>> {
        let n = self.count(8)?;
        (0..n).map(|_| Ok((self.str()?, self.str()?))).collect()
    }
}

/// A random `u64` from the standard library's per-process random hasher keys, the clock
/// and a counter: for incarnation ids, cluster and topic ids (no `rand` dependency).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.finish()
}

/// 16 random bytes (a v4-style UUID), for cluster and topic ids.
pub(crate) fn random_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&random_u64().to_be_bytes());
    b[8..].copy_from_slice(&random_u64().to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// A UUID as Kafka prints cluster and topic ids: URL-safe base64 without padding
/// (22 characters).
pub(crate) fn uuid_base64(id: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
        }
    }
    out
}

/// The UUID of a [`uuid_base64`] string, None if `s` is not one (22 characters of the
/// URL-safe alphabet whose last one carries no stray bits).
pub(crate) fn uuid_from_base64(s: &str) -> Option<[u8; 16]> {
    let digit = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        }))
    };
    let s = s.as_bytes();
    if s.len() != 22 {
        return None;
    }
    let mut out = [0u8; 16];
    for (k, chunk) in s.chunks(4).enumerate() {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = chunk.len() - 1;
        for i in 0..bytes {
            out[3 * k + i] = (n >> (16 - 8 * i)) as u8;
        }
        if n & (0x00ff_ffff >> (8 * bytes)) != 0 {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_round_trip_through_base64() {
        for id in [[0u8; 16], [0xff; 16], random_uuid(), random_uuid()] {
            assert_eq!(uuid_from_base64(&uuid_base64(&id)), Some(id));
        }
        assert_eq!(uuid_from_base64("short"), None);
        assert_eq!(uuid_from_base64("AAAAAAAAAAAAAAAAAAAAA!"), None);
        // The last character carries 2 bits; the other 4 must be zero.
        assert_eq!(uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAB"), None);
    }

    #[test]
    fn values_round_trip() {
        let mut w = Writer::new();
        w.u8(7);
        w.bool(true);
        w.i16(-2);
        w.i32(-3);
        w.u64(u64::MAX);
        w.str("héllo");
        w.i32s(&[1, 2, 3]);
        w.pairs([("a", "1"), ("b", "2")].into_iter());
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes, "test");
        assert_eq!(r.u8().unwrap(), 7);
        assert!(r.bool().unwrap());
        assert_eq!(r.i16().unwrap(), -2);
        assert_eq!(r.i32().unwrap(), -3);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.i32s().unwrap(), vec![1, 2, 3]);
        assert_eq!(r.pairs().unwrap().len(), 2);
        r.finish().unwrap();
    }

    #[test]
    fn bad_input_is_a_typed_error_with_a_position() {
        let mut r = Reader::new(&[0, 0, 0, 200, 1], "frame");
        let e = r.str().unwrap_err();
        assert!(e.is_corruption(), "{e}");
        assert!(e.to_string().contains("frame"), "{e}");
        // A huge count is refused before anything is allocated.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff], "frame");
        assert!(r.i32s().is_err());
        let mut r = Reader::new(&[2], "frame");
        assert!(r.bool().is_err());
    }

    #[test]
    fn uuids_print_like_kafka() {
        assert_eq!(uuid_base64(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        let id = random_uuid();
        assert_eq!(uuid_base64(&id).len(), 22);
        assert_ne!(random_uuid(), id);
    }
}
