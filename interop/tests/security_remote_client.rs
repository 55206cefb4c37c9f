//! The network `Producer` and `GroupConsumer` (`tidelog::Cluster`) on secured listeners,
//! with Kafka's client settings: over SASL_SSL with SCRAM-SHA-512 (the broker's
//! certificate checked against `ssl.ca.location`) and over SASL_PLAINTEXT with PLAIN, a
//! keyed batch is produced (idempotent, acks=all) and read back by a group of one
//! member, which commits; the committed offsets are what was read. A wrong password is
//! `Error::AuthenticationFailed`.

mod security_support;

use std::time::{Duration, Instant};

use security_support::{Pki, add_users, serve};
use tidelog::security::SecurityProtocol;
use tidelog::{
    Broker, ClientConfig, Cluster, Error, GroupConfig, GroupConsumer, OffsetReset, Producer,
    ProducerRecord, TopicConfig,
};

const RECORDS: usize = 50;

/// Produces RECORDS keyed records to `topic`, reads them back in a group and commits.
fn round_trip(config: ClientConfig, topic: &str) {
    let cluster = Cluster::connect(config).unwrap();
    cluster
        .create_topic_if_missing(topic, 2, TopicConfig::new())
        .unwrap();
    let producer = Producer::builder(&cluster).build().unwrap();
    let mut receipts = Vec::new();
    for i in 0..RECORDS {
        let (key, value) = (format!("k{}", i % 7), format!("v{i}"));
        let record = ProducerRecord::keyed(key.as_bytes(), value.as_bytes());
        receipts.push(producer.send_async(topic, record).unwrap());
    }
    producer.flush().unwrap();
    let mut sent: Vec<(i32, i64, String)> = receipts
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let m = r.wait().unwrap();
            (m.partition, m.offset, format!("v{i}"))
        })
        .collect();
    sent.sort();

    let config = GroupConfig::new(format!("{topic}-readers"), &[topic])
        .auto_offset_reset(OffsetReset::Earliest);
    let mut member = GroupConsumer::join(&cluster, config).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < RECORDS && Instant::now() < deadline {
        for r in &member.poll(Duration::from_millis(100)).unwrap() {
            let r = r.unwrap();
            let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
            got.push((r.partition, r.offset, value));
        }
    }
    got.sort();
    assert_eq!(got, sent, "{topic}: every record produced, read once");
    member.commit_sync().unwrap();
    for p in 0..2 {
        let end = sent.iter().filter(|(q, _, _)| *q == p).count() as i64;
        assert_eq!(
            member.committed(topic, p).unwrap(),
            Some(end),
            "{topic}-{p}"
        );
    }
    member.close();
    producer.close().unwrap();
}

#[test]
fn the_network_producer_and_group_speak_sasl_over_tls_and_plaintext() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    add_users(dir.path(), &[("alice", "alice-secret")]);
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, &pki, false, &[]);
    let sasl_ssl = server.listener_addr(SecurityProtocol::SaslSsl).unwrap();
    let sasl_plain = server
        .listener_addr(SecurityProtocol::SaslPlaintext)
        .unwrap();

    let scram = |password: &str| {
        ClientConfig::new(format!("localhost:{}", sasl_ssl.port()))
            .set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", pki.ca.display())
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "alice")
            .set("sasl.password", password)
    };
    round_trip(scram("alice-secret"), "over-tls");

    let plain = |password: &str| {
        ClientConfig::new(sasl_plain.to_string())
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", "alice")
            .set("sasl.password", password)
    };
    round_trip(plain("alice-secret"), "over-plaintext");

    for config in [scram("wrong"), plain("wrong")] {
        match Cluster::connect(config) {
            Err(Error::AuthenticationFailed { .. }) => {}
            other => panic!("a wrong password: {other:?}"),
        }
    }
}
