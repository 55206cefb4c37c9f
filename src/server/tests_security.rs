//! SASL authentication and ACL authorization over real sockets, with requests encoded by
//! `kafka-protocol`: what a Kafka client sees on SASL_PLAINTEXT listeners and with the
//! authorizer on. (TLS, with real certificates and real clients, is tested in
//! `interop/tests/`.)

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::{Client, batch, produce_req};
use super::*;
use crate::security::acl::{AclOperation as Op, AclPermission as Perm, PatternType, ResourceType};
use crate::security::credentials::{CredentialChange, CredentialStore, FileCredentialStore};
use crate::security::scram::client::ScramClient;
use crate::security::scram::{ScramCredential, ScramMechanism};

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A broker in a fresh directory with topics and users made in process.
pub(super) fn broker(
    topics: &[&str],
    users: &[(&str, &str)],
) -> (tempfile::TempDir, crate::broker::Broker) {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    for t in topics {
        broker
            .create_topic(t, 1, crate::config::TopicConfig::new())
            .unwrap();
    }
    let store = FileCredentialStore::open(dir.path()).unwrap();
    let changes: Vec<_> = users
        .iter()
        .map(|(u, p)| CredentialChange::Upsert {
            user: u.to_string(),
            credential: ScramCredential::new(ScramMechanism::Sha512, p, 4096),
        })
        .collect();
    store.apply(&changes).unwrap();
    (dir, broker)
}

/// A server with a SASL_PLAINTEXT listener first and a PLAINTEXT one second.
pub(super) fn sasl_server(broker: crate::broker::Broker, authorizer: bool) -> ServerHandle {
    Server::builder(broker)
        .listen("127.0.0.1:0")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .add_listener(SecurityProtocol::Plaintext, "127.0.0.1:0")
        .authorizer(authorizer)
        .super_users(["User:admin"])
        .start()
        .unwrap()
}

/// The handshake and the SASL exchange; the authenticated client, or the failing code
/// and message.
pub(super) fn login(
    addr: SocketAddr,
    mechanism: &str,
    user: &str,
    password: &str,
) -> std::result::Result<Client, (i16, Option<String>)> {
    let mut c = Client::connect(addr);
    let hs: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s(mechanism)),
    );
    if hs.error_code != 0 {
        return Err((hs.error_code, None));
    }
    let auth = |c: &mut Client, bytes: Vec<u8>| {
        let r: SaslAuthenticateResponse = c.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)),
        );
        if r.error_code != 0 {
            return Err((r.error_code, r.error_message.map(|m| m.to_string())));
        }
        Ok(r.auth_bytes.to_vec())
    };
    match ScramMechanism::from_name(mechanism) {
        None => {
            auth(&mut c, format!("\0{user}\0{password}").into_bytes())?;
        }
        Some(m) => {
            let client = ScramClient::new(m, user, password);
            let server_first = auth(&mut c, client.first())?;
            let (fin, expected) = client.final_message(&server_first).unwrap();
            let server_final = auth(&mut c, fin)?;
            assert_eq!(server_final, expected, "the server proves it knows the key");
        }
    }
    Ok(c)
}

fn metadata(c: &mut Client, topics: Option<&[&str]>) -> MetadataResponse {
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(topics.map(|t| {
            t.iter()
                .map(|n| {
                    metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(s(n))))
                })
                .collect()
        }));
    c.call(ApiKey::Metadata, 8, &req)
}

