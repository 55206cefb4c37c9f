//! Interop proof for the RecordBatch v2 format.
//!
//! * `tests/fixtures/kafka-python/batch.bin` was built by a real Kafka client
//!   (kafka-python's `DefaultRecordBatchBuilder`, see `gen_fixture.py` beside it): tidelog
//!   must decode every field of it, and tidelog's own encoder must produce the same
//!   bytes for the same records (everything but the broker-stamped partitionLeaderEpoch).
//! * The reverse direction, a batch tidelog encodes decoded by kafka-python, is
//!   `tests/interop/record_roundtrip.py`, which runs `emit_batch_for_kafka_python` below
//!   with `TIDELOG_INTEROP_OUT` set.
//!
//! The records are those of `tests/interop/interop_records.py`.

use tidelog::record::{HEADER_LEN, batches};
use tidelog::{Batch, BatchBuilder, Error};

const PRODUCER_ID: i64 = 4242;
const PRODUCER_EPOCH: i16 = 3;
const BASE_SEQUENCE: i32 = 17;

type Header = (&'static str, Option<Vec<u8>>);

struct Rec {
    ts: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<Header>,
}

/// The records of `tests/interop/interop_records.py`.
fn records() -> Vec<Rec> {
    let b = |s: &[u8]| Some(s.to_vec());
    vec![
        Rec {
            ts: 1_700_000_000_000,
            key: b(b"key-0"),
            value: b(b"hello"),
            headers: vec![("trace-id", b(b"abc123")), ("empty", b(b""))],
        },
        Rec {
            ts: 1_700_000_000_005,
            key: None,
            value: b(b"no key"),
            headers: vec![],
        },
        Rec {
            ts: 1_699_999_999_990,
            key: b(b"k2"),
            value: None,
            headers: vec![("null-value", None)],
        },
        Rec {
            ts: 1_700_000_000_123,
            key: b(b"big"),
            value: Some((0..300u32).map(|i| (i % 251) as u8).collect()),
            headers: vec![("h\u{e9}ader", b(b"\x00\xff"))],
        },
        Rec {
            ts: 1_700_000_000_100,
            key: b(b""),
            value: b(b""),
            headers: vec![],
        },
    ]
}

fn encode_with_tidelog() -> Vec<u8> {
    let mut builder = BatchBuilder::new().producer(PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE);
    for (delta, r) in records().iter().enumerate() {
        builder.push_record(
            delta as i32,
            r.ts,
            r.key.as_deref(),
            r.value.as_deref(),
            r.headers.iter().map(|(k, v)| (*k, v.as_deref())),
        );
    }
    builder.finish()
}

/// Checks every header and record field of a batch holding `records()` at base offset 0.
fn check_batch(batch: &Batch<'_>, leader_epoch: i32) {
    let recs = records();
    assert_eq!(batch.base_offset(), 0);
    assert_eq!(batch.partition_leader_epoch(), leader_epoch);
    assert_eq!(batch.attributes(), 0);
    assert_eq!(batch.compression(), 0);
    assert!(!batch.timestamp_type_log_append());
    assert!(!batch.is_transactional());
    assert!(!batch.is_control());
    assert_eq!(batch.record_count(), recs.len() as i32);
    assert_eq!(batch.last_offset_delta(), recs.len() as i32 - 1);
    assert_eq!(batch.last_offset(), recs.len() as i64 - 1);
    assert_eq!(batch.base_timestamp(), recs[0].ts);
    assert_eq!(
        batch.max_timestamp(),
        recs.iter().map(|r| r.ts).max().unwrap()
    );
    assert_eq!(batch.producer_id(), PRODUCER_ID);
    assert_eq!(batch.producer_epoch(), PRODUCER_EPOCH);
    assert_eq!(batch.base_sequence(), BASE_SEQUENCE);
    let decoded: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(decoded.len(), recs.len());
    for (i, (got, want)) in decoded.iter().zip(&recs).enumerate() {
        assert_eq!(got.offset, i as i64, "record {i}");
        assert_eq!(got.timestamp, want.ts, "record {i}");
        assert_eq!(got.key, want.key.as_deref(), "record {i}");
        assert_eq!(got.value, want.value.as_deref(), "record {i}");
        assert_eq!(got.headers.len(), want.headers.len(), "record {i}");
        let headers: Vec<(&str, Option<&[u8]>)> = got.headers.iter().collect();
        let expected: Vec<(&str, Option<&[u8]>)> = want
            .headers
            .iter()
            .map(|(k, v)| (*k, v.as_deref()))
            .collect();
        assert_eq!(headers, expected, "record {i}");
    }
}

#[test]
fn kafka_python_batch_decodes_field_by_field() {
    let bytes = include_bytes!("fixtures/kafka-python/batch.bin");
    let batch = Batch::parse(bytes).expect("kafka-python's batch is valid");
    assert_eq!(batch.len(), bytes.len());
    // kafka-python leaves partitionLeaderEpoch 0 (the broker stamps it).
    check_batch(&batch, 0);
    // The same bytes through the multi-batch iterator.
    let all: Vec<_> = batches(bytes).collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), 1);
}

