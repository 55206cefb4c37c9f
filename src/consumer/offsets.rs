//! Committed offsets in the internal topic `__consumer_offsets`.
//!
//! Each commit is one record whose key and value use Kafka's own layout, so a Kafka tool
//! that dumps `__consumer_offsets` reads ours:
//!
//! - key (`OffsetCommitKey`, version 1): `version: i16 = 1, group: string, topic: string,
//!   partition: i32`;
//! - value (`OffsetCommitValue`, version 3): `version: i16 = 3, offset: i64,
//!   leader_epoch: i32, metadata: string, commit_timestamp: i64`;
//! - a deleted offset is a tombstone (null value).
//!
//! Strings are an `i16` big-endian length followed by UTF-8 bytes. The topic is
//! compacted, so the latest record per key is the committed offset; on open the broker
//! replays the whole topic in order and the last record per key wins.

use super::coordinator::Committed;
use super::wire::{Reader, put_str};
use crate::Result;

/// Where the coordinator writes commit records (the `__consumer_offsets` partition).
pub(crate) trait OffsetJournal: Send + Sync {
    /// Appends the records (key, value or None for a tombstone) as one batch and returns
    /// once they are in the log.
    fn append(&self, records: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<()>;
}

/// One decoded `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// An offset commit.
    Commit {
        group: String,
        topic: String,
        partition: i32,
        value: Committed,
    },
    /// A tombstone: the offset was deleted.
    Delete {
        group: String,
        topic: String,
        partition: i32,
    },
}

/// The key of a commit record.
pub(crate) fn encode_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + group.len() + topic.len());
    out.extend_from_slice(&1i16.to_be_bytes());
    put_str(&mut out, group);
    put_str(&mut out, topic);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

/// The value of a commit record (version 3).
pub(crate) fn encode_value(c: &Committed) -> Vec<u8> {
    let mut out = Vec::with_capacity(28 + c.metadata.len());
    out.extend_from_slice(&3i16.to_be_bytes());
    out.extend_from_slice(&c.offset.to_be_bytes());
    out.extend_from_slice(&c.leader_epoch.to_be_bytes());
    put_str(&mut out, &c.metadata);
    out.extend_from_slice(&c.commit_timestamp.to_be_bytes());
    out
}

/// Decodes one record of `__consumer_offsets`. `Ok(None)` for record kinds that are not
/// offset commits (Kafka's group metadata records, key version 2).
pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Entry>> {
    let mut k = Reader::new(key, "__consumer_offsets key");
    let version = k.i16()?;
    if !(0..=1).contains(&version) {
        return Ok(None);
    }
    let group = k.string()?;
    let topic = k.string()?;
    let partition = k.i32()?;
    let Some(value) = value else {
        return Ok(Some(Entry::Delete {
            group,
            topic,
            partition,
        }));
    };
    let mut v = Reader::new(value, "__consumer_offsets value");
    let version = v.i16()?;
    let offset = v.i64()?;
    let leader_epoch = if version >= 3 { v.i32()? } else { -1 };
    let metadata = v.string()?;
    let commit_timestamp = v.i64()?;
    Ok(Some(Entry::Commit {
        group,
        topic,
        partition,
        value: Committed {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
        },
    }))
}

/// The journal on partition 0 of `__consumer_offsets`.
pub(crate) struct LogJournal {
    pub(crate) partition: crate::topic::Partition,
}

impl OffsetJournal for LogJournal {
    fn append(&self, records: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<()> {
        let ts = crate::storage::now_ms();
        let mut builder = crate::record::BatchBuilder::new();
        for (key, value) in records {
            builder.push(ts, Some(key), value.as_deref(), &[]);
        }
        self.partition.append_batch(&builder.finish()).map(|_| ())
    }
}

/// Reads every commit record of the partition, oldest first.
pub(crate) fn load(partition: &crate::topic::Partition) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    let end = partition.log_end_offset();
    let mut offset = partition.log_start_offset();
    while offset < end {
        let slice = partition.read(offset, 1 << 20)?;
        if slice.is_empty() {
            break;
        }
        let mut next = offset;
        for batch in crate::record::batches(&slice) {
            let batch = batch?;
            for record in batch.records() {
                let record = record?;
                if record.offset < offset {
                    continue;
                }
                let Some(key) = record.key else { continue };
                if let Some(entry) = decode(key, record.value)? {
                    entries.push(entry);
                }
            }
            next = batch.last_offset() + 1;
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_round_trips() {
        let c = Committed {
            offset: 42,
            leader_epoch: -1,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
        };
        let key = encode_key("g", "t", 3);
        let value = encode_value(&c);
        assert_eq!(
            decode(&key, Some(&value)).unwrap(),
            Some(Entry::Commit {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                value: c
            })
        );
        assert_eq!(
            decode(&key, None).unwrap(),
            Some(Entry::Delete {
                group: "g".into(),
                topic: "t".into(),
                partition: 3
            })
        );
    }

    #[test]
    fn key_layout_is_kafkas() {
        assert_eq!(
            encode_key("g", "t", 1),
            vec![0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1]
        );
    }

    #[test]
    fn truncated_value_is_an_error_not_a_panic() {
        let key = encode_key("g", "t", 0);
        let err = decode(&key, Some(&[0, 3, 0, 0])).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn group_metadata_records_are_skipped() {
        assert_eq!(decode(&[0, 2, 0, 1, b'g'], Some(&[0, 3])).unwrap(), None);
    }
}
