//! Interop proof for the RecordBatch v2 format.
//!
//! * `tests/fixtures/kafka-python/batch.bin` was built by a real Kafka client
//!   (kafka-python's `DefaultRecordBatchBuilder`, see `gen_fixture.py` beside it): tidelog
//!   must decode every field of it, and tidelog's own encoder must produce the same
//!   bytes for the same records (everything but the broker-stamped partitionLeaderEpoch).
//! * The reverse direction, a batch tidelog encodes decoded by kafka-python, is
//!   `tests/interop/record_roundtrip.py`, which runs `emit_batch_for_kafka_python` below
//!   with `TIDELOG_INTEROP_OUT` set (and decodes transaction markers it writes too).
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
fn kafka_python_gzip_batch_decodes_to_the_same_records() {
    let bytes = include_bytes!("fixtures/kafka-python/batch-gzip.bin");
    let batch = Batch::parse(bytes).expect("CRC and length of a compressed batch check out");
    assert_eq!(batch.compression(), 1, "gzip");
    assert_eq!(batch.record_count(), records().len() as i32);
    assert_eq!(batch.producer_id(), PRODUCER_ID);
    // Read without decompressing, the records are one error naming the codec.
    let mut recs = batch.records();
    let err = recs.next().unwrap().unwrap_err();
    assert!(
        matches!(err, Error::InvalidBatch(ref m) if m.contains("gzip")),
        "{err}"
    );
    assert!(recs.next().is_none(), "one error, then the iterator ends");
    // Decompressed, they are the records of the uncompressed fixture.
    let plain = include_bytes!("fixtures/kafka-python/batch.bin");
    let plain = Batch::parse(plain).unwrap();
    let mut scratch = Vec::new();
    let got: Vec<_> = batch
        .decode_records("fixture", 1 << 20, &mut scratch)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<_> = plain.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            (g.offset, g.timestamp, g.key, g.value, g.headers.len()),
            (w.offset, w.timestamp, w.key, w.value, w.headers.len())
        );
    }
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
/// it with kafka-python) to the path in `TIDELOG_INTEROP_OUT`, and to
/// `$TIDELOG_INTEROP_OUT.fetched` the bytes a read of a log holding it returns; without
/// the variable it only checks them.
#[test]
fn emit_batch_for_kafka_python() {
    let bytes = encode_with_tidelog();
    check_batch(&Batch::parse(&bytes).unwrap(), -1);
    // The same batch as a consumer fetches it: read back from a log where it landed at
    // offset 3, after a 3-record batch (stamped baseOffset, two batches back to back).
    let tmp = tempfile::tempdir().unwrap();
    let log =
        tidelog::storage::PartitionLog::open(tmp.path(), "interop-0", Default::default()).unwrap();
    let mut first = BatchBuilder::new();
    for i in 0..3u8 {
        first.push(1_600_000_000_000 + i as i64, None, Some(&[i]), &[]);
    }
    log.append(&first.finish()).unwrap();
    assert_eq!(log.append(&bytes).unwrap().base_offset, 3);
    let fetched = log.read(0, 1 << 20).unwrap().to_vec();
    assert_eq!(batches(&fetched).count(), 2);
    if let Some(path) = std::env::var_os("TIDELOG_INTEROP_OUT") {
        std::fs::write(&path, &bytes).expect("write TIDELOG_INTEROP_OUT");
        let mut fetched_path = path;
        fetched_path.push(".fetched");
        std::fs::write(&fetched_path, &fetched).expect("write TIDELOG_INTEROP_OUT.fetched");
    }
    // A transaction's end as a consumer fetches it: a transactional batch, a COMMIT
    // marker, then an ABORT one, at offsets 0, 1 and 2 of another log.
    let tmp = tempfile::tempdir().unwrap();
    let log =
        tidelog::storage::PartitionLog::open(tmp.path(), "interop-1", Default::default()).unwrap();
    let mut txn = BatchBuilder::new()
        .producer(PRODUCER_ID, PRODUCER_EPOCH, 0)
        .attributes(tidelog::record::TRANSACTIONAL_BIT);
    txn.push(1_700_000_000_000, None, Some(b"in a transaction"), &[]);
    log.append_idempotent(&txn.finish()).unwrap();
    for marker in [
        tidelog::record::EndTxnMarker::commit(7),
        tidelog::record::EndTxnMarker::abort(7),
    ] {
        log.append_end_txn_marker(PRODUCER_ID, PRODUCER_EPOCH, marker, 1_700_000_000_001)
            .unwrap();
    }
    let markers = log.read(0, 1 << 20).unwrap().to_vec();
    assert_eq!(batches(&markers).count(), 3);
    if let Some(path) = std::env::var_os("TIDELOG_INTEROP_OUT") {
        let mut markers_path = path;
        markers_path.push(".markers");
        std::fs::write(&markers_path, &markers).expect("write TIDELOG_INTEROP_OUT.markers");
    }
}

