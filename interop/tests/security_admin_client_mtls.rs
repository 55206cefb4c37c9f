//! `tidelog::admin::AdminClient` and `tidelog acls --bootstrap` with a client
//! certificate (Kafka's `ssl.certificate.location` / `ssl.key.location`) on an SSL
//! listener that requires one (`--tls-client-ca`), the authorizer on and the
//! certificate's subject the only super user: with the certificate the client adds,
//! lists and removes ACLs, as the principal of its subject; without one, or with one of
//! a CA the broker does not trust (same subject), the broker refuses the connection; a
//! certificate without its key is refused naming `ssl.key.location`. The command line
//! does the same with `--ssl-certificate-location` and `--ssl-key-location`.

mod security_support;

use std::process::Command;
use std::time::Duration;

use security_support::{CLIENT_PRINCIPAL, Pki, serve};
use tidelog::admin::AdminClient;
use tidelog::security::{
    AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType, SecurityProtocol,
};
use tidelog::{Broker, Error};

fn read_acl(principal: &str) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "orders".into(),
        pattern_type: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: AclPermission::Allow,
    }
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_client_certificate_is_the_admin_clients_principal_on_an_mtls_listener() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = serve(&broker, &pki, true, &[CLIENT_PRINCIPAL]);
    let ssl = server.listener_addr(SecurityProtocol::Ssl).unwrap();
    let builder = || {
        AdminClient::builder(ssl.to_string())
            .security_protocol(SecurityProtocol::Ssl)
            .ssl_ca_location(&pki.ca)
            .request_timeout(Duration::from_secs(5))
            .retries(0)
    };

    // With the client certificate: a super user, by its subject.
    let admin = builder()
        .ssl_certificate_location(&pki.client_cert)
        .ssl_key_location(&pki.client_key)
        .connect()
        .unwrap();
    for r in admin.create_acls(&[read_acl("User:bob")]).unwrap() {
        r.unwrap();
    }
    assert_eq!(
        admin.describe_acls(&AclFilter::any()).unwrap(),
        vec![read_acl("User:bob")]
    );

    // Without one, and with one of another CA: refused by the broker.
    let none = builder().connect().unwrap_err();
    assert!(
        matches!(&none, Error::Io { .. } | Error::Timeout(_)),
        "{none:?}"
    );
    let rogue = builder()
        .ssl_certificate_location(&pki.rogue_cert)
        .ssl_key_location(&pki.rogue_key)
        .connect()
        .unwrap_err();
    assert!(
        matches!(&rogue, Error::Io { .. } | Error::Timeout(_)),
        "{rogue:?}"
    );
    // A certificate without its key, and a key that is not the certificate's.
    let no_key = builder()
        .ssl_certificate_location(&pki.client_cert)
        .connect()
        .unwrap_err();
    assert!(
        matches!(&no_key, Error::InvalidConfig { key, .. } if key == "ssl.key.location"),
        "{no_key:?}"
    );
    let wrong_key = builder()
        .ssl_certificate_location(&pki.client_cert)
        .ssl_key_location(&pki.rogue_key)
        .connect()
        .unwrap_err();
    assert!(
        matches!(&wrong_key, Error::InvalidConfig { key, .. } if key == "ssl.key.location"),
        "{wrong_key:?}"
    );

    // The command line, with and without the certificate.
    let tidelog = |args: &[&str], cert: bool| {
        let mut c = Command::new(tidelog_interop::tidelog_bin());
        c.args(args).args([
            "--bootstrap",
            &ssl.to_string(),
            "--security-protocol",
            "SSL",
            "--ssl-ca-location",
            path(&pki.ca),
        ]);
        if cert {
            c.args([
                "--ssl-certificate-location",
                path(&pki.client_cert),
                "--ssl-key-location",
                path(&pki.client_key),
            ]);
        }
        let out = c.output().expect("run tidelog");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = tidelog(
        &[
            "acls",
            "add",
            "--allow-principal",
            "User:carol",
            "--operation",
            "Read",
            "--topic",
            "orders",
        ],
        true,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("added 1 ACL"), "{out}");
    let (code, out, err) = tidelog(&["acls", "list"], true);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("User:bob") && out.contains("User:carol"),
        "{out}"
    );
    let (code, _, err) = tidelog(&["acls", "list"], false);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error:"), "{err}");
    assert_eq!(
        admin.describe_acls(&AclFilter::any()).unwrap(),
        vec![read_acl("User:bob"), read_acl("User:carol")]
    );
    server.shutdown().unwrap();
}
