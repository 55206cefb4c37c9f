//! The request versions Kafka 4.0 removed (KIP-896) that Kafka 3.9 still answers, for
//! older clients: OffsetCommit v0-1, OffsetFetch v0, CreateTopics v0-1, DeleteTopics v0,
//! DescribeConfigs v0, ListOffsets v0, Produce v0-2 and Fetch v0-3. `kafka-protocol` is generated from Kafka 4's message
//! definitions and neither decodes nor encodes them, so their layouts are here, from
//! Kafka's protocol guide.
//!
//! Most differ from the oldest version the protocol crate knows only at the edges: a
//! request lacks a trailing field (read as its default), a response lacks the leading
//! `throttle_time_ms` or a field the newer version added. Such a request is decoded as
//! that newer version ([`decode_as`]), the handler answers as for it, and the response
//! is encoded at that version and rewritten in the old layout ([`downgrade`]).
//! OffsetCommit v0-1 carry other fields in the middle of their partitions (a commit
//! timestamp in v1) and are read by [`offset_commit_request`]. ListOffsets v0 asks for
//! up to `max_num_offsets` offsets before a timestamp and is answered with a list
//! (`old_style_offsets`): it is read as v1 without that field and answered with the one
//! offset v1 finds (Kafka's answer to the `max_num_offsets` 1 old clients send; an error
//! answers an empty list). Produce v0-2 carry message sets of magic 0 or 1: they are
//! read as v3 with each message set up-converted to a record batch of magic 2
//! ([`up_convert`], as Kafka's broker converts), and answered in v0-2's layout. Fetch
//! v0-3 are read as v4 (no response limit before v3, read uncommitted) and answered by
//! the Fetch handler in their layout, the records down-converted to message sets of
//! magic 1 ([`down_convert`]).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// DescribeConfigs' `config_source` DEFAULT_CONFIG: what v0's `is_default` says.
const DEFAULT_CONFIG: i8 = 5;

/// The oldest version served of each API that has versions below the protocol crate's.
pub(crate) const OLDEST: &[(ApiKey, i16)] = &[
    (ApiKey::OffsetCommit, 0),
    (ApiKey::OffsetFetch, 0),
    (ApiKey::CreateTopics, 0),
    (ApiKey::DeleteTopics, 0),
    (ApiKey::DescribeConfigs, 0),
    (ApiKey::ListOffsets, 0),
    (ApiKey::Produce, 0),
    (ApiKey::Fetch, 0),
];

/// The version of the protocol crate a request of `key` v`version` is decoded and
/// answered as, if `version` is one of the old versions kept here.
pub(crate) fn modern_version(key: ApiKey, version: i16) -> Option<i16> {
    let oldest = OLDEST.iter().find(|(k, _)| *k == key)?.1;
    let crate_min = key.valid_versions().min;
    (oldest..crate_min).contains(&version).then_some(crate_min)
}

/// The body of an old request made decodable as [`modern_version`]: the fields the
/// newer version appends are added at their defaults (CreateTopics v0's
/// `validate_only`, DescribeConfigs v0's `include_synonyms`, both false); the other
/// old versions have the same request layout as the newer one.
pub(crate) fn decode_as(key: ApiKey, version: i16, body: &Bytes) -> Bytes {
    match (key, version) {
        (ApiKey::CreateTopics, 0) | (ApiKey::DescribeConfigs, 0) => {
            let mut b = BytesMut::from(&body[..]);
            b.put_u8(0);
            b.freeze()
        }
        // A malformed body is left as it is: decoding it as v1 fails and says so.
        (ApiKey::ListOffsets, 0) => list_offsets_v0_request(body).map_or(body.clone(), Bytes::from),
        (ApiKey::Produce, 0..=2) => produce_old_request(body).map_or(body.clone(), Bytes::from),
        // v4: `max_bytes` (v3 added it; before, no limit) and `isolation_level` (read
        // uncommitted) after `min_bytes`; the topics are laid out alike.
        (ApiKey::Fetch, 0..=3) if body.len() >= 12 => {
            let at = if version == 3 { 16 } else { 12 };
            let mut b = BytesMut::from(&body[..at.min(body.len())]);
            if version < 3 {
                b.put_i32(i32::MAX);
            }
            b.put_i8(0);
            b.extend_from_slice(&body[at.min(body.len())..]);
            b.freeze()
        }
        _ => body.clone(),
    }
}

