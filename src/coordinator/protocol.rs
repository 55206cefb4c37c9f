//! The bytes of Kafka's `ConsumerProtocol` that carry subscriptions and assignments
//! (what JoinGroup and SyncGroup hold; the coordinator reads them, the members write
//! them).
//!
//! Subscription (JoinGroup protocol metadata), version 0 (version 1 adds
//! `owned_partitions`, which is read and written when present):
//! `version: i16, topics: [string], user_data: bytes`.
//! Assignment (SyncGroup), version 0: `version: i16, partitions: [topic: string,
//! partitions: [i32]], user_data: bytes`. Arrays have an `i32` count, strings an `i16`
//! length, bytes an `i32` length (-1 = null), all big-endian. Later versions append
//! fields, so a reader takes the fields it knows and ignores the rest, as Kafka does.

use super::wire::{Reader, put_bytes, put_str};
use crate::error::Result;

/// A member's subscription, as carried in JoinGroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Topics the member subscribes to.
    pub topics: Vec<String>,
    /// Opaque assignor data.
    pub user_data: Option<Vec<u8>>,
    /// Partitions the member owns now (version 1+; used by sticky assignors).
    pub owned_partitions: Vec<(String, Vec<i32>)>,
}

/// A member's assignment, as carried in SyncGroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Assigned partitions per topic.
    pub partitions: Vec<(String, Vec<i32>)>,
    /// Opaque assignor data.
    pub user_data: Option<Vec<u8>>,
}

fn put_topic_partitions(out: &mut Vec<u8>, tps: &[(String, Vec<i32>)]) {
    out.extend_from_slice(&(tps.len() as i32).to_be_bytes());
    for (topic, parts) in tps {
        put_str(out, topic);
        out.extend_from_slice(&(parts.len() as i32).to_be_bytes());
        for p in parts {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
}

impl Subscription {
    /// The version of a subscription's bytes (0 when too short to tell).
    pub(crate) fn version_of(bytes: &[u8]) -> i16 {
        match bytes {
            [a, b, ..] => i16::from_be_bytes([*a, *b]),
            _ => 0,
        }
    }

    /// Encodes as `ConsumerProtocol` subscription version 0 (or 1 when
    /// `owned_partitions` is not empty).
    pub fn encode(&self) -> Vec<u8> {
        let version: i16 = if self.owned_partitions.is_empty() {
            0
        } else {
            1
        };
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&(self.topics.len() as i32).to_be_bytes());
        for t in &self.topics {
            put_str(&mut out, t);
        }
        put_bytes(&mut out, self.user_data.as_deref());
        if version >= 1 {
            put_topic_partitions(&mut out, &self.owned_partitions);
        }
        out
    }

    /// Decodes a subscription of any version (fields added after version 1 are
    /// ignored). Errors name the byte position of the malformed field.
    pub fn decode(bytes: &[u8]) -> Result<Subscription> {
        let mut r = Reader::new(bytes, "consumer protocol subscription");
        let version = r.i16()?;
        if version < 0 {
            return Err(r.err(format!("unsupported subscription version {version}")));
        }
        let n = r.count()?;
        let mut topics = Vec::with_capacity(n);
        for _ in 0..n {
            topics.push(r.string()?);
        }
        let user_data = if r.at_end() { None } else { r.bytes()? };
        let owned_partitions = if version >= 1 && !r.at_end() {
            r.topic_partitions()?
        } else {
            Vec::new()
        };
        Ok(Subscription {
            topics,
            user_data,
            owned_partitions,
        })
    }
}

/// The highest `ConsumerProtocol` assignment version (its fields are those of version
/// 0; later versions only follow the subscription's).
const HIGHEST_ASSIGNMENT_VERSION: i16 = 3;

impl Assignment {
    /// Encodes as `ConsumerProtocol` assignment version 0.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_at(0)
    }

    /// Encodes as `ConsumerProtocol` assignment at `version`, capped at the highest
    /// (3) and at least 0 (what Kafka's coordinator answers a member whose
    /// subscription is of `version`). Every version has the same fields.
    pub(crate) fn encode_at(&self, version: i16) -> Vec<u8> {
        let version = version.clamp(0, HIGHEST_ASSIGNMENT_VERSION);
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&version.to_be_bytes());
        put_topic_partitions(&mut out, &self.partitions);
        put_bytes(&mut out, self.user_data.as_deref());
        out
    }

    /// Decodes an assignment of any version. Empty bytes are an empty assignment (what
    /// the coordinator hands a member the leader left out).
    pub fn decode(bytes: &[u8]) -> Result<Assignment> {
        if bytes.is_empty() {
            return Ok(Assignment::default());
        }
        let mut r = Reader::new(bytes, "consumer protocol assignment");
        let version = r.i16()?;
        if version < 0 {
            return Err(r.err(format!("unsupported assignment version {version}")));
        }
        let partitions = r.topic_partitions()?;
        let user_data = if r.at_end() { None } else { r.bytes()? };
        Ok(Assignment {
            partitions,
            user_data,
        })
    }
}
