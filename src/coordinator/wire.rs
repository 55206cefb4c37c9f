//! Kafka's primitive encodings for the group protocol bytes (ConsumerProtocol metadata,
//! `__consumer_offsets` records): big-endian integers, strings with an `i16` length,
//! bytes with an `i32` length (-1 = null). Reading never panics: a short or malformed
//! input is an `Error::Corrupt` naming what was being read and where.

use crate::error::{Error, Result};

/// Appends a string with its `i16` length (truncated at `i16::MAX` bytes).
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = s.len().min(i16::MAX as usize);
    out.extend_from_slice(&(len as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

/// Appends bytes with their `i32` length, or -1 for None.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// A cursor over one encoded value.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `buf`; errors name it `what`.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }
    /// A corruption error at the current position.
    pub(crate) fn err(&self, reason: impl Into<String>) -> Error {
        Error::corrupt(self.what, self.pos as u64, reason)
    }
    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n).filter(|&e| e <= self.buf.len()) {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(format!(
                "needs {n} more bytes but {} remain",
                self.buf.len() - self.pos
            ))),
        }
    }
    /// How many bytes are left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// True when every byte was read (later versions may append fields).
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// A big-endian `i16`.
    pub(crate) fn i16(&mut self) -> Result<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    /// A big-endian `i32`.
    pub(crate) fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A big-endian `i64`.
    pub(crate) fn i64(&mut self) -> Result<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    /// An array count (-1, null, reads as 0).
    pub(crate) fn count(&mut self) -> Result<usize> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(0);
        }
        // Every element takes at least 2 bytes: refuse counts the input cannot hold.
        if n as usize > self.buf.len() - self.pos {
            return Err(self.err(format!("array count {n} exceeds the remaining bytes")));
        }
        Ok(n as usize)
    }
    /// A string with an `i16` length (null reads as empty).
    pub(crate) fn string(&mut self) -> Result<String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(String::new());
        }
        let b = self.take(len as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }
    /// A string with an `i16` length, None for null (-1).
    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| self.err("string is not UTF-8"))
    }
    /// Bytes with an `i32` length, None for null.
    pub(crate) fn bytes(&mut self) -> Result<Option<Vec<u8>>> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(len as usize)?.to_vec()))
    }
    /// An array of (topic, [partition]).
    pub(crate) fn topic_partitions(&mut self) -> Result<Vec<(String, Vec<i32>)>> {
        let n = self.count()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let topic = self.string()?;
            let m = self.count()?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(self.i32()?);
            }
            out.push((topic, parts));
        }
        Ok(out)
    }
}
