//! Control batches: the transaction markers (COMMIT, ABORT) the transaction
//! coordinator writes to every partition of a transaction, in Kafka's bytes
//! (`ControlRecordType`, `EndTransactionMarker`, `MemoryRecords.withEndTransactionMarker`).
//!
//! A marker batch is a RecordBatch v2 with the transactional and control attribute
//! bits set, the producer's id and epoch, base sequence -1, no compression,
//! CreateTime, and one record (attributes 0, timestamp and offset deltas 0, no
//! headers) whose
//! - key is the control record key, `version: i16` (0) then `type: i16` (0 = ABORT,
//!   1 = COMMIT; Kafka's other types are KRaft's and never appear in a partition);
//! - value is the EndTransactionMarker, `version: i16` (0) then
//!   `coordinator_epoch: i32`.
//!
//! The whole batch is 78 bytes: the 61 of the header and a record of 17.

use super::batch::{Batch, CONTROL_BIT, Record, TRANSACTIONAL_BIT};
use super::builder::BatchBuilder;
use crate::error::{Error, Result};

/// Size of a control record key (version and type).
pub const CONTROL_KEY_LEN: usize = 4;
/// Size of an EndTransactionMarker value (version and coordinator epoch).
pub const END_TXN_MARKER_VALUE_LEN: usize = 6;
/// Size of a whole end-transaction marker batch.
pub const END_TXN_MARKER_BATCH_LEN: usize = 78;

/// The type of a control record (Kafka's `ControlRecordType`), from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// The transaction is aborted: its records are to be skipped (type 0).
    Abort,
    /// The transaction is committed (type 1).
    Commit,
    /// Any other type id (Kafka's KRaft types 2 to 6, or one unknown to both): not a
    /// transaction marker.
    Other(i16),
}

impl ControlRecordType {
    /// The type id in the key.
    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::Other(id) => id,
        }
    }

    /// The type of id `id`.
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            other => ControlRecordType::Other(other),
        }
    }

    /// The 4 bytes of the control record key of this type (key version 0).
    pub fn key(self) -> [u8; CONTROL_KEY_LEN] {
        let mut k = [0u8; CONTROL_KEY_LEN];
        k[2..].copy_from_slice(&self.id().to_be_bytes());
        k
    }
}

/// A control record's key, parsed (Kafka's `ControlRecordType.parse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlRecord {
    /// The key's version (0; a newer one parses as 0, as Kafka does).
    pub version: i16,
    /// The record's type.
    pub kind: ControlRecordType,
}

impl ControlRecord {
    /// Parses a control record key: at least 4 bytes and a version not negative, else
    /// the reason it is refused.
    pub fn parse_key(key: Option<&[u8]>) -> std::result::Result<ControlRecord, String> {
        let key = key.ok_or("control record with a null key")?;
        if key.len() < CONTROL_KEY_LEN {
            return Err(format!(
                "control record key of {} bytes, need {CONTROL_KEY_LEN}",
                key.len()
            ));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(format!("control record key version {version}"));
        }
        Ok(ControlRecord {
            version,
            kind: ControlRecordType::from_id(i16::from_be_bytes([key[2], key[3]])),
        })
    }
}