/// The names of the topics a Metadata response lists, internal ones left out.
fn names(md: &MetadataResponse) -> Vec<String> {
    let mut names: Vec<String> = md
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .map(|t| t.name.as_ref().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn fetch_code(c: &mut Client, topic: &str) -> i16 {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    r.responses[0].partitions[0].error_code
}

fn produce_code(c: &mut Client, topic: &str) -> i16 {
    let r: ProduceResponse = c.call(
        ApiKey::Produce,
        8,
        &produce_req(-1, vec![(topic, 0, batch(&["v"]))]),
    );
    r.responses[0].partition_responses[0].error_code
}

pub(super) fn binding(
    kind: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Op,
    perm: Perm,
) -> create_acls_request::AclCreation {
    create_acls_request::AclCreation::default()
        .with_resource_type(kind.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern.code())
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(perm.code())
}

/// A literal binding that lets `principal` do `op` on topic `name` from any host.
pub(super) fn allow_on_topic(
    name: &str,
    principal: &str,
    op: Op,
) -> create_acls_request::AclCreation {
    binding(
        ResourceType::Topic,
        name,
        PatternType::Literal,
        principal,
        op,
        Perm::Allow,
    )
}

pub(super) fn create_acls(c: &mut Client, creations: Vec<create_acls_request::AclCreation>) {
    let r: CreateAclsResponse = c.call(
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(creations),
    );
    for result in r.results {
        assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    }
}

#[test]
fn every_mechanism_authenticates_and_opens_the_apis() {
    let (_dir, broker) = broker(&["events"], &[]);
    let server = sasl_server(broker, false);
    let sasl = server.local_addr();
    let plain = server.listener_addr(SecurityProtocol::Plaintext).unwrap();
    assert_eq!(server.listeners().len(), 2);
    // Credentials arrive over the wire as salted passwords (AlterUserScramCredentials).
    let mut admin = Client::connect(plain);
    let upsert = |m: ScramMechanism, user: &str, password: &str| {
        let salt = b"0123456789abcdef".to_vec();
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(m.kafka_type())
            .with_iterations(4096)
            .with_salted_password(Bytes::from(m.salted_password(
                password.as_bytes(),
                &salt,
                4096,
            )))
            .with_salt(Bytes::from(salt))
    };
    let r: AlterUserScramCredentialsResponse = admin.call(
        ApiKey::AlterUserScramCredentials,
        0,
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            upsert(ScramMechanism::Sha256, "alice", "wonderland"),
            upsert(ScramMechanism::Sha512, "alice", "wonderland"),
        ]),
    );
    assert_eq!(r.results.len(), 1);
    assert_eq!(
        r.results[0].error_code, 0,
        "{:?}",
        r.results[0].error_message
    );
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let mut c = login(sasl, mechanism, "alice", "wonderland")
            .unwrap_or_else(|e| panic!("{mechanism}: {e:?}"));
        assert_eq!(names(&metadata(&mut c, None)), ["events"], "{mechanism}");
        assert_eq!(produce_code(&mut c, "events"), 0);
    }
    // The credentials are kept as salted keys in the data directory.
    let d: DescribeUserScramCredentialsResponse = admin.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default().with_users(None),
    );
    assert_eq!(d.results.len(), 1);
    let mut mechanisms: Vec<_> = d.results[0]
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    mechanisms.sort();
    assert_eq!(mechanisms, vec![(1, 4096), (2, 4096)]);
}

