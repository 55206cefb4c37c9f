//! Committed offsets and group metadata in the internal topic `__consumer_offsets`.
//!
//! Each record's key and value use Kafka's own layout (see docs/format.md), so a Kafka
//! tool that dumps `__consumer_offsets` reads ours:
//!
//! - an offset commit: key `OffsetCommitKey` v1 `(version: i16 = 1, group: string,
//!   topic: string, partition: i32)`, value `OffsetCommitValue` v3 `(version: i16 = 3,
//!   offset: i64, leader_epoch: i32, metadata: string, commit_timestamp: i64)`;
//! - a group's metadata: key `GroupMetadataKey` v2 `(version: i16 = 2, group: string)`,
//!   value `GroupMetadataValue` v3 (protocol type, generation, protocol, leader, state
//!   timestamp, and per member its ids, client, timeouts, subscription and assignment);
//! - a deleted offset or group is a tombstone (null value).
//!
//! Strings are an `i16` big-endian length followed by UTF-8 bytes (-1 = null). The topic
//! is compacted, so the latest record per key wins; when the coordinator loads, it
//! replays the partition in order.
//!
//! A TxnOffsetCommit's records are the same offset commits, in a transactional batch of
//! the committing producer (its id and epoch, base sequence 0, as Kafka's coordinator
//! writes them); the COMMIT or ABORT marker the transaction coordinator then appends to
//! the partition decides them ([`Logged`]).

use super::wire::{Reader, put_bytes, put_str};
use crate::error::Result;

/// A record of `__consumer_offsets`: its key and its value (None for a tombstone).
pub type JournalRecord = (Vec<u8>, Option<Vec<u8>>);

/// Where the coordinator writes its records (the `__consumer_offsets` partition). A
/// replicated partition makes `append` wait for its acknowledgements (acks=all); an
/// error means nothing may be taken as stored.
pub(crate) trait OffsetJournal: Send + Sync {
    /// Appends the records as one batch and returns once they are in the log.
    fn append(&self, records: &[JournalRecord]) -> Result<()>;
    /// Appends the records as one transactional batch of producer `producer_id` at
    /// `producer_epoch` (a TxnOffsetCommit: pending until its marker), and returns once
    /// they are in the log.
    fn append_txn(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        records: &[JournalRecord],
    ) -> Result<()>;
    /// Appends the records as one batch and returns once they are in the leader's log,
    /// with the wait for the in-sync replicas still to run, so that the caller can run
    /// it without its locks ([`append`](Self::append) waits at once). The batches are
    /// in the log in the order of these calls.
    fn append_deferred(&self, records: &[JournalRecord]) -> Result<JournalWait> {
        self.append(records)?;
        Ok(Box::new(|| Ok(())))
    }
}

/// The rest of an [`OffsetJournal::append_deferred`]: waits for the in-sync replicas.
pub(crate) type JournalWait = Box<dyn FnOnce() -> Result<()> + Send>;

/// A committed offset as the coordinator keeps it (`OffsetCommitValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp: i64,
}

/// One member in a group's metadata record (`GroupMetadataValue.MemberMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMember {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub(crate) subscription: Vec<u8>,
    pub(crate) assignment: Vec<u8>,
}

/// A group's metadata record (`GroupMetadataValue`, written as version 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredGroup {
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    /// When the group entered its current state (ms since the epoch), -1 if unknown.
    pub(crate) current_state_timestamp: i64,
    pub(crate) members: Vec<StoredMember>,
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
    /// A group's metadata.
    Group { group: String, value: StoredGroup },
    /// A tombstone: the group was deleted (or emptied and expired).
    DeleteGroup { group: String },
}

/// A record of `__consumer_offsets` as it was logged: on its own, in a transactional
/// batch (a TxnOffsetCommit, which its producer's marker decides), or a marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Logged {
    /// A record of a plain batch.
    Plain(Entry),
    /// A record of a transactional batch of `producer_id`.
    Txn {
        producer_id: i64,
        producer_epoch: i16,
        entry: Entry,
    },
    /// The COMMIT (`commit` true) or ABORT marker of `producer_id`'s transaction.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
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

/// The key of a group metadata record (version 2).
pub(crate) fn encode_group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    out.extend_from_slice(&2i16.to_be_bytes());
    put_str(&mut out, group);
    out
}

/// The value of a group metadata record (version 3).
pub(crate) fn encode_group_value(g: &StoredGroup) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&3i16.to_be_bytes());
    put_str(&mut out, &g.protocol_type);
    out.extend_from_slice(&g.generation.to_be_bytes());
    put_nullable_str(&mut out, g.protocol.as_deref());
    put_nullable_str(&mut out, g.leader.as_deref());
    out.extend_from_slice(&g.current_state_timestamp.to_be_bytes());
    out.extend_from_slice(&(g.members.len() as i32).to_be_bytes());
    for m in &g.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
        out.extend_from_slice(&m.session_timeout_ms.to_be_bytes());
        put_bytes(&mut out, Some(&m.subscription));
        put_bytes(&mut out, Some(&m.assignment));
    }
    out
}

