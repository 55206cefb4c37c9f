//! The records of consumer-protocol groups (KIP-848) in `__consumer_offsets`, in
//! Kafka's layout (see docs/format.md): the key is `(type: i16, group: string[,
//! member: string])` with `i16`-length strings; the value is `(version: i16 = 0)`
//! followed by the record's fields in Kafka's flexible encoding (unsigned varint
//! lengths plus one, compact arrays, 16-byte UUIDs, an empty tagged-fields section
//! after each struct).
//!
//! | type | key | value |
//! |---|---|---|
//! | 3 | ConsumerGroupMetadataKey (group) | `Epoch: i32` |
//! | 4 | ConsumerGroupPartitionMetadataKey (group) | `Topics: [TopicId, TopicName, NumPartitions, PartitionMetadata: []]` |
//! | 5 | ConsumerGroupMemberMetadataKey (group, member) | `InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames: [string], SubscribedTopicRegex?, RebalanceTimeoutMs: i32, ServerAssignor?`; tagged 0: `ClassicMemberMetadata?` |
//! | 6 | ConsumerGroupTargetAssignmentMetadataKey (group) | `AssignmentEpoch: i32` |
//! | 7 | ConsumerGroupTargetAssignmentMemberKey (group, member) | `TopicPartitions: [TopicId, Partitions: [i32]]` |
//! | 8 | ConsumerGroupCurrentMemberAssignmentKey (group, member) | `MemberEpoch, PreviousMemberEpoch: i32, State: i8, AssignedPartitions, PartitionsPendingRevocation` |
//!
//! A tombstone (null value) deletes the record. Topics are stored by id, the id being
//! derived from the topic's name ([`topic_id`]); type 4 maps them back to names.

use super::wire::{Reader, put_str};
use crate::error::Result;

/// The record types of consumer-protocol groups.
pub(crate) const GROUP_EPOCH: i16 = 3;
pub(crate) const PARTITION_METADATA: i16 = 4;
pub(crate) const MEMBER_METADATA: i16 = 5;
pub(crate) const TARGET_EPOCH: i16 = 6;
pub(crate) const TARGET_MEMBER: i16 = 7;
pub(crate) const CURRENT_MEMBER: i16 = 8;

/// A topic id: 16 bytes.
pub(crate) type TopicId = [u8; 16];

/// The id of topic `name`: FNV-1a (128 bits) of `"tidelog topic id\0" + name`, with the
/// RFC 9562 version 8 (custom) and variant bits set. The same on every node and across
/// restarts, without storing it.
pub fn topic_id(name: &str) -> [u8; 16] {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for b in b"tidelog topic id\0".iter().chain(name.as_bytes()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    let mut id = h.to_be_bytes();
    id[6] = (id[6] & 0x0f) | 0x80;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

/// Topic partitions by topic id.
pub(crate) type IdPartitions = Vec<(TopicId, Vec<i32>)>;

/// Kafka's `ClassicMemberMetadata`: a classic member's session timeout (ms) and its
/// protocols (name, metadata).
pub(crate) type ClassicMeta = (i32, Vec<(String, Vec<u8>)>);

/// A member's metadata (type 5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct MemberMeta {
    pub(crate) instance_id: Option<String>,
    pub(crate) rack_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) topic_names: Vec<String>,
    pub(crate) regex: Option<String>,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) server_assignor: Option<String>,
    /// Kafka's tagged `ClassicMemberMetadata` (tag 0), for a member that uses the
    /// classic protocol: its session timeout (ms) and protocols (name, metadata).
    pub(crate) classic: Option<ClassicMeta>,
}

/// A member's current assignment (type 8).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct CurrentAssignment {
    pub(crate) epoch: i32,
    pub(crate) previous_epoch: i32,
    /// Kafka's MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub(crate) state: i8,
    pub(crate) assigned: IdPartitions,
    pub(crate) revoking: IdPartitions,
}

/// The value of one record; None for a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    GroupEpoch(i32),
    Topics(Vec<(TopicId, String, i32)>),
    Member(MemberMeta),
    TargetEpoch(i32),
    TargetMember(IdPartitions),
    Current(CurrentAssignment),
}