#[test]
fn wrong_passwords_unknown_users_and_mechanisms_fail_and_close() {
    let (_dir, broker) = broker(&[], &[("alice", "right")]);
    let server = sasl_server(broker, false);
    let addr = server.local_addr();
    for mechanism in ["PLAIN", "SCRAM-SHA-512"] {
        for (user, password) in [("alice", "wrong"), ("nobody", "right")] {
            let Err((code, message)) = login(addr, mechanism, user, password) else {
                panic!("{mechanism} {user}/{password} authenticated");
            };
            assert_eq!(code, ResponseError::SaslAuthenticationFailed.code());
            let message = message.unwrap_or_default();
            assert!(message.contains("Authentication failed"), "{message}");
        }
    }
    // SCRAM-SHA-256 has no credential for alice: the same failure as a wrong password.
    assert!(login(addr, "SCRAM-SHA-256", "alice", "right").is_err());
    let Err((code, _)) = login(addr, "GSSAPI", "alice", "right") else {
        panic!("GSSAPI accepted");
    };
    assert_eq!(code, ResponseError::UnsupportedSaslMechanism.code());
    // The connection closes after each failure.
    let mut c = Client::connect(addr);
    let hs: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("OAUTHBEARER")),
    );
    assert_eq!(
        hs.error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    let mut listed: Vec<_> = hs.mechanisms.iter().map(|m| m.to_string()).collect();
    listed.sort();
    assert_eq!(listed, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(c.is_closed());
    assert!(login(addr, "PLAIN", "alice", "right").is_ok());
}

#[test]
fn repeated_failures_from_one_address_are_answered_ever_later() {
    let (_dir, broker) = broker(&[], &[("alice", "right")]);
    let server = sasl_server(broker, false);
    let addr = server.local_addr();
    // Each failure doubles the wait before its answer (100 ms, 200 ms, 400 ms, ...):
    // after two failures the third answer comes at least 400 ms later.
    for _ in 0..2 {
        assert!(login(addr, "PLAIN", "alice", "wrong").is_err());
    }
    let started = Instant::now();
    assert!(login(addr, "PLAIN", "alice", "wrong").is_err());
    assert!(started.elapsed() >= Duration::from_millis(400));
    // A success starts the count over.
    assert!(login(addr, "PLAIN", "alice", "right").is_ok());
}

#[test]
fn nothing_but_the_sasl_apis_is_served_before_authentication() {
    let (_dir, broker) = broker(&["events"], &[("alice", "right")]);
    let server = sasl_server(broker, false);
    let addr = server.local_addr();
    // ApiVersions is answered...
    let mut c = Client::connect(addr);
    let v: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(v.error_code, 0);
    assert!(
        v.api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::SaslAuthenticate as i16)
    );
    // ... a Metadata request closes the connection unanswered.
    c.send(ApiKey::Metadata, 8, &MetadataRequest::default());
    assert!(c.is_closed());
    // So does one between the handshake and the authentication.
    let mut c = Client::connect(addr);
    let _: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    c.send(
        ApiKey::Produce,
        8,
        &produce_req(1, vec![("events", 0, batch(&["x"]))]),
    );
    assert!(c.is_closed());
    // SaslAuthenticate without a handshake is ILLEGAL_SASL_STATE, then closed.
    let mut c = Client::connect(addr);
    let r: SaslAuthenticateResponse = c.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0right")),
    );
    assert_eq!(r.error_code, ResponseError::IllegalSaslState.code());
    assert!(c.is_closed());
    // Nothing was produced.
    let mut c = login(addr, "PLAIN", "alice", "right").unwrap();
    let r: ListOffsetsResponse = c.call(
        ApiKey::ListOffsets,
        5,
        &ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(s("events")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ]),
    );
    assert_eq!(r.topics[0].partitions[0].offset, 0);
    // SaslHandshake on a PLAINTEXT listener is ILLEGAL_SASL_STATE and the connection
    // stays usable, as in Kafka.
    let plain = server.listener_addr(SecurityProtocol::Plaintext).unwrap();
    let mut c = Client::connect(plain);
    let hs: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(hs.error_code, ResponseError::IllegalSaslState.code());
    assert_eq!(names(&metadata(&mut c, None)), ["events"]);
}

