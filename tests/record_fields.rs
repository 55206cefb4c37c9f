//! Keys, values, headers and timestamps arrive as sent; LogAppendTime topics report the
//! broker's time; fsync durability acknowledges after the flush.

use std::time::Duration;

use tidelog::{
    Broker, Consumer, ConsumerConfig, Durability, OffsetReset, Producer, ProducerRecord,
    TopicConfig,
};

#[test]
fn fields_round_trip_and_timestamp_types() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("create", 1, TopicConfig::new())?;
    broker.create_topic("append", 1, TopicConfig::new().log_append_time(true))?;
    let producer = Producer::builder(&broker)
        .durability(Durability::Fsync)
        .build()?;
    let headers: [(&str, &[u8]); 2] = [("trace", b"abc"), ("empty", b"")];
    let record = ProducerRecord::keyed(b"k", b"v")
        .headers(&headers)
        .timestamp(1_600_000_000_000);
    let created = producer.send("create", record)?;
    assert_eq!(created.timestamp, 1_600_000_000_000);
    let appended = producer.send("append", record)?;
    assert!(
        appended.timestamp > 1_600_000_000_000,
        "LogAppendTime not applied"
    );
    let tombstone = producer.send(
        "create",
        ProducerRecord {
            key: Some(b"k"),
            ..Default::default()
        },
    )?;
    assert_eq!(tombstone.offset, created.offset + 1);

    let mut c = Consumer::new(
        &broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    c.assign(&[("create", 0), ("append", 0)])?;
    let mut got = Vec::new();
    while got.len() < 3 {
        let records = c.poll(Duration::from_secs(5))?;
        assert!(!records.is_empty());
        for r in records.iter() {
            let r = r?;
            let headers: Vec<(String, Option<Vec<u8>>)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(<[u8]>::to_vec)))
                .collect();
            got.push((
                r.topic.to_string(),
                r.offset,
                r.timestamp,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                headers,
            ));
        }
    }
    got.sort();
    let hdrs = vec![
        ("trace".to_string(), Some(b"abc".to_vec())),
        ("empty".to_string(), Some(Vec::new())),
    ];
    assert_eq!(
        got[0],
        (
            "append".into(),
            0,
            appended.timestamp,
            Some(b"k".to_vec()),
            Some(b"v".to_vec()),
            hdrs.clone()
        )
    );
    assert_eq!(
        got[1],
        (
            "create".into(),
            0,
            1_600_000_000_000,
            Some(b"k".to_vec()),
            Some(b"v".to_vec()),
            hdrs
        )
    );
    assert_eq!(got[2].3, Some(b"k".to_vec()));
    assert_eq!(got[2].4, None, "tombstone value");
    Ok(())
}