/// One decoded record of a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) group: String,
    /// The member, for types 5, 7 and 8.
    pub(crate) member: Option<String>,
    /// The record type (3 to 8).
    pub(crate) kind: i16,
    /// None for a tombstone.
    pub(crate) value: Option<Value>,
}

/// The key of a record of type `kind` (3 to 8).
pub(crate) fn key(kind: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len() + member.map_or(0, |m| m.len() + 2));
    out.extend_from_slice(&kind.to_be_bytes());
    put_str(&mut out, group);
    if let Some(m) = member {
        put_str(&mut out, m);
    }
    out
}

pub(super) fn uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn compact_str(out: &mut Vec<u8>, s: &str) {
    uvarint(out, s.len() as u64 + 1);
    out.extend_from_slice(s.as_bytes());
}

fn compact_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => compact_str(out, s),
        None => out.push(0),
    }
}

pub(super) fn compact_len(out: &mut Vec<u8>, n: usize) {
    uvarint(out, n as u64 + 1);
}

/// An empty tagged-fields section.
pub(super) fn no_tags(out: &mut Vec<u8>) {
    out.push(0);
}

fn id_partitions(out: &mut Vec<u8>, list: &IdPartitions) {
    compact_len(out, list.len());
    for (id, parts) in list {
        out.extend_from_slice(id);
        compact_len(out, parts.len());
        for p in parts {
            out.extend_from_slice(&p.to_be_bytes());
        }
        no_tags(out);
    }
}

/// The value bytes of `v` (version 0).
pub(crate) fn encode(v: &Value) -> Vec<u8> {
    let mut out = vec![0, 0];
    match v {
        Value::GroupEpoch(e) | Value::TargetEpoch(e) => out.extend_from_slice(&e.to_be_bytes()),
        Value::Topics(topics) => {
            compact_len(&mut out, topics.len());
            for (id, name, n) in topics {
                out.extend_from_slice(id);
                compact_str(&mut out, name);
                out.extend_from_slice(&n.to_be_bytes());
                compact_len(&mut out, 0);
                no_tags(&mut out);
            }
        }
        Value::Member(m) => {
            compact_nullable_str(&mut out, m.instance_id.as_deref());
            compact_nullable_str(&mut out, m.rack_id.as_deref());
            compact_str(&mut out, &m.client_id);
            compact_str(&mut out, &m.client_host);
            compact_len(&mut out, m.topic_names.len());
            for t in &m.topic_names {
                compact_str(&mut out, t);
            }
            compact_nullable_str(&mut out, m.regex.as_deref());
            out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
            compact_nullable_str(&mut out, m.server_assignor.as_deref());
            if let Some((session, protocols)) = &m.classic {
                // One tagged field, tag 0: a nullable struct (varint 1 = present).
                let mut field = vec![1];
                field.extend_from_slice(&session.to_be_bytes());
                compact_len(&mut field, protocols.len());
                for (name, meta) in protocols {
                    compact_str(&mut field, name);
                    compact_len(&mut field, meta.len());
                    field.extend_from_slice(meta);
                    no_tags(&mut field);
                }
                no_tags(&mut field);
                uvarint(&mut out, 1);
                uvarint(&mut out, 0);
                uvarint(&mut out, field.len() as u64);
                out.extend_from_slice(&field);
                return out;
            }
        }
        Value::TargetMember(parts) => id_partitions(&mut out, parts),
        Value::Current(c) => {
            out.extend_from_slice(&c.epoch.to_be_bytes());
            out.extend_from_slice(&c.previous_epoch.to_be_bytes());
            out.push(c.state as u8);
            id_partitions(&mut out, &c.assigned);
            id_partitions(&mut out, &c.revoking);
        }
    }
    no_tags(&mut out);
    out
}

/// Reads Kafka's flexible encoding.
/// A reader of Kafka's flexible encoding (also of `__share_group_state` records).
pub(super) struct Flex<'a>(pub(super) Reader<'a>);

