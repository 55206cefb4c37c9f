//! The time index (`.timeindex`): 12-byte big-endian entries (i64 timestamp, u32
//! relative offset), one written beside an offset index entry whenever the segment's
//! largest timestamp has grown since the last one, plus a final one when the segment is
//! sealed. An entry `(t, r)` promises that every record before the batch at relative
//! offset `r` has a timestamp <= `t`, so a search for the first record at or after a time
//! `T` starts at the last entry with `t < T`.

/// Size of a time index entry.
pub(crate) const TIME_ENTRY: usize = 12;

/// Encodes a time index entry.
#[inline]
pub(crate) fn time_entry(timestamp: i64, relative_offset: u32) -> [u8; 12] {
    let mut e = [0u8; 12];
    e[..8].copy_from_slice(&timestamp.to_be_bytes());
    e[8..].copy_from_slice(&relative_offset.to_be_bytes());
    e
}

/// Decodes a time index entry into (timestamp, relative offset).
#[inline]
pub(crate) fn read_time_entry(e: &[u8]) -> (i64, u32) {
    if e.len() < 12 {
        return (i64::MIN, 0);
    }
    (
        i64::from_be_bytes(e[..8].try_into().expect("8 bytes")),
        u32::from_be_bytes([e[8], e[9], e[10], e[11]]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let e = time_entry(1_700_000_000_123, 77);
        assert_eq!(read_time_entry(&e), (1_700_000_000_123, 77));
        assert_eq!(&e[..8], &1_700_000_000_123i64.to_be_bytes());
    }
}
