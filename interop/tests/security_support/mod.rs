//! Helpers of the security tests: certificates made here with rcgen (a CA, a server
//! certificate for 127.0.0.1 and localhost, a client certificate), a server with SSL,
//! SASL_PLAINTEXT and SASL_SSL listeners, and librdkafka clients configured as a user
//! would (`security.protocol`, `sasl.mechanisms`, `ssl.ca.location`, ...).
//!
//! rcgen's certificates are valid from 1975 to 4096: nothing depends on the date the
//! tests run.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _, ProducerContext};
use tidelog::security::{
    CredentialChange, CredentialStore, FileCredentialStore, ScramCredential, ScramMechanism,
    SecurityProtocol, TlsSettings,
};
use tidelog::{Broker, Server, ServerHandle};

/// PEM files of a test PKI, in a directory of their own.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A cluster node's certificate, for both ends of its inter-broker connections:
    /// server and client authentication, for 127.0.0.1 and localhost, subject
    /// [`NODE_PRINCIPAL`].
    pub node_cert: PathBuf,
    pub node_key: PathBuf,
    /// A client certificate signed by another CA, which the brokers do not trust.
    pub rogue_cert: PathBuf,
    pub rogue_key: PathBuf,
}

/// The subject of the nodes' certificate, as the server names its principal.
pub const NODE_PRINCIPAL: &str = "User:CN=tidelog-node,O=tidelog";

/// The subject of the client certificate, as the server names its principal.
pub const CLIENT_PRINCIPAL: &str = "User:CN=client-1,OU=tests,O=tidelog";

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "tidelog test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).unwrap();

        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server.signed_by(&server_key, &ca_cert, &ca_key).unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        // Most general first, as a CA writes it; the principal reads it backwards.
        let mut subject = DistinguishedName::new();
        subject.push(DnType::OrganizationName, "tidelog");
        subject.push(DnType::OrganizationalUnitName, "tests");
        subject.push(DnType::CommonName, "client-1");
        client.distinguished_name = subject;
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &ca_cert, &ca_key).unwrap();

        let node_key = KeyPair::generate().unwrap();
        let mut node =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let mut subject = DistinguishedName::new();
        subject.push(DnType::OrganizationName, "tidelog");
        subject.push(DnType::CommonName, "tidelog-node");
        node.distinguished_name = subject;
        node.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let node_cert = node.signed_by(&node_key, &ca_cert, &ca_key).unwrap();

        let other_ca_key = KeyPair::generate().unwrap();
        let mut other_ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        other_ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        other_ca
            .distinguished_name
            .push(DnType::CommonName, "another CA");
        other_ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let other_ca_cert = other_ca.self_signed(&other_ca_key).unwrap();
        let rogue_key = KeyPair::generate().unwrap();
        let mut rogue = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let mut subject = DistinguishedName::new();
        subject.push(DnType::OrganizationName, "tidelog");
        subject.push(DnType::CommonName, "tidelog-node");
        rogue.distinguished_name = subject;
        rogue.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let rogue_cert = rogue
            .signed_by(&rogue_key, &other_ca_cert, &other_ca_key)
            .unwrap();

        let write = |name: &str, pem: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        Pki {
            ca: write("ca.pem", ca_cert.pem()),
            server_cert: write("server.pem", server_cert.pem()),
            server_key: write("server.key", server_key.serialize_pem()),
            client_cert: write("client.pem", client_cert.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            node_cert: write("node.pem", node_cert.pem()),
            node_key: write("node.key", node_key.serialize_pem()),
            rogue_cert: write("rogue.pem", rogue_cert.pem()),
            rogue_key: write("rogue.key", rogue_key.serialize_pem()),
            dir,
        }
    }
}

/// Stores `users` (name, password) with both SCRAM mechanisms in `dir`.
pub fn add_users(dir: &Path, users: &[(&str, &str)]) {
    let store = FileCredentialStore::open(dir).unwrap();
    let changes: Vec<_> = users
        .iter()
        .flat_map(|(u, p)| {
            ScramMechanism::ALL.map(|m| CredentialChange::Upsert {
                user: u.to_string(),
                credential: ScramCredential::new(m, p, 4096),
            })
        })
        .collect();
    store.apply(&changes).unwrap();
}

