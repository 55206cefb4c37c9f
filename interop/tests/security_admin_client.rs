//! `tidelog::admin::AdminClient` and `tidelog ... --bootstrap` on secured listeners, with
//! Kafka's client settings: over SASL_SSL with SCRAM-SHA-512 (the broker's certificate
//! checked against `ssl.ca.location`) a super user adds a user and an ACL and reads them
//! back; over SASL_PLAINTEXT with PLAIN a user without Alter on the cluster is refused
//! with CLUSTER_AUTHORIZATION_FAILED; a wrong password is `Error::AuthenticationFailed`;
//! a TLS protocol without a CA and a SASL one without a mechanism are refused naming the
//! setting; a CA that did not sign the broker's certificate fails the handshake; and the
//! command line does the same with `--security-protocol`, `--sasl-mechanism`,
//! `--sasl-username`, `TIDELOG_SASL_PASSWORD` and `--ssl-ca-location`.

mod security_support;

use std::process::Command;

use security_support::{Pki, add_users, serve};
use tidelog::admin::{AdminClient, ErrorCode, NewTopic, ScramAlteration};
use tidelog::security::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType, SaslMechanism,
    ScramMechanism, SecurityProtocol,
};
use tidelog::{Broker, Error};

fn read_acl(user: &str) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "orders".into(),
        pattern_type: PatternType::Literal,
        principal: format!("User:{user}"),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    }
}

#[test]
fn the_admin_client_speaks_tls_and_sasl() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    add_users(
        dir.path(),
        &[("admin", "admin-secret"), ("alice", "alice-secret")],
    );
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, &pki, true, &["User:admin"]);
    let sasl_ssl = server.listener_addr(SecurityProtocol::SaslSsl).unwrap();
    let sasl_plain = server
        .listener_addr(SecurityProtocol::SaslPlaintext)
        .unwrap();

    // A super user over SASL_SSL with SCRAM-SHA-512.
    let admin = AdminClient::builder(format!("localhost:{}", sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&pki.ca)
        .sasl_mechanism(SaslMechanism::Scram(ScramMechanism::Sha512))
        .sasl_username("admin")
        .sasl_password("admin-secret")
        .connect()
        .unwrap();
    let created = admin.create_topics(&[NewTopic::new("orders")]).unwrap();
    created["orders"].as_ref().unwrap();
    let altered = admin
        .alter_user_scram_credentials(&[ScramAlteration::Upsert {
            user: "bob".into(),
            mechanism: ScramMechanism::Sha256,
            iterations: 8192,
            password: "bob-secret".into(),
        }])
        .unwrap();
    altered["bob"].as_ref().unwrap();
    let users = admin.describe_user_scram_credentials(&["bob"]).unwrap();
    assert_eq!(
        users["bob"].as_ref().unwrap(),
        &vec![(ScramMechanism::Sha256, 8192)]
    );
    let missing = admin.describe_user_scram_credentials(&["ghost"]).unwrap();
    assert!(
        matches!(&missing["ghost"], Err(Error::Admin(e)) if e.code == ErrorCode::RESOURCE_NOT_FOUND),
        "{missing:?}"
    );
    for r in admin.create_acls(&[read_acl("bob")]).unwrap() {
        r.unwrap();
    }
    assert_eq!(
        admin.describe_acls(&AclFilter::any()).unwrap(),
        vec![read_acl("bob")]
    );

    // bob, added over the wire with a salt the client chose, logs in with PLAIN; he may
    // not create ACLs.
    let bob = AdminClient::builder(sasl_plain.to_string())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(SaslMechanism::Plain)
        .sasl_username("bob")
        .sasl_password("bob-secret")
        .connect()
        .unwrap();
    let refused = bob.create_acls(&[read_acl("alice")]).unwrap();
    assert!(
        matches!(&refused[0], Err(Error::Admin(e)) if e.code == ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
        "{refused:?}"
    );
    let removed = admin
        .delete_acls(&[AclFilter {
            principal: Some("User:bob".into()),
            ..AclFilter::any()
        }])
        .unwrap();
    assert_eq!(removed[0].as_ref().unwrap(), &vec![read_acl("bob")]);

    // A wrong password, and settings that do not go together.
    let wrong = AdminClient::builder(sasl_plain.to_string())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl_mechanism(SaslMechanism::Scram(ScramMechanism::Sha256))
        .sasl_username("alice")
        .sasl_password("nope")
        .retries(0)
        .connect()
        .unwrap_err();
    assert!(
        matches!(&wrong, Error::AuthenticationFailed { .. }),
        "{wrong:?}"
    );
    let no_ca = AdminClient::builder(sasl_ssl.to_string())
        .security_protocol(SecurityProtocol::SaslSsl)
        .sasl_mechanism(SaslMechanism::Plain)
        .sasl_username("alice")
        .sasl_password("alice-secret")
        .connect()
        .unwrap_err();
    assert!(
        matches!(&no_ca, Error::InvalidConfig { key, .. } if key == "ssl.ca.location"),
        "{no_ca:?}"
    );
    let no_mechanism = AdminClient::builder(sasl_plain.to_string())
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .connect()
        .unwrap_err();
    assert!(
        matches!(&no_mechanism, Error::InvalidConfig { key, .. } if key == "sasl.mechanism"),
        "{no_mechanism:?}"
    );
    let other_pki = Pki::new();
    let untrusted = AdminClient::builder(format!("localhost:{}", sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&other_pki.ca)
        .sasl_mechanism(SaslMechanism::Plain)
        .sasl_username("alice")
        .sasl_password("alice-secret")
        .retries(0)
        .connect()
        .unwrap_err();
    assert!(
        untrusted.to_string().contains("TLS handshake"),
        "{untrusted}"
    );

    // The command line, over SASL_SSL with SCRAM-SHA-256.
    let run = |args: &[&str]| {
        Command::new(tidelog_interop::tidelog_bin())
            .args(args)
            .args(["--bootstrap", &format!("127.0.0.1:{}", sasl_ssl.port())])
            .args(["--security-protocol", "SASL_SSL"])
            .args(["--sasl-mechanism", "SCRAM-SHA-256"])
            .args(["--sasl-username", "admin"])
            .arg("--ssl-ca-location")
            .arg(&pki.ca)
            .env("TIDELOG_SASL_PASSWORD", "admin-secret")
            .output()
            .expect("run tidelog")
    };
    let out = run(&["users", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(names, ["admin", "alice", "bob"], "{stdout}");
    let out = run(&[
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "orders",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["topics", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l == "orders"), "{stdout}");
    server.shutdown().unwrap();
}
