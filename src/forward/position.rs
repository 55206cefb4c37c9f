//! Where a forwarder stands, found from what it wrote: the headers every forwarded
//! record carries, the scan of a remote partition's records for the last local offset
//! of each source, and the rules that turn those into where to resume and what to skip.
//! Pure functions over bytes and numbers; the network calls are `mod.rs`'s.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::producer::partition_for_key;
use crate::record::{Batch, ControlRecordType, EndTxnMarker, Headers};

/// The header naming the local offset a forwarded record had (decimal ASCII).
pub const OFFSET_HEADER: &str = "tidelog.forward.offset";
/// The header naming where a forwarded record came from: `NAME/TOPIC/PARTITION` (the
/// forwarder's name, the local topic and partition).
pub const SOURCE_HEADER: &str = "tidelog.forward.source";

/// The value of [`SOURCE_HEADER`] for `partition` of `topic` forwarded by `name`.
pub(crate) fn source(name: &str, topic: &str, partition: i32) -> String {
    format!("{name}/{topic}/{partition}")
}

/// `n` in decimal, as `n.to_string()` writes it, in `buf` (no allocation: one a
/// forwarded record, for its [`OFFSET_HEADER`]).
pub(crate) fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    let mut m = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// The source and local offset a forwarded record's headers carry; None for a record
/// without both headers (written by someone else).
///
/// # Errors
/// [`Error::Corrupt`] naming `location` when the offset header is there but is not a
/// decimal number (someone else's header of the same name).
pub(crate) fn forwarded<'a>(
    headers: &Headers<'a>,
    location: &str,
) -> Result<Option<(&'a [u8], i64)>> {
    let mut source = None;
    let mut offset = None;
    for (name, value) in headers.iter() {
        match name {
            SOURCE_HEADER => source = value,
            OFFSET_HEADER => offset = value,
            _ => {}
        }
    }
    let (Some(source), Some(offset)) = (source, offset) else {
        return Ok(None);
    };
    let parsed = std::str::from_utf8(offset)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|o| *o >= 0);
    match parsed {
        Some(o) => Ok(Some((source, o))),
        None => Err(Error::corrupt(
            location,
            0,
            format!(
                "header {OFFSET_HEADER} holds {:?}, not a local offset",
                String::from_utf8_lossy(offset)
            ),
        )),
    }
}

/// The last `(epoch, sequence)` read of each idempotent producer, by producer id.
pub(crate) type Sequences = HashMap<i64, (i16, i32)>;

/// What the scan of a remote partition knows of transactions from one window to the
/// next. It reads the partition backwards in windows, each window forwards, so the
/// outcome of a transactional batch (the next marker of its producer) is later in its
/// window or in a window read before.
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    /// By producer: the largest local offset of each wanted source in transactional
    /// batches read since the producer's last marker in this window, whose outcome is
    /// not known yet.
    pending: HashMap<i64, HashMap<usize, i64>>,
    /// By producer: whether its first marker in this window commits.
    first: HashMap<i64, bool>,
    /// By producer: whether its first marker above this window commits.
    above: HashMap<i64, bool>,
}

impl Transactions {
    /// A marker of `producer`: what it committed counts in `found`, what it aborted
    /// does not.
    fn marker(&mut self, producer: i64, commit: bool, found: &mut HashMap<usize, i64>) {
        self.first.entry(producer).or_insert(commit);
        if let Some(pending) = self.pending.remove(&producer)
            && commit
        {
            raise(found, pending);
        }
    }

    /// Ends a window: the transactional records after a producer's last marker in it
    /// count when the producer's first marker above the window commits; the window's
    /// first markers are the ones above the window read next (the one before it). A
    /// transaction with no marker above is open (or its producer was fenced before it
    /// ended it): its records do not count.
    pub(crate) fn end_window(&mut self, found: &mut HashMap<usize, i64>) {
        for (producer, pending) in self.pending.drain() {
            if self.above.get(&producer) == Some(&true) {
                raise(found, pending);
            }
        }
        self.above.extend(self.first.drain());
    }
}

/// Raises `found[i]` to each offset of `more`.
fn raise(found: &mut HashMap<usize, i64>, more: HashMap<usize, i64>) {
    for (i, offset) in more {
        let e = found.entry(i).or_insert(offset);
        *e = (*e).max(offset);
    }
}