#[test]
fn a_v0_handshake_is_followed_by_bare_tokens() {
    let (_dir, broker) = broker(&["events"], &[("alice", "right")]);
    let server = sasl_server(broker, false);
    let mut c = Client::connect(server.local_addr());
    let hs: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        0,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(hs.error_code, 0);
    let reply = c.raw_call(b"\0alice\0right");
    assert!(reply.is_empty(), "PLAIN's answer is an empty token");
    assert_eq!(names(&metadata(&mut c, None)), ["events"]);
    // A wrong password after a v0 handshake can only be told by closing.
    let mut c = Client::connect(server.local_addr());
    let _: SaslHandshakeResponse = c.call(
        ApiKey::SaslHandshake,
        0,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    c.raw_send(b"\0alice\0wrong");
    assert!(c.is_closed());
}

#[test]
fn acls_decide_what_each_principal_may_do() {
    let (_dir, broker) = broker(
        &[
            "events",
            "hidden",
            "app.public",
            "app.secret",
            "application",
        ],
        &[("admin", "a"), ("reader", "r"), ("writer", "w")],
    );
    let server = sasl_server(broker, true);
    let addr = server.local_addr();
    let mut admin = login(addr, "PLAIN", "admin", "a").unwrap();
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Group, Topic};
    create_acls(
        &mut admin,
        vec![
            binding(
                Topic,
                "events",
                Literal,
                "User:reader",
                Op::Read,
                Perm::Allow,
            ),
            binding(
                Topic,
                "events",
                Literal,
                "User:writer",
                Op::Write,
                Perm::Allow,
            ),
            binding(
                Topic,
                "app.",
                Prefixed,
                "User:reader",
                Op::Read,
                Perm::Allow,
            ),
            binding(
                Topic,
                "app.secret",
                Literal,
                "User:reader",
                Op::Read,
                Perm::Deny,
            ),
            binding(
                Group,
                "readers",
                Literal,
                "User:reader",
                Op::Read,
                Perm::Allow,
            ),
        ],
    );
    assert_eq!(
        produce_code(&mut admin, "events"),
        0,
        "a super user may do anything"
    );

    let mut reader = login(addr, "SCRAM-SHA-512", "reader", "r").unwrap();
    // Read but not Write: consumes, and produces get TOPIC_AUTHORIZATION_FAILED.
    assert_eq!(fetch_code(&mut reader, "events"), 0);
    // A follower's fetch (replica_id >= 0) needs ClusterAction, not Read.
    let follower: FetchResponse = reader.call(
        ApiKey::Fetch,
        11,
        &FetchRequest::default()
            .with_replica_id(BrokerId(2))
            .with_max_wait_ms(0)
            .with_topics(vec![
                fetch_request::FetchTopic::default()
                    .with_topic(TopicName(s("events")))
                    .with_partitions(vec![
                        fetch_request::FetchPartition::default().with_partition(0),
                    ]),
            ]),
    );
    assert_eq!(
        follower.responses[0].partitions[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        produce_code(&mut reader, "events"),
        ResponseError::TopicAuthorizationFailed.code()
    );
    let mut writer = login(addr, "PLAIN", "writer", "w").unwrap();
    assert_eq!(produce_code(&mut writer, "events"), 0);
    assert_eq!(
        fetch_code(&mut writer, "events"),
        ResponseError::TopicAuthorizationFailed.code()
    );
    // Metadata lists only what the principal may describe; a named hidden topic is
    // TOPIC_AUTHORIZATION_FAILED.
    let md = metadata(&mut reader, None);
    assert_eq!(md.topics.len(), 3, "not even internal topics are listed");
    assert_eq!(names(&md), ["app.public", "app.secret", "events"]);
    let md = metadata(&mut reader, Some(&["hidden"]));
    assert_eq!(
        md.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert!(md.topics[0].partitions.is_empty());
    // A prefixed ACL covers matching names only; a deny beats it.
    assert_eq!(fetch_code(&mut reader, "app.public"), 0);
    assert_eq!(
        fetch_code(&mut reader, "application"),
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        fetch_code(&mut reader, "app.secret"),
        ResponseError::TopicAuthorizationFailed.code()
    );
    // Groups: Read on the group.
    let join = |c: &mut Client, group: &str| -> i16 {
        let r: JoinGroupResponse = c.call(
            ApiKey::JoinGroup,
            5,
            &JoinGroupRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![
                    join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(s("range"))
                        .with_metadata(Bytes::from_static(b"\0\0\0\0\0\0\0\0")),
                ]),
        );
        r.error_code
    };
    assert_eq!(
        join(&mut reader, "others"),
        ResponseError::GroupAuthorizationFailed.code()
    );
    assert_ne!(
        join(&mut reader, "readers"),
        ResponseError::GroupAuthorizationFailed.code()
    );
    // Admin APIs need cluster or topic permissions.
    let create: CreateTopicsResponse = reader.call(
        ApiKey::CreateTopics,
        4,
        &CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(s("new")))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]),
    );
    assert_eq!(
        create.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    let cluster: DescribeClusterResponse = reader.call(
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    );
    assert_eq!(
        cluster.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    let acls: DescribeAclsResponse = reader.call(
        ApiKey::DescribeAcls,
        3,
        &DescribeAclsRequest::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_resource_type_filter(ResourceType::Any.code())
            .with_pattern_type_filter(PatternType::Any.code())
            .with_operation(Op::Any.code())
            .with_permission_type(Perm::Any.code()),
    );
    assert_eq!(
        acls.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    // Idempotent producers: a producer id needs IdempotentWrite on the cluster or Write
    // on some topic (KIP-679).
    let pid = |c: &mut Client| -> i16 {
        let r: InitProducerIdResponse = c.call(
            ApiKey::InitProducerId,
            1,
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        );
        r.error_code
    };
    assert_eq!(pid(&mut writer), 0);
    assert_eq!(
        pid(&mut reader),
        ResponseError::ClusterAuthorizationFailed.code()
    );

    // The admin sees every binding, grouped by resource, and deletes by filter.
    let describe_all = |c: &mut Client| -> DescribeAclsResponse {
        c.call(
            ApiKey::DescribeAcls,
            3,
            &DescribeAclsRequest::default()
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_resource_type_filter(ResourceType::Any.code())
                .with_pattern_type_filter(PatternType::Any.code())
                .with_operation(Op::Any.code())
                .with_permission_type(Perm::Any.code()),
        )
    };
    let all = describe_all(&mut admin);
    assert_eq!(all.error_code, 0);
    assert_eq!(all.resources.iter().map(|r| r.acls.len()).sum::<usize>(), 5);
    assert_eq!(all.resources.len(), 4, "events has two bindings");
    let deleted: DeleteAclsResponse = admin.call(
        ApiKey::DeleteAcls,
        3,
        &DeleteAclsRequest::default().with_filters(vec![
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(Topic.code())
                .with_resource_name_filter(Some(s("events")))
                .with_pattern_type_filter(PatternType::Match.code())
                .with_principal_filter(Some(s("User:reader")))
                .with_host_filter(None)
                .with_operation(Op::Any.code())
                .with_permission_type(Perm::Any.code()),
        ]),
    );
    assert_eq!(deleted.filter_results[0].error_code, 0);
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        fetch_code(&mut reader, "events"),
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        describe_all(&mut admin)
            .resources
            .iter()
            .map(|r| r.acls.len())
            .sum::<usize>(),
        4
    );
}

#[test]
fn acls_survive_a_restart_and_need_an_authorizer() {
    let (dir, broker) = broker(&["events"], &[("reader", "r")]);
    let server = sasl_server(broker.clone(), true);
    let plain = server.listener_addr(SecurityProtocol::Plaintext).unwrap();
    // ANONYMOUS (the PLAINTEXT listener's principal) may not alter the cluster.
    let mut anon = Client::connect(plain);
    let r: CreateAclsResponse = anon.call(
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![allow_on_topic(
            "events",
            "User:reader",
            Op::Read,
        )]),
    );
    assert_eq!(
        r.results[0].error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    server.shutdown().unwrap();
    let acls = crate::security::acl::FileAclStore::open(dir.path()).unwrap();
    use crate::security::acl::AclStore;
    acls.add(&[crate::security::AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "events".into(),
        pattern_type: PatternType::Literal,
        principal: "User:reader".into(),
        host: "*".into(),
        operation: Op::Read,
        permission: Perm::Allow,
    }])
    .unwrap();
    drop(acls);
    let server = sasl_server(broker.clone(), true);
    let mut reader = login(server.local_addr(), "PLAIN", "reader", "r").unwrap();
    assert_eq!(fetch_code(&mut reader, "events"), 0);
    server.shutdown().unwrap();
    // Without the authorizer, the ACL APIs answer SECURITY_DISABLED as Kafka's do, and
    // everyone may do everything.
    let server = sasl_server(broker, false);
    let mut reader = login(server.local_addr(), "PLAIN", "reader", "r").unwrap();
    assert_eq!(produce_code(&mut reader, "events"), 0);
    let r: CreateAclsResponse = reader.call(
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![binding(
            ResourceType::Topic,
            "events",
            PatternType::Literal,
            "User:reader",
            Op::Write,
            Perm::Allow,
        )]),
    );
    assert_eq!(
        r.results[0].error_code,
        ResponseError::SecurityDisabled.code()
    );
}

