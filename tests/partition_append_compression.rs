//! `Partition::append_batch` and `append_idempotent` honour the topic's
//! `compression.type` as a Kafka broker does: `producer` keeps every batch as sent; a
//! codec (or `uncompressed`) stores the batches of another codec rewritten in it, with
//! the same records, offsets, timestamps, headers, producer id, epoch and sequence; a
//! damaged batch is refused, not rewritten with a fresh CRC.

use tidelog::record::batches;
use tidelog::{Batch, BatchBuilder, Broker, Compression, Error, TopicConfig};

/// A record as read back: offset, timestamp, key, value, headers.
type Row = (
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
);

/// A batch of three records compressed with `codec`, idempotent when `pid` is set.
fn batch(codec: Compression, producer: Option<(i64, i16, i32)>) -> Vec<u8> {
    let mut b = BatchBuilder::new().compression(codec);
    if let Some((pid, epoch, seq)) = producer {
        b = b.producer(pid, epoch, seq);
    }
    for i in 0..3i64 {
        let value = format!("value {i} of a batch compressed with {codec}");
        b.push(
            1_700_000_000_000 + i * 7,
            Some(format!("k{i}").as_bytes()),
            Some(value.as_bytes()),
            &[("h", format!("{i}").as_bytes())],
        );
    }
    b.finish()
}

/// Every stored batch of partition 0 of `topic`: its codec, producer id, epoch, base
/// sequence, and its records.
fn stored(broker: &Broker, topic: &str) -> Vec<(Compression, i64, i16, i32, Vec<Row>)> {
    let p = broker.topic(topic).unwrap().partition(0).unwrap();
    let slice = p.read(0, 1 << 20).unwrap();
    batches(&slice)
        .map(|b| {
            let b = b.unwrap();
            let mut scratch = Vec::new();
            let rows = b
                .decode_records(topic, 1 << 20, &mut scratch)
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    (
                        r.offset,
                        r.timestamp,
                        r.key.map(<[u8]>::to_vec),
                        r.value.map(<[u8]>::to_vec),
                        r.headers
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.unwrap().to_vec()))
                            .collect(),
                    )
                })
                .collect();
            (
                b.codec().unwrap(),
                b.producer_id(),
                b.producer_epoch(),
                b.base_sequence(),
                rows,
            )
        })
        .collect()
}

#[test]
fn the_topic_codec_rewrites_batches_of_other_codecs_and_producer_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let settings = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"];
    // What a `producer` topic stores is what was sent: the reference for the others.
    let mut reference = None;
    for setting in settings {
        let topic = format!("t-{setting}");
        broker
            .create_topic(
                &topic,
                1,
                TopicConfig::new().set("compression.type", setting),
            )
            .unwrap();
        let p = broker.topic(&topic).unwrap().partition(0).unwrap();
        for (i, codec) in Compression::ALL.into_iter().enumerate() {
            p.append_batch(&batch(codec, None)).unwrap();
            let seq = i as i32 * 3;
            let outcome = p.append_idempotent(&batch(codec, Some((42, 3, seq))));
            assert!(outcome.is_ok(), "{topic}: {outcome:?}");
        }
        let got = stored(&broker, &topic);
        assert_eq!(got.len(), 2 * Compression::ALL.len(), "{topic}");
        for (i, (codec, ..)) in got.iter().enumerate() {
            let sent = Compression::ALL[i / 2];
            let expected = if setting == "producer" {
                sent
            } else {
                setting.replace("uncompressed", "none").parse().unwrap()
            };
            assert_eq!(*codec, expected, "{topic}: batch {i} sent as {sent}");
        }
        // Producer fields, offsets, timestamps, keys, values and headers survive.
        let fields: Vec<_> = got
            .into_iter()
            .map(|(_, pid, epoch, seq, rows)| (pid, epoch, seq, rows))
            .collect();
        assert_eq!(fields[1].0, 42, "{topic}");
        assert_eq!(fields[1].1, 3, "{topic}");
        assert_eq!(fields[3].2, 3, "{topic}");
        match &reference {
            None => reference = Some(fields),
            Some(r) => assert_eq!(&fields, r, "{topic} stores the records as sent"),
        }
    }
}

#[test]
fn a_damaged_batch_is_refused_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    broker
        .create_topic("z", 1, TopicConfig::new().set("compression.type", "zstd"))
        .unwrap();
    let p = broker.topic("z").unwrap().partition(0).unwrap();
    let mut bad = batch(Compression::Gzip, None);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    match p.append_batch(&bad) {
        Err(Error::Corrupt { location, .. }) => assert!(location.contains("z-0"), "{location}"),
        other => panic!("a damaged batch was appended: {other:?}"),
    }
    assert_eq!(p.log_end_offset(), 0, "nothing appended");
    // The same batch intact goes in, in zstd.
    p.append_batch(&batch(Compression::Gzip, None)).unwrap();
    let slice = p.read(0, 1 << 20).unwrap();
    assert_eq!(
        Batch::parse(&slice).unwrap().codec().unwrap(),
        Compression::Zstd
    );
}