/// ListOffsets v0's request as v1's: each partition's `max_num_offsets` left out.
fn list_offsets_v0_request(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(body);
    let mut out = Vec::with_capacity(body.len());
    out.extend_from_slice(r.take(4)?); // replica_id
    let topics = r.array_len()?;
    out.put_i32(topics);
    for _ in 0..topics {
        out.extend_from_slice(r.string()?); // name
        let partitions = r.array_len()?;
        out.put_i32(partitions);
        for _ in 0..partitions {
            out.extend_from_slice(r.take(12)?); // partition_index, timestamp
            r.take(4)?; // max_num_offsets
        }
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the request", r.0.len()));
    }
    Ok(out)
}

/// Produce v0-2's request as v3's: a null `transactional_id` first, and each
/// partition's message set of magic 0 or 1 converted to one record batch of magic 2 (as
/// Kafka up-converts: a magic 0 message has no timestamp, -1). A message set that
/// cannot be converted is passed on as it is, and its partition is refused as any
/// batch that is not of magic 2.
fn produce_old_request(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(body);
    let mut out = Vec::with_capacity(body.len() + 64);
    out.put_i16(-1); // transactional_id: null
    out.extend_from_slice(r.take(6)?); // acks, timeout_ms
    let topics = r.array_len()?;
    out.put_i32(topics);
    for _ in 0..topics {
        out.extend_from_slice(r.string()?);
        let partitions = r.array_len()?;
        out.put_i32(partitions);
        for _ in 0..partitions {
            out.extend_from_slice(r.take(4)?); // index
            let len = r.i32()?;
            let set = if len < 0 {
                &[][..]
            } else {
                r.take(len as usize)?
            };
            match up_convert(set) {
                Ok(batch) => {
                    out.put_i32(batch.len() as i32);
                    out.extend_from_slice(&batch);
                }
                Err(_) => {
                    out.put_i32(len);
                    out.extend_from_slice(set);
                }
            }
        }
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the request", r.0.len()));
    }
    Ok(out)
}

/// A message set of magic 0 or 1 (uncompressed) as one record batch of magic 2 with
/// the same keys, values and timestamps.
pub(crate) fn up_convert(set: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(set);
    let mut batch = crate::record::BatchBuilder::new();
    let mut count = 0;
    while !r.0.is_empty() {
        r.i64()?; // offset: assigned by the log
        let size = r.i32()?;
        let mut m = Reader(r.take(usize::try_from(size).map_err(|_| "a negative message size")?)?);
        let crc = u32::from_be_bytes(m.take(4)?.try_into().expect("4 bytes"));
        if crate::storage::crc32(m.0) != crc {
            return Err(format!("message {count}: CRC mismatch"));
        }
        let magic = m.take(1)?[0];
        let attributes = m.take(1)?[0];
        if magic > 1 {
            return Err(format!(
                "message {count}: magic {magic} in an old message set"
            ));
        }
        if attributes & 0x07 != 0 {
            return Err(format!(
                "message {count}: compressed messages of magic {magic} are not converted"
            ));
        }
        let timestamp = if magic == 1 { m.i64()? } else { -1 };
        let key = m.bytes()?;
        let value = m.bytes()?;
        if !m.0.is_empty() {
            return Err(format!(
                "message {count}: {} bytes after its value",
                m.0.len()
            ));
        }
        batch.push(timestamp, key, value, &[]);
        count += 1;
    }
    if count == 0 {
        return Err("an empty message set".into());
    }
    Ok(batch.finish())
}