impl Flex<'_> {
    fn uvarint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.0.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.0.err("unsigned varint longer than 10 bytes"))
    }
    /// A compact length: None for null (0).
    fn len(&mut self) -> Result<Option<usize>> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let n = usize::try_from(n - 1).map_err(|_| self.0.err("length overflows"))?;
        Ok(Some(n))
    }
    fn nullable_str(&mut self) -> Result<Option<String>> {
        let Some(n) = self.len()? else {
            return Ok(None);
        };
        let b = self.0.take(n)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| self.0.err("string is not UTF-8"))
    }
    fn string(&mut self) -> Result<String> {
        Ok(self.nullable_str()?.unwrap_or_default())
    }
    pub(super) fn array(&mut self) -> Result<usize> {
        let n = self.len()?.unwrap_or(0);
        // Every element takes at least one byte: refuse counts the input cannot hold.
        if n > self.0.remaining() {
            return Err(self
                .0
                .err(format!("array count {n} exceeds the remaining bytes")));
        }
        Ok(n)
    }
    pub(super) fn id(&mut self) -> Result<TopicId> {
        let mut id = [0u8; 16];
        id.copy_from_slice(self.0.take(16)?);
        Ok(id)
    }
    /// Skips a tagged-fields section (fields of later versions are ignored).
    pub(super) fn tags(&mut self) -> Result<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let n = usize::try_from(self.uvarint()?).map_err(|_| self.0.err("tag overflows"))?;
            self.0.take(n)?;
        }
        Ok(())
    }
    /// The tagged fields of a member's metadata: `ClassicMemberMetadata` (tag 0) if
    /// present; other tags are skipped.
    fn member_tags(&mut self) -> Result<Option<ClassicMeta>> {
        let mut classic = None;
        for _ in 0..self.uvarint()? {
            let tag = self.uvarint()?;
            let n = usize::try_from(self.uvarint()?).map_err(|_| self.0.err("tag overflows"))?;
            if tag != 0 {
                self.0.take(n)?;
                continue;
            }
            // A tagged nullable struct starts with an unsigned varint: 0 null, 1 present.
            if self.uvarint()? == 0 {
                continue;
            }
            let session = self.0.i32()?;
            let mut protocols = Vec::new();
            for _ in 0..self.array()? {
                let name = self.string()?;
                let len = self.len()?.unwrap_or(0);
                let meta = self.0.take(len)?.to_vec();
                self.tags()?;
                protocols.push((name, meta));
            }
            self.tags()?;
            classic = Some((session, protocols));
        }
        Ok(classic)
    }
    fn id_partitions(&mut self) -> Result<IdPartitions> {
        let n = self.array()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let id = self.id()?;
            let m = self.array()?;
            let mut parts = Vec::with_capacity(m);
            for _ in 0..m {
                parts.push(self.0.i32()?);
            }
            self.tags()?;
            out.push((id, parts));
        }
        Ok(out)
    }
}

fn decode_value(kind: i16, value: &[u8]) -> Result<Value> {
    let mut f = Flex(Reader::new(
        value,
        "__consumer_offsets consumer group value",
    ));
    let version = f.0.i16()?;
    if version != 0 {
        return Err(f.0.err(format!(
            "consumer group record type {kind} version {version} is not supported (0 is)"
        )));
    }
    let v = match kind {
        GROUP_EPOCH => Value::GroupEpoch(f.0.i32()?),
        TARGET_EPOCH => Value::TargetEpoch(f.0.i32()?),
        PARTITION_METADATA => {
            let n = f.array()?;
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let id = f.id()?;
                let name = f.string()?;
                let count = f.0.i32()?;
                for _ in 0..f.array()? {
                    f.0.i32()?;
                    for _ in 0..f.array()? {
                        f.string()?;
                    }
                    f.tags()?;
                }
                f.tags()?;
                topics.push((id, name, count));
            }
            Value::Topics(topics)
        }
        MEMBER_METADATA => {
            let instance_id = f.nullable_str()?;
            let rack_id = f.nullable_str()?;
            let client_id = f.string()?;
            let client_host = f.string()?;
            let mut topic_names = Vec::new();
            for _ in 0..f.array()? {
                topic_names.push(f.string()?);
            }
            Value::Member(MemberMeta {
                instance_id,
                rack_id,
                client_id,
                client_host,
                topic_names,
                regex: f.nullable_str()?,
                rebalance_timeout_ms: f.0.i32()?,
                server_assignor: f.nullable_str()?,
                classic: None,
            })
        }
        TARGET_MEMBER => Value::TargetMember(f.id_partitions()?),
        _ => Value::Current(CurrentAssignment {
            epoch: f.0.i32()?,
            previous_epoch: f.0.i32()?,
            state: f.0.take(1)?[0] as i8,
            assigned: f.id_partitions()?,
            revoking: f.id_partitions()?,
        }),
    };
    match v {
        Value::Member(mut m) => {
            m.classic = f.member_tags()?;
            Ok(Value::Member(m))
        }
        v => {
            f.tags()?;
            Ok(v)
        }
    }
}

