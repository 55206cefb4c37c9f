//! `tidelog serve` with named listeners (Kafka's listener names and
//! `listener.security.protocol.map`): `--listen INTERNAL://127.0.0.1:0
//! --listener-security-protocol-map INTERNAL:SASL_PLAINTEXT` beside the default
//! PLAINTEXT listener serves both, each with its protocol (Metadata answered on
//! PLAINTEXT, with that listener's address; on INTERNAL only the SASL APIs before a
//! login), and says so at start. A name missing from the map, a bad map, two listeners
//! of one name and an inter-broker listener name no listener has are each one `error:`
//! line naming what is wrong, exit code 1.

mod serve_support;

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::{MetadataRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use serve_support::{run_to_exit, start};
use tidelog_interop::cluster::{KafkaConn, free_ports};

#[test]
fn named_listeners_serve_with_their_mapped_protocols() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = start(
        &tmp.path().join("data"),
        &[
            "--listen",
            "internal://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:SASL_PLAINTEXT",
        ],
        None,
    );
    let lines = serve.lines_containing("tidelog serve: listeners");
    let line = lines
        .iter()
        .find(|l| l.contains("tidelog serve: listeners"))
        .unwrap();
    let internal: SocketAddr = line
        .split("INTERNAL://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no INTERNAL listener in {line:?}"));
    assert!(line.contains("(SASL_PLAINTEXT)"), "{line}");
    assert!(
        line.contains(&format!("PLAINTEXT://{}", serve.addr)),
        "{line}"
    );

    let timeout = Duration::from_secs(10);
    let mut plain = KafkaConn::connect(&serve.addr.to_string(), timeout).unwrap();
    let md = plain
        .call(&MetadataRequest::default().with_topics(None), 8)
        .expect("Metadata answered on PLAINTEXT");
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(md.brokers[0].port, i32::from(serve.addr.port()));

    let mut sasl = KafkaConn::connect(&internal.to_string(), timeout).unwrap();
    let hs = sasl
        .call(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            1,
        )
        .expect("SaslHandshake answered on INTERNAL");
    assert_eq!(hs.error_code, 0);
    let mut sasl = KafkaConn::connect(&internal.to_string(), timeout).unwrap();
    assert!(
        sasl.call(&MetadataRequest::default().with_topics(None), 8)
            .is_none(),
        "INTERNAL is SASL_PLAINTEXT: Metadata before a login closes the connection"
    );
    let (status, lines) = serve.stop();
    assert!(status.success(), "{lines:?}");
}

#[test]
fn bad_listener_names_and_maps_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let quorum = format!("1@127.0.0.1:{}", free_ports(1)[0]);
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--listen", "CLIENT://127.0.0.1:0"],
            &["--listen \"CLIENT://127.0.0.1:0\"", "CLIENT", "map"],
        ),
        (
            &["--listener-security-protocol-map", "CLIENT:TLS"],
            &["--listener-security-protocol-map", "TLS"],
        ),
        (
            &["--listener-security-protocol-map", "CLIENT"],
            &["NAME:PROTOCOL"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--listen",
                "PLAINTEXT://127.0.0.1:0",
            ],
            &["named PLAINTEXT already"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--node-id",
                "1",
                "--quorum",
                &quorum,
                "--inter-broker-listener",
                "REPLICATION",
            ],
            &[
                "inter.broker.listener.name",
                "no listener named REPLICATION",
            ],
        ),
    ];
    for (i, (args, expected)) in cases.iter().enumerate() {
        let (code, stderr) = run_to_exit(&tmp.path().join(format!("data-{i}")), args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        let error: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(error.len(), 1, "{args:?}: {stderr}");
        for e in *expected {
            assert!(error[0].contains(e), "{args:?}: {e:?} not in {stderr}");
        }
    }
}
