//! ACLs as librdkafka clients meet them (`--authorizer`): a principal with Read but not
//! Write on a topic consumes it and gets TOPIC_AUTHORIZATION_FAILED producing; Metadata
//! hides topics the principal may not describe; a deny beats an allow; a prefixed ACL
//! covers matching topics only; a TLS client certificate's subject is the principal
//! (`User:CN=...,OU=...,O=...`, Kafka's default mapping).

mod security_support;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use security_support::{
    Auth, CLIENT_PRINCIPAL, Pki, add_users, config, consume, produce, serve, topics, values,
};
use tidelog::security::{
    AclBinding, AclOperation, AclPermission, AclStore, FileAclStore, PatternType, ResourceType,
    SecurityProtocol,
};
use tidelog::{Broker, TopicConfig};

fn acl(
    kind: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    operation: AclOperation,
    permission: AclPermission,
) -> AclBinding {
    AclBinding {
        resource_type: kind,
        resource_name: name.into(),
        pattern_type: pattern,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission,
    }
}

fn refused(errors: &[KafkaError]) -> bool {
    !errors.is_empty()
        && errors.iter().all(|e| {
            matches!(
                e,
                KafkaError::MessageProduction(RDKafkaErrorCode::TopicAuthorizationFailed)
            )
        })
}

#[test]
fn acls_allow_deny_hide_and_match_prefixes_for_librdkafka_clients() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    add_users(
        dir.path(),
        &[("admin", "admin-pw"), ("reader", "reader-pw")],
    );
    use AclOperation::Read;
    use AclPermission::{Allow, Deny};
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Group, Topic};
    let acls = FileAclStore::open(dir.path()).unwrap();
    acls.add(&[
        acl(Topic, "events", Literal, "User:reader", Read, Allow),
        acl(Topic, "app.", Prefixed, "User:reader", Read, Allow),
        acl(
            Topic,
            "app.secret",
            Literal,
            "User:reader",
            AclOperation::All,
            Deny,
        ),
        acl(Group, "*", Literal, "User:reader", Read, Allow),
        acl(Group, "reader-of-", Prefixed, CLIENT_PRINCIPAL, Read, Allow),
        acl(
            Topic,
            "certified",
            Literal,
            CLIENT_PRINCIPAL,
            AclOperation::All,
            Allow,
        ),
    ])
    .unwrap();
    drop(acls);
    let broker = Broker::open(dir.path()).unwrap();
    for t in [
        "events",
        "hidden",
        "app.public",
        "app.secret",
        "application",
        "certified",
    ] {
        broker.create_topic(t, 1, TopicConfig::new()).unwrap();
    }
    let server = serve(&broker, &pki, true, &["User:admin"]);
    let admin = config(
        &server,
        &pki,
        &Auth::Sasl(
            SecurityProtocol::SaslSsl,
            "SCRAM-SHA-512",
            "admin",
            "admin-pw",
        ),
    );
    let reader = config(
        &server,
        &pki,
        &Auth::Sasl(
            SecurityProtocol::SaslSsl,
            "SCRAM-SHA-256",
            "reader",
            "reader-pw",
        ),
    );
    for t in ["events", "app.public", "app.secret", "application"] {
        assert!(
            produce(&admin, t, &values(t, 5)).is_empty(),
            "the super user writes {t}"
        );
    }

    // Read but not Write.
    assert_eq!(consume(&reader, "events", 5).unwrap(), values("events", 5));
    let errors = produce(&reader, "events", &values("denied", 3));
    assert!(refused(&errors), "{errors:?}");

    // Metadata lists what the reader may describe: Read implies Describe, so the
    // prefixed ACL shows app.public; the deny of All beats it on app.secret; "hidden" has
    // no ACL and "application" does not start with "app.".
    assert_eq!(topics(&reader), ["app.public", "events"]);
    assert_eq!(topics(&admin).len(), 6);

    // The prefixed ACL lets the reader consume app.public. (What a refused Fetch
    // answers, TOPIC_AUTHORIZATION_FAILED per partition, is checked on the wire by the
    // server's own tests: librdkafka retries it without telling the application.)
    assert_eq!(
        consume(&reader, "app.public", 5).unwrap(),
        values("app.public", 5)
    );

    // The client certificate's subject is the principal on the SSL listener.
    let certified = config(&server, &pki, &Auth::Ssl);
    let sent = values("certified", 10);
    assert!(produce(&certified, "certified", &sent).is_empty());
    assert_eq!(consume(&certified, "certified", 10).unwrap(), sent);
    assert!(refused(&produce(&certified, "events", &values("x", 1))));
    server.shutdown().unwrap();
    broker.close().unwrap();
}
