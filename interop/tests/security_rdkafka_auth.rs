//! librdkafka (the `rdkafka` crate with OpenSSL) against tidelog's secured listeners, as
//! a user configures it: produce and consume over SSL with a client certificate, over
//! SASL_PLAINTEXT with PLAIN, over SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512; a
//! wrong password fails with librdkafka's authentication error; broken TLS handshakes
//! (plaintext bytes on a TLS port, a truncated ClientHello) close only their own
//! connection and process nothing.

mod security_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use security_support::{Auth, Errors, Pki, add_users, config, consume, produce, serve, values};
use tidelog::security::SecurityProtocol;
use tidelog::{Broker, TopicConfig};

#[test]
fn librdkafka_produces_and_consumes_over_ssl_and_sasl_and_a_wrong_password_fails() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    add_users(dir.path(), &[("alice", "alice-secret")]);
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, &pki, false, &[]);

    let modes = [
        ("ssl", Auth::Ssl),
        (
            "sasl-plain",
            Auth::Sasl(
                SecurityProtocol::SaslPlaintext,
                "PLAIN",
                "alice",
                "alice-secret",
            ),
        ),
        (
            "sasl-ssl-scram-256",
            Auth::Sasl(
                SecurityProtocol::SaslSsl,
                "SCRAM-SHA-256",
                "alice",
                "alice-secret",
            ),
        ),
        (
            "sasl-ssl-scram-512",
            Auth::Sasl(
                SecurityProtocol::SaslSsl,
                "SCRAM-SHA-512",
                "alice",
                "alice-secret",
            ),
        ),
    ];
    for (topic, auth) in &modes {
        broker.create_topic(topic, 1, TopicConfig::new()).unwrap();
        let c = config(&server, &pki, auth);
        let sent = values(topic, 50);
        let failed = produce(&c, topic, &sent);
        assert!(failed.is_empty(), "{topic}: {failed:?}");
        assert_eq!(consume(&c, topic, sent.len()).unwrap(), sent, "{topic}");
    }

    // A wrong password: librdkafka reports an authentication error naming the cause.
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let c = config(
            &server,
            &pki,
            &Auth::Sasl(
                SecurityProtocol::SaslSsl,
                mechanism,
                "alice",
                "not-her-password",
            ),
        );
        let errors = Errors::default();
        let consumer: BaseConsumer<Errors> = c.create_with_context(errors.clone()).unwrap();
        let md = consumer.fetch_metadata(None, Duration::from_secs(1));
        assert!(md.is_err(), "{mechanism}: metadata with a wrong password");
        // Errors reach the application through poll (its error callback or a message).
        let deadline = Instant::now() + Duration::from_secs(10);
        while errors.0.lock().unwrap().is_empty() && Instant::now() < deadline {
            if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                errors.0.lock().unwrap().push((e, String::new()));
            }
        }
        let seen = errors.0.lock().unwrap().clone();
        assert!(
            seen.iter().any(|(e, reason)| matches!(
                e,
                KafkaError::Global(RDKafkaErrorCode::Authentication)
            ) && reason.contains("Authentication failed")),
            "{mechanism}: {seen:?}"
        );
    }

    // Plaintext Kafka bytes on the TLS port: the handshake fails, nothing is answered.
    let ssl = server.listener_addr(SecurityProtocol::Ssl).unwrap();
    let mut s = TcpStream::connect(ssl).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    // An ApiVersions v0 request frame.
    s.write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0])
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(
        buf.len() < 4 || buf[0] == 0x15,
        "a TLS alert at most, no Kafka answer: {buf:?}"
    );
    // A ClientHello cut short, then a hang-up.
    let mut s = TcpStream::connect(ssl).unwrap();
    s.write_all(&[
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ])
    .unwrap();
    drop(s);
    // Clients that do it right are still served.
    let c = config(&server, &pki, &Auth::Ssl);
    assert_eq!(consume(&c, "ssl", 50).unwrap(), values("ssl", 50));
    server.shutdown().unwrap();
    broker.close().unwrap();
}
