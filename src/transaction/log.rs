//! The records of `__transaction_state`, byte for byte as Kafka writes them.
//!
//! A record's key is a version-prefixed `TransactionLogKey` (version 0: the
//! transactional id as a `string`); its value a version-prefixed `TransactionLogValue`
//! (version 0: fixed fields; version 1: the same fields in Kafka's flexible encoding
//! with the tagged fields `PreviousProducerId` (tag 0), `NextProducerId` (tag 1) and
//! `ClientTransactionVersion` (tag 2)). A null value (a tombstone) removes the
//! transactional id. docs/design.md ("Transactions") draws the bytes.

use std::collections::BTreeSet;

use crate::error::{Error, Result, TxnState};

/// The internal topic that holds the coordinators' records.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Kafka's default partition count of [`TRANSACTION_STATE_TOPIC`]
/// (`transaction.state.log.num.partitions`).
pub const DEFAULT_TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// The one key version.
pub const KEY_VERSION: i16 = 0;

/// The highest value version: 1, the flexible one with tagged fields.
pub const VALUE_VERSION: i16 = 1;

/// The partition of [`TRANSACTION_STATE_TOPIC`] whose leader coordinates
/// `transactional_id`: the absolute value of Java's `String.hashCode` (UTF-16 code
/// units), modulo `partitions`, as Kafka computes it.
///
/// `partitions` must be positive; a count below 1 is taken as 1.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator::partition_for(transactional_id, partitions)
}

/// The value of one `__transaction_state` record: what a transactional id's coordinator
/// remembers of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last transition that changed it (-1: none). Version
    /// 1 only (tagged field 0).
    pub previous_producer_id: i64,
    /// KIP-890: the producer id the transactional id moves to when the current
    /// transaction completes, after its epochs ran out (-1: none). Version 1 only
    /// (tagged field 1).
    pub next_producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The transaction timeout in milliseconds.
    pub timeout_ms: i32,
    /// The transaction's state.
    pub state: TxnState,
    /// The partitions of the transaction, as (topic, partition). Written as null in
    /// state Empty.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the transaction was last updated (ms since the epoch).
    pub last_update_ms: i64,
    /// When the transaction started (its first partition was added), or -1.
    pub txn_start_ms: i64,
    /// The transaction version the client uses (2: KIP-890's epoch bump at the end of
    /// every transaction). Version 1 only (tagged field 2).
    pub client_transaction_version: i16,
}

/// The key bytes of `transactional_id`'s records.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

/// The transactional id of a record's key; `None` for a key version this coordinator
/// does not know (Kafka skips those records when it loads a partition).
pub fn decode_key(bytes: &[u8]) -> Result<Option<String>> {
    let mut r = Reader::new(bytes, "__transaction_state record key");
    let version = r.i16("key version")?;
    if version != KEY_VERSION {
        return Ok(None);
    }
    let id = r.string("transactional id")?;
    r.finish()?;
    Ok(Some(id))
}

/// The value bytes of `value` at `version` (0 or 1; anything above 1 is written as 1).
/// Version 0 has no tagged fields: the previous and next producer ids and the client's
/// transaction version are not written.
pub fn encode_value(value: &TransactionLogValue, version: i16) -> Vec<u8> {
    let flexible = version >= 1;
    let version = if flexible { 1i16 } else { 0 };
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&value.producer_id.to_be_bytes());
    out.extend_from_slice(&value.producer_epoch.to_be_bytes());
    out.extend_from_slice(&value.timeout_ms.to_be_bytes());
    out.push(value.state.id() as u8);
    // Grouped by topic, topics and partitions in order.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &value.partitions {
        match topics.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*partition),
            _ => topics.push((topic.as_str(), vec![*partition])),
        }
    }
    let null = value.state == TxnState::Empty;
    if flexible {
        if null {
            put_uvarint(&mut out, 0);
        } else {
            put_uvarint(&mut out, topics.len() as u32 + 1);
            for (topic, partitions) in &topics {
                put_uvarint(&mut out, topic.len() as u32 + 1);
                out.extend_from_slice(topic.as_bytes());
                put_uvarint(&mut out, partitions.len() as u32 + 1);
                for p in partitions {
                    out.extend_from_slice(&p.to_be_bytes());
                }
                put_uvarint(&mut out, 0); // the entry's tagged fields
            }
        }
    } else if null {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, partitions) in &topics {
            put_string(&mut out, topic);
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&value.last_update_ms.to_be_bytes());
    out.extend_from_slice(&value.txn_start_ms.to_be_bytes());
    if flexible {
        // Tagged fields in tag order, each only when it differs from its default.
        let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
        if value.previous_producer_id != -1 {
            tags.push((0, value.previous_producer_id.to_be_bytes().to_vec()));
        }
        if value.next_producer_id != -1 {
            tags.push((1, value.next_producer_id.to_be_bytes().to_vec()));
        }
        if value.client_transaction_version != 0 {
            tags.push((2, value.client_transaction_version.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut out, tags.len() as u32);
        for (tag, data) in tags {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, data.len() as u32);
            out.extend_from_slice(&data);
        }
    }
    out
}