#[test]
fn credential_changes_are_checked_as_kafka_checks_them() {
    let (dir, broker) = broker(&[], &[("alice", "pw")]);
    let server = sasl_server(broker, false);
    let mut c = Client::connect(server.listener_addr(SecurityProtocol::Plaintext).unwrap());
    let upsert = |user: &str, mechanism: i8, iterations: i32| {
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from_static(&[7; 32]))
    };
    let r: AlterUserScramCredentialsResponse = c.call(
        ApiKey::AlterUserScramCredentials,
        0,
        &AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![
                upsert("few", 1, 100),
                upsert("many", 1, 20_000),
                upsert("odd", 9, 4096),
                upsert("twice", 1, 4096),
                upsert("twice", 1, 8192),
            ])
            .with_deletions(vec![
                alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                    .with_name(s("alice"))
                    .with_mechanism(ScramMechanism::Sha256.kafka_type()),
            ]),
    );
    let codes: std::collections::BTreeMap<String, i16> = r
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    assert_eq!(codes["few"], ResponseError::UnacceptableCredential.code());
    assert_eq!(codes["many"], ResponseError::UnacceptableCredential.code());
    assert_eq!(codes["odd"], ResponseError::UnsupportedSaslMechanism.code());
    assert_eq!(codes["twice"], ResponseError::DuplicateResource.code());
    assert_eq!(codes["alice"], ResponseError::ResourceNotFound.code());
    // Nothing was stored; alice still has her one credential.
    let store = FileCredentialStore::open(dir.path()).unwrap();
    assert_eq!(
        store.users(),
        vec![("alice".into(), vec![(ScramMechanism::Sha512, 4096)])]
    );
    let d: DescribeUserScramCredentialsResponse = c.call(
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            describe_user_scram_credentials_request::UserName::default().with_name(s("alice")),
            describe_user_scram_credentials_request::UserName::default().with_name(s("ghost")),
        ])),
    );
    assert_eq!(d.results[0].error_code, 0);
    assert_eq!(
        d.results[1].error_code,
        ResponseError::ResourceNotFound.code()
    );
}

