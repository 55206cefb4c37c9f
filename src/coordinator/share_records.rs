//! The records of `__share_group_state`, in Kafka's layout (see docs/format.md): the
//! share coordinator's persisted state of every share-partition.
//!
//! The key is `(type: i16, GroupId: string, TopicId: uuid, Partition: i32)` with an
//! `i16`-length string; the value is `(version: i16 = 0)` followed by the fields in
//! Kafka's flexible encoding:
//!
//! | type | key | value |
//! |---|---|---|
//! | 0 | ShareSnapshotKey | `SnapshotEpoch: i32, StateEpoch: i32, LeaderEpoch: i32, StartOffset: i64, StateBatches` |
//! | 1 | ShareUpdateKey | `SnapshotEpoch: i32, LeaderEpoch: i32, StartOffset: i64, StateBatches` |
//!
//! `StateBatches` is a compact array of `(FirstOffset: i64, LastOffset: i64,
//! DeliveryState: i8, DeliveryCount: i16)`, each followed by an empty tagged-fields
//! section, as is the value. A snapshot is the whole state; an update sets the start
//! offset and the state of the batches it names.

use super::consumer_records::{Flex, TopicId, compact_len, no_tags};
use super::share_partition::StateBatch;
use super::wire::{Reader, put_str};
use crate::error::{RecordState, Result};

/// The internal topic of share-partition states.
pub const SHARE_GROUP_STATE_TOPIC: &str = "__share_group_state";

/// Record type of a whole state (`ShareSnapshotKey`).
pub(crate) const SNAPSHOT: i16 = 0;
/// Record type of a change (`ShareUpdateKey`).
pub(crate) const UPDATE: i16 = 1;

/// Which share-partition a record is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ShareKey {
    pub(crate) group: String,
    pub(crate) topic_id: TopicId,
    pub(crate) partition: i32,
}

/// A decoded record value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareState {
    pub(crate) snapshot_epoch: i32,
    pub(crate) state_epoch: i32,
    pub(crate) leader_epoch: i32,
    pub(crate) start_offset: i64,
    pub(crate) batches: Vec<StateBatch>,
}

/// The key bytes of a record of `kind` ([`SNAPSHOT`] or [`UPDATE`]).
pub(crate) fn key(kind: i16, k: &ShareKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + k.group.len());
    out.extend_from_slice(&kind.to_be_bytes());
    put_str(&mut out, &k.group);
    out.extend_from_slice(&k.topic_id);
    out.extend_from_slice(&k.partition.to_be_bytes());
    out
}

/// The value bytes of a record of `kind` (an update has no state epoch).
pub(crate) fn value(kind: i16, v: &ShareState) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 24 * v.batches.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&v.snapshot_epoch.to_be_bytes());
    if kind == SNAPSHOT {
        out.extend_from_slice(&v.state_epoch.to_be_bytes());
    }
    out.extend_from_slice(&v.leader_epoch.to_be_bytes());
    out.extend_from_slice(&v.start_offset.to_be_bytes());
    compact_len(&mut out, v.batches.len());
    for b in &v.batches {
        out.extend_from_slice(&b.first_offset.to_be_bytes());
        out.extend_from_slice(&b.last_offset.to_be_bytes());
        out.push(b.state.id() as u8);
        out.extend_from_slice(&b.delivery_count.to_be_bytes());
        no_tags(&mut out);
    }
    no_tags(&mut out);
    out
}

