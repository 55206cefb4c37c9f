//! Retention and compaction decisions, and the record filter compaction applies.
//!
//! Kept apart from the log so that the rules are plain functions over segment summaries,
//! tested without files; `compaction_rewrites` runs them over a log's segments (the log
//! swaps the rewritten segments in, `log/retention.rs`).

use super::config::LogConfig;
use super::segment::Segment;
use super::txn_index::AbortedTxn;
use crate::error::Result;
use crate::record::{
    Batch, BatchBuilder, Compression, Records, batches, set_base_offset, set_partition_leader_epoch,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What retention needs to know of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentSummary {
    pub(crate) size: u64,
    pub(crate) max_timestamp: i64,
}

/// How many of the oldest segments retention deletes. `segments` is oldest first and
/// includes the active segment last, which is never deleted. Time retention deletes
/// leading segments whose newest record is older than `retention_ms`; size retention
/// deletes leading segments while the log stays at or above `retention_bytes` without
/// them (Kafka's rule: delete a segment only if the rest still exceeds the limit).
pub(crate) fn segments_to_delete(
    segments: &[SegmentSummary],
    config: &LogConfig,
    now_ms: i64,
) -> usize {
    if !config.cleanup_policy.deletes() || segments.len() < 2 {
        return 0;
    }
    let sealed = &segments[..segments.len() - 1];
    let mut n = 0;
    if let Some(ms) = config.retention_ms {
        let cutoff = now_ms.saturating_sub(ms as i64);
        n = sealed
            .iter()
            .take_while(|s| s.max_timestamp < cutoff)
            .count();
    }
    if let Some(limit) = config.retention_bytes {
        let mut total: u64 = segments.iter().map(|s| s.size).sum::<u64>();
        let mut by_size = 0;
        for s in sealed {
            if total.saturating_sub(s.size) < limit {
                break;
            }
            total -= s.size;
            by_size += 1;
        }
        n = n.max(by_size);
    }
    n
}

/// The latest offset of every key, over the given batches. Compressed batches are
/// decompressed (at most `limit` bytes each); one that cannot be is skipped here, which
/// only keeps older records of its keys, and [`compact_batch`] reports it.
/// Batches of aborted transactions (`aborted`, by base offset) take no part: an
/// aborted record never hides an older committed one.
pub(crate) fn latest_offsets<'a>(
    batches: impl Iterator<Item = Batch<'a>>,
    (below, aborted): (i64, &HashSet<i64>),
    limit: usize,
    map: &mut HashMap<Vec<u8>, i64>,
) {
    let mut scratch = Vec::new();
    for b in batches {
        if b.is_control() || b.base_offset() >= below || aborted.contains(&b.base_offset()) {
            continue;
        }
        let Ok(records) = b.decode_records("", limit, &mut scratch) else {
            continue;
        };
        for r in records.flatten() {
            if r.offset >= below {
                break;
            }
            if let Some(k) = r.key {
                match map.get_mut(k) {
                    Some(o) => *o = (*o).max(r.offset),
                    None => {
                        map.insert(k.to_vec(), r.offset);
                    }
                }
            }
        }
    }
}

/// Rewrites one batch for compaction: keeps records without a key and records that are
/// the latest for their key, drops tombstones older than `tombstone_cutoff`. Appends the
/// result (same base offset, leader epoch and producer fields) to `out` and returns
/// whether anything changed. Control batches are kept as
/// they are; a compressed batch is decompressed (at most `limit` bytes; an error names
/// `location` and the batch) and, if records go, rewritten with the same codec, as
/// Kafka's cleaner does.
pub(crate) fn compact_batch(
    b: &Batch<'_>,
    latest: &HashMap<Vec<u8>, i64>,
    tombstone_cutoff: i64,
    (location, limit): (&str, usize),
    out: &mut Vec<u8>,
) -> Result<bool> {
    if b.is_control() {
        out.extend_from_slice(b.as_bytes());
        return Ok(false);
    }
    let codec = b.codec()?;
    let mut plain = Vec::new();
    if codec != Compression::None {
        b.decompress_into(location, limit, &mut plain)?;
    }
    let records = || -> Records<'_> {
        if codec == Compression::None {
            b.records()
        } else {
            b.records_in(&plain)
        }
    };
    let drop_tombstones = b.max_timestamp() < tombstone_cutoff;
    let keep = |r: &crate::record::Record<'_>| match r.key {
        None => true,
        Some(k) => {
            latest.get(k).is_none_or(|&o| o == r.offset) && !(drop_tombstones && r.value.is_none())
        }
    };
    let mut kept = 0;
    for r in records() {
        if keep(&r?) {
            kept += 1;
        }
    }
    if kept == b.record_count() {
        out.extend_from_slice(b.as_bytes());
        return Ok(false);
    }
    if kept == 0 {
        return Ok(true);
    }
    let mut builder = BatchBuilder::with_capacity(b.len())
        .producer(b.producer_id(), b.producer_epoch(), b.base_sequence())
        .attributes(b.attributes())
        .compression(codec);
    let base = b.base_offset();
    for r in records() {
        let r = r?;
        if keep(&r) {
            builder.push_record(
                (r.offset - base) as i32,
                r.timestamp,
                r.key,
                r.value,
                r.headers.iter(),
            );
        }
    }
    let start = out.len();
    builder.finish_into(out);
    // Both fields lie outside the CRC; the epoch keeps the leader-epoch cache true.
    set_base_offset(&mut out[start..], base);
    set_partition_leader_epoch(&mut out[start..], b.partition_leader_epoch());
    Ok(true)
}