/// Decodes a record of a consumer-protocol group; `Ok(None)` if `key` is of another
/// type.
pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Record>> {
    let mut k = Reader::new(key, "__consumer_offsets key");
    let kind = k.i16()?;
    if !(GROUP_EPOCH..=CURRENT_MEMBER).contains(&kind) {
        return Ok(None);
    }
    let group = k.string()?;
    let member = match kind {
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_MEMBER => Some(k.string()?),
        _ => None,
    };
    let value = value.map(|v| decode_value(kind, v)).transpose()?;
    Ok(Some(Record {
        group,
        member,
        kind,
        value,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_round_trips_and_truncations_are_errors() {
        let id = topic_id("t");
        let values = [
            (GROUP_EPOCH, None, Value::GroupEpoch(7)),
            (
                PARTITION_METADATA,
                None,
                Value::Topics(vec![(id, "t".into(), 4)]),
            ),
            (
                MEMBER_METADATA,
                Some("m"),
                Value::Member(MemberMeta {
                    instance_id: Some("i".into()),
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    topic_names: vec!["t".into()],
                    regex: Some("t.*".into()),
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                    classic: None,
                }),
            ),
            (
                MEMBER_METADATA,
                Some("classic"),
                Value::Member(MemberMeta {
                    client_id: "c".into(),
                    topic_names: vec!["t".into()],
                    rebalance_timeout_ms: 30_000,
                    classic: Some((10_000, vec![("range".into(), vec![0, 1, 2])])),
                    ..Default::default()
                }),
            ),
            (TARGET_EPOCH, None, Value::TargetEpoch(7)),
            (
                TARGET_MEMBER,
                Some("m"),
                Value::TargetMember(vec![(id, vec![0, 2])]),
            ),
            (
                CURRENT_MEMBER,
                Some("m"),
                Value::Current(CurrentAssignment {
                    epoch: 7,
                    previous_epoch: 6,
                    state: 1,
                    assigned: vec![(id, vec![0])],
                    revoking: vec![(id, vec![1])],
                }),
            ),
        ];
        for (kind, member, value) in values {
            let k = key(kind, "g", member);
            let v = encode(&value);
            let decoded = decode(&k, Some(&v)).unwrap().unwrap();
            assert_eq!(decoded.value, Some(value.clone()));
            assert_eq!(decoded.member.as_deref(), member);
            assert_eq!(decode(&k, None).unwrap().unwrap().value, None);
            for cut in 0..v.len() {
                assert!(
                    decode(&k, Some(&v[..cut])).is_err(),
                    "type {kind} cut at {cut}"
                );
            }
        }
        // Kafka's layout: type, group; version 0, epoch, no tagged fields.
        assert_eq!(key(GROUP_EPOCH, "g", None), vec![0, 3, 0, 1, b'g']);
        assert_eq!(encode(&Value::GroupEpoch(7)), vec![0, 0, 0, 0, 0, 7, 0]);
        // Other keys are not ours.
        assert_eq!(decode(&[0, 2, 0, 1, b'g'], None).unwrap(), None);
    }

    #[test]
    fn topic_ids_are_stable_and_distinct() {
        assert_eq!(topic_id("orders"), topic_id("orders"));
        assert_ne!(topic_id("orders"), topic_id("orders2"));
        assert_eq!(topic_id("orders")[6] >> 4, 8);
    }
}