/// Decodes a record: its type, key and value; `None` for a record of another type or
/// version (skipped, as Kafka skips unknown records) or a tombstone. Malformed bytes are
/// [`Error::Corrupt`](crate::Error::Corrupt) naming the field's position.
pub(crate) fn decode(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<(i16, ShareKey, ShareState)>> {
    let mut k = Reader::new(key, "__share_group_state record key");
    let kind = k.i16()?;
    if kind != SNAPSHOT && kind != UPDATE {
        return Ok(None);
    }
    let group = k.string()?;
    let mut topic_id = [0u8; 16];
    topic_id.copy_from_slice(k.take(16)?);
    let partition = k.i32()?;
    let Some(value) = value else { return Ok(None) };
    let mut f = Flex(Reader::new(value, "__share_group_state record value"));
    if f.0.i16()? != 0 {
        return Ok(None);
    }
    let snapshot_epoch = f.0.i32()?;
    let state_epoch = if kind == SNAPSHOT { f.0.i32()? } else { 0 };
    let leader_epoch = f.0.i32()?;
    let start_offset = f.0.i64()?;
    let n = f.array()?;
    let mut batches = Vec::with_capacity(n);
    for _ in 0..n {
        let first_offset = f.0.i64()?;
        let last_offset = f.0.i64()?;
        let id = f.0.take(1)?[0] as i8;
        let state = RecordState::from_id(id)
            .ok_or_else(|| f.0.err(format!("unknown delivery state {id}")))?;
        let delivery_count = f.0.i16()?;
        if last_offset < first_offset {
            return Err(f.0.err(format!(
                "state batch {first_offset}..{last_offset} ends before it starts"
            )));
        }
        f.tags()?;
        batches.push(StateBatch {
            first_offset,
            last_offset,
            state,
            delivery_count,
        });
    }
    f.tags()?;
    let k = ShareKey {
        group,
        topic_id,
        partition,
    };
    let v = ShareState {
        snapshot_epoch,
        state_epoch,
        leader_epoch,
        start_offset,
        batches,
    };
    Ok(Some((kind, k, v)))
}

/// The partition of `__share_group_state` whose leader keeps the share-partition's
/// state: Java's `String.hashCode` of `"group:topicId:partition"` (as Kafka's
/// `SharePartitionKey`), its absolute value modulo `partitions`.
pub(crate) fn state_partition_for(k: &ShareKey, partitions: i32) -> i32 {
    let id = uuid_string(&k.topic_id);
    let key = format!("{}:{}:{}", k.group, id, k.partition);
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    (hash & 0x7fff_ffff) % partitions.max(1)
}

/// The id in Kafka's text form (URL-safe base64 without padding).
fn uuid_string(id: &TopicId) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (ShareKey, ShareState) {
        let k = ShareKey {
            group: "g".into(),
            topic_id: super::super::topic_id("t"),
            partition: 3,
        };
        let v = ShareState {
            snapshot_epoch: 2,
            state_epoch: 0,
            leader_epoch: 7,
            start_offset: 10,
            batches: vec![
                StateBatch {
                    first_offset: 10,
                    last_offset: 12,
                    state: RecordState::Available,
                    delivery_count: 1,
                },
                StateBatch {
                    first_offset: 13,
                    last_offset: 13,
                    state: RecordState::Archived,
                    delivery_count: 5,
                },
            ],
        };
        (k, v)
    }

    #[test]
    fn records_round_trip() {
        let (k, v) = sample();
        for kind in [SNAPSHOT, UPDATE] {
            let got = decode(&key(kind, &k), Some(&value(kind, &v))).unwrap();
            assert_eq!(got, Some((kind, k.clone(), v.clone())));
        }
    }

    #[test]
    fn the_bytes_are_kafkas_layout() {
        let (k, v) = sample();
        let key = key(SNAPSHOT, &k);
        assert_eq!(&key[..5], &[0, 0, 0, 1, b'g']);
        assert_eq!(&key[21..], &3i32.to_be_bytes());
        let update = value(UPDATE, &v);
        // version, snapshot epoch, leader epoch, start offset, 2 batches (compact: 3).
        assert_eq!(&update[..2], &[0, 0]);
        assert_eq!(&update[6..10], &7i32.to_be_bytes());
        assert_eq!(&update[10..18], &10i64.to_be_bytes());
        assert_eq!(update[18], 3);
        assert_eq!(update.len(), 18 + 1 + 2 * (8 + 8 + 1 + 2 + 1) + 1);
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let (k, v) = sample();
        let value = value(SNAPSHOT, &v);
        let key = key(SNAPSHOT, &k);
        for cut in 0..value.len() {
            assert!(decode(&key, Some(&value[..cut])).is_err(), "cut at {cut}");
        }
        let mut bad = value.clone();
        bad[2 + 4 + 4 + 4 + 8 + 1 + 16] = 3; // the first batch's delivery state
        let err = decode(&key, Some(&bad)).unwrap_err().to_string();
        assert!(err.contains("unknown delivery state 3"), "{err}");
        assert_eq!(decode(&[0, 9], None).unwrap(), None, "another record type");
    }

    #[test]
    fn topic_ids_print_as_kafka_prints_them() {
        let id = [0u8; 16];
        assert_eq!(uuid_string(&id), "AAAAAAAAAAAAAAAAAAAAAA");
        let mut id = [0u8; 16];
        id[15] = 1;
        assert_eq!(uuid_string(&id), "AAAAAAAAAAAAAAAAAAAAAQ");
    }
}