/// What compaction needs to know of one batch for transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHead {
    pub(crate) base: i64,
    pub(crate) producer_id: i64,
    pub(crate) transactional: bool,
    pub(crate) control: bool,
    pub(crate) max_timestamp: i64,
}

impl BatchHead {
    fn of(b: &Batch<'_>) -> BatchHead {
        BatchHead {
            base: b.base_offset(),
            producer_id: b.producer_id(),
            transactional: b.is_transactional(),
            control: b.is_control(),
            max_timestamp: b.max_timestamp(),
        }
    }
}

/// What compaction does to transactions (Kafka's cleaner): the batches it drops
/// beyond the key rule, and the aborted transactions left without data.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TxnCleaning {
    /// Base offsets of the batches of aborted transactions below the bound: they take
    /// no part in the latest offset of a key.
    pub(crate) aborted: HashSet<i64>,
    /// Base offsets of the batches dropped whole: aborted data, and markers.
    pub(crate) dropped: HashSet<i64>,
    /// The aborted transactions whose data is all dropped: their index entries go.
    pub(crate) gone: Vec<AbortedTxn>,
}

/// Decides, over every batch of the log (`heads`, in offset order), what compaction
/// does to transactions below `bound` (the end of the segments it rewrites, at most
/// the last stable offset), `aborted` being the log's aborted transactions and
/// `cutoff` the `delete.retention.ms` horizon:
///
/// - the data of an aborted transaction goes, unless one of its batches is the last
///   data batch of its producer in the log (kept, as Kafka keeps it, so the producer's
///   sequence survives a rebuild of its state): then all of it stays;
/// - a control batch (COMMIT or ABORT marker) goes once no data of its transaction is
///   left before it (as the log was before this pass: a marker outlives its data by
///   at least one pass) and its timestamp is older than `cutoff`.
pub(crate) fn txn_cleaning(
    heads: &[BatchHead],
    aborted: &[AbortedTxn],
    bound: i64,
    cutoff: i64,
) -> TxnCleaning {
    let mut out = TxnCleaning::default();
    let mut last_data: HashMap<i64, i64> = HashMap::new();
    for h in heads.iter().filter(|h| !h.control && h.producer_id >= 0) {
        last_data.insert(h.producer_id, h.base);
    }
    for a in aborted.iter().filter(|a| a.first_offset < bound) {
        let of_it: Vec<i64> = heads
            .iter()
            .filter(|h| {
                h.transactional
                    && !h.control
                    && h.producer_id == a.producer_id
                    && (a.first_offset..a.last_offset).contains(&h.base)
            })
            .map(|h| h.base)
            .collect();
        out.aborted.extend(of_it.iter().copied());
        let keeps_last = of_it
            .iter()
            .any(|b| last_data.get(&a.producer_id) == Some(b));
        if a.last_offset < bound && !keeps_last {
            out.dropped.extend(of_it);
            out.gone.push(*a);
        }
    }
    let mut has_data: HashSet<i64> = HashSet::new();
    for h in heads.iter().take_while(|h| h.base < bound) {
        if !h.transactional {
            continue;
        }
        if !h.control {
            has_data.insert(h.producer_id);
        } else if !has_data.remove(&h.producer_id) && h.max_timestamp < cutoff {
            out.dropped.insert(h.base);
        }
    }
    out
}