/// An end-transaction marker: the record of a COMMIT or ABORT control batch (Kafka's
/// `EndTransactionMarker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTxnMarker {
    /// True for COMMIT, false for ABORT.
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// A COMMIT marker.
    pub fn commit(coordinator_epoch: i32) -> Self {
        EndTxnMarker {
            commit: true,
            coordinator_epoch,
        }
    }

    /// An ABORT marker.
    pub fn abort(coordinator_epoch: i32) -> Self {
        EndTxnMarker {
            commit: false,
            coordinator_epoch,
        }
    }

    /// Its control record type.
    pub fn kind(&self) -> ControlRecordType {
        if self.commit {
            ControlRecordType::Commit
        } else {
            ControlRecordType::Abort
        }
    }

    /// The record value: version 0, the coordinator epoch.
    pub fn value(&self) -> [u8; END_TXN_MARKER_VALUE_LEN] {
        let mut v = [0u8; END_TXN_MARKER_VALUE_LEN];
        v[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        v
    }

    /// Parses the record of a control batch as Kafka's `EndTransactionMarker.deserialize`:
    /// a key of type COMMIT or ABORT and a value of at least 6 bytes whose version is
    /// not negative (a newer version parses as 0). The error is the reason it is not.
    pub fn parse_record(record: &Record<'_>) -> std::result::Result<EndTxnMarker, String> {
        let key = ControlRecord::parse_key(record.key)?;
        let commit = match key.kind {
            ControlRecordType::Commit => true,
            ControlRecordType::Abort => false,
            ControlRecordType::Other(id) => {
                return Err(format!(
                    "control record type {id} is not a transaction marker"
                ));
            }
        };
        let value = record
            .value
            .ok_or("end transaction marker with a null value")?;
        if value.len() < END_TXN_MARKER_VALUE_LEN {
            return Err(format!(
                "end transaction marker value of {} bytes, need {END_TXN_MARKER_VALUE_LEN}",
                value.len()
            ));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(format!("end transaction marker version {version}"));
        }
        Ok(EndTxnMarker {
            commit,
            coordinator_epoch: i32::from_be_bytes(value[2..6].try_into().expect("4 bytes")),
        })
    }

    /// The marker of the control batch `batch`: `Ok(None)` if it is not a control batch
    /// or a control batch without records (Kafka: compaction removed the transaction);
    /// [`Error::Corrupt`] (naming `location` and the batch's base offset as position)
    /// if its first record does not parse as a COMMIT or ABORT marker, or the batch is
    /// compressed.
    pub fn of_batch(batch: &Batch<'_>, location: &str) -> Result<Option<EndTxnMarker>> {
        if !batch.is_control() {
            return Ok(None);
        }
        let bad = |why: String| {
            Error::corrupt(
                location,
                batch.base_offset().max(0) as u64,
                format!("control batch at offset {}: {why}", batch.base_offset()),
            )
        };
        if batch.compression() != 0 {
            return Err(bad("compressed".into()));
        }
        match batch.records().next() {
            None => Ok(None),
            Some(Err(e)) => Err(bad(e.to_string())),
            Some(Ok(record)) => EndTxnMarker::parse_record(&record).map(Some).map_err(bad),
        }
    }

    /// The control batch carrying this marker for producer `producer_id` at
    /// `producer_epoch`, its record at `timestamp` (Kafka's
    /// `MemoryRecords.withEndTransactionMarker`, base offset 0 and partition leader
    /// epoch -1: the log stamps both).
    ///
    /// ```
    /// use tidelog::record::{Batch, EndTxnMarker};
    ///
    /// let bytes = EndTxnMarker::commit(3).batch(42, 1, 1_000);
    /// let batch = Batch::parse(&bytes)?;
    /// assert!(batch.is_control() && batch.is_transactional());
    /// assert_eq!(EndTxnMarker::of_batch(&batch, "input")?, Some(EndTxnMarker::commit(3)));
    /// # Ok::<(), tidelog::Error>(())
    /// ```
    pub fn batch(&self, producer_id: i64, producer_epoch: i16, timestamp: i64) -> Vec<u8> {
        let mut b = BatchBuilder::with_capacity(END_TXN_MARKER_BATCH_LEN)
            .producer(producer_id, producer_epoch, -1)
            .attributes(TRANSACTIONAL_BIT | CONTROL_BIT);
        b.push(
            timestamp,
            Some(&self.kind().key()),
            Some(&self.value()),
            &[],
        );
        b.finish()
    }
}