#[test]
fn tidelog_encodes_the_same_bytes_as_kafka_python() {
    let theirs = include_bytes!("fixtures/kafka-python/batch.bin");
    let ours = encode_with_tidelog();
    assert_eq!(ours.len(), theirs.len());
    // Bytes 12..16 are partitionLeaderEpoch: kafka-python writes 0, tidelog -1 (the
    // broker stamps it either way; it lies outside the CRC).
    assert_eq!(ours[..12], theirs[..12], "baseOffset and batchLength");
    assert_eq!(ours[16..], theirs[16..], "magic, CRC, header and records");
    check_batch(&Batch::parse(&ours).unwrap(), -1);
}

#[test]
fn kafka_python_gzip_batch_validates_but_records_are_not_decoded() {
    let bytes = include_bytes!("fixtures/kafka-python/batch-gzip.bin");
    let batch = Batch::parse(bytes).expect("CRC and length of a compressed batch check out");
    assert_eq!(batch.compression(), 1, "gzip");
    assert_eq!(batch.record_count(), records().len() as i32);
    assert_eq!(batch.producer_id(), PRODUCER_ID);
    let mut recs = batch.records();
    let err = recs.next().unwrap().unwrap_err();
    assert!(
        matches!(err, Error::InvalidBatch(ref m) if m.contains("codec 1")),
        "{err}"
    );
    assert!(recs.next().is_none(), "one error, then the iterator ends");
}

#[test]
fn damaged_fixture_is_corrupt_naming_the_input() {
    let bytes = include_bytes!("fixtures/kafka-python/batch.bin");
    // A flipped bit anywhere from the attributes on breaks the CRC.
    for at in [21, 40, HEADER_LEN, bytes.len() - 1] {
        let mut b = bytes.to_vec();
        b[at] ^= 0x10;
        let err = Batch::parse(&b).unwrap_err();
        assert!(err.is_corruption(), "byte {at}: {err}");
        assert!(err.to_string().contains("input"), "{err}");
        assert!(err.to_string().contains("CRC"), "{err}");
    }
    // Wrong magic.
    let mut b = bytes.to_vec();
    b[16] = 1;
    assert!(Batch::parse(&b).unwrap_err().to_string().contains("magic"));
    // Every truncation is an error, never a panic.
    for len in 0..bytes.len() {
        let err = Batch::parse(&bytes[..len]).unwrap_err();
        assert!(err.is_corruption(), "length {len}: {err}");
    }
    // Trailing garbage after one batch.
    let mut b = bytes.to_vec();
    b.push(0);
    assert!(Batch::parse(&b).unwrap_err().is_corruption());
    // Through the file-naming entry point the error names the file and position.
    let err = Batch::parse_at(&bytes[..100], "/data/t-0/00000000000000000000.log", 4096)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/data/t-0/00000000000000000000.log") && err.contains("4096"),
        "{err}"
    );
}

/// Writes a tidelog-encoded batch for `tests/interop/record_roundtrip.py` (which decodes
/// it with kafka-python) to the path in `TIDELOG_INTEROP_OUT`; without the variable it
/// only checks the batch.
#[test]
fn emit_batch_for_kafka_python() {
    let bytes = encode_with_tidelog();
    check_batch(&Batch::parse(&bytes).unwrap(), -1);
    if let Some(path) = std::env::var_os("TIDELOG_INTEROP_OUT") {
        std::fs::write(&path, &bytes).expect("write TIDELOG_INTEROP_OUT");
    }
}