#[test]
fn a_tls_listener_without_certificates_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
        .listen("127.0.0.1:0")
        .add_listener(SecurityProtocol::SaslSsl, "127.0.0.1:0")
        .start()
        .unwrap_err();
    assert!(
        matches!(err, crate::error::Error::InvalidConfig { ref key, .. } if key == "tls"),
        "{err}"
    );
    let missing = crate::security::TlsSettings::from_pem_files(
        dir.path().join("no-cert.pem"),
        dir.path().join("no-key.pem"),
    );
    let other = tempfile::tempdir().unwrap();
    let err = Server::builder(crate::broker::Broker::open(other.path()).unwrap())
        .listen("127.0.0.1:0")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(missing)
        .start()
        .unwrap_err();
    assert!(err.to_string().contains("no-cert.pem"), "{err}");
    std::fs::write(dir.path().join("junk.pem"), "not a certificate").unwrap();
    let junk = crate::security::TlsSettings::from_pem_files(
        dir.path().join("junk.pem"),
        dir.path().join("junk.pem"),
    );
    let third = tempfile::tempdir().unwrap();
    let err = Server::builder(crate::broker::Broker::open(third.path()).unwrap())
        .listen("127.0.0.1:0")
        .security_protocol(SecurityProtocol::Ssl)
        .tls(junk)
        .start()
        .unwrap_err();
    assert!(
        matches!(err, crate::error::Error::InvalidConfig { ref key, .. } if key == "tls-cert"),
        "{err}"
    );
}