/// Tests: a batch of `values` (timestamp 1000) compressed with `codec`, a
/// transactional one of producer `txn` (epoch 0, sequence 0) when given.
#[cfg(test)]
pub(crate) fn test_batch(txn: Option<i64>, codec: super::Compression, values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new().compression(codec);
    if let Some(pid) = txn {
        b = b.producer(pid, 0, 0).attributes(TRANSACTIONAL_BIT);
    }
    for v in values {
        b.push(1_000, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker batch, computed by hand from Kafka's format.
    fn expected(pid: i64, epoch: i16, coord: i32, kind: i16, ts: i64) -> Vec<u8> {
        let mut after_crc = Vec::new();
        after_crc.extend_from_slice(&0x0030i16.to_be_bytes()); // transactional | control
        after_crc.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        after_crc.extend_from_slice(&ts.to_be_bytes()); // baseTimestamp
        after_crc.extend_from_slice(&ts.to_be_bytes()); // maxTimestamp
        after_crc.extend_from_slice(&pid.to_be_bytes());
        after_crc.extend_from_slice(&epoch.to_be_bytes());
        after_crc.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
        after_crc.extend_from_slice(&1i32.to_be_bytes()); // records
        // The record: length 16 (zigzag 32), attributes, timestamp delta, offset delta,
        // key length 4 (zigzag 8), key, value length 6 (zigzag 12), value, no headers.
        after_crc.extend_from_slice(&[0x20, 0, 0, 0, 0x08, 0, 0]);
        after_crc.extend_from_slice(&kind.to_be_bytes());
        after_crc.extend_from_slice(&[0x0c, 0, 0]);
        after_crc.extend_from_slice(&coord.to_be_bytes());
        after_crc.push(0);
        let mut out = Vec::new();
        out.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
        out.extend_from_slice(&66i32.to_be_bytes()); // batchLength: 78 - 12
        out.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        out.push(2); // magic
        out.extend_from_slice(&crate::record::crc32c(&after_crc).to_be_bytes());
        out.extend_from_slice(&after_crc);
        out
    }

    #[test]
    fn marker_batches_are_kafkas_bytes() {
        let commit = EndTxnMarker::commit(7).batch(0x0102_0304_0506, 9, 1_700_000_000_000);
        assert_eq!(commit.len(), END_TXN_MARKER_BATCH_LEN);
        assert_eq!(
            commit,
            expected(0x0102_0304_0506, 9, 7, 1, 1_700_000_000_000)
        );
        let abort = EndTxnMarker::abort(-1).batch(5, 0, 0);
        assert_eq!(abort, expected(5, 0, -1, 0, 0));
        for (bytes, marker) in [
            (commit, EndTxnMarker::commit(7)),
            (abort, EndTxnMarker::abort(-1)),
        ] {
            let b = Batch::parse(&bytes).unwrap();
            assert!(b.is_control() && b.is_transactional());
            assert_eq!(b.base_sequence(), -1);
            assert_eq!(EndTxnMarker::of_batch(&b, "t").unwrap(), Some(marker));
        }
    }

    #[test]
    fn keys_parse_as_kafka_parses_them() {
        assert_eq!(ControlRecordType::Commit.key(), [0, 0, 0, 1]);
        assert_eq!(ControlRecordType::Abort.key(), [0, 0, 0, 0]);
        let k = ControlRecord::parse_key(Some(&[0, 1, 0, 2, 9])).unwrap();
        assert_eq!(k.version, 1);
        assert_eq!(k.kind, ControlRecordType::Other(2));
        assert!(ControlRecord::parse_key(Some(&[0, 0, 0])).is_err());
        assert!(ControlRecord::parse_key(Some(&[0xff, 0xff, 0, 0])).is_err());
        assert!(ControlRecord::parse_key(None).is_err());
    }

    fn control_batch(key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
        let mut b = BatchBuilder::new()
            .producer(1, 0, -1)
            .attributes(TRANSACTIONAL_BIT | CONTROL_BIT);
        b.push(0, key, value, &[]);
        b.finish()
    }

    #[test]
    fn a_control_batch_that_does_not_parse_is_corrupt() {
        for bytes in [
            control_batch(Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0])), // value too short
            control_batch(Some(&[0, 0, 0, 1]), None),
            control_batch(Some(&[0, 0, 0, 2]), Some(&[0; 6])), // LEADER_CHANGE
            control_batch(Some(&[0, 0]), Some(&[0; 6])),
            control_batch(Some(&[0, 0, 0, 0]), Some(&[0x80, 0, 0, 0, 0, 0])),
        ] {
            let b = Batch::parse(&bytes).unwrap();
            let e = EndTxnMarker::of_batch(&b, "t-0").unwrap_err();
            assert!(e.is_corruption(), "{e}");
        }
        // A newer value version with more bytes parses as version 0, as in Kafka.
        let bytes = control_batch(Some(&[0, 0, 0, 0]), Some(&[0, 1, 0, 0, 0, 4, 7, 7]));
        let b = Batch::parse(&bytes).unwrap();
        assert_eq!(
            EndTxnMarker::of_batch(&b, "t").unwrap(),
            Some(EndTxnMarker::abort(4))
        );
        // A data batch is no marker.
        let mut d = BatchBuilder::new();
        d.push(0, None, Some(b"v"), &[]);
        let bytes = d.finish();
        assert_eq!(
            EndTxnMarker::of_batch(&Batch::parse(&bytes).unwrap(), "t").unwrap(),
            None
        );
    }
}