/// Reads the record batches `bytes` (a Fetch answer's from offset `from`, the last
/// possibly cut short) that start before offset `to` (the window's end: what is past it
/// was read with the window before, whose markers are known already), and
/// raises `found[i]` to the largest local offset of a record whose source is
/// `wanted[i]`, and `read[p]` to the `(epoch, last sequence)` of the last batch of
/// producer `p`. A transactional batch's records count once its transaction's marker
/// says it committed (`txns`; an aborted transaction's records are not there for a
/// reader of committed records). Returns the offset after the last whole batch (`from`
/// when there is none). Compressed batches are decompressed, at most `limit` bytes
/// each.
///
/// # Errors
/// A batch that does not decode, a marker that does not parse, or a bad offset header,
/// naming `location`.
pub(crate) fn scan(
    bytes: &[u8],
    (from, to): (i64, i64),
    wanted: &HashMap<Vec<u8>, usize>,
    (found, read, txns): (&mut HashMap<usize, i64>, &mut Sequences, &mut Transactions),
    (location, limit): (&str, usize),
) -> Result<i64> {
    let mut next = from;
    let mut rest = bytes;
    let mut scratch = Vec::new();
    while let Some(size) = crate::record::batch_size(rest) {
        if size > rest.len() {
            break;
        }
        let batch = Batch::parse(&rest[..size])?;
        if batch.base_offset() >= to {
            break;
        }
        rest = &rest[size..];
        next = next.max(batch.last_offset() + 1);
        if batch.is_control() {
            if batch.is_transactional()
                && let Some(marker) = EndTxnMarker::of_batch(&batch, location)?
            {
                let commit = marker.kind() == ControlRecordType::Commit;
                txns.marker(batch.producer_id(), commit, found);
            }
            continue;
        }
        if batch.producer_id() >= 0 && batch.base_sequence() >= 0 {
            let last = (
                batch.producer_epoch(),
                batch
                    .base_sequence()
                    .wrapping_add(batch.last_offset_delta()),
            );
            let e = read.entry(batch.producer_id()).or_insert(last);
            *e = (*e).max(last);
        }
        let into = if batch.is_transactional() {
            txns.pending.entry(batch.producer_id()).or_default()
        } else {
            &mut *found
        };
        for r in batch.decode_records(location, limit, &mut scratch)? {
            let r = r?;
            if let Some((source, offset)) = forwarded(&r.headers, location)?
                && let Some(&i) = wanted.get(source)
            {
                let e = into.entry(i).or_insert(offset);
                *e = (*e).max(offset);
            }
        }
    }
    Ok(next)
}

/// The producers of `ours` (the ids the last session sent with) that the partition's
/// leader holds records of that no reader sees yet: the last batch the leader appended
/// (`leader`: producer id, epoch and last sequence, as DescribeProducers answers) is
/// past the last one read below the high watermark (`read`). Such records were
/// appended and not replicated to every in-sync replica when the session ended; they
/// may still be committed, so what to send again is known only once they are. Each as
/// `(producer id, last sequence read or -1, last sequence appended)`.
pub(crate) fn unreplicated(
    ours: &[i64],
    leader: &[(i64, i16, i32)],
    read: &Sequences,
) -> Vec<(i64, i32, i32)> {
    appended_by(ours, leader)
        .filter_map(|&(id, epoch, last)| {
            let seen = read.get(&id).copied();
            let behind = seen.is_none_or(|seen| seen < (epoch, last));
            behind.then(|| (id, seen.map_or(-1, |(_, s)| s), last))
        })
        .collect()
}

/// The entries of `leader` (as [`unreplicated`] takes them) of producers of `ours` that
/// appended a record there.
pub(crate) fn appended_by<'a>(
    ours: &'a [i64],
    leader: &'a [(i64, i16, i32)],
) -> impl Iterator<Item = &'a (i64, i16, i32)> + 'a {
    leader
        .iter()
        .filter(|(id, _, last)| ours.contains(id) && *last >= 0)
}

/// The remote partition a local record goes to: the same number when both topics have
/// as many partitions; otherwise by key (Kafka's murmur2, as every Kafka client places
/// a key), and a record without a key to its local partition modulo the remote count
/// (so that a partition's unkeyed records stay in order in one remote partition).
pub(crate) fn target(key: Option<&[u8]>, partition: i32, local: i32, remote: i32) -> i32 {
    if local == remote {
        return partition;
    }
    match key {
        Some(k) => partition_for_key(k, remote),
        None => partition.rem_euclid(remote),
    }
}

