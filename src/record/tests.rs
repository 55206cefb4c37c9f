use super::*;
use crate::error::Error;

fn sample() -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(7, 1, 10);
    b.push(
        1000,
        Some(b"key"),
        Some(b"value"),
        &[("h1", b"v1"), ("h2", b"")],
    );
    b.push(990, None, None, &[]);
    b.push(1500, Some(b""), Some(&[0u8; 300]), &[]);
    b.finish()
}

#[test]
fn round_trip() {
    let bytes = sample();
    let batch = Batch::parse(&bytes).unwrap();
    assert_eq!(batch.record_count(), 3);
    assert_eq!(batch.base_offset(), 0);
    assert_eq!(batch.last_offset(), 2);
    assert_eq!(batch.base_timestamp(), 1000);
    assert_eq!(batch.max_timestamp(), 1500);
    assert_eq!(batch.producer_id(), 7);
    assert_eq!(batch.producer_epoch(), 1);
    assert_eq!(batch.base_sequence(), 10);
    assert_eq!(batch.partition_leader_epoch(), -1);
    let recs: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].key, Some(&b"key"[..]));
    assert_eq!(recs[0].value, Some(&b"value"[..]));
    let hs: Vec<_> = recs[0].headers.iter().collect();
    assert_eq!(hs, vec![("h1", Some(&b"v1"[..])), ("h2", Some(&b""[..]))]);
    assert_eq!(recs[1].timestamp, 990);
    assert_eq!(recs[1].key, None);
    assert_eq!(recs[1].value, None);
    assert_eq!(recs[1].offset, 1);
    assert_eq!(recs[2].key, Some(&b""[..]));
    assert_eq!(recs[2].value.unwrap().len(), 300);
}

#[test]
fn builder_is_reusable_and_advances_sequence() {
    let mut b = BatchBuilder::new().producer(1, 0, 0);
    b.push(1, None, Some(b"a"), &[]);
    b.push(2, None, Some(b"b"), &[]);
    let first = b.finish();
    assert!(b.is_empty());
    b.push(3, None, Some(b"c"), &[]);
    let mut second = Vec::new();
    b.finish_into(&mut second);
    assert_eq!(Batch::parse(&first).unwrap().base_sequence(), 0);
    let s = Batch::parse(&second).unwrap();
    assert_eq!(s.base_sequence(), 2);
    assert_eq!(s.record_count(), 1);
    assert_eq!(s.base_timestamp(), 3);
}

#[test]
fn record_size_matches_encoding() {
    let mut b = BatchBuilder::new();
    let before = b.size_bytes();
    b.push(5, Some(b"k"), Some(&[1u8; 200]), &[("x", b"y")]);
    assert_eq!(
        b.size_bytes() - before,
        BatchBuilder::record_size(0, 0, Some(b"k"), Some(&[1u8; 200]), &[("x", b"y")])
    );
}

#[test]
fn stamping_offset_and_epoch_keeps_crc_valid() {
    let mut bytes = sample();
    set_base_offset(&mut bytes, 1_000_000);
    set_partition_leader_epoch(&mut bytes, 5);
    let batch = Batch::parse(&bytes).unwrap();
    assert_eq!(batch.base_offset(), 1_000_000);
    assert_eq!(batch.last_offset(), 1_000_002);
    let offsets: Vec<i64> = batch.records().map(|r| r.unwrap().offset).collect();
    assert_eq!(offsets, vec![1_000_000, 1_000_001, 1_000_002]);
}

#[test]
fn log_append_time_rewrites_timestamps_and_crc() {
    let mut bytes = sample();
    set_log_append_time(&mut bytes, 42_000);
    let batch = Batch::parse(&bytes).unwrap();
    assert!(batch.timestamp_type_log_append());
    assert!(batch.records().all(|r| r.unwrap().timestamp == 42_000));
}

#[test]
fn every_flipped_bit_in_crc_range_is_detected() {
    let bytes = sample();
    for pos in 17..bytes.len() {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x10;
        let err = Batch::parse(&bad).unwrap_err();
        assert!(err.is_corruption(), "flip at {pos} gave {err}");
    }
}