/// One message of magic 0 or 1 (uncompressed) of an old message set.
struct Message<'a> {
    magic: u8,
    attributes: u8,
    /// Written for magic 1 only.
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl Message<'_> {
    /// Appends the message at `offset` to `out`: offset, size, CRC-32 of the rest,
    /// magic, attributes, timestamp (magic 1), key and value (length -1 when null).
    fn encode(&self, offset: i64, out: &mut Vec<u8>) {
        let mut m = Vec::with_capacity(
            22 + self.key.map_or(0, <[u8]>::len) + self.value.map_or(0, <[u8]>::len),
        );
        m.push(self.magic);
        m.push(self.attributes);
        if self.magic == 1 {
            m.extend_from_slice(&self.timestamp.to_be_bytes());
        }
        for field in [self.key, self.value] {
            match field {
                Some(f) => {
                    m.extend_from_slice(&(f.len() as i32).to_be_bytes());
                    m.extend_from_slice(f);
                }
                None => m.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&(m.len() as i32 + 4).to_be_bytes());
        out.extend_from_slice(&crate::storage::crc32(&m).to_be_bytes());
        out.extend_from_slice(&m);
    }
}

/// Record batches as a message set of magic 1 (Fetch v0-3, as Kafka's broker
/// down-converts): each record of each data batch with its offset, timestamp, key and
/// value (headers have no place there), control batches left out.
pub(crate) fn down_convert(bytes: &[u8], location: &str) -> crate::error::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut scratch = Vec::new();
    for batch in crate::record::batches(bytes) {
        let batch = batch?;
        if batch.is_control() {
            continue;
        }
        // Attribute bit 3: the timestamp is the broker's (LogAppendTime).
        let attributes: u8 = if batch.timestamp_type_log_append() {
            8
        } else {
            0
        };
        for record in batch.decode_records(location, 1 << 26, &mut scratch)? {
            let record = record?;
            let message = Message {
                magic: 1,
                attributes,
                timestamp: record.timestamp,
                key: record.key,
                value: record.value,
            };
            message.encode(record.offset, &mut out);
        }
    }
    Ok(out)
}

/// Produce v0-2's response from v3's (v2 has v3's layout): v1 has no
/// `log_append_time_ms`, v0 no `throttle_time_ms` either.
fn produce_old_response(version: i16, r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let topics = r.array_len()?;
    out.put_i32(topics);
    for _ in 0..topics {
        out.extend_from_slice(r.string()?);
        let partitions = r.array_len()?;
        out.put_i32(partitions);
        for _ in 0..partitions {
            out.extend_from_slice(r.take(14)?); // index, error_code, base_offset
            r.take(8)?; // log_append_time_ms
        }
    }
    let throttle = r.take(4)?;
    if version == 1 {
        out.extend_from_slice(throttle);
    }
    Ok(())
}

/// ListOffsets v0's response from v1's: each partition's `timestamp` and `offset`
/// become `old_style_offsets`, the offset alone (none on an error or without one).
fn list_offsets_v0_response(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    let topics = r.array_len()?;
    out.put_i32(topics);
    for _ in 0..topics {
        out.extend_from_slice(r.string()?); // name
        let partitions = r.array_len()?;
        out.put_i32(partitions);
        for _ in 0..partitions {
            out.extend_from_slice(r.take(4)?); // partition_index
            let code = r.i16()?;
            out.put_i16(code);
            r.i64()?; // timestamp
            let offset = r.i64()?;
            if code == 0 && offset >= 0 {
                out.put_i32(1);
                out.put_i64(offset);
            } else {
                out.put_i32(0);
            }
        }
    }
    Ok(())
}