/// Decodes a record value of version 0 or 1. Refuses unknown versions, unknown states,
/// truncated or overlong input with [`Error::Corrupt`] naming the field and its byte
/// position. Unknown tagged fields are skipped, as Kafka does.
pub fn decode_value(bytes: &[u8]) -> Result<TransactionLogValue> {
    let mut r = Reader::new(bytes, "__transaction_state record value");
    let version = r.i16("value version")?;
    if !(0..=VALUE_VERSION).contains(&version) {
        return Err(r.corrupt(0, format!("unknown value version {version}")));
    }
    let flexible = version >= 1;
    let producer_id = r.i64("producer id")?;
    let producer_epoch = r.i16("producer epoch")?;
    let timeout_ms = r.i32("transaction timeout")?;
    let status_at = r.pos;
    let status = r.i8("transaction status")?;
    let state = TxnState::from_id(status)
        .ok_or_else(|| r.corrupt(status_at, format!("unknown transaction status {status}")))?;
    let mut partitions = BTreeSet::new();
    let count_at = r.pos;
    let topics = if flexible {
        r.uvarint("partition array length")?.checked_sub(1)
    } else {
        let n = r.i32("partition array length")?;
        if n < -1 {
            return Err(r.corrupt(count_at, format!("negative array length {n}")));
        }
        u32::try_from(n).ok()
    };
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            r.compact_string("topic")?
        } else {
            r.string("topic")?
        };
        let n_at = r.pos;
        let n = if flexible {
            r.uvarint("partition id array length")?.checked_sub(1)
        } else {
            u32::try_from(r.i32("partition id array length")?).ok()
        }
        .ok_or_else(|| r.corrupt(n_at, "null or negative partition id array".into()))?;
        for _ in 0..n {
            let p = r.i32("partition id")?;
            partitions.insert((topic.clone(), p));
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
    }
    if state == TxnState::Empty {
        // Kafka ignores the partitions of an Empty record.
        partitions.clear();
    }
    let last_update_ms = r.i64("last update timestamp")?;
    let txn_start_ms = r.i64("transaction start timestamp")?;
    let mut value = TransactionLogValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        txn_start_ms,
        client_transaction_version: 0,
    };
    if flexible {
        let n = r.uvarint("tagged field count")?;
        for _ in 0..n {
            let tag = r.uvarint("tag")?;
            let size_at = r.pos;
            let size = r.uvarint("tagged field size")? as usize;
            let data = r.take(size, "tagged field")?;
            let want = match tag {
                0 | 1 => 8,
                2 => 2,
                _ => continue,
            };
            if size != want {
                return Err(r.corrupt(
                    size_at,
                    format!("tagged field {tag} has {size} bytes, not {want}"),
                ));
            }
            match tag {
                0 => {
                    value.previous_producer_id =
                        i64::from_be_bytes(data.try_into().unwrap_or([0; 8]))
                }
                1 => value.next_producer_id = i64::from_be_bytes(data.try_into().unwrap_or([0; 8])),
                _ => {
                    value.client_transaction_version =
                        i16::from_be_bytes(data.try_into().unwrap_or([0; 2]))
                }
            }
        }
    }
    r.finish()?;
    Ok(value)
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    // Kafka's strings are at most i16::MAX bytes; longer ones are cut (never produced
    // by a coordinator, whose ids come from requests with the same limit).
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as i16).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over input bytes that names the field and position of what it refuses.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    location: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], location: &'static str) -> Self {
        Reader {
            bytes,
            pos: 0,
            location,
        }
    }

    fn corrupt(&self, position: usize, reason: String) -> Error {
        Error::Corrupt {
            location: self.location.to_string(),
            position: position as u64,
            reason,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(self.corrupt(
                self.pos,
                format!("truncated {what}: {n} bytes needed, {left} left"),
            ));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn i8(&mut self, what: &str) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array(what)?))
    }

    fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn uvarint(&mut self, what: &str) -> Result<u32> {
        let start = self.pos;
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [b] = self.array::<1>(what)?;
            if shift == 28 && b > 0x0f {
                return Err(self.corrupt(start, format!("{what}: varint overflows 32 bits")));
            }
            v |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt(start, format!("{what}: varint longer than 5 bytes")))
    }

    fn utf8(&self, at: usize, bytes: &[u8], what: &str) -> Result<String> {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| self.corrupt(at, format!("{what} is not UTF-8")))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self.i16(what)?;
        let len = usize::try_from(len)
            .map_err(|_| self.corrupt(at, format!("{what} is null or has length {len}")))?;
        let bytes = self.take(len, what)?;
        self.utf8(at, bytes, what)
    }

    fn compact_string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self
            .uvarint(what)?
            .checked_sub(1)
            .ok_or_else(|| self.corrupt(at, format!("{what} is null")))?;
        let bytes = self.take(len as usize, what)?;
        self.utf8(at, bytes, what)
    }

    fn skip_tagged_fields(&mut self) -> Result<()> {
        let n = self.uvarint("tagged field count")?;
        for _ in 0..n {
            self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            self.take(size, "tagged field")?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        if self.pos != self.bytes.len() {
            return Err(self.corrupt(
                self.pos,
                format!("{} bytes after the end", self.bytes.len() - self.pos),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TransactionLogValue {
        TransactionLogValue {
            producer_id: 7,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [
                ("a".to_string(), 0),
                ("a".to_string(), 2),
                ("b".to_string(), 1),
            ]
            .into_iter()
            .collect(),
            last_update_ms: 1_000,
            txn_start_ms: 900,
            client_transaction_version: 0,
        }
    }

    #[test]
    fn key_bytes_are_kafkas() {
        assert_eq!(encode_key("tx"), [0, 0, 0, 2, b't', b'x']);
        assert_eq!(
            decode_key(&[0, 0, 0, 2, b't', b'x']).unwrap(),
            Some("tx".into())
        );
        assert_eq!(
            decode_key(&[0, 1, 0, 0]).unwrap(),
            None,
            "unknown key versions are skipped"
        );
        assert!(matches!(
            decode_key(&[0, 0, 0, 3, b't']),
            Err(Error::Corrupt { position: 4, .. })
        ));
        assert!(matches!(
            decode_key(&[0, 0, 0, 1, b't', 0]),
            Err(Error::Corrupt { position: 5, .. })
        ));
    }

    #[test]
    fn value_v0_bytes_are_kafkas() {
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            0, 0,                   // version 0
            0, 0, 0, 0, 0, 0, 0, 7, // producer id
            0, 3,                   // epoch
            0, 0, 0xea, 0x60,       // timeout 60000
            1,                      // Ongoing
            0, 0, 0, 2,             // two topics
            0, 1, b'a', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2,
            0, 1, b'b', 0, 0, 0, 1, 0, 0, 0, 1,
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // last update 1000
            0, 0, 0, 0, 0, 0, 0x03, 0x84, // start 900
        ];
        assert_eq!(encode_value(&ongoing(), 0), expected);
        assert_eq!(decode_value(&expected).unwrap(), ongoing());
    }

    #[test]
    fn value_v1_bytes_are_kafkas() {
        let mut v = ongoing();
        v.next_producer_id = 8;
        v.client_transaction_version = 2;
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            0, 1,                   // version 1
            0, 0, 0, 0, 0, 0, 0, 7,
            0, 3,
            0, 0, 0xea, 0x60,
            1,
            3,                      // compact array: two topics
            2, b'a', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0,
            2, b'b', 2, 0, 0, 0, 1, 0,
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,
            0, 0, 0, 0, 0, 0, 0x03, 0x84,
            2,                      // two tagged fields
            1, 8, 0, 0, 0, 0, 0, 0, 0, 8, // NextProducerId
            2, 2, 0, 2,             // ClientTransactionVersion
        ];
        assert_eq!(encode_value(&v, 1), expected);
        assert_eq!(decode_value(&expected).unwrap(), v);
    }

    #[test]
    fn empty_state_writes_null_partitions() {
        let mut v = ongoing();
        v.state = TxnState::Empty;
        v.partitions.clear();
        v.txn_start_ms = -1;
        let v0 = encode_value(&v, 0);
        assert_eq!(&v0[17..21], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(decode_value(&v0).unwrap(), v);
        let v1 = encode_value(&v, 1);
        assert_eq!(v1[17], 0);
        assert_eq!(decode_value(&v1).unwrap(), v);
    }

    #[test]
    fn unknown_tags_are_skipped_and_bad_ones_refused() {
        let mut bytes = encode_value(&ongoing(), 1);
        let n = bytes.len();
        bytes[n - 1] = 1; // one tagged field
        bytes.extend_from_slice(&[9, 2, 0xab, 0xcd]);
        assert_eq!(decode_value(&bytes).unwrap(), ongoing());
        bytes.truncate(n);
        bytes.extend_from_slice(&[2, 1, 0xab]); // tag 2 of 1 byte
        assert!(matches!(decode_value(&bytes), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn bad_versions_and_states_are_refused() {
        let mut bytes = encode_value(&ongoing(), 1);
        bytes[1] = 2;
        let err = decode_value(&bytes).unwrap_err().to_string();
        assert!(err.contains("unknown value version 2"), "{err}");
        let mut bytes = encode_value(&ongoing(), 0);
        bytes[16] = 9;
        let err = decode_value(&bytes).unwrap_err();
        assert!(matches!(err, Error::Corrupt { position: 16, .. }), "{err}");
        let mut bytes = encode_value(&ongoing(), 0);
        bytes.push(0);
        assert!(matches!(decode_value(&bytes), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn every_truncation_is_refused() {
        let mut v = ongoing();
        v.previous_producer_id = 5;
        v.client_transaction_version = 2;
        for version in [0, 1] {
            let bytes = encode_value(&v, version);
            for len in 0..bytes.len() {
                let err = decode_value(&bytes[..len]).expect_err("truncated value decoded");
                assert!(matches!(err, Error::Corrupt { .. }), "{err}");
            }
        }
        let key = encode_key("transactional");
        for len in 0..key.len() {
            assert!(decode_key(&key[..len]).is_err(), "key of {len} bytes");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic generator: every byte string is refused or decodes to a
        // value that encodes back to a decodable value.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let base = encode_value(&ongoing(), 1);
        for _ in 0..5_000 {
            let mut bytes = base.clone();
            for _ in 0..3 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let i = (seed as usize) % bytes.len();
                bytes[i] = (seed >> 32) as u8;
            }
            if let Ok(v) = decode_value(&bytes) {
                assert_eq!(decode_value(&encode_value(&v, 1)).unwrap(), v);
            }
            let _ = decode_key(&bytes);
        }
    }

    #[test]
    fn partitions_are_kafkas() {
        // Java: "".hashCode() == 0, "a".hashCode() == 97, "tx-1".hashCode() == 3572520.
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("tx-1", 50), 3_572_520 % 50);
        // A negative hash: Kafka's Utils.abs masks the sign bit.
        assert_eq!(partition_for("my-transactional-id", 50), 2);
        for id in ["x", "my-transactional-id", "é"] {
            assert!((0..50).contains(&partition_for(id, 50)));
        }
    }
}
