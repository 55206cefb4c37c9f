//! Named listeners (Kafka's listener names and `listener.security.protocol.map`): a node
//! with two named listeners serves each with its own protocol, two listeners of one name
//! are refused, and the inter-broker listener is found by name, or by a protocol only
//! one listener has.

use std::net::SocketAddr;

use kafka_protocol::messages::*;

use super::tests_api::Client;
use super::tests_security::{broker, s};
use super::*;

#[test]
fn a_node_serves_two_named_listeners_each_with_its_protocol() {
    let (_dir, broker) = broker(&["events"], &[]);
    let server = Server::builder(broker)
        .listen("127.0.0.1:0")
        .listener_name("internal")
        .add_named_listener("EXTERNAL", SecurityProtocol::SaslPlaintext, "127.0.0.1:0")
        .start()
        .unwrap();
    let named = server.named_listeners();
    assert_eq!(named.len(), 2);
    assert_eq!(named[0].0, "INTERNAL");
    assert_eq!(named[0].1, SecurityProtocol::Plaintext);
    assert_eq!(named[1].0, "EXTERNAL");
    assert_eq!(named[1].1, SecurityProtocol::SaslPlaintext);
    let internal = server.listener_addr_by_name("Internal").unwrap();
    let external = server.listener_addr_by_name("EXTERNAL").unwrap();
    assert_eq!(internal, server.local_addr());
    assert!(server.listener_addr_by_name("OTHER").is_none());

    // INTERNAL is PLAINTEXT: Metadata is answered, with this listener's address.
    let mut c = Client::connect(internal);
    let md: MetadataResponse = c.call(
        ApiKey::Metadata,
        8,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(md.brokers[0].port, i32::from(internal.port()));
    assert!(
        md.topics
            .iter()
            .any(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "events"))
    );
    // EXTERNAL is SASL_PLAINTEXT: the handshake is answered, Metadata before it closes.
    let mut c = Client::connect(external);
    let hs: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(hs.error_code, 0);
    let mut c = Client::connect(external);
    c.send(ApiKey::Metadata, 8, &MetadataRequest::default());
    assert!(c.is_closed());
}

#[test]
fn two_listeners_of_one_name_are_refused() {
    let (_dir, broker) = broker(&[], &[]);
    // Unnamed listeners are named by their protocol: two PLAINTEXT ones collide.
    let err = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .add_listener(SecurityProtocol::Plaintext, "127.0.0.1:0")
        .start()
        .unwrap_err();
    match err {
        crate::error::Error::InvalidConfig { key, reason } => {
            assert_eq!(key, "listeners");
            assert!(reason.contains("PLAINTEXT"), "{reason}");
        }
        other => panic!("expected InvalidConfig, got {other}"),
    }
    let err = Server::builder(broker)
        .listen("127.0.0.1:0")
        .listener_name("a")
        .add_named_listener("A", SecurityProtocol::SaslPlaintext, "127.0.0.1:0")
        .start()
        .unwrap_err();
    assert!(err.to_string().contains("named A"), "{err}");
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn the_inter_broker_listener_is_found_by_name_or_by_an_unambiguous_protocol() {
    let listeners = vec![
        (
            "PLAINTEXT".to_string(),
            SecurityProtocol::Plaintext,
            addr(1),
        ),
        ("INTERNAL".to_string(), SecurityProtocol::Ssl, addr(2)),
        ("EXTERNAL".to_string(), SecurityProtocol::SaslSsl, addr(3)),
        (
            "REPLICATION".to_string(),
            SecurityProtocol::SaslSsl,
            addr(4),
        ),
    ];
    let by_name = |n: &str| InterBrokerListener::Name(n.into()).resolve(&listeners);
    assert_eq!(by_name("INTERNAL").unwrap(), 1);
    assert_eq!(by_name("replication").unwrap(), 3);
    assert_eq!(by_name("PLAINTEXT").unwrap(), 0);
    // A protocol name that names no listener: the only listener with that protocol.
    assert_eq!(by_name("SSL").unwrap(), 1);
    let reason = |r: Result<usize>| match r {
        Err(crate::error::Error::InvalidConfig { key, reason }) => {
            assert_eq!(key, "inter.broker.listener.name");
            reason
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    // Two SASL_SSL listeners: the protocol does not say which.
    let r = reason(by_name("SASL_SSL"));
    assert!(
        r.contains("several") && r.contains("EXTERNAL") && r.contains("REPLICATION"),
        "{r}"
    );
    let r = reason(by_name("CLIENTS"));
    assert!(r.contains("no listener named CLIENTS"), "{r}");
    assert!(r.contains("INTERNAL://127.0.0.1:2 (SSL)"), "{r}");
    let r = reason(by_name("SASL_PLAINTEXT"));
    assert!(r.contains("no SASL_PLAINTEXT listener"), "{r}");
    // By protocol (inter_broker_listener): the first with it, as before.
    assert_eq!(
        InterBrokerListener::Protocol(SecurityProtocol::SaslSsl)
            .resolve(&listeners)
            .unwrap(),
        2
    );
    assert!(
        InterBrokerListener::Protocol(SecurityProtocol::SaslPlaintext)
            .resolve(&listeners)
            .is_err()
    );
}