/// Rewrites a response body encoded at [`modern_version`] in the layout of `version`.
pub(crate) fn downgrade(key: ApiKey, version: i16, modern: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(modern);
    let mut out = Vec::with_capacity(modern.len());
    match (key, version) {
        // Same layout as v2 (OffsetCommit) and v1 (OffsetFetch).
        (ApiKey::OffsetCommit, 0 | 1) | (ApiKey::OffsetFetch, 0) => out.extend_from_slice(modern),
        // v0: no throttle_time_ms (DeleteTopics v1 added it).
        (ApiKey::DeleteTopics, 0) => {
            r.take(4)?;
            out.extend_from_slice(r.0);
        }
        // v1: no throttle_time_ms (v2 added it); v0: no error_message either.
        (ApiKey::CreateTopics, 1) => {
            r.take(4)?;
            out.extend_from_slice(r.0);
        }
        (ApiKey::CreateTopics, 0) => {
            r.take(4)?;
            let n = r.array_len()?;
            out.put_i32(n);
            for _ in 0..n.max(0) {
                out.extend_from_slice(r.string()?);
                out.extend_from_slice(r.take(2)?);
                r.string()?;
            }
        }
        (ApiKey::DescribeConfigs, 0) => describe_configs_v0(&mut r, &mut out)?,
        (ApiKey::ListOffsets, 0) => list_offsets_v0_response(&mut r, &mut out)?,
        (ApiKey::Produce, 2) => out.extend_from_slice(modern),
        (ApiKey::Produce, 0 | 1) => produce_old_response(version, &mut r, &mut out)?,
        _ => return Err(format!("{key:?} v{version} has no old layout")),
    }
    if matches!(
        (key, version),
        (ApiKey::CreateTopics, 0)
            | (ApiKey::DescribeConfigs, 0)
            | (ApiKey::ListOffsets, 0)
            | (ApiKey::Produce, 0 | 1)
    ) && !r.0.is_empty()
    {
        return Err(format!("{} bytes left over", r.0.len()));
    }
    Ok(out)
}

/// DescribeConfigs v0 from v1: each config's `config_source` becomes `is_default`, and
/// it has no synonyms.
fn describe_configs_v0(r: &mut Reader<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(r.take(4)?); // throttle_time_ms
    let results = r.array_len()?;
    out.put_i32(results);
    for _ in 0..results.max(0) {
        out.extend_from_slice(r.take(2)?); // error_code
        out.extend_from_slice(r.string()?); // error_message
        out.extend_from_slice(r.take(1)?); // resource_type
        out.extend_from_slice(r.string()?); // resource_name
        let configs = r.array_len()?;
        out.put_i32(configs);
        for _ in 0..configs.max(0) {
            out.extend_from_slice(r.string()?); // name
            out.extend_from_slice(r.string()?); // value
            out.extend_from_slice(r.take(1)?); // read_only
            let source = r.take(1)?[0] as i8;
            out.put_u8(u8::from(source == DEFAULT_CONFIG)); // is_default
            out.extend_from_slice(r.take(1)?); // is_sensitive
            let synonyms = r.array_len()?;
            for _ in 0..synonyms.max(0) {
                r.string()?;
                r.string()?;
                r.take(1)?;
            }
        }
    }
    Ok(())
}

/// An OffsetCommit v0 or v1 request, as the protocol crate's v2 request (v0 has no
/// generation nor member id: -1 and "") and, for v1, each partition's commit timestamp
/// in request order (-1: the time of the commit).
pub(crate) fn offset_commit_request(
    body: &[u8],
    version: i16,
) -> Result<(OffsetCommitRequest, Vec<i64>), String> {
    let mut r = Reader(body);
    let group_id = r.str()?;
    let (generation, member_id) = if version >= 1 {
        (r.i32()?, r.str()?)
    } else {
        (-1, StrBytes::default())
    };
    let mut timestamps = Vec::new();
    let mut topics = Vec::new();
    for _ in 0..r.array_len()?.max(0) {
        let name = r.str()?;
        let mut partitions = Vec::new();
        for _ in 0..r.array_len()?.max(0) {
            let index = r.i32()?;
            let offset = r.i64()?;
            if version >= 1 {
                timestamps.push(r.i64()?);
            }
            let metadata = r.nullable_str()?;
            partitions.push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(index)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(metadata),
            );
        }
        topics.push(
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(name))
                .with_partitions(partitions),
        );
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the request", r.0.len()));
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(group_id))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(member_id)
        .with_topics(topics);
    Ok((request, timestamps))
}

