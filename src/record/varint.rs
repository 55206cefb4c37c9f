//! Zigzag varints as Kafka's RecordBatch v2 uses them (protobuf-style, 7 bits a byte).

/// Number of bytes `v` takes as a zigzag varint.
#[inline]
pub fn varint_len(v: i32) -> usize {
    varlong_len(v as i64)
}

/// Number of bytes `v` takes as a zigzag varlong.
#[inline]
pub fn varlong_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    // Bits needed, at least 1; 7 payload bits per byte.
    let bits = 64 - (z | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Appends `v` as a zigzag varint (the reference encoder of the tests; the builder
/// writes its varints in place).
#[cfg(test)]
pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_varlong(out, v as i64)
}

/// Appends `v` as a zigzag varlong (the reference encoder of the tests).
#[cfg(test)]
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    if z < 0x80 {
        // Most deltas, lengths and counts fit in one byte.
        out.push(z as u8);
        return;
    }
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Undoes zigzag encoding.
#[inline(always)]
fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Reads a zigzag varlong from the front of `buf`; returns the value and the bytes used,
/// or `None` if `buf` ends first or the encoding is longer than 10 bytes.
#[inline]
pub fn get_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    // Fast paths: lengths, deltas and counts almost always take one or two bytes.
    match *buf {
        [b0, ..] if b0 < 0x80 => {
            let z = b0 as u64;
            Some((unzigzag(z), 1))
        }
        [b0, b1, ..] if b1 < 0x80 => {
            let z = (b0 & 0x7f) as u64 | ((b1 as u64) << 7);
            Some((unzigzag(z), 2))
        }
        _ => get_varlong_slow(buf),
    }
}

#[inline(never)]
fn get_varlong_slow(buf: &[u8]) -> Option<(i64, usize)> {
    let mut z: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        z |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some((unzigzag(z), i + 1));
        }
    }
    None
}

/// Reads a zigzag varint; `None` if it is truncated or does not fit in an `i32`.
#[inline]
pub fn get_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (v, n) = get_varlong(buf)?;
    if n > 5 {
        return None;
    }
    i32::try_from(v).ok().map(|v| (v, n))
}

/// A read position in a byte slice, for decoding varint-framed fields in place: the
/// record decoder's fast path. Each read is one bounds check on the slice, not a new
/// sub-slice per field, and one- and two-byte varints (almost every length, delta and
/// count) never leave the inlined code.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'b> {
    buf: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    /// A cursor at the start of `buf`.
    #[inline(always)]
    pub(crate) fn new(buf: &'b [u8]) -> Self {
        Cursor { buf, at: 0 }
    }

    /// Bytes read so far.
    #[inline(always)]
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// True if every byte has been read.
    #[inline(always)]
    pub(crate) fn at_end(&self) -> bool {
        self.at == self.buf.len()
    }

    /// Skips `n` bytes, or `None` if fewer are left.
    #[inline(always)]
    pub(crate) fn skip(&mut self, n: usize) -> Option<()> {
        if n > self.buf.len() - self.at {
            return None;
        }
        self.at += n;
        Some(())
    }

    /// The zigzag value of the one- or two-byte varint at the cursor, with its length;
    /// `None` if it is longer or runs past the end.
    #[inline(always)]
    fn short(&self) -> Option<(i64, usize)> {
        let b0 = *self.buf.get(self.at)?;
        if b0 < 0x80 {
            return Some((unzigzag(b0 as u64), 1));
        }
        let b1 = *self.buf.get(self.at + 1)?;
        (b1 < 0x80).then(|| (unzigzag((b0 & 0x7f) as u64 | (b1 as u64) << 7), 2))
    }

    /// Reads a zigzag varlong.
    #[inline(always)]
    pub(crate) fn varlong(&mut self) -> Option<i64> {
        let (v, n) = match self.short() {
            Some(vn) => vn,
            None => get_varlong_slow(self.buf.get(self.at..)?)?,
        };
        self.at += n;
        Some(v)
    }

    /// Reads a zigzag varint (at most 5 bytes, in `i32` range).
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Option<i32> {
        let (v, n) = match self.short() {
            // At most 14 bits: always an i32.
            Some((v, n)) => (v as i32, n),
            None => get_varint(self.buf.get(self.at..)?)?,
        };
        self.at += n;
        Some(v)
    }

    /// Reads a varint-length-prefixed byte string; a negative length is null.
    #[inline(always)]
    pub(crate) fn bytes(&mut self) -> Option<Option<&'b [u8]>> {
        let len = self.varint()?;
        if len < 0 {
            return Some(None);
        }
        // `at <= buf.len() <= isize::MAX` and `len <= i32::MAX`: no overflow.
        let end = self.at + len as usize;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(Some(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings() {
        // Examples from the protobuf zigzag table.
        for (v, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-2, vec![3]),
            (63, vec![0x7e]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (300, vec![0xd8, 0x04]),
        ] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out, bytes, "encoding of {v}");
            assert_eq!(varlong_len(v), bytes.len());
            assert_eq!(get_varlong(&bytes), Some((v, bytes.len())));
        }
    }

    #[test]
    fn round_trip_extremes() {
        for v in [i64::MIN, i64::MAX, i32::MIN as i64, i32::MAX as i64, 0, -1] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v));
            assert_eq!(get_varlong(&out), Some((v, out.len())));
        }
        let mut out = Vec::new();
        put_varint(&mut out, i32::MIN);
        assert_eq!(get_varint(&out), Some((i32::MIN, 5)));
    }

    #[test]
    fn cursor_reads_what_put_wrote() {
        let values = [
            0i64,
            -1,
            63,
            -64,
            64,
            8191,
            -8192,
            8192,
            1 << 20,
            i32::MAX as i64,
        ];
        let mut out = Vec::new();
        for v in values {
            put_varlong(&mut out, v);
        }
        let mut c = Cursor::new(&out);
        for v in values {
            assert_eq!(c.varint(), Some(v as i32), "varint {v}");
        }
        assert!(c.at_end());
        assert_eq!(c.varint(), None);
        let mut c = Cursor::new(&out);
        for v in values {
            assert_eq!(c.varlong(), Some(v));
        }
        // Out of i32 range: varlong reads it, varint refuses it.
        let mut big = Vec::new();
        put_varlong(&mut big, i64::MAX);
        assert_eq!(Cursor::new(&big).varlong(), Some(i64::MAX));
        assert_eq!(Cursor::new(&big).varint(), None);
        // Truncated two-byte varint, and a string longer than what is left.
        assert_eq!(Cursor::new(&[0x80]).varint(), None);
        assert_eq!(Cursor::new(&[0x06, b'a', b'b']).bytes(), None);
        let mut c = Cursor::new(&[0x06, b'a', b'b', b'c', 0x01]);
        assert_eq!(c.bytes(), Some(Some(&b"abc"[..])));
        assert_eq!(c.bytes(), Some(None));
        assert_eq!(c.skip(1), None);
    }

    #[test]
    fn truncated_and_overlong() {
        assert_eq!(get_varlong(&[0x80]), None);
        assert_eq!(get_varlong(&[0xff; 11]), None);
        let mut out = Vec::new();
        put_varlong(&mut out, i64::MAX);
        assert_eq!(get_varint(&out), None);
    }
}
