//! A follower whose inter-broker login the leader refuses says so at warn, once a
//! minute per fetcher, naming the settings to check: three in-process nodes replicate on
//! a SASL_PLAINTEXT inter-broker listener as `User:replicator`, whose credential in the
//! cluster's metadata does not match the password the nodes were given. Nothing
//! replicates, and the operator reads why in the log instead of a stalled ISR alone.

use std::time::{Duration, Instant};

use tidelog::TopicConfig;
use tidelog::security::{
    CredentialChange, SaslMechanism, ScramCredential, ScramMechanism, SecurityProtocol,
};
use tidelog::testing::CapturedLogs;
use tidelog_interop::cluster::{Layout, eventually, shutdown_all, start_nodes};

const WAIT: Duration = Duration::from_secs(30);
const WARNING: &str = "replica fetcher cannot log in to the leader";

/// The value of `key` (`node=`, `source=`) in a log line.
fn field(line: &str, key: &str) -> String {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len();
    line[at..].split(' ').next().unwrap_or_default().to_string()
}

#[test]
fn a_refused_inter_broker_login_is_a_rate_limited_warning() {
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, servers) = start_nodes(&layout, &dirs, |_, b| {
        b.add_listener(SecurityProtocol::SaslPlaintext, "127.0.0.1:0")
            .inter_broker_listener(SecurityProtocol::SaslPlaintext)
            .inter_broker_sasl(
                SaslMechanism::Scram(ScramMechanism::Sha512),
                "replicator",
                "not-the-password",
            )
    });
    servers[0]
        .credential_store()
        .apply(&[CredentialChange::Upsert {
            user: "replicator".into(),
            credential: ScramCredential::new(ScramMechanism::Sha512, "replicator-secret", 4096),
        }])
        .unwrap();
    eventually("the topic is created", WAIT, || {
        brokers[0]
            .create_topic_if_missing("events", 1, TopicConfig::new())
            .ok()
    });
    let leader = eventually("a leader", WAIT, || {
        brokers.iter().position(|b| {
            b.topic("events")
                .and_then(|t| t.partition(0))
                .is_ok_and(|p| p.is_leader())
        })
    });

    let producer = tidelog::Producer::builder(&brokers[leader])
        .acks(tidelog::Acks::Leader)
        .build()
        .unwrap();
    producer
        .send(
            "events",
            tidelog::ProducerRecord::new(b"stuck on the leader"),
        )
        .unwrap();
    producer.flush().unwrap();

    // Both followers fetch from the leader, fail to log in, and warn.
    let first = eventually("both followers warn", WAIT, || {
        let lines = logs.lines_with(&[WARNING]);
        (lines.len() >= 2).then_some(lines)
    });
    for line in &first {
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains("--inter-broker-sasl"), "{line}");
    }
    // The fetchers keep retrying every backoff, but each warns once a minute: a few
    // more seconds bring many retries and no second warning from any fetcher (a
    // follower and the leader it fetches from; leadership may move meanwhile, and a
    // fetcher from the new leader warns once too).
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let lines = logs.lines_with(&[WARNING]);
    let mut fetchers: Vec<(String, String)> = lines
        .iter()
        .map(|l| (field(l, "node="), field(l, "source=")))
        .collect();
    let warnings = fetchers.len();
    fetchers.sort();
    fetchers.dedup();
    assert_eq!(
        fetchers.len(),
        warnings,
        "a fetcher warned twice: {lines:#?}"
    );
    assert!(
        fetchers.iter().all(|(node, source)| node != source),
        "{lines:#?}"
    );
    // And nothing replicated: the leader has the record, the followers do not.
    let on_leader = brokers[leader]
        .topic("events")
        .and_then(|t| t.partition(0))
        .unwrap();
    assert_eq!(on_leader.log_end_offset(), 1);
    for (i, b) in brokers.iter().enumerate().filter(|(i, _)| *i != leader) {
        let p = b.topic("events").and_then(|t| t.partition(0)).unwrap();
        assert_eq!(p.log_end_offset(), 0, "node {}", i + 1);
    }
    shutdown_all(servers);
}