/// The segments a compaction pass rewrites (see [`compaction_rewrites`]).
#[derive(Default)]
pub(crate) struct Compaction {
    /// Each segment that changes, with its new bytes.
    pub(crate) rewritten: Vec<(Arc<Segment>, Vec<u8>)>,
    /// Records the new bytes no longer hold.
    pub(crate) records_removed: u64,
    /// The aborted transactions left without data: their index entries go.
    pub(crate) gone: Vec<AbortedTxn>,
}

/// What compaction makes of the sealed segments of `segs` (oldest first, the active one
/// last, never rewritten) wholly below `stable` (the last stable offset, at most the
/// high watermark: nothing of an undecided transaction is cleaned): each segment it
/// changes with its new bytes, and the records removed. The latest offset of each key
/// is taken over every segment up to `stable`, without the records of aborted
/// transactions (`aborted`: the log's); tombstones older than `cutoff` go (see
/// [`compact_batch`]), and so do the data of aborted transactions and old markers
/// (see [`txn_cleaning`]; `log`: the log's name and the decompression limit).
pub(crate) fn compaction_rewrites(
    segs: &[Arc<Segment>],
    (stable, aborted): (i64, &[AbortedTxn]),
    cutoff: i64,
    log: (&str, usize),
) -> Result<Compaction> {
    let (name, limit) = log;
    let sealed = &segs[..segs.len() - 1];
    let rewritable = sealed
        .iter()
        .take_while(|s| s.next_offset() <= stable)
        .count();
    let bound = match rewritable {
        0 => return Ok(Compaction::default()),
        n => sealed[n - 1].next_offset(),
    };
    let mut heads = Vec::new();
    for seg in segs.iter() {
        // Every batch, or an error: a damaged header must not make compaction keep
        // only the batches before it.
        let view = seg.view()?;
        for b in view.checked_batches() {
            heads.push(BatchHead::of(&b?));
        }
    }
    let txns = txn_cleaning(&heads, aborted, bound, cutoff);
    let mut latest = HashMap::new();
    for seg in segs.iter() {
        let view = seg.view()?;
        latest_offsets(view.batches(), (stable, &txns.aborted), limit, &mut latest);
    }
    let mut rewritten: Vec<(Arc<Segment>, Vec<u8>)> = Vec::new();
    let mut records_removed = 0u64;
    for seg in &sealed[..rewritable] {
        let view = seg.view()?;
        let mut bytes = Vec::with_capacity(seg.size());
        let mut changed = false;
        for b in view.batches() {
            if txns.dropped.contains(&b.base_offset()) {
                changed = true;
                continue;
            }
            changed |= compact_batch(&b, &latest, cutoff, (name, limit), &mut bytes)?;
        }
        if changed {
            let before: i64 = view.batches().map(|b| b.record_count() as i64).sum();
            let after: i64 = batches(&bytes)
                .flatten()
                .map(|b| b.record_count() as i64)
                .sum();
            records_removed += (before - after).max(0) as u64;
            rewritten.push((seg.clone(), bytes));
        }
    }
    Ok(Compaction {
        rewritten,
        records_removed,
        gone: txns.gone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batches;

    fn seg(size: u64, ts: i64) -> SegmentSummary {
        SegmentSummary {
            size,
            max_timestamp: ts,
        }
    }

    #[test]
    fn time_retention_stops_at_first_young_segment_and_spares_active() {
        let c = LogConfig {
            retention_ms: Some(100),
            ..LogConfig::default()
        };
        let segs = [
            seg(10, 0),
            seg(10, 50),
            seg(10, 950),
            seg(10, 0),
            seg(10, 0),
        ];
        assert_eq!(segments_to_delete(&segs, &c, 1000), 2);
        let all_old = [seg(10, 0), seg(10, 0)];
        assert_eq!(segments_to_delete(&all_old, &c, 1000), 1, "active is kept");
    }

    #[test]
    fn size_retention_keeps_log_at_or_above_limit() {
        let c = LogConfig {
            retention_ms: None,
            retention_bytes: Some(25),
            ..LogConfig::default()
        };
        let segs = [seg(10, 0), seg(10, 0), seg(10, 0), seg(5, 0)];
        // total 35: dropping the first leaves 25 (>= 25: ok), the second would leave 15.
        assert_eq!(segments_to_delete(&segs, &c, 0), 1);
        let c = LogConfig {
            retention_bytes: Some(100),
            ..c
        };
        assert_eq!(segments_to_delete(&segs, &c, 0), 0);
    }

    #[test]
    fn compact_policy_never_deletes_by_retention() {
        let c = LogConfig {
            retention_ms: Some(1),
            cleanup_policy: super::super::config::CleanupPolicy::Compact,
            ..LogConfig::default()
        };
        assert_eq!(segments_to_delete(&[seg(1, 0), seg(1, 0)], &c, 1000), 0);
    }

    #[test]
    fn compaction_keeps_latest_per_key_and_offsets() {
        let mut b = BatchBuilder::new();
        b.push(1, Some(b"a"), Some(b"1"), &[]);
        b.push(2, Some(b"b"), Some(b"1"), &[]);
        b.push(3, Some(b"a"), Some(b"2"), &[("h", b"x")]);
        b.push(4, None, Some(b"keyless"), &[]);
        b.push(5, Some(b"c"), None, &[]);
        let mut bytes = b.finish();
        set_base_offset(&mut bytes, 100);
        let batch = Batch::parse(&bytes).unwrap();
        let mut latest = HashMap::new();
        latest_offsets(
            std::iter::once(batch),
            (i64::MAX, &HashSet::new()),
            1 << 20,
            &mut latest,
        );
        latest.insert(b"b".to_vec(), 500); // b was overwritten later
        let mut out = Vec::new();
        assert!(compact_batch(&batch, &latest, 0, ("t-0", 1 << 20), &mut out).unwrap());
        let got: Vec<(i64, Option<Vec<u8>>)> = batches(&out)
            .flat_map(|b| {
                b.unwrap()
                    .records()
                    .map(|r| r.unwrap())
                    .map(|r| (r.offset, r.value.map(<[u8]>::to_vec)))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (102, Some(b"2".to_vec())),
                (103, Some(b"keyless".to_vec())),
                (104, None)
            ]
        );
        let nb = batches(&out).next().unwrap().unwrap();
        assert_eq!(nb.base_offset(), 100);
        assert_eq!(nb.last_offset(), 104);
        // Old tombstones go too.
        let mut out2 = Vec::new();
        compact_batch(&batch, &latest, 10, ("t-0", 1 << 20), &mut out2).unwrap();
        let n: usize = batches(&out2)
            .map(|b| b.unwrap().record_count() as usize)
            .sum();
        assert_eq!(n, 2);
    }

    #[test]
    fn compaction_rewrites_a_compressed_batch_with_its_codec() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = BatchBuilder::new().producer(3, 0, 0).compression(codec);
            for i in 0..50u8 {
                b.push(i64::from(i), Some(&[i % 5]), Some(&[i; 40]), &[]);
            }
            let mut bytes = b.finish();
            set_base_offset(&mut bytes, 1000);
            let batch = Batch::parse(&bytes).unwrap();
            let mut latest = HashMap::new();
            latest_offsets(
                std::iter::once(batch),
                (i64::MAX, &HashSet::new()),
                1 << 20,
                &mut latest,
            );
            assert_eq!(latest.len(), 5, "{codec}: keys of the compressed records");
            let mut out = Vec::new();
            assert!(compact_batch(&batch, &latest, 0, ("t-0", 1 << 20), &mut out).unwrap());
            let nb = Batch::parse(&out).unwrap();
            assert_eq!(nb.codec().unwrap(), codec, "the codec is kept");
            assert_eq!((nb.producer_id(), nb.base_offset()), (3, 1000));
            let mut scratch = Vec::new();
            let got: Vec<(i64, u8)> = nb
                .decode_records("t-0", 1 << 20, &mut scratch)
                .unwrap()
                .map(|r| r.unwrap())
                .map(|r| (r.offset, r.value.unwrap()[0]))
                .collect();
            assert_eq!(
                got,
                vec![(1045, 45), (1046, 46), (1047, 47), (1048, 48), (1049, 49)]
            );
            // A damaged stream is an error naming the batch, never a silent drop.
            let mut bad = bytes.clone();
            let n = bad.len();
            bad[n - 3] ^= 0xff;
            bad[61..].reverse();
            let crc = crate::record::crc32c(&bad[21..]);
            bad[17..21].copy_from_slice(&crc.to_be_bytes());
            let bad = Batch::parse(&bad).unwrap();
            let e = compact_batch(&bad, &latest, 0, ("t-0", 1 << 20), &mut Vec::new()).unwrap_err();
            assert!(
                e.to_string().contains("t-0 (batch at offset 1000)"),
                "{codec}: {e}"
            );
        }
    }
}