/// The remote partitions records of local `partition` may go to.
pub(crate) fn targets(partition: i32, local: i32, remote: i32) -> std::ops::Range<i32> {
    if local == remote {
        partition..partition + 1
    } else {
        0..remote
    }
}

/// Where to resume reading a local partition: after the last record found forwarded in
/// each of its remote targets (`last[q]`, -1 for none), never before the position
/// committed locally (every record before it was acknowledged) nor before the log
/// start. A record between that and the last found in its own target was forwarded
/// already and is skipped ([`already_forwarded`]).
pub(crate) fn resume_at(committed: Option<i64>, log_start: i64, last: &[i64]) -> i64 {
    let found = last.iter().map(|l| l + 1).min().unwrap_or(0);
    found.max(committed.unwrap_or(0)).max(log_start)
}

/// True if the local record at `offset` bound for a remote partition whose last
/// forwarded record of the same source had local offset `last` is there already:
/// records of one source reach one remote partition in local order, so everything of it
/// up to `last` has.
pub(crate) fn already_forwarded(offset: i64, last: i64) -> bool {
    offset <= last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::BatchBuilder;

    #[test]
    fn decimal_writes_what_to_string_writes() {
        let mut buf = [0u8; 20];
        for n in [0, 1, 9, 10, 99, 100, 12_345, i64::MAX, -1, -10, i64::MIN] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes(), "{n}");
        }
        for n in (0..100_000).step_by(7) {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes(), "{n}");
        }
    }

    fn batch(base: i64, records: &[(Option<&str>, i64)], codec: crate::Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new().compression(codec);
        for (source, offset) in records {
            let o = offset.to_string();
            match source {
                Some(s) => b.push(
                    1,
                    None,
                    Some(b"v"),
                    &[(SOURCE_HEADER, s.as_bytes()), (OFFSET_HEADER, o.as_bytes())],
                ),
                None => b.push(1, None, Some(b"other"), &[("x", b"y")]),
            };
        }
        let mut bytes = b.finish();
        crate::record::set_base_offset(&mut bytes, base);
        bytes
    }

    fn wanted(sources: &[&str]) -> HashMap<Vec<u8>, usize> {
        sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_bytes().to_vec(), i))
            .collect()
    }

    #[test]
    fn the_scan_finds_each_sources_last_local_offset_among_other_writers() {
        let mut bytes = batch(
            10,
            &[(Some("edge/a/0"), 5), (None, 0), (Some("edge/a/1"), 7)],
            crate::Compression::None,
        );
        bytes.extend(batch(
            13,
            &[(Some("edge/a/0"), 6), (Some("other/a/0"), 900)],
            crate::Compression::Gzip,
        ));
        let whole = bytes.len();
        bytes.extend(batch(
            15,
            &[(Some("edge/a/0"), 8)],
            crate::Compression::None,
        ));
        // The last batch is cut short, as a Fetch answer may cut it.
        bytes.truncate(whole + 20);
        let w = wanted(&["edge/a/0", "edge/a/1", "edge/a/2"]);
        let mut found = HashMap::new();
        let mut read = Sequences::new();
        let next = scan(
            &bytes,
            (10, i64::MAX),
            &w,
            (&mut found, &mut read, &mut Transactions::default()),
            ("t-0", 1 << 20),
        )
        .unwrap();
        assert_eq!(next, 15, "after the last whole batch");
        assert_eq!(found.get(&0), Some(&6));
        assert_eq!(found.get(&1), Some(&7));
        assert_eq!(found.get(&2), None, "never forwarded here");
        // Nothing whole: the position stays.
        let mut none = HashMap::new();
        assert_eq!(
            scan(
                &bytes[whole..],
                (15, i64::MAX),
                &w,
                (&mut none, &mut read, &mut Transactions::default()),
                ("t-0", 1 << 20)
            )
            .unwrap(),
            15
        );
        assert!(none.is_empty());
    }

    #[test]
    fn the_scan_reads_each_producers_last_epoch_and_sequence() {
        let mut bytes = Vec::new();
        // Producer 7 at epoch 0, then 1 (its sequences start again), producer 9 once,
        // and a batch of no producer.
        for (base, producer, epoch, sequence, n) in [
            (0, 7, 0, 0, 3),
            (3, 9, 0, 40, 2),
            (5, 7, 0, 3, 2),
            (7, 7, 1, 0, 1),
            (8, -1, -1, -1, 2),
        ] {
            let records: Vec<(Option<&str>, i64)> = (0..n).map(|i| (Some("edge/a/0"), i)).collect();
            let mut b = batch(base, &records, crate::Compression::None);
            crate::record::set_producer(&mut b, producer, epoch, sequence);
            bytes.extend(b);
        }
        let (mut found, mut read) = (HashMap::new(), Sequences::new());
        let w = wanted(&["edge/a/0"]);
        assert_eq!(
            scan(
                &bytes,
                (0, i64::MAX),
                &w,
                (&mut found, &mut read, &mut Transactions::default()),
                ("t-0", 1 << 20)
            )
            .unwrap(),
            10
        );
        assert_eq!(
            read.get(&7),
            Some(&(1, 0)),
            "the latest epoch's last sequence"
        );
        assert_eq!(read.get(&9), Some(&(0, 41)));
        assert_eq!(
            read.len(),
            2,
            "no entry for a batch without a producer: {read:?}"
        );
    }

    /// A transactional batch of `producer` at `base`: `records` as [`batch`] takes them.
    fn txn_batch(base: i64, producer: i64, records: &[(Option<&str>, i64)]) -> Vec<u8> {
        let mut b = BatchBuilder::new()
            .producer(producer, 0, base as i32)
            .attributes(0x10);
        for (source, offset) in records {
            let o = offset.to_string();
            let s = source.unwrap_or("other");
            b.push(
                1,
                None,
                Some(b"v"),
                &[(SOURCE_HEADER, s.as_bytes()), (OFFSET_HEADER, o.as_bytes())],
            );
        }
        let mut bytes = b.finish();
        crate::record::set_base_offset(&mut bytes, base);
        assert!(Batch::parse(&bytes).unwrap().is_transactional());
        bytes
    }

    /// The marker batch ending `producer`'s transaction at `offset`.
    fn marker(offset: i64, producer: i64, commit: bool) -> Vec<u8> {
        let m = if commit {
            EndTxnMarker::commit(0)
        } else {
            EndTxnMarker::abort(0)
        };
        let mut bytes = m.batch(producer, 0, 1);
        crate::record::set_base_offset(&mut bytes, offset);
        bytes
    }

    #[test]
    fn the_scan_counts_committed_transactions_only_whichever_window_their_marker_is_in() {
        let w = wanted(&["edge/a/0", "edge/a/1"]);
        // Window [0, 6): producer 5 commits 0..=1, producer 6 aborts 2..=3 (a killed
        // session's copy), producer 5 writes 4 whose marker is in the window above.
        let mut low = txn_batch(0, 5, &[(Some("edge/a/0"), 0), (Some("edge/a/1"), 0)]);
        low.extend(marker(2, 5, true));
        low.extend(txn_batch(
            3,
            6,
            &[(Some("edge/a/0"), 1), (Some("edge/a/1"), 1)],
        ));
        low.extend(marker(5, 6, false));
        let mut low_end = txn_batch(6, 5, &[(Some("edge/a/0"), 1)]);
        // Window [7, 10): producer 5's commit of offset 1 of edge/a/0, then producer 7's
        // transaction without a marker (open, or fenced before it ended).
        let mut high = marker(7, 5, true);
        high.extend(txn_batch(8, 7, &[(Some("edge/a/1"), 9)]));
        low.append(&mut low_end);

        let mut txns = Transactions::default();
        let (mut found, mut read) = (HashMap::new(), Sequences::new());
        let next = scan(
            &high,
            (7, i64::MAX),
            &w,
            (&mut found, &mut read, &mut txns),
            ("t-0", 1 << 20),
        )
        .unwrap();
        assert_eq!(next, 9);
        txns.end_window(&mut found);
        assert!(found.is_empty(), "nothing committed there: {found:?}");

        let mut below = HashMap::new();
        scan(
            &low,
            (0, 7),
            &w,
            (&mut below, &mut read, &mut txns),
            ("t-0", 1 << 20),
        )
        .unwrap();
        txns.end_window(&mut below);
        assert_eq!(
            below.get(&0),
            Some(&1),
            "committed by the marker above the window"
        );
        assert_eq!(below.get(&1), Some(&0), "the aborted copy does not count");
    }

    #[test]
    fn records_a_leader_appended_past_what_was_read_are_unreplicated() {
        let read: Sequences = [(7, (0, 99)), (8, (2, 5))].into_iter().collect();
        let ours = [7, 8, 11];
        // Read up to what the leader appended: nothing waits.
        assert!(unreplicated(&ours, &[(7, 0, 99), (8, 2, 5)], &read).is_empty());
        // Appended past what was read, at the same or a later epoch.
        assert_eq!(
            unreplicated(&ours, &[(7, 0, 120), (8, 3, 0)], &read),
            vec![(7, 99, 120), (8, 5, 0)]
        );
        // A producer of ours none of whose records was read yet, and one with none.
        assert_eq!(
            unreplicated(&ours, &[(11, 0, 4), (7, 0, 99)], &read),
            vec![(11, -1, 4)]
        );
        assert!(unreplicated(&ours, &[(11, 0, -1)], &read).is_empty());
        // Someone else's producer is not ours to wait for.
        assert!(unreplicated(&ours, &[(12, 0, 500)], &read).is_empty());
    }

    #[test]
    fn a_bad_offset_header_is_an_error_naming_the_partition() {
        let mut b = BatchBuilder::new();
        b.push(
            1,
            None,
            Some(b"v"),
            &[(SOURCE_HEADER, b"edge/a/0"), (OFFSET_HEADER, b"twelve")],
        );
        let bytes = b.finish();
        let mut found = HashMap::new();
        let e = scan(
            &bytes,
            (0, i64::MAX),
            &wanted(&["edge/a/0"]),
            (
                &mut found,
                &mut Sequences::new(),
                &mut Transactions::default(),
            ),
            ("remote-3", 1 << 20),
        )
        .unwrap_err();
        assert!(e.to_string().contains("remote-3"), "{e}");
        assert!(e.to_string().contains("twelve"), "{e}");
    }

    #[test]
    fn resuming_starts_after_the_last_record_found_in_every_target() {
        // Same partition counts: one target.
        assert_eq!(resume_at(None, 0, &[41]), 42);
        assert_eq!(resume_at(None, 0, &[-1]), 0, "nothing forwarded yet");
        // The local commit is a floor (the remote may have dropped old records by
        // retention), and so is the local log start.
        assert_eq!(resume_at(Some(50), 0, &[-1]), 50);
        assert_eq!(resume_at(Some(50), 0, &[60]), 61);
        assert_eq!(resume_at(None, 100, &[10]), 100);
        // Several targets: from the least advanced; the others skip what they have.
        assert_eq!(resume_at(None, 0, &[9, 4, 12]), 5);
        assert!(already_forwarded(9, 9));
        assert!(already_forwarded(7, 12));
        assert!(!already_forwarded(10, 9));
        assert_eq!(resume_at(Some(3), 0, &[9, -1]), 3, "one target has nothing");
    }

    #[test]
    fn records_go_to_the_same_partition_or_by_key() {
        assert_eq!(target(Some(b"k"), 2, 4, 4), 2);
        assert_eq!(target(None, 3, 4, 4), 3);
        assert_eq!(target(Some(b"k"), 2, 4, 6), partition_for_key(b"k", 6));
        assert_eq!(target(None, 5, 8, 3), 2);
        assert_eq!(targets(2, 4, 4), 2..3);
        assert_eq!(targets(2, 4, 6), 0..6);
    }

    #[test]
    fn the_source_header_names_forwarder_topic_and_partition() {
        let s = source("edge-1", "events", 3);
        assert_eq!(s, "edge-1/events/3");
        let mut b = BatchBuilder::new();
        b.push(
            1,
            None,
            Some(b"v"),
            &[(SOURCE_HEADER, s.as_bytes()), (OFFSET_HEADER, b"17")],
        );
        let bytes = b.finish();
        let batch = Batch::parse(&bytes).unwrap();
        let r = batch.records().next().unwrap().unwrap();
        assert_eq!(
            forwarded(&r.headers, "x").unwrap(),
            Some((s.as_bytes(), 17))
        );
    }
}