fn decode_group_value(value: &[u8]) -> Result<StoredGroup> {
    let mut v = Reader::new(value, "__consumer_offsets group metadata value");
    let version = v.i16()?;
    if !(0..=3).contains(&version) {
        return Err(v.err(format!(
            "GroupMetadataValue version {version} is not supported (0 to 3 are)"
        )));
    }
    let protocol_type = v.string()?;
    let generation = v.i32()?;
    let protocol = v.nullable_string()?;
    let leader = v.nullable_string()?;
    let current_state_timestamp = if version >= 2 { v.i64()? } else { -1 };
    let n = v.count()?;
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let member_id = v.string()?;
        let group_instance_id = if version >= 3 {
            v.nullable_string()?
        } else {
            None
        };
        let client_id = v.string()?;
        let client_host = v.string()?;
        let rebalance_timeout_ms = if version >= 1 { v.i32()? } else { -1 };
        let session_timeout_ms = v.i32()?;
        let subscription = v.bytes()?.unwrap_or_default();
        let assignment = v.bytes()?.unwrap_or_default();
        members.push(StoredMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(StoredGroup {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

/// Decodes one record of `__consumer_offsets`. `Ok(None)` for record kinds tidelog
/// does not use (transaction markers' keys and future versions).
pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Entry>> {
    let mut k = Reader::new(key, "__consumer_offsets key");
    let version = k.i16()?;
    if version == 2 {
        let group = k.string()?;
        return Ok(Some(match value {
            None => Entry::DeleteGroup { group },
            Some(value) => Entry::Group {
                group,
                value: decode_group_value(value)?,
            },
        }));
    }
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
    fn append(&self, records: &[JournalRecord]) -> Result<()> {
        self.write(crate::record::BatchBuilder::new(), records)
    }

    fn append_deferred(&self, records: &[JournalRecord]) -> Result<JournalWait> {
        self.start(crate::record::BatchBuilder::new(), records)
    }

    fn append_txn(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        records: &[JournalRecord],
    ) -> Result<()> {
        let builder = crate::record::BatchBuilder::new()
            .producer(producer_id, producer_epoch, 0)
            .attributes(crate::record::TRANSACTIONAL_BIT);
        self.write(builder, records)
    }
}

impl LogJournal {
    /// Appends `records` as one batch of `builder` and waits for the replicas.
    fn write(&self, builder: crate::record::BatchBuilder, records: &[JournalRecord]) -> Result<()> {
        self.start(builder, records)?()
    }

    /// Appends `records` as one batch of `builder`; the wait for the replicas is
    /// returned.
    fn start(
        &self,
        mut builder: crate::record::BatchBuilder,
        records: &[JournalRecord],
    ) -> Result<JournalWait> {
        let ts = crate::storage::now_ms();
        for (key, value) in records {
            builder.push(ts, Some(key), value.as_deref(), &[]);
        }
        let (info, appended) = self.partition.append_batch_at(&builder.finish())?;
        // acks=all: a commit is answered once every in-sync replica has it (at once on a
        // single node), under the leadership it was appended in.
        let partition = self.partition.clone();
        Ok(Box::new(move || {
            partition.wait_committed_at(info.last_offset, appended, OFFSETS_COMMIT_TIMEOUT)
        }))
    }
}

/// How long a commit waits for the in-sync replicas (Kafka `offsets.commit.timeout.ms`).
const OFFSETS_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads every record of the partition, oldest first, to its log end (a new leader
/// loads what it has, committed or not, as Kafka's coordinator does): the offsets and
/// group records with the transactional batches and markers they were logged in, and
/// every record with a key of a batch that is not a marker, as it is.
pub(crate) fn load(
    partition: &crate::topic::Partition,
) -> Result<(Vec<Logged>, Vec<JournalRecord>)> {
    let mut entries = Vec::new();
    let mut records = Vec::new();
    let end = partition.log_end_offset();
    let mut offset = partition.log_start_offset();
    while offset < end {
        let slice =
            partition
                .log()
                .read_bounded(offset, 1 << 20, crate::storage::ReadLimit::LogEnd)?;
        if slice.is_empty() {
            break;
        }
        let mut next = offset;
        for batch in crate::record::batches(&slice) {
            let batch = batch?;
            next = batch.last_offset() + 1;
            if batch.last_offset() < offset {
                continue;
            }
            let (producer_id, producer_epoch) = (batch.producer_id(), batch.producer_epoch());
            if batch.is_control() {
                let location = format!("__consumer_offsets-{}", partition.index());
                if let Some(marker) = crate::record::EndTxnMarker::of_batch(&batch, &location)? {
                    entries.push(Logged::Marker {
                        producer_id,
                        producer_epoch,
                        commit: marker.commit,
                    });
                }
                continue;
            }
            let txn = batch.is_transactional() && producer_id >= 0;
            for record in batch.records() {
                let record = record?;
                if record.offset < offset {
                    continue;
                }
                let Some(key) = record.key else { continue };
                if let Some(entry) = decode(key, record.value)? {
                    entries.push(match txn {
                        false => Logged::Plain(entry),
                        true => Logged::Txn {
                            producer_id,
                            producer_epoch,
                            entry,
                        },
                    });
                }
                records.push((key.to_vec(), record.value.map(<[u8]>::to_vec)));
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok((entries, records))
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
    fn group_metadata_round_trips() {
        let g = StoredGroup {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("a-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![StoredMember {
                member_id: "a-1".into(),
                group_instance_id: Some("host-a".into()),
                client_id: "a".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 10_000,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        };
        let key = encode_group_key("g");
        assert_eq!(key, vec![0, 2, 0, 1, b'g']);
        let value = encode_group_value(&g);
        assert_eq!(&value[..2], &[0, 3]);
        assert_eq!(
            decode(&key, Some(&value)).unwrap(),
            Some(Entry::Group {
                group: "g".into(),
                value: g.clone()
            })
        );
        assert_eq!(
            decode(&key, None).unwrap(),
            Some(Entry::DeleteGroup { group: "g".into() })
        );
        // Every truncation of the value is a corruption error, never a panic.
        for cut in 0..value.len() {
            assert!(decode(&key, Some(&value[..cut])).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn unknown_key_versions_are_skipped() {
        assert_eq!(decode(&[0, 9, 0, 1, b'g'], Some(&[0, 3])).unwrap(), None);
    }
}