#[test]
fn truncation_and_bad_lengths_are_errors_not_panics() {
    let bytes = sample();
    for cut in 0..bytes.len() {
        assert!(Batch::parse(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut bad = bytes.clone();
    bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(Batch::parse(&bad).is_err());
    let mut bad = bytes.clone();
    bad[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    let msg = Batch::parse(&bad).unwrap_err().to_string();
    assert!(msg.contains("torn batch"), "{msg}");
    let mut bad = bytes.clone();
    bad[16] = 1;
    let msg = Batch::parse(&bad).unwrap_err().to_string();
    assert!(msg.contains("magic"), "{msg}");
    let mut long = bytes.clone();
    long.push(0);
    assert!(Batch::parse(&long).is_err());
}

#[test]
fn malformed_records_inside_a_valid_crc_are_errors() {
    // A batch whose record section is garbage but whose CRC matches.
    let mut bytes = sample();
    for b in &mut bytes[61..70] {
        *b = 0xff;
    }
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch = Batch::parse(&bytes).unwrap();
    let results: Vec<_> = batch.records().collect();
    assert_eq!(results.len(), 1);
    assert!(matches!(results[0], Err(Error::InvalidBatch(_))));
}

#[test]
fn compressed_batches_report_the_codec() {
    let mut bytes = sample();
    bytes[22] |= 2; // snappy
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch = Batch::parse(&bytes).unwrap();
    assert_eq!(batch.compression(), 2);
    let err = batch.records().next().unwrap().unwrap_err().to_string();
    assert!(err.contains("snappy"), "{err}");
    // Its records section is not a snappy stream: decoding it says where.
    let err = batch
        .decode_records("t-0", 1 << 20, &mut Vec::new())
        .err()
        .unwrap();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("t-0 (batch at offset 0)"), "{err}");
    // Codec ids 5-7 are not Kafka's.
    let mut bytes = sample();
    bytes[22] |= 6;
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch = Batch::parse(&bytes).unwrap();
    assert!(
        batch
            .codec()
            .unwrap_err()
            .to_string()
            .contains("codec id 6")
    );
}

#[test]
fn builder_compresses_with_every_codec_and_decode_records_reads_it_back() {
    use crate::record::Compression;
    for codec in Compression::ALL {
        let mut b = BatchBuilder::new().producer(7, 1, 10).compression(codec);
        for i in 0..200u32 {
            let v = format!("value number {i} of a compressible batch");
            b.push(
                1000 + i64::from(i),
                Some(b"key"),
                Some(v.as_bytes()),
                &[("h", b"x")],
            );
        }
        let plain_size = b.size_bytes();
        let mut bytes = b.finish();
        set_base_offset(&mut bytes, 500);
        let batch = Batch::parse(&bytes).unwrap();
        assert_eq!(batch.compression(), codec.id());
        assert_eq!(batch.codec().unwrap(), codec);
        assert_eq!((batch.producer_id(), batch.base_sequence()), (7, 10));
        if codec != Compression::None {
            assert!(
                bytes.len() < plain_size / 2,
                "{codec}: {} of {plain_size}",
                bytes.len()
            );
        }
        let mut scratch = Vec::new();
        let records: Vec<_> = batch
            .decode_records("t-0", 1 << 20, &mut scratch)
            .unwrap()
            .map(Result::unwrap)
            .map(|r| {
                (
                    r.offset,
                    r.timestamp,
                    r.value.unwrap().to_vec(),
                    r.headers.len(),
                )
            })
            .collect();
        assert_eq!(records.len(), 200, "{codec}");
        assert_eq!(records[199].0, 699);
        assert_eq!(records[199].1, 1199);
        assert_eq!(records[3].2, b"value number 3 of a compressible batch");
        assert_eq!(records[3].3, 1);
        // Too small a limit is refused as corruption, naming the batch.
        if codec != Compression::None {
            let err = batch
                .decode_records("t-0", 100, &mut scratch)
                .err()
                .unwrap();
            assert!(err.to_string().contains("batch at offset 500"), "{err}");
        }
    }
}

#[test]
fn batch_iterator_walks_and_stops_at_damage() {
    let a = sample();
    let mut run = a.clone();
    run.extend_from_slice(&a);
    run.extend_from_slice(&a[..30]);
    let mut it = batches(&run).with_location("seg.log");
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_ok());
    let err = it.next().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("seg.log") && err.contains(&format!("{}", 2 * a.len())),
        "{err}"
    );
    assert!(it.next().is_none());
}

#[test]
fn crc32c_agrees_with_an_independent_implementation() {
    // Every length up to a few folding blocks, and unaligned starts: the SIMD paths
    // switch strategy by length and alignment.
    let data: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for len in (0..1_100).chain([4_095, 4_096, 4_097, 11_000, 19_990]) {
        for start in [0, 1, 7] {
            let s = &data[start..start + len];
            assert_eq!(
                super::crc32c(s),
                crc32c::crc32c(s),
                "length {len} at {start}"
            );
        }
    }
}

#[test]
fn a_header_alone_gives_the_same_fields_as_the_batch() {
    let mut b = BatchBuilder::new();
    b.push(1_000, Some(b"k"), Some(b"v1"), &[]);
    b.push(1_007, None, Some(b"v2"), &[]);
    let mut bytes = b.finish();
    set_base_offset(&mut bytes, 40);
    let batch = Batch::parse(&bytes).unwrap();
    let head = BatchHead::parse(&bytes[..HEADER_LEN]).unwrap();
    assert_eq!(head, batch.head());
    assert_eq!(
        (
            head.base_offset,
            head.len,
            head.last_offset,
            head.max_timestamp
        ),
        (40, bytes.len(), 41, 1_007)
    );
    // Short, wrong magic, a length below a header's, a negative delta: no header.
    assert_eq!(BatchHead::parse(&bytes[..HEADER_LEN - 1]), None);
    let mut bad = bytes.clone();
    bad[16] = 1;
    assert_eq!(BatchHead::parse(&bad), None);
    let mut bad = bytes.clone();
    bad[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert_eq!(BatchHead::parse(&bad), None);
    let mut bad = bytes;
    bad[23..27].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(BatchHead::parse(&bad), None);
}

#[test]
fn set_producer_numbers_a_batch_and_keeps_its_crc_valid() {
    let mut b = BatchBuilder::new();
    b.push(1_000, Some(b"k"), Some(b"v"), &[]);
    let mut bytes = b.finish();
    set_producer(&mut bytes, 42, 3, 17);
    let batch = Batch::parse(&bytes).expect("the CRC was recomputed");
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (42, 3, 17)
    );
    assert_eq!(
        batch.records().next().unwrap().unwrap().value,
        Some(&b"v"[..])
    );
}