/// A cursor over bytes in Kafka's classic (non-flexible) encoding.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "{n} bytes expected, {} left (truncated)",
                self.0.len()
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }

    /// An array's length (-1, null, reads as empty).
    fn array_len(&mut self) -> Result<i32, String> {
        let n = self.i32()?;
        if n > 0 && n as usize > self.0.len() {
            return Err(format!("an array of {n} items in {} bytes", self.0.len()));
        }
        Ok(n.max(0))
    }

    /// A (nullable) string's bytes, length prefix included.
    fn string(&mut self) -> Result<&'a [u8], String> {
        let whole = self.0;
        let len = self.i16()?;
        let n = usize::try_from(len).unwrap_or(0);
        self.take(n)?;
        Ok(&whole[..2 + n])
    }

    /// Nullable bytes with an i32 length (-1: null).
    fn bytes(&mut self) -> Result<Option<&'a [u8]>, String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len as usize).map(Some)
    }

    fn nullable_str(&mut self) -> Result<Option<StrBytes>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize)?;
        let s = std::str::from_utf8(b).map_err(|e| format!("a string is not UTF-8: {e}"))?;
        Ok(Some(StrBytes::from_string(s.to_string())))
    }

    fn str(&mut self) -> Result<StrBytes, String> {
        Ok(self.nullable_str()?.unwrap_or_default())
    }
}

/// Tests: a request body encoded at [`modern_version`] (with no topics, partitions or
/// resources, as the table's default requests) in the layout of old `version`.
#[cfg(test)]
pub(crate) fn old_request(key: ApiKey, version: i16, modern: &[u8]) -> Vec<u8> {
    let mut r = Reader(modern);
    match (key, version) {
        (ApiKey::CreateTopics, 0) | (ApiKey::DescribeConfigs, 0) => {
            modern[..modern.len() - 1].to_vec()
        }
        // v3 with no topics: a null transactional id first.
        (ApiKey::Produce, 0..=2) => modern[2..].to_vec(),
        // v4: isolation_level at 16 (v3 drops it), max_bytes at 12 (v0-2 too).
        (ApiKey::Fetch, 3) => [&modern[..16], &modern[17..]].concat(),
        (ApiKey::Fetch, 0..=2) => [&modern[..12], &modern[17..]].concat(),
        (ApiKey::OffsetCommit, 0 | 1) => {
            // v2: group, generation, member, retention_time_ms, topics.
            let mut out = r.string().unwrap().to_vec();
            let generation = r.take(4).unwrap();
            let member = r.string().unwrap();
            r.take(8).unwrap();
            if version == 1 {
                out.extend_from_slice(generation);
                out.extend_from_slice(member);
            }
            out.extend_from_slice(r.0);
            out
        }
        _ => modern.to_vec(),
    }
}