/// A batch from outside is validated before anything is written: a damaged one (alone or
/// after a good one in the same append) is `Error::Corrupt` naming the input and leaves
/// the log untouched; the undamaged kafka-python batch is stored byte for byte.
#[test]
fn append_validates_batches_from_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let log =
        tidelog::storage::PartitionLog::open(tmp.path(), "interop-0", Default::default()).unwrap();
    let good = include_bytes!("fixtures/kafka-python/batch.bin").to_vec();
    let mut flipped = good.clone();
    flipped[200] ^= 1;
    let mut bad_magic = good.clone();
    bad_magic[16] = 0;
    let both = [good.clone(), flipped.clone()].concat();
    for (what, bytes) in [
        ("flipped bit", &flipped[..]),
        ("bad magic", &bad_magic[..]),
        ("torn", &good[..good.len() - 1]),
        ("header only", &good[..HEADER_LEN]),
        ("good then damaged", &both[..]),
    ] {
        let err = log.append(bytes).unwrap_err();
        assert!(err.is_corruption(), "{what}: {err}");
        assert!(err.to_string().contains("input"), "{what}: {err}");
        assert_eq!(log.log_end_offset(), 0, "{what}: nothing written");
    }
    assert!(matches!(log.append(&[]), Err(Error::InvalidBatch(_))));
    let info = log.append(&good).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 4));
    let slice = log.read(0, 1 << 20).unwrap();
    assert_eq!(
        &slice[..],
        &good[..],
        "stored as sent (base offset 0 stamped)"
    );
    log.close().unwrap();
}

type ArbRecord = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

/// Lengths around the varint byte boundaries (63/64, 8191/8192) and beyond.
fn arb_bytes() -> impl proptest::strategy::Strategy<Value = Option<Vec<u8>>> {
    use proptest::prelude::*;
    let len = prop_oneof![0usize..3, 60usize..68, 8185usize..8200, 0usize..20_000];
    proptest::option::of(len.prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n)))
}

fn arb_record() -> impl proptest::strategy::Strategy<Value = ArbRecord> {
    use proptest::prelude::*;
    // Kafka timestamps are >= 0, or -1 for "none" (the max timestamp starts at -1).
    let ts = prop_oneof![
        -1i64..=i64::MAX,
        (-1i64..=1),
        (1_600_000_000_000i64..1_800_000_000_000)
    ];
    let header = ("[a-z\u{e9}]{0,70}", arb_bytes());
    (
        ts,
        arb_bytes(),
        arb_bytes(),
        proptest::collection::vec(header, 0..4),
    )
}

/// Whatever tidelog encodes, it decodes back field for field (timestamps, null keys,
/// values and header values, lengths across every varint width).
#[test]
fn encode_decode_round_trip() {
    use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};
    let config = Config {
        cases: 64,
        rng_seed: RngSeed::Fixed(0x1D7E_B47C),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    };
    let strategy = proptest::collection::vec(arb_record(), 1..6);
    TestRunner::new(config)
        .run(&strategy, |recs| {
            let mut b = BatchBuilder::new();
            for (ts, k, v, h) in &recs {
                let headers = h.iter().map(|(k, v)| (k.as_str(), v.as_deref()));
                let delta = b.len() as i32;
                b.push_record(delta, *ts, k.as_deref(), v.as_deref(), headers);
            }
            let bytes = b.finish();
            let batch = Batch::parse(&bytes).expect("own batch parses");
            assert_eq!(batch.record_count(), recs.len() as i32);
            assert_eq!(batch.base_timestamp(), recs[0].0);
            assert_eq!(
                batch.max_timestamp(),
                recs.iter().map(|r| r.0).max().unwrap()
            );
            let decoded: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
            assert_eq!(decoded.len(), recs.len());
            for (i, (r, (ts, k, v, h))) in decoded.iter().zip(&recs).enumerate() {
                assert_eq!(r.offset, i as i64);
                assert_eq!(r.timestamp, *ts);
                assert_eq!(r.key, k.as_deref());
                assert_eq!(r.value, v.as_deref());
                let got: Vec<(&str, Option<&[u8]>)> = r.headers.iter().collect();
                let want: Vec<(&str, Option<&[u8]>)> =
                    h.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
                assert_eq!(got, want);
            }
            Ok(())
        })
        .unwrap();
}
