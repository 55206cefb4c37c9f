//! The aborted-transaction index, `<base>.txnindex` (Kafka's `TransactionIndex`), and
//! what a log knows of its transactions for the last stable offset.
//!
//! File: back-to-back entries of 34 bytes, big-endian: `version: i16` (0),
//! `producer_id: i64`, `first_offset: i64`, `last_offset: i64` (the ABORT marker's
//! offset), `last_stable_offset: i64` (the log's last stable offset once the
//! transaction ended). An entry goes to the file of the segment the marker is in, in
//! marker order. The file exists only for a segment with an aborted transaction: it is
//! created by the first one, written with one `write` per entry, and not held open.

use crate::error::{Error, IoContext, Result};
use crate::record::Batch;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Extension of the aborted-transaction index files.
pub(crate) const TXN_INDEX_EXT: &str = "txnindex";
/// Size of one entry.
pub const ABORTED_TXN_LEN: usize = 34;

/// An aborted transaction, as a read_committed Fetch returns it (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer whose transaction it was.
    pub producer_id: i64,
    /// The offset of its first batch in this partition.
    pub first_offset: i64,
    /// The offset of the ABORT marker that ended it.
    pub last_offset: i64,
    /// The partition's last stable offset once it ended.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// Whether `batch` holds records of this transaction: a transactional batch of its
    /// producer from its first offset up to its ABORT marker.
    pub fn holds(&self, batch: &Batch<'_>) -> bool {
        batch.is_transactional()
            && batch.producer_id() == self.producer_id
            && (self.first_offset..self.last_offset).contains(&batch.base_offset())
    }

    /// The 34 bytes of its entry.
    pub fn encode(&self) -> [u8; ABORTED_TXN_LEN] {
        let mut out = [0u8; ABORTED_TXN_LEN];
        // version 0 in bytes 0..2
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Parses one entry; the error says why it is not one (version other than 0).
    pub fn decode(bytes: &[u8; ABORTED_TXN_LEN]) -> std::result::Result<AbortedTxn, String> {
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != 0 {
            return Err(format!("aborted transaction entry version {version}"));
        }
        let at = |i: usize| i64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        Ok(AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// Path of the index of the segment at `base`.
pub(crate) fn path(dir: &Path, base: i64) -> PathBuf {
    dir.join(super::segment::file_name(base, TXN_INDEX_EXT))
}

/// Appends `entry` to the index of the segment at `base` (created if missing). No
/// fsync: see [`sync`].
pub(crate) fn append(dir: &Path, base: i64, entry: &AbortedTxn) -> Result<()> {
    let p = path(dir, base);
    let created = !p.exists();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .and_then(|mut f| f.write_all(&entry.encode()))
        .ctx("append to transaction index", &p)?;
    if created {
        super::checkpoint::sync_dir(dir)?;
    }
    Ok(())
}

/// Fsyncs the index of the segment at `base`, if it has one.
pub(crate) fn sync(dir: &Path, base: i64) -> Result<()> {
    let p = path(dir, base);
    match std::fs::File::open(&p) {
        Ok(f) => f.sync_all().ctx("fsync transaction index", &p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("open transaction index", p, e)),
    }
}

/// The entries of the index of the segment at `base` (none if it has no file);
/// [`Error::Corrupt`] if an entry is not one. A torn last entry (a crash while it was
/// written) is left out: the replay of the log rewrites it.
pub(crate) fn read(dir: &Path, base: i64) -> Result<Vec<AbortedTxn>> {
    let p = path(dir, base);
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read transaction index", p, e)),
    };
    bytes
        .chunks_exact(ABORTED_TXN_LEN)
        .enumerate()
        .map(|(i, c)| {
            AbortedTxn::decode(c.try_into().expect("34 bytes"))
                .map_err(|why| Error::corrupt(p.display(), (i * ABORTED_TXN_LEN) as u64, why))
        })
        .collect()
}

/// Replaces the index of the segment at `base` by `entries` (removes it if none).
pub(crate) fn rewrite(dir: &Path, base: i64, entries: &[AbortedTxn]) -> Result<()> {
    let p = path(dir, base);
    if entries.is_empty() {
        return match std::fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove transaction index", p, e)),
        };
    }
    let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
    super::checkpoint::write_atomically(&p, &bytes)
}

/// The bases of the index files in `dir`.
fn list(dir: &Path) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx("list log directory", dir)? {
        let entry = entry.ctx("list log directory", dir)?;
        let name = entry.file_name();
        if let Some(b) = super::segment::parse_base_offset(&name.to_string_lossy(), TXN_INDEX_EXT) {
            out.push(b);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Before a replay of the log from offset `from`: keeps, of the index files of `dir`,
/// the entries whose marker lies below `from` in a segment of `bases` (the replay
/// writes the others again), removes the other files, and returns the entries kept,
/// in marker order. With `write` false (a read-only log) it changes no file.
pub(crate) fn keep_below(
    dir: &Path,
    bases: &[i64],
    from: i64,
    write: bool,
) -> Result<Vec<AbortedTxn>> {
    let mut kept = Vec::new();
    for base in list(dir)? {
        if bases.binary_search(&base).is_err() || base >= from {
            if write {
                rewrite(dir, base, &[])?;
            }
            continue;
        }
        let entries = read(dir, base)?;
        let below: Vec<AbortedTxn> = entries
            .iter()
            .copied()
            .filter(|e| e.last_offset < from)
            .collect();
        if write && below.len() != entries.len() {
            rewrite(dir, base, &below)?;
        }
        kept.extend(below);
    }
    kept.sort_by_key(|e| e.last_offset);
    Ok(kept)
}

/// What a log knows of its transactions, for the last stable offset and the
/// aborted-transaction query (kept beside the producers' state, under its own lock so
/// that readers do not take the writer's).
#[derive(Debug, Default)]
pub(crate) struct TxnBounds {
    /// False until the producers' state is loaded: the open transactions are unknown.
    pub(crate) known: bool,
    /// The open transactions: first offset to producer id.
    pub(crate) open: BTreeMap<i64, i64>,
    /// Transactions whose marker (offset, the value) the high watermark has not passed
    /// yet, by first offset: they hold the last stable offset back as open ones do.
    pub(crate) ended: BTreeMap<i64, i64>,
    /// The aborted transactions of the log, in marker order.
    pub(crate) aborted: Vec<AbortedTxn>,
}

impl TxnBounds {
    /// The last stable offset at high watermark `hw`: the first offset of the earliest
    /// transaction open or ended above `hw`, at most `hw`. Forgets the ended ones `hw`
    /// has passed.
    pub(crate) fn last_stable_offset(&mut self, hw: i64) -> i64 {
        self.ended.retain(|_, &mut marker| marker >= hw);
        let first = [self.open.keys().next(), self.ended.keys().next()]
            .into_iter()
            .flatten()
            .min()
            .copied();
        first.map_or(hw, |f| f.min(hw))
    }

    /// The aborted transactions with data in `from..to`: those whose marker is at or
    /// after `from` and whose first offset is below `to`, in marker order.
    pub(crate) fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|e| e.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|e| e.first_offset < to)
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kafkas_34_bytes() {
        let e = AbortedTxn {
            producer_id: 0x0102,
            first_offset: 5,
            last_offset: 9,
            last_stable_offset: 10,
        };
        let mut expected = vec![0u8, 0];
        for v in [0x0102i64, 5, 9, 10] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(e.encode().to_vec(), expected);
        assert_eq!(AbortedTxn::decode(&e.encode()), Ok(e));
        let mut bad = e.encode();
        bad[1] = 1;
        assert!(AbortedTxn::decode(&bad).is_err());
    }

    #[test]
    fn files_are_created_on_the_first_abort_and_cut_for_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(read(d, 0).unwrap().is_empty());
        assert!(!path(d, 0).exists());
        let entry = |first, last| AbortedTxn {
            producer_id: 1,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        };
        append(d, 0, &entry(0, 3)).unwrap();
        append(d, 0, &entry(4, 8)).unwrap();
        append(d, 10, &entry(9, 12)).unwrap();
        append(d, 20, &entry(21, 22)).unwrap();
        sync(d, 0).unwrap();
        sync(d, 30).unwrap();
        assert_eq!(std::fs::metadata(path(d, 0)).unwrap().len(), 68);
        assert_eq!(read(d, 0).unwrap(), vec![entry(0, 3), entry(4, 8)]);
        // A torn last entry is left out.
        std::fs::OpenOptions::new()
            .append(true)
            .open(path(d, 10))
            .unwrap()
            .write_all(&[0; 7])
            .unwrap();
        assert_eq!(read(d, 10).unwrap(), vec![entry(9, 12)]);
        // A replay from 6 over segments 0 and 10 (20 is gone).
        let kept = keep_below(d, &[0, 10], 6, true).unwrap();
        assert_eq!(kept, vec![entry(0, 3)]);
        assert!(!path(d, 10).exists() && !path(d, 20).exists());
        assert_eq!(std::fs::metadata(path(d, 0)).unwrap().len(), 34);
        // A damaged entry is corruption.
        std::fs::write(path(d, 0), [0xffu8; 34]).unwrap();
        assert!(read(d, 0).unwrap_err().is_corruption());
    }

    #[test]
    fn the_last_stable_offset_waits_for_the_high_watermark_to_pass_markers() {
        let mut t = TxnBounds::default();
        assert_eq!(t.last_stable_offset(7), 7);
        t.open.insert(3, 1);
        t.open.insert(5, 2);
        assert_eq!(t.last_stable_offset(7), 3);
        assert_eq!(t.last_stable_offset(2), 2);
        t.open.remove(&3);
        t.ended.insert(3, 8); // its marker is at 8
        assert_eq!(t.last_stable_offset(8), 3);
        assert_eq!(t.last_stable_offset(9), 5);
        assert!(t.ended.is_empty());
        t.open.clear();
        assert_eq!(t.last_stable_offset(9), 9);
        t.aborted = vec![
            AbortedTxn {
                producer_id: 1,
                first_offset: 0,
                last_offset: 4,
                last_stable_offset: 5,
            },
            AbortedTxn {
                producer_id: 2,
                first_offset: 6,
                last_offset: 9,
                last_stable_offset: 10,
            },
        ];
        assert_eq!(t.aborted_between(0, 10).len(), 2);
        assert_eq!(t.aborted_between(5, 10).len(), 1);
        assert_eq!(t.aborted_between(0, 6).len(), 1);
        assert!(t.aborted_between(10, 20).is_empty());
    }
}