/// Tests: an old response body in the layout of [`modern_version`], for the protocol
/// crate's decoder (the inverse of [`downgrade`]; absent fields at their defaults).
#[cfg(test)]
pub(crate) fn upgrade(key: ApiKey, version: i16, old: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = Reader(old);
    let mut out = Vec::new();
    match (key, version) {
        (ApiKey::DeleteTopics, 0) | (ApiKey::CreateTopics, 1) => {
            out.put_i32(0);
            out.extend_from_slice(old);
            return Ok(out);
        }
        (ApiKey::Fetch, 0..=3) => {
            if version == 0 {
                out.put_i32(0);
            } else {
                out.extend_from_slice(r.take(4)?);
            }
            let topics = r.array_len()?;
            out.put_i32(topics);
            for _ in 0..topics {
                out.extend_from_slice(r.string()?);
                let partitions = r.array_len()?;
                out.put_i32(partitions);
                for _ in 0..partitions {
                    out.extend_from_slice(r.take(14)?); // index, error, high watermark
                    out.put_i64(-1); // last_stable_offset
                    out.put_i32(-1); // aborted_transactions: null
                    let len = r.i32()?;
                    out.put_i32(len);
                    out.extend_from_slice(r.take(usize::try_from(len).unwrap_or(0))?);
                }
            }
        }
        (ApiKey::Produce, 0 | 1) => {
            let topics = r.array_len()?;
            out.put_i32(topics);
            for _ in 0..topics {
                out.extend_from_slice(r.string()?);
                let partitions = r.array_len()?;
                out.put_i32(partitions);
                for _ in 0..partitions {
                    out.extend_from_slice(r.take(14)?);
                    out.put_i64(-1);
                }
            }
            match version {
                1 => out.extend_from_slice(r.take(4)?),
                _ => out.put_i32(0),
            }
        }
        (ApiKey::CreateTopics, 0) => {
            out.put_i32(0);
            let n = r.array_len()?;
            out.put_i32(n);
            for _ in 0..n {
                out.extend_from_slice(r.string()?);
                out.extend_from_slice(r.take(2)?);
                out.put_i16(-1);
            }
        }
        (ApiKey::ListOffsets, 0) => {
            let topics = r.array_len()?;
            out.put_i32(topics);
            for _ in 0..topics {
                out.extend_from_slice(r.string()?);
                let partitions = r.array_len()?;
                out.put_i32(partitions);
                for _ in 0..partitions {
                    out.extend_from_slice(r.take(6)?);
                    out.put_i64(-1);
                    let offsets = r.array_len()?;
                    let mut first = -1;
                    for i in 0..offsets {
                        let o = r.i64()?;
                        if i == 0 {
                            first = o;
                        }
                    }
                    out.put_i64(first);
                }
            }
        }
        (ApiKey::DescribeConfigs, 0) => {
            out.extend_from_slice(r.take(4)?);
            let results = r.array_len()?;
            out.put_i32(results);
            for _ in 0..results {
                out.extend_from_slice(r.take(2)?);
                out.extend_from_slice(r.string()?);
                out.extend_from_slice(r.take(1)?);
                out.extend_from_slice(r.string()?);
                let configs = r.array_len()?;
                out.put_i32(configs);
                for _ in 0..configs {
                    out.extend_from_slice(r.string()?);
                    out.extend_from_slice(r.string()?);
                    out.extend_from_slice(r.take(1)?);
                    let default = r.take(1)?[0] != 0;
                    out.put_i8(if default { DEFAULT_CONFIG } else { 1 });
                    out.extend_from_slice(r.take(1)?);
                    out.put_i32(0);
                }
            }
        }
        _ => return Ok(old.to_vec()),
    }
    if r.0.is_empty() {
        Ok(out)
    } else {
        Err(format!("{} bytes left over", r.0.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::{CreateTopicsResponse, TopicName};
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn create_topics_v0_drops_throttle_and_messages() {
        let resp = CreateTopicsResponse::default()
            .with_throttle_time_ms(7)
            .with_topics(vec![
                CreatableTopicResult::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_error_code(36)
                    .with_error_message(Some(StrBytes::from_static_str("exists"))),
            ]);
        let mut modern = BytesMut::new();
        resp.encode(&mut modern, 2).unwrap();
        let old = downgrade(ApiKey::CreateTopics, 0, &modern).unwrap();
        assert_eq!(old, [0, 0, 0, 1, 0, 1, b't', 0, 36]);
    }

    #[test]
    fn list_offsets_v0_is_v1_without_max_num_offsets_and_answers_a_list() {
        // replica -1, topic "t", partition 2 at timestamp -1 (latest), max 1 offset.
        let v0 = [
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1,
        ];
        let v1 = decode_as(ApiKey::ListOffsets, 0, &Bytes::copy_from_slice(&v0));
        assert_eq!(&v1[..], &v0[..v0.len() - 4]);
        let resp = kafka_protocol::messages::ListOffsetsResponse::default().with_topics(vec![
            kafka_protocol::messages::list_offsets_response::ListOffsetsTopicResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse::default()
                        .with_partition_index(2)
                        .with_offset(42),
                    kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse::default()
                        .with_partition_index(3)
                        .with_error_code(3),
                ]),
        ]);
        let mut modern = BytesMut::new();
        resp.encode(&mut modern, 1).unwrap();
        let old = downgrade(ApiKey::ListOffsets, 0, &modern).unwrap();
        assert_eq!(
            old,
            [
                0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, // topic "t", 2 partitions
                0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42, // [42]
                0, 0, 0, 3, 0, 3, 0, 0, 0, 0, // UNKNOWN_TOPIC_OR_PARTITION, []
            ]
        );
        let back = upgrade(ApiKey::ListOffsets, 0, &old).unwrap();
        let mut b = Bytes::from(back);
        let decoded = <kafka_protocol::messages::ListOffsetsResponse as kafka_protocol::protocol::Decodable>::decode(&mut b, 1).unwrap();
        assert_eq!(decoded.topics[0].partitions[0].offset, 42);
    }

    #[test]
    fn a_truncated_offset_commit_is_an_error_not_a_panic() {
        let (req, ts) = offset_commit_request(
            &[
                0, 1, b'g', 0, 0, 0, 3, 0, 1, b'm', 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2,
                0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 5, 0xff, 0xff,
            ],
            1,
        )
        .unwrap();
        assert_eq!(req.generation_id_or_member_epoch, 3);
        assert_eq!(req.topics[0].partitions[0].committed_offset, 9);
        assert_eq!(req.topics[0].partitions[0].committed_metadata, None);
        assert_eq!(ts, vec![5]);
        let e = offset_commit_request(&[0, 1, b'g', 0, 0, 0, 3, 0, 1], 1).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    /// A message of `magic` 0 or 1 (`attributes`, timestamp `ts` for magic 1) at
    /// offset 0, its CRC computed unless `bad_crc`.
    fn message(
        magic: u8,
        attributes: u8,
        ts: i64,
        key: Option<&[u8]>,
        value: &[u8],
        bad_crc: bool,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let m = Message {
            magic,
            attributes,
            timestamp: ts,
            key,
            value: Some(value),
        };
        m.encode(0, &mut out);
        out[12] ^= u8::from(bad_crc);
        out
    }

    #[test]
    fn old_message_sets_become_one_batch_of_magic_2() {
        let mut set = message(0, 0, 0, Some(b"k0"), b"v0", false);
        set.extend(message(1, 0, 1_700_000_000_123, None, b"v1", false));
        let batch = up_convert(&set).unwrap();
        let b = crate::record::batches(&batch).next().unwrap().unwrap();
        let mut scratch = Vec::new();
        let records: Vec<(i64, Option<Vec<u8>>, Vec<u8>)> = b
            .decode_records("t-0", 1 << 20, &mut scratch)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (
                    r.timestamp,
                    r.key.map(<[u8]>::to_vec),
                    r.value.unwrap().to_vec(),
                )
            })
            .collect();
        assert_eq!(
            records,
            vec![
                (-1, Some(b"k0".to_vec()), b"v0".to_vec()),
                (1_700_000_000_123, None, b"v1".to_vec()),
            ]
        );
        let e = up_convert(&message(1, 0, 5, None, b"v", true)).unwrap_err();
        assert!(e.contains("CRC"), "{e}");
        let e = up_convert(&message(1, 1, 5, None, b"v", false)).unwrap_err();
        assert!(e.contains("compressed"), "{e}");
        assert!(
            up_convert(&set[..set.len() - 1])
                .unwrap_err()
                .contains("truncated")
        );
        assert!(up_convert(&[]).is_err());

        // Down-converted (Fetch v0-3): magic 1 messages at the batch's offsets, which
        // up-convert to the same records.
        let set = down_convert(&batch, "t-0").unwrap();
        assert_eq!(set[16], 1, "magic 1");
        assert_eq!(i64::from_be_bytes(set[..8].try_into().unwrap()), 0);
        assert_eq!(up_convert(&set).unwrap(), batch);
    }
}