/// A server with a PLAINTEXT listener first, then SSL (client certificates required),
/// SASL_PLAINTEXT and SASL_SSL.
pub fn serve(broker: &Broker, pki: &Pki, authorizer: bool, super_users: &[&str]) -> ServerHandle {
    Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .add_listener(SecurityProtocol::Ssl, "127.0.0.1:0")
        .add_listener(SecurityProtocol::SaslPlaintext, "127.0.0.1:0")
        .add_listener(SecurityProtocol::SaslSsl, "127.0.0.1:0")
        .tls(TlsSettings::from_pem_files(&pki.server_cert, &pki.server_key).client_ca(&pki.ca))
        .authorizer(authorizer)
        .super_users(super_users)
        .start()
        .unwrap()
}

/// How a client connects.
#[derive(Debug, Clone)]
pub enum Auth<'a> {
    /// SSL with the test client certificate.
    Ssl,
    /// SASL_PLAINTEXT or SASL_SSL with a mechanism, user and password.
    Sasl(SecurityProtocol, &'a str, &'a str, &'a str),
}

/// The librdkafka settings of `auth` against `server`.
pub fn config(server: &ServerHandle, pki: &Pki, auth: &Auth<'_>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("socket.timeout.ms", "10000")
        .set("message.timeout.ms", "10000")
        .set_log_level(RDKafkaLogLevel::Emerg);
    match auth {
        Auth::Ssl => {
            let addr = server.listener_addr(SecurityProtocol::Ssl).unwrap();
            c.set("bootstrap.servers", addr.to_string())
                .set("security.protocol", "SSL")
                .set("ssl.ca.location", pki.ca.to_str().unwrap())
                .set(
                    "ssl.certificate.location",
                    pki.client_cert.to_str().unwrap(),
                )
                .set("ssl.key.location", pki.client_key.to_str().unwrap());
        }
        Auth::Sasl(protocol, mechanism, user, password) => {
            let addr = server.listener_addr(*protocol).unwrap();
            c.set("bootstrap.servers", addr.to_string())
                .set("security.protocol", protocol.name())
                .set("sasl.mechanisms", *mechanism)
                .set("sasl.username", *user)
                .set("sasl.password", *password);
            if protocol.uses_tls() {
                c.set("ssl.ca.location", pki.ca.to_str().unwrap());
            }
        }
    }
    c
}

/// Errors librdkafka reported through its error callback.
#[derive(Default, Clone)]
pub struct Errors(pub Arc<Mutex<Vec<(KafkaError, String)>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push((error, reason.to_string()));
    }
}
impl ConsumerContext for Errors {}

/// Produces `values` to partition 0 of `topic`; the delivery error of each record that
/// failed (none when every record was acknowledged).
pub fn produce(config: &ClientConfig, topic: &str, values: &[String]) -> Vec<KafkaError> {
    #[derive(Clone, Default)]
    struct Reports(Arc<Mutex<Vec<KafkaError>>>);
    impl ClientContext for Reports {}
    impl ProducerContext for Reports {
        type DeliveryOpaque = ();
        fn delivery(&self, r: &rdkafka::message::DeliveryResult<'_>, _: ()) {
            if let Err((e, _)) = r {
                self.0.lock().unwrap().push(e.clone());
            }
        }
    }
    let reports = Reports::default();
    let producer: BaseProducer<Reports> = config.create_with_context(reports.clone()).unwrap();
    for v in values {
        producer
            .send(BaseRecord::<(), _>::to(topic).payload(v).partition(0))
            .unwrap();
    }
    if let Err(e) = producer.flush(Duration::from_secs(15)) {
        reports.0.lock().unwrap().push(e);
    }
    reports.0.lock().unwrap().clone()
}

/// Reads `n` values from partition 0 of `topic` from the beginning (at most 20 s); the
/// first error the consumer reports instead, if one comes first.
pub fn consume(config: &ClientConfig, topic: &str, n: usize) -> Result<Vec<String>, KafkaError> {
    let mut config = config.clone();
    config
        .set("group.id", format!("reader-of-{topic}"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < n && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m?;
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    Ok(got)
}

/// The topics a metadata request lists for the client, internal ones left out.
pub fn topics(config: &ClientConfig) -> Vec<String> {
    let consumer: BaseConsumer = config.create().unwrap();
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(15))
        .unwrap();
    let mut names: Vec<String> = md
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| !n.starts_with("__"))
        .collect();
    names.sort();
    names
}

/// Values `0..n` of a run, for produce and consume.
pub fn values(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag} record {i}")).collect()
}
